"""Every verdict rule returns each of its verdicts on a case built for it: none of them can only pass."""
import math

import numpy as np
import pytest

from rcurves.claims import paired_counts as PC
from rcurves.claims import paired_values as PV
from rcurves.claims import rank_correlation as RC
from rcurves.claims import verdict as VD
from rcurves.claims import verdicts as V


def test_paired_effect_all_outcomes():
    assert V.paired_effect(40, 10).verdict == "reproduced"
    assert V.paired_effect(10, 40).verdict == "differs"                 # significant the other way
    # could have, did not: since report round 2 "could" means power >= 0.8 against a 3:1 split (0.97 with
    # 50 points), no longer "5 discordant points exist"; the verdict here is the same
    v = V.paired_effect(26, 24)
    assert v.verdict == "differs" and "power 0.97" in v.why
    v = V.paired_effect(4, 0)                                           # 2^-4 = 0.0625 > 0.05: cannot
    assert v.verdict == "inconclusive" and "fewer than 5" in v.why
    assert V.paired_effect(5, 0).verdict == "reproduced"                # 2^-5 < 0.05
    assert V.paired_effect(6, 0, tests=10).verdict == "inconclusive"    # Bonferroni level 0.005
    assert V.min_discordant(0.05) == 5
    # the old rule said "differs" from 5 discordant points on (3 vs 3: 2^-6 < 0.05 was reachable); with
    # power 0.00 against 3:1 the sample could not have shown the effect: inconclusive since round 2
    v = V.paired_effect(3, 3)
    assert v.verdict == "inconclusive" and "would be needed" in v.why


def test_null_effect_needs_power():
    # 002 Table 1 as it was: 7 discordant points can never be significant, so "no difference" says nothing
    assert V.null_effect(4, 3).verdict == "inconclusive"
    assert V.null_effect(1, 6, effect=0.65).verdict == "inconclusive"
    assert V.null_effect(52, 48, effect=0.65).verdict == "reproduced"   # n = 100: power at 0.65 ~ 0.83
    assert V.null_effect(70, 30, effect=0.65).verdict == "differs"
    assert V.null_effect(30, 31).verdict == "reproduced"                  # 61 points: power vs 3:1
    v = V.null_effect(10, 12, effect=0.65)
    assert v.verdict == "inconclusive" and "would be needed" in v.why


def test_rate_matches():
    assert V.rate_matches(920, 1000, 0.92, tol=0.02).verdict == "reproduced"
    assert V.rate_matches(730, 1000, 0.92, tol=0.03).verdict == "differs"   # 003 Tables 3-4's old row
    assert V.rate_matches(7, 10, 0.92, tol=0.03).verdict == "inconclusive"  # too few to place it
    assert V.rate_matches(990, 1000, 0.92, tol=0.03).verdict == "differs"   # above counts too
    lo, hi = V.wilson(50, 100)
    assert lo < 0.5 < hi and abs((lo + hi) / 2 - 0.5) < 1e-9


def test_greater():
    assert V.greater(0.55, 0.01, 0.18, 0.01, factor=2).verdict == "reproduced"     # "much higher"
    assert V.greater(0.30, 0.01, 0.18, 0.01, factor=2).verdict == "differs"        # higher, not much higher
    assert V.greater(0.18, 0.01, 0.30, 0.01).verdict == "differs"
    assert V.greater(0.2, 0.5, 0.18, 0.5).verdict == "inconclusive"
    assert V.greater(float("nan"), 0.1, 0.2, 0.1).verdict == "inconclusive"


def test_correlation():
    x = np.arange(8.0)
    assert V.correlation(x, x + 0.1 * np.sin(x)).verdict == "reproduced"
    assert V.correlation(x, -x).verdict == "differs"                             # significant the other way
    assert V.correlation([1, 2, 3], [1, 2, 3]).verdict == "inconclusive"        # 1/3! > 0.05
    assert V.correlation(np.arange(20.0), np.arange(20.0) ** 2).verdict == "reproduced"
    # 8 values at rho 0.5 (p 0.10): power 0.45 against rho 0.6 -> inconclusive, not differs; against 0.9 it
    # had power 0.92 -> differs
    y = [3, 1, 4, 1, 5, 9, 2, 6]
    v = V.correlation(x, y)
    assert v.verdict == "inconclusive" and "would be needed" in v.why
    assert V.correlation(x, y, effect=0.9).verdict == "differs"
    # 30 values with no correlation (power ~0.97 against 0.6): differs
    rng = np.random.default_rng(1)
    assert V.correlation(rng.normal(size=30), rng.normal(size=30)).verdict == "differs"


