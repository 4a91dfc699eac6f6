"""The Maximum Margin Regulariser (rcurves.models.mmr) and TrainConfig(method='mmr' | 'mmr-univ')."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rcurves import linear_distance, linear_perturbation
from rcurves.models import ModelConfig, accuracy, apply_fn, init_params, make_logits_fn, mmr
from rcurves.models.training import (
    TrainConfig, init_state, make_train_step, mmr_k_b, mmr_schedule, train,
)

KEY = jax.random.PRNGKey(0)
NORMS = [("l2", 2), ("linf", np.inf), ("l1", 1)]
DUAL_Q = {"l2": 2, "linf": 1, "l1": np.inf}
TINY = ModelConfig(arch="mlp", input_shape=(6,), n_classes=4, hidden=(7, 5))   # a tiny random 2-layer MLP


@pytest.fixture(scope="module")
def tiny():
    """The tiny MLP's weights as numpy (W (out, in)), 30 points of R^6 and labels (some misclassified)."""
    params = init_params(TINY, jax.random.PRNGKey(1))
    ws = [(np.asarray(params[f"Dense_{i}"]["kernel"], np.float64).T, np.asarray(params[f"Dense_{i}"]["bias"],
                                                                               np.float64)) for i in range(3)]
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (30, 6)).astype(np.float32)
    y = rng.integers(0, 4, 30)
    y[:15] = np.argmax(np.asarray(apply_fn(TINY)(params, x[:15])), axis=1)    # half of them predicted correctly
    return params, ws, x, y


def region_maps(ws, x):
    """Brute force, per point: the affine map (rows, offsets) of every hidden unit and of the logits on
    the point's activation region, by multiplying the masked weight matrices out in float64."""
    (w1, b1), (w2, b2), (w3, b3) = ws
    h1 = w1 @ x + b1
    m1 = h1 > 0
    v2, a2 = w2 @ (m1[:, None] * w1), w2 @ (m1 * b1) + b2
    m2 = (v2 @ x + a2) > 0
    return (np.vstack([w1, v2]), np.concatenate([b1, a2]),
            w3 @ (m2[:, None] * v2), w3 @ (m2 * a2) + b3)


# ---------------------------------------------------------------------------
# the geometry


@pytest.mark.highest
@pytest.mark.parametrize("norm,p", NORMS)
def test_facet_distances_are_the_exact_distances_to_the_region_hyperplanes(tiny, norm, p):
    params, ws, x, y = tiny
    ours = np.asarray(mmr.facet_distances(TINY, params, x, norm))
    assert ours.shape == (30, 12)
    apply = apply_fn(TINY)
    for i in range(30):
        v, a, _, _ = region_maps(ws, x[i].astype(np.float64))
        ref = np.abs(v @ x[i] + a) / np.linalg.norm(v, DUAL_Q[norm], axis=1)
        np.testing.assert_allclose(ours[i], ref, rtol=1e-5, atol=1e-7)
        # the nearest facet is reached by Lemma 1's perturbation (Eq. 3 of paper 000) inside the region: there the
        # real network's unit is 0 and no other unit has switched
        j = int(np.argmin(ref))
        delta = np.asarray(linear_perturbation(v[j], a[j], x[i][None], p))[0]
        assert np.linalg.norm(delta, p) == pytest.approx(ref[j], rel=1e-4)
        w1, b1 = ws[0]
        h1 = w1 @ (x[i] + delta) + b1
        h2 = ws[1][0] @ np.maximum(h1, 0) + ws[1][1]
        h_new, h_old = np.concatenate([h1, h2]), v @ x[i] + a
        assert abs(h_new[j]) < 1e-4 * max(1.0, abs(h_old[j]))
        others = np.arange(12) != j
        assert np.all(np.sign(h_new[others]) == np.sign(h_old[others]))
    # and the model is the network that was trained: the same logits as apply_fn
    _, _, big_a, c = region_maps(ws, x[0].astype(np.float64))
    np.testing.assert_allclose(big_a @ x[0] + c, np.asarray(apply(params, x[:1]))[0], rtol=1e-5, atol=1e-6)


