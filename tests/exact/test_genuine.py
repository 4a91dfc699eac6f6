"""002's standard and genuine adversarial accuracy: exact 1-D values derived by hand, Theorem 2."""
import numpy as np
import pytest

from rcurves.exact import genuine as g
from rcurves.data import sunset_oracle_logits_fn, toy_1d, toy_1d_classifiers

EPS = np.array([0.0, 0.25, 0.5, 0.75, 0.999, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 5.0])


def _std_hand(name, e):
    """a_std by hand (002 Sec. 1.2.1): class -1 on [-2,-1), +1 on [1,2), prior 1/2.

    f1 = step(x-1): a -1 point x is robust iff x + e < 1 (fraction clip(3 - e)),
    a +1 point iff x - e >= 1 (fraction clip(1 - e)).
    f3 = step(x): -1 robust iff x + e < 0, +1 iff x - e >= 0: both clip(2 - e).
    f2: -1 robust iff x - e >= -4 and x + e < 0: clip(2 - e) as well (x - e >= -4
    binds only for e > 2, where nothing is left); +1 as f3.
    """
    c = lambda v: np.clip(v, 0.0, 1.0)
    if name == "f1":
        return 0.5 * c(3 - e) + 0.5 * c(1 - e)
    return c(2 - e)


def _gen_hand(name, e):
    """a_gen by hand: S_exact(e) = {-2, -1, 1, 2} (x' = -2-e, -1+e, 1-e, 2+e) for 0 < e < 1,
    {-2, 2} for e >= 1 (-1+e and 1-e are then closer than e to the other class).
    f1 is wrong only at x' = 1 - e < 1 (for the +1 point 1): 3/4 on (0, 1).
    f2 is wrong only at x' = -2 - e < -4: 1/2 for e > 2. f3 is never wrong."""
    if name == "f1":
        return np.where((e > 0) & (e < 1), 0.75, 1.0)
    if name == "f2":
        return np.where(e > 2, 0.5, 1.0)
    return np.ones_like(e)


@pytest.mark.parametrize("name", ["f1", "f2", "f3"])
def test_toy_standard_and_genuine_match_hand_values(name):
    data = g.toy_1d_data()
    clf = g.toy_1d_piecewise()[name]
    np.testing.assert_allclose(g.standard_adversarial_accuracy_1d(data, clf, EPS), _std_hand(name, EPS),
                               atol=1e-12)
    np.testing.assert_allclose(g.genuine_adversarial_accuracy_1d(data, clf, EPS), _gen_hand(name, EPS),
                               atol=1e-12)
    # 002: "f1, f2 and f3 have the same ARA ... that is 1.5"
    assert g.standard_ara_1d(data, clf) == pytest.approx(1.5, abs=1e-12)


def test_toy_classifiers_and_sampler_match_the_paper():
    """rcurves.data' f1, f2, f3 agree with 002's formulas off the break points;
    toy_1d samples lie in [-2, -1) for c = -1 and [1, 2) for c = +1, classes balanced."""
    step = lambda v: np.where(v >= 0, 1, -1)
    paper = {"f1": lambda x: step(x - 1), "f2": lambda x: 1 - step(x + 4) + step(x), "f3": step}
    x = np.linspace(-7.0, 7.0, 2801)
    x = x[np.min(np.abs(x[:, None] - np.array([-4.0, 0.0, 1.0])[None]), axis=1) > 1e-9]
    logits = toy_1d_classifiers()
    for name, clf in g.toy_1d_piecewise().items():
        ours = g.piecewise_predict(clf, x)
        np.testing.assert_array_equal(2 * ours - 1, paper[name](x))
        np.testing.assert_array_equal(np.asarray(logits[name](x[:, None].astype(np.float32))).argmax(1), ours)
    # at the break points the piecewise classifiers follow 002's step (step(0) = +1)
    f = g.toy_1d_piecewise()
    assert g.piecewise_predict(f["f1"], 1.0) == 1 and g.piecewise_predict(f["f3"], 0.0) == 1
    assert g.piecewise_predict(f["f2"], -4.0) == 0 and g.piecewise_predict(f["f2"], 0.0) == 1
    xs, ys = toy_1d(4000, seed=1)
    xs = xs[:, 0]
    assert np.all((xs[ys == 0] >= -2) & (xs[ys == 0] < -1)) and np.all((xs[ys == 1] >= 1) & (xs[ys == 1] < 2))
    assert abs(ys.mean() - 0.5) < 0.04


