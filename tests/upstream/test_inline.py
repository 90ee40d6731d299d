"""The workloads with a framework's ops inlined compute what the adapter's op table does.

Every op of the op set has an emitter in each framework the scripts are written for;
every built-in workload inlines with no `ops` left; and, run in the framework, the
inlined loss equals the adapter's loss on the same arrays (torch here at tiny, in every
form: the ops inlined, each a small function, the code as written with an op table; JAX and TensorFlow, whose imports and
eager compiles take longer, marked slow)."""

import importlib
import importlib.util
import math

import numpy as np
import pytest

from harness import frameworks, workloads
from harness.ops import OPS
from harness.upstream import emitters, inline, programs


def test_every_op_has_an_emitter_in_every_framework():
    segments = {"checkpoint", "chain"}  # the plain call and loop, written by the inliner itself
    for framework, table in emitters.EMITTERS.items():
        assert set(table) == set(OPS) - segments, framework
        for name, helper in emitters.HELPERS[framework].items():
            assert helper.startswith(f"def {name}("), (framework, name)


@pytest.mark.parametrize("framework", emitters.FRAMEWORKS)
def test_every_workload_inlines_to_plain_framework_code(framework):
    for name in workloads.NAMES:
        source, helpers, _, imports = inline.inlined(workloads.get(name), framework)
        assert "ops." not in source and "ops," not in source, (framework, name)
        assert "def loss(params, inputs, cfg)" in source and "def init(rng, cfg, dtype)" in source
        assert all(h in emitters.HELPERS[framework] for h in helpers)
        assert not any("harness" in line for line in imports)


def test_a_call_is_written_as_its_users_write_it():
    source, _, _, _ = inline.inlined(workloads.get("rnn_fanout"), "torch")
    assert "return torch.tanh(h @ consts['W'] + consts['b'])" in source
    source, _, _, _ = inline.inlined(workloads.get("tiny_nerf"), "jax")
    assert "raw[..., 0:3]" in source and "jnp.cumsum(sd, axis=1)" in source
    source, _, _, _ = inline.inlined(workloads.get("transformer_block"), "tensorflow")
    assert "tf.reduce_mean(x, axis=-1, keepdims=True)" in source


@pytest.mark.parametrize("framework", emitters.FRAMEWORKS)
def test_in_the_functions_form_every_op_is_a_call_of_its_own_small_function(framework):
    for name in workloads.NAMES:
        source, helpers, _, _ = inline.inlined(workloads.get(name), framework, "functions")
        assert "ops." not in source and "ops," not in source, (framework, name)
        called = {h[len(inline.FUNCTION_PREFIX):] for h in helpers if h.startswith(inline.FUNCTION_PREFIX)}
        assert called and called <= set(OPS), (framework, name)
        # the loss calls the functions, as the adapter's loss calls its op table
        assert all(f"{inline.FUNCTION_PREFIX}{op}(" in source for op in called)
        for helper in helpers:
            assert inline.helper_source(framework, helper).startswith(f"def {helper}("), (framework, helper)
    # a reduction's axis is a parameter there: None means every axis at run time, as the adapter's _all_axes
    assert inline.op_function("torch", "mean")[0] == (
        "def op_mean(x, axis=None, keepdims=False):\n"
        "    return torch.mean(x, dim=tuple(range(x.ndim)) if axis is None else axis, keepdim=keepdims)\n")
    with pytest.raises(inline.InlineError, match="form 'compact': one of inlined, functions"):
        inline.inlined(workloads.get("chained_dot"), "torch", "compact")


