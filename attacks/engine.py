"""The projected-gradient engine shared by every l_p attack: one lane, one point.

A *lane* is one run of projected gradient ascent on one point at one radius
from one starting perturbation. Attacks ``vmap`` lanes over restarts and
search candidates, then over points (or, where that batch would outgrow the
caches, run the lanes one after another over all points:
``attacks.xla.lanes_in_loop``); the step loop is a ``lax.scan``, so a
whole attack is one XLA program whose cost is ``steps`` model evaluations per
lane: ``steps - 1`` gradients and a forward pass at the last iterate (the step
from there would never be evaluated).

Two step-size schedules:

* ``"apgd"`` — Auto-PGD (Croce & Hein 2020, Algorithm 1): initial step
  ``2 * eps``, momentum ``alpha = 0.75``, and at the checkpoints
  ``w_j = ceil(p_j * steps)`` with ``p_0 = 0, p_1 = 0.22,
  p_{j+1} = p_j + max(p_j - p_{j-1} - 0.03, 0.06)`` the step is halved and the
  iterate reset to the best point so far when fewer than ``rho = 0.75`` of the
  steps since the last checkpoint increased the loss, or when neither the step
  nor the best loss changed.
* ``"fixed"`` — Madry et al. 2018: ``delta <- P(delta + step_size * s(grad))``.

Every iterate's logits come for free with its gradient, so each lane also
reports an adversarial actually seen, never an extrapolation: by default
(``track='loss'``) its highest-loss iterate, which APGD keeps anyway, if that
is misclassified; with ``track='norm'`` its smallest-norm misclassified
iterate.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks import checks, xla
from attacks.losses import TARGETED_LOSSES, confidently_adversarial, get_loss, margin
from attacks.norms import Geometry, clip_box, geometry, like
from attacks.surrogate import smooth_relu_model


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """Static configuration of one lane (hashable: it is a jit static argument).

    Attributes:
      norm: 'linf' | 'l2' | 'l1'.
      steps: iterates evaluated per lane (``steps - 1`` gradients, one forward pass).
      loss: 'margin' (logit margin, CW f6), 'ce' (cross-entropy), 'dlr'
        (Croce & Hein's difference of logits ratio) or 'dlr-t' (its targeted
        form; the lane's ``target`` class).
      schedule: 'apgd' (adaptive, momentum) or 'fixed'.
      momentum: APGD's alpha.
      rho: APGD's checkpoint success fraction.
      l1_sparsity: quantile of |grad| above which the l1 step moves coordinates.
      track: which adversarial iterate a lane returns. 'loss': the
        highest-loss iterate, if it is (confidently) misclassified; free,
        since APGD keeps that iterate anyway. 'norm': the smallest-norm
        misclassified iterate; costs a norm and a select over the input per
        step.
      grad_noise: 0, or ``sigma > 0``: every step's gradient is taken at
        ``p + sigma * xi`` (``xi`` standard normal, drawn from the lane's
        ``key``; the point clipped to the box), the gradient of the loss
        smoothed by Gaussian noise, while the loss, the step-size control and
        the adversarial reported are those of the iterate ``p`` itself (one
        more forward pass per step). A remedy for gradients masked near the
        data (a model whose first layer thresholds its input): the noisy
        points cross the thresholds that a gradient at ``p`` does not see.
    """

    norm: str = "linf"
    steps: int = 20
    loss: str = "margin"
    schedule: str = "apgd"
    momentum: float = 0.75
    rho: float = 0.75
    l1_sparsity: float = 0.99
    track: str = "loss"
    grad_noise: float = 0.0

    def __post_init__(self):
        checks.check_choice(self.track, ("loss", "norm"), "track")
        if not (isinstance(self.grad_noise, (int, float)) and math.isfinite(self.grad_noise)
                and self.grad_noise >= 0):
            raise ValueError(f"grad_noise: expected a finite number >= 0, got {self.grad_noise!r}")


class LaneState(NamedTuple):
    """A lane's loop state besides its two iterate buffers (see ``run_lane``)."""

    eta: jax.Array         # () current step size (absolute, in the attack norm)
    moving: jax.Array      # () 1.0, or 0.0 right after a restart: no momentum term in the next step
    f_prev: jax.Array      # () loss at the previous iterate
    n_up: jax.Array        # () loss increases since the last checkpoint
    ckpt_eta: jax.Array    # () step size at the last checkpoint
    ckpt_fmax: jax.Array   # () best loss at the last checkpoint
    point_max: jax.Array   # (*shape) iterate with the highest loss
    f_max: jax.Array       # () highest loss seen
    max_adv: jax.Array     # () point_max is confidently misclassified
    max_margin: jax.Array  # () logit margin at point_max
    adv_point: jax.Array   # (*shape) smallest-norm misclassified iterate
    adv_norm: jax.Array    # () its distance to x; inf if none seen
    adv_margin: jax.Array  # () its logit margin (> 0)


class LaneResult(NamedTuple):
    point_max: jax.Array  # (*shape) highest-loss iterate (a point, x + delta)
    f_max: jax.Array      # ()
    adv_point: jax.Array  # (*shape) the adversarial iterate the lane reports (meaningless if adv_norm is inf)
    adv_norm: jax.Array   # () its distance to x, geo.norm(adv_point - x); inf if no adversarial iterate was seen
    adv_margin: jax.Array  # () logit margin of adv_point (for the ray search)
    margin_max: jax.Array  # () logit margin of point_max (the lane's estimate of the largest margin in the ball)
    eta: Optional[jax.Array] = None  # () the step size the lane ended with (APGD halves it as it goes)


def apgd_checkpoints(steps: int) -> np.ndarray:
    """Boolean mask (steps,) of APGD checkpoint iterations (Croce & Hein 2020)."""
    p = [0.0, 0.22]
    while p[-1] < 1.0:
        p.append(p[-1] + max(p[-1] - p[-2] - 0.03, 0.06))
    mask = np.zeros(steps, dtype=bool)
    for pj in p[1:]:
        w = int(math.ceil(round(pj * steps, 6)))
        if 0 < w < steps:
            mask[w] = True
    return mask


def _checkpoint_lengths(mask: np.ndarray) -> np.ndarray:
    """Number of iterations since the previous checkpoint, at each checkpoint."""
    lengths = np.ones(mask.shape[0], dtype=np.float32)
    last = 0
    for k in np.flatnonzero(mask):
        lengths[k] = max(k - last, 1)
        last = k
    return lengths


def mask_box_gradient(g, x_adv, bounds):
    """Zero gradient entries that push a coordinate already at a box face outward."""
    if bounds is None:
        return g
    lo, hi = bounds
    out = ((x_adv <= lo) & (g < 0)) | ((x_adv >= hi) & (g > 0))
    return jnp.where(out, 0.0, g)


def ball_projection(geo: Geometry, x, eps, bounds) -> Callable:
    """``u -> `` the point of ``{||p - x|| <= eps} ∩ box`` reached by projecting
    onto the ball and then clipping to the box (exact for l_inf, where it is
    one clamp against precomputed per-coordinate limits)."""
    if geo.name == "linf":
        lo, hi = x - eps, x + eps
        if bounds is not None:
            lo, hi = jnp.maximum(lo, bounds[0]), jnp.minimum(hi, bounds[1])
        return lambda u: jnp.clip(u, lo, hi)
    return lambda u: clip_box(x + geo.project(u - x, eps), bounds)


def run_lane(
    fn1: Callable,
    x: jax.Array,
    y: jax.Array,
    eps: jax.Array,
    delta0: jax.Array,
    step_size: jax.Array,
    cfg: EngineConfig,
    bounds: Optional[Tuple[float, float]],
    feasible: bool = False,
    target: Optional[jax.Array] = None,
    key: Optional[jax.Array] = None,
) -> LaneResult:
    """Projected gradient ascent of ``cfg.loss`` on one point, one radius.

    Args:
      fn1: logits of one input, ``(*shape) -> (K,)``.
      x: the clean input, shape ``(*shape)``.
      y: its label, ``()`` int.
      eps: radius of the ball in ``cfg.norm``, ``()``.
      delta0: starting perturbation ``(*shape)``, projected first unless
        ``feasible``.
      step_size: ``()``; initial step for 'apgd' (typically ``2 * eps``),
        the constant step for 'fixed'.
      cfg: static configuration.
      bounds: ``(lo, hi)`` box or None.
      feasible: the caller guarantees that ``x + delta0`` lies in the ball
        and the box (e.g. a point of the segment from ``x`` to an earlier
        iterate): it is used as it is (an l_2 projection costs two passes
        over the input).
      target: ``()`` int, the target class of a targeted loss
        (``cfg.loss`` in ``attacks.losses.TARGETED_LOSSES``); else unused.
      key: PRNG key of the gradient noise (required when ``cfg.grad_noise
        > 0``; else unused).

    Returns:
      LaneResult: highest-loss iterate and the adversarial iterate reported.

    The loop carries iterates themselves (``x + delta``, what the model sees)
    in two buffers, current and previous (APGD's momentum needs both). Each
    scan iteration runs two steps and each step writes its new iterate over
    the previous one, so the buffers swap roles twice and XLA never copies one
    to rotate them (one step per iteration cost a copy of each carried array
    per step: ~7% of a step on the 784-256-256-10 MLP). The APGD checkpoint
    test is a select on a scalar that the scan feeds in, not a ``lax.cond``
    (whose operands XLA copied); right after a restart from the best point
    the momentum term ``p - prev`` is dropped (``moving = 0``).
    """
    geo: Geometry = geometry(cfg.norm, cfg.l1_sparsity)
    if cfg.grad_noise > 0 and key is None:
        raise ValueError("key: run_lane needs a key for grad_noise > 0")
    loss = get_loss(cfg.loss)
    proj = ball_projection(geo, x, eps, bounds)

    targeted = cfg.loss in TARGETED_LOSSES

    def objective(p):
        logits = fn1(p)
        return (loss(logits, y, target) if targeted else loss(logits, y)), logits

    value_and_grad = jax.value_and_grad(objective, has_aux=True)
    # The step reads g in four fusions: computed once if the model's input
    # gradient is a chain XLA would recompute in each (attacks.xla).
    grad_call = xla.gradient_caller(fn1, x)
    ckpt_np = apgd_checkpoints(cfg.steps)
    ckpt, lengths = jnp.asarray(ckpt_np), jnp.asarray(_checkpoint_lengths(ckpt_np))
    apgd = cfg.schedule == "apgd"
    track_norm = cfg.track == "norm"

    def record(p, f, logits, s: LaneState, keep_best=True):
        """Bookkeeping from one evaluation at ``p``: best loss, adversarial
        iterate. Returns ``(f, up, state)``, ``up`` when ``p`` is the new
        highest-loss point; with ``keep_best=False`` the caller updates
        ``point_max`` itself."""
        f = jnp.where(jnp.isnan(f), -jnp.inf, f)
        up = f > s.f_max
        if track_norm:
            nrm = geo.norm(p - x)
            better_adv = confidently_adversarial(logits, y) & (nrm < s.adv_norm)
            s = s._replace(
                adv_point=jnp.where(better_adv, p, s.adv_point),
                adv_norm=jnp.where(better_adv, nrm, s.adv_norm),
                adv_margin=jnp.where(better_adv, margin(logits, y), s.adv_margin),
            )
        else:
            s = s._replace(max_adv=jnp.where(up, confidently_adversarial(logits, y), s.max_adv))
        if keep_best:
            s = s._replace(point_max=jnp.where(up, p, s.point_max))
        return f, up, s._replace(f_max=jnp.maximum(f, s.f_max), max_margin=jnp.where(up, margin(logits, y), s.max_margin))

    def step(p, prev, s: LaneState, k, is_ckpt, length, keep_best=True):
        """One step from iterate ``p`` (``prev`` the one before): ``(next
        iterate, state, up)``. With ``keep_best=False``, ``point_max`` is left
        to the caller (``up``: ``p`` is the new best)."""
        if cfg.grad_noise > 0:
            # the gradient at a noisy copy of p, the loss at p itself
            pn = p + cfg.grad_noise * jax.random.normal(jax.random.fold_in(key, k), p.shape, p.dtype)
            pn = pn if bounds is None else jnp.clip(pn, bounds[0], bounds[1])
            _, g = grad_call(value_and_grad, pn, k)
            f, logits = objective(p)
        else:
            (f, logits), g = grad_call(value_and_grad, p, k)
        # Free bookkeeping from this evaluation: adversarial iterate, best loss.
        f, up, s = record(p, f, logits, s, keep_best)
        if cfg.norm != "linf":  # for sign steps the box clip already does this
            g = mask_box_gradient(g, p, bounds)
        if not apgd:
            return proj(p + geo.step(g, s.eta)), s._replace(f_prev=f), up
        n_up = s.n_up + (f > s.f_prev).astype(jnp.float32)
        z = proj(p + geo.step(g, s.eta))
        alpha = jnp.where(k == 0, 1.0, cfg.momentum)
        nxt = proj(p + alpha * (z - p) + (1.0 - alpha) * s.moving * (p - prev))
        # Checkpoint (Croce & Hein 2020, Alg. 1): halve the step and restart
        # from the best point when too few steps increased the loss, or when
        # neither the step nor the best loss changed since the last one.
        halve = (n_up < cfg.rho * length) | ((s.ckpt_eta == s.eta) & (s.ckpt_fmax == s.f_max))
        reset = is_ckpt & halve
        if keep_best:
            nxt = jnp.where(reset, s.point_max, nxt)
        else:   # the best is where(up, p, point_max), written differently (see two_steps)
            nxt = jnp.where(reset & up, p, jnp.where(reset, s.point_max, nxt))
        return nxt, s._replace(
            eta=jnp.where(reset, s.eta / 2.0, s.eta), moving=jnp.where(reset, 0.0, 1.0), f_prev=f,
            n_up=jnp.where(is_ckpt, 0.0, n_up),
            ckpt_eta=jnp.where(is_ckpt, s.eta, s.ckpt_eta),
            ckpt_fmax=jnp.where(is_ckpt, s.f_max, s.ckpt_fmax),
        ), up

    p0 = x + delta0 if feasible else proj(x + delta0)
    eta0 = like(x, 0.0) + step_size
    ninf = like(x, -jnp.inf)
    state = LaneState(
        eta=eta0, moving=like(x, 0.0), f_prev=ninf, n_up=like(x, 0.0), ckpt_eta=eta0,
        ckpt_fmax=ninf, point_max=p0, f_max=ninf, max_adv=like(x, False, jnp.bool_),
        max_margin=ninf, adv_point=p0, adv_norm=like(x, jnp.inf), adv_margin=like(x, 0.0),
    )

    def two_steps(carry, xs):
        cur, prev, s = carry
        (k1, c1, l1), (k2, c2, l2) = xs
        # The new iterate overwrites the previous one. The best point is
        # written once per two steps: the first step's update of it is left as
        # an expression that only the second step's update reads (its own
        # reset target is the same select written differently, so XLA does not
        # share, hence write, it); one pass over three inputs instead of two
        # over two.
        pm0 = s.point_max
        prev, s, up = step(cur, prev, s, k1, c1, l1, keep_best=False)
        s = s._replace(point_max=jnp.where(up, cur, pm0))
        cur, s, _ = step(prev, cur, s, k2, c2, l2)
        return (cur, prev, s), None

    # The last evaluation only needs the logits: the step it would take is
    # never evaluated. So ``steps - 1`` gradient steps, then one forward pass
    # (the same iterates and results as ``steps`` full steps).
    moves = cfg.steps - 1
    m = 2 * (moves // 2)
    ks = jnp.arange(cfg.steps)
    xs = ((ks[0:m:2], ckpt[0:m:2], lengths[0:m:2]), (ks[1:m:2], ckpt[1:m:2], lengths[1:m:2]))
    (cur, prev, final), _ = jax.lax.scan(two_steps, (p0, p0, state), xs)
    if moves % 2:
        cur, final, _ = step(cur, prev, final, ks[m], ckpt[m], lengths[m])
    _, _, final = record(cur, *objective(cur), final)
    if track_norm:
        return LaneResult(final.point_max, final.f_max, final.adv_point, final.adv_norm, final.adv_margin,
                          final.max_margin, final.eta)
    adv_norm = jnp.where(final.max_adv, geo.norm(final.point_max - x), jnp.inf)
    return LaneResult(final.point_max, final.f_max, final.point_max, adv_norm, final.max_margin, final.max_margin,
                      final.eta)


def single(logits_fn: Callable, shape: Optional[Tuple[int, ...]] = None, relu_temperature: float = 0.0) -> Callable:
    """One point's logits from a batched ``logits_fn``.

    ``single(f)`` maps ``(*shape) -> (K,)``. ``single(f, shape)`` maps a flat
    ``(d,)`` vector, ``d = prod(shape)``, reshaping it for the model: the
    attacks run on flat points, because XLA:CPU vectorises elementwise work
    along the minor axis, which is 1 for an ``(n, 28, 28, 1)`` image batch
    (``tanh`` of such a batch takes 4x as long as of its ``(n, 784)`` view).
    Measured on the whole attacks: faster on the MNIST MLP (CW 23%, l_inf
    search 11-18%), but the l_2 search on the 2-conv CNN of paper 000 got
    about 10% slower (benchmarks/attack_overhead.py; see the issue notes).
    ``relu_temperature > 0``: the same logits with every ReLU's derivative
    smoothed (``attacks.surrogate.smooth_relu_model``).
    """
    model = xla.loop_model(logits_fn, None if shape is None else (1,) + tuple(shape))
    if relu_temperature > 0:
        model = smooth_relu_model(model, relu_temperature)
    if shape is None:
        return lambda xi: model(xi[None])[0]
    shape = tuple(shape)
    return lambda v: model(v.reshape((1,) + shape))[0]


def flat(x: jax.Array) -> jax.Array:
    """``(n, *shape) -> (n, d)`` view of a batch of points."""
    return x.reshape(x.shape[0], -1)


__all__ = ["EngineConfig", "LaneResult", "LaneState", "apgd_checkpoints", "ball_projection", "mask_box_gradient", "flat", "run_lane", "single"]
