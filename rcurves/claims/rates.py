"""Proportions against the paper's number or a bound, two independent proportions, and a deterministic number.

* :func:`wilson` -- the Wilson score interval of a proportion;
* :func:`rate_matches` -- a proportion against the paper's number, absolute tolerance (Wilson interval);
* :func:`rate_near` -- a proportion against the paper's number, relative tolerance (Clopper-Pearson interval);
* :func:`rate_below` -- a proportion claimed below a bound (Wilson interval);
* :func:`share_lower` -- one proportion below another, independent samples (Fisher exact);
* :func:`value_matches` -- a deterministic number on the paper's own data, within a tolerance.
"""
from __future__ import annotations

import math

from rcurves.claims.verdict import Verdict, _alpha, _count, _ladder, _pct

__all__ = ["rate_below", "rate_matches", "rate_near", "share_lower", "value_matches", "wilson"]


def wilson(k: int, n: int, alpha: float = 0.05):
    """Wilson score interval ``(lo, hi)`` of a proportion ``k / n``."""
    from scipy.stats import norm

    k, n = _count(k, "k"), _count(n, "n")
    if n == 0:
        return 0.0, 1.0
    z = float(norm.ppf(1 - _alpha(alpha) / 2))
    ph = k / n
    den = 1 + z * z / n
    c = (ph + z * z / (2 * n)) / den
    h = z * math.sqrt(ph * (1 - ph) / n + z * z / (4 * n * n)) / den
    return max(0.0, c - h), min(1.0, c + h)


def rate_matches(k: int, n: int, paper: float, *, tol: float, alpha: float = 0.05, what: str = "the rate") -> Verdict:
    """A proportion against the paper's number: is ``paper`` within ``tol`` of our interval?

    reproduced: the ``1 - alpha`` Wilson interval of ``k / n`` meets ``[paper - tol,
    paper + tol]``; differs: it lies wholly outside; inconclusive: not
    differs, but the interval is wider than ``4 tol`` (the sample cannot
    place the rate within the tolerance). ``tol`` is the stated allowance for
    our models and data differing from the paper's.
    """
    lo, hi = wilson(k, n, alpha)
    t = float(tol)
    if not t >= 0:
        raise ValueError(f"tol: expected >= 0, got {tol!r}")
    test = (f"{what} {k}/{n} = {k / max(n, 1):.3f}, {_pct(1 - _alpha(alpha))} Wilson [{lo:.3f}, {hi:.3f}] vs the paper's {paper:.3f} "
            f"+- {t:g}")
    if hi < paper - t or lo > paper + t:
        side = "below" if hi < paper - t else "above"
        return Verdict("differs", test, f"{what} is {side} the paper's {paper:.3f} by more than {t:g}")
    if hi - lo > 4 * t:
        return Verdict("inconclusive", test, f"n = {n} gives an interval of width {hi - lo:.3f} > 4 x {t:g}")
    return Verdict("reproduced", test)


def rate_near(k: int, n: int, paper: float, *, rel_tol: float, alpha: float = 0.05,
              what: str = "the rate") -> Verdict:
    """A proportion against the paper's rate on a relative scale: is our rate within a factor
    ``1 + rel_tol`` of ``paper``?

    The band is ``[paper / (1 + rel_tol), paper * (1 + rel_tol)]``; our
    rate's exact ``1 - alpha`` Clopper-Pearson interval of ``k / n`` decides:

    * reproduced -- the interval meets the band and is at most twice the
      band's width (the sample places the rate);
    * differs -- the interval lies wholly outside the band (below or above);
    * inconclusive -- the interval meets the band but is wider than twice its
      width (too few points to place the rate).

    For rates near 0 (error rates, attack success) where an absolute
    tolerance (:func:`rate_matches`) is meaningless. ``p``: the exact
    two-sided binomial p-value against ``paper`` (a small p speaks against
    the claim; not for :func:`holm`).
    """
    from scipy.stats import binomtest

    a = _alpha(alpha)
    kk, nn = _count(k, "k"), _count(n, "n")
    if nn == 0:
        raise ValueError(f"n: expected at least one point, got {n!r}")
    if kk > nn:
        raise ValueError(f"k: expected at most n = {nn}, got {kk}")
    pp = float(paper)
    if not 0.0 < pp < 1.0:
        raise ValueError(f"paper: expected a rate in (0, 1), got {paper!r}")
    r = float(rel_tol)
    if not (math.isfinite(r) and r > 0):
        raise ValueError(f"rel_tol: expected a relative tolerance > 0, got {rel_tol!r}")
    res = binomtest(kk, nn, pp)
    ci = res.proportion_ci(confidence_level=1 - a, method="exact")
    lo, hi = float(ci.low), float(ci.high)
    b_lo, b_hi = pp / (1 + r), min(1.0, pp * (1 + r))
    p = float(res.pvalue)
    test = (f"{what} {kk}/{nn} = {kk / nn:.4f}, {_pct(1 - a)} Clopper-Pearson [{lo:.4f}, {hi:.4f}] vs the paper's "
            f"{pp:.4g} within a factor {1 + r:g} ([{b_lo:.4f}, {b_hi:.4f}]); exact two-sided binomial p = {p:.2g}")
    if hi < b_lo or lo > b_hi:
        side = "below" if hi < b_lo else "above"
        return Verdict("differs", test, f"{what} is {side} the paper's {pp:.4g} by more than a factor {1 + r:g}", p)
    if hi - lo > 2 * (b_hi - b_lo):
        return Verdict("inconclusive", test, f"n = {nn} gives an interval of width {hi - lo:.4f} > 2 x the band's "
                                             f"{b_hi - b_lo:.4f}: a larger sample is needed to place {what}", p)
    return Verdict("reproduced", test, "", p)


