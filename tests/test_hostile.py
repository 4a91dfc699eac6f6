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
from tests._models import binary_linear

KEY = jax.random.PRNGKey(0)
W = np.linspace(-1, 1, 6).astype(np.float32)
F = binary_linear(W, 0.05)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _x(n=4, d=6, value=0.5):
    return np.full((n, d), value, np.float32)


bad_values = st.sampled_from([np.nan, np.inf, -np.inf])
bad_eps = st.one_of(st.floats(max_value=-1e-6, allow_nan=False), st.just(float("nan")),
                    st.just(float("inf")), st.sampled_from(["", "abc", "eps"]), st.none())


def _nonfinite_case(n, d, pos, v):
    """A linear model and n points of dimension d, one coordinate set to the bad value v."""
    x = np.full((n, d), 0.5, np.float32)
    x.flat[pos % x.size] = v
    return binary_linear(np.ones(d, np.float32), 0.0), x, np.zeros(n, np.int32)


@SETTINGS
@given(n=st.integers(1, 5), d=st.integers(1, 5), pos=st.integers(0, 100), v=bad_values)
def test_nonfinite_x_is_rejected_everywhere(n, d, pos, v):
    f, x, y = _nonfinite_case(n, d, pos, v)
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


# ---------------------------------------------------------------------------
# the remaining public functions: ddn, fmn, cap_pgd, vertex_pgd, the sparsity
# estimators, robustness_curve, run_chunked, map_points

import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402

from rcurves.pipeline.runner import point_keys, run_chunked  # noqa: E402
from rcurves.data.streaming import map_points  # noqa: E402

SMALL = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


def _model_calls(f, x, y, *, key=KEY, eps=0.3, bounds=None):
    """Every model-based public function not covered above, with the cheapest settings.

    Each is expected to validate its arguments before compiling anything."""
    shape = np.shape(x)[1:]
    d = int(np.prod(shape)) if len(shape) else 1
    u = np.ones(shape, np.float32)
    kw = dict(key=key, n_directions=1, search_steps=1, steps=1, bounds=bounds)
    return {
        "ddn": lambda: attacks.ddn(f, x, y, key=key, steps=1, bounds=bounds),
        "fmn": lambda: attacks.fmn(f, x, y, norm="l2", key=key, steps=1, bounds=bounds),
        "cap_pgd": lambda: attacks.cap_pgd(f, x, y, eps, u, 0.5, steps=1, key=key, bounds=bounds),
        "vertex_pgd": lambda: attacks.vertex_pgd(f, x, y, eps, u, np.arange(d), min(2, d), steps=1,
                                                 key=key, bounds=bounds),
        "l2_sparsity": lambda: rcurves.l2_sparsity(f, x, y, eps, **kw),
        "linf_sparsity": lambda: rcurves.linf_sparsity(f, x, y, eps, **kw),
        "sparsity_curve": lambda: rcurves.sparsity_curve(f, x, y, [eps] if np.ndim(eps) == 0 else eps,
                                                         norm="l2", **kw),
    }


def _linear_calls(x, y=None, *, eps=0.3, w=None):
    d = int(np.prod(np.shape(x)[1:]))
    w = np.linspace(-1, 1, d).astype(np.float32) + 0.1 if w is None else w
    u = np.ones((1,) + tuple(np.shape(x)[1:]), np.float32)
    return {
        "linear_l2_sparsity": lambda: rcurves.linear_l2_sparsity(w, 0.0, x, eps, u, y),
        "linear_linf_sparsity": lambda: rcurves.linear_linf_sparsity(w, 0.0, x, eps, u, np.arange(d)[None], y),
    }


def _all_raise(calls, pattern):
    for name, call in calls.items():
        with pytest.raises(ValueError, match=pattern):
            call()
            pytest.fail(f"{name} accepted the input")


@SMALL
@given(n=st.integers(1, 4), d=st.integers(2, 5), pos=st.integers(0, 100), v=bad_values)
def test_nonfinite_x_is_rejected_by_the_other_entry_points(n, d, pos, v):
    f, x, y = _nonfinite_case(n, d, pos, v)
    _all_raise({**_model_calls(f, x, y), **_linear_calls(x, y)}, r"^x\b")


