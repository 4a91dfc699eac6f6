"""Robustness/margin curves: exact step functions, intersections, DKW bands."""
import math

import jax
import numpy as np
import pytest
from scipy import stats

from rcurves.curves import (
    curve_intersections,
    curve_points,
    dkw_band,
    exact_curve_intersections,
    margin_curve,
    robust_accuracy,
    robust_error,
    robustness_curve,
)
from rcurves.exact.linear import linear_distance


def _brute_counts(d, eps):
    d = np.asarray(d, np.float32)
    return np.array([np.sum(d <= np.float32(e)) for e in np.atleast_1d(eps)])


def _brute_curve(d, eps):
    return _brute_counts(d, eps) / len(d)


def _counts_of(curve, n):
    """Integer counts behind a float32 curve (values are count / n to one ulp)."""
    c = np.asarray(curve, np.float64) * n
    assert np.all(np.abs(c - np.rint(c)) < 1e-4)
    return np.rint(c).astype(np.int64)


def test_step_function_is_exact_and_inclusive_at_knots():
    rng = np.random.default_rng(0)
    d = rng.exponential(size=200).astype(np.float32)
    d[:20] = 0.0  # misclassified: count at every eps >= 0
    d[20:30] = np.inf  # no adversarial: never count
    d[30:40] = d[40]  # ties
    knots = np.unique(d[np.isfinite(d)])
    below = np.nextafter(knots, np.float32(-np.inf))
    below = below[below >= 0]
    for eps in (knots, below, np.linspace(0, 10, 97, dtype=np.float32)):
        np.testing.assert_array_equal(_counts_of(robustness_curve(d, eps), d.size), _brute_counts(d, eps))
    at = np.asarray(robustness_curve(d, knots))
    before = np.asarray(robustness_curve(d, np.nextafter(knots[1:], np.float32(-np.inf))))
    assert np.all(at[1:] > before)  # every knot is a jump, taken at the knot itself (d <= eps)
    assert float(robustness_curve(d, 0.0)) == pytest.approx(0.1)
    assert float(robustness_curve(d, 1e30)) == pytest.approx(0.95)  # inf never counts
    grid = np.linspace(0, 20, 500)
    assert np.all(np.diff(np.asarray(robustness_curve(d, grid))) >= 0)  # monotone


def test_curve_accepts_unsorted_thresholds_and_scalars():
    d = np.array([3.0, 1.0, 2.0, 0.0], np.float32)
    np.testing.assert_allclose(robustness_curve(d, np.array([2.5, 0.5, 10.0])), [0.75, 0.25, 1.0])
    assert robustness_curve(d, 1.0).shape == ()
    np.testing.assert_allclose(robust_error(d, np.array([1.0, 2.0])), [0.5, 0.75])
    np.testing.assert_allclose(robust_accuracy(d, np.array([1.0, 2.0])), [0.5, 0.25])


def test_curve_under_jit():
    d = np.array([0.0, 1.0, 2.0, np.inf], np.float32)
    out = jax.jit(robustness_curve)(d, np.array([0.5, 2.0], np.float32))
    np.testing.assert_allclose(out, [0.25, 0.75])


def test_margin_and_robustness_curves_relation_on_linear_model():
    """Eq. 13 of paper 000: R(eps) = P(misclassified) + P(correct and d_f <= eps)."""
    rng = np.random.default_rng(1)
    w = rng.normal(size=5).astype(np.float32)
    x = rng.normal(size=(400, 5)).astype(np.float32)
    y = (x @ w + 0.5 * rng.normal(size=400) > 0).astype(np.int64)
    correct = ((x @ w > 0).astype(np.int64) == y)
    assert 0.05 < 1 - correct.mean() < 0.5
    d_boundary = np.asarray(linear_distance(w, 0.0, x, 2))  # label-free, eq. 11
    d_robust = np.asarray(linear_distance(w, 0.0, x, 2, y))  # 0 for misclassified
    eps = np.linspace(0, 2, 201)
    r = np.asarray(robustness_curve(d_robust, eps))
    m_known = np.asarray(margin_curve(d_boundary, eps))  # eq. 4: all points
    m_part = np.asarray(margin_curve(d_robust, eps, correct))  # misclassified entries ignored
    np.testing.assert_allclose(r, (1 - correct.mean()) + m_part, atol=1e-6)
    np.testing.assert_allclose(m_part, np.asarray(margin_curve(d_boundary, eps, correct)), atol=0)
    # eq. 4 by brute force over all points, and the ordering it implies
    np.testing.assert_allclose(m_known, _brute_curve(d_boundary, eps), atol=1e-7)
    assert m_known[0] == 0.0 < r[0]  # L'_0 = 0, R(0) = standard error
    assert np.all(m_known >= m_part - 1e-7) and np.all(r >= m_known - 1e-7)
    assert np.any(m_known > m_part)


