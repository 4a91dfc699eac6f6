"""Branch and bound (rcurves/certify/bab.py): the frontier reused across radii, NaN, l_2.

Soundness is checked against brute force on 2-D inputs: every grid point the
network classifies differently from ``y`` is an adversarial example, so the
nearest one bounds the true minimal distance from above, and no certified
radius may exceed it. (The MILP comparisons for l_inf and l_1 are in
test_certify.py.)
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rcurves import certify
from rcurves.certify import bab
from rcurves.certify import bounds as cb
from tests.certify.test_certify import BOX, _grid_search, _random_mlp


def test_a_round_from_a_reused_frontier_never_overflows_and_stays_sound():
    # a deep narrow net and a small budget: rounds that fail leave a full frontier
    net = _random_mlp([2, 32, 32, 32, 3], 11)
    bc = cb.BoundConfig(norm="linf", method="crown", domain=BOX)
    cfg = bab.bab_config(bc, 32, steps=5)
    prep = cb.prepare(net, bc)

    @jax.jit
    def two_rounds(x, y, e1, e2):
        ok1, _, _, f1 = bab.bab_certify_point(prep, x, y, e1, cfg)
        ok2, _, _, f2 = bab.bab_certify_point(prep, x, y, e2, cfg, f1, ~ok1)
        return ok1, f1.whole, jnp.sum(f1.alive), ok2, f2.whole

    xs = np.random.default_rng(3).uniform(-0.9, 0.9, (12, 2)).astype(np.float32)
    ys = np.argmax(np.asarray(net.logits(xs)), 1)
    d = _grid_search(net, xs, ys, "linf")[0]
    reused = 0
    for x, y, di in zip(xs, ys, d):
        for a, b in ((1.02, 0.9), (0.95, 0.85), (0.9, 0.8)):
            ok1, whole1, left, ok2, whole2 = (np.asarray(v).item() for v in
                                             two_rounds(jnp.asarray(x), jnp.int32(y), jnp.float32(a * di),
                                                        jnp.float32(b * di)))
            if a > 1:
                assert not ok1, "certified a ball that holds a misclassified grid point"
            if not ok1 and whole1 and left > 0:
                reused += 1
                assert whole2, "a round that reused a whole frontier overflowed"
    assert reused >= 10   # the reuse path was exercised, often from a large frontier


def test_a_nan_radius_is_never_certified():
    net = _random_mlp([2, 16, 16, 3], 0)
    bc = cb.BoundConfig(norm="linf", method="crown", domain=BOX)
    cfg = bab.bab_config(bc, 16, steps=3)
    prep = cb.prepare(net, bc)
    x = jnp.zeros(2, jnp.float32)
    y = jnp.int32(np.argmax(np.asarray(net.logits(np.zeros((1, 2), np.float32)))))
    ok, _, _, _ = jax.jit(lambda e: bab.bab_certify_point(prep, x, y, e, cfg))(jnp.float32(np.nan))
    assert not bool(ok)


@pytest.mark.parametrize("seed", [0, 3, 5])   # (seed 1: one class on the whole box, no grid adversarial)
def test_l2_radius_never_exceeds_the_nearest_misclassified_grid_point(seed):
    net = _random_mlp([2, 16, 16, 3], seed)
    xs = np.random.default_rng(seed + 10).uniform(-0.8, 0.8, (8, 2)).astype(np.float32)
    ys = np.argmax(np.asarray(net.logits(xs)), 1).astype(np.int32)
    d = _grid_search(net, xs, ys, "l2")[0]
    crown = np.asarray(certify.certified_radius(net, xs, ys, norm="l2", bounds=BOX, upper=1.5 * d))
    r = np.asarray(certify.certified_radius(net, xs, ys, norm="l2", method="bab", budget=64, bounds=BOX,
                                            upper=1.5 * d))   # the cap cannot hide an error
    assert np.all(r <= d * (1 + 1e-5)), (r, d)
    assert np.all(r >= crown)
    assert np.median(r / d) > np.median(crown / d)   # and it helps
