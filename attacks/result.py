"""Minimal-perturbation results and their verification.

A distance is a claim about a model: every finite distance returned by this
package is the norm of an adversarial example that was re-evaluated here, in
float32, on the exact array returned.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from attacks.norms import geometry


class MinimalResult(NamedTuple):
    """Per-point minimal adversarial perturbations.

    Attributes:
      distance: ``(n,)`` float32, the norm of ``x_adv - x`` in the attack's
        norm; ``0`` for points already misclassified, ``inf`` where no
        adversarial was found (robust within the search).
      x_adv: ``(n, *shape)`` the adversarial examples (``x`` where none).
      success: ``(n,)`` bool, ``distance < inf``.
    """

    distance: jax.Array
    x_adv: jax.Array
    success: jax.Array


def flat_norm(norm: str, v: jax.Array) -> jax.Array:
    """Per-row norm of ``v (n, *shape)``."""
    geo = geometry(norm)
    return jax.vmap(geo.norm)(v)


def finalize(
    logits_fn: Callable,
    x: jax.Array,
    y: jax.Array,
    x_adv: jax.Array,
    found: jax.Array,
    norm: str,
    bounds: Optional[Tuple[float, float]],
    clean_logits: Optional[jax.Array] = None,
) -> MinimalResult:
    """Re-check candidates and build the result (traceable; call inside jit).

    A point counts as broken only if ``logits_fn(x_adv)`` (evaluated again,
    on the returned array) does not predict ``y`` and ``x_adv`` is inside
    ``bounds``. Clean misclassified points get distance 0 and ``x_adv = x``.
    The distance is computed from the returned arrays, so
    ``||x_adv - x|| == distance`` exactly. ``clean_logits``: ``logits_fn(x)``
    when the caller already has them (saves a forward pass).

    Non-finite logits (NaN, inf) never count as a prediction: a candidate
    with them is not adversarial, and a point whose clean logits are not
    finite gets distance NaN and ``success=False`` (the public attacks turn
    that into a ``ValueError`` naming the points: :func:`raise_nonfinite`).
    """
    if clean_logits is None:
        clean_logits = logits_fn(x)
    clean_finite = jnp.all(jnp.isfinite(clean_logits), axis=-1)
    clean_wrong = (jnp.argmax(clean_logits, axis=-1) != y) & clean_finite
    x_adv = jnp.where(_bcast(clean_wrong, x), x, x_adv)
    adv_logits = logits_fn(x_adv)
    adv_wrong = (jnp.argmax(adv_logits, axis=-1) != y) & jnp.all(jnp.isfinite(adv_logits), axis=-1)
    inside = jnp.ones_like(adv_wrong)
    if bounds is not None:
        flat = x_adv.reshape(x_adv.shape[0], -1)
        inside = jnp.all((flat >= bounds[0]) & (flat <= bounds[1]), axis=1)
    ok = (found | clean_wrong) & adv_wrong & inside
    x_adv = jnp.where(_bcast(ok, x), x_adv, x)
    dist = flat_norm(norm, x_adv - x)
    dist = jnp.where(ok, dist, jnp.inf)
    dist = jnp.where(clean_wrong, 0.0, dist)
    dist = jnp.where(clean_finite, dist, jnp.nan)     # the model failed at the clean point: no claim
    return MinimalResult(dist.astype(jnp.float32), x_adv, (ok | clean_wrong) & clean_finite)


def raise_nonfinite(result: MinimalResult, name: str = "logits_fn") -> MinimalResult:
    """``result``, or a ``ValueError`` naming the points whose clean logits were not finite
    (distance NaN, see :func:`finalize`). Inside a trace (a user's jit) the NaN stays the signal."""
    import numpy as np

    if isinstance(result.distance, jax.core.Tracer):
        return result
    d = result.distance
    if getattr(d, "is_fully_addressable", True):
        bad = np.flatnonzero(np.isnan(np.asarray(d)))
    else:  # a global array over several processes: each checks the points it holds
        bad = np.unique(np.concatenate([np.flatnonzero(np.isnan(np.asarray(s.data))) + (s.index[0].start or 0)
                                      for s in d.addressable_shards] or [np.zeros(0, np.int64)]))
    if bad.size:
        shown = ", ".join(str(i) for i in bad[:10]) + (", ..." if bad.size > 10 else "")
        raise ValueError(f"{name}: returned non-finite logits (NaN or inf) at the clean points {shown} "
                         f"({bad.size} of {result.distance.shape[0]}); no distance can be claimed there")
    return result


def _bcast(mask: jax.Array, like: jax.Array) -> jax.Array:
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1))


def verify(logits_fn, x, y, result: MinimalResult, norm: str, bounds=None, rtol: float = 1e-5):
    """Host-side audit of a result: returns a dict of violated invariants (empty if none).

    Checks every successful point is misclassified at ``x_adv``, inside
    ``bounds``, and that ``||x_adv - x||`` equals ``distance``; failed points
    have ``distance == inf``.
    """
    import numpy as np

    d = np.asarray(result.distance)
    s = np.asarray(result.success)
    pred = np.asarray(jnp.argmax(logits_fn(result.x_adv), axis=-1))
    yy = np.asarray(y)
    nrm = np.asarray(flat_norm(norm, jnp.asarray(result.x_adv) - jnp.asarray(x)))
    problems = {}
    if np.any(s & (pred == yy)):
        problems["not_adversarial"] = np.flatnonzero(s & (pred == yy))
    if np.any(s != np.isfinite(d)):
        problems["success_mismatch"] = np.flatnonzero(s != np.isfinite(d))
    fin = np.isfinite(d)
    if np.any(np.abs(nrm[fin] - d[fin]) > rtol * np.maximum(1.0, d[fin])):
        problems["norm_mismatch"] = np.flatnonzero(fin)[np.abs(nrm[fin] - d[fin]) > rtol * np.maximum(1.0, d[fin])]
    if bounds is not None:
        xa = np.asarray(result.x_adv).reshape(len(d), -1)
        out = (xa < bounds[0]).any(1) | (xa > bounds[1]).any(1)
        if out.any():
            problems["out_of_bounds"] = np.flatnonzero(out)
    return problems


__all__ = ["MinimalResult", "finalize", "flat_norm", "raise_nonfinite", "verify"]