@pytest.mark.accelerator("tf32")
@pytest.mark.parametrize("norm,p", NORMS)
def test_decision_distances_are_lemma1_on_the_region_affine_map(tiny, norm, p):
    params, ws, x, y = tiny
    ours = np.asarray(mmr.decision_distances(TINY, params, x, y, norm))
    n_wrong = 0
    for i in range(30):
        _, _, big_a, c = region_maps(ws, x[i].astype(np.float64))
        z = big_a @ x[i] + c
        assert ours[i, y[i]] == np.inf
        for k in range(4):
            if k == y[i]:
                continue
            lemma1 = float(linear_distance(big_a[y[i]] - big_a[k], c[y[i]] - c[k], x[i][None], p)[0])
            assert ours[i, k] == pytest.approx(math.copysign(lemma1, z[y[i]] - z[k]), rel=1e-4, abs=1e-6)
        if np.argmax(z) == y[i]:   # a correct point: the smallest is the multi-class Lemma 1 distance
            ref = float(linear_distance(big_a.astype(np.float32), c.astype(np.float32), x[i][None], p, y[i:i + 1])[0])
            assert ours[i].min() == pytest.approx(ref, rel=1e-4)
        else:
            n_wrong += 1
            assert ours[i].min() < 0
    assert 5 < n_wrong <= 15       # both kinds of points were checked


def test_sampled_units_have_the_exact_rows_of_those_units(data):
    """Reverse mode on a sample of units (the CNN's path) gives, unit by unit, the distances of the exact
    forward-mode computation; samples are stratified over layers and deterministic in the key."""
    _, _, xte, yte = data
    x, y = xte[:12], yte[:12]
    cnn = ModelConfig(arch="cnn", input_shape=(8, 8, 1), n_classes=10)
    for model in (cnn, ModelConfig(arch="mlp", input_shape=(8, 8, 1), n_classes=10, hidden=(20, 12))):
        params = init_params(model, KEY)
        sizes = mmr.hidden_layer_sizes(model)
        full = jax.jit(lambda p: mmr.region_distances(model, p, x, y, norms=("linf", "l2", "l1")))(params)
        sample = jax.jit(lambda p, k: mmr.region_distances(model, p, x, y, norms=("linf", "l2", "l1"), units=16,
                                                           key=k))
        part = sample(params, KEY)
        idx = np.asarray(part.units)
        assert idx.shape == (12, 16) and all(len(set(r)) == 16 for r in idx)
        alloc = mmr.unit_allocation(sizes, 16)
        bounds = np.cumsum((0,) + sizes)
        for layer, a in enumerate(alloc):
            assert np.all(((idx >= bounds[layer]) & (idx < bounds[layer + 1])).sum(1) == a)
        np.testing.assert_allclose(np.asarray(part.facet), np.take_along_axis(np.asarray(full.facet), idx[None], 2),
                                   rtol=2e-4, atol=1e-6)
        np.testing.assert_allclose(np.asarray(part.decision), np.asarray(full.decision), rtol=2e-4, atol=1e-6)
        assert np.array_equal(np.asarray(sample(params, KEY).units), idx)
        assert not np.array_equal(np.asarray(sample(params, jax.random.PRNGKey(5)).units), idx)
    assert mmr.hidden_layer_sizes(cnn) == (256, 128, 100)
    assert mmr.hidden_layer_sizes(ModelConfig(arch="cnn", input_shape=(28, 28))) == (3136, 1568, 100)


# ---------------------------------------------------------------------------
# the regulariser


