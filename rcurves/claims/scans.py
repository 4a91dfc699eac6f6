"""Orders of two models over many thresholds (paper 000: "the ranking changes", "a is more robust than b").

Exact two-sided McNemar at every threshold, Bonferroni over the thresholds:

* :func:`significant_sides`, :func:`sign_changes` -- which model is significantly ahead at each threshold,
  and how often that changes;
* :func:`ranking_changes` -- significant order changes between pairs of models (:func:`order_changes` counts
  them), and where there are too few its power to show them (:func:`reversal_power`, a lower bound against a
  stated discordant split);
* :func:`dominates` -- ``a`` more robust than ``b`` somewhere and less robust nowhere.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from rcurves.claims.paired_counts import _mcnemar_power
from rcurves.claims.verdict import Verdict, _alpha, _first_powered, _ladder, _power_target, _share

__all__ = ["dominates", "order_changes", "ranking_changes", "reversal_power", "sign_changes", "significant_sides"]


def _scan_counts(only_a: Any, only_b: Any):
    """``(only_a, only_b, k, p)`` as int64 / float64 arrays: the discordant counts at each threshold
    and the exact two-sided McNemar p-value there (1 where there are none)."""
    from scipy.stats import binom

    oa, ob = np.asarray(only_a), np.asarray(only_b)
    if oa.ndim != 1 or oa.shape != ob.shape:
        raise ValueError(f"only_b: expected the shape of only_a, a 1-d array ({oa.shape}), got {ob.shape}")
    if oa.size and (not np.issubdtype(oa.dtype, np.integer) or not np.issubdtype(ob.dtype, np.integer)
                    or (oa < 0).any() or (ob < 0).any()):
        raise ValueError("only_a: expected counts >= 0 (integers) at every threshold")
    oa, ob = oa.astype(np.int64), ob.astype(np.int64)
    k = oa + ob
    p = np.minimum(1.0, 2.0 * np.minimum(binom.cdf(oa, k, 0.5), binom.sf(oa - 1, k, 0.5)))
    return oa, ob, k, np.where(k == 0, 1.0, p)


def significant_sides(only_a: Any, only_b: Any, *, level: float) -> np.ndarray:
    """Per threshold: ``+1`` where ``a`` is significantly more robust than ``b`` (fewer points broken by
    ``a`` only than by ``b`` only, exact two-sided McNemar p < ``level``), ``-1`` where ``b`` is, 0 elsewhere.

    ``only_a``, ``only_b``: ``(m,)`` counts of the points broken within each threshold by ``a`` only and
    by ``b`` only (``rcurves.claims.compare.mcnemar_scan``). ``level`` is the per-test level (already
    Bonferroni-corrected by the caller). Returns ``(m,)`` int8.
    """
    oa, ob, _, p = _scan_counts(only_a, only_b)
    lev = _alpha(level)
    return np.where(p < lev, np.sign(ob - oa), 0).astype(np.int8)


def sign_changes(sides: Any) -> int:
    """How many times a sequence of ``+1 / 0 / -1`` changes sign, zeros skipped: the significant order
    changes along the thresholds (``[1, 0, -1, -1, 1]`` -> 2)."""
    s = np.asarray(sides)
    s = s[s != 0]
    return int(np.count_nonzero(s[1:] != s[:-1])) if s.size > 1 else 0


def reversal_power(k: Any, *, level: float, changes: int = 1, effect: float = 0.75, limit: int = 32) -> float:
    """A lower bound of the power to show ``changes`` significant order changes of one pair of models.

    ``k``: ``(m,)`` discordant points at the pair's thresholds. The alternative: at ``changes + 1`` of the
    thresholds (the best ones, chosen here) the discordant points split ``effect : 1 - effect``, one way at
    the first, the other way at the next, and so on; each is an exact two-sided McNemar test at ``level``.
    All of them significant (which makes ``changes`` sign changes) has probability at least
    ``1 - sum(1 - power_i)`` (Bonferroni's inequality: no independence assumed). Only the ``limit`` largest
    distinct counts are tried (a smaller bound, never a larger one). Returns the bound (0 when the pair has
    fewer than ``changes + 1`` thresholds).
    """
    c = int(changes)
    if c < 1:
        raise ValueError(f"changes: expected >= 1, got {changes!r}")
    s = _shortfalls(k, _alpha(level), _share(effect), limit)
    return max(0.0, 1.0 - float(s[: c + 1].sum())) if s.size >= c + 1 else 0.0


def _shortfalls(k: Any, level: float, effect: float, limit: int = 32) -> np.ndarray:
    """``1 - power`` of the exact two-sided McNemar test at ``level`` against the split ``effect``, per threshold
    of ``k`` (the ``limit`` largest distinct counts tried, the others counted as power 0), ascending."""
    k = np.asarray(k, np.int64)
    if not k.size:
        return np.zeros(0)
    top = np.unique(k)[::-1][:limit]
    pw = {int(c): _mcnemar_power(int(c), float(effect), float(level)) for c in top}
    return np.sort(1.0 - np.array([pw.get(int(c), 0.0) for c in k]))


def _changes_power(shortfalls: Sequence[np.ndarray], need: int) -> float:
    """The best lower bound (Bonferroni) of the power to show ``need`` order changes over all pairs together:
    ``c_p`` changes of pair ``p`` need its ``c_p + 1`` best tests, and the bound is ``1 - sum`` of the shortfalls
    of every test used, minimised over the ways to share ``need`` among the pairs (a small knapsack)."""
    inf = float("inf")
    best = np.full(need + 1, inf)
    best[0] = 0.0
    for s in shortfalls:
        cost = [0.0] + [float(s[: c + 1].sum()) if s.size >= c + 1 else inf for c in range(1, need + 1)]
        nxt = best.copy()
        for have in range(need + 1):
            if best[have] == inf:
                continue
            for c in range(1, need - have + 1):
                nxt[have + c] = min(nxt[have + c], best[have] + cost[c])
        best = nxt
    return max(0.0, 1.0 - float(best[need])) if best[need] < inf else 0.0


def _order_changes(scans: Sequence[Any], a: float):
    """``(changes, reversed pairs, [(k (m_p,), level)])``: :func:`ranking_changes`' count of significant order
    changes over the pairs, and each pair's discordant counts and per-test level."""
    P = len(scans)
    changes, reversed_pairs, counts = 0, 0, []
    for oa, ob in scans:
        oa, ob, k, _ = _scan_counts(oa, ob)
        lev = a / max(1, oa.size * P)
        c = sign_changes(significant_sides(oa, ob, level=lev))
        changes += c
        reversed_pairs += c > 0
        counts.append((k, lev))
    return changes, int(reversed_pairs), counts


def order_changes(scans: Sequence[Any], *, alpha: float = 0.05) -> int:
    """The number of significant order changes :func:`ranking_changes` counts over ``scans`` (same arguments)."""
    return _order_changes(scans, _alpha(alpha))[0]


def ranking_changes(scans: Sequence[Any], *, alpha: float = 0.05, at_least: int = 1,
                    what: str = "model pairs", effect: float = 0.75, power: float = 0.8) -> Verdict:
    """"The ranking depends on the threshold": significant order changes between pairs of models.

    ``scans``: one ``(only_a (m_p,), only_b (m_p,))`` per pair of models, the discordant counts at that
    pair's thresholds in increasing order (``mcnemar_scan`` at every distinct finite distance of either
    model, as ``rcurves.claims.compare.significant_reversal``, or at a few point-wise thresholds). A pair's
    order changes where it is significantly one way at one threshold and significantly the other way
    at a larger one (exact two-sided McNemar at ``alpha / (m_p * P)``: Bonferroni over the thresholds
    and the ``P`` pairs); a crossing of the curves inside the noise never counts. reproduced: at least
    ``at_least`` significant changes over all pairs (a pair reversed once counts 1, reversed and back 2);
    differs: fewer, although the test had at least ``power`` to show ``at_least`` changes against the
    stated alternative (at the best thresholds the discordant points split ``effect : 1 - effect``,
    alternately one way and the other; the power is bounded below by :func:`reversal_power`'s
    Bonferroni inequality, shared among the pairs as well as possible); inconclusive: fewer, and that
    bound is below ``power`` (a sample whose pairs have enough discordant points to reach the level,
    but too few for power, cannot show the absence of a change).
    """
    a = _alpha(alpha)
    need = int(at_least)
    if need < 1:
        raise ValueError(f"at_least: expected >= 1, got {at_least!r}")
    q, target = _share(effect), _power_target(power)
    P = len(scans)
    changes, reversed_pairs, counts = _order_changes(scans, a)
    test = (f"{changes} significant order changes in {reversed_pairs} of {P} {what} (exact two-sided McNemar at "
            f"every threshold, Bonferroni over each pair's thresholds and the {P} pairs, {a:g}); needed: "
            f"{need}")
    if changes >= need:
        return Verdict("reproduced", test)
    short = [_shortfalls(k, lev, q) for k, lev in counts]
    pw = _changes_power(short, need)
    ch = f"{need} change{'s' if need > 1 else ''}"
    alt = (f"if the discordant points at the best thresholds split {q:.3g} : {1 - q:.3g}, alternately one way and "
           f"the other")
    test += f"; power to show {ch} at least {pw:.2f} (Bonferroni's bound) {alt}"
    if pw >= target:
        return Verdict("differs", test, f"only {changes} significant order changes (needed {need}), although the "
                                        f"test had power at least {pw:.2f} to show {ch} {alt}")
    per_test = 1.0 - (1.0 - target) / (need + 1)
    lev_min = min((lev for _, lev in counts), default=a)
    m = _first_powered(lambda m: _mcnemar_power(m, q, lev_min), per_test, 1)
    return Verdict("inconclusive", test, f"only {changes} significant order changes (needed {need}), and the power "
                                         f"to show {ch} is bounded below only by {pw:.2f} < {target:g} {alt}: the "
                                         f"sample could not have shown their absence; about {m} discordant points "
                                         f"at each of {need + 1} thresholds of one pair would give that power")


def dominates(only_a: Any, only_b: Any, *, alpha: float = 0.05, tests: Optional[int] = None,
              eps: Optional[Sequence[float]] = None, names: Sequence[str] = ("a", "b"),
              what: str = "a more robust than b") -> Verdict:
    """"``a`` is more robust than ``b``" over a range of thresholds, on the same points.

    ``only_a``, ``only_b``: ``(m,)`` points broken within each threshold by ``a`` only / ``b`` only. Exact
    two-sided McNemar at every threshold at level ``alpha / tests`` (default ``tests = m``: Bonferroni
    over the thresholds; pass more when several ranges are tested for one claim). By the one ladder
    (:func:`_ladder`, the "against" step first): reproduced: ``a`` is significantly more robust at some
    threshold and significantly less robust at none; differs: ``b`` is significantly more robust
    somewhere, or ``a`` nowhere although the test could have shown it; inconclusive: no threshold had
    enough discordant points to reach the level. ``p``: the smallest two-sided p where ``a`` is ahead,
    times the Bonferroni factor (``tests``), so that it compares with ``alpha``.
    """
    oa, ob, k, p = _scan_counts(only_a, only_b)
    m = oa.size
    lev = _alpha(alpha) / max(1, int(tests) if tests is not None else m)
    e = np.arange(m, dtype=np.float64) if eps is None else np.asarray(eps, np.float64)
    if e.shape != (m,):
        raise ValueError(f"eps: expected {m} thresholds, got shape {e.shape}")
    side = significant_sides(oa, ob, level=lev)

    def best(mask):
        if not mask.any():
            return "nowhere"
        i = np.flatnonzero(mask)[np.argmin(p[mask])]
        return (f"at {e[i]:.4g} ({oa[i]} points broken by {names[0]} only, {ob[i]} by {names[1]} only, "
                f"p = {p[i]:.2g})")

    test = (f"{what}: exact two-sided McNemar at {m} thresholds, level {lev:.2g} (Bonferroni); "
            f"significantly more robust on {int((side > 0).sum())} thresholds (most significant {best(side > 0)}), "
            f"significantly less robust on {int((side < 0).sum())} (most significant {best(side < 0)})")
    scale = _alpha(alpha) / lev                           # the Bonferroni factor: p * scale compares with alpha
    better = ob > oa
    p_for = min(1.0, float(p[better].min()) * scale) if better.any() else 1.0
    return _ladder(test, what=what, sig_for=bool((side > 0).any()), sig_against=bool((side < 0).any()),
                   against_first=True, could=bool(m) and 2.0 * 0.5 ** int(k.max()) < lev,
                   against=f"{what} fails: significantly less robust at {int((side < 0).sum())} thresholds",
                   null=f"{what}: never significantly more robust, although the test could have shown it",
                   need=f"at most {int(k.max()) if m else 0} discordant points at any threshold: the test cannot "
                        f"reach {lev:.2g}; a larger sample is needed", p=p_for)
