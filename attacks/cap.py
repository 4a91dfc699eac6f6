"""l_2 PGD on the eps-sphere, restricted to a spherical cap (paper 004, Sec. 4.2, App. A).

The admissible perturbations of one point ``x`` are

    C(u, alpha) = { delta : ||delta||_2 = eps,  angle(delta, u) <= alpha },

the spherical cap ``Sc(u, alpha)`` of paper 004 (eq. 6) scaled by ``eps``
(``alpha`` in radians, ``u`` any non-zero direction), intersected with the
input domain when there are bounds. The projections onto it are in
``attacks.cap_geometry``: exact without a box (App. A's construction,
corrected); with a box, a Newton active-set method on the KKT system that
certifies the exact projection, with a bracketing root finder as the
fallback (see that module).

**All constraints at once.** With a box, every iterate is the projection,
put into the box by a clip in input space (a change of at most a few ulps;
it makes ``lo <= x_adv <= hi`` hold exactly); the projection certifies its
output (on the sphere, angle within 1e-6 rad of the cap) and only certified
iterates are kept. Without a box the projection is exact, so every iterate
is feasible up to float rounding. In both cases the returned point is then
*checked* on its own: ``| ||x_adv - x|| - eps | <= rtol eps``,
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
gradient evaluations and one verifying forward pass per lane. Lanes work on
flat points (``(d,)`` vectors, reshaped for the model only): XLA:CPU
vectorises elementwise work and reductions along the minor axis, which is 1
for an ``(n, 28, 28, 1)`` batch (a per-lane sum of such a batch took about
ten times as long as of its ``(n, 784)`` view).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from attacks import checks, xla
from attacks.cap_geometry import (  # re-exported: the cap's geometry
    MinAnglePoint,
    cap_angle,
    cap_box_projector,
    cap_feasible,
    min_angle_point,
    orthogonal,
    project_cap,
    project_cap_box,
    project_cap_pre,
    sphere_box,
    unit,
)
from attacks.engine import _checkpoint_lengths, apgd_checkpoints, flat, mask_box_gradient, single
from attacks.losses import margin
from attacks.norms import clip_box, l2_norm, step_l2
from attacks.xla import program

_TINY = 1e-30


@dataclasses.dataclass(frozen=True)
class CapConfig:
    """Static configuration of a constrained PGD lane (a jit static argument).

    Attributes:
      steps: gradient evaluations per lane.
      initial_step: first step size as a multiple of ``eps`` (APGD uses 2).
      momentum: APGD's momentum ``alpha``.
      rho: APGD's checkpoint success fraction.
      newton_iters: cap on the Newton active-set solves of the box projection
        (``attacks.cap_geometry``); a lane that does not certify within it
        takes the bracketing fallback.
      box_iters: cap on the active-set passes of a sphere-box solve
        (exact once converged; non-converged lanes fail the check).
      tau_iters: Illinois (regula falsi) steps on the cap multiplier in the
        bracketing fallback, each one sphere-box solve. Every iterate is
        feasible whatever the count (the root finder keeps the side inside
        the cap); more steps bring it closer to the nearest point.
      rtol: tolerance of the constraint check: relative on the norm,
        radians on the angle.
    """

    steps: int = 20
    initial_step: float = 2.0
    momentum: float = 0.75
    rho: float = 0.75
    newton_iters: int = 8
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


def cap_projector(x, u_hat, eps, alpha, bounds, cfg: CapConfig, end: Optional[MinAnglePoint] = None
                  ) -> Callable:
    """``x_candidate -> x_adv``: projection in input space for one lane.

    With bounds it returns ``(x_adv, ok)``, ``ok`` the projection's certificate
    (``attacks.cap_geometry.cap_box_projector``); ``end`` is its
    :func:`min_angle_point` if the caller already has it (it does not depend
    on ``alpha``).
    """
    if bounds is None:
        ca, sa, orth = jnp.cos(alpha), jnp.sin(alpha), orthogonal(u_hat)

        def proj(xa):
            return x + project_cap_pre(xa - x, u_hat, eps, alpha, ca, sa, orth)

        return proj
    project = cap_box_projector(u_hat, eps, alpha, bounds[0] - x, bounds[1] - x,
                                newton_iters=cfg.newton_iters, box_iters=cfg.box_iters,
                                tau_iters=cfg.tau_iters, end=end)

    def proj_box(xa, warm):
        d, ok, warm = project(xa - x, warm)
        return clip_box(x + d, bounds), ok, warm

    return WarmProjection(jnp.full((2,), jnp.nan, jnp.float32), proj_box)


def sphere_projector(x, eps, bounds, cfg: CapConfig) -> Callable:
    """``x_candidate -> x_adv`` onto the eps-sphere (n box): the cap with ``alpha = pi``.

    ``x + eps z/||z||`` without bounds; with bounds the sphere-box solve
    (``attacks.cap_geometry.sphere_box``) alone (no cap). ``z = 0`` maps to
    ``x`` (no direction to choose; the check rejects it for eps > 0).
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
        d, _ = sphere_box(zh, lower, upper, eps, cfg.box_iters)
        return clip_box(x + d, bounds)

    return proj_box


