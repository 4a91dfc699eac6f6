"""Inter-class distances against a brute-force n x n float64 computation."""
import numpy as np
import pytest

from rcurves.exact.interclass import (deduplicate, interclass_distances, interclass_summary,
                                interclass_table)

_ORD = {"l1": 1, "l2": 2, "linf": np.inf}


def _brute(x, y, p):
    xf = np.asarray(x, np.float64).reshape(len(x), -1)
    diff = xf[:, None, :] - xf[None, :, :]
    dist = np.linalg.norm(diff, ord=_ORD[p], axis=-1)
    dist[y[:, None] == y[None, :]] = np.inf
    return dist.min(axis=1)


def _data(n=37, shape=(3, 2, 2), classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n,) + shape).astype(np.float32), rng.integers(0, classes, n)


@pytest.mark.parametrize("p", ["l1", "l2", "linf"])
@pytest.mark.parametrize("block", [1, 8, 37, 100])
def test_matches_brute_force(p, block):
    x, y = _data()
    got = interclass_distances(x, y, p, block=block)
    assert got.shape == (37,) and got.dtype == np.float32
    np.testing.assert_allclose(got, _brute(x, y, p), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("p,alias", [("l1", 1), ("l2", 2.0), ("linf", np.inf)])
def test_aliases_and_many_features(p, alias):
    # 37 features: not a multiple of the feature chunk; 2 classes; block 7
    x, y = _data(n=23, shape=(37,), classes=2, seed=3)
    np.testing.assert_allclose(interclass_distances(x, y, alias, block=7), _brute(x, y, p),
                               rtol=2e-6, atol=1e-6)


def test_permutation_equivariance():
    x, y = _data(n=30, seed=5)
    perm = np.random.default_rng(1).permutation(30)
    d = interclass_distances(x, y, "l2", block=4)
    np.testing.assert_array_equal(interclass_distances(x[perm], y[perm], "l2", block=4), d[perm])


def test_no_cancellation_for_near_duplicates():
    # large coordinates, two other-class points 1e-2 apart in one pixel: the
    # difference form keeps it; an |a|^2+|b|^2-2ab expansion in float32 would not
    x = np.full((2, 64), 100.0, np.float32)
    x[1, 3] += np.float32(1e-2)
    y = np.array([0, 1])
    d = interclass_distances(x, y, "l2")
    np.testing.assert_allclose(d, [x[1, 3] - x[0, 3]] * 2, rtol=1e-6)


def test_duplicates_single_class_and_inf():
    x = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(interclass_distances(x, np.array([0, 1, 1]), "l2"), [0, 0, 5])
    assert np.all(np.isinf(interclass_distances(x, np.array([2, 2, 2]), "l1")))


def test_deduplicate():
    x = np.array([[0, 0], [1, 1], [0, 0], [2, 2], [2, 2], [5, 5]], np.float32)
    y = np.array([0, 1, 1, 1, 1, 0])
    xk, yk, removed = deduplicate(x, y)
    # [0,0] occurs with labels 0 and 1 -> both dropped; [2,2] twice, label 1 -> kept once
    np.testing.assert_array_equal(xk, [[1, 1], [2, 2], [5, 5]])
    np.testing.assert_array_equal(yk, [1, 1, 0])
    assert removed == 3


def test_summary_and_table_ignore_conflicting_duplicates():
    x, y = _data(n=40, shape=(5,), classes=4, seed=7)
    x_dup = np.concatenate([x, x[:1]])
    y_dup = np.concatenate([y, (y[:1] + 1) % 4])       # same input, other label
    s = interclass_summary(x_dup, y_dup, "linf", block=6)
    ref = _brute(x[1:], y[1:], "linf")                  # both copies removed
    assert s.samples == 39 and s.duplicates_removed == 2 and s.classes == 4
    assert s.dimensionality == (5,)
    np.testing.assert_allclose([s.smallest, s.largest], [ref.min(), ref.max()], rtol=1e-6)
    row, dists = interclass_table(x, y, block=16)
    assert set(row["smallest"]) == {"linf", "l2", "l1"} and row["samples"] == 40
    for p in ("linf", "l2", "l1"):
        ref = _brute(x, y, p)
        np.testing.assert_allclose(dists[p], ref, rtol=2e-6)
        assert row["largest"][p] == pytest.approx(ref.max(), rel=1e-6)
    # norm inequalities for 5 features: linf <= l2 <= l1 <= sqrt(5) l2
    assert np.all(dists["linf"] <= dists["l2"] * (1 + 1e-6))
    assert np.all(dists["l2"] <= dists["l1"] * (1 + 1e-6))
    assert np.all(dists["l1"] <= np.sqrt(5) * dists["l2"] * (1 + 1e-6))


@pytest.mark.parametrize("kwargs,name", [
    (dict(p="l3"), "p"), (dict(p=0.5), "p"), (dict(p="l2", block=0), "block"),
])
def test_bad_arguments(kwargs, name):
    x, y = _data(n=5)
    with pytest.raises(ValueError, match=name):
        interclass_distances(x, y, **kwargs)


def test_bad_arrays():
    x, y = _data(n=5)
    with pytest.raises(ValueError, match="y"):
        interclass_distances(x, y[:4], "l2")
    bad = x.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="x"):
        interclass_distances(bad, y, "l2")
    with pytest.raises(ValueError, match="x"):
        interclass_distances((x * 255).astype(np.uint8), y, "l2")
    with pytest.raises(ValueError, match="norms"):
        interclass_table(x, y, norms=("l2", "l5"))
