"""rcurves.claims.compare: paired (McNemar) tests of two models' robustness on the same points."""
import numpy as np
import pytest
from scipy.stats import binomtest

from rcurves.claims.compare import mcnemar_scan, paired_order_test, significant_reversal


def test_scan_equals_brute_force_counts_and_scipys_exact_test():
    rng = np.random.default_rng(0)
    da = rng.exponential(1.0, 60)
    db = np.where(rng.random(60) < 0.5, da, rng.exponential(1.2, 60))     # ties on half the points
    da[:3] = np.inf
    db[3:5] = 0.0
    eps = np.concatenate([[0.0], np.sort(np.concatenate([da[np.isfinite(da)], db])), [10.0]])
    oa, ob, p = mcnemar_scan(da, db, eps)
    for i, e in enumerate(eps):
        ba, bb = da <= e, db <= e
        assert oa[i] == np.sum(ba & ~bb) and ob[i] == np.sum(bb & ~ba)
        k = oa[i] + ob[i]
        assert p[i] == pytest.approx(1.0 if k == 0 else binomtest(int(oa[i]), int(k), 0.5).pvalue, rel=1e-9)
    a, b, pv = paired_order_test(da, db, 0.7)
    assert (a, b) == (np.sum((da <= 0.7) & (db > 0.7)), np.sum((db <= 0.7) & (da > 0.7)))
    assert pv == pytest.approx(binomtest(a, a + b, 0.5).pvalue, rel=1e-9)


def test_reversal_needs_both_directions_after_bonferroni():
    da = np.array([0.1] * 8 + [0.9] * 2)
    db = np.array([0.5] * 10)
    rev = significant_reversal(da, db)
    # b more robust at 0.1 (8 points broken by a only), a at 0.5 (2 by b only): 3 thresholds scanned
    assert rev["m"] == 3 and not rev["found"]
    assert rev["b_better"] == {"eps": 0.1, "only_a": 8, "only_b": 0, "p": pytest.approx(binomtest(8, 8).pvalue)}
    assert rev["a_better"]["only_b"] == 2
    big_a = np.r_[np.full(30, 0.1), np.full(30, 0.9)]
    big_b = np.full(60, 0.5)
    assert significant_reversal(big_a, big_b)["found"]
    assert not significant_reversal(big_a, big_b, pairs=10**12)["found"]      # corrected away
    assert not significant_reversal(big_a, big_a)["found"]


@pytest.mark.parametrize("bad,needle", [((np.zeros(3), np.zeros(4)), "dist_b"), ((np.array([np.nan]), np.zeros(1)), "dist_a"),
                                        ((np.zeros((2, 2)), np.zeros((2, 2))), "dist_a")])
def test_bad_input(bad, needle):
    with pytest.raises(ValueError, match=needle):
        mcnemar_scan(*bad, [0.1])
