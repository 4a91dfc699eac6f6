"""1-NN predictions with ties, and the exact minimal adversarial distance of the 1-NN."""
import numpy as np
import pytest
import scipy.stats
from sklearn.neighbors import KNeighborsClassifier

from rcurves.claims.agreement import agreement_with_reference, mcnemar_exact
from rcurves.exact.nearest import nn1_distance, nn1_distance_result, nn1_neighbors, nn1_predict, tie_accuracy

NORM = {"linf": lambda v: np.abs(v).max(-1), "l1": lambda v: np.abs(v).sum(-1),
        "l2": lambda v: np.sqrt((v * v).sum(-1))}


def _data(n_train, n, d, k, seed):
    rng = np.random.default_rng(seed)
    xt = rng.uniform(0.0, 1.0, size=(n_train, d))
    yt = rng.integers(0, k, size=n_train)
    xq = rng.uniform(0.0, 1.0, size=(n, d))
    return xt, yt, xq


@pytest.mark.parametrize("p,metric", [("l2", {"p": 2}), ("linf", {"metric": "chebyshev"}),
                                      ("l1", {"metric": "manhattan"})])
def test_nn1_predict_matches_sklearn_where_no_tie(p, metric):
    xt, yt, xq = _data(300, 101, 6, 4, 0)
    xt = xt.reshape(300, 2, 3)                     # any input shape; flattened inside
    xq = xq.reshape(101, 2, 3)
    ref = KNeighborsClassifier(n_neighbors=1, algorithm="brute", **metric).fit(xt.reshape(300, -1), yt)
    want = ref.predict(xq.reshape(101, -1))
    pred, tie = nn1_predict(xt, yt, xq, p=p, block=7)          # 15 blocks, the last one short
    assert not tie.any()                           # continuous random data: no ties
    np.testing.assert_array_equal(pred, want)
    nb = nn1_neighbors(xt, yt, xq, p=p, block=256)
    np.testing.assert_allclose(nb.distance, ref.kneighbors(xq.reshape(101, -1), 1)[0][:, 0], rtol=1e-5)
    np.testing.assert_array_equal(nb.counts.argmax(1), pred)


def test_nn1_ties_counts_and_accuracy_range():
    xt = np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 0.0], [0.0, 9.0]])
    yt = np.array([0, 1, 1, 2])
    xq = np.array([[1.0, 0.0], [0.9, 0.0], [1.0, 4.0]])
    nb = nn1_neighbors(xt, yt, xq, p="linf")
    np.testing.assert_array_equal(nb.counts, [[1, 2, 0], [1, 0, 0], [1, 2, 0]])
    np.testing.assert_allclose(nb.distance, [1.0, 0.9, 4.0])
    np.testing.assert_allclose(nb.class_distance[1], [0.9, 1.1, 9.0], rtol=1e-6)
    pred, tie = nn1_predict(xt, yt, xq, p="linf")
    np.testing.assert_array_equal(pred, [1, 0, 1])       # majority of the tied points
    np.testing.assert_array_equal(tie, [True, False, True])
    xq2 = np.array([[1.0, 4.0], [1.0, 7.0]])     # l_2: sqrt(17) to both; sqrt(50) vs sqrt(5)
    l2_pred, l2_tie = nn1_predict(xt, yt, xq2, p="l2")
    np.testing.assert_array_equal(l2_tie, [True, False])
    np.testing.assert_array_equal(l2_pred, [1, 2])
    # accuracy range: true labels 0, 0, 2 -> lower: only query 1 right; upper: query 0 too
    acc = tie_accuracy(nb, np.array([0, 0, 2]))
    assert acc.lower == pytest.approx(1 / 3) and acc.upper == pytest.approx(2 / 3)
    assert acc.majority_lower == pytest.approx(1 / 3) and acc.majority_upper == pytest.approx(1 / 3)
    assert acc.ties == pytest.approx(2 / 3)


def _line_search_adversarial(xt, yt, x, y, j, steps=40):
    """Bisection on x + t (x_j - x) for a strictly adversarial point of the 1-NN (float64)."""
    def adv(z):
        d2 = ((xt - z) ** 2).sum(1)
        return d2[yt == y].min() > d2[yt != y].min()
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if adv(x + mid * (xt[j] - x)):
            hi = mid
        else:
            lo = mid
    z = x + hi * (xt[j] - x)
    assert adv(z)
    return z


