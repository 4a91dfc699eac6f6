"""Rules that decide a reproduction's verdict from a statistic, each able to fail.

A claim of a paper is checked by a test whose rule is the paper's statement,
not a weaker one, and every rule here can return each of its verdicts (the
unit tests feed each one a case that must fail). A :class:`Verdict` carries
the verdict, the test (its statistic, p-value or interval and ``n``), why, and
``p``: the p-value that decided it, on the scale of the ``alpha`` the rule was
given (``None`` where an interval decides):

* **reproduced** -- the paper's effect shows, in its direction (and, where the
  paper gives a number, within the stated tolerance);
* **differs** -- the sample could have shown the effect and shows its
  absence or its opposite;
* **inconclusive** -- the sample could not have shown the paper's effect either
  way (the test had too little power against the stated effect, or the
  interval is too wide); the verdict says what ``n`` would do.

Every effect claim ("A is more robust than B") is decided by one ladder,
:func:`_ladder`: significant for the claim -> reproduced; significant against
it -> differs; not significant although the test could have shown the stated
effect (power against it, or the most extreme sample reaching the level) ->
differs; otherwise inconclusive, with the sample that would be needed. Null
claims ("no significant difference") are treated symmetrically: a null claim
passes only where the test had the power to reject it (:func:`null_effect`,
:func:`paired_null`), so a small sample cannot reproduce it by saying nothing.

Rules:
  :func:`paired_effect`, :func:`null_effect` -- exact McNemar on paired points (power against a stated split);
  :func:`paired_direction` -- :func:`paired_effect` with the paper's own split as the effect;
  :func:`rate_matches` -- a proportion against the paper's number, absolute tolerance (Wilson interval);
  :func:`rate_near` -- a proportion against the paper's number, relative tolerance (Clopper-Pearson interval);
  :func:`rate_below` -- a proportion claimed below a bound (Wilson interval);
  :func:`greater` -- a difference of two means with standard errors (z test);
  :func:`correlation` -- a rank correlation's sign, exact permutation p-value;
  :func:`value_matches` -- a deterministic number on the paper's own data, within a tolerance;
  :func:`share_lower` -- one proportion below another, independent samples (Fisher exact);
  :func:`dominates`, :func:`ranking_changes` -- orders of two models over many thresholds;
  :func:`paired_greater`, :func:`paired_null`, :func:`interval_above`, :func:`auc_greater` -- paired means,
  intervals, a score's ranking power;
  :func:`all_of` -- a conjunction (the worst verdict wins, reasons joined);
  :func:`holm`, :func:`bonferroni` -- a family of rules decided at multiplicity-corrected levels.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Union

import numpy as np

__all__ = ["KINDS", "VERDICTS", "Verdict", "all_of", "binom_two_sided", "bonferroni", "correlation",
           "correlation_power", "gain_below", "greater", "holm", "min_discordant", "null_effect", "paired_direction", "paired_effect", "rate_below",
           "rate_matches", "rate_near", "share_lower", "value_matches", "wilson"]

VERDICTS = ("reproduced", "differs", "inconclusive", "not reproducible here")
KINDS = ("paper", "self-check", "beyond")
_ORDER = {"reproduced": 0, "inconclusive": 1, "differs": 2, "not reproducible here": 3}


class Verdict(NamedTuple):
    """A decided claim: the verdict, what was tested (test, statistic, p or interval, n), why, and the
    p-value that decided it (``p``, for the claim's direction, on the scale of the rule's ``alpha``;
    ``None`` where no p-value decides, e.g. an interval rule)."""

    verdict: str
    test: str
    why: str = ""
    p: Optional[float] = None

    @property
    def ok(self) -> bool:
        return self.verdict == "reproduced"


def _pct(level: float) -> str:
    """A confidence level as a percentage without rounding it away (0.975 -> '97.5%', 0.95 -> '95%')."""
    return f"{100 * float(level):.4g}%"


def _alpha(alpha: float) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"alpha: expected a level in (0, 1), got {alpha!r}")
    return a


def _count(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise ValueError(f"{name}: expected a count >= 0, got {v!r}")
    return int(v)


def _share(effect: float, name: str = "effect", of: str = "the claim side's share of discordant points") -> float:
    q = float(effect)
    if not 0.5 < q < 1.0:
        raise ValueError(f"{name}: expected {of} in (0.5, 1), got {effect!r}")
    return q


def _power_target(power: float) -> float:
    pw = float(power)
    if not 0.0 < pw < 1.0:
        raise ValueError(f"power: expected a probability in (0, 1), got {power!r}")
    return pw


def _ladder(test: str, *, what: str, level: Optional[float] = None, p_for: Optional[float] = None,
            p_against: Optional[float] = None, sig_for: Optional[bool] = None, sig_against: Optional[bool] = None,
            could: bool = False, against: str = "", null: str = "", need: Union[str, Callable[[], str]] = "",
            against_first: bool = False, p: Optional[float] = None) -> Verdict:
    """The one decision of an effect claim; every effect rule here ends in it.

    1. significant for the claim (``sig_for``, default ``p_for < level``) -> **reproduced**;
    2. significant against it (``sig_against``, default ``p_against < level``) -> **differs**, ``against``
       saying why (default: "significant the other way");
    3. neither, but the test could have shown the stated effect (``could``: its power against the effect
       reached the target, or the most extreme sample reaches the level) -> **differs**, ``null`` saying why;
    4. otherwise -> **inconclusive**, ``need`` saying what sample would settle it (a callable is evaluated
       only here, so rules can defer an expensive sample-size search).

    ``against_first``: check 2 before 1, for claims that also say "nowhere the other way"
    (:func:`dominates`). The verdict's ``p`` is ``p`` if given, else ``p_for``.
    """
    sf = bool(sig_for) if sig_for is not None else (p_for is not None and p_for < level)
    sa = bool(sig_against) if sig_against is not None else (p_against is not None and p_against < level)
    rep = p_for if p is None else p
    if sf and not (against_first and sa):
        return Verdict("reproduced", test, "", rep)
    if sa:
        tail = f", p = {p_against:.2g}" if p_against is not None else ""
        return Verdict("differs", test, against or f"significant the other way ({what} reversed{tail})", rep)
    if could:
        return Verdict("differs", test, null or f"no significant effect in {what}, although the test could have "
                                                f"shown it", rep)
    return Verdict("inconclusive", test, need() if callable(need) else need, rep)


def _first_powered(power_at: Callable[[int], float], power: float, start: int, limit: int = 100000) -> Optional[int]:
    """The smallest ``m >= start`` (below ``limit``) with ``power_at(m) >= power``, or None."""
    return next((m for m in range(max(1, start), limit) if power_at(m) >= power), None)


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


def all_of(*verdicts: Verdict, test_sep: str = "; ") -> Verdict:
    """A conjunction: the worst verdict (differs > inconclusive > reproduced), tests and reasons joined.
    (``p`` is not carried: a conjunction has no single p-value.)"""
    if not verdicts:
        raise ValueError("verdicts: expected at least one")
    worst = max(verdicts, key=lambda v: _ORDER[v.verdict]).verdict
    why = test_sep.join(v.why for v in verdicts if v.why and v.verdict != "reproduced")
    return Verdict(worst, test_sep.join(v.test for v in verdicts), why)


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


# ---------------------------------------------------------------------------
# orders of two models over many thresholds (paper 000: "the ranking changes", "a is more robust than b")


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


def ranking_changes(scans: Sequence[Any], *, alpha: float = 0.05, at_least: int = 1,
                    what: str = "model pairs") -> Verdict:
    """"The ranking depends on the threshold": significant order changes between pairs of models.

    ``scans``: one ``(only_a (m_p,), only_b (m_p,))`` per pair of models, the discordant counts at that
    pair's thresholds in increasing order (``mcnemar_scan`` at every distinct finite distance of either
    model, as ``rcurves.claims.compare.significant_reversal``, or at a few point-wise thresholds). A pair's
    order changes where it is significantly one way at one threshold and significantly the other way
    at a larger one (exact two-sided McNemar at ``alpha / (m_p * P)``: Bonferroni over the thresholds
    and the ``P`` pairs); a crossing of the curves inside the noise never counts. reproduced: at least
    ``at_least`` significant changes over all pairs (a pair reversed once counts 1, reversed and back 2);
    inconclusive: fewer, and no pair had enough discordant points at any threshold to reach its level
    (``2 * 2^-k``), so the sample could not have shown a change; differs: fewer although it could have.
    """
    a = _alpha(alpha)
    need = int(at_least)
    if need < 1:
        raise ValueError(f"at_least: expected >= 1, got {at_least!r}")
    P = len(scans)
    changes, could, reversed_pairs = 0, 0, 0
    for oa, ob in scans:
        oa, ob, k, _ = _scan_counts(oa, ob)
        lev = a / max(1, oa.size * P)
        c = sign_changes(significant_sides(oa, ob, level=lev))
        changes += c
        reversed_pairs += c > 0
        if k.size and 2.0 * 0.5 ** int(k.max()) < lev:
            could += 1
    test = (f"{changes} significant order changes in {reversed_pairs} of {P} {what} (exact two-sided McNemar at "
            f"every threshold, Bonferroni over each pair's thresholds and the {P} pairs, {a:g}); needed: "
            f"{need}")
    if changes >= need:
        return Verdict("reproduced", test)
    if could == 0:
        return Verdict("inconclusive", test, f"none of the {P} {what} had enough discordant points to reach its "
                                             f"level at any threshold: a larger sample is needed")
    return Verdict("differs", test, f"only {changes} significant order changes (needed {need}), although {could} "
                                    f"of the {P} {what} could have shown them: the other crossings are within "
                                    f"sampling noise")


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


__all__ += ["dominates", "ranking_changes", "sign_changes", "significant_sides"]


# ---------------------------------------------------------------------------
# means of per-point values on paired points, intervals, and a score's ranking power (paper 004)


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


__all__ += ["auc_greater", "interval_above", "paired_greater", "paired_null"]


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


# ---------------------------------------------------------------------------
# families of claims: multiplicity-corrected levels (Holm-Bonferroni step-down, Bonferroni)

Rule = Callable[[float], Verdict]


def _family(rules: Sequence[Rule], alpha: float):
    """``(alpha, rules)``, checked."""
    a = _alpha(alpha)
    rs = list(rules)
    if not rs:
        raise ValueError("rules: expected at least one rule (a callable level -> Verdict)")
    for i, r in enumerate(rs):
        if not callable(r):
            raise ValueError(f"rules: rule {i} is not callable (expected level -> Verdict), got {r!r}")
    return a, rs


def _with_p(v: Any, i: int) -> Verdict:
    if not isinstance(v, Verdict):
        raise ValueError(f"rules: rule {i} returned {type(v).__name__}, expected a Verdict")
    if v.p is None or not math.isfinite(float(v.p)):
        raise ValueError(f"rules: rule {i} returned a verdict without a p-value (p = {v.p!r}): only rules "
                         f"decided by a p-value can be corrected for multiplicity ({v.test})")
    return v


def _family_text(how: str, m: int, family: str, level: float) -> str:
    return f"; {how} over {m} tests{f' ({family})' if family else ''}: level {level:.2g}"


def holm(rules: Sequence[Rule], *, alpha: float = 0.05, family: str = "") -> List[Verdict]:
    """Decide a family of ``m`` claims with Holm-Bonferroni's step-down (family-wise error ``alpha``).

    ``rules``: callables ``rule(level) -> Verdict``, each an effect rule at
    level ``level`` whose verdict carries ``p`` (e.g. ``lambda lv:
    paired_effect(a, b, alpha=lv)``); a rule without a p-value raises
    ValueError (naming ``rules``). Each is called at ``alpha`` for its p; in
    ascending order of p (rank ``r`` from 0), rule ``r`` is re-decided at
    ``alpha / (m - r)`` while the step-down goes on. The first rule not
    significant at its level stops it: that rule and every later one are
    decided at the level where it stopped, so none of them is significant for
    its claim; each may still be "differs" (significant against the claim, or
    powered) or "inconclusive" by its own ladder at that level. The smallest p
    is thus decided at ``alpha / m`` (as Bonferroni), and the rejections lie
    between Bonferroni's and the unadjusted ones. A null claim's rule may
    join a family, ranked by the p of the change it denies: a lower level
    makes both its "differs" and its power (or equivalence) step stricter,
    so it only becomes inconclusive more often; rules decided by an interval
    without a p-value (``rate_near``, ``rate_matches``) cannot.

    Returns the verdicts in the order of ``rules``, each ``test`` extended by
    the family and the level it was decided at.
    """
    a, rs = _family(rules, alpha)
    first = [_with_p(r(a), i) for i, r in enumerate(rs)]
    m = len(rs)
    order = sorted(range(m), key=lambda i: float(first[i].p))
    out: List[Optional[Verdict]] = [None] * m
    stop: Optional[float] = None
    for r, i in enumerate(order):
        level = a / (m - r) if stop is None else stop
        if stop is None and not float(first[i].p) < level:
            stop = level
        v = first[i] if level == a else _with_p(rs[i](level), i)
        out[i] = v._replace(test=v.test + _family_text("Holm", m, family, level))
    return out  # type: ignore[return-value]


def bonferroni(rules: Sequence[Rule], *, alpha: float = 0.05, family: str = "") -> List[Verdict]:
    """Decide a family of ``m`` claims each at ``alpha / m`` (Bonferroni; family-wise error ``alpha``).

    ``rules`` as in :func:`holm` (callables ``rule(level) -> Verdict`` with
    ``p`` set). Simpler and never more powerful than :func:`holm`. Returns the
    verdicts in the order of ``rules``, each ``test`` extended by the family
    and the level.
    """
    a, rs = _family(rules, alpha)
    m = len(rs)
    out = []
    for i, r in enumerate(rs):
        v = _with_p(r(a / m), i)
        out.append(v._replace(test=v.test + _family_text("Bonferroni", m, family, a / m)))
    return out