def test_mmr_term_is_the_hinge_mean_over_the_k_smallest():
    facet = jnp.array([[0.3, 0.05, 0.1, 0.5]])
    decision = jnp.array([[jnp.inf, 0.2, -0.1]])
    got = float(mmr.mmr_term(facet, decision, gamma_b=0.2, gamma_d=0.4, k_b=jnp.int32(2), k_d=1)[0])
    # facets: the 2 smallest 0.05, 0.1 -> (0.75 + 0.5) / 2; decisions: the smallest -0.1 -> 1.25
    assert got == pytest.approx(0.625 + 1.25, rel=1e-6)
    got = float(mmr.mmr_term(facet, decision, gamma_b=0.2, gamma_d=0.4, k_b=4, k_d=2)[0])
    assert got == pytest.approx((0.75 + 0.5) / 4 + (1.25 + 0.5) / 2, rel=1e-6)
    # a linear model: no facets
    assert float(mmr.mmr_term(jnp.zeros((1, 0)), decision, gamma_b=0.2, gamma_d=0.4, k_b=1, k_d=1)[0]) == 1.25


@pytest.mark.parametrize("norm,p", NORMS)
def test_linear_model_mmr_is_the_decision_term_on_lemma1_distances(data, norm, p):
    _, _, xte, yte = data
    model = ModelConfig(arch="linear", input_shape=(8, 8, 1), n_classes=10)
    params = init_params(model, jax.random.PRNGKey(2))
    w = np.asarray(params["Dense_0"]["kernel"]).T
    b = np.asarray(params["Dense_0"]["bias"])
    x, y = xte[:40], yte[:40]
    xf = x.reshape(40, -1)
    gamma, k_d = 0.3, 3
    got = np.asarray(mmr.regularizer(model, params, x, y, method="mmr", norm=norm, k_b=1, k_d=k_d,
                                     gamma_b=0.1, gamma_d=gamma).total)
    r = mmr.region_distances(model, params, x, y, norms=(norm,))
    assert r.facet.shape == (1, 40, 0)
    for i in range(40):
        z = w @ xf[i] + b
        d = sorted(math.copysign(float(linear_distance(w[y[i]] - w[k], b[y[i]] - b[k], xf[i][None], p)[0]),
                                 z[y[i]] - z[k]) for k in range(10) if k != y[i])
        ref = sum(max(0.0, 1 - v / gamma) for v in d[:k_d]) / k_d
        assert got[i] == pytest.approx(ref, rel=1e-4, abs=1e-6)
    assert got.max() > 0


def test_mmr_universal_is_the_weighted_sum_of_the_l1_and_linf_regularisers(tiny):
    params, _, x, y = tiny
    u = mmr.regularizer(TINY, params, x, y, method="mmr-univ", norm="linf", k_b=3, k_d=2, lambda_l1=2.0,
                        lambda_linf=5.0, gamma_l1=1.5, gamma_linf=0.4)
    for nm, gamma, part in (("l1", 1.5, u.l1), ("linf", 0.4, u.linf)):
        one = mmr.regularizer(TINY, params, x, y, method="mmr", norm=nm, k_b=3, k_d=2, gamma_b=gamma, gamma_d=gamma)
        np.testing.assert_allclose(np.asarray(part), np.asarray(one.total), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(u.total), 2.0 * np.asarray(u.l1) + 5.0 * np.asarray(u.linf), rtol=1e-6)
    assert float(jnp.min(u.l1)) > 0 and float(jnp.min(u.linf)) > 0


# ---------------------------------------------------------------------------
# training


def k_smallest_facets(model, params, x, norm, frac=0.1):
    d = np.sort(np.asarray(mmr.facet_distances(model, params, x, norm)), axis=1)
    k = max(1, int(frac * d.shape[1]))
    return float(np.mean(d[:, :k]))


