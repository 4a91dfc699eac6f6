"""Count-based paired tests: exact binomial (McNemar) tests on the discordant points of two models on the same points.

* :func:`paired_effect`, :func:`null_effect` -- exact McNemar on paired points (power against a stated split);
* :func:`paired_direction` -- :func:`paired_effect` with the paper's own split as the effect;
* :func:`gain_below` -- a paired gain bounded below a margin (exact Clopper-Pearson on A's own-only rate);
* :func:`binom_two_sided`, :func:`min_discordant` -- the exact two-sided p at 1/2, the fewest discordant
  points that can reach a level.
"""
from __future__ import annotations

import math

import numpy as np

from rcurves.claims.verdict import (Verdict, _alpha, _count, _first_powered, _ladder, _pct, _power_target,
                                    _share)

__all__ = ["binom_two_sided", "gain_below", "min_discordant", "null_effect", "paired_direction", "paired_effect"]


def binom_two_sided(k: int, n: int) -> float:
    """Exact two-sided binomial p-value of ``k`` successes in ``n`` at 1/2 (1 when n = 0)."""
    from scipy.stats import binom

    if n == 0:
        return 1.0
    return float(min(1.0, 2.0 * min(binom.cdf(k, n, 0.5), binom.sf(k - 1, n, 0.5))))


def _binom_one_sided(k_for: int, n: int) -> float:
    """P(X >= k_for), X ~ Binomial(n, 1/2): the one-sided p of ``k_for`` discordant points in the claimed direction."""
    from scipy.stats import binom

    return 1.0 if n == 0 else float(binom.sf(k_for - 1, n, 0.5))


def min_discordant(alpha: float = 0.05) -> int:
    """The fewest discordant points with which a one-sided exact McNemar test can reach ``alpha``
    (all of them in one direction: p = 2^-k)."""
    return int(math.ceil(math.log2(1.0 / _alpha(alpha))))


def _one_sided_power(k: int, q: float, a: float) -> float:
    """Power of the one-sided exact McNemar test (level ``a``) on ``k`` discordant points when a share
    ``q`` of them go the claim's way."""
    from scipy.stats import binom

    if k == 0:
        return 0.0
    ks = np.arange(k + 1)
    reject = binom.sf(ks - 1, k, 0.5) < a            # P(X >= c) < a: the claim's way significant at c
    return float(binom.pmf(ks, k, q)[reject].sum())


def _approx_discordant(q: float, a: float, power: float) -> int:
    """Normal approximation of the discordant points a one-sided McNemar test at level ``a`` needs for
    ``power`` against a split ``q`` (a starting point for the exact search)."""
    from scipy.stats import norm

    za, zb = float(norm.ppf(1 - a)), float(norm.ppf(power))
    return int(((za * 0.5 + zb * math.sqrt(q * (1 - q))) / (q - 0.5)) ** 2)


def paired_effect(n_for: int, n_against: int, *, alpha: float = 0.05, what: str = "the claimed direction",
                  tests: int = 1, effect: float = 0.75, power: float = 0.8) -> Verdict:
    """Effect claim on paired points: the discordant points favour the claim significantly.

    ``n_for``: points that go the claim's way only (e.g. broken by the less
    robust model only), ``n_against`` the other way. One-sided exact McNemar
    (binomial at 1/2) at level ``alpha / tests`` (Bonferroni), by the one
    ladder (:func:`_ladder`):

    * reproduced -- significant for the claim;
    * differs -- significant against it (one-sided, same level), or not
      significant although the test had at least ``power`` against a
      discordant split of ``effect`` (the claim side's share; the paper's own
      where it gives one, else 3:1);
    * inconclusive -- not significant and underpowered; the reason says about
      how many discordant points would give that power.

    ``p`` of the verdict: the one-sided p for the claim times ``tests`` (capped
    at 1), so that it compares with ``alpha``.
    """
    t = max(1, int(tests))
    a = _alpha(alpha) / t
    q, target = _share(effect), _power_target(power)
    nf, na = _count(n_for, "n_for"), _count(n_against, "n_against")
    k = nf + na
    p_for, p_against = _binom_one_sided(nf, k), _binom_one_sided(na, k)
    pw = _one_sided_power(k, q, a)
    test = (f"exact one-sided McNemar on {k} discordant points ({nf} for, {na} against): p = {p_for:.2g} "
            f"(level {a:.2g}); power {pw:.2f} against the split {q:.3f}")

    def need() -> str:
        m = _first_powered(lambda m: _one_sided_power(m, q, a), target,
                           max(k + 1, int(0.7 * _approx_discordant(q, a, target))))
        few = min_discordant(a)
        floor = (f" (the test cannot reach {a:.2g} with fewer than {few}, all in one direction)" if k < few else "")
        return (f"power {pw:.2f} < {target:g} against the split {q:.3f} with {k} discordant points{floor}: the "
                f"sample could not have shown the effect; about {m} would be needed")

    return _ladder(test, what=what, level=a, p_for=p_for, p_against=p_against, could=pw >= target,
                   null=f"no significant effect in {what} (p = {p_for:.2g} with {k} discordant points), although "
                        f"the test had power {pw:.2f} against the split {q:.3f}",
                   need=need, p=min(1.0, p_for * t))


