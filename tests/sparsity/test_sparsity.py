"""Adversarial sparsity (rcurves.sparsity): estimators vs exact linear answers, theory of App. E."""
import itertools
import math

import jax
import numpy as np
import pytest

from rcurves.exact.linear import linear_logits_fn
from rcurves.sparsity import (
    MEASURED,
    MISCLASSIFIED,
    ROBUST,
    expected_l2_sparsity,
    expected_linf_sparsity,
    fraction_measured,
    l2_directions,
    l2_sparsity,
    l2_sparsity_full,
    linear_l2_sparsity,
    linear_linf_sparsity,
    linf_directions,
    linf_sparsity_bounds,
    linf_sparsity_full,
    residual_sparsity,
    sparsity_curve,
    sparsity_summary,
)


def _linear_points(d, margins, seed, eps_reach=1.0):
    """Points whose score s = w.x equals margins * eps_reach (||w|| = 1)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    x = rng.normal(size=(len(margins), d))
    x += (np.asarray(margins) * eps_reach - x @ w)[:, None] * w[None, :]
    return w.astype(np.float32), x.astype(np.float32)


# d = 10: four breakable points, one misclassified, one robust (shared by the curve test).
D10 = 10
W10, X10 = _linear_points(D10, [0.6, -0.3, 0.15, -0.75, 0.4, 1.6], seed=0)
F10 = linear_logits_fn(W10, 0.0)
Y10 = (X10 @ W10 > 0).astype(np.int32)
Y10[4] = 1 - Y10[4]  # misclassified
L2_KW = dict(n_directions=5, search_steps=12, steps=10)


def test_l2_estimator_matches_exact_linear_sparsity_and_explains_unmeasured_points():
    key = jax.random.PRNGKey(0)
    res = l2_sparsity_full(F10, X10, Y10, 1.0, key=key, **L2_KW)
    np.testing.assert_array_equal(np.asarray(res.reason), [MEASURED] * 4 + [MISCLASSIFIED, ROBUST])
    np.testing.assert_array_equal(np.asarray(res.measured), [True] * 4 + [False] * 2)
    u = l2_directions(key, 6, 5, (D10,))
    exact = np.asarray(linear_l2_sparsity(W10, 0.0, X10, 1.0, u, Y10))
    got = np.asarray(res.per_direction)
    assert np.isnan(exact[4:]).all() and np.isnan(got[4:]).all() and np.isnan(res.per_point[4:]).all()
    assert np.asarray(res.found)[:4].all()
    assert np.max(np.abs(got[:4] - exact[:4])) < 0.01
    assert exact[:4].max() > 0.3  # a non-trivial answer
    pp = np.asarray(res.per_point)
    np.testing.assert_allclose(pp[:4], got[:4].mean(1), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(res.stderr)[:4], got[:4].std(1, ddof=1) / math.sqrt(5), rtol=1e-5)
    assert residual_sparsity(res) == pytest.approx(float(pp[:4].mean()), rel=1e-6)
    assert fraction_measured(res) == pytest.approx(4 / 6)
    summ = sparsity_summary(res)
    assert summ["adversarial_accuracy"] == pytest.approx(1 / 6)
    assert summ["clean_accuracy"] == pytest.approx(5 / 6)
    assert summ["residual_sparsity"] == pytest.approx(float(pp[:4].mean()), rel=1e-6)
    # The array API is the same computation.
    np.testing.assert_array_equal(np.asarray(l2_sparsity(F10, X10, Y10, 1.0, key=key, **L2_KW)), pp)


def test_linf_estimator_matches_exact_linear_sparsity():
    key = jax.random.PRNGKey(1)
    eps = 0.25
    res = linf_sparsity_full(F10, X10, Y10, eps, key=key, n_directions=6, search_steps=5, steps=8)
    u, sigma = linf_directions(key, 6, 6, (D10,))
    exact = np.asarray(linear_linf_sparsity(W10, 0.0, X10, eps, u, sigma, Y10))
    meas = np.asarray(res.measured)
    np.testing.assert_array_equal(meas, ~np.isnan(exact).all(1))
    got = np.asarray(res.per_direction)
    assert np.max(np.abs(got[meas] - exact[meas])) <= 1.0
    assert len(np.unique(exact[meas])) > 3


@pytest.mark.highest
@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_estimators_match_exact_sparsity_in_784_dimensions(norm):
    d = 784
    w, x = _linear_points(d, [0.1, -0.08], seed=2)
    y = (x @ w > 0).astype(np.int32)
    f = linear_logits_fn(w, 0.0)
    key = jax.random.PRNGKey(2)
    if norm == "l2":
        res = l2_sparsity_full(f, x, y, 1.0, key=key, n_directions=3, search_steps=11, steps=8)
        exact = np.asarray(linear_l2_sparsity(w, 0.0, x, 1.0, l2_directions(key, 2, 3, (d,)), y))
        tol = 0.01
    else:
        eps = 0.01  # eps ||w||_1 ~ 0.22 against |s| ~ 0.1: about half the coordinates must be freed
        res = linf_sparsity_full(f, x, y, eps, key=key, n_directions=3, search_steps=11, steps=6)
        u, sigma = linf_directions(key, 2, 3, (d,))
        exact = np.asarray(linear_linf_sparsity(w, 0.0, x, eps, u, sigma, y))
        tol = 1.0
        assert exact.min() > 50
    assert np.asarray(res.measured).all() and np.asarray(res.found).all()
    assert np.max(np.abs(np.asarray(res.per_direction) - exact)) <= tol


def test_sparsity_curve_matches_exact_values_at_every_radius():
    # 3 points x 2 radii, 1 + 3 of them measured: the shapes of the first test
    # (6 points, 4 searched), so nothing is compiled again.
    eps = np.array([0.2, 1.0])
    key = jax.random.PRNGKey(3)
    curve = sparsity_curve(F10, X10[:3], Y10[:3], eps, norm="l2", key=key, **L2_KW)
    u = l2_directions(key, 3, 5, (D10,))
    for e, r in enumerate(eps):
        exact = np.asarray(linear_l2_sparsity(W10, 0.0, X10[:3], r, u, Y10[:3]))
        robust = np.isnan(exact).all(1)
        assert curve.adversarial_accuracy[e] == pytest.approx(robust.mean())
        assert curve.fraction_measured[e] == pytest.approx(1 - robust.mean())
        assert curve.residual_sparsity[e] == pytest.approx(np.nanmean(exact[~robust]), abs=0.01)
    assert curve.adversarial_accuracy[0] > curve.adversarial_accuracy[1]
    assert curve.results.per_point.shape == (2, 3)


def test_bounded_sparsity_is_never_below_the_unbounded_exact_value():
    """A box only removes perturbations: every verified value stays above the exact one."""
    d = 10
    rng = np.random.default_rng(4)
    w = rng.normal(size=d).astype(np.float32)
    x = rng.uniform(0.0, 1.0, size=(4, d)).astype(np.float32)
    x[0, :5] = 0.0
    b = float(-(x @ w).mean())
    y = (x @ w + b > 0).astype(np.int32)
    f = linear_logits_fn(w, b)
    key = jax.random.PRNGKey(5)
    res = l2_sparsity_full(f, x, y, 1.0, key=key, n_directions=4, search_steps=8, steps=8,
                           bounds=(0.0, 1.0))
    exact = np.asarray(linear_l2_sparsity(w, b, x, 1.0, l2_directions(key, 4, 4, (d,)), y))
    meas = np.asarray(res.measured)
    assert meas.sum() >= 2
    got = np.asarray(res.per_direction)[meas]
    assert np.all(got >= exact[meas] - 1e-4)


def test_exact_l2_formula_against_dense_search_in_3d():
    rng = np.random.default_rng(6)
    w = rng.normal(size=3)
    x = rng.normal(size=(5, 3))
    b = 0.2
    eps = 1.5
    u = rng.normal(size=(5, 4, 3))
    i = np.arange(200_000) + 0.5
    phi, th = np.arccos(1 - 2 * i / i.size), np.pi * (1 + 5 ** 0.5) * i
    sph = np.stack([np.cos(th) * np.sin(phi), np.sin(th) * np.sin(phi), np.cos(phi)], 1)
    exact = np.asarray(linear_l2_sparsity(w.astype(np.float32), b, x.astype(np.float32), eps,
                                          u.astype(np.float32)))
    for p in range(5):
        s = x[p] @ w + b
        adv = (s + eps * sph @ w <= 0) if s > 0 else (s + eps * sph @ w > 0)
        for k in range(4):
            if not adv.any():
                assert np.isnan(exact[p, k])
                continue
            uh = u[p, k] / np.linalg.norm(u[p, k])
            brute = np.arccos(min(1.0, np.max(sph[adv] @ uh)))  # AS = min angle to Adv
            assert exact[p, k] == pytest.approx(brute, abs=0.01)
    assert np.isfinite(exact).sum() >= 8


def test_exact_linf_formula_against_enumeration():
    rng = np.random.default_rng(7)
    d, eps = 6, 0.2
    w = rng.normal(size=d)
    x = rng.normal(size=(6, d)) * 0.5
    u = rng.choice([-1.0, 1.0], size=(3, d))
    sigma = np.stack([rng.permutation(d) for _ in range(3)])
    exact = np.asarray(linear_linf_sparsity(w.astype(np.float32), 0.0, x.astype(np.float32), eps,
                                            u.astype(np.float32), sigma))
    for p in range(6):
        s0 = x[p] @ w
        for k in range(3):
            brute = np.nan
            for m in range(d + 1):
                free = sigma[k][:m]
                fixed = sigma[k][m:]
                base = s0 + eps * w[fixed] @ u[k][fixed]
                hit = False
                for signs in itertools.product([-1.0, 1.0], repeat=m):  # linear: a vertex is optimal
                    sm = base + eps * w[free] @ np.asarray(signs)
                    hit |= (sm <= 0) if s0 > 0 else (sm > 0)
                if hit:
                    brute = m
                    break
            if np.isnan(brute):
                assert np.isnan(exact[p, k])
            else:
                assert exact[p, k] == brute
    assert np.isfinite(exact).any() and len(np.unique(exact[np.isfinite(exact)])) > 2


@pytest.mark.parametrize("n,k", [(5, 1), (5, 3), (7, 10)])
def test_eq9_equals_monte_carlo_of_the_definition(n, k):
    rng = np.random.default_rng(n * 100 + k)
    trials = 40_000
    # WLOG u = +1 and sigma = identity (the vertices are uniform); X_j = 1 + last index off u.
    v = rng.integers(0, 2, size=(trials, k, n)).astype(bool)  # True = differs from u
    last = np.where(v.any(-1), n - np.argmax(v[..., ::-1], axis=-1), 0)
    mc = last.min(axis=1)
    se = mc.std() / math.sqrt(trials)
    assert abs(mc.mean() - expected_linf_sparsity(n, k)) < 4 * se + 1e-3


@pytest.mark.parametrize("n,k", [(3, 1), (3, 2), (4, 5)])
def test_eq8_equals_monte_carlo_of_the_definition(n, k):
    rng = np.random.default_rng(n * 10 + k)
    trials = 40_000
    u = rng.normal(size=(trials, n))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    dj = rng.normal(size=(trials, k, n))
    dj /= np.linalg.norm(dj, axis=2, keepdims=True)
    mc = np.arccos(np.clip(np.einsum("tkn,tn->tk", dj, u), -1, 1)).min(axis=1)
    se = mc.std() / math.sqrt(trials)
    assert abs(mc.mean() - expected_l2_sparsity(n, k)) < 4 * se


def test_eq8_closed_form_on_the_circle_and_the_printed_erratum():
    for k in [1, 2, 3, 9]:
        assert expected_l2_sparsity(2, k) == pytest.approx(math.pi / (k + 1), rel=1e-7)
    # n = 3: t = 1 - cos(alpha); printed pi - 2, corrected 3 pi / 8 (= Monte Carlo above).
    assert expected_l2_sparsity(3, 2) == pytest.approx(3 * math.pi / 8, rel=1e-7)
    assert expected_l2_sparsity(3, 2, as_printed=True) == pytest.approx(math.pi - 2, rel=1e-7)
    assert expected_l2_sparsity(3, 1, as_printed=True) == pytest.approx(math.pi / 2)
    # More adversarial perturbations, smaller sparsity; higher dimension, larger.
    assert expected_l2_sparsity(50, 10) < expected_l2_sparsity(50, 2) < math.pi / 2
    assert expected_l2_sparsity(200, 10) > expected_l2_sparsity(50, 10)


def test_eq10_bounds_hold():
    for n in range(1, 61):
        for k in sorted({1, 2, 3, 5, 2 ** (n // 2), 2 ** n - 1, 2 ** n}):
            if k > 2 ** n:
                continue
            e = expected_linf_sparsity(n, k)
            lo, hi = linf_sparsity_bounds(n, k)
            assert lo <= e <= hi, (n, k, lo, e, hi)
    with pytest.raises(ValueError, match="k"):
        linf_sparsity_bounds(2, 5)
    assert expected_linf_sparsity(10, 1) == pytest.approx(sum(1 - 2.0 ** -m for m in range(11)))


def test_bad_input_raises_before_compiling():
    key = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match="n_directions"):
        l2_sparsity(F10, X10, Y10, 1.0, key=key, n_directions=0, search_steps=2, steps=2)
    with pytest.raises(ValueError, match="search_steps"):
        linf_sparsity_full(F10, X10, Y10, 0.1, key=key, n_directions=2, search_steps=0, steps=2)
    with pytest.raises(ValueError, match="eps"):
        l2_sparsity(F10, X10, Y10, -1.0, key=key, n_directions=2, search_steps=2, steps=2)
    with pytest.raises(ValueError, match="norm"):
        sparsity_curve(F10, X10, Y10, [0.1], norm="l1", key=key, **L2_KW)
    with pytest.raises(ValueError, match="u"):
        linear_l2_sparsity(W10, 0.0, X10, 1.0, np.ones((3, 4), np.float32))
    with pytest.raises(ValueError, match="k"):
        expected_linf_sparsity(5, 0)
