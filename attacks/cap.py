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
non-decreasing in ``nu`` (parametric LP argument), so ``nu`` is found by
bisection on ``tau = nu / (1 + nu)`` in ``[0, 1]``, keeping the side that
satisfies the cap. When the box leaves no point of the sphere in the cap
(e.g. ``x`` in a corner and ``alpha`` small), no such point exists; the
projection then returns its best effort and **the constraint check reports
it as infeasible**.

**All constraints at once.** Every iterate is the projection above, put into
the box by a clip in input space (a change of at most a few ulps; it makes
``lo <= x_adv <= hi`` hold exactly), then *checked*: ``| ||x_adv - x|| - eps |
<= rtol eps`` and ``angle(x_adv - x, u) <= alpha + rtol`` (radians) and inside
the box. Only checked iterates can be returned as adversarial; a lane that
never produced a checked iterate returns ``x`` itself (distance 0, clearly not
on the sphere) and ``feasible = False`` in :func:`cap_pgd_result`.

The attack is APGD-style projected gradient ascent of the logit margin
(Croce & Hein 2020: step ``2 eps``, momentum 0.75, step halving at
checkpoints) with the l_2 steepest-ascent step ``eta g / ||g||``. A lane is
one (point, direction, cap angle); attacks ``vmap`` lanes, steps are a
``lax.scan``: one jitted program, ``steps`` gradient evaluations and one
verifying forward pass per lane.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks import checks
from attacks.engine import _checkpoint_lengths, apgd_checkpoints, mask_box_gradient, single
from attacks.losses import margin
from attacks.norms import clip_box, l2_norm, step_l2

_TINY = 1e-30


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
      tau_iters: bisection steps on the cap multiplier (box only); the
        projection is the nearest point up to ~``2**-tau_iters`` in ``tau``.
      rtol: tolerance of the constraint check: relative on the norm,
        radians on the angle.
    """

    steps: int = 20
    initial_step: float = 2.0
    momentum: float = 0.75
    rho: float = 0.75
    box_iters: int = 32
    tau_iters: int = 16
    rtol: float = 1e-4


class ConstrainedResult(NamedTuple):
    """Outcome of a constrained attack, one row per point.

    Attributes:
      x_adv: ``(n, *shape)``; the adversarial iterate if one was found, else
        the highest-margin checked iterate, else ``x`` (no point satisfied
        every constraint).
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


def unit(u: jax.Array) -> jax.Array:
    """``u / ||u||_2`` (``u`` non-zero)."""
    return u / jnp.maximum(l2_norm(u), _TINY)


def cap_angle(delta: jax.Array, u_hat: jax.Array) -> jax.Array:
    """``angle(delta, u)`` in ``[0, pi]`` via atan2 (accurate near 0 and pi); 0 for delta = 0."""
    d = delta.reshape(-1)
    uh = u_hat.reshape(-1)
    a = jnp.dot(d, uh)
    p = d - a * uh
    return jnp.arctan2(l2_norm(p), a)


def _orthogonal(uh: jax.Array) -> jax.Array:
    """A fixed unit vector orthogonal to the unit vector ``uh`` (needs d >= 2)."""
    j = jnp.argmin(jnp.abs(uh))
    v = jax.nn.one_hot(j, uh.shape[0], dtype=uh.dtype) - uh[j] * uh
    return v / jnp.maximum(l2_norm(v), _TINY)


def project_cap(z: jax.Array, u: jax.Array, eps, alpha) -> jax.Array:
    """Exact Euclidean projection of ``z`` onto ``{||d|| = eps, angle(d, u) <= alpha}``.

    Args:
      z: a perturbation, any shape.
      u: the cap's direction, same shape, non-zero (normalised here).
      eps: sphere radius, ``()``.
      alpha: cap angle in radians, ``()`` in ``[0, pi]``.

    Returns:
      ``P(z)`` of the module docstring, shape of ``z``; ``eps u_hat`` for
      ``z = 0``. Correct for ``z . u < 0`` and ``alpha >= pi/2``.
    """
    shape = z.shape
    zf = z.reshape(-1)
    uh = unit(u.reshape(-1))
    a = jnp.dot(zf, uh)
    p = zf - a * uh
    p = p - jnp.dot(p, uh) * uh  # second Gram-Schmidt pass (float32)
    pn = l2_norm(p)
    phi = jnp.arctan2(pn, a)
    theta = jnp.minimum(phi, alpha)
    use_p = pn > 1e-12 * jnp.maximum(jnp.abs(a), pn)
    v = jnp.where(use_p, p / jnp.maximum(pn, _TINY), _orthogonal(uh))
    s = jnp.cos(theta) * uh + jnp.sin(theta) * v
    return (eps * s / jnp.maximum(l2_norm(s), _TINY)).reshape(shape)