def test_a_call_that_breaks_the_op_signature_is_one_error_naming_it(tmp_path):
    path = tmp_path / "bad_workload.py"
    path.write_text("def init(rng, cfg, dtype):\n    return {}, {}\n\n\ndef loss(ops, params, inputs, cfg):\n"
                    "    return ops.sum(params['x'], 0, False, 'extra')\n")
    spec = importlib.util.spec_from_file_location("bad_workload", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(inline.InlineError, match=r"ops.sum at line 6: more positional arguments"):
        inline.inlined(module, "torch")


def _namespace(framework, name, form="inlined"):
    """The inlined workload's functions, defined in a namespace with the framework imported."""
    source, helpers, chain, imports = inline.inlined(workloads.get(name), framework, form)
    program = programs.PROGRAMS[framework]
    code = "\n".join(["import math", "import types", "import numpy as np", program.imports,
                      *program.aliases.values(), *imports, emitters.CHAIN,
                      *inline.helper_sources(framework, helpers), source])
    found = {}
    exec(compile(code, f"<{framework} {name}>", "exec"), found)
    return found


def _agree(framework, form="inlined"):
    adapter = frameworks.get(framework).load("cpu", "eager")
    for name in workloads.NAMES:
        problem = workloads.build(name, "tiny", "float32")
        params, inputs = adapter.from_numpy(problem.params), adapter.from_numpy(problem.inputs)
        expected = float(np.asarray(adapter.to_numpy({"v": problem.loss(adapter.ops, params, inputs)})["v"]))
        space = _namespace(framework, name, form)
        cfg = workloads.config(name, "tiny")
        # the inlined init makes the same arrays from the same seed
        again = space["init"](np.random.default_rng(0), cfg, "float32")
        for mine, theirs in zip(again, (problem.params, problem.inputs)):
            assert all(np.array_equal(mine[k], theirs[k]) for k in theirs), name
        table = [space[inline.TABLE]] if form == "table" else []  # the code as written takes the op table
        got = float(np.asarray(adapter.to_numpy({"v": space["loss"](*table, params, inputs, cfg)})["v"]))
        assert math.isclose(got, expected, rel_tol=1e-5, abs_tol=1e-6), (framework, name, got, expected)


@pytest.mark.parametrize("form", inline.FORMS)
def test_the_inlined_torch_loss_is_the_adapters_on_every_workload(form):
    pytest.importorskip("torch")
    _agree("torch", form)


@pytest.mark.slow
@pytest.mark.parametrize("form", inline.FORMS)
@pytest.mark.parametrize("framework", ["jax", "tensorflow"])
def test_the_inlined_loss_is_the_adapters_on_every_workload(framework, form):
    pytest.importorskip(frameworks.get(framework).module)
    _agree(framework, form)


def _same_function(mine, theirs):
    """The same callable: the same builtin, or Python functions that read the same names
    and constants with the same parameters and defaults, nested functions alike (not the
    bytecode: it differs between a .pyc and code compiled from a string)."""
    if not hasattr(theirs, "__code__"):
        return mine is theirs
    return hasattr(mine, "__code__") and mine.__defaults__ == theirs.__defaults__ \
        and _same_code(mine.__code__, theirs.__code__)


def _same_code(a, b):
    def shape(code):
        consts = [c for c in code.co_consts[1:] if not hasattr(c, "co_code")]  # [0]: a docstring or None
        return (code.co_names, code.co_varnames, code.co_freevars, code.co_argcount, code.co_kwonlyargcount,
                code.co_flags & 0x0c, consts)  # 0x0c: *args, **kwargs
    nested = lambda code: [c for c in code.co_consts if hasattr(c, "co_code")]
    return shape(a) == shape(b) and len(nested(a)) == len(nested(b)) \
        and all(_same_code(x, y) for x, y in zip(nested(a), nested(b)))


@pytest.mark.parametrize("framework", emitters.FRAMEWORKS)
def test_the_table_form_calls_the_adapters_own_op_table(framework):
    # The op table is the program Dynamo traces: `tanh=torch.tanh` and `lambda x:
    # torch.tanh(x)` compute the same values, yet torch 2.11.0 keeps ~4 MiB more for the
    # first on shared_linear compiled (docs/releases.md). So the "as gradmem calls it"
    # form must hold the adapter's own entries, every one, not an equivalent.
    adapter = frameworks.get(framework)
    pytest.importorskip(adapter.module)
    adapter = adapter.load("cpu", "eager")
    program = programs.PROGRAMS[framework]
    code = "\n".join(["import types", "import numpy as np", program.imports, *program.aliases.values(),
                      emitters.CHAIN, *inline.helper_sources(framework, [inline.TABLE])])
    space = {}
    exec(compile(code, f"<{framework} op table>", "exec"), space)
    table = space[inline.TABLE]
    for op in OPS:
        assert _same_function(getattr(table, op), getattr(adapter.ops, op)), (framework, op)
    # and a lambda standing in for a builtin is told apart
    assert not _same_function(lambda x: x, getattr(adapter.ops, "exp"))
