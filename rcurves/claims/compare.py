"""Is one model more robust than another, beyond sampling noise? Paired tests on the same points.

Two models evaluated on the same ``n`` points give, at a threshold ``eps``,
four kinds of points: broken by both, by neither, by ``a`` only, by ``b``
only. Whether the two robust errors differ is McNemar's question: under
"equally robust" the discordant points split 50/50, so the exact two-sided
binomial test on ``only_a`` out of ``only_a + only_b`` decides
(:func:`paired_order_test`). Robustness curves cross wherever the counts
tie, and sampling noise alone makes nearby curves cross many times; a
crossing means something only when each model is *significantly* more
robust than the other somewhere. :func:`significant_reversal` scans every
threshold at once (:func:`mcnemar_scan`) with a Bonferroni correction over
the thresholds (and, optionally, the pairs of models compared).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np


def _distances(d: Any, name: str) -> np.ndarray:
    a = np.asarray(d, np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array of distances, got shape {a.shape}")
    if np.isnan(a).any() or (a < 0).any():
        raise ValueError(f"{name}: distances must be >= 0 (inf allowed), not NaN")
    return a


def paired_order_test(dist_a: Any, dist_b: Any, eps: float) -> Tuple[int, int, float]:
    """Exact two-sided McNemar test of "a and b are equally robust at eps" on the same points.

    Returns ``(only_a, only_b, p)``: the points broken within ``eps`` by ``a``
    only and by ``b`` only, and the two-sided binomial p-value of ``only_a``
    among the ``only_a + only_b`` discordant points (1 when there are none).
    """
    oa, ob, p = mcnemar_scan(dist_a, dist_b, np.array([float(eps)]))
    return int(oa[0]), int(ob[0]), float(p[0])


def mcnemar_scan(dist_a: Any, dist_b: Any, eps: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`paired_order_test` at every threshold of ``eps (m,)``: arrays ``only_a, only_b, p``.

    Computed from the sorted distances (``O((n + m) log n)``), not an ``n x m`` table.
    """
    from scipy.stats import binom

    da, db = _distances(dist_a, "dist_a"), _distances(dist_b, "dist_b")
    if da.shape != db.shape:
        raise ValueError(f"dist_b: expected the same points as dist_a ({da.shape}), got {db.shape}")
    e = np.atleast_1d(np.asarray(eps, np.float64))
    hi = np.maximum(da, db)
    # broken by a only at e: da <= e < db; by b only: db <= e < da
    a_first, b_first = da < db, db < da
    sa, sb = np.sort(da[a_first]), np.sort(db[b_first])
    ha, hb = np.sort(hi[a_first]), np.sort(hi[b_first])
    only_a = np.searchsorted(sa, e, side="right") - np.searchsorted(ha, e, side="right")
    only_b = np.searchsorted(sb, e, side="right") - np.searchsorted(hb, e, side="right")
    k = only_a + only_b
    # the exact two-sided binomial test at p = 1/2 (symmetric): twice the smaller tail, at most 1
    p = np.minimum(1.0, 2.0 * np.minimum(binom.cdf(only_a, k, 0.5), binom.sf(only_a - 1, k, 0.5)))
    return only_a.astype(np.int64), only_b.astype(np.int64), np.where(k == 0, 1.0, p)


def significant_reversal(dist_a: Any, dist_b: Any, alpha: float = 0.05, pairs: int = 1) -> Dict[str, Any]:
    """Is each of two models significantly more robust than the other at some threshold?

    Every distinct finite distance of either model is a threshold where the
    order may change; the exact McNemar test runs at all ``m`` of them, and a
    reversal counts when both directions reach ``p < alpha / (m * pairs)``
    (Bonferroni over the thresholds scanned and the ``pairs`` of models
    compared).

    Returns:
      ``{'found', 'm', 'pairs', 'alpha', 'a_better', 'b_better'}``, where
      ``a_better`` / ``b_better`` is the most significant threshold of that
      direction, ``{'eps', 'only_a', 'only_b', 'p'}``, or None.
    """
    da, db = _distances(dist_a, "dist_a"), _distances(dist_b, "dist_b")
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha: expected a level in (0, 1), got {alpha!r}")
    knots = np.unique(np.concatenate([da[np.isfinite(da)], db[np.isfinite(db)]]))
    if knots.size == 0:
        return {"found": False, "m": 0, "pairs": pairs, "alpha": alpha, "a_better": None, "b_better": None}
    oa, ob, p = mcnemar_scan(da, db, knots)
    m = int(knots.size)
    best: Dict[str, Any] = {}
    for side, mask in (("a_better", oa < ob), ("b_better", ob < oa)):
        if not mask.any():
            best[side] = None
            continue
        i = np.flatnonzero(mask)[np.argmin(p[mask])]
        best[side] = {"eps": float(knots[i]), "only_a": int(oa[i]), "only_b": int(ob[i]), "p": float(p[i])}
    found = all(best[k] is not None and best[k]["p"] < alpha / (m * max(1, pairs)) for k in ("a_better", "b_better"))
    return {"found": bool(found), "m": m, "pairs": pairs, "alpha": alpha, **best}


def knot_scan(da, db):
    """``(knots, only_a, only_b)``: every distinct finite distance of either model (where the order of two
    robustness curves can change) and :func:`mcnemar_scan`'s discordant counts there."""
    da, db = np.asarray(da, np.float64), np.asarray(db, np.float64)
    knots = np.unique(np.concatenate([da[np.isfinite(da)], db[np.isfinite(db)]]))
    oa, ob, _ = mcnemar_scan(da, db, knots)
    return knots, oa, ob


__all__ = ["knot_scan", "mcnemar_scan", "paired_order_test", "significant_reversal"]