@SMALL
@given(labels=st.lists(st.integers(-5, 7), min_size=4, max_size=4).filter(lambda l: min(l) < 0 or max(l) > 1))
def test_labels_out_of_range_are_rejected_by_the_other_entry_points(labels):
    y = np.asarray(labels, np.int64)
    _all_raise({**_model_calls(F, _x(), y), **_linear_calls(_x(), y)}, r"^y\b")


@SMALL
@given(eps=bad_eps)
def test_bad_eps_is_rejected_by_the_constrained_attacks_and_the_sparsity_estimators(eps):
    calls = {k: v for k, v in _model_calls(F, _x(), np.zeros(4, np.int32), eps=eps).items()
             if k not in ("ddn", "fmn")}
    calls.update(_linear_calls(_x(), eps=eps))
    _all_raise(calls, r"^eps")


@SMALL
@given(lo=st.floats(-10, 10), width=st.floats(-10, 0))
def test_reversed_or_empty_bounds_everywhere(lo, width):
    _all_raise(_model_calls(F, _x(), np.zeros(4, np.int32), bounds=(lo, lo + width)), r"^bounds")


@SMALL
@given(key=st.one_of(st.integers(), st.just(np.zeros(3, np.uint32)), st.just(np.zeros(2, np.float32)),
                     st.just("seed"), st.just(np.zeros((5, 2), np.uint32)), st.none()))
def test_keys_of_the_wrong_type_everywhere(key, tmp_path_factory):
    x, y = _x(), np.zeros(4, np.int32)
    calls = _model_calls(F, x, y, key=key)
    calls["run_chunked"] = lambda: run_chunked(lambda a, b, k: {"a": a[:, 0]}, x, y, key=key,
                                               out_dir=str(tmp_path_factory.mktemp("r")), config={},
                                               progress=False)
    if key is not None:  # map_points: key=None means "no keys"
        calls["map_points"] = lambda: map_points(lambda a, key: a[:, 0], x, key=key)
    _all_raise(calls, r"^key")


def test_integer_empty_and_low_rank_x_are_rejected_everywhere():
    y = np.zeros(2, np.int32)
    _all_raise({**_model_calls(F, np.full((2, 6), 128, np.uint8), y),
                **_linear_calls(np.full((2, 6), 1, np.int64))}, r"^x.*float")
    _all_raise({**_model_calls(F, np.zeros((0, 6), np.float32), np.zeros(0, np.int32)),
                **_linear_calls(np.zeros((0, 6), np.float32))}, r"^x")
    f1 = binary_linear(np.ones(1, np.float32), 0.0)
    calls = _model_calls(f1, np.full((2, 1), 0.5, np.float32), y)
    for k in ("l2_sparsity", "cap_pgd"):  # a spherical cap needs d >= 2
        with pytest.raises(ValueError, match=r"^x.*dimension"):
            calls[k]()


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_ddn_and_fmn_on_other_float_dtypes_give_the_float32_answer(dtype):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, size=(5, 6)).astype(dtype)
    x32 = x.astype(np.float32)
    y = np.asarray(jnp.argmax(F(x32), -1))
    for attack in (lambda a: attacks.ddn(F, a, y, key=KEY, steps=3),
                   lambda a: attacks.fmn(F, a, y, norm="linf", key=KEY, steps=3)):
        r, r32 = attack(x), attack(x32)
        np.testing.assert_array_equal(np.asarray(r.distance), np.asarray(r32.distance))
        assert np.asarray(r.x_adv).dtype == np.float32


bad_ints = st.one_of(st.integers(-3, 0), st.just(1.5), st.just(True), st.just("3"), st.none(),
                     st.just(float("nan")))


