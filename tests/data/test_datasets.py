"""Data generators: stated moments and accuracies, exact geometry, fixed splits."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from rcurves import data as ds


def _acc(model, x, y):
    w, b = model
    return float(np.mean((x @ w + b > 0).astype(int) == y))


def _within(observed, expected, n, sigmas=5.0):
    """observed frequency within `sigmas` binomial standard errors of expected."""
    se = math.sqrt(max(expected * (1 - expected), 1e-12) / n)
    return abs(observed - expected) <= sigmas * se


# ---------------------------------------------------------------- 001 P1, P2


def test_tsipras_p1_moments_and_accuracies():
    n, d, p = 20000, 64, 0.9
    x, y = ds.tsipras_p1(n, d=d, p=p, seed=1)
    assert x.shape == (n, d + 1) and x.dtype == np.float32 and y.dtype == np.int64
    s = 2.0 * y - 1.0
    assert set(np.unique(x[:, 0])) == {-1.0, 1.0}
    assert _within(np.mean(x[:, 0] == s), p, n)                  # x1 = +y w.p. p
    eta = 2 / math.sqrt(d)                                       # documented default
    z = x[:, 1:] * s[:, None]                                    # ~ N(eta, 1)
    assert abs(z.mean() - eta) < 5 / math.sqrt(n * d)
    assert abs(z.var() - 1.0) < 0.02
    assert _within(np.mean(y), 0.5, n)
    clf = ds.toy_linear_classifiers(d)
    # f_avg: w.x ~ N(eta y, 1/d): accuracy Phi(eta sqrt(d)) = Phi(2)
    assert _within(_acc(clf["f_avg"], x, y), stats.norm.cdf(2.0), n)
    assert _within(_acc(clf["f_rob"], x, y), p, n)
    x2, _ = ds.tsipras_p1(n, d=d, p=p, eta=0.5, seed=1)
    assert abs((x2[:, 1:] * s[:, None]).mean() - 0.5) < 5 / math.sqrt(n * d)


def test_nakkiran_p2_and_f_s():
    n, d = 3000, 2001                                           # odd d: no ties
    x, y = ds.nakkiran_p2(n, d=d, seed=2)
    assert x.shape == (n, d) and set(np.unique(x)) == {-1.0, 1.0}
    s = 2.0 * y - 1.0
    assert _within(np.mean(x == s[:, None]), 0.51, n * d)
    acc = _acc(ds.toy_linear_classifiers(d)["f_s"], x, y)
    expected = stats.binom.sf(d // 2, d, 0.51)                  # P(Bin > d/2)
    assert expected > 0.8 and _within(acc, expected, n) and acc > 0.5


def test_toy_linear_classifiers_exact():
    c = ds.toy_linear_classifiers(4)
    np.testing.assert_array_equal(c["f_avg"][0], [0, .25, .25, .25, .25])
    np.testing.assert_array_equal(c["f_rob"][0], [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(c["f_s"][0], [1, 1, 1, 1])
    assert all(w.dtype == np.float32 and b == 0 for w, b in c.values())


def test_seeds_are_deterministic():
    a = ds.tsipras_p1(50, d=3, seed=7)
    b = ds.tsipras_p1(50, d=3, seed=np.random.default_rng(7))
    c = ds.tsipras_p1(50, d=3, seed=8)
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])
    for fn in (lambda s: ds.nakkiran_p2(20, d=5, seed=s), lambda s: ds.toy_1d(20, seed=s),
               lambda s: ds.sunset(20, seed=s), lambda s: ds.parabola_points("continuous", 20, seed=s),
               lambda s: ds.overly_robust_features(20, k=2.0, d=3, seed=s)):
        np.testing.assert_array_equal(fn(3)[0], fn(3)[0])
        np.testing.assert_array_equal(fn(3)[1], fn(3)[1])


# ------------------------------------------------------------ 001 parabola


def _grid_distance(pts, p, lim=5.0, num=500_001):
    t = np.linspace(-lim, lim, num)
    out = []
    for q in pts:                                 # brute force reference
        a, b = np.abs(q[0] - t), np.abs(q[1] - t ** 2)
        h = {1: a + b, 2: np.hypot(a, b), np.inf: np.maximum(a, b)}[p]
        out.append(h.min())
    return np.array(out)


@pytest.mark.parametrize("p", [1, 2, np.inf])
def test_parabola_distance_vs_dense_grid(p):
    rng = np.random.default_rng(0)
    pts = np.concatenate([rng.uniform(-3, 3, (25, 2)),
                          [[0, 0.3], [0, 5], [0.01, 1.0], [0, -1], [2, 4], [-1.5, 2.25], [-1.5, 0.5]]])
    exact = ds.parabola_distance(pts, p)
    grid = _grid_distance(pts, p)
    # the grid only over-estimates; its error is below slope * spacing / 2
    assert np.all(exact <= grid + 1e-12)
    np.testing.assert_allclose(exact, grid, atol=2e-4)
    assert exact[-3] == 0.0 and exact[-2] == 0.0            # on the boundary
    np.testing.assert_allclose(ds.parabola_distance(pts * [-1, 1], p), exact, rtol=1e-12)


@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_parabola_points_at_l2_distance_one(kind):
    x, y = ds.parabola_points(kind, 400, seed=3)
    assert x.shape == (400, 2) and x.dtype == np.float32
    np.testing.assert_array_equal(y, (x[:, 0] ** 2 > x[:, 1]).astype(int))
    assert 0 < y.mean() < 1                                  # both sides
    d2 = ds.parabola_distance(x, 2)
    np.testing.assert_allclose(d2, 1.0, atol=1e-5)
    d1, dinf = ds.parabola_distance(x, 1), ds.parabola_distance(x, np.inf)
    tol = 1e-5
    # 001 eq. 17 for d = 2: linf <= l2 <= l1 <= sqrt2 l2 <= 2 linf
    assert np.all(dinf <= d2 + tol) and np.all(d2 <= d1 + tol)
    assert np.all(d1 <= math.sqrt(2) * d2 + tol) and np.all(d2 <= math.sqrt(2) * dinf + tol)
    assert d1.max() - d1.min() > 0.2 and dinf.max() - dinf.min() > 0.15   # spread


def test_parabola_discrete_extremes():
    x, _ = ds.parabola_points("discrete", 500, seed=0)
    pts = np.unique(x, axis=0)
    assert len(pts) == 11                                     # the finite support
    d1, dinf = ds.parabola_distance(pts, 1), ds.parabola_distance(pts, np.inf)
    # t = 0: axis-aligned normal, all norms agree; t = +-1/2: maximal separation
    assert np.isclose(d1, 1, atol=1e-6).any() and np.isclose(dinf, 1, atol=1e-6).any()
    assert np.isclose(d1, math.sqrt(2), atol=1e-6).sum() == 2
    assert np.isclose(dinf, 1 / math.sqrt(2), atol=1e-6).sum() == 2


def test_parabola_similar_and_logits():
    x, y = ds.parabola_points("similar", 300, seed=1)
    d1, d2, dinf = (ds.parabola_distance(x, p) for p in (1, 2, np.inf))
    assert np.all(dinf >= 0.94 * d2) and np.all(d1 <= 1.003 * d2 + 1e-5)
    assert d2.min() > 0.09 and d2.max() < 1.001
    logits = np.asarray(ds.parabola_logits_fn()(x))
    np.testing.assert_array_equal(logits.argmax(1), y)
    np.testing.assert_allclose(logits[:, 1], (x[:, 0] ** 2 - x[:, 1]) / 2, rtol=1e-5)


# ------------------------------------------------------- 000 Theorem 1


def _curve(dist, weights, t):
    """Weighted robustness curve P(dist <= t) at the thresholds t (any shape)."""
    order = np.argsort(dist)
    cum = np.concatenate([[0.0], np.cumsum(weights[order])])
    return cum[np.searchsorted(dist[order], t, side="right")]


def _check_construction(t1, t2, c):
    w, b1 = c.classifier_1
    _, b2 = c.classifier_2
    x = c.x[:, 0]
    # both classifiers classify every point correctly: c(x) = 1[w x + b >= 0]
    np.testing.assert_array_equal((w[0] * x + b1 >= 0).astype(int), c.y)
    np.testing.assert_array_equal((w[0] * x + b2 >= 0).astype(int), c.y)
    atol = 8 * np.finfo(np.float64).eps * c.d                  # rounding of x = -d - s
    np.testing.assert_allclose(c.distances_1, np.abs(w[0] * x + b1), rtol=0, atol=atol)
    np.testing.assert_allclose(c.distances_2, np.abs(w[0] * x + b2), rtol=0, atol=atol)
    assert np.isclose(c.weights.sum(), 1.0) and np.all(c.weights > 0)
    np.testing.assert_allclose(c.weights, c.counts / c.counts.sum())
    t1, t2 = np.asarray(t1, float), np.asarray(t2, float)
    assert np.all(_curve(c.distances_1, c.weights, t1) < _curve(c.distances_2, c.weights, t1))
    assert np.all(_curve(c.distances_1, c.weights, t2) > _curve(c.distances_2, c.weights, t2))


@settings(max_examples=80, deadline=None)
@given(st.sets(st.integers(1, 4000), min_size=1, max_size=14), st.data())
def test_theorem1_property(values, data):
    thr = sorted(v / 64.0 for v in values)
    side = data.draw(st.lists(st.booleans(), min_size=len(thr), max_size=len(thr)))
    t1 = [t for t, s in zip(thr, side) if s]
    t2 = [t for t, s in zip(thr, side) if not s]
    c = ds.theorem1_construction(t1, t2)
    _check_construction(t1, t2, c)
    # crossings: the midpoints between consecutive thresholds of different sets
    expected = [(a + b) / 2 for a, b, sa, sb in zip(thr, thr[1:], side, side[1:]) if sa != sb]
    np.testing.assert_array_equal(c.crossings, expected)
    # the order flips there and nowhere else below 2d: dense check of the sign
    grid = np.linspace(thr[0] / 2, 2 * c.d, 3001)
    r1 = _curve(c.distances_1, c.weights, grid)
    r2 = _curve(c.distances_2, c.weights, grid)
    sign = np.sign(r2 - r1)
    assert np.all(sign != 0)
    flips = grid[1:][sign[1:] != sign[:-1]]
    assert len(flips) == len(expected)
    # each flip is seen at the first grid point at or after the crossing
    for f, m in zip(flips, expected):
        assert m <= f < m + (grid[1] - grid[0]) * 1.0000001


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=8, unique=True),
       st.lists(st.floats(1e-3, 1e3), min_size=0, max_size=8, unique=True))
def test_theorem1_property_arbitrary_floats(a, b):
    b = [v for v in b if v not in a]
    c = ds.theorem1_construction(a, b)
    _check_construction(a, b, c)


def test_theorem1_exact_intersections_with_curves_module():
    curves = pytest.importorskip("rcurves.curves")
    c = ds.theorem1_construction([1.0, 3.0, 3.5], [2.0, 5.0, 6.0])
    np.testing.assert_array_equal(c.crossings, [1.5, 2.5, 4.25])
    d1 = np.repeat(c.distances_1, c.counts)
    d2 = np.repeat(c.distances_2, c.counts)
    got = curves.exact_curve_intersections(d1, d2)
    np.testing.assert_array_equal(got[got < 2 * c.d], c.crossings)


def test_theorem1_experiment_script(tmp_path):
    pytest.importorskip("rcurves.curves")
    import json

    from tests._experiments import load

    mod = load("theorem1_intersections")
    rec = mod.main(["--out", str(tmp_path), "--t1", "0.3", "2", "2.5", "--t2", "1", "7",
                    "--grid", "201"])
    assert rec["all_hold"] and rec["crossings_match"]
    assert rec["designed_crossings"] == pytest.approx([0.65, 1.5, 4.75], rel=1e-12)
    assert json.loads((tmp_path / "theorem1_intersections.json").read_text())["all_hold"]
    assert (tmp_path / "theorem1_intersections.png").stat().st_size > 1000


def test_theorem1_bad_input():
    with pytest.raises(ValueError, match="t2"):
        ds.theorem1_construction([1.0, 2.0], [2.0])
    with pytest.raises(ValueError, match="t1"):
        ds.theorem1_construction([0.0, 1.0], [2.0])
    with pytest.raises(ValueError, match="t1"):
        ds.theorem1_construction([], [])
    with pytest.raises(ValueError, match="d"):
        ds.theorem1_construction([1.0], [4.0], d=1.0)


# --------------------------------------------------------------- 002


def test_toy_1d_and_classifiers():
    x, y = ds.toy_1d(4000, seed=0)
    assert x.shape == (4000, 1) and x.dtype == np.float32
    pos, neg = x[y == 1, 0], x[y == 0, 0]
    assert pos.min() >= 1 and pos.max() < 2 and neg.min() >= -2 and neg.max() < -1
    assert _within(y.mean(), 0.5, 4000)
    assert abs(pos.mean() - 1.5) < 0.03 and abs(pos.var() - 1 / 12) < 0.01   # uniform
    clfs = ds.toy_1d_classifiers()
    for name, f in clfs.items():                              # accuracy 1 for all three
        np.testing.assert_array_equal(np.asarray(f(x)).argmax(1), y, err_msg=name)
    probe = np.array([[-5.0], [-3.0], [-0.5], [0.5], [1.5]], np.float32)
    pred = {k: np.asarray(f(probe)).argmax(1).tolist() for k, f in clfs.items()}
    assert pred["f1"] == [0, 0, 0, 0, 1]
    assert pred["f2"] == [1, 0, 0, 1, 1]                      # overly invariant for x < -4
    assert pred["f3"] == [0, 0, 0, 1, 1]


@pytest.mark.parametrize("d", [2, 4])
def test_sunset_geometry_and_oracle(d):
    x, y = ds.sunset(3000, d=d, width=2.0, seed=1)
    e = np.zeros(d)
    e[-1] = 1
    sun, hor = x[y == 0], x[y == 1]
    np.testing.assert_allclose(np.linalg.norm(sun - e, axis=1), 1.0, atol=1e-6)
    assert np.all(hor[:, -1] == 0) and np.abs(hor[:, :-1]).max() <= 2.0
    assert _within(y.mean(), 0.5, 3000)
    logits = np.asarray(ds.sunset_oracle_logits_fn()(x))
    # the oracle classifies the data correctly except on the tangent point
    assert np.mean(logits.argmax(1) == y) > 0.99
    if d == 2:   # 002: the l_2 1-NN boundary is the parabola x1^2 = 4 x2
        u = np.linspace(-3, 3, 13)
        on = np.stack([u, u ** 2 / 4], axis=1).astype(np.float32)
        np.testing.assert_allclose(np.asarray(ds.sunset_oracle_logits_fn()(on))[:, 1], 0, atol=1e-5)


# --------------------------------------------------------------- 003


def test_overly_robust_features_model():
    n, d, k = 20000, 16, 4.0
    x, y = ds.overly_robust_features(n, k=k, d=d, seed=0)
    assert x.shape == (n, d + 2) and x.dtype == np.float32
    z = 2.0 * y - 1.0
    np.testing.assert_array_equal(x[:, 0], z / 2)            # oracle label, delta = 0
    assert _within(np.mean(x[:, 1] == z), (1 + 1 / k) / 2, n)
    r = x[:, 2:] * z[:, None]                                 # ~ N(1/sqrt d, k)
    assert abs(r.mean() - 1 / math.sqrt(d)) < 5 * math.sqrt(k / (n * d))
    assert abs(r.var() / k - 1) < 0.03
    clf = ds.overly_robust_classifiers(d)
    assert _acc(clf["oracle"], x, y) == 1.0


def test_overly_robust_lemma7_accuracy_with_label_noise():
    n, alpha, delta = 40000, 0.1, 0.05
    x, y = ds.overly_robust_features(n, k=1 + alpha, d=8, delta=delta, seed=2)
    oracle = (x[:, 0] > 0).astype(int)
    assert _within(np.mean(oracle != y), delta, n)
    q = (1 + 1 / (1 + alpha)) / 2
    acc = _acc(ds.overly_robust_classifiers(8)["x2"], x, y)
    assert _within(acc, (1 - delta) * q + delta * (1 - q), n)
    # every point is at l_inf distance exactly 1 from sign(x2)'s boundary
    np.testing.assert_array_equal(np.abs(x[:, 1]), 1.0)


# ------------------------------------------------------------ real data


@pytest.mark.parametrize("name,shape,n_all,n_test", [("mnist", (28, 28, 1), 5000, 1000),
                                                    ("digits", (8, 8, 1), 1797, 359)])
def test_real_data_splits(name, shape, n_all, n_test):
    xa, ya = ds.load_dataset(name, "all")
    xtr, ytr = ds.load_dataset(name, "train")
    xte, yte = ds.load_dataset(name, "test")
    assert xa.shape == (n_all,) + shape and xa.dtype == np.float32 and ya.dtype == np.int64
    assert xte.shape[0] == n_test and xtr.shape[0] == n_all - n_test
    assert xa.min() == 0.0 and xa.max() == 1.0
    assert set(np.unique(ya)) == set(range(10))
    # stratified: every class has ~20 % of its images in the test set
    frac = np.bincount(yte, minlength=10) / np.bincount(ya, minlength=10)
    assert np.all(np.abs(frac - 0.2) < 0.01)
    # train and test partition the data (no image in both, union is all)
    key = lambda x: {r.tobytes() for r in x.reshape(len(x), -1)}
    assert not key(xtr) & key(xte) and key(xtr) | key(xte) == key(xa)
    # fixed split: same fingerprint every call; callers cannot corrupt the cache
    fp = ds.dataset_fingerprint(xte, yte)
    xte[:] = 0
    assert ds.dataset_fingerprint(*ds.load_dataset(name, "test")) == fp


def test_mnist_values_are_scaled_pixels():
    x, _ = ds.mnist("test")
    levels = np.unique(x[:50])
    np.testing.assert_allclose(levels * 255, np.round(levels * 255), atol=1e-4)
    if ds.dataset_fingerprint(*ds.mnist("test")) != ds.dataset_fingerprint(*ds.mnist("test")):
        pytest.fail("fingerprint not deterministic")


def test_fingerprint_sensitivity():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.array([0, 1, 0])
    base = ds.dataset_fingerprint(x, y)
    assert len(base) == 64 and base == ds.dataset_fingerprint(x.copy(), y.copy())
    x2 = x.copy()
    x2[1, 1] += 1
    others = {ds.dataset_fingerprint(x2, y), ds.dataset_fingerprint(x.reshape(4, 3), y),
              ds.dataset_fingerprint(x.astype(np.float64), y), ds.dataset_fingerprint(x, np.array([1, 1, 0])),
              ds.dataset_fingerprint(x)}
    assert base not in others and len(others) == 5


# ------------------------------------------------------------ bad input


@pytest.mark.parametrize("call,name", [
    (lambda: ds.tsipras_p1(0, d=3), "n"),
    (lambda: ds.tsipras_p1(10, d=0), "d"),
    (lambda: ds.tsipras_p1(10, d=3, p=1.5), "p"),
    (lambda: ds.tsipras_p1(10, d=3, eta=float("nan")), "eta"),
    (lambda: ds.tsipras_p1(10, d=3, seed=-1), "seed"),
    (lambda: ds.tsipras_p1(10, d=3, seed=1.5), "seed"),
    (lambda: ds.nakkiran_p2(10, d=3, q=-0.1), "q"),
    (lambda: ds.toy_linear_classifiers(0), "d"),
    (lambda: ds.parabola_points("round", 10), "kind"),
    (lambda: ds.parabola_points("discrete", -1), "n"),
    (lambda: ds.parabola_distance(np.zeros((3, 3)), 2), "x"),
    (lambda: ds.parabola_distance(np.zeros((3, 2)), 3), "p"),
    (lambda: ds.sunset(10, d=1), "d"),
    (lambda: ds.sunset(10, width=0), "width"),
    (lambda: ds.overly_robust_features(10, k=1.0), "k"),
    (lambda: ds.overly_robust_features(10, k=2.0, delta=2), "delta"),
    (lambda: ds.mnist("val"), "split"),
    (lambda: ds.load_dataset("cifar"), "name"),
    (lambda: ds.dataset_fingerprint(None), "x"),
])
def test_bad_input_names_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
