"""Every verdict rule returns each of its verdicts on a case built for it: none of them can only pass."""
import math

import numpy as np
import pytest

from rcurves.claims import verdicts as V


def test_paired_effect_all_outcomes():
    assert V.paired_effect(40, 10).verdict == "reproduced"
    assert V.paired_effect(10, 40).verdict == "differs"                 # significant the other way
    assert V.paired_effect(26, 24).verdict == "differs"                 # could have, did not
    v = V.paired_effect(4, 0)                                           # 2^-4 = 0.0625 > 0.05: cannot
    assert v.verdict == "inconclusive" and "5" in v.why
    assert V.paired_effect(5, 0).verdict == "reproduced"                # 2^-5 < 0.05
    assert V.paired_effect(6, 0, tests=10).verdict == "inconclusive"    # Bonferroni level 0.005
    assert V.min_discordant(0.05) == 5


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
    assert V.correlation(x, -x).verdict == "differs"
    assert V.correlation(x, [3, 1, 4, 1, 5, 9, 2, 6]).verdict == "differs"       # 8 values could show it
    assert V.correlation([1, 2, 3], [1, 2, 3]).verdict == "inconclusive"        # 1/3! > 0.05
    assert V.correlation(np.arange(20.0), np.arange(20.0) ** 2).verdict == "reproduced"
    # 6 models at rho 0.6: not significant (p ~ 0.13), and 6 values could have been: differs
    v = V.correlation([1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5])
    assert v.verdict in ("reproduced", "differs")


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
    assert V._one_sided_power(20, 0.7, 0.05) == pytest.approx(binom.sf(c - 1, 20, 0.7), rel=1e-12)


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
    assert V.ranking_changes([rev, same]).verdict == "reproduced"
    assert V.ranking_changes([same, tiny]).verdict == "differs"           # could have, did not
    assert V.ranking_changes([tiny]).verdict == "inconclusive"             # 1 discordant point can never be
    assert V.ranking_changes([rev], at_least=2).verdict == "differs"      # "multiple": one change is not enough
    back = (np.array([2, 30, 2]), np.array([30, 2, 30]))
    assert V.ranking_changes([back], at_least=2).verdict == "reproduced"  # reversed and back: 2 changes
    # Bonferroni over thresholds and pairs: 7 vs 0 discordant points (p = 0.016) passes 0.05 / 2 thresholds
    # for one pair, not 0.05 / (2 x 10) among 10 pairs
    seven = (np.array([0, 7]), np.array([7, 0]))
    assert V.ranking_changes([seven]).verdict == "reproduced"
    assert V.ranking_changes([seven] + [same] * 9).verdict == "differs"


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
    assert V._auc_power(10, 10, 0.65, 0.05) < V._auc_power(100, 100, 0.65, 0.05)
    k = int(v.why.split("about ")[1].split()[0]) // 5
    assert V._auc_power(5 * k, 5 * k, 0.65, 0.05) >= 0.8 > V._auc_power(5 * (k - 1), 5 * (k - 1), 0.65, 0.05)


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
