"""minimal_distance against exact theory, and its invariants."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from attacks.minimal import _minimal_jit
from tests._models import ball, binary_linear, exact_ball, exact_binary, exact_multiclass, linear_data, multiclass_linear

KEY = jax.random.PRNGKey(0)
RTOL = 1e-5  # float32 re-check tolerance


@pytest.fixture(scope="module")
def linear_case():
    w, b, x, y = linear_data()
    return w, b, x, y


@pytest.mark.highest
@pytest.mark.parametrize("norm,tol", [("linf", 1.01), ("l2", 1.01), ("l1", 1.05)])
def test_binary_linear_matches_lemma1(linear_case, norm, tol):
    w, b, x, y = linear_case
    f = binary_linear(w, b)
    exact = exact_binary(w, b, x, norm)
    r = attacks.minimal_distance(f, x, y, norm=norm, key=KEY, eps_max=float(4 * exact.max()),
                                 search_steps=4, steps=10, bounds=None)
    d = np.asarray(r.distance)
    assert np.all(np.asarray(r.success))
    assert np.all(d >= exact * (1 - RTOL)), "an attack distance below the exact one"
    assert np.median(d / exact) <= tol
    assert attacks.verify(f, x, y, r, norm) == {}


def _multiclass_problem(seed, norm, d=20, k=5, n=40):
    """A random 5-class linear model on 40 unbounded points and its exact distances in ``norm``."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(k, d)).astype(np.float32)
    b = rng.normal(size=k).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = rng.integers(0, k, size=n).astype(np.int32)
    return multiclass_linear(W, b), x, y, exact_multiclass(W, b, x, y, norm)


