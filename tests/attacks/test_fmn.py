"""FMN (Pintor et al. 2021) against Lemma 1 and its invariants, in l_inf, l_2, l_1."""
import jax
import numpy as np
import pytest

import attacks
from attacks.fmn import _fmn_jit, fmn
from tests._models import binary_linear, exact_binary, exact_multiclass, linear_data, multiclass_linear

KEY = jax.random.PRNGKey(0)
RTOL = 1e-5  # float32 re-check tolerance
STEPS = 30
TOL = {"linf": 1.01, "l2": 1.01, "l1": 1.05}


@pytest.fixture(scope="module")
def binary_case():
    w, b, x, y = linear_data()
    return binary_linear(w, b), w, b, x, y


@pytest.fixture(scope="module")
def multiclass_case():
    rng = np.random.default_rng(2)
    d, k, n = 20, 5, 40
    W = rng.normal(size=(k, d)).astype(np.float32)
    b = rng.normal(size=k).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    f = multiclass_linear(W, b)
    y = np.asarray(np.argmax(f(x), -1)).astype(np.int32)
    y[:4] = (y[:4] + 1) % k  # four misclassified points
    return f, W, b, x, y


@pytest.mark.highest
@pytest.mark.parametrize("norm", ["linf", "l2", "l1"])
def test_binary_linear_matches_lemma1(binary_case, norm):
    f, w, b, x, y = binary_case
    exact = exact_binary(w, b, x, norm)
    r = fmn(f, x, y, norm=norm, key=KEY, steps=STEPS, bounds=None)
    d = np.asarray(r.distance)
    assert np.all(np.asarray(r.success))
    assert np.all(d >= exact * (1 - RTOL)), "a distance below the exact one"
    assert np.median(d / exact) <= TOL[norm]
    assert attacks.verify(f, x, y, r, norm) == {}


def test_binary_linear_without_ray_search(binary_case):
    """FMN's own iterates (no refinement) get within 1% in median."""
    f, w, b, x, y = binary_case
    exact = exact_binary(w, b, x, "linf")
    r = fmn(f, x, y, norm="linf", key=KEY, steps=STEPS, bounds=None, refine_steps=0)
    d = np.asarray(r.distance)
    assert np.all(d >= exact * (1 - RTOL))
    assert np.median(d / exact) <= 1.01
    assert attacks.verify(f, x, y, r, "linf") == {}


@pytest.mark.parametrize("norm", ["linf", "l2", "l1"])
def test_multiclass_linear_matches_exact_and_misclassified_are_zero(multiclass_case, norm):
    f, W, b, x, y = multiclass_case
    exact = exact_multiclass(W, b, x, y, norm)
    r = fmn(f, x, y, norm=norm, key=KEY, steps=STEPS, bounds=None)
    d = np.asarray(r.distance)
    assert np.all(d[:4] == 0) and np.all(np.asarray(r.success)[:4])
    np.testing.assert_array_equal(np.asarray(r.x_adv)[:4], x[:4])
    assert np.all(d >= exact * (1 - RTOL))
    pos = exact > 0
    assert pos.sum() == len(x) - 4
    assert np.median(d[pos] / exact[pos]) <= TOL[norm]
    assert attacks.verify(f, x, y, r, norm) == {}


def exact_box_linear(w, b, x, norm, lo=0.0, hi=1.0):
    """Exact distance from x to {w.x' + b = 0} over x' in the box [lo, hi]^d (float64).

    Crossing needs a total gain sum_i |w_i| |delta_i| >= |w.x + b| with
    |delta_i| <= room_i (the room toward the boundary in coordinate i). l_1:
    fill coordinates greedily by |w_i|; l_inf: the smallest t with
    sum_i |w_i| min(t, room_i) = |s|; l_2: |delta_i| = min(t |w_i|, room_i)
    (KKT water-filling), t by bisection. inf if the box does not reach.
    """
    w = np.asarray(w, np.float64)
    a = np.abs(w)
    out = []
    for xi in np.asarray(x, np.float64):
        s = xi @ w + b
        room = np.where(-np.sign(s) * w > 0, hi - xi, xi - lo)
        need = abs(s)
        if (room * a).sum() < need:
            out.append(np.inf)
            continue
        if norm == "l1":
            tot = 0.0
            for i in np.argsort(-a):
                if room[i] * a[i] >= need:
                    tot += need / a[i]
                    break
                tot += room[i]
                need -= room[i] * a[i]
            out.append(tot)
            continue
        scale = np.ones_like(a) if norm == "linf" else a
        def gain(t):
            return (a * np.minimum(t * scale, room)).sum()
        t_lo, t_hi = 0.0, 1.0
        while gain(t_hi) < need:
            t_hi *= 2
        for _ in range(200):
            mid = 0.5 * (t_lo + t_hi)
            t_lo, t_hi = (mid, t_hi) if gain(mid) < need else (t_lo, mid)
        out.append(t_hi if norm == "linf" else np.linalg.norm(np.minimum(t_hi * a, room)))
    return np.array(out)


