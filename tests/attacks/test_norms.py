"""Projections, steps and random starts of attacks.norms against brute force."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from attacks import norms


def _l1_projection_reference(v, eps):
    """Projection onto the l1 ball by bisection on the soft threshold (float64)."""
    if np.abs(v).sum() <= eps:
        return v
    lo, hi = 0.0, np.abs(v).max()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.maximum(np.abs(v) - mid, 0).sum() > eps:
            lo = mid
        else:
            hi = mid
    return np.sign(v) * np.maximum(np.abs(v) - hi, 0)


@pytest.mark.parametrize("seed", range(5))
def test_project_l1_is_exact(seed):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(7, 3)) * rng.uniform(0.1, 3)
    eps = rng.uniform(0.1, 4)
    p = np.asarray(norms.project_l1(jnp.asarray(v, jnp.float32), eps))
    np.testing.assert_allclose(p, _l1_projection_reference(v, eps), atol=1e-5)
    assert np.abs(p).sum() <= eps * (1 + 1e-5)
    # idempotent, and nearer to v than random feasible points
    p2 = np.asarray(norms.project_l1(jnp.asarray(p), eps))
    np.testing.assert_allclose(p2, p, atol=1e-6)
    for _ in range(50):
        q = rng.laplace(size=v.shape)
        q *= eps * rng.uniform() / np.abs(q).sum()
        assert np.linalg.norm(v - p) <= np.linalg.norm(v - q) + 1e-6


def test_project_l1_matches_qp_in_small_dimension():
    rng = np.random.default_rng(9)
    v = rng.normal(size=4)
    eps = 0.7
    res = minimize(lambda z: np.sum((z - v) ** 2), np.zeros(4),
                   constraints=[{"type": "ineq", "fun": lambda z: eps - np.abs(z).sum()}], method="SLSQP")
    p = np.asarray(norms.project_l1(jnp.asarray(v, jnp.float32), eps))
    np.testing.assert_allclose(p, res.x, atol=1e-4)


def test_project_l2_and_linf():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(5, 5)).astype(np.float32) * 3
    p2 = np.asarray(norms.project_l2(jnp.asarray(v), 1.5))
    np.testing.assert_allclose(np.linalg.norm(p2), 1.5, rtol=1e-6)
    np.testing.assert_allclose(p2 / np.linalg.norm(p2), v / np.linalg.norm(v), rtol=1e-5)
    pinf = np.asarray(norms.project_linf(jnp.asarray(v), 0.5))
    np.testing.assert_array_equal(pinf, np.clip(v, -0.5, 0.5))
    small = v / np.linalg.norm(v) * 0.3
    np.testing.assert_allclose(np.asarray(norms.project_l2(jnp.asarray(small), 1.0)), small, rtol=1e-6)


def test_steps_have_the_requested_size_and_are_steepest():
    rng = np.random.default_rng(1)
    g = jnp.asarray(rng.normal(size=(10, 10)), jnp.float32)
    s_inf = np.asarray(norms.step_linf(g, 0.1))
    np.testing.assert_allclose(np.abs(s_inf), 0.1)
    s2 = np.asarray(norms.step_l2(g, 0.1))
    np.testing.assert_allclose(np.linalg.norm(s2), 0.1, rtol=1e-6)
    s1 = np.asarray(norms.make_step_l1(0.99)(g, 0.1))
    np.testing.assert_allclose(np.abs(s1).sum(), 0.1, rtol=1e-6)
    # the exact l1 steepest ascent direction puts all mass on argmax |g|
    assert np.count_nonzero(s1) == 1 and np.argmax(np.abs(s1)) == np.argmax(np.abs(np.asarray(g)))
    # each step maximises <g, s> over its ball (Hoelder): <g,s> = size * ||g||_dual
    gn = np.asarray(g)
    np.testing.assert_allclose((gn * s_inf).sum(), 0.1 * np.abs(gn).sum(), rtol=1e-5)
    np.testing.assert_allclose((gn * s2).sum(), 0.1 * np.linalg.norm(gn), rtol=1e-5)
    np.testing.assert_allclose((gn * s1).sum(), 0.1 * np.abs(gn).max(), rtol=1e-5)


@pytest.mark.parametrize("name", ["linf", "l2", "l1"])
def test_random_starts_lie_in_the_ball(name):
    geo = norms.geometry(name)
    keys = jax.random.split(jax.random.PRNGKey(0), 200)
    deltas = jax.vmap(lambda k: geo.random(k, (6,), 0.5))(keys)
    n = np.asarray(jax.vmap(geo.norm)(deltas))
    assert np.all(n <= 0.5 * (1 + 1e-6))
    assert n.max() > 0.35  # not collapsed at the centre


def test_clip_box_keeps_ball_membership():
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 1, size=(8,)).astype(np.float32)
    for name in ["linf", "l2", "l1"]:
        geo = norms.geometry(name)
        delta = geo.project(jnp.asarray(rng.normal(size=8), jnp.float32), 0.8)
        d2 = np.asarray(norms.project_perturbation(geo, jnp.asarray(x), delta, 0.8, (0.0, 1.0)))
        assert float(geo.norm(jnp.asarray(d2))) <= 0.8 * (1 + 1e-6)
        assert (x + d2).min() >= 0 and (x + d2).max() <= 1
