"""Target ranking by linearised box distance (attacks.ranking): Lemma 1 and LPs."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linprog, minimize

import attacks
from attacks.ranking import linear_box_distance, linear_distances, nearest_targets
from tests._models import exact_multiclass, multiclass_linear

KEY = jax.random.PRNGKey(0)


def _case(seed, d=6):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=d)
    x = rng.uniform(size=d)
    x[:2] = [0.0, 1.0]                       # two coordinates on faces of the box
    return g, x, rng


def _lp_linf(g, gap, x):
    # variables (delta, e): minimise e s.t. g.delta >= gap, |delta_i| <= e, box
    d = len(g)
    c = np.r_[np.zeros(d), 1.0]
    A = [np.r_[-g, 0.0]]
    b = [-gap]
    for i in range(d):
        for s in (1.0, -1.0):
            row = np.zeros(d + 1)
            row[i], row[-1] = s, -1.0
            A.append(row)
            b.append(0.0)
    bounds = [(-xi, 1 - xi) for xi in x] + [(0, None)]
    r = linprog(c, A_ub=np.array(A), b_ub=np.array(b), bounds=bounds, method="highs")
    return r.fun if r.status == 0 else np.inf


def _lp_l1(g, gap, x):
    # delta = p - m, p, m >= 0: minimise sum(p + m) s.t. g.(p - m) >= gap, box
    d = len(g)
    c = np.ones(2 * d)
    A = [np.r_[-g, g]]
    bounds = [(0, 1 - xi) for xi in x] + [(0, xi) for xi in x]
    r = linprog(c, A_ub=np.array(A), b_ub=np.array([-gap]), bounds=bounds, method="highs")
    return r.fun if r.status == 0 else np.inf


def _qp_l2(g, gap, x):
    cons = [{"type": "ineq", "fun": lambda dl: g @ dl - gap, "jac": lambda dl: g}]
    bounds = [(-xi, 1 - xi) for xi in x]
    r = minimize(lambda dl: dl @ dl, np.clip(g, -0.1, 0.1), jac=lambda dl: 2 * dl, bounds=bounds,
                 constraints=cons, method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
    assert r.success
    return float(np.sqrt(r.fun))


@pytest.mark.parametrize("norm, solver", [("linf", _lp_linf), ("l2", _qp_l2), ("l1", _lp_l1)])
def test_box_distance_matches_a_solver(norm, solver):
    """Inside the box [0, 1]^6 the separable solution equals the LP / QP
    optimum; a gap beyond the box's reach is inf, a closed gap 0."""
    for seed in range(8):
        g, x, _ = _case(seed)
        reach = float(np.sum(np.abs(g) * np.where(g > 0, 1 - x, x)))
        for frac in (0.05, 0.4, 0.9):
            gap = frac * reach
            got = float(linear_box_distance(jnp.asarray(g, jnp.float32), jnp.float32(gap),
                                            jnp.asarray(x, jnp.float32), norm, (0.0, 1.0)))
            assert got == pytest.approx(solver(g, gap, x), rel=2e-4, abs=1e-6), (seed, frac)
        far = linear_box_distance(jnp.asarray(g, jnp.float32), jnp.float32(1.01 * reach),
                                  jnp.asarray(x, jnp.float32), norm, (0.0, 1.0))
        assert np.isinf(float(far))
        assert float(linear_box_distance(jnp.asarray(g, jnp.float32), jnp.float32(-1.0),
                                         jnp.asarray(x, jnp.float32), norm, (0.0, 1.0))) == 0.0


