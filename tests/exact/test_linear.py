"""Exact linear theory (paper 000 App. B, paper 001 Sec. 4) against independent solvers."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linprog, minimize

from rcurves.curves import robustness_curve
from rcurves.exact.linear import (
    dual_exponent,
    linear_curve_scale,
    linear_distance,
    linear_logits_fn,
    linear_perturbation,
    lp_norm,
    multiclass_logits_fn,
)

P_ALL = [1, 1.5, 2, 3, np.inf]


def _np_norm(v, p):
    return float(np.linalg.norm(np.asarray(v, dtype=np.float64), ord=float(p)))


def _random_problem(seed, n=6, d=5):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d).astype(np.float32)
    b = np.float32(rng.normal())
    x = rng.normal(size=(n, d)).astype(np.float32)
    return w, b, x


# --- independent reference solvers: min ||delta||_p s.t. a.delta + c (>=|=) 0 ---


def _lp_min_norm(a, c, p, inequality=False):
    """min ||delta||_p s.t. a.delta + c = 0 (or >= 0), p in {1, inf}, as an LP."""
    a = np.asarray(a, dtype=np.float64)
    d = a.shape[0]
    if p == 1:  # delta = u - v, u, v >= 0; min sum(u + v)
        cost = np.ones(2 * d)
        row = np.concatenate([a, -a])[None, :]
        bounds = [(0, None)] * (2 * d)
    else:  # variables (delta, t); min t, -t <= delta_i <= t
        cost = np.zeros(d + 1)
        cost[-1] = 1.0
        row = np.concatenate([a, [0.0]])[None, :]
        eye = np.eye(d)
        a_ub_box = np.block([[eye, -np.ones((d, 1))], [-eye, -np.ones((d, 1))]])
        bounds = [(None, None)] * d + [(0, None)]
    kw = {}
    if p == 1:
        if inequality:  # a.delta + c >= 0  <=>  -a.delta <= c
            kw = dict(A_ub=-row, b_ub=[c])
        else:
            kw = dict(A_eq=row, b_eq=[-c])
    else:
        if inequality:
            kw = dict(A_ub=np.vstack([a_ub_box, -row]), b_ub=np.concatenate([np.zeros(2 * d), [c]]))
        else:
            kw = dict(A_ub=a_ub_box, b_ub=np.zeros(2 * d), A_eq=row, b_eq=[-c])
    res = linprog(cost, bounds=bounds, method="highs", **kw)
    assert res.status == 0
    return res.fun


def _smooth_min_norm(a, c, p, inequality=False):
    """min ||delta||_p s.t. a.delta + c = 0 (or >= 0), p > 1, numerically.

    The inequality case is 0 when c >= 0 and otherwise the equality case (the
    constraint is active). The equality case is solved by SLSQP with the
    equality constraint, then re-solved unconstrained over the affine set
    delta = delta_0 + N u (N a null-space basis of a) with BFGS; both must agree.
    """
    a = np.asarray(a, dtype=np.float64)
    if inequality and c >= 0:
        return 0.0
    x0 = -c * a / (a @ a)  # the l_2 projection: a feasible start
    fun = lambda z: np.sum(np.abs(z) ** p)  # noqa: E731
    jac = lambda z: p * np.sign(z) * np.abs(z) ** (p - 1)  # noqa: E731
    cons = {"type": "eq", "fun": lambda z: a @ z + c, "jac": lambda z: a}
    res = minimize(fun, x0, jac=jac, constraints=[cons], method="SLSQP",
                   options=dict(ftol=1e-12, maxiter=500))
    assert abs(a @ res.x + c) < 1e-8 * (1 + abs(c))
    null = np.linalg.svd(a[None, :])[2][1:].T  # (d, d-1), orthonormal, a.N = 0
    res2 = minimize(lambda u: fun(x0 + null @ u), np.zeros(null.shape[1]),
                    jac=lambda u: null.T @ jac(x0 + null @ u), method="BFGS", options=dict(gtol=1e-10))
    v1, v2 = fun(res.x) ** (1.0 / p), fun(x0 + null @ res2.x) ** (1.0 / p)
    assert abs(v1 - v2) <= 1e-5 * v2, (v1, v2)
    return min(v1, v2)


def _reference_min_norm(a, c, p, inequality=False):
    if p in (1, np.inf):
        return _lp_min_norm(a, c, p, inequality)
    if p == 2 and not inequality:
        return abs(c) / np.linalg.norm(a)
    return _smooth_min_norm(a, c, p, inequality)


# --- Lemma 1 ---------------------------------------------------------------


@pytest.mark.accelerator("bf16")
@pytest.mark.parametrize("p", [1, 2, 3, np.inf])
def test_lemma1_distance_matches_independent_solver(p):
    w, b, x = _random_problem(seed=int(1 if p == np.inf else p))
    got = np.asarray(linear_distance(w, b, x, p))
    w64, x64 = w.astype(np.float64), x.astype(np.float64)
    for i in range(x.shape[0]):
        ref = _reference_min_norm(w64, float(w64 @ x64[i] + b), p)
        np.testing.assert_allclose(got[i], ref, rtol=2e-5, atol=1e-6)


def test_lemma1_l2_scipy_numerical_solve_agrees_with_closed_form():
    w, b, x = _random_problem(seed=7)
    got = np.asarray(linear_distance(w, b, x, 2))
    ref = [_smooth_min_norm(w.astype(np.float64), float(w.astype(np.float64) @ xi + b), 2.0)
           for xi in x.astype(np.float64)]
    np.testing.assert_allclose(got, ref, rtol=1e-4)


@pytest.mark.parametrize("p", P_ALL + [1.01, 20.0, "l1", "l2", "linf"])
def test_perturbation_is_on_boundary_with_norm_equal_to_distance(p):
    rng = np.random.default_rng(3)
    d = 40
    w = rng.normal(size=d).astype(np.float32)
    b = np.float32(0.3)
    x = (3 * rng.normal(size=(16, d))).astype(np.float32)
    delta = np.asarray(linear_perturbation(w, b, x, p), dtype=np.float64)
    dist = np.asarray(linear_distance(w, b, x, p), dtype=np.float64)
    pf = {"l1": 1.0, "l2": 2.0, "linf": np.inf}.get(p, p)
    w64 = w.astype(np.float64)
    after = (x.astype(np.float64) + delta) @ w64 + b
    scale = np.abs(x.astype(np.float64)) @ np.abs(w64) + abs(b) + np.abs(delta) @ np.abs(w64)
    assert np.all(np.abs(after) <= 2e-6 * scale)  # on the hyperplane, to float32 precision
    norms = np.array([_np_norm(r, pf) for r in delta])
    np.testing.assert_allclose(norms, dist, rtol=2e-5)
    before = x.astype(np.float64) @ w64 + b
    assert np.all(np.abs(before) > 1e-3)  # the test is not vacuous: points are off the boundary


def test_perturbation_shapes_of_eq3():
    w = np.array([0.5, -2.0, 1.0, 2.0], np.float32)  # |w| max at index 1 (first of the tie)
    x = np.array([[1.0, 1.0, 1.0, 1.0]], np.float32)  # s = 1.5
    d1 = np.asarray(linear_perturbation(w, 0.0, x, 1))[0]
    assert np.count_nonzero(d1) == 1 and d1[1] != 0  # one coordinate, argmax |w_i|
    np.testing.assert_allclose(d1[1], -1.5 / 2.0 * -1.0)
    dinf = np.asarray(linear_perturbation(w, 0.0, x, np.inf))[0]
    np.testing.assert_allclose(dinf, -1.5 / 5.5 * np.sign(w), rtol=1e-6)  # sign vector
    # p = 3: delta_i proportional to sgn(w_i)|w_i|^(1/2)
    d3 = np.asarray(linear_perturbation(w, 0.0, x, 3))[0]
    np.testing.assert_allclose(d3 / d3[3], np.sign(w) * np.sqrt(np.abs(w)) / np.sqrt(2.0), rtol=1e-5)


def test_binary_labels_zero_for_misclassified_and_plain_distance_otherwise():
    w = np.array([1.0, 0.0], np.float32)
    x = np.array([[2.0, 5.0], [-3.0, 1.0], [0.5, 0.0], [-0.25, 0.0]], np.float32)
    y = np.array([1, 1, 0, 0])
    got = np.asarray(linear_distance(w, 0.0, x, 2, y))
    np.testing.assert_allclose(got, [2.0, 0.0, 0.0, 0.25])
    np.testing.assert_allclose(linear_distance(w, 0.0, x, 2), [2.0, 3.0, 0.5, 0.25])
    delta = np.asarray(linear_perturbation(w, 0.0, x, 2, y))
    np.testing.assert_array_equal(delta, [[-2.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.25, 0.0]])


def test_zero_normal_has_no_boundary():
    x = np.ones((3, 2), np.float32)
    assert np.all(np.isinf(np.asarray(linear_distance(np.zeros(2, np.float32), 1.0, x, 2))))
    assert np.all(np.asarray(linear_perturbation(np.zeros(2, np.float32), 1.0, x, 2)) == 0)


def test_images_are_flattened_and_delta_keeps_shape():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 2, 3)).astype(np.float32)
    w = rng.normal(size=6).astype(np.float32)
    np.testing.assert_allclose(linear_distance(w, 0.1, x, 2), linear_distance(w, 0.1, x.reshape(5, 6), 2))
    assert linear_perturbation(w, 0.1, x, 2).shape == (5, 2, 3)


def test_lp_norm_and_dual_exponent():
    v = np.array([[3.0, -4.0, 0.0], [1e-30, 2e-30, 0.0]], np.float32)
    for p in [1.0, 1.5, 2.0, 3.0, 7.0, math.inf]:
        np.testing.assert_allclose(lp_norm(jnp.asarray(v[0]), p), _np_norm(v[0], p), rtol=1e-6)
    np.testing.assert_allclose(lp_norm(jnp.asarray(v), 50.0), [4.0 * (1 + 0.75 ** 50) ** 0.02, 2e-30], rtol=1e-5)
    assert dual_exponent(1) == math.inf and dual_exponent("linf") == 1.0 and dual_exponent(3) == 1.5


# --- multi-class --------------------------------------------------------------


@pytest.mark.parametrize("p", [1, 2, 3, np.inf])
def test_multiclass_distance_equals_brute_force_over_target_classes(p):
    rng = np.random.default_rng(11)
    k, d, n = 4, 5, 8
    W = rng.normal(size=(k, d)).astype(np.float32)
    b = rng.normal(size=k).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    pred = np.argmax(x @ W.T + b, axis=1)
    y = pred.copy()
    y[:2] = (pred[:2] + 1) % k  # two misclassified points
    got = np.asarray(linear_distance(W, b, x, p, y))
    W64, b64, x64 = W.astype(np.float64), b.astype(np.float64), x.astype(np.float64)
    for i in range(n):
        if pred[i] != y[i]:
            assert got[i] == 0.0
            continue
        # min over j of: min ||delta|| s.t. (w_j - w_y).(x + delta) + b_j - b_y >= 0
        ref = min(
            _reference_min_norm(W64[j] - W64[y[i]], float((W64[j] - W64[y[i]]) @ x64[i] + b64[j] - b64[y[i]]),
                                p, inequality=True)
            for j in range(k) if j != y[i]
        )
        np.testing.assert_allclose(got[i], ref, rtol=1e-4, atol=1e-6)


@pytest.mark.highest
@pytest.mark.parametrize("p", [1, 2, np.inf])
def test_multiclass_perturbation_reaches_nearest_other_class(p):
    rng = np.random.default_rng(5)
    k, d, n = 5, 6, 32
    W = rng.normal(size=(k, d)).astype(np.float32)
    b = rng.normal(size=k).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = np.argmax(x @ W.T + b, axis=1)
    delta = np.asarray(linear_perturbation(W, b, x, p, y), np.float64)
    dist = np.asarray(linear_distance(W, b, x, p, y), np.float64)
    np.testing.assert_allclose([_np_norm(r, p) for r in delta], dist, rtol=2e-5)
    f = multiclass_logits_fn(W, b)
    just_past = np.argmax(np.asarray(f(jnp.asarray(x + 1.001 * delta, jnp.float32))), axis=1)
    just_short = np.argmax(np.asarray(f(jnp.asarray(x + 0.999 * delta, jnp.float32))), axis=1)
    assert np.all(just_past != y)  # the boundary is crossed right after delta
    assert np.all(just_short == y)  # and not before (delta is the closest crossing)


def test_multiclass_with_two_classes_equals_binary():
    rng = np.random.default_rng(2)
    W = rng.normal(size=(2, 4)).astype(np.float32)
    b = rng.normal(size=2).astype(np.float32)
    x = rng.normal(size=(20, 4)).astype(np.float32)
    y = rng.integers(0, 2, size=20)
    for p in [1, 2, np.inf]:
        multi = linear_distance(W, b, x, p, y)
        binary = linear_distance(W[1] - W[0], b[1] - b[0], x, p, y)
        np.testing.assert_allclose(multi, binary, rtol=1e-5, atol=1e-6)


def test_multiclass_identical_rows_are_unreachable():
    W = np.array([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0]], np.float32)
    b = np.array([0.0, -1.0, 0.0], np.float32)  # class 1 never beats class 0
    x = np.array([[2.0, 0.0]], np.float32)
    np.testing.assert_allclose(linear_distance(W, b, x, 2, np.array([0])), [2.0])  # via class 2


# --- Theorem 2 and the norm inequalities -------------------------------------


@pytest.mark.parametrize("p1,p2", [(1, 2), (2, np.inf), (1, np.inf), (3, 1), ("linf", 3), (1.5, 2)])
def test_theorem2_curves_identical_up_to_scale(p1, p2):
    rng = np.random.default_rng(0)
    d, n = 30, 300
    w = rng.normal(size=d).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (rng.random(n) < 0.5).astype(np.int64)  # ~half misclassified: R(0) > 0
    c = float(linear_curve_scale(w, p1, p2))
    d1 = np.sort(np.asarray(linear_distance(w, 0.2, x, p1, y)))
    eps = (d1[1:] + d1[:-1]) / 2  # midpoints between knots: away from ties
    eps = np.concatenate([[0.0], eps[eps > 0]])
    r1 = robustness_curve(linear_distance(w, 0.2, x, p1, y), eps)
    r2 = robustness_curve(linear_distance(w, 0.2, x, p2, y), c * eps)
    np.testing.assert_array_equal(np.asarray(r1), np.asarray(r2))
    assert float(r1[0]) > 0.3 and len(np.unique(np.asarray(r1))) > 50  # not trivial
    # pointwise form: d_p2 = c * d_p1
    np.testing.assert_allclose(linear_distance(w, 0.2, x, p2), c * np.asarray(linear_distance(w, 0.2, x, p1)),
                               rtol=1e-5)


def test_curve_scale_values():
    w = np.array([3.0, -4.0], np.float32)
    np.testing.assert_allclose(linear_curve_scale(w, 1, 2), 4.0 / 5.0)  # ||w||_inf / ||w||_2
    np.testing.assert_allclose(linear_curve_scale(w, np.inf, 1), 7.0 / 4.0)  # ||w||_1 / ||w||_inf
    np.testing.assert_allclose(linear_curve_scale(w, 3, 3), 1.0)


def _check_norm_chain(dist, d, eps):
    """Eq. 17-20 of paper 001: R_inf(e) >= R_2(e) >= R_1(e) >= R_2(e/sqrt d) >= R_inf(e/d)."""
    r = lambda p, e: np.asarray(robustness_curve(dist[p], e))  # noqa: E731
    slack = 1e-6
    chain = [r(np.inf, eps), r(2, eps), r(1, eps), r(2, eps / np.sqrt(d)), r(np.inf, eps / d)]
    for hi, lo in zip(chain[:-1], chain[1:]):
        assert np.all(hi >= lo - slack)
    # and the (weaker) form printed in the paper's eq. 20
    assert np.all(r(2, eps / np.sqrt(d)) >= r(1, eps / d) - slack)
    return chain


def test_norm_inequality_chain_linear():
    rng = np.random.default_rng(4)
    for d in (2, 10, 50):
        w = rng.normal(size=d).astype(np.float32)
        x = rng.normal(size=(200, d)).astype(np.float32)
        y = (x @ w > 0).astype(np.int64)
        dist = {p: linear_distance(w, 0.0, x, p, y) for p in (1, 2, np.inf)}
        eps = np.linspace(0.0, 3.0, 301)
        chain = _check_norm_chain(dist, d, eps)
        assert np.any(chain[0] > chain[2])  # strictly separated somewhere for d >= 2


def _parabola_distance_brute(x, p):
    """min_t ||x - (t, t^2)||_p by a dense grid on t, refined by golden-section."""
    t = np.linspace(-4.0, 4.0, 16001)
    dx = x[:, None, 0] - t[None, :]
    dy = x[:, None, 1] - t[None, :] ** 2
    def norm(a, b):
        if p == np.inf:
            return np.maximum(np.abs(a), np.abs(b))
        return (np.abs(a) ** p + np.abs(b) ** p) ** (1.0 / p)
    vals = norm(dx, dy)
    i = np.argmin(vals, axis=1)
    lo, hi = t[np.maximum(i - 1, 0)], t[np.minimum(i + 1, t.size - 1)]
    g = (np.sqrt(5) - 1) / 2
    f = lambda s: norm(x[:, 0] - s, x[:, 1] - s ** 2)  # noqa: E731
    for _ in range(60):  # golden section, vectorised over points
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        left = f(a) < f(b)
        hi = np.where(left, b, hi)
        lo = np.where(left, lo, a)
    return np.minimum(f((lo + hi) / 2), vals.min(axis=1))


def test_norm_inequality_chain_parabola_brute_force():
    rng = np.random.default_rng(9)
    x = rng.uniform([-1.5, -1.0], [1.5, 2.5], size=(200, 2))
    dist = {p: _parabola_distance_brute(x, p) for p in (1, 2, np.inf)}
    # per point: d_inf <= d_2 <= d_1 <= sqrt(2) d_2 <= 2 d_inf (distances, up to the solver)
    tol = 1e-6
    assert np.all(dist[np.inf] <= dist[2] + tol) and np.all(dist[2] <= dist[1] + tol)
    assert np.all(dist[1] <= np.sqrt(2) * dist[2] + tol) and np.all(np.sqrt(2) * dist[2] <= 2 * dist[np.inf] + tol)
    eps = np.linspace(0.0, 1.5, 301)
    _check_norm_chain(dist, 2, eps)
    # the shapes differ (not linear): no single scale maps the l_1 curve onto the l_inf curve
    ratio = dist[1] / dist[np.inf]
    assert ratio.max() - ratio.min() > 0.3


# --- logits functions and jit ------------------------------------------------


@pytest.mark.highest
def test_linear_logits_fn_matches_sign_convention():
    w = np.array([1.0, -1.0], np.float32)
    x = np.array([[2.0, 1.0], [0.0, 3.0], [1.0, 1.0]], np.float32)
    logits = np.asarray(linear_logits_fn(w, 0.0)(jnp.asarray(x)))
    np.testing.assert_allclose(logits, [[-0.5, 0.5], [1.5, -1.5], [0.0, 0.0]])
    assert np.argmax(logits, axis=1).tolist() == [1, 0, 0]  # s = 0 is class 0


def test_jit_friendly_and_no_retrace():
    w, b, x = _random_problem(seed=1, n=4, d=3)
    y = np.array([0, 1, 0, 1])
    traced = jax.jit(lambda w_, x_: linear_distance(w_, b, x_, 2, jnp.asarray(y)))(w, x)
    np.testing.assert_allclose(traced, linear_distance(w, b, x, 2, y), rtol=1e-6)
    from rcurves.exact import linear as mod
    linear_distance(w, b, x, 3)
    before = mod._binary_distance._cache_size()
    for p in (1, 2, 3, np.inf, "l1"):
        linear_distance(w, b + 1, x * 2, p)
    assert mod._binary_distance._cache_size() == before  # same shapes, any p: no recompilation


# --- bad input ---------------------------------------------------------------


@pytest.mark.parametrize("call,arg", [
    (lambda: linear_distance(np.ones(3, np.float32), 0.0, np.ones((2, 4), np.float32), 2), "x"),
    (lambda: linear_distance(np.ones(3, np.float32), 0.0, np.full((2, 3), np.nan, np.float32), 2), "x"),
    (lambda: linear_distance(np.ones(3, np.float32), 0.0, np.ones((2, 3), np.float32), 0.5), "p"),
    (lambda: linear_distance(np.ones(3, np.float32), 0.0, np.ones((0, 3), np.float32), 2), "x"),
    (lambda: linear_distance(np.ones(3, np.float32), np.zeros(2), np.ones((2, 3), np.float32), 2), "b"),
    (lambda: linear_distance(np.ones((3, 2), np.float32), np.zeros(3), np.ones((2, 2), np.float32), 2), "y"),
    (lambda: linear_distance(np.ones((3, 2), np.float32), np.zeros(3), np.ones((2, 2), np.float32), 2,
                             np.array([0, 3])), "y"),
    (lambda: linear_distance(np.ones(2, np.float32), 0.0, np.ones((2, 2), np.float32), 2, np.array([0, 2])), "y"),
    (lambda: linear_distance(np.ones((2, 2, 2), np.float32), 0.0, np.ones((2, 2), np.float32), 2), "w"),
    (lambda: linear_perturbation(np.ones(3, np.float32), 0.0, np.ones((2, 3), np.float32), -1), "p"),
    (lambda: linear_curve_scale(np.zeros(3, np.float32), 1, 2), "w"),
    (lambda: linear_curve_scale(np.ones(3, np.float32), 1, "l7"), "p2"),
])
def test_bad_input_raises_naming_argument(call, arg):
    with pytest.raises(ValueError, match=rf"^{arg}:"):
        call()