def test_exact_intersections_on_theorem1_style_construction():
    # Paper 000 App. A: c1's curve steps at t1/2 (weight 1) and at (t1+t2')/2 ...;
    # here distances with weights, written as repeated points.
    da = np.array([0.5] * 1 + [2.5] * 2 + [4.5] * 2, np.float32)  # steps 1, 3, 5
    db = np.array([1.5] * 2 + [3.5] * 2 + [np.inf], np.float32)  # steps 2, 4
    # order: [0, .5) tie; [.5, 1.5) a>b; [1.5, 2.5) a<b; [2.5, 3.5) a>b; [3.5, 4.5) a<b; [4.5, .) a>b
    np.testing.assert_array_equal(exact_curve_intersections(da, db), [1.5, 2.5, 3.5, 4.5])
    np.testing.assert_array_equal(exact_curve_intersections(db, da), [1.5, 2.5, 3.5, 4.5])
    # grid-based: only as fine as the grid, and a tie stretch is not a flip
    eps = np.linspace(0, 6, 61)
    got = curve_intersections(eps, robustness_curve(da, eps), robustness_curve(db, eps))
    np.testing.assert_allclose(got, [1.5, 2.5, 3.5, 4.5], atol=1e-9)
    coarse = np.array([0.0, 1.0, 3.0, 5.0])
    np.testing.assert_allclose(curve_intersections(coarse, robustness_curve(da, coarse),
                                                   robustness_curve(db, coarse)), [])


def test_exact_intersection_through_a_tie_stretch_and_misclassified_points():
    # a: misclassified point (0) and one at 3; b: points at 1 and 2.
    da = np.array([0.0, 3.0], np.float32)
    db = np.array([1.0, 2.0], np.float32)
    # [0,1) a=.5>b=0; [1,2) tie .5; [2,3) a=.5<b=1; [3,.) tie -> one flip, starting at 2
    np.testing.assert_array_equal(exact_curve_intersections(da, db), [2.0])
    assert exact_curve_intersections(da, da).size == 0
    # ties within atol are not flips
    eps = np.arange(4.0)
    assert curve_intersections(eps, [0.0, 0.1, 0.0, 0.2], [0.0, 0.09, 0.01, 0.1], atol=0.02).size == 0
    np.testing.assert_array_equal(curve_intersections(eps, [0.0, 0.1, 0.0, 0.2], [0.0, 0.09, 0.01, 0.1]), [2.0, 3.0])


def test_exact_intersections_match_dense_evaluation_on_random_models():
    rng = np.random.default_rng(2)
    da = rng.gamma(2.0, 1.0, size=60).astype(np.float32)
    db = rng.exponential(2.0, size=45).astype(np.float32)
    got = exact_curve_intersections(da, db)
    knots = np.unique(np.concatenate([[0.0], da, db]).astype(np.float32))
    # brute force: the order on each [knot_k, knot_{k+1}) from counts
    s = np.sign(_brute_counts(da, knots) * db.size - _brute_counts(db, knots) * da.size)
    nz = np.flatnonzero(s)
    ref = knots[nz[1:][s[nz][1:] != s[nz][:-1]]]
    np.testing.assert_array_equal(got, ref)
    assert got.size >= 1
    order = lambda e: np.sign(_brute_counts(da, e) * db.size - _brute_counts(db, e) * da.size)[0]  # noqa: E731
    for e in got:  # the new order holds at e and differs just below e
        assert order(e) != 0 and order(np.nextafter(np.float32(e), np.float32(0))) != order(e)


