"""DDN (Rony et al. 2019) against Lemma 1 and its invariants."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from attacks.ddn import _ddn_jit, cosine_schedule, ddn
from tests._models import binary_linear, exact_binary, exact_multiclass, linear_data, multiclass_linear
from tests.attacks.test_fmn import exact_box_linear

KEY = jax.random.PRNGKey(0)
RTOL = 1e-5  # float32 re-check tolerance


@pytest.fixture(scope="module")
def binary_case():
    w, b, x, y = linear_data()
    return binary_linear(w, b), x, y, exact_binary(w, b, x, "l2")


@pytest.fixture(scope="module")
def binary_result(binary_case):
    f, x, y, _ = binary_case
    return ddn(f, x, y, key=KEY, steps=50, bounds=None)


def test_binary_linear_matches_lemma1(binary_case, binary_result):
    f, x, y, exact = binary_case
    r = binary_result
    d = np.asarray(r.distance)
    assert np.all(np.asarray(r.success))
    assert np.all(d >= exact * (1 - RTOL)), "a distance below the exact one"
    assert np.median(d / exact) <= 1.01
    assert attacks.verify(f, x, y, r, "l2") == {}


def test_binary_linear_without_ray_search(binary_case):
    """DDN's own iterates (no refinement) get within 1% in median."""
    f, x, y, exact = binary_case
    r = ddn(f, x, y, key=KEY, steps=50, bounds=None, refine_steps=0)
    d = np.asarray(r.distance)
    assert np.all(d >= exact * (1 - RTOL))
    assert np.median(d / exact) <= 1.01
    assert attacks.verify(f, x, y, r, "l2") == {}


@pytest.mark.parametrize("loss", ["ce", "margin"])
def test_multiclass_linear_matches_exact_and_misclassified_are_zero(loss):
    rng = np.random.default_rng(2)
    d, k, n = 20, 5, 40
    W = rng.normal(size=(k, d)).astype(np.float32)
    b = rng.normal(size=k).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    f = multiclass_linear(W, b)
    y = np.asarray(np.argmax(f(x), -1)).astype(np.int32)
    y[:4] = (y[:4] + 1) % k  # four misclassified points
    exact = exact_multiclass(W, b, x, y, "l2")
    r = ddn(f, x, y, key=KEY, steps=50, bounds=None, loss=loss)
    d_ = np.asarray(r.distance)
    assert np.all(d_[:4] == 0) and np.all(np.asarray(r.success)[:4])
    np.testing.assert_array_equal(np.asarray(r.x_adv)[:4], x[:4])
    assert np.all(d_ >= exact * (1 - RTOL))
    pos = exact > 0
    assert pos.sum() == n - 4
    assert np.median(d_[pos] / exact[pos]) <= 1.01
    assert attacks.verify(f, x, y, r, "l2") == {}


def test_bounded_matches_exact_box_distance():
    rng = np.random.default_rng(4)
    d, n = 16, 24
    w = rng.normal(size=d).astype(np.float32)
    x = rng.uniform(0, 1, size=(n, d)).astype(np.float32)
    b = -np.float32(np.median(x @ w))
    y = (x @ w + b > 0).astype(np.int32)
    f = binary_linear(w, b)
    r = ddn(f, x, y, key=KEY, steps=30)
    xa = np.asarray(r.x_adv)
    assert xa.min() >= 0 and xa.max() <= 1
    exact_box = exact_box_linear(w, b, x, "l2")
    assert np.sum(exact_box > 1.001 * exact_binary(w, b, x, "l2")) >= 3   # the box binds
    dd = np.asarray(r.distance)
    assert np.all(np.asarray(r.success))
    assert np.all(dd >= exact_box * (1 - RTOL))
    assert np.median(dd / exact_box) <= 1.01
    assert attacks.verify(f, x, y, r, "l2", bounds=(0.0, 1.0)) == {}


def test_same_key_same_result_no_recompile(binary_case, binary_result):
    f, x, y, _ = binary_case
    size = _ddn_jit._cache_size()
    again = ddn(f, x, y, key=KEY, steps=50, bounds=None)
    np.testing.assert_array_equal(np.asarray(again.distance), np.asarray(binary_result.distance))
    np.testing.assert_array_equal(np.asarray(again.x_adv), np.asarray(binary_result.x_adv))
    # other input values, per-point keys, starting norms and refine steps reuse the program
    keys = jax.random.split(KEY, len(x))
    ddn(f, x * 0.5, y, key=keys, steps=50, bounds=None, init_eps=np.full(len(x), 0.3),
        refine_steps=2)
    assert _ddn_jit._cache_size() == size


def test_zero_gradient_model_is_inf_not_nan():
    """A constant model: the gradient is exactly zero, nothing is adversarial."""
    def const(x):
        return jnp.zeros((x.shape[0], 3)) + jnp.array([1.0, 0.0, 0.0]) + 0 * x[:, :1]

    x = np.random.default_rng(5).normal(size=(3, 4)).astype(np.float32)
    y = np.zeros(3, np.int32)
    r = ddn(const, x, y, key=KEY, steps=5, bounds=None)
    assert np.all(np.isinf(np.asarray(r.distance))) and not np.any(np.asarray(r.success))
    np.testing.assert_array_equal(np.asarray(r.x_adv), x)


def test_cosine_schedule_endpoints():
    s = np.asarray(cosine_schedule(1.0, 0.01, 10))
    assert s[0] == pytest.approx(1.0) and np.all(np.diff(s) < 0) and s[-1] > 0.01


@pytest.mark.parametrize("kw,name", [
    (dict(steps=0), "steps"),
    (dict(init_eps=0.0), "init_eps"),
    (dict(init_eps=-1.0), "init_eps"),
    (dict(gamma=1.5), "gamma"),
    (dict(loss="hinge"), "loss"),
    (dict(key=jnp.zeros((3, 2), jnp.uint32)), "key"),
    (dict(bounds=(1.0, 0.0)), "bounds"),
    (dict(refine_steps=-1), "refine_steps"),
])
def test_bad_input_raises_naming_argument(binary_case, kw, name):
    f, x, y, _ = binary_case
    args = dict(key=KEY, steps=5, bounds=None)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        ddn(f, x, y, **args)