def test_nn1_is_f3_and_theorem2_on_random_interval_data():
    """002 Theorem 2 on exact 1-D data: the 1-NN has a_gen = 1 at every eps, no
    classifier exceeds it, and a classifier that differs from it on a set of
    positive measure outside cl X falls below 1 at some eps."""
    data = g.toy_1d_data()
    nn = g.nn1_classifier_1d(data)
    np.testing.assert_array_equal(nn.breaks, [0.0])
    np.testing.assert_array_equal(nn.labels, [0, 1])
    rng = np.random.default_rng(0)
    eps = np.linspace(0.0, 6.0, 601)
    for trial in range(30):                    # random data: alternating-class intervals with gaps
        k = rng.integers(2, 6)
        ends = np.cumsum(rng.uniform(0.2, 1.5, size=2 * k))
        lab = rng.integers(0, 3, size=k)
        data = g.interval_data(ends[0::2], ends[1::2], lab, rng.uniform(0.1, 1.0, size=k))
        nn = g.nn1_classifier_1d(data)
        gen_nn = g.genuine_adversarial_accuracy_1d(data, nn, eps)
        defined = ~np.isnan(gen_nn)
        np.testing.assert_allclose(gen_nn[defined], 1.0, atol=1e-12)
        for _ in range(5):                     # random classifiers never beat it
            b = np.sort(rng.uniform(ends[0] - 1, ends[-1] + 1, size=rng.integers(1, 6)))
            clf = g.piecewise(b, rng.integers(0, 3, size=b.size + 1))
            gen = g.genuine_adversarial_accuracy_1d(data, clf, eps)
            assert np.all(gen[defined] <= 1.0 + 1e-12)
        if nn.breaks.size:                     # move one 1-NN break inside its gap: strictly worse
            lo, hi, _ = g._components(data)
            i = rng.integers(nn.breaks.size)
            gap_lo = hi[hi <= nn.breaks[i]].max()
            moved = nn.breaks.copy()
            moved[i] = (gap_lo + nn.breaks[i]) / 2.0
            gen = g.genuine_adversarial_accuracy_1d(data, g.Piecewise1D(moved, nn.labels), eps)
            assert np.nanmin(gen) < 1.0


def test_sunset_theorem2_oracle_is_one_and_others_below():
    q = g.sunset_quadrature(512, 512)
    logits = sunset_oracle_logits_fn()
    oracle = lambda z: np.asarray(logits(z.astype(np.float32))).argmax(1)
    # the datasets' oracle is the 1-NN of the circle and the *unbounded* line;
    # over |x_1| <= width (2) it is the 1-NN of the sampled sets
    z = np.random.default_rng(0).uniform([-2, -1], [2, 3], size=(2000, 2))
    dc, dl = g.sunset_set_distances(z)
    keep = np.abs(dc - dl) > 1e-4
    np.testing.assert_array_equal(oracle(z)[keep], (dc - dl > 0)[keep].astype(int))
    eps = np.array([0.0, 0.1, 0.5, 1.0, 2.0])
    assert np.all(g.sunset_genuine_accuracy(g.sunset_nn1_predict, eps, quad=q) == 1.0)
    # the unbounded-line oracle is the 1-NN only near the segment: 1 up to eps = 1
    # (circle points pushed out beyond |x_1| = 2 are nearer the line than the segment)
    gen_line = g.sunset_genuine_accuracy(oracle, eps, quad=q)
    assert np.all(gen_line[:4] == 1.0) and gen_line[4] < 1.0
    disk = lambda z: (np.hypot(z[:, 0], z[:, 1] - 1) > 1 + 1e-12).astype(int)
    gen = g.sunset_genuine_accuracy(disk, eps, quad=q)
    assert gen[0] == 1.0 and np.all(gen[1:] < 0.8)


def test_bad_input():
    with pytest.raises(ValueError, match="exclusive class"):
        g.interval_data([0.0, 1.0], [1.0, 2.0], [0, 1])
    with pytest.raises(ValueError, match="lo <= hi"):
        g.interval_data([1.0], [0.0], [0])
    with pytest.raises(ValueError, match="labels"):
        g.piecewise([0.0], [0])
    with pytest.raises(ValueError, match="eps"):
        g.genuine_adversarial_accuracy_1d(g.toy_1d_data(), g.toy_1d_piecewise()["f1"], -1.0)