def paired_direction(n_for: int, n_against: int, *, effect: float, alpha: float = 0.05, power: float = 0.8,
                     what: str = "the claimed direction") -> Verdict:
    """Effect claim on paired points whose size is known (the paper's own split): :func:`paired_effect`
    with ``effect`` required (the claim's share, e.g. the paper's ``n_for / (n_for + n_against)``).

    reproduced: significant for the claim; differs: significant against it, or
    not significant although the test had ``power`` against the split ``effect``;
    inconclusive: not significant and underpowered, with the number of
    discordant points that would give the power.
    """
    return paired_effect(n_for, n_against, alpha=alpha, what=what, effect=effect, power=power)


def null_effect(n_a: int, n_b: int, *, alpha: float = 0.05, effect: float = 0.75,
                power: float = 0.8) -> Verdict:
    """Null claim on paired points ("no significant difference"): passes only where the test had power.

    Two-sided exact McNemar on ``n_a`` vs ``n_b`` discordant points.
    differs: significant; reproduced: not significant, and the test had at
    least ``power`` to detect a discordant split of ``effect`` (the larger
    side's share: the paper's own where it gives one, else 3:1);
    inconclusive otherwise, with the number of discordant points that would
    give that power. ``p``: the two-sided p (small p refutes this claim: a
    null claim does not belong in :func:`holm`).
    """
    a = _alpha(alpha)
    na_, nb_ = _count(n_a, "n_a"), _count(n_b, "n_b")
    k = na_ + nb_
    p = binom_two_sided(na_, k)
    test = f"exact two-sided McNemar on {k} discordant points ({na_} vs {nb_}): p = {p:.2g}"
    if p < a:
        return Verdict("differs", test, f"the difference is significant (p = {p:.2g} < {a:g})", p)
    q = _share(effect, of="the larger side's share")
    pw = _mcnemar_power(k, q, a)
    test += f"; power {pw:.2f} against a {q:.2f} split"
    if pw >= power:
        return Verdict("reproduced", test, "", p)
    need = _first_powered(lambda m: _mcnemar_power(m, q, a), power, k + 1)
    return Verdict("inconclusive", test, f"power {pw:.2f} < {power:g} to see a {q:.2f} split with {k} discordant "
                                         f"points: the sample could not have shown a difference; about {need} "
                                         f"would be needed", p)


def gain_below(n_gain: int, n_loss: int, n: int, *, margin: float, alpha: float = 0.05,
               what: str = "the gain") -> Verdict:
    """Non-inferiority-style bound on a paired gain: is model A's rate at most ``margin`` above model B's?

    On ``n`` paired points, ``n_gain`` count for A only (e.g. robust under A,
    broken under B) and ``n_loss`` for B only. The gain ``(n_gain - n_loss) / n``
    is at most A's own-only rate ``n_gain / n``, whose exact one-sided
    Clopper-Pearson upper bound at ``1 - alpha`` bounds the gain (conservative
    when ``n_loss > 0``; exact when both models share their robust points, as
    two models both at 0 %).

    reproduced: that bound is below ``margin``; differs: not, and A is
    significantly better (one-sided exact McNemar, ``p < alpha``);
    inconclusive: neither, with the sample that would bound it. ``p``: the
    exact one-sided p of ``n_gain`` under ``Bin(n, margin)`` (below ``alpha``
    exactly when the bound is below ``margin``), so Holm can rank the rule.
    """
    from scipy.stats import beta, binom

    a = _alpha(alpha)
    g, l, nn = _count(n_gain, "n_gain"), _count(n_loss, "n_loss"), _count(n, "n")
    if g + l > nn:
        raise ValueError(f"n: expected at least n_gain + n_loss = {g + l} paired points, got {n!r}")
    m = float(margin)
    if not 0.0 < m < 1.0:
        raise ValueError(f"margin: expected a rate in (0, 1), got {margin!r}")
    if nn == 0:
        return Verdict("inconclusive", f"{what}: no paired points", "no points to bound the gain on", 1.0)
    hi = 1.0 if g >= nn else float(beta.ppf(1 - a, g + 1, nn - g))
    p = float(binom.cdf(g, nn, m))
    test = (f"{what}: {g} points for A only, {l} for B only, of {nn}: gain {(g - l) / nn:+.3f}, "
            f"{_pct(1 - a)} upper bound {hi:.3f} (exact, on A's own-only rate) vs the margin {m:g}")
    if hi < m:
        return Verdict("reproduced", test, "", p)
    p_better = _binom_one_sided(g, g + l)
    if p_better < a:
        return Verdict("differs", test, f"A is significantly better (one-sided McNemar p = {p_better:.2g}) and its "
                                        f"gain is not bounded below {m:g}", p)
    need = next((k for k in range(nn + 1, 100 * nn + 2) if 1 - a ** (1.0 / k) < m), None)
    return Verdict("inconclusive", test, f"the sample bounds the gain only below {hi:.3f}, not {m:g}; with no "
                                         f"A-only points about {need} paired points would", p)


def _mcnemar_power(k: int, q: float, a: float) -> float:
    from scipy.stats import binom

    if k == 0:
        return 0.0
    ks = np.arange(k + 1)
    p = np.minimum(1.0, 2.0 * np.minimum(binom.cdf(ks, k, 0.5), binom.sf(ks - 1, k, 0.5)))
    return float(binom.pmf(ks, k, q)[p < a].sum())