@pytest.mark.parametrize("p", ["linf", "l1", "l2"])
@pytest.mark.parametrize("bounds", [None, (0.0, 1.0)])
def test_nn1_distance_exact_attained_and_below_verified_adversarials(p, bounds):
    xt, yt, xq = _data(40, 12, 4, 3, 1)
    y, _ = nn1_predict(xt, yt, xq, p="l2")
    y[:2] = (y[:2] + 1) % 3                        # two misclassified points: distance 0
    r = nn1_distance_result(xt, yt, xq, y, p=p, bounds=bounds)
    full = nn1_distance_result(xt, yt, xq, y, p=p, bounds=bounds, pruning=False)
    np.testing.assert_allclose(r.distance, full.distance, rtol=1e-7, atol=1e-9)   # pruning is exact
    np.testing.assert_array_equal(nn1_distance(xt, yt, xq, y, p=p, bounds=bounds), r.distance)
    assert np.all(r.distance[:2] == 0) and np.all(r.distance[2:] > 0)
    assert r.success.all()
    # attained by x_boundary, which ties a y-class point with the cell's point
    np.testing.assert_allclose(NORM[p](r.x_boundary - xq), r.distance, rtol=1e-7, atol=1e-9)
    for q in range(2, xq.shape[0]):
        d2 = ((xt - r.x_boundary[q]) ** 2).sum(1)
        np.testing.assert_allclose(d2[yt == y[q]].min(), d2[r.cell[q]], rtol=1e-6)
        assert yt[r.cell[q]] != y[q]
    if bounds is not None:
        assert r.x_boundary.min() >= 0 and r.x_boundary.max() <= 1
        assert r.x_adv.min() >= 0 and r.x_adv.max() <= 1
    # x_adv is strictly adversarial for nn1_predict (no tie) and barely longer
    pred, tie = nn1_predict(xt, yt, r.x_adv, p="l2")
    assert np.all(pred != y) and not tie.any()
    np.testing.assert_allclose(NORM[p](r.x_adv - xq), r.adv_distance, rtol=1e-9)
    assert np.all(r.adv_distance >= r.distance - 1e-12)
    assert np.all(r.adv_distance <= r.distance + 2e-3 * (1 + r.distance))
    # never above a verified adversarial found by a line search toward other-class points
    for q in range(2, xq.shape[0]):
        for j in np.flatnonzero(yt != y[q]):
            z = _line_search_adversarial(xt, yt, xq[q], y[q], j)
            assert r.distance[q] <= NORM[p](z - xq[q]) + 1e-9


@pytest.mark.parametrize("p", ["linf", "l1", "l2"])
def test_nn1_distance_equals_brute_force_in_2d(p):
    """On a 2-D grid of step h, the nearest adversarial grid point is at most
    ~h farther than the exact distance and never closer."""
    xt, yt, xq = _data(25, 8, 2, 2, 3)
    y, tie = nn1_predict(xt, yt, xq, p="l2")
    r = nn1_distance_result(xt, yt, xq, y, p=p, bounds=(0.0, 1.0))
    h = 1.0 / 400
    g = np.linspace(0.0, 1.0, 401)
    grid = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    d2 = ((grid[:, None, :] - xt[None]) ** 2).sum(-1)
    for q in range(xq.shape[0]):
        same = d2[:, yt == y[q]].min(1)
        other = d2[:, yt != y[q]].min(1)
        bf = NORM[p](grid[other < same] - xq[q]).min()
        assert r.distance[q] <= bf + 1e-12
        assert bf <= r.distance[q] + 2 * h


def test_nn1_bad_input():
    xt, yt, xq = _data(10, 3, 2, 2, 0)
    with pytest.raises(ValueError, match="p"):
        nn1_predict(xt, yt, xq, p=3)
    with pytest.raises(ValueError, match="x: expected inputs of shape"):
        nn1_predict(xt, yt, xq[:, :1], p="l2")
    with pytest.raises(ValueError, match="y"):
        nn1_distance_result(xt, yt, xq, np.zeros(2, int), p="linf")
    with pytest.raises(ValueError, match="bounds"):
        nn1_distance_result(xt, yt, xq + 2.0, np.zeros(3, int), p="linf")
    with pytest.raises(ValueError, match="x_train"):
        nn1_predict(xt[:, :, None] * np.nan, yt, xq[:, :, None], p="l2")


def test_mcnemar_matches_scipy_binomtest():
    for n01 in range(0, 25, 3):
        for n10 in range(0, 25, 4):
            if n01 + n10 == 0:
                assert mcnemar_exact(0, 0) == 1.0
                continue
            want = scipy.stats.binomtest(n10, n01 + n10, 0.5).pvalue
            assert mcnemar_exact(n01, n10) == pytest.approx(want, rel=1e-12, abs=1e-300)
    # 002 Table 1/2 bookkeeping on a hand example
    st = np.array([0, 1, 2, 3, 4, 5, 6, 7])
    at = np.array([0, 9, 9, 9, 4, 8, 8, 7])
    nn = np.array([0, 9, 9, 3, 1, 8, 6, 7])
    a = agreement_with_reference(st, at, nn)
    # differ at 1..3, 5, 6: st agrees at 3, 6; at agrees at 1, 2, 5
    assert (a.differ, a.n10, a.n01) == (5, 2, 3)
    assert a.prop_a == pytest.approx(2 / 5) and a.prop_b == pytest.approx(3 / 5)
    assert a.pvalue == pytest.approx(scipy.stats.binomtest(2, 5, 0.5).pvalue)