def test_dkw_band_covers_true_cdf():
    n, reps, alpha = 100, 50, 0.05
    rng = np.random.default_rng(123)
    covered = 0
    for _ in range(reps):
        d = np.sort(rng.exponential(size=n).astype(np.float32))
        knots, values = curve_points(d)
        true = stats.expon.cdf(knots.astype(np.float64))
        lo, hi = (np.asarray(v, np.float64) for v in dkw_band(values, n, alpha))
        left = np.concatenate([[0.0], values[:-1]])  # left limits at the knots
        lo_l, hi_l = (np.asarray(v, np.float64) for v in dkw_band(left, n, alpha))
        tol = 1e-6  # float32 band values
        ok = np.all((lo - tol <= true) & (true <= hi + tol) & (lo_l - tol <= true) & (true <= hi_l + tol))
        covered += bool(ok)
    assert covered / reps >= 0.9
    # the band's half-width is the DKW constant
    lo, hi = dkw_band(np.array([0.5]), 200, 0.1)
    half = math.sqrt(math.log(2 / 0.1) / 400)
    np.testing.assert_allclose([float(lo[0]), float(hi[0])], [0.5 - half, 0.5 + half], rtol=1e-6)
    lo, hi = dkw_band(np.array([0.0, 1.0]), 10)
    np.testing.assert_array_equal(np.asarray(lo)[0], 0.0)
    np.testing.assert_array_equal(np.asarray(hi)[1], 1.0)


def test_dkw_band_too_narrow_fails_to_cover():
    # sanity of the coverage test: a band a quarter as wide misses often
    n, reps = 100, 50
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(reps):
        knots, values = curve_points(rng.exponential(size=n))
        true = stats.expon.cdf(knots.astype(np.float64))
        half = math.sqrt(math.log(2 / 0.05) / (2 * n)) / 4
        covered += bool(np.all(np.abs(values - true) <= half))
    assert covered / reps < 0.5


def test_curve_points_are_the_exact_knots():
    d = np.array([2.0, 0.0, 2.0, np.inf, 1.0], np.float32)
    knots, values = curve_points(d)
    np.testing.assert_array_equal(knots, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(values, [0.2, 0.4, 0.8])
    np.testing.assert_allclose(np.asarray(robustness_curve(d, knots)), values, rtol=1e-7)
    k, v = curve_points(np.array([np.inf], np.float32))
    assert k.size == 0 and v.size == 0


@pytest.mark.parametrize("call,arg", [
    (lambda: robustness_curve(np.array([1.0, np.nan], np.float32), np.array([1.0])), "distances"),
    (lambda: robustness_curve(np.array([1.0, -0.5], np.float32), np.array([1.0])), "distances"),
    (lambda: robustness_curve(np.zeros(0, np.float32), np.array([1.0])), "distances"),
    (lambda: robustness_curve(np.ones((2, 2), np.float32), np.array([1.0])), "distances"),
    (lambda: robustness_curve(np.ones(2, np.float32), np.array([-1.0])), "eps"),
    (lambda: robustness_curve(np.ones(2, np.float32), np.array([np.nan])), "eps"),
    (lambda: robustness_curve(np.ones(2, np.float32), np.zeros(0)), "eps"),
    (lambda: margin_curve(np.ones(3, np.float32), np.array([1.0]), np.array([True, False])), "correct"),
    (lambda: margin_curve(np.ones(2, np.float32), np.array([1.0]), np.array([1, 0])), "correct"),
    (lambda: curve_intersections(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([0.0])), "curve_b"),
    (lambda: curve_intersections(np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([0.0, 1.0])), "eps"),
    (lambda: curve_intersections(np.array([0.0, 1.0]), np.array([0.0, np.nan]), np.array([0.0, 1.0])), "curve_a"),
    (lambda: exact_curve_intersections(np.array([1.0]), np.array([np.nan])), "dist_b"),
    (lambda: dkw_band(np.array([0.5, 1.5]), 10), "curve"),
    (lambda: dkw_band(np.array([0.5]), 0), "n"),
    (lambda: dkw_band(np.array([0.5]), 10, alpha=1.5), "alpha"),
    (lambda: curve_points(np.array([np.nan], np.float32)), "distances"),
])
def test_bad_input_raises_naming_argument(call, arg):
    with pytest.raises(ValueError, match=rf"^{arg}:"):
        call()
