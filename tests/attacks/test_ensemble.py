"""attacks.ensemble: per point the smallest verified distance of its members, and who found it."""
import jax
import numpy as np
import pytest

import attacks
from attacks.ensemble import APGDT, CW, DDN, FMN, Search, default_attacks, ensemble
from tests._models import exact_multiclass, multiclass_linear

KEY = jax.random.PRNGKey(0)
RTOL = 1e-5


def _multiclass(seed, n=24, d=12, k=5, box=False):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(k, d)).astype(np.float32)
    if box:
        x = rng.uniform(0.3, 0.7, size=(n, d)).astype(np.float32)
        b = -(x.mean(0) @ W.T).astype(np.float32)
    else:
        x = rng.normal(size=(n, d)).astype(np.float32)
        b = rng.normal(size=k).astype(np.float32)
    f = multiclass_linear(W, b)
    y = np.asarray(np.argmax(f(x), -1)).astype(np.int32)
    return W, b, x, y, f


def _check(f, x, y, out, results, exact, norm, bounds):
    d = np.asarray(out.distance, np.float64)
    member_d = np.stack([np.asarray(r.distance, np.float64) for r in results])
    # the ensemble's distance is the minimum of its members' verified distances
    np.testing.assert_array_equal(d, member_d.min(axis=0))
    for r in results:
        assert attacks.verify(f, x, y, r, norm, bounds=bounds) == {}
    assert attacks.verify(f, x, y, attacks.MinimalResult(*out[:3]), norm, bounds=bounds) == {}
    # winners: the earliest member that reached the minimum; -1 where none was needed or none broke it
    w = np.asarray(out.winner)
    has = np.isfinite(d) & (d > 0)
    assert np.all(w[~has] == -1)
    assert np.all((w[has] >= 0) & (w[has] < len(results)))
    first_min = np.argmax(member_d[:, has] == d[has], axis=0)
    np.testing.assert_array_equal(w[has], first_min)
    np.testing.assert_array_equal(np.asarray(out.x_adv)[has], np.stack([np.asarray(results[i].x_adv[j])
                                                                        for i, j in zip(w[has], np.flatnonzero(has))]))
    # never below the exact distance (the box only removes perturbations)
    assert np.all(d >= exact * (1 - RTOL) - 1e-6)
    return d, w


def test_l2_ensemble_of_every_member_is_their_minimum_and_exact():
    W, b, x, y, f = _multiclass(0)
    y[:2] = (y[:2] + 1) % 5                     # two misclassified points
    exact = exact_multiclass(W, b, x, y, "l2")
    members = (Search(search_steps=2, steps=4), APGDT(search_steps=2, steps=4, targets=2), DDN(steps=20),
               FMN(steps=20), CW(binary_search_steps=3, steps=10))
    out, results = ensemble(f, x, y, norm="l2", key=KEY, attacks=members, bounds=None, eps_max=20.0,
                            return_members=True)
    d, w = _check(f, x, y, out, results, exact, "l2", None)
    assert np.all(d[:2] == 0)
    pos = exact > 0
    assert np.all(np.isfinite(d))
    assert np.median(d[pos] / exact[pos]) <= 1.001
    # a later member starts from the best so far: never worse than it
    best = np.asarray(results[0].distance)
    for r in results[1:]:
        rd = np.asarray(r.distance)
        assert np.all(rd <= best * (1 + 1e-6) + 1e-7)
        best = np.minimum(best, rd)


def test_linf_ensemble_in_a_box_with_defaults():
    W, b, x, y, f = _multiclass(1, box=True)
    exact = exact_multiclass(W, b, x, y, "linf")
    members = default_attacks("linf", 60, n_classes=5)
    out, results = ensemble(f, x, y, norm="linf", key=KEY, attacks=members, return_members=True)
    d, _ = _check(f, x, y, out, results, exact, "linf", (0.0, 1.0))
    xa = np.asarray(out.x_adv)
    assert xa.min() >= 0 and xa.max() <= 1
    assert np.median(d / exact) <= 1.01


def test_members_that_do_not_measure_the_norm_are_rejected():
    W, b, x, y, f = _multiclass(2, n=4)
    with pytest.raises(ValueError, match="attacks"):
        ensemble(f, x, y, norm="linf", key=KEY, attacks=(Search(), DDN()), bounds=None, eps_max=5.0)
    with pytest.raises(ValueError, match="attacks"):
        ensemble(f, x, y, norm="l2", key=KEY, attacks=(), bounds=None, eps_max=5.0)


