"""Minimal-perturbation results and their verification.

A distance is a claim about a model: every finite distance returned by this
package is the norm of an adversarial example that was re-evaluated here, in
float32 with products at ``Precision.HIGHEST`` (:mod:`attacks.precision`), on
the exact array returned.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from attacks.losses import is_adversarial
from attacks.norms import geometry
from attacks.precision import exact_precision


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


#: The re-check's fallback: where a candidate that the search's fast products called adversarial is not
#: adversarial at full precision, the perturbation is lengthened by the factors ``1 + s`` in turn (clipped to the
#: bounds) and the first that passes is returned. TF32 products are off by a relative 2**-11 per operand and
#: bfloat16 ones by 2**-8: that moves the fast model's boundary by an amount set by the logits' scale, not by the
#: point's distance, so a point near the boundary may need its perturbation several times longer; the ladder runs
#: from 2**-12 (a last-bit landing) to 7 (8x: far from tight, but a verified distance rather than none).
RECHECK_SCALES = (2.0 ** -12, 2.0 ** -9, 2.0 ** -6, 2.0 ** -3, 0.5, 1.0, 3.0, 7.0)


def _adversarial(logits_fn, x_adv, y, bounds):
    """``(n,)`` bool: ``logits_fn(x_adv)`` is finite and does not predict ``y``, and ``x_adv`` is in ``bounds``."""
    wrong = jax.vmap(is_adversarial)(logits_fn(x_adv), y)
    if bounds is not None:
        flat = x_adv.reshape(x_adv.shape[0], -1)
        wrong = wrong & jnp.all((flat >= bounds[0]) & (flat <= bounds[1]), axis=1)
    return wrong


def _lengthen(logits_fn, x, y, x_adv, ok, need, bounds):
    """Where ``need``: the first of ``x + (1 + s) (x_adv - x)``, ``s`` in :data:`RECHECK_SCALES` (clipped to
    ``bounds``), that is adversarial; ``(x_adv, ok)`` updated (unchanged where none is)."""
    def step(carry, s):
        xa, good = carry
        cand = x + (1.0 + s) * (x_adv - x)
        if bounds is not None:
            cand = jnp.clip(cand, bounds[0], bounds[1])
        take = need & ~good & _adversarial(logits_fn, cand, y, bounds)
        return (jnp.where(_bcast(take, x), cand, xa), good | take), None

    (xa, good), _ = jax.lax.scan(step, (x_adv, ok), jnp.asarray(RECHECK_SCALES, x.dtype))
    return xa, good


def finalize(
    logits_fn: Callable,
    x: jax.Array,
    y: jax.Array,
    x_adv: jax.Array,
    found: jax.Array,
    norm: str,
    bounds: Optional[Tuple[float, float]],
) -> MinimalResult:
    """Re-check candidates at full precision and build the result (traceable; call inside jit).

    The re-check is what makes a distance *verified*, so it runs under
    :func:`attacks.precision.exact_precision` (float32 products at HIGHEST on
    every device), whatever precision the search used: ``logits_fn`` is
    evaluated again, on the returned arrays, at ``x`` (a point misclassified
    there gets distance 0 and ``x_adv = x``) and at ``x_adv``. A point counts as
    broken only if ``logits_fn(x_adv)`` does not predict ``y`` and ``x_adv`` is
    inside ``bounds``. Where the search found a candidate (``found``) that fails
    this re-check (its last fast step landed on the wrong side of the exact
    model's boundary), the perturbation is lengthened by the factors
    :data:`RECHECK_SCALES` in turn and the first point that passes is returned
    (on an exact device no candidate fails, and this costs one ``any``). The
    distance is computed from the returned arrays, so
    ``||x_adv - x|| == distance`` exactly.

    Non-finite logits (NaN, inf) never count as a prediction: a candidate
    with them is not adversarial, and a point whose clean logits are not
    finite gets distance NaN and ``success=False`` (the public attacks turn
    that into a ``ValueError`` naming the points: :func:`raise_nonfinite`).
    """
    with exact_precision():
        clean_logits = logits_fn(x)
        clean_finite = jnp.all(jnp.isfinite(clean_logits), axis=-1)
        clean_wrong = (jnp.argmax(clean_logits, axis=-1) != y) & clean_finite
        x_adv = jnp.where(_bcast(clean_wrong, x), x, x_adv)
        adv_ok = _adversarial(logits_fn, x_adv, y, bounds)
        need = found & ~clean_wrong & ~adv_ok
        x_adv, adv_ok = jax.lax.cond(jnp.any(need),
                                     lambda: _lengthen(logits_fn, x, y, x_adv, adv_ok, need, bounds),
                                     lambda: (x_adv, adv_ok))
    ok = (found | clean_wrong) & adv_ok
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
    with exact_precision():
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