def test_correlation_power_against_exact_enumeration():
    """The p-values the power counts are the exact test's (size 5/120 at n = 5); power rises with n and effect;
    5 models against rho 0.6 (004's and 003's case) have power far below 0.8."""
    # exact size at n = 5: the orderings with p < 0.05 are those with rho >= 0.9 (5 of 120)
    null = RC._spearman_null(5)
    assert np.isclose(np.mean(RC._spearman_p(null, 5) < 0.05), 5 / 120)
    p5 = V.correlation_power(5, 0.6)
    assert 0.15 < p5 < 0.35
    assert V.correlation_power(5, 0.6) < V.correlation_power(8, 0.6) < V.correlation_power(20, 0.6)
    assert V.correlation_power(8, 0.6) < V.correlation_power(8, 0.9)
    assert V.correlation_power(30, 0.6) > 0.9
    # small-n p agrees with the exact permutation p of correlation itself
    ys = [2.0, 1.0, 4.0, 3.0, 6.0, 5.0]
    v = V.correlation(np.arange(6.0), ys)
    assert np.isclose(v.p, RC._spearman_p(np.array([0.8285714285714286]), 6)[0])


def test_all_of_takes_the_worst():
    r, d, i = V.Verdict("reproduced", "t1"), V.Verdict("differs", "t2", "w2"), V.Verdict("inconclusive", "t3", "w3")
    assert V.all_of(r, r).verdict == "reproduced"
    assert V.all_of(r, i).verdict == "inconclusive" and V.all_of(r, i).why == "w3"
    assert V.all_of(i, d, r).verdict == "differs" and "t1" in V.all_of(i, d, r).test


@pytest.mark.parametrize("call,name", [
    (lambda: V.paired_effect(-1, 2), "n_for"),
    (lambda: V.paired_effect(1, 2, alpha=0), "alpha"),
    (lambda: V.null_effect(1, 2, effect=0.4), "effect"),
    (lambda: V.rate_matches(1, 2, 0.5, tol=-1), "tol"),
    (lambda: V.all_of(), "verdicts"),
    (lambda: V.paired_effect(1, 2, effect=0.5), "effect"),
    (lambda: V.paired_effect(1, 2, effect=1.0), "effect"),
    (lambda: V.paired_effect(1, 2, power=1.0), "power"),
    (lambda: V.rate_near(-1, 10, 0.1, rel_tol=0.5), "k"),
    (lambda: V.rate_near(11, 10, 0.1, rel_tol=0.5), "k"),
    (lambda: V.rate_near(0, 0, 0.1, rel_tol=0.5), "n"),
    (lambda: V.rate_near(1, 10, 0.0, rel_tol=0.5), "paper"),
    (lambda: V.rate_near(1, 10, 1.0, rel_tol=0.5), "paper"),
    (lambda: V.rate_near(1, 10, 0.1, rel_tol=0), "rel_tol"),
    (lambda: V.rate_near(1, 10, 0.1, rel_tol=0.5, alpha=1), "alpha"),
    (lambda: V.holm([]), "rules"),
    (lambda: V.holm([0.01]), "rules"),
    (lambda: V.holm([lambda lv: V.interval_above(1.1, 1.6, null=1.0, effect=1.25)]), "rules"),
    (lambda: V.bonferroni([lambda lv: V.Verdict("reproduced", "t")]), "rules"),
    (lambda: V.holm([lambda lv: V.paired_effect(9, 1, alpha=lv)], alpha=0), "alpha"),
])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_paired_direction_all_outcomes():
    q = 0.652                                                            # 002 Table 1's split (30 vs 16)
    assert V.paired_direction(30, 16, effect=q).verdict == "reproduced"   # one-sided p = 0.027
    assert V.paired_direction(16, 30, effect=q).verdict == "differs"      # significant the other way
    v = V.paired_direction(8, 7, effect=q)                                # 15 points: power ~0.25
    assert v.verdict == "inconclusive" and "about" in v.why
    need = int(v.why.split("about ")[1].split()[0])
    assert 50 < need < 90                                                # ~ (1.645 + 0.84)^2 / (4 * 0.152^2) = 67
    assert V.paired_direction(60, 60, effect=q).verdict == "differs"      # 120 points: power > 0.8, no effect
    assert V.paired_direction(5, 0, effect=0.9).verdict == "reproduced"   # 2^-5 < 0.05
    # the power is that of the one-sided test: brute force over the binomial for k = 20
    from scipy.stats import binom
    c = min(c for c in range(21) if binom.sf(c - 1, 20, 0.5) < 0.05)
    assert PC._one_sided_power(20, 0.7, 0.05) == pytest.approx(binom.sf(c - 1, 20, 0.7), rel=1e-12)


def test_rate_below_all_outcomes():
    assert V.rate_below(20, 100, 0.5).verdict == "reproduced"           # Wilson [0.13, 0.29]
    assert V.rate_below(80, 100, 0.5).verdict == "differs"
    v = V.rate_below(4, 10, 0.5)                                         # [0.17, 0.69]: cannot tell
    assert v.verdict == "inconclusive" and "n = " in v.why
    n_need = int(v.why.split("n = ")[1].split()[0])
    assert V.wilson(round(0.4 * n_need), n_need)[1] < 0.5 <= V.wilson(round(0.4 * (n_need - 1)), n_need - 1)[1]
    assert V.rate_below(6, 10, 0.5).verdict == "inconclusive"           # above the bound, not significantly
    assert V.rate_below(0, 0, 0.5).verdict == "inconclusive"


