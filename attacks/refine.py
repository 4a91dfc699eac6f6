"""Boundary search along a ray: shrink a found adversarial toward the clean point.

Given an adversarial ``x + delta``, the points ``x + t delta`` for
``t in [0, 1]`` stay inside any box that holds both ends and have norm
``t ||delta||``. A safeguarded regula falsi (Illinois variant) on the logit
margin ``m(t)`` finds the smallest ``t`` at which the model is still fooled,
using forward passes only (no gradients): exact in one step for a linear
model, superlinear for smooth ones, and never worse than the starting point
because only verified-adversarial points replace the upper end.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import jax
import jax.numpy as jnp

from attacks.losses import confidently_adversarial, margin
from attacks.norms import clip_box, like


def ray_search(fn1: Callable, x, y, delta, steps: int,
               bounds: Optional[Tuple[float, float]] = None,
               m_lo: Optional[jax.Array] = None, m_hi: Optional[jax.Array] = None) -> jax.Array:
    """The closest verified adversarial point on the segment ``x -> x + delta``.

    Args:
      fn1: ``(*shape) -> (K,)`` logits of one input.
      x: clean input ``(*shape)``, correctly classified (margin < 0 at t = 0).
      y: label ``()``.
      delta: perturbation ``(*shape)`` with ``x + delta`` adversarial.
      steps: forward evaluations of the search.
      bounds: box to clip the candidates to (a no-op for points of the segment
        when both ends are inside).
      m_lo, m_hi: the logit margins at ``x`` and ``x + delta`` when the caller
        already has them (saves two forward passes).

    Returns:
      The adversarial point ``(*shape)``: ``clip(x + t delta)`` for the
      smallest confirmed ``t``, rebuilt from ``t`` by the expression that
      was evaluated (``x + delta`` itself if no closer point was confirmed).
      Carrying only ``t`` instead of the point saves two passes over the
      input per step; the result is re-checked by the caller anyway.
    """
    if m_lo is None:
        m_lo = margin(fn1(x), y)
    if m_hi is None:
        m_hi = margin(fn1(x + delta), y)

    def body(_, c):
        t_lo, t_hi, m_lo, m_hi, side = c
        denom = m_hi - m_lo
        safe = jnp.where(denom > 0, denom, 1.0)
        t_sec = jnp.where(denom > 0, t_lo - m_lo * (t_hi - t_lo) / safe, 0.5 * (t_lo + t_hi))
        # Nudge past the root so an exact-boundary tie lands on the adversarial
        # side, and stay strictly inside the bracket.
        width = t_hi - t_lo
        t = jnp.clip(t_sec + 1e-4 * width, t_lo + 1e-3 * width, t_hi - 1e-6 * width)
        logits = fn1(point(t))
        m = margin(logits, y)
        adv = confidently_adversarial(logits, y)
        # Illinois: halve the retained end's margin when the same side moves twice.
        new_t_hi = jnp.where(adv, t, t_hi)
        new_m_hi = jnp.where(adv, jnp.maximum(m, 1e-30), jnp.where(side == 1, m_hi * 0.5, m_hi))
        new_t_lo = jnp.where(adv, t_lo, t)
        new_m_lo = jnp.where(adv, jnp.where(side == -1, m_lo * 0.5, m_lo), jnp.minimum(m, -1e-30))
        new_side = jnp.where(adv, -1, 1)
        return new_t_lo, new_t_hi, new_m_lo, new_m_hi, new_side

    def point(t):
        return clip_box(x + t * delta, bounds)

    init = (like(x, 0.0), like(x, 1.0), jnp.minimum(m_lo, -1e-30), jnp.maximum(m_hi, 1e-30), like(x, 0, jnp.int32))
    t_hi = jax.lax.fori_loop(0, steps, body, init)[1]
    # Only the scalar t of the closest confirmed point is carried; the point is
    # rebuilt here by the same expression that was evaluated (``x + delta``
    # itself when nothing closer was confirmed).
    return jnp.where(t_hi < 1.0, point(t_hi), x + delta)


__all__ = ["ray_search"]