@SMALL
@given(steps=bad_ints)
def test_bad_step_counts(steps):
    x, y = _x(), np.zeros(4, np.int32)
    u = np.ones(6, np.float32)
    _all_raise({
        "ddn": lambda: attacks.ddn(F, x, y, key=KEY, steps=steps),
        "fmn": lambda: attacks.fmn(F, x, y, norm="l1", key=KEY, steps=steps),
        "cap_pgd": lambda: attacks.cap_pgd(F, x, y, 0.3, u, 1.0, steps=steps, key=KEY),
        "vertex_pgd": lambda: attacks.vertex_pgd(F, x, y, 0.3, u, np.arange(6), 3, steps=steps, key=KEY),
        "l2_sparsity": lambda: rcurves.l2_sparsity(F, x, y, 0.3, key=KEY, n_directions=1, search_steps=1,
                                                   steps=steps),
    }, r"^steps")
    with pytest.raises(ValueError, match=r"^n_directions"):
        rcurves.linf_sparsity(F, x, y, 0.3, key=KEY, n_directions=steps, search_steps=1, steps=1)
    with pytest.raises(ValueError, match=r"^search_steps"):
        rcurves.l2_sparsity(F, x, y, 0.3, key=KEY, n_directions=1, search_steps=steps, steps=1)


@SMALL
@given(alpha=st.one_of(st.floats(max_value=-1e-6, allow_nan=False), st.floats(3.2, 1e6), st.just(float("nan")),
                       st.just(float("inf")), st.just("wide"), st.none()))
def test_cap_angle_outside_zero_to_pi(alpha):
    with pytest.raises(ValueError, match=r"^alpha"):
        attacks.cap_pgd(F, _x(), np.zeros(4, np.int32), 0.3, np.ones(6, np.float32), alpha, steps=1, key=KEY)


@SMALL
@given(u=st.sampled_from(["zero", "nan", "short", "long"]))
def test_bad_cap_directions(u):
    x, y = _x(), np.zeros(4, np.int32)
    arr = {"zero": np.zeros(6, np.float32), "nan": np.full(6, np.nan, np.float32),
           "short": np.ones(5, np.float32), "long": np.ones((4, 7), np.float32)}[u]
    with pytest.raises(ValueError, match=r"^u"):
        attacks.cap_pgd(F, x, y, 0.3, arr, 1.0, steps=1, key=KEY)
    with pytest.raises(ValueError, match=r"^u"):
        rcurves.linear_l2_sparsity(W, 0.0, x, 0.3, arr[None] if u != "long" else arr)


@SMALL
@given(sigma=st.one_of(st.lists(st.integers(-2, 7), min_size=6, max_size=6).filter(
    lambda s: sorted(s) != list(range(6))), st.lists(st.integers(0, 5), min_size=5, max_size=5, unique=True),
    st.just([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])),
       m=st.one_of(st.integers(-5, -1), st.integers(7, 20), st.just(2.0), st.just(np.zeros(3, np.int32))))
def test_bad_vertex_arguments(sigma, m):
    x, y = _x(), np.zeros(4, np.int32)
    u = np.ones(6, np.float32)
    good_sigma = np.arange(6)
    with pytest.raises(ValueError, match=r"^sigma"):
        attacks.vertex_pgd(F, x, y, 0.3, u, np.asarray(sigma), 2, steps=1, key=KEY)
    with pytest.raises(ValueError, match=r"^sigma"):
        rcurves.linear_linf_sparsity(W, 0.0, x, 0.3, u[None], np.asarray(sigma)[None])
    with pytest.raises(ValueError, match=r"^m"):
        attacks.vertex_pgd(F, x, y, 0.3, u, good_sigma, m, steps=1, key=KEY)
    for not_a_vertex in (np.full(6, 0.5, np.float32), np.zeros(6, np.float32)):
        with pytest.raises(ValueError, match=r"^u"):
            attacks.vertex_pgd(F, x, y, 0.3, not_a_vertex, good_sigma, 2, steps=1, key=KEY)
        with pytest.raises(ValueError, match=r"^u"):  # the exact answer assumes a vertex too
            rcurves.linear_linf_sparsity(W, 0.0, x, 0.3, not_a_vertex[None], good_sigma[None])


@SMALL
@given(init_eps=st.one_of(st.floats(max_value=0.0, allow_nan=False), st.just(float("nan")), st.just(float("inf"))),
       gamma=st.one_of(st.floats(max_value=0.0, allow_nan=False), st.floats(1.0, 1e9), st.just(float("nan"))),
       norm=st.one_of(st.just("l3"), st.none(), st.just(3), st.just("")))