def test_default_members_are_independent_searches_and_spend_the_budget():
    """From 600 gradients: independent ("fresh") searches of about 224
    gradients, each ranking its targets or starting its radius differently,
    then FMN; together within 2% of the budget. Below 600, one search. On a
    linear model in the box the result is re-checked, never below the exact
    distance and within 0.1% of it at the median."""
    for norm in ("linf", "l2"):
        members = default_attacks(norm, 1000, n_classes=10)
        assert [type(m) for m in members] == [Search] * 4 + [FMN]
        assert [m.fresh for m in members[:4]] == [False, True, True, True]
        variants = {(m.target_rank, m.eps_scale) for m in members[:4]}
        assert len(variants) == 4                      # no two searches alike
        assert all(210 <= m.gradients_for(norm, 10) <= 230 for m in members[:4])
        total = sum(m.gradients_for(norm, 10) for m in members)
        assert 980 <= total <= 1000
        assert [type(m) for m in default_attacks(norm, 599, n_classes=10)] == [Search]
    # untargeted schedules (three classes): the searches differ by their first radius
    members = default_attacks("linf", 1000, n_classes=3)
    assert sorted(m.eps_scale for m in members[:4]) == [0.125, 0.25, 0.5, 1.0]
    # past the variants, random starts: still no two alike
    many = default_attacks("linf", 3000, n_classes=10)[:-1]
    assert len({(m.target_rank, m.eps_scale, m.warm) for m in many}) == len(many) == 12
    with pytest.raises(ValueError, match="eps_scale"):
        W, b, x, y, f = _multiclass(2, n=4)
        ensemble(f, x, y, norm="linf", key=KEY, attacks=(Search(eps_scale=0.0),), bounds=None, eps_max=5.0)
    W, b, x, y, f = _multiclass(3, box=True)
    exact = exact_multiclass(W, b, x, y, "l2")
    members = default_attacks("l2", 600, n_classes=5)
    assert members[0].restarts == 4 and members[1].fresh
    out, results = ensemble(f, x, y, norm="l2", key=KEY, attacks=members, return_members=True)
    d, _ = _check(f, x, y, out, results, exact, "l2", (0.0, 1.0))
    pos = exact > 0
    assert np.median(d[pos] / exact[pos]) <= 1.001


def test_a_fresh_search_ignores_the_best_so_far():
    """``Search(fresh=True)`` later in an ensemble is the same search run
    alone (with the member's keys): it does not start below the best, so
    it may end above it, and the ensemble still keeps the minimum."""
    from attacks import checks
    from attacks.ensemble import _member_keys
    W, b, x, y, f = _multiclass(4, box=True)
    exact = exact_multiclass(W, b, x, y, "linf")
    members = (Search(search_steps=3, steps=4, restarts=4), Search(search_steps=2, steps=3, restarts=4,
                                                                   fresh=True, eps_scale=0.5, target_rank="linear"))
    out, results = ensemble(f, x, y, norm="linf", key=KEY, attacks=members, return_members=True)
    _check(f, x, y, out, results, exact, "linf", (0.0, 1.0))
    alone = attacks.minimal_distance(f, x, y, norm="linf", key=_member_keys(checks.check_key(KEY, len(x)), 1),
                                     search_steps=2, steps=3, restarts=4, target_rank="linear", eps_max=0.5)
    np.testing.assert_array_equal(np.asarray(results[1].distance), np.asarray(alone.distance))


def test_default_l2_searches_after_the_first_use_gradient_noise():
    from attacks.ensemble import ENSEMBLE_L2_NOISE, Search, default_attacks
    for norm in ("l2", "linf"):
        searches = [m for m in default_attacks(norm, 1000, 10) if isinstance(m, Search)]
        assert len(searches) == 4
        assert searches[0].grad_noise == 0
        want = ENSEMBLE_L2_NOISE if norm == "l2" else 0.0
        assert all(m.grad_noise == want for m in searches[1:])
        # the noise costs forward passes, not gradients: the budget is unchanged
        assert sum(m.gradients_for(norm, 10) for m in default_attacks(norm, 1000, 10)) <= 1000