def test_mmr_training_pushes_the_region_facets_away(data):
    """Same MLP, initialisation, key and epochs: the mean of each held-out point's 10 % smallest facet
    distances (the k_B trained on) grows far beyond standard training's, in the threat norm l_inf (and in
    l_1 and l_inf for mmr-univ); default lambdas and gammas."""
    xtr, ytr, xte, yte = data
    model = ModelConfig(arch="mlp", input_shape=(8, 8, 1), n_classes=10, hidden=(32, 32))
    common = dict(epochs=6, batch_size=64, lr=3e-3)
    runs = {"st": TrainConfig(method="st", **common),
            "mmr": TrainConfig(method="mmr", warmup_epochs=2.0, mmr_k_b=0.1, **common),
            "univ": TrainConfig(method="mmr-univ", warmup_epochs=2.0, mmr_k_b=0.1, **common)}
    params = {k: train(model, c, xtr, ytr, key=KEY, progress=False).params for k, c in runs.items()}
    x = xte[:150]
    fac = {k: {nm: k_smallest_facets(model, p, x, nm) for nm in ("linf", "l1")} for k, p in params.items()}
    # measured (150 test points; keys 0, 1, 2, 3): linf ST 0.012, 0.011, 0.013, 0.013; MMR 0.19, 0.12, 0.19, 0.19;
    # MMR-UNIV 0.26, 0.26, 0.24, 0.24; l1 ST 0.24, 0.21, 0.27, 0.27; MMR-UNIV 3.6, 3.7, 3.4, 3.6 (ratios >= 8.7);
    # test accuracy ST 0.91-0.93, MMR 0.87-0.93, MMR-UNIV 0.85-0.90
    assert fac["mmr"]["linf"] > 5 * fac["st"]["linf"], fac
    assert fac["univ"]["linf"] > 5 * fac["st"]["linf"] and fac["univ"]["l1"] > 5 * fac["st"]["l1"], fac
    for k, p in params.items():
        assert accuracy(make_logits_fn(model, p), xte, yte) > 0.8, k


@pytest.mark.parametrize("method,extra", [("mmr", {}), ("mmr-univ", {}), ("mmr", {"mmr_units": 6}),
                                          ("mmr", {"mmr_at_frac": 0.5, "eps": 0.2})])
def test_mmr_step_compiles_once_follows_the_schedule_and_is_deterministic(data, method, extra):
    xtr, ytr, _, _ = data
    model = ModelConfig(arch="mlp", input_shape=(8, 8, 1), n_classes=10, hidden=(13,))   # a step of its own
    cfg = TrainConfig(method=method, epochs=3, batch_size=32, warmup_epochs=2.0, attack_steps=3,
                      mmr_k_b=(0.5, 0.1), **extra)
    a = train(model, cfg, xtr[:96], ytr[:96], key=KEY, progress=False)
    assert make_train_step(model, cfg)._cache_size() == 1     # 9 updates, 6 weights, 3 k_B: one program
    b = train(model, cfg, xtr[:96], ytr[:96], key=KEY, progress=False)
    assert all(np.array_equal(u, v) for u, v in zip(jax.tree_util.tree_leaves(a.params),
                                                     jax.tree_util.tree_leaves(b.params)))
    assert a.history == b.history
    n = extra.get("mmr_units", 13)
    # k_B = floor(frac * n), frac = 0.5 - 0.4 e / 3 at epochs e = 1, 2, 3
    assert [h["mmr_k_b"] for h in a.history] == [max(1, math.floor(f * n + 1e-9)) for f in (0.5 - 0.4 / 3,
                                                                                               0.5 - 0.8 / 3, 0.1)]
    assert [h["mmr_ramp"] for h in a.history] == pytest.approx([0.5, 1.0, 1.0])
    assert all(h["mmr"] > 0 and math.isfinite(h["loss"]) for h in a.history)
    assert [h["eps"] for h in a.history] == pytest.approx([extra.get("eps", 0.0)] * 3)
    if method == "mmr-univ":
        assert all(h["mmr"] == pytest.approx(3.0 * h["mmr_l1"] + 12.0 * h["mmr_linf"], rel=1e-5) for h in a.history)
    assert make_train_step(model, cfg)._cache_size() == 1
    c = train(model, cfg, xtr[:96], ytr[:96], key=jax.random.PRNGKey(1), progress=False)
    assert c.history != a.history


