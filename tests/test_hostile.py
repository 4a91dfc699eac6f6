"""Hostile input, property-based: every public entry point either works or raises a
ValueError that names the offending argument — never a silent wrong answer or an XLA crash."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attacks
import rcurves
from _models import binary_linear

KEY = jax.random.PRNGKey(0)
W = np.linspace(-1, 1, 6).astype(np.float32)
F = binary_linear(W, 0.05)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _x(n=4, d=6, value=0.5):
    return np.full((n, d), value, np.float32)


bad_values = st.sampled_from([np.nan, np.inf, -np.inf])
bad_eps = st.one_of(st.floats(max_value=-1e-6, allow_nan=False), st.just(float("nan")),
                    st.just(float("inf")), st.sampled_from(["", "abc", "eps"]), st.none())


@SETTINGS
@given(n=st.integers(1, 5), d=st.integers(1, 5), pos=st.integers(0, 100), v=bad_values)
def test_nonfinite_x_is_rejected_everywhere(n, d, pos, v):
    x = np.full((n, d), 0.5, np.float32)
    x.flat[pos % x.size] = v
    y = np.zeros(n, np.int32)
    f = binary_linear(np.ones(d, np.float32), 0.0)
    for call in (
        lambda: attacks.minimal_distance(f, x, y, norm="l2", key=KEY, steps=1, search_steps=0),
        lambda: attacks.pgd(f, x, y, 0.1, norm="linf", steps=1, key=KEY),
        lambda: attacks.carlini_wagner_l2(f, x, y, key=KEY, binary_search_steps=1, steps=1, lr=0.1),
        lambda: rcurves.linear_distance(np.ones(d, np.float32), 0.0, x, 2),
        lambda: rcurves.interclass_distances(x, y, 2),
    ):
        with pytest.raises(ValueError, match=r"^x\b"):
            call()


@SETTINGS
@given(eps=bad_eps)
def test_bad_eps_is_rejected(eps):
    with pytest.raises(ValueError, match=r"^eps"):
        attacks.pgd(F, _x(), np.zeros(4, np.int32), eps, norm="linf", steps=1, key=KEY)
    with pytest.raises(ValueError, match=r"^eps"):
        rcurves.robustness_curve(np.ones(4), np.array([0.1, eps if isinstance(eps, float) else -1.0]))


@SETTINGS
@given(lo=st.floats(-10, 10), width=st.floats(-10, 0))
def test_reversed_or_empty_bounds(lo, width):
    with pytest.raises(ValueError, match=r"^bounds"):
        attacks.minimal_distance(F, _x(), np.zeros(4, np.int32), norm="linf", key=KEY,
                                 bounds=(lo, lo + width), steps=1, search_steps=0)


@SETTINGS
@given(labels=st.lists(st.integers(-5, 7), min_size=4, max_size=4).filter(
    lambda l: min(l) < 0 or max(l) > 1))
def test_labels_out_of_range(labels):
    y = np.asarray(labels, np.int64)
    with pytest.raises(ValueError, match=r"^y"):
        attacks.minimal_distance(F, _x(), y, norm="l2", key=KEY, steps=1, search_steps=0)


@SETTINGS
@given(key=st.one_of(st.integers(), st.just(np.zeros(3, np.uint32)), st.just(np.zeros(2, np.float32)),
                     st.just("seed"), st.just(np.zeros((5, 2), np.uint32))))
def test_keys_of_the_wrong_type(key):
    with pytest.raises(ValueError, match=r"^key"):
        attacks.minimal_distance(F, _x(), np.zeros(4, np.int32), norm="l2", key=key, steps=1,
                                 search_steps=0)


@SETTINGS
@given(p=st.one_of(st.floats(max_value=0.999), st.just(float("nan")), st.just("l7"), st.none()))
def test_bad_p_is_rejected(p):
    with pytest.raises(ValueError, match=r"^p"):
        rcurves.linear_distance(W, 0.0, _x(), p)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes_give_the_float32_answer(dtype):
    rng = np.random.default_rng(0)
    x32 = rng.uniform(0, 1, size=(8, 6)).astype(np.float32)
    x = x32.astype(dtype)
    x32 = x.astype(np.float32)       # the same values the toolkit computes on
    y = np.asarray(jnp.argmax(F(x32), -1))
    a = attacks.minimal_distance(F, x, y, norm="linf", key=KEY, steps=4, search_steps=2)
    b = attacks.minimal_distance(F, x32, y, norm="linf", key=KEY, steps=4, search_steps=2)
    np.testing.assert_array_equal(np.asarray(a.distance), np.asarray(b.distance))
    np.testing.assert_array_equal(np.asarray(rcurves.linear_distance(W, 0.05, x, 2)),
                                  np.asarray(rcurves.linear_distance(W, 0.05, x32, 2)))


def test_integer_images_are_rejected_not_silently_scaled():
    with pytest.raises(ValueError, match=r"^x.*float"):
        attacks.minimal_distance(F, np.full((2, 6), 128, np.uint8), np.zeros(2, np.int32),
                                 norm="l2", key=KEY)


def test_empty_inputs():
    for call in (
        lambda: attacks.minimal_distance(F, np.zeros((0, 6), np.float32), np.zeros(0, np.int32),
                                         norm="l2", key=KEY),
        lambda: rcurves.linear_distance(W, 0.0, np.zeros((0, 6), np.float32), 2),
    ):
        with pytest.raises(ValueError, match=r"^x"):
            call()
    with pytest.raises(ValueError, match=r"^distances"):
        rcurves.robustness_curve(np.zeros(0), np.array([0.1]))