def test_ddn_and_fmn_specific_arguments(init_eps, gamma, norm):
    x, y = _x(), np.zeros(4, np.int32)
    with pytest.raises(ValueError, match=r"^init_eps"):
        attacks.ddn(F, x, y, key=KEY, steps=1, init_eps=init_eps)
    with pytest.raises(ValueError, match=r"^gamma"):
        attacks.ddn(F, x, y, key=KEY, steps=1, gamma=gamma)
    with pytest.raises(ValueError, match=r"^gamma_init"):
        attacks.fmn(F, x, y, norm="l2", key=KEY, steps=1, gamma_init=gamma if gamma >= 1.0 else float("nan"))
    with pytest.raises(ValueError, match=r"^norm"):
        attacks.fmn(F, x, y, norm=norm, key=KEY, steps=1)


# -- exact answers: properties that tie them to linear_distance ---------------

finite = dict(allow_nan=False, allow_infinity=False)


@SMALL
@given(seed=st.integers(0, 2**31 - 1), eps=st.floats(0.0, 2.0, **finite))
def test_exact_linear_sparsities_agree_with_the_exact_distance(seed, eps):
    """Broken at eps (a finite sparsity) exactly when the exact distance is below eps; the
    direction straight to the boundary needs angle 0 / no free dimension. (Fixed shapes,
    random values: one compilation.)"""
    d, n, n_dir = 5, 4, 3
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    b = np.float32(rng.normal() * 0.3)
    s = x.astype(np.float64) @ w + b
    u2 = rng.normal(size=(n, n_dir, d)).astype(np.float32)
    u2[:, 0] = -np.sign(s)[:, None] * w                               # towards the boundary
    a2 = np.asarray(rcurves.linear_l2_sparsity(w, b, x, eps, u2))
    uinf = np.where(rng.random((n, n_dir, d)) < 0.5, -1.0, 1.0).astype(np.float32)
    uinf[:, 0] = np.where(np.sign(s)[:, None] * np.sign(w) > 0, -1.0, 1.0)  # the best vertex
    sigma = np.stack([np.stack([rng.permutation(d) for _ in range(n_dir)]) for _ in range(n)])
    ainf = np.asarray(rcurves.linear_linf_sparsity(w, b, x, eps, uinf, sigma))
    assert a2.shape == ainf.shape == (n, n_dir)
    for a, p in ((a2, 2), (ainf, np.inf)):
        dist = np.asarray(rcurves.linear_distance(w, b, x, p))
        inside, outside = dist < eps * (1 - 1e-4) - 1e-6, dist > eps * (1 + 1e-4) + 1e-6
        assert np.all(np.isfinite(a[inside])) and np.all(np.isnan(a[outside]))
        assert np.all(a[inside][:, 0] <= (1e-3 if p == 2 else 0))
    ok2 = a2[np.isfinite(a2)]
    assert np.all((ok2 >= 0) & (ok2 <= math.pi + 1e-6))
    okinf = ainf[np.isfinite(ainf)]
    assert np.all((okinf >= 0) & (okinf <= d) & (okinf == np.round(okinf)))


@settings(max_examples=10, deadline=None)
@given(n=st.integers(2, 400), k=st.integers(1, 50))
def test_expected_sparsity_theory(n, k):
    """eq. 8: one random adversarial direction is at angle pi/2 on average; more can only
    lower the expected sparsity. eq. 9 lies within the bounds of eq. 10."""
    one = rcurves.expected_l2_sparsity(n, 1)
    assert one == pytest.approx(math.pi / 2, rel=1e-6)
    e = rcurves.expected_l2_sparsity(n, k)
    assert 0.0 <= e <= one + 1e-9
    assert rcurves.expected_l2_sparsity(n, k + 1) <= e + 1e-9
    m = min(n, 12)
    kk = min(k, 2 ** m)
    lo, hi = rcurves.linf_sparsity_bounds(m, kk)
    v = rcurves.expected_linf_sparsity(m, kk)
    assert 0.0 <= v <= m and lo - 1e-9 <= v <= hi + 1e-9
    assert rcurves.expected_linf_sparsity(m, min(kk + 1, 2 ** m)) <= v + 1e-9