@pytest.mark.slow
def test_the_cnn_trains_with_mmr_at_on_a_unit_sample(data):
    """The C.1 CNN (on 8x8 digits) with MMR + AT on a sample of 24 hidden units per point: one program for the
    run, finite losses, a positive regulariser, every parameter moved."""
    xtr, ytr, _, _ = data
    model = ModelConfig(arch="cnn", input_shape=(8, 8, 1), n_classes=10)
    cfg = TrainConfig(method="mmr", eps=0.1, mmr_at_frac=0.5, mmr_units=24, epochs=2, batch_size=32,
                      warmup_epochs=1.0, attack_steps=3)
    r = train(model, cfg, xtr[:64], ytr[:64], key=KEY, progress=False)
    assert make_train_step(model, cfg)._cache_size() == 1
    assert all(math.isfinite(h["loss"]) and h["mmr"] > 0 for h in r.history)
    assert [h["mmr_k_b"] for h in r.history] == [1, 1]        # 24 units x (6 %, 2 %) = 1.44, 0.48 -> 1, 1
    start = init_params(model, jax.random.split(KEY, 3)[0])    # train's initialisation key
    assert all(not np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(start),
                                                         jax.tree_util.tree_leaves(r.params)))


def test_mmr_at_trains_on_adversarial_examples(data):
    """From the same state and batch, an MMR + AT step has a larger loss than an MMR step (half of its
    batch is PGD's), and an MMR step a larger loss than an ST step (the regulariser is added)."""
    xtr, ytr, _, _ = data
    model = ModelConfig(arch="mlp", input_shape=(8, 8, 1), n_classes=10, hidden=(16,))
    x, y = xtr[:64], ytr[:64]
    st = TrainConfig(method="st", batch_size=64)
    s0 = init_state(model, st, KEY)
    losses = {}
    for name, cfg, eps in (("st", st, 0.0), ("mmr", TrainConfig(method="mmr", batch_size=64), 0.0),
                           ("mmr+at", TrainConfig(method="mmr", eps=0.3, mmr_at_frac=0.5, batch_size=64), 0.3)):
        _, m = make_train_step(model, cfg)(s0, x, y, KEY, np.float32(eps))
        losses[name] = float(m["loss"])
    assert losses["st"] < losses["mmr"] < losses["mmr+at"], losses


def test_schedules():
    cfg = TrainConfig(method="mmr", epochs=10, warmup_epochs=2.0)
    assert [mmr_k_b(cfg, e, 1000) for e in (0, 4, 9)] == [92, 60, 20]          # 10 % -> 2 % (the authors')
    u = TrainConfig(method="mmr-univ", epochs=4)
    assert [mmr_k_b(u, e, 100) for e in range(4)] == [16, 12, 8, 5]             # 20 % -> 5 %
    assert mmr_k_b(TrainConfig(method="mmr", mmr_k_b=0.5), 0, 7) == 3
    assert mmr_k_b(cfg, 9, 10) == 1 and mmr_k_b(cfg, 0, 0) == 1
    s = [mmr_schedule(cfg, t, 5, 1000) for t in (0, 4, 9, 10, 49)]
    assert [v["ramp"] for v in s] == pytest.approx([0.1, 0.5, 1.0, 1.0, 1.0])
    assert [v["k_b"] for v in s] == [92, 92, 84, 76, 20]


# ---------------------------------------------------------------------------
# settings


