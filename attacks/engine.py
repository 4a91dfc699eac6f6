"""The projected-gradient engine shared by every l_p attack: one lane, one point.

A *lane* is one run of projected gradient ascent on one point at one radius
from one starting perturbation. Attacks ``vmap`` lanes over restarts and
search candidates, then over points; the step loop is a ``lax.scan``, so a
whole attack is one XLA program whose cost is ``steps`` gradient evaluations
per lane.

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
records the smallest-norm iterate that was misclassified — an adversarial
actually seen, never an extrapolation.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks.losses import confidently_adversarial, get_loss, margin
from attacks.norms import Geometry, clip_box, geometry, like


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """Static configuration of one lane (hashable: it is a jit static argument).

    Attributes:
      norm: 'linf' | 'l2' | 'l1'.
      steps: gradient evaluations per lane.
      loss: 'margin' (logit margin, CW f6) or 'ce' (cross-entropy).
      schedule: 'apgd' (adaptive, momentum) or 'fixed'.
      momentum: APGD's alpha.
      rho: APGD's checkpoint success fraction.
      l1_sparsity: quantile of |grad| above which the l1 step moves coordinates.
    """

    norm: str = "linf"
    steps: int = 20
    loss: str = "margin"
    schedule: str = "apgd"
    momentum: float = 0.75
    rho: float = 0.75
    l1_sparsity: float = 0.99


class LaneState(NamedTuple):
    delta: jax.Array       # (*shape) current perturbation, x + delta inside the box
    delta_prev: jax.Array  # (*shape) previous iterate (momentum)
    eta: jax.Array         # () current step size (absolute, in the attack norm)
    f_prev: jax.Array      # () loss at the previous iterate
    n_up: jax.Array        # () loss increases since the last checkpoint
    ckpt_eta: jax.Array    # () step size at the last checkpoint
    ckpt_fmax: jax.Array   # () best loss at the last checkpoint
    delta_max: jax.Array   # (*shape) iterate with the highest loss
    f_max: jax.Array       # () highest loss seen
    adv_delta: jax.Array   # (*shape) smallest-norm misclassified iterate
    adv_norm: jax.Array    # () its norm; inf if none seen
    adv_margin: jax.Array  # () its logit margin (> 0)


class LaneResult(NamedTuple):
    delta_max: jax.Array  # (*shape) highest-loss iterate
    f_max: jax.Array      # ()
    adv_delta: jax.Array  # (*shape) smallest-norm adversarial iterate (zeros if none)
    adv_norm: jax.Array   # () inf if no adversarial iterate was seen
    adv_margin: jax.Array  # () logit margin of adv_delta (for the ray search)


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


def run_lane(
    fn1: Callable,
    x: jax.Array,
    y: jax.Array,
    eps: jax.Array,
    delta0: jax.Array,
    step_size: jax.Array,
    cfg: EngineConfig,
    bounds: Optional[Tuple[float, float]],
) -> LaneResult:
    """Projected gradient ascent of ``cfg.loss`` on one point, one radius.

    Args:
      fn1: logits of one input, ``(*shape) -> (K,)``.
      x: the clean input, shape ``(*shape)``.
      y: its label, ``()`` int.
      eps: radius of the ball in ``cfg.norm``, ``()``.
      delta0: starting perturbation ``(*shape)`` (projected first).
      step_size: ``()``; initial step for 'apgd' (typically ``2 * eps``),
        the constant step for 'fixed'.
      cfg: static configuration.
      bounds: ``(lo, hi)`` box or None.

    Returns:
      LaneResult: highest-loss iterate and smallest-norm adversarial iterate.
    """
    geo: Geometry = geometry(cfg.norm, cfg.l1_sparsity)
    loss = get_loss(cfg.loss)

    def proj(delta):
        return clip_box(x + geo.project(delta, eps), bounds) - x

    def objective(delta):
        logits = fn1(x + delta)
        return loss(logits, y), logits

    value_and_grad = jax.value_and_grad(objective, has_aux=True)
    ckpt = apgd_checkpoints(cfg.steps)
    lengths = _checkpoint_lengths(ckpt)
    apgd = cfg.schedule == "apgd"

    d0 = proj(delta0)
    zeros = jnp.zeros_like(x)
    eta0 = like(x, 0.0) + step_size
    state = LaneState(
        delta=d0, delta_prev=d0, eta=eta0, f_prev=like(x, -jnp.inf), n_up=like(x, 0.0),
        ckpt_eta=eta0, ckpt_fmax=like(x, -jnp.inf), delta_max=d0, f_max=like(x, -jnp.inf),
        adv_delta=zeros + 0 * x, adv_norm=like(x, jnp.inf), adv_margin=like(x, 0.0),
    )

    def body(s: LaneState, xs):
        k, is_ckpt, length = xs
        (f, logits), g = value_and_grad(s.delta)
        f = jnp.where(jnp.isnan(f), -jnp.inf, f)
        # Free bookkeeping from this evaluation: adversarial iterate, best loss.
        nrm = geo.norm(s.delta)
        better_adv = confidently_adversarial(logits, y) & (nrm < s.adv_norm)
        adv_delta = jnp.where(better_adv, s.delta, s.adv_delta)
        adv_norm = jnp.where(better_adv, nrm, s.adv_norm)
        adv_margin = jnp.where(better_adv, margin(logits, y), s.adv_margin)
        improved = f > s.f_max
        delta_max = jnp.where(improved, s.delta, s.delta_max)
        f_max = jnp.maximum(f, s.f_max)

        if cfg.norm != "linf":  # for sign steps the box clip already does this
            g = mask_box_gradient(g, x + s.delta, bounds)
        if apgd:
            n_up = s.n_up + (f > s.f_prev).astype(jnp.float32)
            z = proj(s.delta + geo.step(g, s.eta))
            alpha = jnp.where(k == 0, 1.0, cfg.momentum)
            nxt = proj(s.delta + alpha * (z - s.delta) + (1.0 - alpha) * (s.delta - s.delta_prev))
            # Checkpoint: halve the step and restart from the best point. The
            # predicate is the same for every lane (a scan input, not vmapped),
            # so this is a real branch: ordinary steps skip its selects.
            def at_checkpoint(ops):
                nxt, n_up = ops
                cond1 = n_up < cfg.rho * length
                cond2 = (s.ckpt_eta == s.eta) & (s.ckpt_fmax == f_max)
                halve = cond1 | cond2
                return (jnp.where(halve, delta_max, nxt), jnp.where(halve, delta_max, s.delta),
                        jnp.where(halve, s.eta / 2.0, s.eta), s.eta, f_max, jnp.zeros_like(n_up))

            def ordinary(ops):
                nxt, n_up = ops
                return nxt, s.delta, s.eta, s.ckpt_eta, s.ckpt_fmax, n_up

            nxt, prev, eta, ckpt_eta, ckpt_fmax, n_up = jax.lax.cond(
                is_ckpt, at_checkpoint, ordinary, (nxt, n_up))
        else:
            nxt = proj(s.delta + geo.step(g, s.eta))
            prev, eta, ckpt_eta, ckpt_fmax, n_up = s.delta, s.eta, s.ckpt_eta, s.ckpt_fmax, s.n_up
        new = LaneState(
            delta=nxt, delta_prev=prev, eta=eta, f_prev=f, n_up=n_up,
            ckpt_eta=ckpt_eta, ckpt_fmax=ckpt_fmax, delta_max=delta_max, f_max=f_max,
            adv_delta=adv_delta, adv_norm=adv_norm, adv_margin=adv_margin,
        )
        return new, None

    xs = (jnp.arange(cfg.steps), jnp.asarray(ckpt), jnp.asarray(lengths))
    final, _ = jax.lax.scan(body, state, xs)
    return LaneResult(final.delta_max, final.f_max, final.adv_delta, final.adv_norm, final.adv_margin)


def single(logits_fn: Callable) -> Callable:
    """``(*shape) -> (K,)`` view of a batched ``logits_fn``."""
    return lambda xi: logits_fn(xi[None])[0]


__all__ = ["EngineConfig", "LaneResult", "apgd_checkpoints", "mask_box_gradient", "run_lane", "single"]