@SMALL
@given(v=st.one_of(st.integers(-3, 0), st.just(1.5), st.just(True), st.just("3"), st.none()))
def test_expected_sparsity_bad_arguments(v):
    for f in (rcurves.expected_l2_sparsity, rcurves.expected_linf_sparsity, rcurves.linf_sparsity_bounds):
        with pytest.raises(ValueError, match=r"^n"):
            f(v, 2)
        with pytest.raises(ValueError, match=r"^k"):
            f(5, v)
    with pytest.raises(ValueError, match=r"^n"):
        rcurves.expected_l2_sparsity(1, 2)                  # S^0 has no angles


@SMALL
@given(eps=st.lists(st.one_of(st.floats(max_value=-1e-6, **finite), st.just(float("nan")),
                              st.just(float("inf")), st.just("x"), st.none()), min_size=1, max_size=3))
def test_sparsity_curve_bad_radii(eps):
    with pytest.raises(ValueError, match=r"^eps_values"):
        rcurves.sparsity_curve(F, _x(), np.zeros(4, np.int32), eps, norm="l2", key=KEY, n_directions=1,
                               search_steps=1, steps=1)


# -- robustness_curve --------------------------------------------------------

dist_values = st.one_of(st.floats(0.0, 10.0, **finite), st.just(0.0), st.just(float("inf")))


@SMALL
@given(d=st.lists(dist_values, min_size=1, max_size=12), e=st.lists(st.floats(0.0, 10.0, **finite), max_size=5),
       dtype=st.sampled_from([np.float16, np.float32, np.float64]), scalar=st.booleans())
def test_robustness_curve_is_the_float32_empirical_cdf(d, e, dtype, scalar):
    """Any distances (0, inf, any float dtype) and thresholds: the fraction d_i <= eps,
    computed on the float32 values, with the shape of eps."""
    dist = np.asarray(d, dtype)
    eps = np.float32(e[0] if e else 0.5) if scalar else np.asarray(e or [0.5], np.float64)
    r = np.asarray(rcurves.robustness_curve(dist, eps))
    d32, e32 = dist.astype(np.float32), np.asarray(eps, np.float32)
    expect = (d32[:, None] <= np.atleast_1d(e32)[None, :]).mean(0)
    assert r.shape == np.shape(eps)
    np.testing.assert_allclose(np.atleast_1d(r), expect, rtol=1e-6, atol=0)
    assert np.all(np.diff(np.atleast_1d(r)[np.argsort(np.atleast_1d(e32), kind="stable")]) >= 0)


def test_robustness_curve_rejects_malformed_input():
    for bad, pat in ((np.array([[0.1, 0.2]]), r"^distances"), (np.array([1, 2]), r"^distances"),
                     (np.array([0.1, -0.5]), r"^distances"), (np.array([np.nan]), r"^distances"),
                     (None, r"^distances"), ("0.1", r"^distances")):
        with pytest.raises(ValueError, match=pat):
            rcurves.robustness_curve(bad, 0.1)
    for bad in (np.zeros(0), np.zeros((2, 2)), np.array([np.nan]), np.array([-1.0]), np.array([np.inf]), None,
                "eps"):
        with pytest.raises(ValueError, match=r"^eps"):
            rcurves.robustness_curve(np.array([0.1, 0.2]), bad)


# -- run_chunked and map_points ------------------------------------------------


@SMALL
@given(chunk_size=bad_ints, on_mismatch=st.sampled_from(["error", "ignore", None]),
       config=st.sampled_from([{}, {"a": {1, 2}}, {"f": object()}]))
