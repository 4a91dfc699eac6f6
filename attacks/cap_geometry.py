"""Geometry of the spherical cap (paper 004, eq. 6, App. A): angles and exact projections.

The admissible perturbations of one point ``x`` for a direction ``u`` and an
angle ``alpha`` (radians, in ``[0, pi]``) are

    C(u, alpha) = { d : ||d||_2 = eps,  d . u_hat >= eps cos(alpha) },

the spherical cap ``Sc(u, alpha)`` of paper 004 scaled by ``eps``, and with an
input domain also ``lower <= d <= upper`` (``lower = lo - x <= 0 <= upper =
hi - x``). Everything here acts on one perturbation of any shape; batching is
by ``vmap``.

**Unbounded** (:func:`project_cap`). For ``d`` on the sphere,
``||z - d||^2 = ||z||^2 + eps^2 - 2 z.d``, so the nearest point of ``C`` to
``z`` maximises ``z.d``. Writing ``z = a u_hat + p`` (``p . u_hat = 0``) and
``phi = angle(z, u) = atan2(||p||, a)``, the answer is

    P(z) = eps (cos(theta) u_hat + sin(theta) p/||p||),  theta = min(phi, alpha),

Appendix A's construction written so that it is exact for every input
(``z . u < 0``, ``alpha >= pi/2``, ``z`` parallel to ``-u``: a fixed
orthogonal ``v``; ``z = 0``: ``eps u_hat``). The printed eqs. 17-20 are not:
they rescale to ``min(eps, ||z||)`` (off the sphere) and their ``r`` does not
give the angle ``alpha`` unless ``z . u_hat = ||z|| cos(alpha)``.

**With a box** (:func:`project_cap_box`). For the convex relaxation ``K =
{||d|| <= eps} n box n {d.u_hat >= eps cos(alpha)}``, a maximiser of ``z.d``
over ``K`` that lies on the sphere is the nearest point of ``C n box`` to
``z`` (same identity; ``C n box`` is the part of ``K`` on the sphere). ``K``
is convex and the objective linear, so the KKT conditions are sufficient:
with ball multiplier ``lambda > 0``, cap multiplier ``mu >= 0`` and the box
separable,

    d = clip(s z_hat + m u_hat, lower, upper),   s > 0, m >= 0,        (KKT)
    ||d|| = eps,   d.u_hat >= eps cos(alpha),   m (d.u_hat - eps cos(alpha)) = 0.

Any ``(s, m)`` meeting these is *the* answer. Write ``z_hat = c u_hat + p``
(``c = z_hat.u_hat``) and ``v = a p + b u_hat`` (``a = s``, ``b = s c + m``).
For a fixed *active set* (which coordinates of ``v`` are clipped, and to
which face) the conditions are two polynomial equations with closed-form
solutions, from five sums over the free set ``F`` and the clipped set:

    A = sum_F p^2,  P = sum_F p u,  Q = sum_F u^2,  Fc = sum_clip face^2,  G = sum_clip face u.

* cap inactive (``m = 0``): ``v = t z_hat``, ``t^2 (c^2 Q + 2 c P + A) = eps^2 - Fc``;
  taken when its ``d.u_hat = t (P + c Q) + G >= eps cos(alpha)``;
* cap active: ``aP + bQ + G = eps cos(alpha)`` and ``a^2 A + 2abP + b^2 Q + Fc = eps^2``
  give ``a^2 = (Q (eps^2 - Fc) - r^2) / (A Q - P^2)``, ``b = (r - aP) / Q`` with
  ``r = eps cos(alpha) - G`` (the cap projection inside the free subspace).

**The Newton active-set method** (:func:`cap_box_projector`): start from the
unbounded answer's ``(a, b)``, solve for the active set it induces, recompute
the active set at the new ``(a, b)``, and repeat until the active set stops
changing. This is the semismooth Newton method for the piecewise-quadratic
KKT system (each step solves the system exactly on the current piece). When
it stops, the point satisfies (KKT) exactly (up to float rounding): the
active set it was solved on is its own, ``s > 0`` and ``m >= 0`` are
checked, and the cap is checked on the returned point with an accurate
(atan2) angle. That is the **certificate**: a certified point is the exact
projection. On recorded iterates of cap PGD on the MNIST CNN it certified
every feasible case within 1-4 active-set solves (median 2), each one pass
of five sums plus one pass comparing active sets, against three nested
root-finding solves of the bracketing method below.

**The bracketing method** (:func:`project_cap_box_bracket`, the earlier
implementation, kept as the fallback and as a reference): for a fixed
``m / s`` the norm condition is solved exactly by a monotone active-set
iteration (:func:`sphere_box`: coordinates saturate in order of
``face / w_i``, ``t`` only grows); ``u_hat . d`` is non-decreasing along the
great-circle arc from ``z_hat`` to ``u_hat`` that the directions ``z_hat +
nu u_hat`` sweep, so the cap multiplier is found by a bracketing root finder
(Illinois) that keeps the side inside the cap. Provably convergent (a
continuous monotone function and a bracket), but each root-finding step is a
full sphere-box solve. Where the Newton method does not certify (it did not
happen on the MNIST iterates; it can happen for tiny angles, where the
cosine form of the cap equation loses float32 precision, or on a cycling
active set), the projection falls back to it; the fallback runs only in
steps where some lane of the batch needs it (a ``while_loop`` whose batched
predicate is false for every lane costs nothing).

**Regime.** Both are the nearest point whenever the maximiser of the
relaxation lies on the sphere, which holds when the box corner towards the
KKT direction is outside the eps-ball, e.g. whenever eps is below the
distance from ``x`` to every corner of the domain (the usual case for
images: the far corners are at distance ~ sqrt(d)/2). The set ``C n box`` is
empty when even the point of ``sphere n box`` nearest to ``u``
(:func:`min_angle_point`, computed once per lane) has angle above
``alpha``; then the projection returns that point, flagged not ok. Outside
the regime (``x`` near a corner with eps large) the result may violate a
constraint; callers check it (:func:`cap_feasible`).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from attacks.norms import l2_norm

_TINY = 1e-30
_ANGLE_TOL = 1e-6  # radians: float32 resolution of an angle, the cap's tolerance in projections


# ---------------------------------------------------------------------------
# primitives


def _dot(a: jax.Array, b: jax.Array) -> jax.Array:
    """``sum(a * b)``: under ``vmap`` an elementwise product and a row reduction,
    which XLA:CPU fuses (a batched ``dot`` of vectors becomes a slow tiny matmul)."""
    return jnp.sum(a * b)


def unit(u: jax.Array) -> jax.Array:
    """``u / ||u||_2`` (``u`` non-zero)."""
    return u / jnp.maximum(l2_norm(u), _TINY)


def cap_angle(delta: jax.Array, u_hat: jax.Array) -> jax.Array:
    """``angle(delta, u)`` in ``[0, pi]`` via atan2 (accurate near 0 and pi); 0 for delta = 0."""
    a = _dot(delta, u_hat)
    p = delta - a * u_hat
    return jnp.arctan2(l2_norm(p), a)


def orthogonal(uh: jax.Array) -> jax.Array:
    """A fixed unit vector orthogonal to the unit vector ``uh`` (any shape, >= 2 entries).

    ``e_j - uh_j uh`` with ``j = 0`` (the first entry) unless ``|uh_0| > 0.7``,
    then ``j = 1`` (``uh_0^2 + uh_1^2 <= 1``, so ``1 - uh_j^2 >= 0.5``).
    """
    flat = uh.reshape(-1)
    j = jnp.where(jnp.abs(flat[0]) > 0.7, 1, 0)
    e = (jnp.arange(flat.shape[0]) == j).astype(uh.dtype)
    v = e - flat[j] * flat
    return (v / jnp.maximum(l2_norm(v), _TINY)).reshape(uh.shape)


def cap_feasible(x_adv, x, u_hat, eps, alpha, bounds, rtol):
    """Check of every constraint at the point ``x_adv`` itself (one point).

    ``| ||x_adv - x|| - eps | <= rtol eps``, ``angle(x_adv - x, u) <= alpha +
    rtol`` and, with bounds, ``lo <= x_adv <= hi`` exactly.
    """
    delta = x_adv - x
    nrm = l2_norm(delta)
    ok = jnp.abs(nrm - eps) <= rtol * eps
    ok &= cap_angle(delta, u_hat) <= alpha + rtol
    if bounds is not None:
        ok &= jnp.all((x_adv >= bounds[0]) & (x_adv <= bounds[1]))
    return ok


# ---------------------------------------------------------------------------
# unbounded


def project_cap_pre(zf, uh, eps, alpha, cos_a, sin_a, orth):
    """:func:`project_cap` with a unit ``uh``, ``cos/sin(alpha)`` and a unit ``orth``
    orthogonal to ``uh`` (used when ``z`` is parallel to ``u``) precomputed.

    Two reduction passes and one output pass: ``a = z.u``; then, over
    ``p = z - a u``, both ``c = p.u`` (float rounding leaves ``p`` slightly off
    orthogonal, which matters when ``z`` is nearly parallel to ``u``) and
    ``p.p``; the orthogonal part is ``p - c u``, of squared norm
    ``p.p - c^2``, folded into the output's coefficients.
    """
    a = _dot(zf, uh)
    p = zf - a * uh
    c = _dot(p, uh)
    pn = jnp.sqrt(jnp.maximum(_dot(p, p) - c * c, 0.0))  # || p - c u ||
    a = a + c                                              # z = a u + (p - c u)
    zn = jnp.sqrt(a * a + pn * pn)
    inside = jnp.arctan2(pn, a) <= alpha  # phi <= alpha: theta = phi, the point is eps z/||z||
    use_p = pn > 1e-12 * jnp.maximum(jnp.abs(a), pn)
    coef_p = jnp.where(inside, 1.0 / jnp.maximum(zn, _TINY),
                       jnp.where(use_p, sin_a / jnp.maximum(pn, _TINY), 0.0))
    coef_u = jnp.where(inside, a / jnp.maximum(zn, _TINY), cos_a)
    coef_o = jnp.where(inside | use_p, 0.0, sin_a)
    coef_u = jnp.where(zn > 0, coef_u, 1.0)  # z = 0: the cap centre
    # s = coef_u u + coef_p (p - c u) + coef_o orth is a unit vector (u, p - c u
    # and orth are orthogonal).
    return eps * ((coef_u - coef_p * c) * uh + coef_p * p + coef_o * orth)


def project_cap(z: jax.Array, u: jax.Array, eps, alpha) -> jax.Array:
    """Exact Euclidean projection of ``z`` onto ``{||d|| = eps, angle(d, u) <= alpha}``.

    Args:
      z: a perturbation, any shape.
      u: the cap's direction, same shape, non-zero (normalised here).
      eps: sphere radius, ``()``.
      alpha: cap angle in radians, ``()`` in ``[0, pi]``.

    Returns:
      ``P(z)`` of the module docstring, shape of ``z``: ``eps z / ||z||``
      when ``angle(z, u) <= alpha``, else
      ``eps (cos(alpha) u_hat + sin(alpha) p / ||p||)``; ``eps u_hat`` for
      ``z = 0``. Correct for ``z . u < 0`` and ``alpha >= pi/2``.
    """
    uh = unit(u)
    return project_cap_pre(z, uh, eps, alpha, jnp.cos(alpha), jnp.sin(alpha), orthogonal(uh))


# ---------------------------------------------------------------------------
# with a box: sphere n box, and the bracketing method


def sphere_box(w, lower, upper, eps, max_iter: int):
    """argmax of ``w.d`` over ``{||d|| <= eps, lower <= d <= upper}`` (any shape).

    Solves ``d = clip(t w, lower, upper)``, ``||d|| = eps`` exactly by an
    active-set iteration: with ``S`` the coordinates already at their face,
    ``t = sqrt((eps^2 - sum_S face^2) / sum_{not S} w^2)``; ``t`` only grows
    and ``S`` only grows, so it stops after at most ``d`` passes (usually a
    few). Needs ``lower <= 0 <= upper``. When even the far corner of the box
    is inside the ball, ``t = inf`` and the corner is returned (norm < eps;
    the caller's check rejects it).

    Returns:
      ``(d, converged)``: ``converged`` certifies ``||d|| = eps`` (the active
      set stopped changing and ``t`` is finite).
    """
    face = jnp.where(w > 0, upper, jnp.where(w < 0, lower, 0.0))
    sat_t = jnp.where(w != 0, face / jnp.where(w != 0, w, 1.0), jnp.inf)
    w2 = w * w
    f2 = face * face
    eps2 = eps * eps

    def solve(sat):
        rest = jnp.sum(jnp.where(sat, 0.0, w2))
        fixed = jnp.sum(jnp.where(sat, f2, 0.0))
        t = jnp.sqrt(jnp.maximum(eps2 - fixed, 0.0) / jnp.maximum(rest, _TINY))
        return jnp.where(rest > 0, t, jnp.inf)

    sat0 = sat_t <= 0.0
    init = (solve(sat0), jnp.sum(sat0), jnp.asarray(False), jnp.asarray(0))

    def body(st):
        t, c_used, _, it = st
        sat = sat_t <= t
        c = jnp.sum(sat)
        done = c == c_used
        return jnp.where(done, t, solve(sat)), c, done, it + 1

    st = jax.lax.while_loop(lambda st: (~st[2]) & (st[3] < max_iter), body, init)
    t, done = st[0], st[2]
    return jnp.where(sat_t <= t, face, t * w), done & jnp.isfinite(t)


class MinAnglePoint(NamedTuple):
    """The point of ``sphere n box`` nearest to ``u`` (depends on u, eps, the box; not on alpha).

    Attributes:
      d: ``sphere_box(u_hat)``: the maximiser of ``u_hat . d`` (shape of u).
      ok: its sphere-box solve converged (``||d|| = eps``).
      angle: ``angle(d, u)``: ``C(u, alpha) n box`` is empty for ``alpha`` below it.
    """

    d: jax.Array
    ok: jax.Array
    angle: jax.Array


def min_angle_point(uh, eps, lower, upper, box_iters: int = 32) -> MinAnglePoint:
    """:class:`MinAnglePoint` for a unit ``uh`` (one per lane; reusable across angles)."""
    d1, ok1 = sphere_box(uh, lower, upper, eps, box_iters)
    return MinAnglePoint(d1, ok1, cap_angle(d1, uh))


def _bracket_projector(uh, orth, eps, alpha, lower, upper, end: MinAnglePoint,
                       box_iters: int, tau_iters: int) -> Callable:
    """``z -> (d, ok)``: the bracketing method (module docstring)."""
    def excess(d):  # the angle, not the cosine: accurate for small alpha
        return cap_angle(d, uh) - alpha

    d1, ok1, h1 = end.d, end.ok, end.angle - alpha

    def project(zf):
        zn = l2_norm(zf)
        zh = jnp.where(zn > _TINY, zf / jnp.maximum(zn, _TINY), uh)
        # The KKT directions z_hat + nu u (nu >= 0) sweep the great-circle arc
        # from z_hat to u: w(theta) = cos(theta) z_hat + sin(theta) e, theta in
        # [0, phi]. Without a box the answer is theta = phi - alpha exactly, so
        # the root finder works on a nearly linear function. For z anti-parallel
        # to u every arc is as good; a fixed one is taken.
        c = _dot(zh, uh)
        e = uh - c * zh
        en = l2_norm(e)
        e = jnp.where(en > 1e-6, e / jnp.maximum(en, _TINY), orth)
        phi = jnp.where(en > 1e-6, jnp.arctan2(en, c), jnp.where(c > 0, 0.0, jnp.pi))

        def solve(theta):
            return sphere_box(jnp.cos(theta) * zh + jnp.sin(theta) * e, lower, upper, eps, box_iters)

        # Step 0 solves at theta = 0 (the ray: inside the cap means done); the
        # next ones are Illinois (modified regula falsi) on theta ->
        # angle(d(theta), u) - alpha, decreasing, keeping a bracket [a, b] with
        # h(a) > 0 >= h(b) and d(b), which satisfies the cap. One sphere-box
        # solve per step, written once (each call site of its while loop is
        # another piece of the compiled program).
        def step(i, st):
            a, ha, b, hb, db, okb, side = st
            w = b - a
            t = b - hb * w / jnp.minimum(hb - ha, -_TINY)
            # Safeguard: stay 1% of the bracket away from its ends, so that a
            # root sitting at an end (h = +1e-8 there, say) is still approached fast.
            t = jnp.clip(jnp.where(jnp.isfinite(t), t, a + 0.5 * w), a + 0.01 * w, b - 0.01 * w)
            t = jnp.where(i == 0, 0.0, t)
            dt, okt = solve(t)
            ht = excess(dt)
            good = ht <= _ANGLE_TOL
            # Halve the value kept at the end that survives twice in a row
            # (Illinois). These halved values steer the secant only: whether
            # d(b) is in the cap is okb, set from d(b)'s own angle.
            ha = jnp.where(good & (side == 1), 0.5 * ha, ha)
            hb = jnp.where(~good & (side == -1), 0.5 * hb, hb)
            a, ha = jnp.where(good, a, t), jnp.where(good, ha, ht)
            b, hb = jnp.where(good, t, b), jnp.where(good, ht, hb)
            db = jnp.where(good, dt, db)
            okb = jnp.where(good, okt, okb)
            return a, ha, b, hb, db, okb, jnp.where(i == 0, 0, jnp.where(good, 1, -1))

        st = (jnp.zeros(()), jnp.ones(()), phi, h1, d1, ok1 & (h1 <= _ANGLE_TOL), jnp.asarray(0))
        _, _, _, _, d, ok, _ = jax.lax.fori_loop(0, tau_iters + 1, step, st)
        return d, ok

    return project


# ---------------------------------------------------------------------------
# with a box: the Newton active-set method


def _newton_solver(uh, orth, eps, alpha, lower, upper, iters: int, skip=False) -> Callable:
    """``(z, warm=None) -> (d, certified, coef)``: the Newton active-set method of the module docstring.

    ``coef`` holds the solution's coefficients on ``(p / ||p||, u_hat)``
    (nan where not certified); passed back as ``warm`` for the next point
    (a PGD iterate close to this one), the iteration starts from this
    solution's active set instead of the unbounded projection's: on cap PGD
    over the MNIST CNN this took the solves per projection (the most any
    lane of a batch of 128 needed) from 3.5 to 2.7 on average.
    ``skip`` (a bool, per lane) marks lanes whose set is known to be empty:
    they do no iteration (under ``vmap`` the loop runs as long as its slowest
    lane, and an empty set would keep a lane iterating to ``iters``).
    """
    ca, sa = jnp.cos(alpha), jnp.sin(alpha)
    e2 = eps * eps
    ec = eps * ca

    def project(zf, warm=None):
        zn = l2_norm(zf)
        zh = jnp.where(zn > _TINY, zf / jnp.maximum(zn, _TINY), uh)
        c = _dot(zh, uh)
        p = zh - c * uh
        pn2 = _dot(p, p)
        # z parallel to +-u: the plane span(z, u) is a line; take a fixed
        # orthogonal p (for -u every point of the rim is nearest).
        deg = pn2 <= 1e-12
        p = jnp.where(deg, orth, p)
        ra = jnp.where(deg, 0.0, 1.0)          # z_hat = ra p + c u
        pn = jnp.where(deg, 1.0, jnp.sqrt(pn2))

        def active(a, b):
            v = a * p + b * uh
            return v <= lower, v >= upper

        def solve(a, b):
            low, up = active(a, b)
            fixed = low | up
            face = jnp.where(low, lower, jnp.where(up, upper, 0.0))
            A = jnp.sum(jnp.where(fixed, 0.0, p * p))
            P = jnp.sum(jnp.where(fixed, 0.0, p * uh))
            Q = jnp.sum(jnp.where(fixed, 0.0, uh * uh))
            Fc = jnp.sum(face * face)
            G = jnp.sum(face * uh)
            room = jnp.maximum(e2 - Fc, 0.0)
            # cap inactive: v = t z_hat
            az = ra * ra * A + 2.0 * ra * c * P + c * c * Q
            t = jnp.sqrt(room / jnp.maximum(az, _TINY))
            ray = (t * (ra * P + c * Q) + G >= ec) & (az > 0) & (e2 > Fc)
            # cap active
            r = ec - G
            den = A * Q - P * P
            a2 = (Q * room - r * r) / jnp.maximum(den, _TINY)
            ac = jnp.sqrt(jnp.maximum(a2, 0.0))
            bc = (r - ac * P) / jnp.maximum(Q, _TINY)
            # KKT sign of the cap multiplier: m = b - a c >= 0 (any rim point
            # is optimal when z is parallel to -u).
            capv = (den > 0) & (Q > 0) & (a2 >= 0) & (e2 > Fc) & (deg | (bc - ac * c >= -1e-6 * eps))
            return (jnp.where(ray, t * ra, ac), jnp.where(ray, t * c, bc), ray | capv)

        # Start: the unbounded projection, (a, b) = (eps, eps c) inside the
        # cap, (eps sin(alpha) / ||p||, eps cos(alpha)) outside.
        inside = jnp.arctan2(jnp.sqrt(pn2), c) <= alpha
        a0 = jnp.where(inside, eps * ra, eps * sa / pn)
        b0 = jnp.where(inside, eps * c, ec)
        if warm is not None:
            # The previous solution's coefficients on (p / ||p||, u_hat).
            use = jnp.all(jnp.isfinite(warm)) & ~deg
            a0 = jnp.where(use, warm[0] / pn, a0)
            b0 = jnp.where(use, warm[1], b0)

        def consistent(a, b, a1, b1):
            # The active set of (a, b) is that of (a1, b1) up to float
            # rounding: a coordinate within rounding of a face is on it either
            # way (d_i = face_i, box multiplier 0). Coordinates that the
            # previous iterate left at a face have z_i = 0 exactly, and then
            # v_i = a p_i + b u_i is +-1e-10 of noise around the face at 0.
            low, up = active(a, b)
            v1 = a1 * p + b1 * uh
            tol = 1e-6 * (jnp.abs(a1 * p) + jnp.abs(b1 * uh))
            bad = jnp.where(low, v1 > lower + tol,
                            jnp.where(up, v1 < upper - tol, (v1 < lower - tol) | (v1 > upper + tol)))
            return ~jnp.any(bad)

        def body(st):
            a, b, _, it, _ = st
            a1, b1, valid = solve(a, b)
            return a1, b1, valid, it + 1, consistent(a, b, a1, b1)

        st = (a0, b0, jnp.asarray(False), jnp.asarray(0), jnp.asarray(skip))
        a, b, valid, _, same = jax.lax.while_loop(lambda s: (~s[4]) & (s[3] < iters), body, st)
        d = jnp.clip(a * p + b * uh, lower, upper)
        ok = same & valid & ~jnp.asarray(skip) & (cap_angle(d, uh) <= alpha + _ANGLE_TOL)
        coef = jnp.where(ok, jnp.stack([a * pn, b]), jnp.nan)
        return d, ok, coef

    return project


def cap_box_projector(uh, eps, alpha, lower, upper, *, newton_iters: int = 8, box_iters: int = 32,
                      tau_iters: int = 8, end: "MinAnglePoint | None" = None) -> Callable:
    """``z -> (d, ok)``: projection onto ``C(u, alpha) n box`` for one lane.

    What does not depend on ``z`` (the point nearest to ``u``, whether the set
    is empty) is computed once, here (or passed as ``end``).

    Args:
      uh: unit direction; eps: radius; alpha: cap angle (radians).
      lower, upper: the box for the perturbation (``lo - x``, ``hi - x``).
      newton_iters: cap on the Newton active-set solves (module docstring).
      box_iters: cap on the passes of each sphere-box solve (bracketing fallback).
      tau_iters: root-finding steps of the bracketing fallback.
      end: :func:`min_angle_point` ``(uh, eps, lower, upper)`` if already known.

    Returns:
      ``project(z) -> (d, ok)``: ``ok`` certifies that ``d`` is on the sphere
      and in the cap (angle within 1e-6 rad) and, on the Newton path, that it
      is the exact projection; ``d`` is inside the box by construction.
      Empty sets give the point nearest to ``u`` and ``ok = False``.
      ``project(z, warm) -> (d, ok, coef)`` warm-starts the Newton iteration
      from a previous call's ``coef`` (``(2,)``; nan for a cold start): the
      same point, found in fewer solves when the active set is close.
    """
    orth = orthogonal(uh)
    if end is None:
        end = min_angle_point(uh, eps, lower, upper, box_iters)
    # Known empty: the point nearest to u is on the sphere and outside the cap.
    # (When the box corner towards u is inside the ball, end.ok is False and
    # the set may still have points: not skipped.)
    nonempty = ~end.ok | (end.angle - alpha <= _ANGLE_TOL)
    newton = _newton_solver(uh, orth, eps, alpha, lower, upper, newton_iters, skip=~nonempty)
    bracket = _bracket_projector(uh, orth, eps, alpha, lower, upper, end, box_iters, tau_iters)

    def project(zf, warm=None):
        d, ok, coef = newton(zf, warm)

        # Fallback, run only while some lane needs it (a batched while_loop
        # whose predicate is false everywhere does not run its body).
        def fallback(st):
            need, d, ok = st
            # The barrier ties the fallback to the loop state: without it XLA
            # hoists the loop-invariant bracket(zf) out of the loop and runs
            # it in every step.
            zb, need = jax.lax.optimization_barrier((zf, need))
            d2, ok2 = bracket(zb)
            return jnp.asarray(False), jnp.where(need, d2, d), jnp.where(need, ok2, ok)

        _, d, ok = jax.lax.while_loop(lambda s: s[0], fallback, (nonempty & ~ok, d, ok))
        d, ok = jnp.where(nonempty, d, end.d), ok & nonempty
        return (d, ok) if warm is None else (d, ok, coef)

    return project


def project_cap_box(z, u, eps, alpha, lower, upper, *, newton_iters: int = 8, box_iters: int = 32,
                    tau_iters: int = 8):
    """Projection of ``z`` onto ``{||d|| = eps, angle(d, u) <= alpha, lower <= d <= upper}``.

    The Newton active-set method of the module docstring (exact where it
    certifies its point), with the bracketing method as the fallback. Needs
    ``lower <= 0 <= upper`` elementwise (``x`` inside the box). Where the set
    is empty (or outside the exact regime) the result may violate a
    constraint; check it with :func:`cap_feasible`.

    Args:
      z: the point to project (a perturbation), any shape; u: direction, same shape.
      eps: sphere radius; alpha: cap angle in radians.
      lower, upper: the box for the perturbation (``lo - x``, ``hi - x``).
      newton_iters, box_iters, tau_iters: see :func:`cap_box_projector`.

    Returns:
      The projected perturbation, shape of ``z``.
    """
    return cap_box_projector(unit(u), eps, alpha, lower, upper, newton_iters=newton_iters,
                             box_iters=box_iters, tau_iters=tau_iters)(z)[0]


def project_cap_box_bracket(z, u, eps, alpha, lower, upper, *, box_iters: int = 32, tau_iters: int = 8):
    """The bracketing method alone (the earlier ``project_cap_box``): ``(d, ok)``.

    Kept as the Newton method's fallback and as its reference in tests.
    """
    uh = unit(u)
    end = min_angle_point(uh, eps, lower, upper, box_iters)
    return _bracket_projector(uh, orthogonal(uh), eps, alpha, lower, upper, end, box_iters, tau_iters)(z)


def project_cap_box_newton(z, u, eps, alpha, lower, upper, *, newton_iters: int = 8):
    """The Newton active-set method alone, no fallback: ``(d, certified)`` (for tests)."""
    uh = unit(u)
    return _newton_solver(uh, orthogonal(uh), eps, alpha, lower, upper, newton_iters)(z)[:2]


__all__ = [
    "MinAnglePoint",
    "cap_angle",
    "cap_box_projector",
    "cap_feasible",
    "min_angle_point",
    "orthogonal",
    "project_cap",
    "project_cap_box",
    "project_cap_box_bracket",
    "project_cap_box_newton",
    "project_cap_pre",
    "sphere_box",
    "unit",
]
