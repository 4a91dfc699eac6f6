"""l_2 PGD on the eps-sphere, restricted to a spherical cap (paper 004, Sec. 4.2, App. A).

The admissible perturbations of one point ``x`` are

    C(u, alpha) = { delta : ||delta||_2 = eps,  angle(delta, u) <= alpha }
                = { delta : ||delta||_2 = eps,  delta . u_hat >= eps cos(alpha) },

the spherical cap ``Sc(u, alpha)`` of paper 004 (eq. 6) scaled by ``eps``;
``alpha`` is in radians, in ``[0, pi]``, and ``u`` is any non-zero direction.

**Exact projection (unbounded).** For ``delta`` on the sphere,
``||z - delta||^2 = ||z||^2 + eps^2 - 2 z.delta``, so the nearest point of
``C`` to ``z`` maximises ``z.delta``. Writing ``z = a u_hat + p`` with
``p . u_hat = 0`` and ``phi = angle(z, u) = atan2(||p||, a)`` in ``[0, pi]``,
a point ``eps (cos(theta) u_hat + sin(theta) v)`` (``v`` a unit vector
orthogonal to ``u``) has ``z.delta = eps ||z|| cos(theta - phi)`` when
``v = p / ||p||``; over ``theta in [0, alpha]`` this is largest at
``theta = min(phi, alpha)``. Hence

    P(z) = eps (cos(theta) u_hat + sin(theta) p/||p||),  theta = min(phi, alpha).

This is Appendix A's construction (rotate ``z`` towards ``u`` inside the plane
``span(u, z)`` until the angle is at most ``alpha``, then put it on the
sphere), written so that it is exact for every input: ``z . u < 0`` (``phi >
pi/2``), ``alpha >= pi/2``, ``z`` parallel to ``-u`` (any orthogonal ``v`` is
optimal; a fixed one is used) and ``z = 0`` (every point is equally near;
``eps u_hat`` is returned). The printed eqs. 17-20 are not: they rescale to
``min(eps, ||z||)`` (off the sphere) and their ``r`` does not give the angle
``alpha`` unless ``z . u_hat = ||z|| cos(alpha)``.

**Exact projection with a box** ``lo <= x + delta <= hi``. For the convex
set ``K = {||delta|| <= eps} n box n {delta.u_hat >= eps cos(alpha)}``, the
maximiser of ``z.delta`` over ``K``, when it lies on the sphere, is the
nearest point of ``C n box`` to ``z`` (same identity as above; ``C n box`` is
the part of ``K`` on the sphere). Its KKT conditions give
``delta = clip(t (z_hat + nu u_hat), lo - x, hi - x)`` with ``t > 0`` fixing
the norm to ``eps`` and ``nu >= 0`` the cap multiplier. For a fixed ``nu``
the norm condition is solved exactly by an active-set iteration (coordinates
saturate at the box face in order of ``face / w_i``; ``t`` increases
monotonically to the solution, usually in 2-4 passes); ``u_hat . delta`` is
non-decreasing in ``nu`` (parametric LP argument), so ``nu`` is found by a
bracketing root finder (Illinois) along the great-circle arc from ``z_hat``
to ``u_hat`` that the directions ``z_hat + nu u_hat`` sweep, keeping the side
that satisfies the cap (without a box the root is where the arc enters the
cap, found in one secant step). This is the nearest point (up to the root
finding) whenever the maximiser of the relaxation lies on the sphere, which
holds when the box
corner towards ``z_hat + nu u_hat`` is outside the eps-ball, e.g. whenever
eps is below the distance from ``x`` to every corner of the domain (the usual
case for images: the far corners are at distance ~ sqrt(d)/2). Otherwise
(``x`` near a corner with eps large, or a box that leaves no point of the
sphere in the cap) the nearest point is a non-convex combinatorial problem;
the projection then returns a point that is feasible but maybe not nearest,
or an infeasible one that **the constraint check reports**.

**All constraints at once.** With a box, every iterate is the projection
above, put into the box by a clip in input space (a change of at most a few
ulps; it makes ``lo <= x_adv <= hi`` hold exactly); the projection certifies
its output (converged sphere-box solve, angle within 1e-6 rad of the cap) and
only certified iterates are kept. Without a box the projection is exact, so
every iterate is feasible up to float rounding. In both cases the returned
point is then *checked* on its own: ``| ||x_adv - x|| - eps | <= rtol eps``,
``angle(x_adv - x, u) <= alpha + rtol`` (radians) and, with a box,
``lo <= x_adv <= hi``. A lane whose point fails (or that never kept an
iterate) returns ``x`` itself (distance 0, clearly not on the sphere) with
``feasible = False`` (:func:`cap_pgd_result`), and a returned point counts as
adversarial only if it is feasible and re-evaluated as misclassified.

The attack is APGD-style projected gradient ascent of the logit margin
(Croce & Hein 2020: step ``2 eps``, momentum 0.75 in heavy-ball form so that
each step costs one projection, step halving and restart from the best
iterate at APGD's checkpoints) with the l_2 steepest-ascent step
``eta g / ||g||``. A lane is one (point, direction, cap angle); attacks
``vmap`` lanes, steps are a ``lax.scan``: one jitted program, ``steps``
gradient evaluations and one verifying forward pass per lane.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from attacks import checks
from attacks.engine import _checkpoint_lengths, apgd_checkpoints, mask_box_gradient, single
from attacks.losses import margin
from attacks.norms import clip_box, l2_norm, step_l2
from attacks.xla import program

_TINY = 1e-30
_ANGLE_TOL = 1e-6  # radians: float32 resolution of an angle, the cap's tolerance in projections


@dataclasses.dataclass(frozen=True)
class CapConfig:
    """Static configuration of a constrained PGD lane (a jit static argument).

    Attributes:
      steps: gradient evaluations per lane.
      initial_step: first step size as a multiple of ``eps`` (APGD uses 2).
      momentum: APGD's momentum ``alpha``.
      rho: APGD's checkpoint success fraction.
      box_iters: cap on the active-set passes of the sphere-box solve
        (exact once converged; non-converged lanes fail the check).
      tau_iters: Illinois (regula falsi) steps on the cap multiplier (box
        only), each one sphere-box solve. Every iterate is feasible whatever
        the count (the root finder keeps the side inside the cap); more steps
        bring it closer to the nearest point. 2 (the default for attack
        steps) changed the l_2 sparsity of the MNIST CNN by ~0.002 rad
        against 8 (``project_cap_box``'s default) at ~55% of the time.
      rtol: tolerance of the constraint check: relative on the norm,
        radians on the angle.
    """

    steps: int = 20
    initial_step: float = 2.0
    momentum: float = 0.75
    rho: float = 0.75
    box_iters: int = 32
    tau_iters: int = 2
    rtol: float = 1e-4


class ConstrainedResult(NamedTuple):
    """Outcome of a constrained attack, one row per point.

    Attributes:
      x_adv: ``(n, *shape)``; the highest-margin kept iterate (an adversarial
        one whenever an iterate was adversarial: the logit margin is positive
        exactly then), else ``x`` (no iterate satisfied every constraint).
      adversarial: ``(n,)`` bool, ``argmax logits_fn(x_adv) != y`` re-evaluated
        on the returned array *and* ``feasible``.
      feasible: ``(n,)`` bool, ``x_adv`` satisfies every constraint (checked).
    """

    x_adv: jax.Array
    adversarial: jax.Array
    feasible: jax.Array


# ---------------------------------------------------------------------------
# geometry (one point, flat vectors)
# ---------------------------------------------------------------------------


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


def _orthogonal(uh: jax.Array) -> jax.Array:
    """A fixed unit vector orthogonal to the unit vector ``uh`` (any shape, >= 2 entries).

    ``e_j - uh_j uh`` with ``j = 0`` (the first entry) unless ``|uh_0| > 0.7``,
    then ``j = 1`` (``uh_0^2 + uh_1^2 <= 1``, so ``1 - uh_j^2 >= 0.5``).
    """
    flat = uh.reshape(-1)
    j = jnp.where(jnp.abs(flat[0]) > 0.7, 1, 0)
    e = (jnp.arange(flat.shape[0]) == j).astype(uh.dtype)
    v = e - flat[j] * flat
    return (v / jnp.maximum(l2_norm(v), _TINY)).reshape(uh.shape)


def _project_cap_pre(zf, uh, eps, alpha, cos_a, sin_a, orth):
    """:func:`project_cap` with a unit ``uh``, ``cos/sin(alpha)`` and a unit ``orth``
    orthogonal to ``uh`` (used when ``z`` is parallel to ``u``) precomputed.

    Works on the arrays' own shape (no flattening: a reshape of a vmapped
    gradient can cost XLA:CPU a layout copy every step).

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
    return _project_cap_pre(z, uh, eps, alpha, jnp.cos(alpha), jnp.sin(alpha), _orthogonal(uh))


