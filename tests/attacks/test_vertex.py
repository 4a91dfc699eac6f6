"""Vertex-constrained l_inf PGD (attacks.vertex): exact constraints and the linear optimum."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attacks.vertex import m_effective, ranks, vertex_pgd, vertex_pgd_result
from rcurves.exact.linear import linear_logits_fn


def _problem(n, d, seed, lo=-2.0, hi=2.0):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d).astype(np.float32)
    x = rng.uniform(lo, hi, size=(n, d)).astype(np.float32)
    y = (x @ w > 0).astype(np.int32)
    u = rng.choice([-1.0, 1.0], size=(n, d)).astype(np.float32)
    sigma = np.stack([rng.permutation(d) for _ in range(n)]).astype(np.int32)
    m = rng.integers(0, d + 1, size=n).astype(np.int32)
    m[0], m[1] = 0, d
    return w, x, y, u, sigma, m


def _free(sigma, m):
    rank = np.argsort(sigma, axis=1)
    return rank < m[:, None]


def test_fixed_coordinates_are_exact_and_free_ones_stay_in_the_ball():
    n, d, eps = 16, 9, 0.3
    w, x, y, u, sigma, m = _problem(n, d, 0)
    f = linear_logits_fn(w, 0.0)
    res = vertex_pgd_result(f, x, y, eps, u, sigma, m, steps=8, key=jax.random.PRNGKey(0))
    xa = np.asarray(res.x_adv)
    free = _free(sigma, m)
    e32 = np.float32(eps)
    fixed_target = x + e32 * u  # float32, the same arithmetic as the attack
    assert np.array_equal(xa[~free], fixed_target[~free])
    assert np.all(xa[free] >= (x - e32)[free]) and np.all(xa[free] <= (x + e32)[free])
    assert np.asarray(res.feasible).all()
    # The attack solves the linear problem: free coordinates at -sign(s) eps sign(w).
    s = x @ w
    best = s + eps * np.sum(np.where(free, -np.sign(s)[:, None] * np.abs(w), w * u), axis=1)
    got = np.asarray(xa, np.float64) @ w
    np.testing.assert_allclose(got, best, atol=1e-4 * np.abs(w).sum())
    adv = np.where(s > 0, best <= 0, best > 0)
    clear = np.abs(best) > 1e-3
    np.testing.assert_array_equal(np.asarray(res.adversarial)[clear], adv[clear])
    assert adv.any() and (~adv).any()
    # vertex_pgd returns the same x_adv (same program).
    xa2 = vertex_pgd(f, x, y, eps, u, sigma, m, steps=8, key=jax.random.PRNGKey(0))
    np.testing.assert_array_equal(np.asarray(xa2), xa)


def test_with_bounds_fixed_coordinates_sit_on_the_clipped_vertex():
    n, d, eps = 8, 7, 0.4
    w, x, y, u, sigma, m = _problem(n, d, 1, lo=0.0, hi=1.0)
    x[:, 0] = 0.0  # saturated pixels
    x[:, 1] = 1.0
    res = vertex_pgd_result(linear_logits_fn(w, -1.0), x, y, eps, u, sigma, m, steps=6,
                            key=jax.random.PRNGKey(1), bounds=(0.0, 1.0))
    xa = np.asarray(res.x_adv)
    free = _free(sigma, m)
    e32 = np.float32(eps)
    vertex = np.clip(x + e32 * u, 0.0, 1.0)
    assert np.array_equal(xa[~free], vertex[~free])
    lo_b = np.maximum(0.0, x - e32)
    hi_b = np.minimum(1.0, x + e32)
    assert np.all(xa[free] >= lo_b[free]) and np.all(xa[free] <= hi_b[free])
    assert np.all(xa >= 0.0) and np.all(xa <= 1.0)
    assert np.asarray(res.feasible).all()


def test_m_effective_counts_the_last_coordinate_off_the_vertex():
    d = 6
    x = jnp.zeros(d)
    u = jnp.ones(d)
    sigma = jnp.asarray([3, 0, 5, 1, 4, 2])
    rank = ranks(sigma)
    np.testing.assert_array_equal(np.asarray(rank)[np.asarray(sigma)], np.arange(d))
    xa = x + 0.5 * u
    assert int(m_effective(xa, x, 0.5, u, rank, None)) == 0
    xa = xa.at[5].set(0.1)  # sigma position 2
    assert int(m_effective(xa, x, 0.5, u, rank, None)) == 3
    xa = xa.at[2].set(-0.5)  # sigma position 5
    assert int(m_effective(xa, x, 0.5, u, rank, None)) == 6


def test_vertex_pgd_rejects_bad_input():
    f = linear_logits_fn(np.ones(4, np.float32), 0.0)
    x = np.zeros((2, 4), np.float32)
    y = np.zeros(2, np.int32)
    u = np.ones(4, np.float32)
    sig = np.arange(4)
    key = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match="u"):
        vertex_pgd(f, x, y, 0.1, 0.5 * u, sig, 2, steps=2, key=key)
    with pytest.raises(ValueError, match="sigma"):
        vertex_pgd(f, x, y, 0.1, u, np.array([0, 0, 1, 2]), 2, steps=2, key=key)
    with pytest.raises(ValueError, match="sigma"):
        vertex_pgd(f, x, y, 0.1, u, np.arange(5), 2, steps=2, key=key)
    with pytest.raises(ValueError, match="m"):
        vertex_pgd(f, x, y, 0.1, u, sig, 5, steps=2, key=key)
    with pytest.raises(ValueError, match="m"):
        vertex_pgd(f, x, y, 0.1, u, sig, 1.5, steps=2, key=key)
