"""A transpose read once adds its consumer's cotangent straight into its input's gradient
(backward._through_view): the gradients are the same as when every transpose runs its
own VJP, in every order, also where the consumer cannot add in place (a broadcast)."""

import numpy as np
import pytest

from harness.engine import ops
from harness.engine.api import value_and_grad
from harness.engine.backward import ORDERS
from harness.engine.ledger import Ledger

rng = np.random.default_rng(0)
K, B, D = 4, 3, 5
X = rng.standard_normal((K, B, D))


def per_use(W):
    # W^T taken at every use, as F.linear does: the views the pass goes through
    return ops.sum(ops.stack([ops.sum(ops.tanh(ops.matmul(X[k], ops.permute_dims(W, (1, 0))))) for k in range(K)]))


def transposed_once(Wt):
    # the same loss on W^T given whole: no view to go through
    return ops.sum(ops.stack([ops.sum(ops.tanh(ops.matmul(X[k], Wt))) for k in range(K)]))


@pytest.mark.parametrize("order", ORDERS)
def test_gradients_through_the_view_equal_those_of_the_transposed_weight(order):
    W = rng.standard_normal((D, D))
    _, through = value_and_grad(per_use, order=order)(W)
    _, plain = value_and_grad(transposed_once, order=order)(np.ascontiguousarray(W.T))
    np.testing.assert_allclose(through, plain.T, rtol=1e-12, atol=1e-12)


def test_a_broadcast_consumer_falls_back_to_the_views_own_vjp():
    # W (1, D, D) transposed per use and broadcast over a batch of 2: the matmul's
    # cotangent is made whole and summed, so it cannot be added in place through the view
    W = rng.standard_normal((1, D, D))
    Xb = rng.standard_normal((K, 2, B, D))
    loss = lambda W: ops.sum(ops.stack([ops.sum(ops.tanh(ops.matmul(Xb[k], ops.permute_dims(W, (0, 2, 1)))))
                                        for k in range(K)]))
    loss_t = lambda Wt: ops.sum(ops.stack([ops.sum(ops.tanh(ops.matmul(Xb[k], Wt))) for k in range(K)]))
    _, through = value_and_grad(loss)(W)
    _, plain = value_and_grad(loss_t)(np.ascontiguousarray(W.transpose(0, 2, 1)))
    np.testing.assert_allclose(through, plain.transpose(0, 2, 1), rtol=1e-12, atol=1e-12)


def test_the_transposes_never_run_and_no_second_weight_sized_cotangent_is_live():
    # at sizes where W's (D, D) gradient dwarfs the rest: before, the peak held W's
    # accumulator and the next use's dW^T (2 w); now only the accumulator (w)
    K, B, D = 6, 2, 256
    X = rng.standard_normal((K, B, D)).astype(np.float32)
    W = (rng.standard_normal((D, D)) / 16).astype(np.float32)
    loss = lambda W: ops.sum(ops.stack([ops.sum(ops.tanh(ops.matmul(X[k], ops.permute_dims(W, (1, 0)))))
                                        for k in range(K)]))
    ledger = Ledger()
    value_and_grad(loss, ledger=ledger)(W)
    # every transpose counts as run once (its cotangent went into W's gradient)
    assert ledger.vjp_calls["permute_dims"] == K
    w, activations = D * D * 4, K * B * D * 4
    # the accumulator, the saved tanh outputs, and add_matmul's slab transients (an
    # eighth of a product at most): well under two weight-sized buffers
    assert w <= ledger.peak_bytes <= w + w / 8 + 2 * activations