def _sphere_box(w, lower, upper, eps, max_iter: int):
    """argmax of ``w.d`` over ``{||d|| <= eps, lower <= d <= upper}`` (flat).

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


def _cap_box_projector(uh, eps, alpha, lo, hi, box_iters: int, tau_iters: int) -> Callable:
    """``z -> (d, ok)`` for :func:`project_cap_box` (any shape), with what does not
    depend on ``z`` (the cap-centre end ``d(u)`` and its excess angle) computed once.

    ``ok`` is the projection's own certificate that ``d`` is on the sphere
    (converged sphere-box solve) and in the cap (its angle, as computed for the
    root finding, within ``_ANGLE_TOL``): the attack keeps iterates on it,
    and checks the point it returns independently.
    """
    orth = _orthogonal(uh)
    d1, ok1 = _sphere_box(uh, lo, hi, eps, box_iters)

    def excess(d):  # the angle, not the cosine: accurate for small alpha
        return cap_angle(d, uh) - alpha

    h1 = excess(d1)

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
            return _sphere_box(jnp.cos(theta) * zh + jnp.sin(theta) * e, lo, hi, eps, box_iters)

        d0, ok0 = solve(0.0)
        h0 = excess(d0)

        # Illinois (modified regula falsi) on theta -> angle(d(theta), u) - alpha,
        # decreasing: keeps a bracket [a, b] with h(a) > 0 >= h(b) and returns
        # d(b), which satisfies the cap.
        def step(_, st):
            a, ha, b, hb, db, okb, side = st
            w = b - a
            t = b - hb * w / jnp.minimum(hb - ha, -_TINY)
            # Safeguard: stay 1% of the bracket away from its ends, so that a
            # root sitting at an end (h = +1e-8 there, say) is still approached fast.
            t = jnp.clip(jnp.where(jnp.isfinite(t), t, a + 0.5 * w), a + 0.01 * w, b - 0.01 * w)
            dt, okt = solve(t)
            ht = excess(dt)
            good = ht <= _ANGLE_TOL
            # Halve the value kept at the end that survives twice in a row.
            ha = jnp.where(good & (side == 1), 0.5 * ha, ha)
            hb = jnp.where(~good & (side == -1), 0.5 * hb, hb)
            a, ha = jnp.where(good, a, t), jnp.where(good, ha, ht)
            b, hb = jnp.where(good, t, b), jnp.where(good, ht, hb)
            db = jnp.where(good, dt, db)
            okb = jnp.where(good, okt, okb)
            return a, ha, b, hb, db, okb, jnp.where(good, 1, -1)

        st = (jnp.zeros(()), h0, phi, h1, d1, ok1, jnp.asarray(0))
        _, _, _, hb, db, okb, _ = jax.lax.fori_loop(0, tau_iters, step, st)
        inside0 = h0 <= _ANGLE_TOL
        d = jnp.where(inside0, d0, db)
        ok = jnp.where(inside0, ok0, okb & (hb <= _ANGLE_TOL))
        return d, ok

    return project


def project_cap_box(z, u, eps, alpha, lower, upper, *, box_iters: int = 32, tau_iters: int = 8):
    """Projection of ``z`` onto ``{||d|| = eps, angle(d, u) <= alpha, lower <= d <= upper}``.

    The KKT construction of the module docstring, exact up to the root finding
    along the arc (its two ends, then ``tau_iters`` Illinois steps). Needs
    ``lower <= 0 <= upper`` elementwise (``x`` inside the box). Where the set
    is empty (or outside the exact regime) the result may violate a
    constraint; check it with :func:`cap_feasible`.

    Args:
      z: the point to project (a perturbation), any shape; u: direction, same shape.
      eps: sphere radius; alpha: cap angle in radians.
      lower, upper: the box for the perturbation (``lo - x``, ``hi - x``).
      box_iters: cap on the active-set passes of each sphere-box solve.
      tau_iters: root-finding steps (each one sphere-box solve).

    Returns:
      The projected perturbation, shape of ``z``.
    """
    return _cap_box_projector(unit(u), eps, alpha, lower, upper, box_iters, tau_iters)(z)[0]


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


def cap_projector(x, u_hat, eps, alpha, bounds, cfg: CapConfig) -> Callable:
    """``x_candidate -> x_adv``: projection in input space for one lane.

    With bounds it returns ``(x_adv, ok)``, ``ok`` the projection's certificate
    (see ``_cap_box_projector``).
    """
    if bounds is None:
        ca, sa, orth = jnp.cos(alpha), jnp.sin(alpha), _orthogonal(u_hat)

        def proj(xa):
            return x + _project_cap_pre(xa - x, u_hat, eps, alpha, ca, sa, orth)

        return proj
    project = _cap_box_projector(u_hat, eps, alpha, bounds[0] - x, bounds[1] - x,
                                 cfg.box_iters, cfg.tau_iters)

    def proj_box(xa):
        d, ok = project(xa - x)
        return clip_box(x + d, bounds), ok

    return proj_box


def sphere_projector(x, eps, bounds, cfg: CapConfig) -> Callable:
    """``x_candidate -> x_adv`` onto the eps-sphere (n box): the cap with ``alpha = pi``.

    ``x + eps z/||z||`` without bounds; with bounds the sphere-box step of
    :func:`project_cap_box` alone (no cap, so no root finding). ``z = 0`` maps
    to ``x`` (no direction to choose; the check rejects it for eps > 0).
    """
    if bounds is None:
        def proj(xa):
            z = xa - x
            return x + eps * z / jnp.maximum(l2_norm(z), _TINY)
        return proj
    lower = bounds[0] - x
    upper = bounds[1] - x

    def proj_box(xa):
        z = xa - x
        zh = z / jnp.maximum(l2_norm(z), _TINY)
        d, _ = _sphere_box(zh, lower, upper, eps, cfg.box_iters)
        return clip_box(x + d, bounds)

    return proj_box


# ---------------------------------------------------------------------------
# the constrained PGD lane (shared with attacks.vertex)
# ---------------------------------------------------------------------------


def misclassified(logits: jax.Array, y: jax.Array) -> jax.Array:
    """``argmax(logits) != y`` (first index wins ties), without an arg-reduction."""
    z_y = logits[y]
    idx = jnp.arange(logits.shape[-1])
    return jnp.any((logits > z_y) | ((logits == z_y) & (idx < y)))


class _LaneState(NamedTuple):
    cand: jax.Array       # (*shape) next point before projection
    xa_prev: jax.Array    # (*shape) previous (projected) iterate, for momentum
    eta: jax.Array        # () step size
    f_prev: jax.Array     # () margin at the previous iterate
    n_up: jax.Array       # () margin increases since the last checkpoint
    ckpt_eta: jax.Array   # () step at the last checkpoint
    ckpt_fmax: jax.Array  # () best margin at the last checkpoint
    x_max: jax.Array      # (*shape) highest-margin checked iterate
    f_max: jax.Array      # () its margin (-inf: none checked yet)


def constrained_lane(fn1, x, y, start, project, feasible, step, eta0, cfg: CapConfig, bounds):
    """APGD-style ascent of the logit margin over a constraint set, one lane.

    Args:
      fn1: logits of one input ``(*shape) -> (K,)``.
      x: clean input; y: label ``()``.
      start: starting point in input space (projected first).
      project: ``x_candidate -> x_adv`` onto the constraint set, or
        ``-> (x_adv, ok)`` with its own certificate ``ok`` of feasibility.
      feasible: ``x_adv -> bool``, the check of every constraint (applied to
        every iterate when there are bounds and no certificate, and always to
        the returned point).
      step: ``(grad, size) -> displacement`` (steepest ascent of the norm).
      eta0: initial step size ``()``.
      cfg: :class:`CapConfig` (steps, momentum, rho).
      bounds: box or None (for gradient masking at faces).

    Returns:
      ``(x_adv, adversarial, feasible)``: the highest-margin checked iterate
      (the logit margin is positive exactly when misclassified, so this is the
      most clearly adversarial iterate whenever one was), else ``x`` if no
      iterate passed the check; ``adversarial`` is re-evaluated by one forward
      pass on the returned ``x_adv``.
    """
    vg = jax.value_and_grad(lambda xa: margin(fn1(xa), y))
    ckpt = apgd_checkpoints(cfg.steps)
    lengths = _checkpoint_lengths(ckpt)
    ninf = jnp.asarray(-jnp.inf, jnp.float32)
    eta0 = jnp.asarray(eta0, jnp.float32)
    st0 = _LaneState(start, start, eta0, ninf, jnp.zeros(()), eta0, ninf, x, ninf)

    def body(s: _LaneState, xs):
        k, is_ckpt, length = xs
        # The only projection of the step (one instance of it in the program).
        xa = project(s.cand)
        if isinstance(xa, tuple):  # the projection certifies its own output
            xa, ok = xa
        else:
            # Without a box the projection is exact, so iterates need no check
            # here (the returned point is checked below); with one, check.
            ok = feasible(xa) if bounds is not None else jnp.asarray(True)
        f, g = vg(xa)
        f = jnp.where(jnp.isnan(f), -jnp.inf, f)
        fc = jnp.where(ok, f, -jnp.inf)
        improved = fc > s.f_max
        x_max = jnp.where(improved, xa, s.x_max)
        f_max = jnp.maximum(fc, s.f_max)

        g = mask_box_gradient(g, xa, bounds)
        n_up = s.n_up + (f > s.f_prev).astype(jnp.float32)
        # Heavy-ball form of APGD's momentum: one projection per step.
        a = jnp.where(k == 0, 1.0, cfg.momentum)
        nxt = xa + a * step(g, s.eta) + (1.0 - a) * (xa - s.xa_prev)

        # APGD checkpoint: halve the step, restart from the best iterate. The
        # predicate is a scan input shared by all lanes, so this is a real
        # branch and ordinary steps skip its selects.
        def at_checkpoint(ops):
            nxt, n_up = ops
            halve = (n_up < cfg.rho * length) | ((s.ckpt_eta == s.eta) & (s.ckpt_fmax == f_max))
            restart = halve & jnp.isfinite(f_max)
            return (jnp.where(restart, x_max, nxt), jnp.where(restart, x_max, xa),
                    jnp.where(halve, s.eta / 2.0, s.eta), jnp.zeros_like(n_up), s.eta, f_max)

        def ordinary(ops):
            nxt, n_up = ops
            return nxt, xa, s.eta, n_up, s.ckpt_eta, s.ckpt_fmax

        nxt, prev, eta, n_up, ckpt_eta, ckpt_fmax = jax.lax.cond(
            is_ckpt, at_checkpoint, ordinary, (nxt, n_up))
        return _LaneState(nxt, prev, eta, f, n_up, ckpt_eta, ckpt_fmax, x_max, f_max), None

    xs = (jnp.arange(cfg.steps), jnp.asarray(ckpt), jnp.asarray(lengths))
    s, _ = jax.lax.scan(body, st0, xs)
    best = s.x_max
    feas = feasible(best) & jnp.isfinite(s.f_max)
    best = jnp.where(feas, best, x)
    adv = feas & misclassified(fn1(best), y)
    return best, adv, feas


def cap_lane(fn1, x, y, eps, u_hat, alpha, start, cfg: CapConfig, bounds):
    """Cap-constrained l_2 PGD for one (point, direction, angle) lane.

    Args:
      fn1: ``(*shape) -> (K,)``; x: ``(*shape)``; y: ``()``; eps, alpha: ``()``.
      u_hat: unit direction ``(*shape)``.
      start: starting point in input space (projected onto the cap first).

    Returns:
      ``(x_adv, adversarial, feasible)`` as in :func:`constrained_lane`.
    """
    proj = cap_projector(x, u_hat, eps, alpha, bounds, cfg)
    feas = lambda xa: cap_feasible(xa, x, u_hat, eps, alpha, bounds, cfg.rtol)  # noqa: E731
    return constrained_lane(fn1, x, y, start, proj, feas, step_l2, cfg.initial_step * eps, cfg, bounds)


# ---------------------------------------------------------------------------
# public attack
# ---------------------------------------------------------------------------


def check_directions(u, x, name: str = "u") -> jax.Array:
    """``u`` of the shape of ``x`` or of one input; returned as ``(n, *shape)``."""
    u = checks.check_array(u, name, min_ndim=1)
    n, shape = x.shape[0], tuple(x.shape[1:])
    if tuple(u.shape) == shape:
        u = jnp.broadcast_to(u, x.shape)
    elif tuple(u.shape) != tuple(x.shape):
        raise ValueError(
            f"{name}: expected shape {tuple(x.shape)} (one per point) or {shape} (shared), "
            f"got {tuple(u.shape)}"
        )
    return u


def check_alpha(alpha, n: int, name: str = "alpha") -> jax.Array:
    """Cap angle(s) in radians in ``[0, pi]``: scalar or ``(n,)``."""
    a = checks.check_eps(alpha, n, name)
    if checks.is_concrete(a) and float(jnp.max(a)) > math.pi * (1 + 1e-7):
        raise ValueError(f"{name}: expected angles in [0, pi] radians, got max {float(jnp.max(a))}")
    return jnp.minimum(a, jnp.float32(math.pi))


@program(static_argnames=("logits_fn", "cfg", "bounds"))
def _cap_jit(logits_fn, x, y, eps, u, alpha, keys, *, cfg: CapConfig, bounds):
    fn1 = single(logits_fn)

    def point(xi, yi, ei, ui, ai, ki):
        uh = unit(ui)
        start = xi + ei * unit(jax.random.normal(ki, xi.shape))
        return cap_lane(fn1, xi, yi, ei, uh, ai, start, cfg, bounds)

    xa, adv, feas = jax.vmap(point)(x, y, eps, u, alpha, keys)
    # Re-check on the returned batch with the user's batched logits_fn.
    adv = adv & (jnp.argmax(logits_fn(xa), axis=-1) != y)
    return ConstrainedResult(xa, adv, feas)


def _prepare_cap(logits_fn, x, y, eps, u, alpha, steps, key, bounds, rtol):
    x, y, bounds, _ = checks.check_model_inputs(logits_fn, x, y, bounds)
    n = x.shape[0]
    if math.prod(x.shape[1:]) < 2:
        raise ValueError(f"x: a spherical cap needs inputs of dimension >= 2, got shape {tuple(x.shape)}")
    eps = checks.check_eps(eps, n, "eps")
    u = check_directions(u, x)
    if checks.is_concrete(u) and bool(jnp.any(jnp.sum(jnp.square(u.reshape(n, -1)), axis=1) == 0)):
        raise ValueError("u: every direction must be non-zero")
    alpha = check_alpha(alpha, n)
    steps = checks.check_positive_int(steps, "steps")
    keys = checks.check_key(key, n)
    cfg = CapConfig(steps=steps, rtol=checks.check_positive_float(rtol, "rtol"))
    return x, y, eps, u, alpha, keys, cfg, bounds


def cap_pgd_result(
    logits_fn: Callable, x, y, eps, u, alpha, *, steps: int, key,
    bounds: Optional[Tuple[float, float]] = None, rtol: float = 1e-4,
) -> ConstrainedResult:
    """:func:`cap_pgd` with its checks: ``ConstrainedResult(x_adv, adversarial, feasible)``."""
    x, y, eps, u, alpha, keys, cfg, bounds = _prepare_cap(
        logits_fn, x, y, eps, u, alpha, steps, key, bounds, rtol)
    return _cap_jit(logits_fn, x, y, eps, u, alpha, keys, cfg=cfg, bounds=bounds)


def cap_pgd(
    logits_fn: Callable, x, y, eps, u, alpha, *, steps: int, key,
    bounds: Optional[Tuple[float, float]] = None, rtol: float = 1e-4,
) -> jax.Array:
    """l_2 PGD on the eps-sphere inside the spherical cap ``Sc(u, alpha)`` (paper 004, PGD_alpha).

    Maximises the logit margin over ``{delta : ||delta||_2 = eps,
    angle(delta, u) <= alpha}`` (eq. 6, scaled by ``eps``) with the exact
    projection of the module docstring (App. A, corrected), from a random
    point of the cap.

    Args:
      logits_fn: ``(n, *shape) -> (n, K)``.
      x: clean inputs ``(n, *shape)``; y: labels ``(n,)``.
      eps: sphere radius (l_2), scalar or ``(n,)``.
      u: cap direction(s): shape of ``x`` (one per point) or of one input
        (shared); any non-zero vectors (normalised here).
      alpha: cap angle in radians in ``[0, pi]``, scalar or ``(n,)``.
      steps: gradient evaluations per point.
      key: PRNG key (or one per point) for the random start.
      bounds: ``(lo, hi)`` input domain or None. With bounds the projection is
        onto sphere n cap n box (exact when that set is non-empty); the
        returned point is in the box exactly and on the sphere and in the cap
        up to ``rtol``, each checked on the returned array.
      rtol: tolerance of the checks (relative on the norm, radians on the angle).

    Returns:
      ``x_adv (n, *shape)``: the highest-margin adversarial iterate, else the
      highest-margin iterate, each satisfying every constraint (checked).
      Rows where no iterate passed the check (possible only with bounds: the
      box leaves no point of the sphere in the cap) are returned as ``x``
      itself; :func:`cap_pgd_result` reports them as ``feasible = False``.
    """
    return cap_pgd_result(logits_fn, x, y, eps, u, alpha, steps=steps, key=key,
                          bounds=bounds, rtol=rtol).x_adv


__all__ = [
    "CapConfig",
    "ConstrainedResult",
    "cap_angle",
    "cap_feasible",
    "cap_lane",
    "cap_pgd",
    "cap_pgd_result",
    "constrained_lane",
    "project_cap",
    "project_cap_box",
    "sphere_projector",
    "unit",
]