def test_run_chunked_bad_arguments(chunk_size, on_mismatch, config, tmp_path_factory):
    x, y = _x(), np.zeros(4, np.int32)
    out = str(tmp_path_factory.mktemp("run"))
    fn = lambda a, b, k: {"a": np.asarray(a[:, 0])}
    with pytest.raises(ValueError, match=r"^chunk_size"):
        run_chunked(fn, x, y, key=KEY, out_dir=out, config={}, chunk_size=chunk_size, progress=False)
    if on_mismatch != "error":
        with pytest.raises(ValueError, match=r"^on_mismatch"):
            run_chunked(fn, x, y, key=KEY, out_dir=out, config={}, on_mismatch=on_mismatch, progress=False)
    if config:
        with pytest.raises(ValueError, match=r"^config"):
            run_chunked(fn, x, y, key=KEY, out_dir=out, config=config, progress=False)
    for bad_x, bad_y, pat in ((np.full((4, 6), np.nan, np.float32), y, r"^x"), (x[:0], y[:0], r"^x"),
                              (x, np.zeros(3, np.int32), r"^y"), (x, np.full(4, 0.5), r"^y"),
                              (x.astype(np.int32), y, r"^x")):
        with pytest.raises(ValueError, match=pat):
            run_chunked(fn, bad_x, bad_y, key=KEY, out_dir=out, config={}, progress=False)
    assert not os.path.exists(os.path.join(out, "result.npz"))


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(n=st.integers(1, 13), chunk_size=st.sampled_from([1, 4, 15]), d=st.integers(1, 3))
def test_run_chunked_any_chunking_gives_every_point_once_with_its_own_key(n, chunk_size, d, tmp_path_factory):
    x = np.random.default_rng(n * 31 + d).random((n, d)).astype(np.float32)
    y = np.arange(n) % 3
    out = str(tmp_path_factory.mktemp("run"))
    res = run_chunked(lambda a, b, k: {"x0": np.asarray(a[:, 0]), "y": np.asarray(b), "k": np.asarray(k)},
                      x, y, key=KEY, out_dir=out, config={"n": n}, chunk_size=chunk_size, progress=False)
    np.testing.assert_array_equal(res["x0"], x[:, 0])
    np.testing.assert_array_equal(res["y"], y)
    np.testing.assert_array_equal(res["k"], np.asarray(point_keys(KEY, np.arange(n))))
    idx = np.concatenate([np.load(os.path.join(out, f))["_index"]
                          for f in sorted(os.listdir(out)) if f.startswith("chunk_")])
    np.testing.assert_array_equal(idx, np.arange(n))
    assert json.load(open(os.path.join(out, "manifest.json")))["n"] == n


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(n=st.integers(1, 20), chunk_size=st.sampled_from([1, 3, 25]), d=st.integers(1, 3),
       splits=st.lists(st.integers(1, 7), max_size=4))
def test_map_points_any_chunking_and_source(n, chunk_size, d, splits):
    x = np.random.default_rng(n + 100 * d).random((n, d)).astype(np.float32)
    y = np.arange(n, dtype=np.int32)
    fn = lambda a, b, key: {"a": a[:, 0] * 2, "y": b, "k": key}
    expect_k = np.asarray(point_keys(KEY, np.arange(n)))
    out = map_points(fn, x, y, chunk_size=chunk_size, key=KEY)
    np.testing.assert_array_equal(out["a"], x[:, 0] * 2)
    np.testing.assert_array_equal(out["y"], y)
    np.testing.assert_array_equal(out["k"], expect_k)
    # the same points as an iterator of pieces of arbitrary sizes
    cuts = np.unique(np.clip(np.cumsum(splits), 0, n)).tolist()
    bounds_ = [0] + [c for c in cuts if 0 < c < n] + [n]
    pieces = iter([(x[a:b], y[a:b]) for a, b in zip(bounds_[:-1], bounds_[1:])])
    out2 = map_points(lambda a, b, key: {"a": a[:, 0] * 2, "y": b, "k": key}, pieces, chunk_size=chunk_size,
                      key=KEY)
    for k in out:
        np.testing.assert_array_equal(out2[k], out[k])


def test_map_points_rejects_outputs_that_are_not_per_point():
    x = np.random.default_rng(0).random((10, 4)).astype(np.float32)
    for fn in (lambda a: a.sum(0), lambda a: a.sum(), lambda a: {"ok": a[:, 0], "bad": a[:2]}):
        with pytest.raises(ValueError, match=r"^fn"):      # a reduction over the points, not per point
            map_points(fn, x, chunk_size=3)
    with pytest.raises(ValueError, match=r"^x"):
        map_points(lambda a: a, np.zeros((0, 3)), chunk_size=4)
    with pytest.raises(ValueError, match=r"^y"):
        map_points(lambda a, b: a, x, np.zeros(9), chunk_size=4)