def seed_and_end(x, u_hat, x_seed, eps, bounds, cfg: CapConfig):
    """``(seed, end)``: ``sphere_projector(x, eps, bounds, cfg)(x_seed)`` and, with bounds,
    ``min_angle_point(u_hat, eps, lo - x, hi - x)`` (else None), one lane.

    With bounds both are sphere-box solves, done as one (a batch of two), so
    the program holds one instance of the solve's loop instead of two (each
    costs compile time).
    """
    if bounds is None:
        return sphere_projector(x, eps, bounds, cfg)(x_seed), None
    z = x_seed - x
    zh = z / jnp.maximum(l2_norm(z), _TINY)
    d, ok = jax.vmap(lambda w: sphere_box(w, bounds[0] - x, bounds[1] - x, eps, cfg.box_iters))(jnp.stack([zh, u_hat]))
    return clip_box(x + d[0], bounds), MinAnglePoint(d[1], ok[1], cap_angle(d[1], u_hat))


# ---------------------------------------------------------------------------
# the constrained PGD lane (shared with attacks.vertex)
# ---------------------------------------------------------------------------


def misclassified(logits: jax.Array, y: jax.Array) -> jax.Array:
    """``argmax(logits) != y`` (first index wins ties), without an arg-reduction; never for
    non-finite logits."""
    z_y = logits[y]
    idx = jnp.arange(logits.shape[-1])
    return jnp.any((logits > z_y) | ((logits == z_y) & (idx < y))) & jnp.all(jnp.isfinite(logits))


class WarmProjection(NamedTuple):
    """A projection that carries state from step to step (a warm start).

    ``apply(x_candidate, state) -> (x_adv, ok, state)``; ``init`` is the state
    before the first step. The box projection carries the previous solution's
    KKT coefficients: its Newton iteration then starts from the active set of
    the previous step.
    """

    init: jax.Array
    apply: Callable


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
    warm: object          # the projection's state (WarmProjection), else None