def test_bad_settings_raise_naming_the_argument(data):
    bad = [
        (dict(method="mmr", mmr_lambda=0.0), "mmr_lambda"), (dict(method="mmr", mmr_lambda=-1), "mmr_lambda"),
        (dict(method="mmr", mmr_gamma_b=0.0), "mmr_gamma_b"), (dict(method="mmr", mmr_gamma_d=float("nan")),
                                                              "mmr_gamma_d"),
        (dict(method="mmr", mmr_k_b=0.0), "mmr_k_b"), (dict(method="mmr", mmr_k_b=(0.1, 1.5)), "mmr_k_b"),
        (dict(method="mmr", mmr_k_b=(0.1, 0.2, 0.3)), "mmr_k_b"), (dict(method="mmr", mmr_k_b="all"), "mmr_k_b"),
        (dict(method="mmr", mmr_k_d=0), "mmr_k_d"), (dict(method="mmr", mmr_k_d=2.5), "mmr_k_d"),
        (dict(method="mmr", mmr_units=0), "mmr_units"), (dict(method="mmr", mmr_units=True), "mmr_units"),
        (dict(method="mmr", mmr_at_frac=1.5, eps=0.1), "mmr_at_frac"),
        (dict(method="mmr", mmr_at_frac=0.5), "eps"), (dict(method="mmr", eps=0.1), "eps"),
        (dict(method="mmr-univ", eps=0.1), "eps"), (dict(method="mmr-univ", mmr_at_frac=0.5, eps=0.1), "mmr_at_frac"),
        (dict(method="mmr-univ", mmr_gamma_linf=0.0), "mmr_gamma_linf"),
        (dict(method="mmr-univ", mmr_lambda_l1=-1.0), "mmr_lambda_l1"),
        (dict(method="mmr-univ", mmr_lambda_l1=0.0, mmr_lambda_linf=0.0), "mmr_lambda_l1"),
        (dict(method="mmr-univ", mmr_lambda=1.0), "mmr_lambda"), (dict(method="mmr", mmr_gamma_l1=2.0),
                                                                  "mmr_gamma_l1"),
        (dict(method="at", eps=0.1, mmr_units=8), "mmr_units"), (dict(method="st", mmr_k_d=3), "mmr_k_d"),
        (dict(method="mmr_univ"), "method"),
    ]
    for kw, name in bad:
        with pytest.raises(ValueError, match=name):
            TrainConfig(**kw)
    TrainConfig(method="mmr-univ", mmr_lambda_l1=0.0)
    TrainConfig(method="mmr", mmr_at_frac=1.0, eps=0.1)
    # model-dependent settings, refused before anything compiles (before the data are even used)
    xtr, ytr, _, _ = data
    mlp = ModelConfig(arch="mlp", input_shape=(8, 8, 1), n_classes=10, hidden=(8, 4))
    lin = ModelConfig(arch="linear", input_shape=(8, 8, 1), n_classes=10)
    resnet = ModelConfig(arch="resnet", input_shape=(8, 8, 1), n_classes=10, depth=8, width=4)
    mnist_cnn = ModelConfig(arch="cnn", input_shape=(28, 28), n_classes=10)
    for model, cfg, pattern in (
            (resnet, TrainConfig(method="mmr"), r"method: 'mmr' .*arch 'resnet'"),
            (resnet, TrainConfig(method="mmr-univ"), r"method: 'mmr-univ' .*arch 'resnet'"),
            (mlp, TrainConfig(method="mmr", mmr_k_d=10), "mmr_k_d"),
            (mlp, TrainConfig(method="mmr", mmr_units=13), "mmr_units"),
            (mlp, TrainConfig(method="mmr", mmr_units=1), "mmr_units"),
            (lin, TrainConfig(method="mmr", mmr_units=4), "mmr_units"),
            (mnist_cnn, TrainConfig(method="mmr"), "mmr_units")):
        with pytest.raises(ValueError, match=pattern):
            make_train_step(model, cfg)
        if model.input_shape == (8, 8, 1):
            with pytest.raises(ValueError, match=pattern):
                train(model, cfg, xtr[:8], ytr[:8], progress=False)
    make_train_step(mnist_cnn, TrainConfig(method="mmr", mmr_units=64))      # builds (compiles on first call)
    # the geometry's own inputs
    params = init_params(mlp, KEY)
    for kw, name in ((dict(x=xtr[:4, :7], y=ytr[:4]), "x"), (dict(x=xtr[:4], y=ytr[:3]), "y"),
                     (dict(x=xtr[:4], y=ytr[:4] + 10), "y"), (dict(x=xtr[:4], y=ytr[:4], norms=("l3",)), "norms"),
                     (dict(x=xtr[:4], y=ytr[:4], units=13, key=KEY), "units"),
                     (dict(x=xtr[:4], y=ytr[:4], units=4), "key")):
        with pytest.raises(ValueError, match=name):
            mmr.region_distances(mlp, params, **kw)