def _sphere_box(w, lower, upper, eps, max_iter: int):
    """argmax of ``w.d`` over ``{||d|| <= eps, lower <= d <= upper}`` (flat).

    Solves ``d = clip(t w, lower, upper)``, ``||d|| = eps`` exactly by an
    active-set iteration: with ``S`` the coordinates already at their face,
    ``t = sqrt((eps^2 - sum_S face^2) / sum_{not S} w^2)``; ``t`` only grows
    and ``S`` only grows, so it stops after at most ``d`` passes (usually a
    few). Needs ``lower <= 0 <= upper``. When even the far corner of the box
    is inside the ball, ``t = inf`` and the corner is returned (norm < eps;
    the caller's check rejects it).
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

    def cond(st):
        return (~st[2]) & (st[3] < max_iter)

    def body(st):
        t, c_used, _, it = st
        sat = sat_t <= t
        c = jnp.sum(sat)
        done = c == c_used
        return jnp.where(done, t, solve(sat)), c, done, it + 1

    t, _, _, _ = jax.lax.while_loop(cond, body, init)
    return jnp.where(sat_t <= t, face, t * w)


def project_cap_box(z, u, eps, alpha, lower, upper, *, box_iters: int = 32, tau_iters: int = 16):
    """Projection of ``z`` onto ``{||d|| = eps, angle(d, u) <= alpha, lower <= d <= upper}``.

    The KKT construction of the module docstring (exact up to the ``tau``
    bisection). ``lower <= 0 <= upper`` elementwise (``x`` inside the box).
    Where the set is empty the result violates a constraint; check it with
    :func:`cap_feasible`.
    """
    shape = z.shape
    zf = z.reshape(-1)
    uh = unit(u.reshape(-1))
    lo = lower.reshape(-1)
    hi = upper.reshape(-1)
    zn = l2_norm(zf)
    zh = jnp.where(zn > _TINY, zf / jnp.maximum(zn, _TINY), uh)
    need = eps * jnp.cos(alpha)

    def solve(tau):
        return _sphere_box((1.0 - tau) * zh + tau * uh, lo, hi, eps, box_iters)

    d0 = solve(0.0)
    ok0 = jnp.dot(d0, uh) >= need

    def bisect(_, lh):
        a, b = lh
        mid = 0.5 * (a + b)
        good = jnp.dot(solve(mid), uh) >= need
        return jnp.where(good, a, mid), jnp.where(good, mid, b)

    _, tau = jax.lax.fori_loop(0, tau_iters, bisect, (jnp.zeros(()), jnp.ones(())))
    d = jnp.where(ok0, d0, solve(tau))
    return d.reshape(shape)


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
    """``x_candidate -> x_adv``: projection in input space for one lane."""
    if bounds is None:
        return lambda xa: x + project_cap(xa - x, u_hat, eps, alpha)
    lower = bounds[0] - x
    upper = bounds[1] - x

    def proj(xa):
        d = project_cap_box(xa - x, u_hat, eps, alpha, lower, upper,
                            box_iters=cfg.box_iters, tau_iters=cfg.tau_iters)
        return clip_box(x + d, bounds)

    return proj


# ---------------------------------------------------------------------------
# the constrained PGD lane (shared with attacks.vertex)
# ---------------------------------------------------------------------------


class _LaneState(NamedTuple):
    xa: jax.Array         # (*shape) current iterate (projected)
    xa_prev: jax.Array    # (*shape) previous iterate (momentum)
    eta: jax.Array        # () step size
    f_prev: jax.Array     # () margin at the previous iterate
    n_up: jax.Array       # () margin increases since the last checkpoint
    ckpt_eta: jax.Array   # () step at the last checkpoint
    ckpt_fmax: jax.Array  # () best margin at the last checkpoint
    x_max: jax.Array      # (*shape) highest-margin checked iterate
    f_max: jax.Array      # () its margin (-inf: none checked yet)
    adv_x: jax.Array      # (*shape) highest-margin checked adversarial iterate
    adv_f: jax.Array      # () its margin (-inf: none)


def constrained_lane(fn1, x, y, start, project, feasible, step, eta0, cfg: CapConfig, bounds):
    """APGD-style ascent of the logit margin over a constraint set, one lane.

    Args:
      fn1: logits of one input ``(*shape) -> (K,)``.
      x: clean input; y: label ``()``.
      start: starting point in input space (projected first).
      project: ``x_candidate -> x_adv`` onto the constraint set.
      feasible: ``x_adv -> bool``, the check of every constraint.
      step: ``(grad, size) -> displacement`` (steepest ascent of the norm).
      eta0: initial step size ``()``.
      cfg: :class:`CapConfig` (steps, momentum, rho).
      bounds: box or None (for gradient masking at faces).

    Returns:
      ``(x_adv, adversarial, feasible)``: the highest-margin checked
      adversarial iterate, else the highest-margin checked iterate, else
      ``x``; ``adversarial`` re-evaluated by one forward pass on ``x_adv``.
    """
    def objective(xa):
        logits = fn1(xa)
        return margin(logits, y), logits

    vg = jax.value_and_grad(objective, has_aux=True)
    ckpt = apgd_checkpoints(cfg.steps)
    lengths = _checkpoint_lengths(ckpt)
    x0 = project(start)
    ninf = jnp.asarray(-jnp.inf, jnp.float32)
    eta0 = jnp.asarray(eta0, jnp.float32)
    st0 = _LaneState(x0, x0, eta0, ninf, jnp.zeros(()), eta0, ninf, x, ninf, x, ninf)

    def body(s: _LaneState, xs):
        k, is_ckpt, length = xs
        (f, logits), g = vg(s.xa)
        f = jnp.where(jnp.isnan(f), -jnp.inf, f)
        ok = feasible(s.xa)
        fc = jnp.where(ok, f, -jnp.inf)
        better_adv = ok & (jnp.argmax(logits) != y) & (f > s.adv_f)
        adv_x = jnp.where(better_adv, s.xa, s.adv_x)
        adv_f = jnp.where(better_adv, f, s.adv_f)
        improved = fc > s.f_max
        x_max = jnp.where(improved, s.xa, s.x_max)
        f_max = jnp.maximum(fc, s.f_max)

        g = mask_box_gradient(g, s.xa, bounds)
        n_up = s.n_up + (f > s.f_prev).astype(jnp.float32)
        z = project(s.xa + step(g, s.eta))
        a = jnp.where(k == 0, 1.0, cfg.momentum)
        nxt = project(s.xa + a * (z - s.xa) + (1.0 - a) * (s.xa - s.xa_prev))
        cond1 = n_up < cfg.rho * length
        cond2 = (s.ckpt_eta == s.eta) & (s.ckpt_fmax == f_max)
        halve = is_ckpt & (cond1 | cond2)
        restart = halve & jnp.isfinite(f_max)
        eta = jnp.where(halve, s.eta / 2.0, s.eta)
        nxt = jnp.where(restart, x_max, nxt)
        prev = jnp.where(restart, x_max, s.xa)
        return _LaneState(
            nxt, prev, eta, f, jnp.where(is_ckpt, 0.0, n_up),
            jnp.where(is_ckpt, s.eta, s.ckpt_eta), jnp.where(is_ckpt, f_max, s.ckpt_fmax),
            x_max, f_max, adv_x, adv_f,
        ), None

    xs = (jnp.arange(cfg.steps), jnp.asarray(ckpt), jnp.asarray(lengths))
    s, _ = jax.lax.scan(body, st0, xs)
    found = jnp.isfinite(s.adv_f)
    best = jnp.where(found, s.adv_x, s.x_max)
    feas = feasible(best) & (found | jnp.isfinite(s.f_max))
    best = jnp.where(feas, best, x)
    adv = feas & (jnp.argmax(fn1(best)) != y)
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


@functools.partial(jax.jit, static_argnames=("logits_fn", "cfg", "bounds"))
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
    "unit",
]
