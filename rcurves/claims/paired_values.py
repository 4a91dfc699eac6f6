"""Means of per-point values on paired points, intervals, and a score's ranking power (paper 004); two means with
standard errors.

* :func:`paired_greater`, :func:`paired_null` -- a paired mean difference above zero, or inside a margin
  (paired t);
* :func:`interval_above` -- a statistic's confidence interval against a null and a smallest effect;
* :func:`auc_greater` -- a score ranks positive points above negative ones (Mann-Whitney);
* :func:`greater` -- a difference of two independent means with standard errors (z test).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from rcurves.claims.verdict import Verdict, _alpha, _ladder, _pct

__all__ = ["auc_greater", "greater", "interval_above", "paired_greater", "paired_null"]


def _paired_diffs(a: Any, b: Any, factor: float, name_a: str = "a", name_b: str = "b") -> np.ndarray:
    """``a - factor * b`` over the pairs where both are finite (``(n,)`` arrays of the same points)."""
    xa, xb = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    if xa.shape != xb.shape:
        raise ValueError(f"{name_b}: expected the same points as {name_a} (shape {xa.shape}), got {xb.shape}")
    ok = np.isfinite(xa) & np.isfinite(xb)
    return xa[ok] - float(factor) * xb[ok]


def _effect(effect: float) -> float:
    e = float(effect)
    if not (math.isfinite(e) and e > 0):
        raise ValueError(f"effect: expected a difference > 0 (the smallest effect the claim is about), got {effect!r}")
    return e


def _t_test(d: np.ndarray):
    """(mean, standard error, t, one-sided p for mean > 0, one-sided p for mean < 0) of paired differences."""
    from scipy.stats import t as student

    n = d.size
    m = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(n))
    if se > 0:
        t = m / se
        return m, se, t, float(student.sf(t, n - 1)), float(student.cdf(t, n - 1))
    t = math.inf if m > 0 else -math.inf if m < 0 else 0.0
    return m, se, t, float(m <= 0), float(m >= 0)


def _n_for(sd: float, effect: float, za: float, zp: float) -> int:
    """Points a paired test needs to resolve ``effect`` with differences of spread ``sd`` (normal approximation)."""
    return int(math.ceil(((za + zp) * sd / effect) ** 2)) + 1


def paired_greater(a: Any, b: Any, *, effect: float, factor: float = 1.0, alpha: float = 0.05, power: float = 0.8,
                   what: str = "a > b") -> Verdict:
    """Effect claim on paired points: the mean of ``a`` exceeds ``factor`` times the mean of ``b``.

    ``a``, ``b``: ``(n,)`` per-point values of two models (or settings) on the
    same points (pairs with a non-finite value are dropped). One-sided paired
    t test of ``mean(a - factor * b) > 0``. ``effect`` is the smallest excess
    (in the units of ``a``) the claim is about; the caller states it.
    By the one ladder (:func:`_ladder`): reproduced: significant; differs:
    significant the other way, or not significant although the test had
    ``power`` to detect an excess of ``effect``; inconclusive: it had not
    (fewer than 2 pairs, or too spread out), with the number of points it
    would need. ``p``: the one-sided paired t test's.
    """
    from scipy.stats import norm

    a_ = _alpha(alpha)
    e = _effect(effect)
    d = _paired_diffs(a, b, factor)
    n = d.size
    lab = what if factor == 1 else f"{what} (x{factor:g})"
    if n < 2:
        return Verdict("inconclusive", f"{lab}: {n} paired points", f"{n} paired points: no test possible; a larger "
                                                                     f"sample is needed")
    m, se, t, p, p_other = _t_test(d)
    za, zp = float(norm.ppf(1 - a_)), float(norm.ppf(power))
    pw = 1.0 if se == 0 else float(norm.cdf(e / se - za))
    test = (f"{lab}: mean paired difference {m:.4g} +- {se:.2g} (se) over n = {n} points, one-sided paired t = "
            f"{t:.2f}, p = {p:.2g}")
    return _ladder(test, what=lab, level=a_, p_for=p, p_against=p_other, could=pw >= power,
                   against=f"significantly the other way ({lab} fails, p = {p_other:.2g})",
                   null=f"not significant, although the test had power {pw:.2f} to detect an excess of {e:.3g}",
                   need=lambda: f"power {pw:.2f} < {power:g} to detect an excess of {e:.3g} with n = {n}: about "
                                f"{_n_for(float(d.std(ddof=1)), e, za, zp)} points would be needed")


def paired_null(a: Any, b: Any, *, effect: float, alpha: float = 0.05, side: str = "greater",
                what: str = "a vs b") -> Verdict:
    """Null claim on paired points with a stated margin: ``a`` does not exceed ``b`` by ``effect`` or more
    (``side='greater'``, "no improvement": a non-superiority test) or differs from it by less than ``effect``
    either way (``side='two-sided'``, "about the same": an equivalence test, two one-sided tests).

    Paired t confidence bounds of ``mean(a - b)`` at level ``1 - alpha`` per side. reproduced: the bound(s)
    lie inside the margin (greater: upper bound < ``effect``; two-sided: ``-effect`` < lower, upper <
    ``effect``), so a difference as large as the margin is ruled out; differs: the difference is
    significantly beyond the margin (greater: lower bound > ``effect``; two-sided: the whole interval
    outside ``(-effect, effect)``); inconclusive otherwise (the interval holds the margin), with the number
    of points that would settle it at the observed mean. A small sample therefore cannot pass a null claim
    by saying nothing. ``effect``: the smallest difference the claim rules out; the caller states it.
    Decided by the one ladder (:func:`_ladder`) with no power step. ``p``: the one-sided p of the bound
    (greater) or the larger of the two one-sided p's (two-sided), so ``p < alpha`` exactly when reproduced.
    """
    from scipy.stats import t as student

    a_ = _alpha(alpha)
    e = _effect(effect)
    if side not in ("greater", "two-sided"):
        raise ValueError(f"side: expected 'greater' or 'two-sided', got {side!r}")
    d = _paired_diffs(a, b, 1.0)
    n = d.size
    if n < 2:
        return Verdict("inconclusive", f"{what}: {n} paired points", f"{n} paired points: no test possible")
    m, se, t, p_up, p_down = _t_test(d)
    tc = float(student.ppf(1 - a_, n - 1))
    lo, hi = m - tc * se, m + tc * se
    sd = float(d.std(ddof=1))

    def below(x):                                  # one-sided p of "mean < x" (H0: mean >= x)
        return float(student.cdf((m - x) / se, n - 1)) if se > 0 else float(m >= x)

    def above(x):                                  # one-sided p of "mean > x" (H0: mean <= x)
        return float(student.sf((m - x) / se, n - 1)) if se > 0 else float(m <= x)

    if side == "greater":
        test = (f"{what}: mean paired difference {m:.4g} +- {se:.2g} (se) over n = {n} points, one-sided "
                f"{_pct(1 - a_)} upper bound {hi:.4g} vs the margin {e:.3g} (non-superiority)")
        sig_for, sig_against, p_for = hi < e, lo > e, below(e)
        against = f"significantly above the margin (lower bound {lo:.4g} > {e:.3g})"
        gap = e - max(m, 0.0)
    else:
        test = (f"{what}: mean paired difference {m:.4g} +- {se:.2g} (se) over n = {n} points, "
                f"{_pct(1 - 2 * a_)} interval [{lo:.4g}, {hi:.4g}] vs the margin +-{e:.3g} (equivalence, two "
                f"one-sided tests)")
        sig_for, sig_against, p_for = -e < lo and hi < e, lo > e or hi < -e, max(below(e), above(-e))
        against = f"significantly beyond the margin +-{e:.3g}"
        gap = e - abs(m)
    if gap <= 0:
        need = (f"the interval holds the margin and the mean ({m:.4g}) is not inside it: more points would tell "
                f"which side")
    else:
        need = (f"the interval holds the margin {e:.3g}: at the observed mean about "
                f"{int(math.ceil((tc * sd / gap) ** 2)) + 1} points would settle it")
    return _ladder(test, what=what, sig_for=sig_for, sig_against=sig_against, p_for=p_for, against=against,
                   need=need)


def interval_above(lo: float, hi: float, *, null: float, effect: float, what: str = "the statistic",
                   level: float = 0.95) -> Verdict:
    """A statistic's confidence interval ``[lo, hi]`` against a claim that it exceeds ``null``.

    reproduced: ``lo > null``; differs: ``hi < null`` (significantly the other
    way) or ``hi < effect`` (the interval rules out the smallest effect the
    claim is about, ``effect > null``); inconclusive: the interval holds both
    ``null`` and ``effect``. Decided by the one ladder (:func:`_ladder`);
    ``p``: None (an interval decides).
    """
    lo_, hi_, nu, ef = float(lo), float(hi), float(null), float(effect)
    if not ef > nu:
        raise ValueError(f"effect: expected a value above null = {nu}, got {effect!r}")
    test = f"{what}: {_pct(level)} interval [{lo_:.4g}, {hi_:.4g}] vs {nu:g} (smallest effect of interest {ef:g})"
    if not (math.isfinite(lo_) and math.isfinite(hi_)):
        return Verdict("inconclusive", test, "the interval is missing (too few values)")
    return _ladder(test, what=what, sig_for=lo_ > nu, sig_against=hi_ < nu, could=hi_ < ef,
                   against=f"{what} is significantly below {nu:g}", null=f"the interval rules out {what} >= {ef:g}",
                   need=f"the interval holds both {nu:g} and {ef:g}: a larger sample is needed")


def _auc_power(n1: int, n2: int, auc: float, a: float) -> float:
    """Power of the one-sided Mann-Whitney test at level ``a`` against a true AUC ``auc`` (normal approximation,
    Hanley & McNeil 1982's variance under the alternative)."""
    from scipy.stats import norm

    if n1 == 0 or n2 == 0:
        return 0.0
    se0 = math.sqrt((n1 + n2 + 1) / (12.0 * n1 * n2))
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    se1 = math.sqrt(max(auc * (1 - auc) + (n1 - 1) * (q1 - auc ** 2) + (n2 - 1) * (q2 - auc ** 2), 1e-12)
                    / (n1 * n2))
    return float(norm.cdf((auc - 0.5 - float(norm.ppf(1 - a)) * se0) / se1))


def auc_greater(pos: Any, neg: Any, *, auc_effect: float = 0.65, alpha: float = 0.05, power: float = 0.8,
                what: str = "the score") -> Verdict:
    """A score ranks the positive points above the negative ones (ROC AUC > 1/2).

    One-sided Mann-Whitney test of ``pos`` vs ``neg`` (``(n1,)``, ``(n2,)``
    scores; AUC = U / (n1 n2), ties count 1/2). By the one ladder
    (:func:`_ladder`): reproduced: significant; differs: significant the other
    way, or not significant although the test had ``power`` against a true AUC
    of ``auc_effect``; inconclusive otherwise (with how many points of each
    class would do). ``p``: the one-sided Mann-Whitney p.
    """
    from scipy.stats import mannwhitneyu

    a_ = _alpha(alpha)
    q = float(auc_effect)
    if not 0.5 < q < 1.0:
        raise ValueError(f"auc_effect: expected an AUC in (0.5, 1), got {auc_effect!r}")
    p1 = np.asarray(pos, np.float64).reshape(-1)
    p2 = np.asarray(neg, np.float64).reshape(-1)
    p1, p2 = p1[np.isfinite(p1)], p2[np.isfinite(p2)]
    n1, n2 = p1.size, p2.size
    if n1 == 0 or n2 == 0:
        return Verdict("inconclusive", f"{what}: {n1} positive and {n2} negative points",
                       "one class has no points: no ranking to test")
    r = mannwhitneyu(p1, p2, alternative="greater")
    auc = float(r.statistic) / (n1 * n2)
    p = float(r.pvalue)
    p_other = float(mannwhitneyu(p1, p2, alternative="less").pvalue)
    pw = _auc_power(n1, n2, q, a_)
    test = (f"{what}: ROC AUC {auc:.3f} ({n1} positive, {n2} negative points), one-sided Mann-Whitney p = {p:.2g}; "
            f"power {pw:.2f} against AUC {q:g}")
    def need() -> str:
        k = next((k for k in range(2, 10000) if _auc_power(n1 * k, n2 * k, q, a_) >= power), None)
        return (f"power {pw:.2f} < {power:g} against AUC {q:g}: about {n1 * (k or 0)} positive and "
                f"{n2 * (k or 0)} negative points would be needed")

    return _ladder(test, what=what, level=a_, p_for=p, p_against=p_other, could=pw >= power,
                   against=f"{what} ranks the negative points higher (p = {p_other:.2g})",
                   null=f"not significant, although the test had power {pw:.2f} against AUC {q:g}", need=need)


def greater(mean_a: float, se_a: float, mean_b: float, se_b: float, *, alpha: float = 0.05, factor: float = 1.0,
            what: str = "a > b") -> Verdict:
    """``mean_a > factor * mean_b`` for independent estimates with standard errors (one-sided z test).

    ``factor`` > 1 tests "much higher" as a ratio (e.g. 2). By the one ladder
    (:func:`_ladder`): reproduced: significant for the claim; differs:
    significant against it, or not significant although the test could
    resolve a gap the size of ``factor * mean_b``; inconclusive: a value is
    missing, or the smallest gap the test can resolve (``z_(1-alpha) * se``)
    exceeds ``|factor * mean_b|``. ``p``: the one-sided z test's.
    """
    from scipy.stats import norm

    a = _alpha(alpha)
    f = float(factor)
    vals = [mean_a, se_a, mean_b, se_b]
    if not all(math.isfinite(float(v)) for v in vals):
        return Verdict("inconclusive", f"{what}: {mean_a} vs {mean_b} (not finite)", "a mean or its standard error "
                                                                                       "is missing (no points)")
    se = math.hypot(float(se_a), f * float(se_b))
    diff = float(mean_a) - f * float(mean_b)
    z = diff / se if se > 0 else (math.inf if diff > 0 else -math.inf if diff < 0 else 0.0)
    p = float(norm.sf(z))
    test = (f"{what}: {mean_a:.4g} +- {se_a:.2g} vs {'' if f == 1 else f'{f:g} x '}{mean_b:.4g} +- {se_b:.2g}, "
            f"one-sided z = {z:.2f}, p = {p:.2g}")
    zc = float(norm.ppf(1 - a))
    gap = abs(f * float(mean_b))
    return _ladder(test, what=what, level=a, p_for=p, p_against=float(norm.cdf(z)),
                   could=gap > 0 and zc * se <= gap,   # power: only against a nonzero gap larger than the noise
                   against=f"significantly the other way ({what} fails, z = {z:.2f})",
                   null=f"not significant ({what}: z = {z:.2f})",
                   need=f"the standard error ({se:.2g}) is too large to tell at level {a:g}")
