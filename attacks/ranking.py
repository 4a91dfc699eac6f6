"""Which classes to aim at: the linearised distance to each class's boundary.

A targeted search spends one lane per target class, so the classes it aims
at decide which boundaries it can reach. Ranking the other classes by their
logits at the clean point (APGD-T's choice, Croce & Hein 2020) misses the
nearest boundary on adversarially trained networks: on the zoo's digits MLP
trained at l_inf 0.1 the class of the best known l_inf adversarial is outside
the four most likely other classes for 19 of 249 points.

``linear_distances`` ranks them by the distance to each boundary of the model
linearised at the clean point, *inside the box*: with ``g_t = grad(z_t -
z_y)(x)`` and ``gap_t = z_y(x) - z_t(x)``, the smallest ``||delta||`` with
``g_t . delta >= gap_t`` and ``x + delta`` in the box. For an unbounded
linear model this is the exact distance to class ``t``'s boundary
(``gap_t / ||g_t||_*``, 000 Lemma 1; the minimum over ``t`` is the minimal
distance); the box matters on images, where most pixels sit on a face of it
and can move one way only. Measured on that model: the best known class is
then the nearest one for 206 of 249 points and among the nearest three for
all (``benchmarks/attack_quality.py``).

Inside the box the problem is separable, solved per norm:

* l_inf: the largest gain within radius ``e`` is ``sum_i |g_i| min(e,
  room_i)``, ``room_i`` the distance from ``x_i`` to the face that
  ``sign(g_i)`` points at; the radius is where it reaches ``gap``;
* l_2: the minimiser is ``delta_i = sign(g_i) min(lam |g_i|, room_i)`` (the
  KKT point of a box-clipped ray), ``lam`` where the gain reaches ``gap``;
* l_1: coordinates are filled in decreasing ``|g_i|`` up to their room (a sort).

For l_inf and l_2, ``e`` and ``lam`` are found by geometric bisection
(``ROUNDS`` halvings, from the unclipped solution, a lower bound, to the
value at which every coordinate is at its room; no sort).

Cost: one Jacobian of the logits at the clean point, ``K`` backward passes
(one after the other, each batched over the points) and one forward pass per
point (``gradients_for_ranking``).
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import jax
import jax.numpy as jnp

#: Bisection halvings of the linearised box distances.
ROUNDS = 16


def _room(g: jax.Array, x: jax.Array, bounds) -> jax.Array:
    """Per-coordinate movement available along ``sign(g)`` inside the box."""
    if bounds is None:
        return jnp.full_like(x, jnp.inf)
    lo, hi = bounds
    return jnp.where(g > 0, hi - x, jnp.where(g < 0, x - lo, 0.0))


def linear_box_distance(g: jax.Array, gap: jax.Array, x: jax.Array, norm: str, bounds) -> jax.Array:
    """Smallest ``||delta||_norm`` with ``g . delta >= gap`` and ``x + delta`` in the box.

    Args:
      g: ``(d,)`` gradient of the linearised margin ``z_t - z_y``.
      gap: ``()`` its value to close, ``z_y(x) - z_t(x)`` (``<= 0``: distance 0).
      x: ``(d,)`` the clean point.
      norm: 'linf', 'l2' or 'l1'.
      bounds: ``(lo, hi)`` or None (unbounded).

    Returns:
      ``()`` the distance; ``inf`` if no point of the box reaches the gap.
    """
    a = jnp.abs(g)
    room = _room(g, x, bounds)
    reach = jnp.sum(jnp.where(a > 0, a * room, 0.0))     # the largest gain in the box (inf unbounded)
    if bounds is None:
        dual = {"linf": jnp.sum(a), "l2": jnp.sqrt(jnp.sum(a * a)), "l1": jnp.max(a)}[norm]
        d = gap / jnp.maximum(dual, 1e-30)
        return jnp.where(gap <= 0, 0.0, jnp.where(dual > 0, d, jnp.inf))

    def bisect(gain, lo, hi):
        # geometric halvings of [lo, hi] (lo: the unclipped solution, a lower
        # bound; the gain only falls when coordinates hit their room)
        lo = jnp.maximum(lo, 1e-30)
        hi = jnp.maximum(hi, lo)

        def body(_, lh):
            lo_, hi_ = lh
            mid = jnp.sqrt(lo_ * hi_)
            ok = gain(mid) >= gap
            return jnp.where(ok, lo_, mid), jnp.where(ok, mid, hi_)
        return jax.lax.fori_loop(0, ROUNDS, body, (lo, hi))[1]

    if norm == "linf":
        e = bisect(lambda e: jnp.sum(a * jnp.minimum(e, room)), gap / jnp.maximum(jnp.sum(a), 1e-30),
                   jnp.max(jnp.where(a > 0, room, 0.0)))
    elif norm == "l2":
        lam = bisect(lambda lam: jnp.sum(a * jnp.minimum(lam * a, room)), gap / jnp.maximum(jnp.sum(a * a), 1e-30),
                     jnp.max(jnp.where(a > 0, room / jnp.maximum(a, 1e-30), 0.0)))
        step = jnp.minimum(lam * a, room)
        e = jnp.sqrt(jnp.sum(step * step))
    else:
        # greedy: coordinates in decreasing |g_i|, each moved to its room,
        # the last one partly (a sort; l_1 is not bisected)
        order = jnp.argsort(-a)
        a_s, r_s = a[order], room[order]
        gain = jnp.cumsum(a_s * r_s)
        cost = jnp.cumsum(r_s)
        k = jnp.sum(gain < gap)                               # coordinates filled completely
        k = jnp.minimum(k, a.shape[0] - 1)
        before_gain = jnp.where(k > 0, gain[jnp.maximum(k - 1, 0)], 0.0)
        before_cost = jnp.where(k > 0, cost[jnp.maximum(k - 1, 0)], 0.0)
        e = before_cost + jnp.maximum(gap - before_gain, 0.0) / jnp.maximum(a_s[k], 1e-30)
    return jnp.where(gap <= 0, 0.0, jnp.where(reach >= gap, e, jnp.inf))


def linear_distances(fn1: Callable, x: jax.Array, y: jax.Array, norm: str,
                     bounds: Optional[Tuple[float, float]]) -> Tuple[jax.Array, jax.Array]:
    """``(K,)`` linearised box distances from ``x`` to each class's boundary.

    Args:
      fn1: logits of one input, ``(*shape) -> (K,)``.
      x: ``(*shape)`` the clean point; y: ``()`` its label.

    Returns:
      ``(distances, logits)``: ``distances[y] = inf``; the clean logits ``(K,)``.
    """
    logits, vjp = jax.vjp(fn1, x)
    K = logits.shape[-1]
    # the cotangents take the logits' type (under shard_map: varying over the mesh axis, as vjp requires)
    eye = jnp.eye(K, dtype=logits.dtype) + jnp.zeros_like(logits)
    # one backward pass per class in a loop, not vmapped over the classes: under
    # the caller's vmap over points each pass is then the model's own batched
    # backward pass (the patch CNN's Jacobian: 2.6x -> 1.1x the time of K
    # batched gradients, benchmarks/attack_overhead.py)
    (jac,) = jax.lax.map(vjp, eye)                                # (K, *shape)
    jac = jac.reshape(K, -1)
    g = jac - jac[y]                                              # grad of z_t - z_y
    gap = logits[y] - logits
    d = jax.vmap(lambda gt, ct: linear_box_distance(gt, ct, x.reshape(-1), norm, bounds))(g, gap)
    return jnp.where(jnp.arange(K) == y, jnp.inf, d), logits


def _ranks(order: jax.Array) -> jax.Array:
    """Position of each class in ``order`` (the inverse permutation)."""
    K = order.shape[0]
    return jnp.zeros(K, jnp.int32).at[order].set(jnp.arange(K, dtype=jnp.int32))


def nearest_targets(distances: jax.Array, logits: jax.Array, y: jax.Array, lanes: int,
                    mix: bool = False) -> jax.Array:
    """``(lanes,)`` target classes, cycling when ``lanes >= K - 1``.

    ``mix=False``: in order of their linearised distance (ties, and classes
    out of reach, in order of their logit). ``mix=True``: alternately the
    nearest class by linearised distance and the most likely by logit not
    yet taken (each class at its better place of the two orders), so that
    both rankings' first classes are aimed at.
    """
    K = logits.shape[-1]
    is_y = jnp.arange(K) == y
    by_logit = jnp.argsort(-jnp.where(is_y, -jnp.inf, logits))
    logit_rank = _ranks(by_logit)
    order = jnp.lexsort((logit_rank, distances, is_y))          # the last key is the primary one
    if mix:
        score = jnp.minimum(2 * _ranks(order), 2 * logit_rank + 1)
        order = jnp.lexsort((score, is_y))
    return order[jnp.arange(lanes) % (K - 1)]


def gradients_for_ranking(n_classes: int) -> int:
    """Gradient evaluations the ranking costs per point, counted as one per
    backward pass of the Jacobian (its forward pass is shared)."""
    return int(n_classes)


__all__ = ["ROUNDS", "gradients_for_ranking", "linear_box_distance", "linear_distances", "nearest_targets"]