def test_value_matches():
    assert V.value_matches(0.9677, 0.9677, tol=0).verdict == "reproduced"
    assert V.value_matches(0.9691, 0.9677, tol=0.001).verdict == "differs"
    assert V.value_matches(float("nan"), 0.5, tol=1).verdict == "differs"


@pytest.mark.parametrize("call,name", [
    (lambda: V.paired_direction(1, 2, effect=0.5), "effect"),
    (lambda: V.rate_below(3, 2, 0.5), "k"),
    (lambda: V.rate_below(1, 2, 1.5), "bound"),
    (lambda: V.value_matches(1, 1, tol=-1), "tol"),
])
def test_bad_input_appended_rules(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ---------------------------------------------------------------------------
# orders of two models over thresholds (000 Table 1, Figures 2 and 4)


def test_significant_sides_and_sign_changes():
    # 30 vs 5 discordant points: p = 2.2e-5; 3 vs 1: p = 0.625
    s = V.significant_sides(np.array([5, 3, 30]), np.array([30, 1, 5]), level=0.01)
    assert s.tolist() == [1, 0, -1]               # a more robust (fewer broken by a only), neither, b
    assert V.sign_changes([1, 0, -1, -1, 1]) == 2 and V.sign_changes([0, 1, 1, 0]) == 0 and V.sign_changes([]) == 0


def test_ranking_changes_all_outcomes():
    rev = (np.array([2, 30]), np.array([30, 2]))              # a better at the first threshold, b at the second
    same = (np.array([2, 3]), np.array([30, 40]))             # a better at both: no change
    tiny = (np.array([1, 0]), np.array([0, 1]))               # an exact crossing inside the noise
    big = (np.array([20, 30]), np.array([300, 400]))          # a better at both, with power against a 3:1 split
    assert V.ranking_changes([rev, same]).verdict == "reproduced"
    v = V.ranking_changes([big, tiny])                        # could have shown a change (power ~1), did not
    assert v.verdict == "differs" and "power at least 1.00" in v.why
    assert V.ranking_changes([tiny]).verdict == "inconclusive"             # 1 discordant point can never be
    # enough discordant points to reach the level (32 and 43: 2 x 2^-32 < 0.0125), too few for power against a
    # 3:1 split at 0.05 / 4: the old rule's feasibility floor said differs; the sample could not have shown it
    v = V.ranking_changes([same, tiny])
    assert v.verdict == "inconclusive" and "bounded below only by" in v.why and "discordant points at each" in v.why
    # "multiple": one change is not enough; a pair with two thresholds can never show two changes
    assert V.ranking_changes([rev], at_least=2).verdict == "inconclusive"
    three = (np.array([20, 400, 300]), np.array([300, 20, 30]))           # reversed once, powered for a second
    v = V.ranking_changes([three], at_least=2)
    assert v.verdict == "differs" and "2 changes" in v.why
    back = (np.array([2, 30, 2]), np.array([30, 2, 30]))
    assert V.ranking_changes([back], at_least=2).verdict == "reproduced"  # reversed and back: 2 changes
    # Bonferroni over thresholds and pairs: 7 vs 0 discordant points (p = 0.016) passes 0.05 / 2 thresholds
    # for one pair, not 0.05 / (2 x 10) among 10 pairs
    seven = (np.array([0, 7]), np.array([7, 0]))
    assert V.ranking_changes([seven]).verdict == "reproduced"
    assert V.ranking_changes([seven] + [big] * 9).verdict == "differs"
    assert V.ranking_changes([seven] + [same] * 9).verdict == "inconclusive"
    assert V.order_changes([rev, same, back]) == 3 and V.order_changes([seven] + [same] * 9) == 0
    with pytest.raises(ValueError, match="effect"):
        V.ranking_changes([rev], effect=0.5)


def test_reversal_power_is_a_lower_bound():
    from scipy.stats import binom

    # two thresholds of one pair: P(both significant, opposite ways) >= 1 - (1 - p1) - (1 - p2) (Bonferroni),
    # each p the exact two-sided McNemar power at the level against the 3:1 split
    def power(k, level):
        ks = np.arange(k + 1)
        p = np.minimum(1.0, 2.0 * np.minimum(binom.cdf(ks, k, 0.5), binom.sf(ks - 1, k, 0.5)))
        return float(binom.pmf(ks, k, 0.75)[p < level].sum())

    lv = 0.01
    assert V.reversal_power(np.array([60, 80]), level=lv) == pytest.approx(power(60, lv) + power(80, lv) - 1)
    # the best two of several thresholds; an impossible second change gives 0
    assert V.reversal_power(np.array([5, 80, 60, 10]), level=lv) == pytest.approx(power(60, lv) + power(80, lv) - 1)
    assert V.reversal_power(np.array([80, 60]), level=lv, changes=2) == 0.0
    assert V.reversal_power(np.array([12, 12]), level=0.05 / 2) == 0.0     # reachable, yet powerless: bound 0
    # a Monte Carlo check of the bound: both tests significant, opposite ways, at least this often
    rng = np.random.default_rng(0)
    k1, k2 = 40, 50
    hits = 0
    for _ in range(2000):
        a1 = rng.binomial(k1, 0.75)
        a2 = rng.binomial(k2, 0.25)
        s = V.significant_sides(np.array([k1 - a1, k2 - a2]), np.array([a1, a2]), level=lv)
        hits += V.sign_changes(s) == 1
    assert hits / 2000 >= V.reversal_power(np.array([k1, k2]), level=lv) - 0.03
    with pytest.raises(ValueError, match="changes"):
        V.reversal_power(np.array([10, 10]), level=lv, changes=0)


def test_ranking_changes_agrees_with_significant_reversal():
    from rcurves.claims.compare import mcnemar_scan, significant_reversal

    rng = np.random.default_rng(0)
    for trial in range(20):
        da = rng.exponential(1.0, 200)
        db = np.where(rng.random(200) < 0.5, da * rng.uniform(0.5, 1.5), rng.exponential(1.0, 200))
        if trial % 2:
            db = np.where(da < 0.7, da * 1.6, da * 0.6)        # a real reversal
        knots = np.unique(np.concatenate([da, db]))
        oa, ob, _ = mcnemar_scan(da, db, knots)
        found = significant_reversal(da, db)["found"]
        assert (V.ranking_changes([(oa, ob)]).verdict == "reproduced") == found


def test_dominates_all_outcomes():
    assert V.dominates(np.array([0, 2, 5]), np.array([0, 10, 30])).verdict == "reproduced"
    # better somewhere, significantly worse elsewhere (000 Figure 4: AT-linf worse at l_2 1.5): differs
    v = V.dominates(np.array([2, 30]), np.array([30, 2]), eps=[1.0, 2.0])
    assert v.verdict == "differs" and "at 2 (30 points broken by a only" in v.test
    assert V.dominates(np.array([20, 21]), np.array([21, 20])).verdict == "differs"     # could have, did not
    assert V.dominates(np.array([0, 1]), np.array([2, 3])).verdict == "inconclusive"    # 5 points at most
    assert V.dominates(np.array([0, 0]), np.array([7, 7])).verdict == "reproduced"      # p = 0.016 < 0.025
    assert V.dominates(np.array([0, 0]), np.array([7, 7]), tests=20).verdict == "inconclusive"
    with pytest.raises(ValueError, match="only_b"):
        V.dominates(np.array([1, 2]), np.array([1]))
    with pytest.raises(ValueError, match="at_least"):
        V.ranking_changes([], at_least=0)


# ---------------------------------------------------------------------------
# paired means, intervals and a score's ranking (paper 004's sparsity comparisons)


def test_paired_greater_all_outcomes():
    from scipy.stats import ttest_rel

    rng = np.random.default_rng(0)
    b = rng.normal(1.0, 0.2, 40)
    a = b + 0.1 + rng.normal(0, 0.05, 40)
    v = V.paired_greater(a, b, effect=0.05)
    assert v.verdict == "reproduced"
    p = float(v.test.split("p = ")[1])
    assert p == pytest.approx(ttest_rel(a, b, alternative="greater").pvalue, rel=0.05)   # the paired t test
    assert V.paired_greater(b, a, effect=0.05).verdict == "differs"                        # the other way
    same = b + rng.normal(0, 0.05, 40)
    v = V.paired_greater(same, b, effect=0.1)                   # se ~0.008: could resolve 0.1, shows nothing
    assert v.verdict == "differs" and "power" in v.why
    v = V.paired_greater(b[:4] + rng.normal(0, 1.0, 4), b[:4], effect=0.1)                # 4 noisy points
    assert v.verdict == "inconclusive" and "points would be needed" in v.why
    assert V.paired_greater([1.0], [0.0], effect=0.1).verdict == "inconclusive"          # one pair
    # "much higher": twice as high passes factor 2, 1.5 times fails it significantly
    assert V.paired_greater(2.5 * b, b, factor=2, effect=0.1).verdict == "reproduced"
    assert V.paired_greater(1.5 * b + rng.normal(0, 0.01, 40), b, factor=2, effect=0.1).verdict == "differs"
    # non-finite pairs are dropped, not counted
    v = V.paired_greater(np.r_[a, np.nan], np.r_[b, 1.0], effect=0.05)
    assert "n = 40" in v.test


def test_paired_null_all_outcomes():
    rng = np.random.default_rng(1)
    b = rng.normal(1.0, 0.2, 60)
    assert V.paired_null(b + rng.normal(0, 0.05, 60), b, effect=0.05).verdict == "reproduced"   # bound ~0.01
    v = V.paired_null(b + 0.1 + rng.normal(0, 0.05, 60), b, effect=0.05)                 # 0.1 > margin 0.05
    assert v.verdict == "differs" and "above the margin" in v.why
    v = V.paired_null(b[:5] + rng.normal(0, 0.3, 5), b[:5], effect=0.05)
    assert v.verdict == "inconclusive"                                                     # 5 noisy points
    # a small, significant gain inside the margin does not refute "no gain of 0.05 or more"
    small = b + 0.01 + rng.normal(0, 0.005, 60)
    assert V.paired_null(small, b, effect=0.05).verdict == "reproduced"
    lower = b - 0.1 + rng.normal(0, 0.05, 60)                 # a significant decrease
    assert V.paired_null(lower, b, effect=0.05).verdict == "reproduced"                   # "no improvement" holds
    assert V.paired_null(lower, b, effect=0.05, side="two-sided").verdict == "differs"    # "about the same" fails
    # the upper bound is the paired t bound: brute force from scipy
    from scipy.stats import t as student
    d = (small - b)
    v = V.paired_null(small, b, effect=0.05)
    hi = d.mean() + student.ppf(0.95, 59) * d.std(ddof=1) / math.sqrt(60)
    assert f"{hi:.4g}" in v.test
    v = V.paired_null(b[:20] + 0.03 + rng.normal(0, 0.2, 20), b[:20], effect=0.05)
    assert v.verdict == "inconclusive" and "would settle it" in v.why


def test_interval_above_all_outcomes():
    assert V.interval_above(1.1, 1.6, null=1.0, effect=1.25).verdict == "reproduced"
    assert V.interval_above(0.5, 0.9, null=1.0, effect=1.25).verdict == "differs"       # below the null
    assert V.interval_above(0.9, 1.2, null=1.0, effect=1.25).verdict == "differs"       # rules the effect out
    assert V.interval_above(0.9, 1.6, null=1.0, effect=1.25).verdict == "inconclusive"
    assert V.interval_above(float("nan"), 1.6, null=1.0, effect=1.25).verdict == "inconclusive"


def test_auc_greater_all_outcomes():
    rng = np.random.default_rng(2)
    pos, neg = rng.normal(1, 1, 40), rng.normal(0, 1, 40)
    v = V.auc_greater(pos, neg)
    assert v.verdict == "reproduced"
    auc = float(v.test.split("ROC AUC ")[1].split()[0])
    assert auc == pytest.approx(np.mean(pos[:, None] > neg[None, :]), abs=1e-3)     # brute force over pairs
    assert V.auc_greater(neg, pos).verdict == "differs"
    v = V.auc_greater(rng.normal(0, 1, 200), rng.normal(0, 1, 200))
    assert v.verdict == "differs" and "power" in v.why
    v = V.auc_greater([1.0, 3, 5, 7, 9], [2.0, 4, 6, 8, 10])                       # AUC 0.4 on 5 + 5
    assert v.verdict == "inconclusive" and "would be needed" in v.why
    assert V.auc_greater([1.0, 2.0], []).verdict == "inconclusive"
    # the power grows with n and reaches 0.8 where the rule says it does
    assert PV._auc_power(10, 10, 0.65, 0.05) < PV._auc_power(100, 100, 0.65, 0.05)
    k = int(v.why.split("about ")[1].split()[0]) // 5
    assert PV._auc_power(5 * k, 5 * k, 0.65, 0.05) >= 0.8 > PV._auc_power(5 * (k - 1), 5 * (k - 1), 0.65, 0.05)


@pytest.mark.parametrize("call,name", [
    (lambda: V.paired_greater([1, 2], [1, 2, 3], effect=0.1), "b"),
    (lambda: V.paired_greater([1, 2], [1, 2], effect=0), "effect"),
    (lambda: V.paired_null([1, 2], [1, 3], effect=0.1, side="less"), "side"),
    (lambda: V.interval_above(0, 1, null=1, effect=0.5), "effect"),
    (lambda: V.auc_greater([1], [0], auc_effect=0.4), "auc_effect"),
])
def test_bad_input_paired_rules(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_share_lower_all_outcomes():
    assert V.share_lower(0, 20, 100, 220).verdict == "reproduced"         # 0 % vs 45 %
    assert V.share_lower(100, 220, 0, 20).verdict == "differs"            # the other way
    assert V.share_lower(10, 20, 100, 200).verdict == "differs"           # equal shares, 20 points could show it
    assert V.share_lower(0, 2, 1, 3).verdict == "inconclusive"            # 2 points: no split reaches 0.05
    from scipy.stats import fisher_exact
    v = V.share_lower(3, 30, 15, 40)
    assert v.verdict == "reproduced"
    assert f"{fisher_exact([[3, 27], [15, 25]], alternative='less').pvalue:.2g}" in v.test
    with pytest.raises(ValueError, match="k_a"):
        V.share_lower(5, 4, 1, 2)


# ---------------------------------------------------------------------------
# report round 2: Verdict.p, the one ladder, power-aware paired_effect, Holm / Bonferroni families, rate_near


def test_verdict_positional_construction_still_works_and_p_defaults_to_none():
    v = V.Verdict("differs", "t", "w")
    assert (v.verdict, v.test, v.why, v.p) == ("differs", "t", "w", None) and not v.ok
    assert V.Verdict("reproduced", "t").why == "" and V.Verdict("reproduced", "t").p is None
    assert V.Verdict("reproduced", "t", "", 0.01).p == 0.01 and V.Verdict("reproduced", "t").ok
    verdict, test, why, p = V.Verdict("inconclusive", "t", "w", 0.5)                    # four fields now


def test_the_ladder_takes_each_step():
    calls = []

    def need():
        calls.append(1)
        return "about 9 would be needed"

    lad = lambda **kw: VD._ladder("t", what="x", level=0.05, need=need, **kw)
    v = lad(p_for=0.01, p_against=0.99, could=True)
    assert (v.verdict, v.p) == ("reproduced", 0.01)
    v = lad(p_for=0.99, p_against=0.01, could=True)
    assert v.verdict == "differs" and "other way" in v.why and v.p == 0.99           # p is the claim's
    v = lad(p_for=0.3, p_against=0.7, could=True, null="powered, nothing")
    assert (v.verdict, v.why) == ("differs", "powered, nothing")
    assert calls == []                                                                 # need() only when used
    v = lad(p_for=0.3, p_against=0.7, could=False)
    assert (v.verdict, v.why) == ("inconclusive", "about 9 would be needed") and calls == [1]
    # booleans instead of p-values (interval rules), the reported p apart from the deciding one
    v = VD._ladder("t", what="x", sig_for=True, sig_against=False, p=0.2)
    assert (v.verdict, v.p) == ("reproduced", 0.2)
    # "nowhere the other way" claims check the against step first
    assert VD._ladder("t", what="x", sig_for=True, sig_against=True).verdict == "reproduced"
    assert VD._ladder("t", what="x", sig_for=True, sig_against=True, against_first=True).verdict == "differs"


def test_paired_effect_asks_whether_the_sample_could_have_shown_the_effect():
    # 004 Table 1's augmentation row: 14 vs 18 of 32 discordant points. Against the paper's own effect
    # (4 points of accuracy: a split near 0.65) 32 points have power 0.40, and at the level of the
    # report's 18-claim family (0.05 / 18) power 0.43 even against 3:1: inconclusive, not differs
    v = V.paired_effect(14, 18, effect=0.65)
    assert v.verdict == "inconclusive" and "power 0.40" in v.why and "would be needed" in v.why
    assert V.paired_effect(14, 18, tests=18).verdict == "inconclusive"
    fam = V.holm([lambda lv: V.paired_effect(14, 18, alpha=lv)] + [lambda lv: V.paired_effect(1, 1, alpha=lv)] * 17)
    assert fam[0].verdict == "inconclusive"
    # with the default 3:1 split at 5 % the exact one-sided test on 32 points has power 0.85 >= 0.8: a
    # 14:18 sample is then evidence against a 3:1 effect, and the rule says so
    v = V.paired_effect(14, 18)
    assert v.verdict == "differs" and "power 0.85" in v.why
    # the other outcomes
    v = V.paired_effect(0, 40)
    assert v.verdict == "differs" and "other way" in v.why
    v = V.paired_effect(30, 2)
    assert v.verdict == "reproduced"
    from scipy.stats import binom
    assert v.p == pytest.approx(binom.sf(29, 32, 0.5), rel=1e-12)                       # one-sided exact p
    v = V.paired_effect(100, 100)                                                        # a powered null
    assert v.verdict == "differs" and "power 1.00" in v.why
    # the number quoted gives the power, and is about the first that does
    v = V.paired_effect(8, 7, effect=0.652)
    need = int(v.why.split("about ")[1].split()[0])
    assert PC._one_sided_power(need, 0.652, 0.05) >= 0.8
    assert max(PC._one_sided_power(m, 0.652, 0.05) for m in range(16, int(0.8 * need))) < 0.8
    # p is on the scale of alpha: times tests
    assert V.paired_effect(30, 2, tests=4).p == pytest.approx(4 * binom.sf(29, 32, 0.5), rel=1e-12)
    assert V.paired_effect(0, 40, tests=4).p == 1.0
    # paired_direction is paired_effect with the effect required
    for nf, na in [(30, 16), (16, 30), (8, 7), (60, 60)]:
        assert V.paired_direction(nf, na, effect=0.652) == V.paired_effect(nf, na, effect=0.652)


def test_ladder_rules_report_the_deciding_p():
    # every rule decided by a p-value sets .p, and "reproduced" is exactly p < alpha (what holm relies on)
    for nf in range(0, 21):
        for na in range(0, 21 - nf, 3):
            for a in (0.05, 0.01):
                v = V.paired_effect(nf, na, alpha=a)
                assert v.p is not None and (v.verdict == "reproduced") == (v.p < a)
    for ka in range(0, 11, 2):
        v = V.share_lower(ka, 20, 10, 20)
        assert v.p is not None and (v.verdict == "reproduced") == (v.p < 0.05)
    rng = np.random.default_rng(3)
    b = rng.normal(1.0, 0.2, 30)
    for v in (V.greater(0.55, 0.01, 0.18, 0.01, factor=2), V.greater(0.18, 0.01, 0.30, 0.01),
              V.correlation(np.arange(8.0), np.arange(8.0)), V.paired_greater(b + 0.1, b, effect=0.05),
              V.paired_null(b + rng.normal(0, 0.05, 30), b, effect=0.05),
              V.paired_null(b + rng.normal(0, 0.05, 30), b, effect=0.05, side="two-sided"),
              V.auc_greater(rng.normal(1, 1, 30), rng.normal(0, 1, 30)),
              V.dominates(np.array([0, 2, 5]), np.array([0, 10, 30])), V.null_effect(30, 31)):
        assert v.p is not None and 0 <= v.p <= 1
        if v.verdict == "reproduced" and "two-sided McNemar on" not in v.test:             # null_effect: p < a refutes
            assert v.p < 0.05
    # dominates: the smallest p where a is ahead, times the thresholds (Bonferroni) -- 7 vs 0 twice: 2 x 2^-6
    assert V.dominates(np.array([0, 0]), np.array([7, 7])).p == pytest.approx(2 * 2 * 0.5 ** 7)
    # interval rules have no p
    assert V.interval_above(1.1, 1.6, null=1.0, effect=1.25).p is None
    assert V.rate_below(20, 100, 0.5).p is None and V.value_matches(1, 1, tol=0).p is None


def _textbook_holm(ps, alpha):
    """Indices rejected by Holm's step-down, straight from the definition."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out = set()
    for r, i in enumerate(order):
        if ps[i] >= alpha / (len(ps) - r):
            break
        out.add(i)
    return out


def _fixed(p, verdict_if_not="inconclusive"):
    return lambda lv: V.Verdict("reproduced" if p < lv else verdict_if_not, f"p = {p}", "", p)


def test_holm_family_of_eighteen():
    # the report's family: three p's that pass 0.05 alone do not survive 18 tests; 1e-6 does
    ps = [0.02, 1e-6, 0.041, 0.032] + [0.3 + 0.03 * i for i in range(14)]
    out = V.holm([_fixed(p) for p in ps], family="report round 2")
    assert [v.verdict for v in out[:4]] == ["inconclusive", "reproduced", "inconclusive", "inconclusive"]
    assert all(v.verdict == "inconclusive" for v in out[4:])
    assert [v.p for v in out] == ps                                                       # the input order
    assert out[1].test.endswith("; Holm over 18 tests (report round 2): level 0.0028")
    assert out[0].test.endswith("level 0.0029")                       # stopped at rank 1: 0.05 / 17, and stays
    assert all(v.test.endswith("level 0.0029") for v in out[2:])
    # the smallest p is decided at alpha / m: as Bonferroni
    bon = V.bonferroni([_fixed(p) for p in ps], family="report round 2")
    assert out[1].verdict == bon[1].verdict == "reproduced"
    assert bon[1].test.endswith("; Bonferroni over 18 tests (report round 2): level 0.0028")
    assert out[1].test.split("level ")[-1] == bon[1].test.split("level ")[-1]
    assert V.holm([_fixed(0.01)])[0].test.endswith("; Holm over 1 tests: level 0.05")    # no family name


def test_holm_steps_down_and_stops():
    # Holm rejects more than Bonferroni: 0.01 < 0.05 / 2, then 0.04 < 0.05 / 1
    assert [v.verdict for v in V.holm([_fixed(0.04), _fixed(0.01)])] == ["reproduced", "reproduced"]
    assert [v.verdict for v in V.bonferroni([_fixed(0.04), _fixed(0.01)])] == ["inconclusive", "reproduced"]
    # once stopped, later tests are decided at the stopping level: 0.024 < 0.05 / 2 at its own rank, but the
    # step-down stopped at 0.02 >= 0.05 / 3
    out = V.holm([_fixed(0.03), _fixed(0.024), _fixed(0.02)])
    assert [v.verdict for v in out] == ["inconclusive"] * 3
    assert all(v.test.endswith("level 0.017") for v in out)
    # a claim significantly the other way stays "differs" after the correction; a powered one too
    out = V.holm([lambda lv: V.paired_effect(0, 40, alpha=lv), lambda lv: V.paired_effect(200, 200, alpha=lv),
                  lambda lv: V.paired_effect(40, 0, alpha=lv), lambda lv: V.paired_effect(14, 18, alpha=lv)])
    assert [v.verdict for v in out] == ["differs", "differs", "reproduced", "inconclusive"]
    assert "Holm over 4 tests" in out[0].test and out[2].test.endswith("level 0.013")      # 0.05 / 4, two digits


def test_holm_lies_between_bonferroni_and_unadjusted():
    rng = np.random.default_rng(7)
    strict = 0
    for _ in range(30):
        m = int(rng.integers(1, 9))
        counts = [(int(rng.integers(0, 25)), int(rng.integers(0, 12))) for _ in range(m)]
        rules = [lambda lv, c=c: V.paired_effect(*c, alpha=lv) for c in counts]
        alone = [V.paired_effect(*c) for c in counts]
        raw = {i for i, v in enumerate(alone) if v.verdict == "reproduced"}
        hol = {i for i, v in enumerate(V.holm(rules)) if v.verdict == "reproduced"}
        bon = {i for i, v in enumerate(V.bonferroni(rules)) if v.verdict == "reproduced"}
        assert bon <= hol <= raw
        assert hol == _textbook_holm([v.p for v in alone], 0.05)
        strict += bon < hol
        # the smallest p is decided as Bonferroni decides it
        i = min(range(m), key=lambda j: alone[j].p)
        assert (i in hol) == (i in bon)
    assert strict > 0                                   # the draw includes families where Holm gains


def test_rate_near_all_outcomes():
    from scipy.stats import beta, binomtest

    v = V.rate_near(0, 1000, 0.07, rel_tol=0.5)                  # none broken vs the paper's 7 %
    assert v.verdict == "differs" and "below" in v.why
    assert V.rate_near(1, 1000, 0.06, rel_tol=0.5).verdict == "differs"
    v = V.rate_near(70, 1000, 0.07, rel_tol=0.5)
    assert v.verdict == "reproduced" and v.p == pytest.approx(1.0)
    v = V.rate_near(300, 1000, 0.07, rel_tol=0.5)                # far above the band
    assert v.verdict == "differs" and "above" in v.why
    v = V.rate_near(1, 10, 0.07, rel_tol=0.5)                    # [0.003, 0.445]: too wide to place it
    assert v.verdict == "inconclusive" and "larger sample" in v.why
    # the band is relative: 0.12 is within a factor 2 of 0.07 but not within a factor 1.25
    assert V.rate_near(120, 1000, 0.07, rel_tol=1.0).verdict == "reproduced"
    assert V.rate_near(120, 1000, 0.07, rel_tol=0.25).verdict == "differs"
    # the interval is Clopper-Pearson (beta quantiles), p the exact two-sided binomial test's
    k, n = 12, 200
    v = V.rate_near(k, n, 0.07, rel_tol=0.5)
    lo, hi = beta.ppf(0.025, k, n - k + 1), beta.ppf(0.975, k + 1, n - k)
    assert f"[{lo:.4f}, {hi:.4f}]" in v.test
    assert v.p == pytest.approx(binomtest(k, n, 0.07).pvalue, rel=1e-12)


def test_correlation_with_a_constant_side_is_not_reproduced():
    """Spearman's rho is undefined (nan) when one side is constant: never a reproduced trend (p = 1); differs only
    when the test was powered (30 values), inconclusive with 6."""
    v = V.correlation([1, 2, 3, 4, 5, 6], [0.5] * 6)
    assert v.verdict == "inconclusive" and v.p == 1.0
    v = V.correlation(list(range(30)), [2.0] * 30, sign=-1)
    assert v.verdict == "differs" and v.p == 1.0


def test_interval_texts_state_the_level_they_used():
    """A Bonferroni-widened interval prints its own level (97.5%, not a rounded 98% or a fixed 95%)."""
    assert "97.5% Wilson" in V.rate_matches(30, 100, 0.3, tol=0.05, alpha=0.025).test
    assert "95% Wilson" in V.rate_matches(30, 100, 0.3, tol=0.05).test
    assert "97.5% Clopper-Pearson" in V.rate_near(7, 100, 0.07, rel_tol=0.5, alpha=0.025).test


def test_gain_below_bounds_the_paired_gain():
    """Both models at 0 % robust (the paper's case) on 100 points: the exact bound 1 - 0.05^(1/100) = 2.95 %
    < 5 % -> reproduced, with p = 0.95^100; 20 points at 0 % is too few (bound 13.9 %): inconclusive, saying how
    many would do (59: the first n with 1 - 0.05^(1/n) < 0.05); a real gain (30 vs 2 of 100) -> differs. The
    bound is a true bound: by simulation at a gain of exactly the margin it passes at most alpha of the time."""
    from scipy.stats import beta

    v = V.gain_below(0, 0, 100, margin=0.05)
    assert v.verdict == "reproduced" and np.isclose(v.p, 0.95 ** 100)
    assert f"{1 - 0.05 ** 0.01:.3f}" in v.test
    v = V.gain_below(0, 0, 20, margin=0.05)
    assert v.verdict == "inconclusive" and "about 59 " in v.why
    assert V.gain_below(30, 2, 100, margin=0.05).verdict == "differs"
    assert V.gain_below(3, 3, 400, margin=0.05).verdict == "reproduced"
    hi = beta.ppf(0.95, 4, 397)
    assert f"{hi:.3f}" in V.gain_below(3, 3, 400, margin=0.05).test
    rng = np.random.default_rng(0)
    g = rng.binomial(300, 0.05, size=2000)                 # A-only rate exactly at the margin, B-only 0
    passed = np.mean([V.gain_below(int(k), 0, 300, margin=0.05).verdict == "reproduced" for k in g])
    assert passed <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)
    with pytest.raises(ValueError, match="n:"):
        V.gain_below(5, 6, 10, margin=0.05)
    with pytest.raises(ValueError, match="margin"):
        V.gain_below(0, 0, 10, margin=0.0)