@pytest.mark.accelerator("tf32")
@pytest.mark.parametrize("norm,tol", [("linf", 1.01), ("l2", 1.01)])
def test_multiclass_linear_matches_exact(norm, tol):
    f, x, y, exact = _multiclass_problem(2, norm)
    r = attacks.minimal_distance(f, x, y, norm=norm, key=KEY, eps_max=20.0, search_steps=6,
                                 steps=20, restarts=2, bounds=None)
    d = np.asarray(r.distance)
    assert np.all(d >= exact * (1 - RTOL) - 1e-6)
    assert np.all(d[exact == 0] == 0)
    pos = exact > 0
    assert np.median(d[pos] / exact[pos]) <= tol
    assert attacks.verify(f, x, y, r, norm) == {}


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_nonlinear_ball_matches_exact(norm):
    """A curved boundary with a closed-form distance, points inside and outside."""
    rng = np.random.default_rng(3)
    d, n = 10, 40
    c = np.zeros(d, np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    x *= (rng.uniform(0.3, 1.7, size=(n, 1)) / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    y = (np.linalg.norm(x, axis=1) > 1.0).astype(np.int32)
    f = ball(c, 1.0)
    exact = exact_ball(c, 1.0, x, norm)
    r = attacks.minimal_distance(f, x, y, norm=norm, key=KEY, eps_max=3.0, search_steps=6,
                                 steps=20, bounds=None)
    d = np.asarray(r.distance)
    assert np.all(np.asarray(r.success))
    assert np.all(d >= exact * (1 - 1e-4) - 1e-6)
    assert np.median(d / exact) <= 1.01
    assert attacks.verify(f, x, y, r, norm) == {}


def test_misclassified_is_zero_and_unbreakable_is_inf(linear_case):
    w, b, x, y = linear_case
    f = binary_linear(w, b)
    exact = exact_binary(w, b, x, "l2")
    y_bad = y.copy()
    y_bad[:5] = 1 - y_bad[:5]              # 5 misclassified points
    eps_max = float(np.median(exact))      # half the points are out of reach
    r = attacks.minimal_distance(f, x, y_bad, norm="l2", key=KEY, eps_max=eps_max,
                                 search_steps=3, steps=10, bounds=None)
    d, s = np.asarray(r.distance), np.asarray(r.success)
    assert np.all(d[:5] == 0) and np.all(s[:5])
    far = (exact > eps_max * 1.0001) & (np.arange(len(y)) >= 5)
    assert far.sum() > 5
    assert np.all(np.isinf(d[far])) and not np.any(s[far])
    np.testing.assert_array_equal(np.asarray(r.x_adv)[far], x[far])   # x itself, never a fake adversarial
    near = (exact < eps_max * 0.999) & (np.arange(len(y)) >= 5)
    assert np.all(np.isfinite(d[near]))


@pytest.mark.parametrize("norm", ["linf", "l2", "l1"])
def test_bounded_results_stay_in_box(norm):
    rng = np.random.default_rng(4)
    d, n = 16, 24
    w = rng.normal(size=d).astype(np.float32)
    x = rng.uniform(0, 1, size=(n, d)).astype(np.float32)
    b = -np.float32(np.median(x @ w))
    y = (x @ w + b > 0).astype(np.int32)
    f = binary_linear(w, b)
    r = attacks.minimal_distance(f, x, y, norm=norm, key=KEY, search_steps=4, steps=10)
    xa = np.asarray(r.x_adv)
    assert xa.min() >= 0 and xa.max() <= 1
    # the box can only make the distance larger than the unconstrained one
    exact = exact_binary(w, b, x, norm)
    dd = np.asarray(r.distance)
    assert np.all(dd >= exact * (1 - RTOL))
    assert attacks.verify(f, x, y, r, norm, bounds=(0.0, 1.0)) == {}


def test_same_key_same_result_and_batch_equals_singles(linear_case):
    w, b, x, y = linear_case
    f = ball(np.zeros(50, np.float32), 7.0)
    yb = (np.linalg.norm(x, axis=1) > 7.0).astype(np.int32)
    keys = jax.random.split(KEY, 6)
    kw = dict(norm="l2", eps_max=10.0, search_steps=3, steps=8, restarts=2, bounds=None)
    full = attacks.minimal_distance(f, x[:6], yb[:6], key=keys, **kw)
    again = attacks.minimal_distance(f, x[:6], yb[:6], key=keys, **kw)
    np.testing.assert_array_equal(np.asarray(full.distance), np.asarray(again.distance))
    singles = [attacks.minimal_distance(f, x[i:i + 1], yb[i:i + 1], key=keys[i:i + 1], **kw)
               for i in range(6)]
    d1 = np.concatenate([np.asarray(s.distance) for s in singles])
    np.testing.assert_allclose(d1, np.asarray(full.distance), rtol=1e-5)
    # one key for the batch = fold_in(key, i) per point
    folded = jnp.stack([jax.random.fold_in(KEY, i) for i in range(6)])
    a = attacks.minimal_distance(f, x[:6], yb[:6], key=KEY, **kw)
    b_ = attacks.minimal_distance(f, x[:6], yb[:6], key=folded, **kw)
    np.testing.assert_array_equal(np.asarray(a.distance), np.asarray(b_.distance))


def test_second_call_does_not_recompile(linear_case):
    w, b, x, y = linear_case
    f = binary_linear(w, b)
    kw = dict(norm="linf", key=KEY, eps_max=5.0, search_steps=2, steps=5, bounds=None)
    attacks.minimal_distance(f, x, y, **kw)
    size = _minimal_jit._cache_size()
    attacks.minimal_distance(f, x + 0.01, y, **kw)
    attacks.minimal_distance(f, x, y, **{**kw, "key": jax.random.PRNGKey(5), "eps_max": 6.0})
    assert _minimal_jit._cache_size() == size


def test_candidates_lanes_are_at_least_as_good(linear_case):
    w, b, x, y = linear_case
    f = binary_linear(w, b)
    exact = exact_binary(w, b, x, "linf")
    r = attacks.minimal_distance(f, x, y, norm="linf", key=KEY, eps_max=float(4 * exact.max()),
                                 search_steps=2, steps=8, candidates=3, bounds=None)
    d = np.asarray(r.distance)
    assert np.all(d >= exact * (1 - RTOL))
    assert np.median(d / exact) <= 1.01


@pytest.mark.highest
def test_callable_inside_user_jit_and_shard_map(linear_case):
    from jax.sharding import Mesh, PartitionSpec as P

    w, b, x, y = linear_case
    f = binary_linear(w, b)
    kw = dict(norm="l2", eps_max=20.0, search_steps=3, steps=6, bounds=None)
    keys = jax.random.split(KEY, len(x))
    eager = attacks.minimal_distance(f, x, y, key=keys, **kw).distance

    @jax.jit
    def inside(xx, yy, kk):
        return attacks.minimal_distance(f, xx, yy, key=kk, **kw).distance

    np.testing.assert_allclose(np.asarray(inside(x, y, keys)), np.asarray(eager), rtol=1e-5)

    devs = jax.devices()
    mesh = Mesh(np.array(devs[:4] if len(devs) >= 4 else devs[:1]), ("p",))
    sm = jax.shard_map(lambda xx, yy, kk: attacks.minimal_distance(f, xx, yy, key=kk, **kw).distance,
                       mesh=mesh, in_specs=(P("p"), P("p"), P("p")), out_specs=P("p"))
    np.testing.assert_allclose(np.asarray(sm(x, y, keys)), np.asarray(eager), rtol=1e-5)


def _parabola_case(n=96, seed=0):
    from rcurves.data import parabola_distance, parabola_logits_fn
    rng = np.random.default_rng(seed)
    x = np.stack([rng.uniform(-2, 2, 4 * n), rng.uniform(-1, 4, 4 * n)], axis=1)
    x = x[parabola_distance(x, 2) > 0.01][:n].astype(np.float32)
    f = parabola_logits_fn()
    y = np.asarray(jnp.argmax(f(jnp.asarray(x)), axis=1))
    ok = y == (x[:, 0].astype(np.float64) ** 2 > x[:, 1]).astype(np.int64)
    return f, x[ok], y[ok], parabola_distance(x[ok], 1)


def test_l1_default_uses_two_lanes_and_reaches_the_exact_parabola_distance():
    """l1's sparse steps get stuck in a single lane on the curved parabola
    boundary (001 Fig. 2); the per-norm default (two lanes of half the steps,
    same budget) reaches the exact distance at the 90th percentile."""
    f, x, y, exact = _parabola_case()
    kw = dict(norm="l1", key=KEY, eps_max=float(2 * exact.max()), bounds=None)
    res = attacks.minimal_distance(f, x, y, **kw)
    explicit = attacks.minimal_distance(f, x, y, restarts=2, steps=10, **kw)
    np.testing.assert_array_equal(np.asarray(res.distance), np.asarray(explicit.distance))
    ratio = np.asarray(res.distance, np.float64) / exact
    assert ratio.min() >= 1 - RTOL
    assert np.quantile(ratio, 0.9) <= 1.01


@pytest.mark.highest
@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_regula_falsi_lands_on_lemma1_in_one_round(linear_case, norm):
    """For a linear model the largest margin within radius eps is affine in eps
    (000 Lemma 1), so one secant round after the round at eps_max lands on the
    exact distance; bisection is still far off after the same two rounds."""
    w, b, x, y = linear_case
    f = binary_linear(w, b)
    exact = exact_binary(w, b, x, norm)
    kw = dict(norm=norm, key=KEY, eps_max=float(4 * exact.max()), search_steps=1, steps=10,
              refine_steps=0, bounds=None)
    falsi = attacks.minimal_distance(f, x, y, radius="falsi", **kw)
    bisect = attacks.minimal_distance(f, x, y, radius="bisect", **kw)
    d = np.asarray(falsi.distance)
    assert np.all(d >= exact * (1 - RTOL))
    # The search aims a hair past the boundary (twice the 1e-5 margin
    # tolerance of confidently_adversarial), which is a large relative excess
    # only for the few points within ~1e-3 of it.
    assert np.median(d / exact) <= 1.0001
    assert np.quantile(d / exact, 0.9) <= 1.001
    assert np.median(np.asarray(bisect.distance) / exact) > 1.05
    assert attacks.verify(f, x, y, falsi, norm) == {}


@pytest.mark.parametrize("track", ["loss", "norm"])
@pytest.mark.parametrize("radius", ["falsi", "bisect"])
def test_every_track_and_radius_search_is_exact_on_the_ball(track, radius):
    """Both lane reports (highest-loss or smallest-norm adversarial iterate) and
    both radius searches reach the closed-form l2 distance of a curved boundary."""
    rng = np.random.default_rng(5)
    d, n = 10, 32
    c = np.zeros(d, np.float32)
    x = (rng.normal(size=(n, d)) * 0.6).astype(np.float32)
    f = ball(c, 1.0)
    y = np.asarray(jnp.argmax(f(jnp.asarray(x)), axis=1))
    exact = exact_ball(c, 1.0, x, "l2")
    r = attacks.minimal_distance(f, x, y, norm="l2", key=KEY, eps_max=4.0, bounds=None, track=track,
                                 radius=radius)
    dist = np.asarray(r.distance)
    assert np.all(dist >= exact * (1 - RTOL) - 1e-6)
    assert np.median(dist / exact) <= 1.001
    assert attacks.verify(f, x, y, r, "l2") == {}


@pytest.mark.parametrize("arg,value", [("radius", "golden"), ("track", "last")])
def test_unknown_search_options_are_rejected(linear_case, arg, value):
    w, b, x, y = linear_case
    with pytest.raises(ValueError, match=arg):
        attacks.minimal_distance(binary_linear(w, b), x, y, norm="l2", key=KEY, eps_max=1.0, bounds=None,
                                 **{arg: value})


def test_targeted_defaults_and_dlr_losses():
    """l_inf / l_2 defaults on a model of at least four classes: four lanes,
    one per target class, with Croce & Hein's targeted DLR loss (eq. 7), and
    an FMN polish; fewer classes keep one untargeted lane and no polish; DLR-T
    on fewer than four logits is an error naming the loss."""
    from attacks.losses import dlr, dlr_targeted
    from attacks.minimal import search_config
    z = jax.numpy.asarray([3.0, -1.0, 2.0, 0.5, 1.0])
    s = np.sort(np.asarray(z))[::-1]
    assert float(dlr(z, 1)) == pytest.approx(-(-1.0 - 3.0) / (s[0] - s[2]))
    assert float(dlr_targeted(z, 0, 3)) == pytest.approx(-(3.0 - 0.5) / (s[0] - (s[2] + s[3]) / 2))
    from attacks.minimal import _wide_steps, search_gradients
    for norm, (steps, rounds, polish) in (("linf", (5, 7, 74)), ("l2", (7, 6, 46))):
        cfg = search_config(norm, 10)
        assert (cfg.restarts, cfg.engine.steps, cfg.search_steps, cfg.engine.loss) == (4, steps, rounds - 1, "dlr-t")
        assert (cfg.warm_lanes, cfg.own_lanes, cfg.polish_steps, cfg.target_rank) == (4, True, polish, "mixed")
        # the ranking's Jacobian (10 backward passes) is part of the 224
        assert (1 + cfg.search_steps) * cfg.restarts * cfg.engine.steps + cfg.polish_steps + 10 == 224
        assert search_gradients(cfg, 10) == 224
        # l_inf's polish: 20 wide steps (from the distance found), then the 54 narrow ones
        assert _wide_steps(norm, cfg.polish_steps) == {"linf": 20, "l2": 0}[norm]
        # a lane for every other class: nothing to rank, nothing paid for it
        assert search_config(norm, 4).target_rank == "logits"
        cfg2 = search_config(norm, 2)
        assert (cfg2.restarts, cfg2.engine.steps, cfg2.search_steps, cfg2.engine.loss) == (1, 20, 10, "margin")
        assert cfg2.polish_steps == 0
    assert search_config("l1", 10).engine.loss == "margin"
    w, b, x, y = linear_data(n=4)
    with pytest.raises(ValueError, match="loss"):
        attacks.minimal_distance(binary_linear(w, b), x, y, norm="l2", key=KEY, eps_max=1.0, bounds=None,
                                 loss="dlr-t")


def _far_bump():
    """Four logits; classes 1-3 win only inside a ball of radius 0.05 around
    (3, 0): far from x, narrow, so that PGD at a large radius must shrink its
    step many times before it lands inside."""
    c, r = jnp.array([3.0, 0.0]), 0.05

    def f(p):
        m = r ** 2 - jnp.sum((p - c) ** 2, axis=-1)
        return jnp.stack([jnp.zeros_like(m), m, m - 1.0, m - 2.0], axis=-1)

    x = np.array([[0.0, 0.0], [0.0, 0.5], [0.5, 0.0]], np.float32)
    exact = np.linalg.norm(x - np.array([3.0, 0.0]), axis=1) - r
    return f, x, np.zeros(3, np.int32), exact


@pytest.mark.parametrize("brackets", ["shared", "lane"])
def test_unbroken_lanes_continue_their_step_across_rounds(brackets):
    """A point not broken in round 0 is attacked at eps_max again in every
    round, each lane from its own last point: with APGD's step restarted at
    2 eps_max every round, 7-step lanes never settle into the narrow region
    (the search returned inf here); carried over, the rounds add up to one long
    run that does. The distance is never below the exact one."""
    f, x, y, exact = _far_bump()
    r = attacks.minimal_distance(f, x, y, norm="l2", key=KEY, eps_max=10.0, bounds=None, restarts=2,
                                 loss="margin-t", warm="own", steps=7, search_steps=5, polish_steps=0,
                                 brackets=brackets)
    d = np.asarray(r.distance)
    assert np.all(np.isfinite(d))
    assert np.all(d >= exact * (1 - RTOL))
    assert np.all(d <= exact * 1.02)
    assert attacks.verify(f, x, y, r, "l2") == {}


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_lane_brackets_match_exact_multiclass_linear(norm):
    """Every lane searching its own radius toward its class: the smallest over
    the lanes is the exact distance when the nearest class has a lane, never
    below it."""
    f, x, y, exact = _multiclass_problem(7, norm)
    r = attacks.minimal_distance(f, x, y, norm=norm, key=KEY, eps_max=20.0, search_steps=5, steps=10,
                                 restarts=4, bounds=None, brackets="lane")
    dist = np.asarray(r.distance)
    assert np.all(dist >= exact * (1 - RTOL) - 1e-6)
    pos = exact > 0
    assert np.median(dist[pos] / exact[pos]) <= 1.01
    assert attacks.verify(f, x, y, r, norm) == {}


def test_grad_noise_results_are_verified_and_reproducible():
    """Gradients at noisy copies of the iterates: every returned adversarial is
    still re-checked and never closer than the exact distance, the box is
    kept, and the same key gives the same result."""
    rng = np.random.default_rng(8)
    d, k, n = 16, 5, 24
    W = rng.normal(size=(k, d)).astype(np.float32)
    b = rng.normal(size=k).astype(np.float32)
    x = rng.uniform(0.2, 0.8, size=(n, d)).astype(np.float32)
    f = multiclass_linear(W, b)
    y = np.asarray(jnp.argmax(f(jnp.asarray(x)), axis=1)).astype(np.int32)
    exact = exact_multiclass(W, b, x, y, "l2")       # unbounded: a lower bound inside the box
    kw = dict(norm="l2", key=KEY, search_steps=4, steps=7, restarts=4, grad_noise=0.2)
    r = attacks.minimal_distance(f, x, y, **kw)
    again = attacks.minimal_distance(f, x, y, **kw)
    np.testing.assert_array_equal(np.asarray(r.distance), np.asarray(again.distance))
    dist = np.asarray(r.distance)
    assert np.all(np.isfinite(dist))
    assert np.all(dist >= exact * (1 - RTOL) - 1e-6)
    assert attacks.verify(f, x, y, r, "l2", bounds=(0.0, 1.0)) == {}


@pytest.mark.parametrize("kw,arg", [(dict(brackets="each"), "brackets"), (dict(grad_noise=-0.1), "grad_noise"),
                                    (dict(brackets="lane", loss="margin"), "brackets"),
                                    (dict(brackets="lane", warm="first"), "brackets")])
def test_bracket_and_noise_options_are_checked(linear_case, kw, arg):
    w, b, x, y = linear_case
    with pytest.raises(ValueError, match=arg):
        attacks.minimal_distance(binary_linear(w, b), x, y, norm="l2", key=KEY, eps_max=1.0, bounds=None, **kw)


def test_l2_default_brackets_per_lane():
    from attacks.minimal import search_config
    assert search_config("l2", 10).lane_brackets
    assert not search_config("linf", 10).lane_brackets
    assert not search_config("l2", 3).lane_brackets      # one untargeted lane: nothing to split
    assert search_config("l2", 10, grad_noise=0.1).engine.grad_noise == 0.1