@pytest.mark.highest
@pytest.mark.parametrize("norm", ["linf", "l2", "l1"])
def test_unbounded_linear_model_is_lemma1(norm):
    """Without a box, the linearised distances of a linear model are exact:
    their minimum over classes is the minimal distance (000 Lemma 1)."""
    rng = np.random.default_rng(3)
    k, d, n = 5, 12, 16
    W = rng.normal(size=(k, d)).astype(np.float32)
    b = rng.normal(size=k).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    f = multiclass_linear(W, b)
    y = np.asarray(jnp.argmax(f(x), -1)).astype(np.int32)
    fn1 = lambda v: f(v[None])[0]  # noqa: E731
    dist = jax.vmap(lambda xi, yi: linear_distances(fn1, xi, yi, norm, None)[0])(jnp.asarray(x), jnp.asarray(y))
    dist = np.asarray(dist)
    assert np.all(np.isinf(dist[np.arange(n), y]))
    np.testing.assert_allclose(dist.min(axis=1), exact_multiclass(W, b, x, y, norm), rtol=1e-5)
    # per class: (z_y - z_t) / ||w_t - w_y||_*
    q = {"linf": 1, "l2": 2, "l1": np.inf}[norm]
    z = x @ W.T + b
    for i in range(3):
        for t in range(k):
            if t != y[i]:
                want = (z[i, y[i]] - z[i, t]) / np.linalg.norm(W[t] - W[y[i]], ord=q)
                assert dist[i, t] == pytest.approx(want, rel=1e-5)


def test_nearest_targets_order_and_mix():
    """By distance (ties and unreachable classes by logit); 'mix' alternates
    the nearest and the most likely class not yet taken; lanes cycle."""
    logits = jnp.asarray([5.0, 4.0, 3.0, 2.0, 1.0])      # label 0; by logit 1, 2, 3, 4
    dist = jnp.asarray([jnp.inf, 0.9, jnp.inf, 0.1, 0.5])  # by distance 3, 4, 1, then 2 (unreachable)
    assert nearest_targets(dist, logits, 0, 4).tolist() == [3, 4, 1, 2]
    assert nearest_targets(dist, logits, 0, 4, mix=True).tolist() == [3, 1, 4, 2]
    assert nearest_targets(dist, logits, 0, 6).tolist() == [3, 4, 1, 2, 3, 4]
    tie = jnp.asarray([jnp.inf, 0.5, 0.5, 0.1, 0.5])
    assert nearest_targets(tie, logits, 0, 4).tolist() == [3, 1, 2, 4]


@pytest.mark.highest
def test_ranked_search_on_a_boxed_linear_model():
    """A ranked targeted search on a 10-class linear model inside the box:
    every distance is re-checked and never below the exact one, and with
    the ranking the nearest class is the first lane's, so two lanes are
    enough to reach within 1% of the exact distance where two lanes by
    logit miss it on some points."""
    rng = np.random.default_rng(5)
    k, d, n = 10, 30, 64
    W = rng.normal(size=(k, d)).astype(np.float32)
    W[:, :10] *= 6.0                                           # a few strong pixels, often at a face
    b = rng.normal(size=k).astype(np.float32)
    x = rng.uniform(size=(n, d)).astype(np.float32)
    x[:, :10] = np.round(x[:, :10])
    f = multiclass_linear(W, b)
    y = np.asarray(jnp.argmax(f(x), -1)).astype(np.int32)
    fn1 = lambda v: f(v[None])[0]  # noqa: E731
    dist = np.asarray(jax.vmap(lambda xi, yi: linear_distances(fn1, xi, yi, "linf", (0.0, 1.0))[0])(
        jnp.asarray(x), jnp.asarray(y)))
    exact = dist.min(axis=1)                # the boxed linear model's exact distance (the problem is an LP)
    res = {}
    for rank in ("linear", "logits"):
        r = attacks.minimal_distance(f, x, y, norm="linf", key=KEY, restarts=2, loss="dlr-t", target_rank=rank,
                                     search_steps=6, steps=10, polish_steps=0)
        assert not attacks.verify(f, x, y, r, "linf", bounds=(0.0, 1.0))
        got = np.asarray(r.distance, np.float64)
        assert np.all(got >= exact * (1 - 1e-4))
        res[rank] = got / exact
    assert np.quantile(res["linear"], 0.9) <= 1.01
    assert np.sum(res["logits"] > 1.01) > np.sum(res["linear"] > 1.01)


def test_target_rank_is_checked():
    f = multiclass_linear(np.eye(4, 3, dtype=np.float32), np.zeros(4, np.float32))
    x = np.full((2, 3), 0.5, np.float32)
    with pytest.raises(ValueError, match="target_rank"):
        attacks.minimal_distance(f, x, np.array([0, 1]), norm="linf", key=KEY, target_rank="nearest")