def constrained_lane(fn1, x, y, start, project, feasible, step, eta0, cfg: CapConfig, bounds):
    """APGD-style ascent of the logit margin over a constraint set, one lane.

    Args:
      fn1: logits of one input ``(*shape) -> (K,)``.
      x: clean input; y: label ``()``.
      start: starting point in input space (projected first).
      project: ``x_candidate -> x_adv`` onto the constraint set, or
        ``-> (x_adv, ok)`` with its own certificate ``ok`` of feasibility, or
        a :class:`WarmProjection` (certificate and state).
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
    grad_call = xla.gradient_caller(fn1, x)
    ckpt = apgd_checkpoints(cfg.steps)
    lengths = _checkpoint_lengths(ckpt)
    ninf = jnp.asarray(-jnp.inf, jnp.float32)
    eta0 = jnp.asarray(eta0, jnp.float32)
    warm = isinstance(project, WarmProjection)
    st0 = _LaneState(start, start, eta0, ninf, jnp.zeros(()), eta0, ninf, x, ninf,
                     project.init if warm else None)

    def body(s: _LaneState, xs):
        k, is_ckpt, length = xs
        # The only projection of the step (one instance of it in the program).
        pstate = s.warm
        if warm:
            xa, ok, pstate = project.apply(s.cand, s.warm)
        else:
            xa = project(s.cand)
        if warm:
            pass
        elif isinstance(xa, tuple):  # the projection certifies its own output
            xa, ok = xa
        else:
            # Without a box the projection is exact, so iterates need no check
            # here (the returned point is checked below); with one, check.
            ok = feasible(xa) if bounds is not None else jnp.asarray(True)
        f, g = grad_call(vg, xa, k)
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
        return _LaneState(nxt, prev, eta, f, n_up, ckpt_eta, ckpt_fmax, x_max, f_max, pstate), None

    xs = (jnp.arange(cfg.steps), jnp.asarray(ckpt), jnp.asarray(lengths))
    s, _ = jax.lax.scan(body, st0, xs)
    best = s.x_max
    feas = feasible(best) & jnp.isfinite(s.f_max)
    best = jnp.where(feas, best, x)
    adv = feas & misclassified(fn1(best), y)
    return best, adv, feas


def cap_lane(fn1, x, y, eps, u_hat, alpha, start, cfg: CapConfig, bounds,
             end: Optional[MinAnglePoint] = None):
    """Cap-constrained l_2 PGD for one (point, direction, angle) lane.

    Args:
      fn1: ``(*shape) -> (K,)``; x: ``(*shape)``; y: ``()``; eps, alpha: ``()``.
        Flat points (``shape = (d,)``, ``fn1`` reshaping for the model) run
        faster on XLA:CPU (module docstring).
      u_hat: unit direction ``(*shape)``.
      start: starting point in input space (projected onto the cap first).
      end: with bounds, ``min_angle_point(u_hat, eps, lo - x, hi - x)`` if
        the caller has it (it is shared by all angles of a direction).

    Returns:
      ``(x_adv, adversarial, feasible)`` as in :func:`constrained_lane`.
    """
    proj = cap_projector(x, u_hat, eps, alpha, bounds, cfg, end)
    feas = lambda xa: cap_feasible(xa, x, u_hat, eps, alpha, bounds, cfg.rtol)  # noqa: E731
    return constrained_lane(fn1, x, y, start, proj, feas, step_l2, cfg.initial_step * eps, cfg, bounds)


# ---------------------------------------------------------------------------
# public attack
# ---------------------------------------------------------------------------


def check_directions(u, x, name: str = "u") -> jax.Array:
    """``u`` of the shape of ``x`` or of one input; returned as ``(n, *shape)``."""
    u = checks.check_array(u, name, min_ndim=1)
    shape = tuple(x.shape[1:])
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
    fn1 = single(logits_fn, x.shape[1:])

    def point(xi, yi, ei, ui, ai, ki):
        uh = unit(ui)
        start = xi + ei * unit(jax.random.normal(ki, xi.shape))
        return cap_lane(fn1, xi, yi, ei, uh, ai, start, cfg, bounds)

    xa, adv, feas = jax.vmap(point)(flat(x), y, eps, flat(u), alpha, keys)
    xa = xa.reshape(x.shape)
    # Re-check on the returned batch with the user's batched logits_fn.
    la = logits_fn(xa)
    adv = adv & (jnp.argmax(la, axis=-1) != y) & jnp.all(jnp.isfinite(la), axis=-1)
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
    "MinAnglePoint",
    "cap_angle",
    "cap_box_projector",
    "cap_feasible",
    "cap_lane",
    "cap_pgd",
    "cap_pgd_result",
    "constrained_lane",
    "min_angle_point",
    "project_cap",
    "project_cap_box",
    "seed_and_end",
    "sphere_projector",
    "unit",
]
