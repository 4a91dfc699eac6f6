"""The sign of a rank correlation: Spearman's rho, exact permutation p-values for few values, power by simulation.

* :func:`correlation` -- a rank correlation's sign, exact permutation p-value (n <= 8) or scipy's;
* :func:`correlation_power` -- the power of that test against a stated rank correlation.
"""
from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np

from rcurves.claims.verdict import Verdict, _alpha, _first_powered, _ladder, _power_target

__all__ = ["correlation", "correlation_power"]


def _spearman_null(n: int) -> np.ndarray:
    """Spearman's rho of every ordering of ``n`` untied ranks against ``0..n-1``: its exact null distribution
    ((n!,); n <= 8)."""
    r = np.arange(n, dtype=float) - (n - 1) / 2.0
    pm = r[np.asarray(list(itertools.permutations(range(n))))]
    return pm @ r / float((r ** 2).sum())


def _spearman_p(rho: np.ndarray, n: int) -> np.ndarray:
    """One-sided p-value (the upper tail) of Spearman's ``rho`` over ``n`` untied pairs: exact by permutation for
    n <= 8, else scipy's t approximation (what :func:`scipy.stats.spearmanr` uses)."""
    from scipy.stats import t as student

    rho = np.asarray(rho, float)
    if n <= 8:
        null = np.sort(_spearman_null(n))
        return 1.0 - np.searchsorted(null, rho - 1e-12, side="left") / null.size
    r = np.clip(rho, -1 + 1e-12, 1 - 1e-12)
    return student.sf(r * np.sqrt((n - 2) / (1 - r ** 2)), n - 2)


def correlation_power(n: int, effect: float = 0.6, alpha: float = 0.05, draws: int = 4000, seed: int = 0) -> float:
    """Power of the one-sided Spearman test of :func:`correlation` at level ``alpha`` on ``n`` pairs whose true
    rank correlation is ``effect``, by simulation.

    Pairs are drawn from a bivariate normal with Pearson ``r = 2 sin(pi effect / 6)`` (whose Spearman rho is
    ``effect``), ``draws`` samples with a fixed ``seed``, so the answer is deterministic; each sample is tested
    as :func:`correlation` tests (exact permutation p for n <= 8).
    """
    if n < 3:
        return 0.0
    r = 2.0 * math.sin(math.pi * float(effect) / 6.0)
    z = np.random.default_rng(seed).standard_normal((draws, 2, n))
    x, y = z[:, 0], r * z[:, 0] + math.sqrt(max(0.0, 1 - r * r)) * z[:, 1]
    rx = np.argsort(np.argsort(x, axis=1), axis=1).astype(float)
    ry = np.argsort(np.argsort(y, axis=1), axis=1).astype(float)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    rho = (rx * ry).sum(axis=1) / (rx ** 2).sum(axis=1)
    return float(np.mean(_spearman_p(rho, n) < alpha))


def correlation(x: Sequence[float], y: Sequence[float], *, sign: int = 1, alpha: float = 0.05,
                effect: float = 0.6, power: float = 0.8, what: str = "the rank correlation") -> Verdict:
    """The sign of Spearman's rank correlation, exact one-sided permutation p-value (n <= 8) or scipy's.

    By the one ladder (:func:`_ladder`): reproduced: significant in the
    direction ``sign``; differs: significant the other way, or not significant
    although the test had at least ``power`` against a true rank correlation
    of ``effect`` (in the direction ``sign``; :func:`correlation_power`);
    inconclusive: not significant and underpowered (with 5 values and
    ``effect = 0.6`` the power is about 0.2: a null result there says
    nothing). A constant side has no ranks (rho undefined): never reproduced;
    differs only when the test was powered. ``p``: the one-sided p in the
    direction ``sign``.
    """
    from scipy.stats import spearmanr

    a = _alpha(alpha)
    target = _power_target(power)
    e = float(effect)
    if not 0.0 < e < 1.0:
        raise ValueError(f"effect: expected the stated rank correlation's size in (0, 1), got {effect!r}")
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[ok], ys[ok]
    n = xs.size
    if n < 2:
        return Verdict("inconclusive", f"{what}: n = {n}", "fewer than two values")
    pw = correlation_power(n, e, a)

    def need() -> str:
        m = _first_powered(lambda m: correlation_power(m, e, a, draws=1000), target, n + 1, limit=400)
        return (f"power {pw:.2f} < {target:g} against a rank correlation of {e:g} with n = {n} values: the sample "
                f"could not have shown it; about {m} would be needed")

    if np.ptp(xs) == 0 or np.ptp(ys) == 0:    # a constant side has no ranks: no correlation either way
        test = f"{what}: n = {n}, one side constant; power {pw:.2f} against rho = {e:g}"
        return _ladder(test, what=what, sig_for=False, sig_against=False, could=pw >= target,
                       null="no rank correlation: one side is constant", need=need, p=1.0)
    rho = float(spearmanr(xs, ys).statistic)
    if n <= 8:
        from scipy.stats import rankdata

        rx, ry = rankdata(xs), rankdata(ys)
        rx, ry = rx - rx.mean(), ry - ry.mean()
        pm = ry[np.asarray(list(itertools.permutations(range(n))))]          # (n!, n): every reordering
        den = math.sqrt(float((rx ** 2).sum() * (ry ** 2).sum())) or 1.0
        perms = pm @ rx / den
        p = float(np.mean(sign * perms >= sign * rho - 1e-12))
        p_other = float(np.mean(-sign * perms >= -sign * rho - 1e-12))
    else:
        r = spearmanr(xs, ys, alternative="greater" if sign > 0 else "less")
        p = float(r.pvalue)
        p_other = float(spearmanr(xs, ys, alternative="less" if sign > 0 else "greater").pvalue)
    test = (f"{what}: Spearman rho = {rho:.2f} over n = {n}, one-sided p = {p:.2g}; power {pw:.2f} against "
            f"rho = {sign * e:g}")
    return _ladder(test, what=what, level=a, p_for=p, p_against=p_other, could=pw >= target,
                   against=f"significantly of the opposite sign (p = {p_other:.2g})",
                   null=f"not significant (rho = {rho:.2f}, p = {p:.2g}, n = {n}), although the test had power "
                        f"{pw:.2f} against rho = {sign * e:g}", need=need)
