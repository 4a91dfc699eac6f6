"""The box projection of attacks.cap_geometry: the Newton active-set method is the exact
projection (a float64 KKT reference and the Lagrange dual solved by L-BFGS-B), equals the
bracketing method it replaced, and a warm start changes the path, not the point.

Every test uses batches of the same shape (M cases of dimension D), so each projection
compiles once for the module."""
import math

import jax
import numpy as np
import pytest
from scipy import optimize

from attacks.cap_geometry import cap_box_projector, project_cap_box_bracket, project_cap_box_newton, unit

M, D = 96, 24
_newton = jax.jit(jax.vmap(project_cap_box_newton))
_bracket = jax.jit(jax.vmap(lambda *a: project_cap_box_bracket(*a, tau_iters=30)))
_full = jax.jit(jax.vmap(lambda z, u, e, a, lo, up, w: cap_box_projector(unit(u), e, a, lo, up)(z, w)))


def _project(z, u, eps, alpha, lower, upper, warm=None):
    """The projection the attack uses (Newton, bracketing fallback): (d, ok, coef)."""
    warm = np.full((len(z), 2), np.nan, np.float32) if warm is None else warm
    return tuple(np.asarray(a) for a in _full(z, u, eps, alpha, lower, upper, warm))


def _cases(seed, saturated=0.6):
    """x in [0.05, 0.95]^D with a fraction of coordinates exactly at 0 or 1 (as MNIST pixels);
    random z, u, alpha; eps in the exact regime (below the distance from x to every corner)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.05, 0.95, size=(M, D))
    sat = rng.uniform(size=(M, D)) < saturated
    x[sat] = rng.choice([0.0, 1.0], size=int(sat.sum()))
    z = rng.normal(size=(M, D)) * rng.uniform(0.1, 2.0, size=(M, 1))
    u = rng.normal(size=(M, D))
    alpha = rng.uniform(0.05, math.pi - 0.05, size=M)
    eps = rng.uniform(0.3, 0.95, size=M) * np.linalg.norm(np.minimum(x, 1.0 - x), axis=1)
    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    return f32(z), f32(u), f32(eps), f32(alpha), f32(-x), f32(1.0 - x)


def _angle64(d, uh):
    a = d @ uh
    return math.atan2(np.linalg.norm(d - a * uh), a)


# --- float64 reference: the KKT point by bisection along the arc, exact sphere-box solves


def _sphere_box64(w, lower, upper, eps):
    face = np.where(w > 0, upper, np.where(w < 0, lower, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        st = np.where(w != 0, face / np.where(w != 0, w, 1.0), np.inf)
    sat = st <= 0.0
    for _ in range(w.size + 1):
        rest = np.sum(np.where(sat, 0.0, w * w))
        t = math.sqrt(max(eps ** 2 - np.sum(np.where(sat, face ** 2, 0.0)), 0.0) / rest) if rest > 0 else np.inf
        new = st <= t
        if np.array_equal(new, sat):
            break
        sat = new
    return np.where(st <= t, face, (t if np.isfinite(t) else 0.0) * w)  # t = inf: the box corner


def _reference(z, u, eps, alpha, lower, upper):
    """(d, nonempty): the maximiser of z.d over ball n box n cap, on the sphere (float64)."""
    uh = u / np.linalg.norm(u)
    zh = z / np.linalg.norm(z)
    if _angle64(_sphere_box64(uh, lower, upper, eps), uh) > alpha:
        return None, False  # the box leaves no point of the sphere in the cap
    d0 = _sphere_box64(zh, lower, upper, eps)
    if _angle64(d0, uh) <= alpha:
        return d0, True
    c = zh @ uh
    e = (uh - c * zh) / np.linalg.norm(uh - c * zh)
    lo_t, hi_t = 0.0, math.atan2(np.linalg.norm(uh - c * zh), c)
    for _ in range(60):
        t = 0.5 * (lo_t + hi_t)
        inside = _angle64(_sphere_box64(math.cos(t) * zh + math.sin(t) * e, lower, upper, eps), uh) <= alpha
        lo_t, hi_t = (lo_t, t) if inside else (t, hi_t)
    return _sphere_box64(math.cos(hi_t) * zh + math.sin(hi_t) * e, lower, upper, eps), True


def _dual_reference(zh, uh, eps, c, lower, upper):
    """max z.d over ball n box n cap through its Lagrange dual (float64, L-BFGS-B).

    g(lam, mu) = max_{d in box} z.d - lam (||d||^2 - eps^2) / 2 + mu (u.d - eps c) is
    convex, with maximiser d = clip((z + mu u) / lam) and gradient
    (-(||d||^2 - eps^2) / 2, u.d - eps c); strong duality gives the primal point.
    An independent route to the answer: no active sets, no arc, no root finding.
    """
    def g(v):
        lam, mu = math.exp(v[0]), v[1]
        d = np.clip((zh + mu * uh) / lam, lower, upper)
        val = zh @ d - lam * (d @ d - eps * eps) / 2 + mu * (uh @ d - eps * c)
        return val, np.array([-lam * (d @ d - eps * eps) / 2, uh @ d - eps * c])

    res = optimize.minimize(g, np.zeros(2), jac=True, method="L-BFGS-B", bounds=[(-30, 30), (0, None)],
                            options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 2000})
    lam, mu = math.exp(res.x[0]), res.x[1]
    return np.clip((zh + mu * uh) / lam, lower, upper)


@pytest.mark.parametrize("saturated", [0.0, 0.8])
def test_projection_is_the_float64_kkt_point(saturated):
    case = _cases(1 + int(10 * saturated), saturated)
    z, u, eps, alpha, lower, upper = case
    dn, cert = (np.asarray(a) for a in _newton(*case))
    d, ok, _ = _project(*case)
    n_nonempty = 0
    for i in range(M):
        ref, nonempty = _reference(*(a[i].astype(np.float64) for a in case))
        if not nonempty:
            assert not cert[i] and not ok[i]  # an empty set is never certified
            continue
        n_nonempty += 1
        assert ok[i]
        # Tolerance: float32 sums over D coordinates (~1e-6 relative).
        np.testing.assert_allclose(d[i], ref, atol=2e-5 * eps[i])
        if cert[i]:
            np.testing.assert_allclose(dn[i], ref, atol=2e-5 * eps[i])
    assert n_nonempty >= 40
    # The certificate holds for nearly every case; the rest (an active set
    # that cycles) took the bracketing fallback, checked above as well.
    assert cert.sum() >= 0.95 * n_nonempty


def test_projection_matches_the_lagrange_dual():
    case = _cases(7, saturated=0.3)
    z, u, eps, alpha, lower, upper = case
    dn, cert = (np.asarray(a, np.float64) for a in _newton(*case))
    assert cert.sum() >= 40
    for i in np.flatnonzero(cert)[:40]:
        uh = u[i].astype(np.float64) / np.linalg.norm(u[i])
        ref = _dual_reference(z[i].astype(np.float64) / np.linalg.norm(z[i]), uh, float(eps[i]),
                              math.cos(float(alpha[i])), lower[i].astype(np.float64), upper[i].astype(np.float64))
        np.testing.assert_allclose(dn[i], ref, atol=1e-4 * float(eps[i]))


def test_projection_equals_the_bracketing_method_it_replaced():
    case = _cases(11, saturated=0.7)
    z, u, eps, alpha, lower, upper = case
    dn, cert = (np.asarray(a) for a in _newton(*case))
    db, okb = (np.asarray(a) for a in _bracket(*case))
    assert 30 <= okb.sum() <= M - 10  # some caps leave no point in the box
    for i in np.flatnonzero(okb | cert):
        uh = u[i].astype(np.float64) / np.linalg.norm(u[i])
        for d in ([db[i]] if okb[i] else []) + ([dn[i]] if cert[i] else []):
            assert _angle64(d.astype(np.float64), uh) <= alpha[i] + 2e-6
            assert abs(np.linalg.norm(d.astype(np.float64)) - eps[i]) <= 2e-6 * eps[i]
    assert not cert[~okb].any()
    assert cert.sum() >= okb.sum() - 2
    both = cert & okb
    # 30 Illinois steps converge to ~1e-6 rad; the Newton point is exact.
    np.testing.assert_allclose(dn[both], db[both], atol=1e-4 * float(eps.max()))


def test_warm_start_changes_the_path_not_the_point():
    rng = np.random.default_rng(13)
    case = _cases(13, saturated=0.8)
    z = case[0]
    cold, ok_cold, _ = _project(*case)
    # Warm from the coefficients of a nearby point (as the previous PGD step
    # gives) and from random numbers.
    z2 = z + 0.05 * rng.normal(size=z.shape).astype(np.float32) * np.linalg.norm(z, axis=1, keepdims=True)
    coef = _project(z2, *case[1:])[2]
    for warm in (coef, rng.normal(size=(M, 2)).astype(np.float32)):
        d, ok, _ = _project(*case, warm=warm)
        np.testing.assert_array_equal(ok, ok_cold)
        assert ok.sum() >= 40
        np.testing.assert_allclose(d[ok], cold[ok], atol=2e-5 * float(case[2].max()))


def test_degenerate_inputs_give_feasible_points():
    """z = 0, z along u, z anti-parallel to u, alpha = pi, a tiny alpha: on the sphere, in the cap
    and the box, certified."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0.4, 0.6, size=D)
    u = rng.normal(size=D)
    cases = [(np.zeros(D), 1.0), (2.0 * u, 0.5), (-3.0 * u, 0.7), (-u, math.pi), (u, 1e-3), (-u, 0.2)]
    cases += [(rng.normal(size=D), rng.uniform(0.1, 3.0)) for _ in range(M - len(cases))]
    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    d, ok, _ = _project(f32([c[0] for c in cases]), f32(np.tile(u, (M, 1))), f32(np.full(M, 0.3)),
                        f32([c[1] for c in cases]), f32(np.tile(-x, (M, 1))), f32(np.tile(1 - x, (M, 1))))
    assert ok.all()
    d = d.astype(np.float64)
    uh = u / np.linalg.norm(u)
    for i, (_, al) in enumerate(cases):
        assert abs(np.linalg.norm(d[i]) - 0.3) <= 1e-6
        assert _angle64(d[i], uh) <= al + 2e-6
        assert np.all(d[i] >= -x - 1e-7) and np.all(d[i] <= 1 - x + 1e-7)
    np.testing.assert_allclose(d[0], 0.3 * uh, atol=1e-6)  # z = 0: the cap centre
    np.testing.assert_allclose(d[1], 0.3 * uh, atol=1e-6)  # z along u