def rate_below(k: int, n: int, bound: float, *, alpha: float = 0.05, what: str = "the rate") -> Verdict:
    """A proportion claimed to be below ``bound`` (e.g. "fewer than half"): the Wilson interval decides.

    By the one ladder (:func:`_ladder`, no power step): reproduced: the
    ``1 - alpha`` Wilson interval of ``k / n`` lies below ``bound``; differs:
    it lies above (at or above the bound significantly); inconclusive: it
    contains ``bound``, with the ``n`` that would put the interval below it at
    the observed rate (none when that rate is not below). ``p``: None.
    """
    kk, nn = _count(k, "k"), _count(n, "n")
    if kk > nn:
        raise ValueError(f"k: expected at most n = {nn}, got {kk}")
    b = float(bound)
    if not 0.0 < b < 1.0:
        raise ValueError(f"bound: expected a proportion in (0, 1), got {bound!r}")
    lo, hi = wilson(kk, nn, alpha)
    rate = kk / nn if nn else float("nan")
    test = f"{what} {kk}/{nn} = {rate:.3f}, {_pct(1 - _alpha(alpha))} Wilson [{lo:.3f}, {hi:.3f}] vs < {b:g}"

    def need() -> str:
        if not nn or rate >= b:
            return (f"{what} is not below {b:g} here" + ("" if nn else " (no points)")
                    + " and the interval contains it: no larger sample at this rate would show the claim")
        m = nn
        while wilson(int(round(rate * m)), m, alpha)[1] >= b and m < 10 ** 9:
            m *= 2
        lo_m, hi_m = nn, m
        while hi_m - lo_m > 1:                     # the smallest n at this rate whose interval ends below the bound
            mid = (lo_m + hi_m) // 2
            if wilson(int(round(rate * mid)), mid, alpha)[1] < b:
                hi_m = mid
            else:
                lo_m = mid
        return f"the interval contains {b:g}: about n = {hi_m} points at this rate would put it below"

    return _ladder(test, what=what, sig_for=bool(nn and hi < b), sig_against=bool(nn and lo > b),
                   against=f"{what} is significantly above {b:g}", need=need)


def share_lower(k_a: int, n_a: int, k_b: int, n_b: int, *, alpha: float = 0.05,
                what: str = "share a < share b") -> Verdict:
    """Two independent proportions: is ``k_a / n_a`` below ``k_b / n_b``? One-sided Fisher exact test.

    By the one ladder (:func:`_ladder`): reproduced: significant at
    ``alpha``; differs: significant the other way, or not significant although
    the margins allowed it (the most extreme table, ``k_a`` as small as the
    margins permit, reaches ``alpha``); inconclusive: even that table could not
    reach ``alpha`` (too few points). ``p``: the one-sided Fisher exact p.
    """
    from scipy.stats import fisher_exact

    a = _alpha(alpha)
    ka, na_, kb, nb_ = _count(k_a, "k_a"), _count(n_a, "n_a"), _count(k_b, "k_b"), _count(n_b, "n_b")
    if ka > na_ or kb > nb_:
        raise ValueError(f"k_a, k_b: expected at most n_a, n_b, got {ka}/{na_}, {kb}/{nb_}")
    fmt_ = lambda k, n: f"{k}/{n} = {k / n:.3f}" if n else f"{k}/{n}"
    if na_ == 0 or nb_ == 0:
        return Verdict("inconclusive", f"{what}: {fmt_(ka, na_)} vs {fmt_(kb, nb_)}", "a group has no points")
    table = lambda k: [[k, na_ - k], [ka + kb - k, nb_ - (ka + kb - k)]]
    p = float(fisher_exact(table(ka), alternative="less").pvalue)
    p_other = float(fisher_exact(table(ka), alternative="greater").pvalue)
    k_min = max(0, ka + kb - nb_)
    p_min = float(fisher_exact(table(k_min), alternative="less").pvalue)
    test = f"{what}: {fmt_(ka, na_)} vs {fmt_(kb, nb_)}, one-sided Fisher exact p = {p:.2g}"
    return _ladder(test, what=what, level=a, p_for=p, p_against=p_other, could=p_min < a,
                   against=f"significantly the other way (p = {p_other:.2g})",
                   null=f"not significant (p = {p:.2g}) although the margins allowed p = {p_min:.2g}",
                   need=f"with {na_} and {nb_} points and these totals even the most extreme split gives "
                        f"p = {p_min:.2g} >= {a:g}: more points are needed")


def value_matches(ours: float, paper: float, *, tol: float, what: str = "the value") -> Verdict:
    """A deterministic number computed on the paper's own data (no sampling): equal within ``tol``.

    For quantities with no sampling error (e.g. a 1-NN's accuracy on the same
    training and test sets), the only allowance is ``tol`` (float rounding,
    the paper's printed digits). reproduced: ``|ours - paper| <= tol``;
    differs otherwise.
    """
    t = float(tol)
    if not t >= 0:
        raise ValueError(f"tol: expected >= 0, got {tol!r}")
    o, p = float(ours), float(paper)
    test = f"{what} {o:.6g} vs the paper's {p:.6g} (difference {o - p:+.3g}, tolerance {t:g}; same data, no sampling)"
    if math.isfinite(o) and abs(o - p) <= t:
        return Verdict("reproduced", test)
    return Verdict("differs", test, f"{what} differs from the paper's {p:.6g} by {abs(o - p):.3g} > {t:g}")
