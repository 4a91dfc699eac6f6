"""Cap-constrained l_2 PGD (attacks.cap): exact projection and checked constraints."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attacks.cap import (
    cap_angle,
    cap_feasible,
    cap_pgd,
    cap_pgd_result,
    project_cap,
    project_cap_box,
    unit,
)
from rcurves.exact.linear import linear_logits_fn

_proj = jax.jit(jax.vmap(project_cap))
_proj_box = jax.jit(jax.vmap(project_cap_box))


def _angle64(d, u):
    d = np.asarray(d, np.float64)
    u = np.asarray(u, np.float64) / np.linalg.norm(u)
    a = d @ u
    return math.atan2(np.linalg.norm(d - a * u), a)


def _fibonacci_sphere(n):
    i = np.arange(n) + 0.5
    phi = np.arccos(1 - 2 * i / n)
    th = np.pi * (1 + 5 ** 0.5) * i
    return np.stack([np.cos(th) * np.sin(phi), np.sin(th) * np.sin(phi), np.cos(phi)], 1)


def _random_cases(rng, m, d):
    z = rng.normal(size=(m, d)) * rng.uniform(0.05, 3.0, size=(m, 1))
    u = rng.normal(size=(m, d))
    # A third of the cases point away from u (delta.u < 0), one is exactly -u, one is 0.
    flip = (np.arange(m) % 3 == 0) & (np.sum(z * u, 1) > 0)
    z[flip] = -z[flip]
    z[1] = -2.0 * u[1]
    z[2] = 0.0
    alpha = rng.uniform(0, math.pi, size=m)
    alpha[3], alpha[4], alpha[5] = 0.0, math.pi, math.pi / 2
    eps = rng.uniform(0.1, 2.0, size=m)
    f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    return f32(z), f32(u), f32(eps), f32(alpha)


@pytest.mark.parametrize("d", [3, 17])
def test_projection_on_sphere_inside_cap_and_idempotent(d):
    rng = np.random.default_rng(d)
    z, u, eps, alpha = _random_cases(rng, 300, d)
    assert np.sum(np.sum(np.asarray(z) * np.asarray(u), 1) < 0) > 50
    p = np.asarray(_proj(z, u, eps, alpha))
    nrm = np.linalg.norm(p.astype(np.float64), axis=1)
    # float32 round-off of the trigonometric construction: up to ~17 ulps (2.03e-6) with jaxlib 0.10.0's
    # codegen, ~16 with 0.10.2's; 4e-6 is ~34 ulps
    np.testing.assert_allclose(nrm, np.asarray(eps), rtol=4e-6)
    ang = np.array([_angle64(p[i], u[i]) for i in range(len(p))])
    assert np.all(ang <= np.asarray(alpha) + 2e-5)
    pp = np.asarray(_proj(jnp.asarray(p), u, eps, alpha))
    np.testing.assert_allclose(pp, p, atol=2e-6 * float(np.max(eps)))
    # z = 0: every point of the cap is equally near; the cap centre is returned.
    np.testing.assert_allclose(p[2], np.asarray(eps[2] * unit(u[2])), atol=1e-6)


def test_projection_is_nearest_point_dense_3d():
    rng = np.random.default_rng(0)
    sphere = _fibonacci_sphere(150_000)
    z, u, eps, alpha = _random_cases(rng, 300, 3)  # the batch shape of the test above
    p = np.asarray(_proj(z, u, eps, alpha), np.float64)
    for i in range(60):
        uh = np.asarray(u[i], np.float64) / np.linalg.norm(u[i])
        cand = float(eps[i]) * np.vstack([sphere[sphere @ uh >= math.cos(float(alpha[i]))], uh])
        zi = np.asarray(z[i], np.float64)
        dense = np.min(np.linalg.norm(cand - zi, axis=1))
        ours = np.linalg.norm(p[i] - zi)
        # Dense points are feasible, so ours can't be worse than them; the grid
        # spacing (~0.007 eps) bounds how much better the true optimum can be.
        assert ours <= dense + 1e-5, (i, ours, dense)
        assert ours >= dense - 0.01 * float(eps[i]), (i, ours, dense)


def _min_angle_in_box(uh, lower, upper, eps):
    """Smallest angle with u of a point of the eps-sphere in the box (float64).

    On the sphere the angle is smallest where u.d is largest; the maximiser of
    u.d over ball n box is clip(t u) with t set by bisection to norm eps.
    """
    lo_t, hi_t = 0.0, 1e6
    for _ in range(200):
        t = 0.5 * (lo_t + hi_t)
        if np.linalg.norm(np.clip(t * uh, lower, upper)) < eps:
            lo_t = t
        else:
            hi_t = t
    d = np.clip(hi_t * uh, lower, upper)
    return _angle64(d, uh) if abs(np.linalg.norm(d) - eps) < 1e-9 else np.inf


def test_box_projection_is_nearest_point_dense_3d():
    """With a box that every eps-sphere point of the search leaves room for (exact regime)."""
    rng = np.random.default_rng(1)
    sphere = _fibonacci_sphere(150_000)
    m = 200
    x = rng.uniform(0.3, 0.7, size=(m, 3))
    z, u, _, alpha = _random_cases(rng, m, 3)
    eps = rng.uniform(0.1, 0.5, size=m)
    lower, upper = -x, 1.0 - x
    f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    p = np.asarray(_proj_box(z, u, f32(eps), alpha, f32(lower), f32(upper)), np.float64)
    n_cmp = 0
    for i in range(60):
        uh = np.asarray(u[i], np.float64) / np.linalg.norm(u[i])
        pts = eps[i] * sphere
        ok = (sphere @ uh >= math.cos(float(alpha[i])))
        ok &= np.all(pts >= lower[i], 1) & np.all(pts <= upper[i], 1)
        if _min_angle_in_box(uh, lower[i], upper[i], eps[i]) > float(alpha[i]):
            continue  # the box leaves no point of the sphere in this cap
        assert abs(np.linalg.norm(p[i]) - eps[i]) <= 1e-5 * eps[i]
        assert _angle64(p[i], uh) <= float(alpha[i]) + 1e-4
        assert np.all(p[i] >= lower[i] - 1e-6) and np.all(p[i] <= upper[i] + 1e-6)
        # i == 1 is z = -2u: with a box, every feasible point of the rim is
        # nearest and the relaxation's maximiser is off the sphere; the
        # projection returns a feasible point but not necessarily on the rim.
        if ok.sum() < 10 or i == 1:
            continue
        n_cmp += 1
        zi = np.asarray(z[i], np.float64)
        dense = np.min(np.linalg.norm(pts[ok] - zi, axis=1))
        ours = np.linalg.norm(p[i] - zi)
        assert ours <= dense + 1e-4, (i, ours, dense)
        assert ours >= dense - 0.01 * eps[i], (i, ours, dense)
    assert n_cmp > 40


def test_box_projection_never_claims_an_infeasible_point():
    """x near corners, large eps: the check only accepts points that satisfy everything."""
    rng = np.random.default_rng(2)
    m, d = 200, 3  # the batch shape of the test above (one compilation)
    x = rng.choice([0.0, 0.05, 0.5, 0.95, 1.0], size=(m, d))
    z, u, _, alpha = _random_cases(rng, m, d)
    eps = rng.uniform(0.2, 1.5, size=m)
    f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    xa = f32(x) + _proj_box(z, u, f32(eps), alpha, f32(-x), f32(1.0 - x))
    xa = jnp.clip(xa, 0.0, 1.0)
    ok = np.asarray(jax.vmap(
        lambda a, b, c, e, al: cap_feasible(a, b, unit(c), e, al, (0.0, 1.0), 1e-4)
    )(xa, f32(x), u, f32(eps), alpha))
    xa = np.asarray(xa, np.float64)
    assert 0 < ok.sum() < m  # both outcomes occur in this regime
    for i in np.flatnonzero(ok):
        delta = xa[i] - np.asarray(f32(x[i]), np.float64)
        assert abs(np.linalg.norm(delta) - eps[i]) <= 2e-4 * eps[i]
        assert _angle64(delta, u[i]) <= float(alpha[i]) + 2e-4
        assert np.all(xa[i] >= 0.0) and np.all(xa[i] <= 1.0)


def _linear_problem(d, n, seed):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x @ w > 0).astype(np.int32)
    return w, x, y


def test_cap_pgd_reaches_the_exact_optimum_on_a_linear_model():
    d, n = 12, 24
    w, x, y = _linear_problem(d, n, 3)
    rng = np.random.default_rng(4)
    u = rng.normal(size=(n, d)).astype(np.float32)
    alpha = rng.uniform(0.05, 3.0, size=n).astype(np.float32)
    eps = 1.5
    f = linear_logits_fn(w, 0.0)
    res = cap_pgd_result(f, x, y, eps, u, alpha, steps=15, key=jax.random.PRNGKey(0))
    xa = np.asarray(res.x_adv, np.float64)
    delta = xa - x
    assert np.asarray(res.feasible).all()
    np.testing.assert_allclose(np.linalg.norm(delta, axis=1), eps, rtol=1e-5)
    for i in range(n):
        assert _angle64(delta[i], u[i]) <= alpha[i] + 1e-4
    # The best the cap allows: move towards v = -sign(s) w/||w|| as far as the cap lets.
    s = x @ w
    v = -np.sign(s)[:, None] * w / np.linalg.norm(w)
    phi = np.array([_angle64(v[i], u[i]) for i in range(n)])
    best_shift = eps * np.linalg.norm(w) * np.cos(np.maximum(0.0, phi - alpha))
    shift = -np.sign(s) * (delta @ w)
    np.testing.assert_allclose(shift, best_shift, atol=2e-3 * eps * np.linalg.norm(w))
    adv_exact = best_shift >= np.abs(s)
    clear = np.abs(best_shift - np.abs(s)) > 1e-2
    assert adv_exact[clear].any() and (~adv_exact[clear]).any()
    np.testing.assert_array_equal(np.asarray(res.adversarial)[clear], adv_exact[clear])
    # cap_pgd is the same program returning x_adv only; here with one shared u
    # and a scalar alpha (broadcast to the same shapes, so no recompilation).
    xa2 = np.asarray(cap_pgd(f, x, y, eps, u[0], 0.7, steps=15, key=jax.random.PRNGKey(1)), np.float64)
    assert xa2.shape == (n, d)
    for i in range(n):
        assert _angle64(xa2[i] - x[i], u[0]) <= 0.7 + 1e-4
        assert abs(np.linalg.norm(xa2[i] - x[i]) - eps) <= 1e-5 * eps


def test_cap_pgd_with_bounds_satisfies_everything_or_says_so():
    d, n = 8, 6
    rng = np.random.default_rng(5)
    w = rng.normal(size=d).astype(np.float32)
    x = rng.uniform(0.0, 1.0, size=(n, d)).astype(np.float32)
    x[0] = 0.0  # a corner; the cap around -1 (outside the box) is empty for small alpha
    y = (x @ w - 1.0 > 0).astype(np.int32)
    u = rng.normal(size=(n, d)).astype(np.float32)
    u[0] = -1.0
    alpha = np.full(n, 1.2, np.float32)
    alpha[0] = 0.2
    res = cap_pgd_result(linear_logits_fn(w, -1.0), x, y, 0.8, u, alpha, steps=10,
                         key=jax.random.PRNGKey(2), bounds=(0.0, 1.0))
    xa = np.asarray(res.x_adv)
    feas = np.asarray(res.feasible)
    assert not feas[0] and not np.asarray(res.adversarial)[0]
    np.testing.assert_array_equal(xa[0], x[0])  # infeasible rows come back as x, flagged
    assert feas[1:].all()
    assert np.all(xa >= 0.0) and np.all(xa <= 1.0)
    delta = xa.astype(np.float64) - x
    for i in np.flatnonzero(feas):
        assert abs(np.linalg.norm(delta[i]) - 0.8) <= 1e-4 * 0.8
        assert _angle64(delta[i], u[i]) <= alpha[i] + 1e-4


def test_cap_pgd_rejects_bad_input():
    f = linear_logits_fn(np.ones(4, np.float32), 0.0)
    x = np.zeros((2, 4), np.float32)
    y = np.zeros(2, np.int32)
    u = np.ones(4, np.float32)
    key = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match="alpha"):
        cap_pgd(f, x, y, 1.0, u, 4.0, steps=2, key=key)
    with pytest.raises(ValueError, match="alpha"):
        cap_pgd(f, x, y, 1.0, u, -0.1, steps=2, key=key)
    with pytest.raises(ValueError, match="u"):
        cap_pgd(f, x, y, 1.0, np.zeros(4, np.float32), 1.0, steps=2, key=key)
    with pytest.raises(ValueError, match="u"):
        cap_pgd(f, x, y, 1.0, np.ones(3, np.float32), 1.0, steps=2, key=key)
    with pytest.raises(ValueError, match="eps"):
        cap_pgd(f, x, y, -1.0, u, 1.0, steps=2, key=key)
    with pytest.raises(ValueError, match="steps"):
        cap_pgd(f, x, y, 1.0, u, 1.0, steps=0, key=key)


def test_cap_angle_is_accurate_near_zero_and_pi():
    u = jnp.asarray([1.0, 0.0, 0.0])
    for t in [1e-4, 0.3, math.pi - 1e-4]:
        d = jnp.asarray([math.cos(t), math.sin(t), 0.0])
        assert abs(float(cap_angle(d, u)) - t) < 1e-6
