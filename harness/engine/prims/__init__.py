"""Every primitive: its forward on raw arrays and, right below it, its VJP, one module
per family (as HIPS autograd's numpy_vjps.py reads, forward beside VJP):

  elementwise   add sub mul div neg exp log sqrt tanh sigmoid relu sin cos
  linalg        matmul, and the products its VJP makes
  reductions    sum mean max cumsum
  shapes        reshape permute_dims concat stack getitem take where
  nn            softmax logsumexp max_pool2d upsample2d
  conv          conv2d, its two VJPs and the correlation they are made of
  common        what the VJPs share: unbroadcast, reuses_g, adds_into, slabs, Scatter
  operators     Python's operators on traced values (a + b is add)

Each op is one block: the `@primitive` forward, the NumPy helpers and `Fused` kernels
its VJP uses, the VJP maker(s), then the `defvjp` line that joins them.

A VJP maker has the signature ``(out, *args, **params) -> (g -> cotangent)``. It runs
at forward time, and only for arguments that need a gradient. Every array the inner
closure reads goes through ``save(x, why)`` in the maker, where `why` names the formula
that reads it (the ledger notes it against the buffer), and is read back with
``value(saved)``; shapes are taken outside the closure, so that nothing else is kept
(docs/engine.md, "Saved"):

  shapes only   add sub neg sum mean reshape permute_dims getitem concat stack
                upsample2d cumsum
  the output    exp sqrt tanh sigmoid relu softmax
  the input     log sin cos logsumexp, and mul/div/matmul/conv2d save the *other*
                operand, and only when this one needs a gradient
  both          max, max_pool2d, div's divisor (out, y)
  data          take its indices, where its condition (never differentiated)

`save` keeps an array that is a copy, view or sum of arrays kept anyway (a
concatenation, an upsampled map, h - n) as those arrays, and remakes it when the VJP
runs; the `remakeable` prims are the ones whose outputs can be kept that way
(saving.py). max_pool2d saves its input and its output (the neighbouring convs' saved
maps anyway), not indices: its VJP finds each window's first maximum again.

A VJP allocates at most one array per cotangent (docs/engine.md, "Transients"): intermediate
steps are done in place in that array, and two kinds of VJP can do without even that:

  reuses_g    neg mul div exp log sqrt relu (elementwise in g): handed the incoming
              cotangent's own buffer when nothing else reads it any more, they write
              their cotangent over it
  adds_into   matmul logsumexp: handed the gradient the pass has accumulated so far
              for their operand, they add their cotangent into it a slab at a time,
              so a second, third... contribution to a shared weight never exists whole

An elementwise chain inside a VJP is one `Fused`: one kernel launch on CuPy, the
in-place NumPy sequence on the CPU.

Every residual is an operand or the output (or, kept as a recipe, operands of those):
no hidden array is saved, so the ledger, which sees operands and outputs, sees every
saved byte.

Constants are Python scalars or have the cotangent's dtype, so float32 stays float32
under NumPy 2 (NEP 50: a float64 or int64 *array* would upcast). VJPs run on raw
arrays, never on traced values: the backward pass is not recorded.
"""

from harness.engine.prims import common, conv, elementwise, linalg, nn, operators, reductions, shapes  # noqa: F401
from harness.engine.prims.common import Scatter  # noqa: F401
from harness.engine.prims.conv import conv2d  # noqa: F401
from harness.engine.prims.elementwise import add, cos, div, exp, log, mul, neg, relu, sigmoid, sin, sqrt, sub, tanh  # noqa: F401
from harness.engine.prims.linalg import matmul  # noqa: F401
from harness.engine.prims.nn import logsumexp, max_pool2d, softmax, upsample2d  # noqa: F401
from harness.engine.prims.reductions import cumsum, max, mean, sum  # noqa: F401
from harness.engine.prims.shapes import concat, getitem, permute_dims, reshape, stack, take, where  # noqa: F401

#: the modules that define primitives
FAMILIES = (elementwise, linalg, reductions, shapes, nn, conv)
