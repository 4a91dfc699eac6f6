"""attacks.adaptive: a probe and further searches only where the default search is unsure.

Every test uses one architecture (a pytree callable: thresholded inputs plus a
linear part) and one batch shape, so the programs compile once for the file.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from attacks import adaptive
from attacks.adaptive import AdaptiveConfig, Smoothing, _probe_jit, adaptive_distance, escalation_members
from attacks.minimal import _minimal_jit, search_config, search_gradients
from attacks.result import flat_norm
from tests._models import exact_multiclass

KEY = jax.random.PRNGKey(0)
D_THR, D_LIN, K, N = 8, 8, 4, 6
THETA = 0.3
#: a cap of two searches and chunks of four: six unsure points run as 4 + 2 (padded to 4)
CONFIG = AdaptiveConfig(max_searches=2, chunk=4)


def _apply(params, x):
    """Logits ``relu(x_thr - THETA) @ W.T + x_lin @ V.T + b``: below ``THETA`` the
    first ``D_THR`` inputs have a gradient of exactly zero."""
    W, V, b = params
    x = x.reshape(x.shape[0], -1)
    return jax.nn.relu(x[:, :D_THR] - THETA) @ W.T + x[:, D_THR:] @ V.T + b


def _model(W):
    rng = np.random.default_rng(0)
    V = 0.6 * rng.normal(size=(K, D_LIN)).astype(np.float32)
    V[0] = 0.0
    b = (np.eye(K)[0] - 0.5 * V.sum(1)).astype(np.float32)      # class 0 by a margin of about 1 near x_lin = 0.5
    f = jax.tree_util.Partial(_apply, (jnp.asarray(W), jnp.asarray(V), jnp.asarray(b)))
    return f, V, b


def _points():
    rng = np.random.default_rng(1)
    x_thr = rng.uniform(0.0, 0.2, (N, D_THR))                    # below the threshold: no gradient there
    x_lin = 0.5 + rng.uniform(-0.05, 0.05, (N, D_LIN))
    return np.concatenate([x_thr, x_lin], 1).astype(np.float32)


def _masked():
    """Each other class is very sensitive to two thresholded inputs: its
    nearest adversarials (0.2-0.35 in l_2) lie past the threshold, where a
    gradient at the data never points; the linear part leads a gradient
    search to ones about twice as far."""
    W = np.zeros((K, D_THR), np.float32)
    rng = np.random.default_rng(2)
    for c in range(1, K):
        W[c, rng.choice(D_THR, 2, replace=False)] = 10.0
    f, _, _ = _model(W)
    x = _points()
    y = np.asarray(jnp.argmax(f(x), -1)).astype(np.int32)
    assert np.all(y == 0)
    return f, x, y


def _twelve_masked(x_m):
    """The six masked points and six more near them (mirrored, shifted by 0.01): a batch of twelve."""
    return np.concatenate([x_m, np.clip(x_m[::-1] + 0.01, 0.0, 1.0)]).astype(np.float32)


@pytest.fixture(scope="module")
def masked_run():
    f, x, y = _masked()
    fixed = attacks.minimal_distance(f, x, y, norm="l2", key=KEY)
    res = adaptive_distance(f, x, y, norm="l2", key=KEY, config=CONFIG)
    return f, x, y, fixed, res


def _recheck(f, x, y, res, norm="l2"):
    """Every finite distance is the norm of its x_adv - x, x_adv misclassified and in the box."""
    d = np.asarray(res.distance)
    fin = np.isfinite(d)
    pred = np.asarray(jnp.argmax(f(res.x_adv), -1))
    assert np.all(pred[fin & (d > 0)] != y[fin & (d > 0)])
    xa = np.asarray(res.x_adv)
    assert xa.min() >= 0.0 and xa.max() <= 1.0
    np.testing.assert_allclose(np.asarray(flat_norm(norm, res.x_adv - x))[fin], d[fin], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(res.success), fin)
    assert attacks.verify(f, x, y, attacks.MinimalResult(*res[:3]), norm, bounds=(0.0, 1.0)) == {}


def test_linear_model_is_never_escalated_and_costs_little():
    # the same architecture with the thresholded part off: a linear model (000 Lemma 1)
    f, V, b = _model(np.zeros((K, D_THR), np.float32))
    x = _points()
    y = np.asarray(jnp.argmax(f(x), -1)).astype(np.int32)
    W_full = np.concatenate([np.zeros((K, D_THR), np.float32), V], 1)
    exact = exact_multiclass(W_full, b, x, y, "l2")
    # the box never binds: just past each point's nearest boundary point (Lemma 1) lies inside it
    z = x @ W_full.T + b
    G = W_full[y][:, None, :] - W_full[None, :, :]                        # (n, K, d): w_y - w_j
    per_class = (z[np.arange(N), y][:, None] - z) / np.maximum(np.linalg.norm(G, axis=2), 1e-12)
    per_class[np.arange(N), y] = np.inf
    j = np.argmin(per_class, 1)
    g = G[np.arange(N), j]
    x_star = x - (1.001 * exact / np.linalg.norm(g, axis=1))[:, None] * g
    assert np.all((x_star > 0) & (x_star < 1)) and np.all(np.argmax(x_star @ W_full.T + b, 1) != y)
    fixed = attacks.minimal_distance(f, x, y, norm="l2", key=KEY)
    res = adaptive_distance(f, x, y, norm="l2", key=KEY, config=CONFIG)
    assert not np.any(np.asarray(res.escalated)) and not np.any(np.asarray(res.unsure))
    # nothing to improve: the default search's result, unchanged
    np.testing.assert_array_equal(np.asarray(res.distance), np.asarray(fixed.distance))
    d = np.asarray(res.distance, np.float64)
    assert np.all(d >= exact * (1 - 1e-5))
    np.testing.assert_allclose(d, exact, rtol=1e-3)
    fixed_g = search_gradients(search_config("l2", K), K)
    g = np.asarray(res.gradients)
    assert np.all(g == g[0]) and g[0] <= 1.15 * fixed_g
    _recheck(f, x, y, res)
    # another attack's (claimed) closer adversarials make every point unsure: escalated, one search each (none
    # moves them: the first was exact), and no distance is lowered to a bound no example here backs
    told = adaptive_distance(f, x, y, norm="l2", key=KEY, config=CONFIG, upper=0.9 * exact)
    assert np.all(np.asarray(told.escalated))
    assert np.all(np.asarray(told.gradients) == g[0] + escalation_members("l2", K, 1)[0].gradients_for("l2", K))
    assert np.all(np.asarray(told.distance, np.float64) >= exact * (1 - 1e-5))
    _recheck(f, x, y, told)


def test_masked_gradients_are_escalated_and_the_nearer_adversarials_found(masked_run):
    f, x, y, fixed, res = masked_run
    d_fixed, d = np.asarray(fixed.distance), np.asarray(res.distance)
    esc = np.asarray(res.escalated)
    assert np.all(np.isfinite(d_fixed)) and np.all(d_fixed > 0.45)   # the gradient search takes the linear route
    assert esc.sum() >= N // 2
    # where escalated, an adversarial the fixed default missed: well below its distance
    assert np.all(d[esc] < 0.8 * d_fixed[esc])
    assert np.all(d <= d_fixed)
    np.testing.assert_array_equal(d[~esc], d_fixed[~esc])
    _recheck(f, x, y, res)
    # the spend: default search + probe (its lanes' steps; the ratio test's Jacobian is off by default), then
    # 214-224 per search
    base = search_gradients(search_config("l2", K), K) + CONFIG.probe_lanes * CONFIG.probe_steps
    members = [m.gradients_for("l2", K) for m in escalation_members("l2", K, 2)]
    g = np.asarray(res.gradients)
    assert np.all(g[~esc] == base)
    assert set(g[esc]) <= {base + members[0], base + sum(members)}
    # the cap: nobody got more than two searches, and settle stopped only points that stopped moving
    assert np.all(g <= base + sum(members))
    # in l_2 the second search is the first with plain gradients through smoothed ReLUs (attacks.surrogate)
    m0, m1 = escalation_members("l2", K, 2)
    assert m0.grad_noise > 0 and m0.relu_temperature == 0 and m1.grad_noise == 0 and m1.relu_temperature > 0
    assert dataclasses.replace(m1, grad_noise=m0.grad_noise, relu_temperature=0.0, name=m0.name) == m0
    # in l_inf the same pair runs the other way round (the smoothed one is the batch rule's search), the
    # smoothed one a radius round shorter: restarts * steps gradients fewer
    l0, l1 = escalation_members("linf", K, 2)
    assert l0.relu_temperature > 0 and l0.grad_noise == 0 and l1.relu_temperature == 0 and l1.grad_noise > 0
    c1 = l1.config("linf", K)
    assert l0.config("linf", K).search_steps == c1.search_steps - 1
    assert l0.gradients_for("linf", K) == l1.gradients_for("linf", K) - c1.restarts * c1.engine.steps


def test_same_key_same_result_and_padded_chunks_do_not_recompile(masked_run):
    f, x, y, _, first = masked_run
    again = adaptive_distance(f, x, y, norm="l2", key=KEY, config=CONFIG)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    sizes = (_minimal_jit._cache_size(), _probe_jit._cache_size())
    # fewer unsure points (three relabelled ones are misclassified now: distance 0, never escalated): three
    # where the first call ran 4 + 2, padded to the same chunk of four: the same programs
    assert np.asarray(first.escalated).sum() == N
    y2 = y.copy()
    y2[:3] = 1
    other = adaptive_distance(f, x, y2, norm="l2", key=KEY, config=CONFIG)
    assert (_minimal_jit._cache_size(), _probe_jit._cache_size()) == sizes
    esc2 = np.asarray(other.escalated)
    assert not esc2[:3].any() and np.all(np.asarray(other.distance)[:3] == 0)
    assert np.all(esc2[3:])
    # a point's result does not depend on which other points share its chunk
    np.testing.assert_array_equal(np.asarray(other.distance)[3:], np.asarray(first.distance)[3:])


def test_the_batch_rule_samples_the_sure_points_and_escalates_the_batch_only_where_the_sample_moves():
    """The batch rule (``spread``): a sample of the points the per-point rule judged sure gets the first
    escalation search; only when it moves at least ``spread`` of them does the rest of the batch get it.

    Masked: twelve masked points (the nearer adversarials past the threshold) and a probe with plain gradients
    (``probe_noise=0``: zero there, so it misses them all and every point is judged sure). The escalation
    searches' noisy gradients move the sample, so the whole batch is escalated and lands well below the fixed
    search. Sure: six points whose nearest adversarial is a short linear step (the default search is exact
    there): the sample of four gets its search (paid for, but not escalated), none moves, and the other two
    get nothing."""
    f, x_m, y_m = _masked()
    _, V, b = _model(np.zeros((K, D_THR), np.float32))
    x_s = _points()
    v1 = V[1] / np.dot(V[1], V[1])
    x_s[:, D_THR:] = 0.5 + 0.97 * v1                    # class 1's logit 0.97 against class 0's 1: a short step
    # 12 masked points, then 4 of the short-step ones: the sample of 4 (points 0, 5, 10, 15) is 3 masked + 1 exact
    x = np.concatenate([_twelve_masked(x_m), x_s[:4]]).astype(np.float32)
    y = np.asarray(jnp.argmax(f(x), -1)).astype(np.int32)
    assert np.all(y == 0)
    blind = dict(max_searches=2, chunk=4, probe_noise=0.0, sample=0.1, spread_min=2)
    alone = adaptive_distance(f, x, y, norm="l2", key=KEY, config=AdaptiveConfig(spread=None, **blind))
    both = adaptive_distance(f, x, y, norm="l2", key=KEY, config=AdaptiveConfig(spread=0.25, **blind))
    fixed = attacks.minimal_distance(f, x, y, norm="l2", key=KEY)
    assert not np.asarray(alone.escalated).any()                     # the per-point rule saw nothing
    np.testing.assert_array_equal(np.asarray(alone.distance), np.asarray(fixed.distance))
    assert np.asarray(both.escalated).all()                          # the sample moved: everyone
    d_both, d_fixed = np.asarray(both.distance), np.asarray(fixed.distance)
    assert np.all(d_both <= d_fixed) and np.mean(d_both[:12] < 0.8 * d_fixed[:12]) >= 0.75
    first = escalation_members("l2", K, 1)[0].gradients_for("l2", K)
    g_both, g_alone = np.asarray(both.gradients), np.asarray(alone.gradients)
    assert np.all(g_both >= g_alone + first)
    # the exact points (the sample's point 15 and the batch's 12-14): one search each, charged once
    np.testing.assert_array_equal(g_both[12:], g_alone[12:] + first)
    _recheck(f, x, y, both)
    # the batch rule's threshold: rtol in l_2 (so the above), half a percent in l_inf, or as given
    assert AdaptiveConfig().moved_by("l2") == AdaptiveConfig().rtol and AdaptiveConfig(rtol=0.05).moved_by("l2") == 0.05
    assert AdaptiveConfig().moved_by("linf") == 0.005 and AdaptiveConfig(spread_rtol=0.2).moved_by("linf") == 0.2

    y_s = np.asarray(jnp.argmax(f(x_s), -1)).astype(np.int32)
    assert np.all(y_s == 0) and x_s.min() >= 0 and x_s.max() <= 1
    cfg = AdaptiveConfig(max_searches=2, chunk=4, sample=0.1, spread_min=2)       # 4 (the fewest)
    res = adaptive_distance(f, x_s, y_s, norm="l2", key=KEY, config=cfg)
    fixed = attacks.minimal_distance(f, x_s, y_s, norm="l2", key=KEY)
    assert not np.asarray(res.escalated).any() and not np.asarray(res.unsure).any()   # measured, not escalated
    np.testing.assert_allclose(np.asarray(res.distance), np.asarray(fixed.distance), rtol=1e-3)
    g = np.asarray(res.gradients)
    # the sample, evenly spaced (points 0, 2, 3, 5), paid for one search; points 1 and 4 did not
    assert g[0] == g[2] == g[3] == g[5] == g[1] + first and g[1] == g[4]
    _recheck(f, x_s, y_s, res)


def test_in_linf_the_smoothed_search_fires_the_batch_rule_on_the_masked_model():
    """l_inf: the batch rule's search is the one through smoothed ReLUs (``ESCALATION_SMOOTH``). On the masked
    model (a blind probe: every point judged sure) it lowers the sample, so the whole batch gets it, and most
    points land well below the fixed search (which pushes the linear part, the thresholded inputs' gradients
    being zero at the data)."""
    f, x_m, _ = _masked()
    x = _twelve_masked(x_m)
    y = np.asarray(jnp.argmax(f(x), -1)).astype(np.int32)
    assert np.all(y == 0)
    fixed = attacks.minimal_distance(f, x, y, norm="linf", key=KEY)
    cfg = AdaptiveConfig(max_searches=2, chunk=4, probe_noise=0.0, sample=0.1, spread_min=2)
    res = adaptive_distance(f, x, y, norm="linf", key=KEY, config=cfg)
    d, d_fixed = np.asarray(res.distance), np.asarray(fixed.distance)
    assert np.asarray(res.escalated).all()
    assert np.all(d <= d_fixed) and np.mean(d < 0.9 * d_fixed) >= 0.75
    _recheck(f, x, y, res, "linf")


def test_a_bad_smoothing_entry_is_refused_where_the_members_are_built(monkeypatch):
    """``ESCALATION_SMOOTH``: a position other than 0 / 1, or more rounds dropped than the search has after
    its first (``search_steps``), is a ValueError naming it; dropping all of those leaves the first round."""
    steps = escalation_members("l2", K, 1)[0].config("l2", K).search_steps
    for bad in (Smoothing(2, 0.1), Smoothing(1, 0.1, fewer_rounds=steps + 1), Smoothing(0, 0.1, fewer_rounds=-1)):
        monkeypatch.setitem(adaptive.ESCALATION_SMOOTH, "l2", bad)
        with pytest.raises(ValueError, match="ESCALATION_SMOOTH"):
            escalation_members("l2", K, 2)
    monkeypatch.setitem(adaptive.ESCALATION_SMOOTH, "l2", Smoothing(0, 0.1, fewer_rounds=steps))
    smooth, noisy = escalation_members("l2", K, 2)
    assert smooth.relu_temperature == 0.1 and smooth.config("l2", K).search_steps == 0
    c = noisy.config("l2", K)
    assert smooth.gradients_for("l2", K) == noisy.gradients_for("l2", K) - steps * c.restarts * c.engine.steps


def test_bad_input_raises_before_compilation():
    traced = []

    def f(x):
        traced.append(x.shape)
        return x.reshape(x.shape[0], -1)[:, :3]

    x = _points()[:2]
    y = np.zeros(2, np.int32)
    with pytest.raises(ValueError, match="norm"):
        adaptive_distance(f, x, y, norm="l3", key=KEY)
    with pytest.raises(ValueError, match="config"):
        adaptive_distance(f, x, y, norm="l2", key=KEY, config={"max_searches": 2})
    assert traced == []                    # refused before the model was even traced
    for name, bad in (("max_searches", -1), ("max_searches", 1.5), ("chunk", 0), ("rtol", 1.5),
                      ("linear_ratio", 0.9), ("probe_steps", 1), ("spread", 1.5), ("spread_min", 0), ("sample", 0), ("sample", 1.5),
                      ("spread_rtol", 0), ("spread_rtol", 1.0)):
        with pytest.raises(ValueError, match=name):
            AdaptiveConfig(**{name: bad})
    with pytest.raises(ValueError, match="eps_max"):
        adaptive_distance(f, x, y, norm="l2", key=KEY, bounds=None)
    with pytest.raises(ValueError, match="upper"):
        adaptive_distance(f, x, y, norm="l2", key=KEY, upper=np.array([0.1, np.nan]))
    with pytest.raises(ValueError, match="upper"):
        adaptive_distance(f, x, y, norm="l2", key=KEY, upper=np.ones(3))