def test_to_dict_of_existing_configurations_is_unchanged_and_mmr_fields_round_trip():
    assert TrainConfig(method="at", eps=0.3, epochs=2, seed=1).to_dict() == {
        "method": "at", "norm": "linf", "eps": 0.3, "epochs": 2, "batch_size": 128, "lr": 1e-3, "attack_steps": 10,
        "rel_step": 2.5, "warmup_epochs": 0.0, "bounds": [0.0, 1.0], "seed": 1}
    for cfg in (TrainConfig(), TrainConfig(method="trades", eps=0.3, trades_beta=1.0),
                TrainConfig(method="crown-ibp", eps=0.1, warmup_epochs=1.0, augment="mixup"),
                TrainConfig(method="mmr"), TrainConfig(method="mmr-univ")):
        assert not any(k.startswith("mmr") for k in cfg.to_dict()), cfg.to_dict()
    assert TrainConfig().to_dict() == {"method": "st", "norm": "linf", "eps": 0.0, "epochs": 10, "batch_size": 128,
                                       "lr": 1e-3, "attack_steps": 10, "rel_step": 2.5, "warmup_epochs": 0.0,
                                       "bounds": [0.0, 1.0], "seed": 0}
    at = TrainConfig(method="mmr", eps=0.1, mmr_at_frac=0.5, mmr_k_b=[0.2, 0.04], mmr_units=64, mmr_lambda=1.0)
    d = at.to_dict()
    assert {k: v for k, v in d.items() if k.startswith("mmr")} == {
        "mmr_lambda": 1.0, "mmr_k_b": [0.2, 0.04], "mmr_units": 64, "mmr_at_frac": 0.5}
    assert TrainConfig.from_dict(d) == at and at.mmr_k_b == (0.2, 0.04)
    univ = TrainConfig(method="mmr-univ", mmr_gamma_linf=0.15, mmr_k_d=5)
    assert TrainConfig.from_dict(univ.to_dict()) == univ
    assert TrainConfig(method="mmr", mmr_k_b=0.05).mmr_k_b == (0.05, 0.05)
    assert [c.name for c in (TrainConfig(method="mmr"), at, TrainConfig(method="mmr-univ"), univ,
                             TrainConfig(method="mmr", norm="l2", mmr_lambda=3.0, mmr_gamma_b=0.45,
                                         mmr_gamma_d=0.45))] == [
        "MMR-linf", "MMR+AT-linf-0.1-lam1-gam0.2", "MMR-UNIV", "MMR-UNIV-lam3,12-gam1,0.15", "MMR-l2-lam3-gam0.45"]


def test_cli_train_accepts_the_mmr_methods():
    from rcurves.cli import build_parser

    a = build_parser().parse_args(["train", "--data", "digits", "--out", "x", "--method", "mmr", "--mmr-lambda", "1",
                                   "--mmr-k-b", "0.1", "0.02", "--mmr-units", "64", "--mmr-at-frac", "0.5"])
    assert a.method == "mmr" and a.mmr_lambda == 1.0 and a.mmr_k_b == [0.1, 0.02] and a.mmr_units == 64
    a = build_parser().parse_args(["train", "--data", "digits", "--out", "x", "--method", "mmr-univ",
                                   "--mmr-gamma-linf", "0.15", "--mmr-lambda-l1", "2"])
    assert a.method == "mmr-univ" and a.mmr_gamma_linf == 0.15 and a.mmr_lambda_l1 == 2.0 and a.mmr_lambda is None