@pytest.fixture(scope="module")
def box_case():
    rng = np.random.default_rng(4)
    d, n = 16, 24
    w = rng.normal(size=d).astype(np.float32)
    x = rng.uniform(0, 1, size=(n, d)).astype(np.float32)
    b = -np.float32(np.median(x @ w))
    y = (x @ w + b > 0).astype(np.int32)
    return binary_linear(w, b), w, b, x, y


@pytest.mark.parametrize("norm", ["linf", "l1"])
def test_bounded_matches_exact_box_distance(box_case, norm):
    f, w, b, x, y = box_case
    r = fmn(f, x, y, norm=norm, key=KEY, steps=STEPS)
    xa = np.asarray(r.x_adv)
    assert xa.min() >= 0 and xa.max() <= 1
    exact_box = exact_box_linear(w, b, x, norm)
    # the box binds for several points (it only removes perturbations)
    assert np.all(exact_box >= exact_binary(w, b, x, norm) * (1 - 1e-9))
    assert np.sum(exact_box > 1.01 * exact_binary(w, b, x, norm)) >= 3
    dd = np.asarray(r.distance)
    assert np.all(np.asarray(r.success))
    assert np.all(dd >= exact_box * (1 - RTOL))
    assert np.median(dd / exact_box) <= TOL[norm]
    assert attacks.verify(f, x, y, r, norm, bounds=(0.0, 1.0)) == {}


def test_sparse_l1_step_unbounded(binary_case):
    f, w, b, x, y = binary_case
    exact = exact_binary(w, b, x, "l1")
    r = fmn(f, x, y, norm="l1", key=KEY, steps=STEPS, bounds=None, l1_step="sparse")
    d = np.asarray(r.distance)
    assert np.all(d >= exact * (1 - RTOL))
    assert np.median(d / exact) <= 1.01
    # the l1 minimum of a linear model moves one coordinate (argmax |w_i|)
    moved = np.abs(np.asarray(r.x_adv) - x) > 0
    assert np.median(moved.sum(1)) == 1
    assert attacks.verify(f, x, y, r, "l1") == {}


def test_same_key_same_result_key_unused_no_recompile(multiclass_case):
    f, W, b, x, y = multiclass_case
    a = fmn(f, x, y, norm="l2", key=KEY, steps=STEPS, bounds=None)
    size = _fmn_jit._cache_size()
    again = fmn(f, x, y, norm="l2", key=KEY, steps=STEPS, bounds=None)
    np.testing.assert_array_equal(np.asarray(a.x_adv), np.asarray(again.x_adv))
    # FMN is deterministic: another key (or one per point) gives the same result
    other = fmn(f, x, y, norm="l2", key=jax.random.split(KEY, len(x)), steps=STEPS, bounds=None)
    np.testing.assert_array_equal(np.asarray(a.distance), np.asarray(other.distance))
    fmn(f, x * 0.5, y, norm="l2", key=KEY, steps=STEPS, bounds=None, refine_steps=7)
    assert _fmn_jit._cache_size() == size


@pytest.mark.parametrize("kw,name", [
    (dict(norm="l3"), "norm"),
    (dict(steps=0), "steps"),
    (dict(alpha_init=0.0), "alpha_init"),
    (dict(gamma_init=1.0), "gamma_init"),
    (dict(l1_sparsity=1.5), "l1_sparsity"),
    (dict(l1_step="dense"), "l1_step"),
    (dict(key=None), "key"),
    (dict(bounds=(0.0, 0.5)), "x"),   # inputs outside the box
    (dict(refine_steps=-1), "refine_steps"),
])
def test_bad_input_raises_naming_argument(binary_case, kw, name):
    f, w, b, x, y = binary_case
    args = dict(norm="l2", key=KEY, steps=5, bounds=None)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        fmn(f, x, y, **args)


def test_bad_labels_raise(binary_case):
    f, w, b, x, y = binary_case
    with pytest.raises(ValueError, match="y"):
        fmn(f, x, y + 5, norm="l2", key=KEY, steps=5, bounds=None)
