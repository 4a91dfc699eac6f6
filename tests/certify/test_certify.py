"""rcurves.certify: certified radius <= exact distance <= attack distance, against independent checks."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attacks import minimal_distance
from rcurves import certify, models
from rcurves.nets import bounds as cb
from rcurves.certify import radius as radius_mod
from rcurves.exact.linear import linear_distance

BOX = (-1.0, 1.0)


def _random_mlp(sizes, seed, scale=3.0):
    rng = np.random.default_rng(seed)
    return certify.mlp([
        (rng.normal(size=(o, i)).astype(np.float32) * scale / np.sqrt(i), rng.normal(size=o).astype(np.float32))
        for i, o in zip(sizes[:-1], sizes[1:])
    ])


def _trained_mlp(seed=0):
    """A 2-16-16-3 MLP trained with Adam for 300 steps on three Gaussian blobs in [-1, 1]^2."""
    rng = np.random.default_rng(seed)
    centres = np.array([[-0.5, -0.4], [0.5, -0.3], [0.0, 0.55]], np.float32)
    y = rng.integers(0, 3, 600)
    x = np.clip(centres[y] + 0.25 * rng.normal(size=(600, 2)), -1, 1).astype(np.float32)
    net0 = _random_mlp([2, 16, 16, 3], seed + 1, scale=1.0)
    params = [(l.w, l.b) for l in net0.layers if isinstance(l, certify.Dense)]

    def apply(p, z):
        for i, (w, b) in enumerate(p):
            z = z @ w.T + b
            z = jnp.maximum(z, 0.0) if i < len(p) - 1 else z
        return z

    def loss(p):
        return optax.softmax_cross_entropy_with_integer_labels(apply(p, x), y).mean()

    opt = optax.adam(0.02)

    @jax.jit
    def step(p, s):
        g = jax.grad(loss)(p)
        u, s = opt.update(g, s)
        return optax.apply_updates(p, u), s

    s = opt.init(params)
    for _ in range(300):
        params, s = step(params, s)
    return certify.mlp([(np.asarray(w), np.asarray(b)) for w, b in params]), x[:8], y[:8]


def _params(cfg, seed):
    """Random parameters of a toolkit model (numpy; no RNG compilation)."""
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(lambda s: (rng.normal(size=s.shape) / np.sqrt(np.prod(s.shape[:-1]) or 1)
                                             ).astype(np.float32), models.param_shapes(cfg))


def _points(net, n=8, seed=1):
    x = np.random.default_rng(seed).uniform(-0.9, 0.9, size=(n, 2)).astype(np.float32)
    return x, np.argmax(np.asarray(net.logits(x)), axis=1).astype(np.int32)


# One architecture (2-16-16-3) and 8 points in most tests, so that they share compiled programs.
NET = _random_mlp([2, 16, 16, 3], 6)  # three classes, each on a fifth of the box or more


def _spec_bounds(net, x, y, eps, norm, method, bounds=BOX):
    """Logit lower/upper bounds and margin lower bounds, from one program."""
    n, k = x.shape[0], net.n_classes
    eye = np.eye(k, dtype=np.float32)
    C = np.stack([np.concatenate([eye, -eye, eye[yi][None] - eye]) for yi in y])
    cfg = cb.BoundConfig(norm=norm, method=method, domain=bounds)
    lb = np.asarray(radius_mod._spec_jit(net, jnp.asarray(x).reshape((n,) + net.input_shape),
                                         jnp.full(n, eps, jnp.float32), jnp.asarray(C), cfg=cfg, batch=n))
    return lb[:, :k], -lb[:, k:2 * k], lb[:, 2 * k:]


def _norm(v, norm):
    v = np.abs(np.asarray(v, np.float64).reshape(v.shape[0], -1))
    return {"linf": v.max(1), "l2": np.sqrt((v ** 2).sum(1)), "l1": v.sum(1)}[norm]


def _ball_samples(norm, eps, m, d, seed):
    """Points of the ball: box vertices and interior points (l_inf), scaled random directions (l_2, l_1)."""
    rng = np.random.default_rng(seed)
    if norm == "linf":
        v = rng.choice([-1.0, 1.0], size=(m,) + d)
        return (eps * np.where(rng.random((m,) + (1,) * len(d)) < 0.5, v, rng.uniform(-1, 1, (m,) + d))
                ).astype(np.float32)
    v = rng.normal(size=(m,) + d) * (rng.random((m,) + d) < 0.5)  # some sparse directions for l_1
    v /= np.maximum(_norm(v, norm), 1e-12).reshape((m,) + (1,) * len(d))
    return (eps * v * rng.random((m,) + (1,) * len(d)) ** 0.5).astype(np.float32)


# --------------------------------------------------------------------------- layers


@pytest.mark.highest
def test_from_model_reproduces_make_logits_fn():
    # the C.1 CNN (two 'SAME' stride-2 convolutions computed as patches); the MLP's weights
    # are checked in test_band_for_model_is_certified_radius_of_the_model
    cfg = models.ModelConfig(arch="cnn", input_shape=(8, 8, 1))
    params = _params(cfg, 1)
    net = certify.from_model(cfg, params)
    x = jax.random.uniform(jax.random.PRNGKey(2), (3, 8, 8, 1))
    want = np.asarray(models.make_logits_fn(cfg, params)(x))
    np.testing.assert_allclose(np.asarray(jax.jit(lambda n, x: n.logits(x))(net, x)), want, rtol=0, atol=1e-6)
    # the verifiers' linear part of each convolution (nets.layers.conv_phases) is the same map
    @jax.jit
    def linear_and_affine(net, z0, z1):
        from rcurves.nets import layers as lay
        return [(lay.block_linear(net.blocks[k], z), lay.block_apply(net.blocks[k], z)
                 - lay.block_apply(net.blocks[k], jnp.zeros_like(z))) for k, z in enumerate((z0, z1))]

    zs = [jax.random.normal(jax.random.PRNGKey(k), net.shapes[k]) for k in (0, 1)]
    for lin, aff in linear_and_affine(net, *zs):
        np.testing.assert_allclose(np.asarray(lin), np.asarray(aff), rtol=1e-5, atol=1e-5)


def _dense(net):
    """Dense matrices and biases of every block (numpy float64), for reference computations."""
    mats, consts = certify.milp._dense_blocks(net)
    return [np.asarray(m, np.float64) for m in mats], [np.asarray(c, np.float64) for c in consts]


def test_cnn_second_layer_bounds_equal_a_dense_numpy_crown_and_contain_logits():
    cfg = models.ModelConfig(arch="cnn", input_shape=(9, 9, 2), n_classes=4)
    net = certify.from_model(cfg, _params(cfg, 5))
    x = np.asarray(jax.random.uniform(jax.random.PRNGKey(6), (9, 9, 2)))
    eps, norm = 0.3, "l2"  # the box and the dual-norm bound both enter for l_2
    bc = cb.BoundConfig(norm=norm, method="crown")
    C = np.concatenate([np.eye(4), -np.eye(4)]).astype(np.float32)

    @jax.jit
    def run(net, x):
        prep = cb.prepare(net, bc)
        assert prep.local  # the receptive-field path of certify.local
        hidden, spec = cb.bounds_and_spec(prep, x, eps, C, bc)
        return hidden, spec.lb

    hidden, lb = run(net, x)
    # reference: CROWN for layer 2 written densely in numpy from layer 1's bounds (Zhang et al. 2018)
    (w1, w2, *_), (c1, c2, *_) = _dense(net)
    l1, u1 = (np.asarray(a, np.float64).ravel() for a in hidden[0])
    unstable = (l1 < 0) & (u1 > 0)
    su = np.where(l1 >= 0, 1.0, np.where(unstable, u1 / np.where(unstable, u1 - l1, 1), 0.0))
    sl = np.where(l1 >= 0, 1.0, np.where(unstable, (u1 > -l1).astype(float), 0.0))
    tu = np.where(unstable, -su * l1, 0.0)
    xf = x.ravel().astype(np.float64)
    lo, hi = np.clip(xf - eps, 0, 1), np.clip(xf + eps, 0, 1)
    for sign, got in ((1.0, hidden[1][0]), (-1.0, -np.asarray(hidden[1][1]))):
        lam = sign * w2
        bias = sign * c2 + np.minimum(lam, 0) @ tu
        lam = np.maximum(lam, 0) * sl + np.minimum(lam, 0) * su
        bias, lam = bias + lam @ c1, lam @ w1
        box = np.maximum(lam, 0) @ lo + np.minimum(lam, 0) @ hi + bias
        dual = lam @ xf + bias - eps * np.sqrt((lam ** 2).sum(1))
        ref = np.maximum(box, dual)  # lower bound of sign * h_2
        # CROWN's bound intersected with IBP's: at least as tight as the reference, equal where CROWN wins
        got = np.asarray(got, np.float64).ravel()
        assert np.all(got >= ref - 1e-4)
        assert np.mean(np.abs(got - ref) < 1e-4) > 0.5
    z = np.asarray(net.logits(np.clip(x[None] + _ball_samples(norm, eps, 3000, x.shape, 3), 0, 1)))
    lo_z, hi_z = np.asarray(lb[:4]), -np.asarray(lb[4:])
    assert np.all(z >= lo_z - 1e-5) and np.all(z <= hi_z + 1e-5)
    assert np.all(hi_z - lo_z < 20.0)  # and they are not vacuous


# --------------------------------------------------------------------------- soundness of the bounds


@pytest.mark.parametrize("norm,eps,methods", [
    ("linf", 0.15, certify.METHODS),
    ("l2", 0.3, ("crown",)),
    ("l1", 0.5, ("crown",)),
])
def test_bounds_contain_logits_of_random_inputs(norm, eps, methods):
    x, y = _points(NET)
    d = _ball_samples(norm, eps, 4000, (2,), 2)
    got = {m: _spec_bounds(NET, x, y, eps, norm, m) for m in methods}
    for i in range(x.shape[0]):
        z = np.asarray(NET.logits(np.clip(x[i] + d, *BOX)))
        other = np.arange(3) != y[i]
        margin = z[:, y[i]][:, None] - z[:, other]
        for m, (lo, hi, mb) in got.items():
            assert np.all(z >= lo[i] - 1e-5) and np.all(z <= hi[i] + 1e-5), m
            assert np.all(margin >= mb[i][other] - 1e-5), m
    if norm == "linf":
        # alpha-CROWN starts from CROWN's slopes and keeps its best bounds; CROWN-IBP's last
        # layer is tighter than IBP's, and so are CROWN's hidden bounds
        assert np.all(got["alpha-crown"][2] >= got["crown"][2] - 1e-5)
        assert np.all(got["crown-ibp"][2] >= got["ibp"][2] - 1e-5)
        assert np.all(got["crown"][2] >= got["ibp"][2] - 1e-5)


# --------------------------------------------------------------------------- radius <= exact <= attack


@pytest.mark.accelerator("bf16")
def test_linear_model_all_three_equal_lemma1():
    rng = np.random.default_rng(4)
    w = rng.normal(size=(4, 6)).astype(np.float32)
    b = rng.normal(size=4).astype(np.float32)
    x = rng.normal(size=(6, 6)).astype(np.float32)
    y = np.argmax(x @ w.T + b, axis=1)
    y[0] = (y[0] + 1) % 4  # a misclassified point: distance 0 for all three
    net = certify.mlp([(w, b)])
    for norm in ("linf", "l1", "l2"):
        exact = np.asarray(linear_distance(w, b, x, norm, y))
        assert exact[0] == 0 and np.all(exact[1:] > 0)
        r = np.asarray(certify.certified_radius(net, x, y, norm=norm, bounds=None))
        np.testing.assert_allclose(r, exact, rtol=1e-5)
        if norm == "l1":  # nothing to split: branch and bound is CROWN, exact
            rb = np.asarray(certify.certified_radius(net, x, y, norm=norm, bounds=None, method="bab"))
            np.testing.assert_allclose(rb, exact, rtol=1e-5)
        if norm == "l2":
            continue
        if norm == "linf":
            att = minimal_distance(net.logits, x, y, norm=norm, key=jax.random.PRNGKey(0), bounds=None,
                                   eps_max=float(exact.max()) * 2, restarts=4)
            np.testing.assert_allclose(np.asarray(att.distance), exact, rtol=1e-3)
            res = certify.exact_search(net, x, y, norm=norm, bounds=None, upper=np.asarray(att.distance),
                                       x_adv=att.x_adv)
        else:  # the MILP finds the point itself inside a ball 1.5 times too large
            res = certify.exact_search(net, x, y, norm=norm, bounds=None, upper=1.5 * exact + 0.1)
        assert res.exact.all()
        np.testing.assert_allclose(res.lower, exact, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(res.upper, exact, rtol=certify.EXACT_RTOL)


def _grid_search(net, x, y, norm, n_grid=1201):
    """Per point the closest misclassified point of a dense grid on the box: ``(distance, point)``."""
    g = np.linspace(*BOX, n_grid, dtype=np.float32)
    grid = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    pred = np.argmax(np.asarray(jax.jit(lambda n, z: n.logits(z))(net, grid)), axis=1)
    best, best_x = np.full(len(x), np.inf, np.float32), x.copy()
    for i in range(len(x)):
        adv = np.flatnonzero(pred != y[i])
        dist = _norm(grid[adv] - x[i], norm)
        best[i], best_x[i] = dist.min(), grid[adv[np.argmin(dist)]]
    return best, best_x, g[1] - g[0]


def test_certified_below_exact_below_attack_trained():
    """IBP, CROWN-IBP, CROWN and branch and bound below the MILP's exact distance, below the attack's."""
    net, x, y = _trained_mlp()
    assert len(set(y.tolist())) > 1 and np.all(np.argmax(np.asarray(net.logits(x)), 1) == y)
    for norm in ("linf", "l1"):
        if norm == "linf":  # PGD's minimal-distance search
            att = minimal_distance(net.logits, x, y, norm=norm, key=jax.random.PRNGKey(1), bounds=BOX)
            u, xa = np.asarray(att.distance), att.x_adv
        else:  # a dense random search
            u, xa, _ = _grid_search(net, x, y, norm)
        res = certify.exact_search(net, x, y, norm=norm, bounds=BOX, upper=u, x_adv=xa, time_limit=30)
        assert res.exact.all(), res.status
        assert np.all(res.upper <= u)
        for method in ("crown", "crown-ibp", "ibp") if norm == "linf" else ("crown",):
            r = np.asarray(certify.certified_radius(net, x, y, norm=norm, method=method, bounds=BOX, upper=u))
            assert np.all(r <= res.lower * (1 + 1e-5) + 1e-7), (method, r, res.lower)
            assert np.all(r > 0)
            if method == "crown":
                assert np.all(r > 0.3 * res.lower)  # CROWN is not vacuous on these networks
        # branch and bound (a frontier of at most 64 subdomains per certification,
        # children warm-started from their parent's alpha and beta): sound, never
        # below CROWN, and at the MILP's exact distance within 1% at the median
        # (measured: l_inf 0.9997 of the exact distance with 8 rounds, CROWN 0.92)
        crown = np.asarray(certify.certified_radius(net, x, y, norm=norm, bounds=BOX, upper=u))
        bab = np.asarray(certify.certified_radius(net, x, y, norm=norm, method="bab", budget=64, bounds=BOX,
                                                  upper=u))
        assert np.all(bab <= res.lower * (1 + 1e-5) + 1e-7), (bab, res.lower)
        assert np.all(bab >= crown)
        assert np.median(bab / res.lower) >= 0.99, (bab / res.lower, crown / res.lower)
        if norm == "linf":  # brackets and rounds are data: a new bracket reuses the program
            from rcurves.certify import bab as bab_mod
            before = bab_mod.bab_jit._cache_size()
            again = np.asarray(certify.certified_radius(net, x, y, norm=norm, method="bab", budget=64, bounds=BOX,
                                                        upper=1.5 * u, search_steps=7))
            assert bab_mod.bab_jit._cache_size() == before
            assert np.all(again <= res.lower * (1 + 1e-5) + 1e-7)


def test_certified_below_milp_below_dense_random_search_and_attained():
    x, y = _points(NET, seed=5)
    for norm in ("linf", "l1"):
        best, best_x, h = _grid_search(NET, x, y, norm)
        assert np.isfinite(best).all()
        res = certify.exact_search(NET, x, y, norm=norm, bounds=BOX, upper=best, x_adv=best_x)
        assert res.exact.all()
        assert np.all(res.upper <= best) and np.all(res.upper < best - 1e-6)  # the MILP beats the grid
        assert np.all(res.lower >= best - 4 * h)                                # which came close
        for method in ("crown", "crown-ibp", "ibp") if norm == "linf" else ("crown",):
            r = np.asarray(certify.certified_radius(NET, x, y, norm=norm, method=method, bounds=BOX, upper=best))
            assert np.all(r <= res.lower * (1 + 1e-5) + 1e-7), (method, r, res.lower)
            assert np.all(r > (0.3 if method == "crown" else 0.0) * res.lower)  # not vacuous
        # the returned point attains the distance: misclassified by the float32 network, inside the box
        assert np.all(np.argmax(np.asarray(NET.logits(res.x_adv)), 1) != y)
        assert np.all((res.x_adv >= BOX[0]) & (res.x_adv <= BOX[1]))
        np.testing.assert_allclose(_norm(res.x_adv - x, norm), res.upper, rtol=1e-6)


def test_radius_bracket_misclassified_and_no_recompilation():
    x, y = _points(NET)
    y = y.copy()
    y[2] = (y[2] + 1) % 3
    r_safe = np.asarray(certify.certified_radius(NET, x, y, norm="linf", bounds=BOX))
    before = radius_mod._radius_jit._cache_size()
    up = np.where(np.arange(8) % 2 == 0, 1.5 * r_safe + 0.01, np.inf).astype(np.float32)
    r_up = np.asarray(certify.certified_radius(NET, x, y, norm="linf", bounds=BOX, upper=up, search_steps=30))
    assert radius_mod._radius_jit._cache_size() == before  # rounds and brackets are data, not programs
    assert r_safe[2] == 0 and r_up[2] == 0
    assert np.all(r_up <= up)
    np.testing.assert_allclose(r_safe, r_up, rtol=2e-3)  # the same radius from either bracket
    # a network that predicts one class on the whole box is certified there: no adversarial exists
    const = certify.mlp([(np.zeros((3, 2), np.float32), np.array([1.0, 0.0, 0.0], np.float32))])
    r = certify.certified_radius(const, x, np.zeros(8, np.int32), norm="l1", bounds=BOX)
    assert np.all(np.isinf(np.asarray(r)))


def test_highs_bindings_and_scipy_fallback_agree(monkeypatch):
    # min -x0 - 2 x1 s.t. x0 + x1 <= 3.5, x0 - x1 <= 1, x integer in [0, 3]: optimum -6 at (0, 3)
    from scipy.sparse import csr_matrix
    from rcurves.certify import highs

    args = ([-1.0, -2.0], csr_matrix(np.array([[1.0, 1.0], [1.0, -1.0]])), [-np.inf, -np.inf], [3.5, 1.0],
            [0.0, 0.0], [3.0, 3.0], [1, 1])
    warm = highs.solve(*args, time_limit=5.0, start=np.array([0.0, 3.0]))
    monkeypatch.setattr(highs, "_HIGHS", None)
    fallback = highs.solve(*args, time_limit=5.0)
    for sol in (warm, fallback):
        assert sol.status == "optimal" and sol.value == pytest.approx(-6.0) and sol.dual == pytest.approx(-6.0)
        assert -sol.x[0] - 2 * sol.x[1] == pytest.approx(-6.0)


# --------------------------------------------------------------------------- the band


def test_band_brackets_and_its_area():
    rng = np.random.default_rng(6)
    true = rng.exponential(size=50)
    lower, upper = true * rng.uniform(0.3, 1, 50), true * rng.uniform(1, 2, 50)
    upper[:3] = np.inf
    true[3] = lower[3] = upper[3] = 0.0  # a misclassified point
    eps = np.linspace(0, 3, 3001)
    cu, cl = certify.robustness_band(upper, lower, eps)
    ct = (true[None, :] <= eps[:, None]).mean(1)
    assert np.all(np.asarray(cl) <= ct + 1e-6) and np.all(ct <= np.asarray(cu) + 1e-6)
    s = certify.band_summary(upper, lower, eps)
    area = np.sum((np.asarray(cu) - np.asarray(cl))[:-1] * np.diff(eps))  # Riemann sum of step curves
    assert abs(s.area - area) < 2e-3
    assert s.met == pytest.approx(1 / 50)  # only the point with both bounds 0
    finite = np.isfinite(upper) & (upper > 0)
    assert s.median_ratio == pytest.approx(np.median(upper[finite] / lower[finite]))
    with pytest.raises(ValueError, match="lower"):
        certify.robustness_band(np.array([1.0]), np.array([2.0]), eps)


def test_band_for_model_is_certified_radius_of_the_model():
    cfg = models.ModelConfig(arch="mlp", input_shape=(2,), n_classes=3, hidden=(16, 16))
    params = {f"Dense_{i}": {"kernel": l.w.T, "bias": l.b}
              for i, l in enumerate(l for l in NET.layers if isinstance(l, certify.Dense))}
    x, y = _points(NET)
    up = np.full(8, 0.8, np.float32)
    band = certify.band_for_model(cfg, params, x, y, up, "linf", bounds=BOX)
    r = np.asarray(certify.certified_radius(NET, x, y, norm="linf", bounds=BOX, upper=up))
    np.testing.assert_array_equal(np.asarray(band.radius), np.minimum(r, up))
    np.testing.assert_array_equal(np.asarray(band.curve_lower), (up[None] <= np.asarray(band.eps)[:, None]).mean(1))
    assert np.all(np.asarray(band.curve_lower) <= np.asarray(band.curve_upper))


# --------------------------------------------------------------------------- bad input


def test_bad_input_raises_value_error():
    net = NET
    x, y = _points(net, 3)
    cr = certify.certified_radius
    with pytest.raises(ValueError, match="net"):
        cr(lambda z: z, x, y, norm="linf")
    with pytest.raises(ValueError, match="x"):
        cr(net, np.zeros((3, 5), np.float32), y, norm="linf")
    with pytest.raises(ValueError, match="y"):
        cr(net, x, np.array([0, 1, 3]), norm="linf", bounds=BOX)
    with pytest.raises(ValueError, match="norm"):
        cr(net, x, y, norm="l3", bounds=BOX)
    with pytest.raises(ValueError, match="method"):
        cr(net, x, y, norm="linf", method="deeppoly", bounds=BOX)
    with pytest.raises(ValueError, match="bounds"):
        cr(net, x, y, norm="linf", bounds=(1.0, 0.0))
    with pytest.raises(ValueError, match="x"):
        cr(net, x + 5, y, norm="linf", bounds=BOX)
    with pytest.raises(ValueError, match="upper"):
        cr(net, x, y, norm="linf", bounds=BOX, upper=np.array([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="upper"):
        cr(net, x, y, norm="linf", bounds=BOX, upper=np.ones(2))
    with pytest.raises(ValueError, match="search_steps"):
        cr(net, x, y, norm="linf", bounds=BOX, search_steps=0)
    with pytest.raises(ValueError, match="splits"):
        cr(net, x, y, norm="linf", bounds=BOX, method="bab", splits=15)
    with pytest.raises(ValueError, match="splits"):
        cr(net, x, y, norm="linf", bounds=BOX, method="bab", splits=0)
    with pytest.raises(ValueError, match="budget"):
        cr(net, x, y, norm="linf", bounds=BOX, method="bab", budget=2)
    with pytest.raises(ValueError, match="search_steps"):
        cr(net, x, y, norm="linf", bounds=BOX, method="bab", search_steps=0)
    x_nan = x.copy()
    x_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="x"):
        cr(net, x_nan, y, norm="linf", bounds=None)
    with pytest.raises(ValueError, match="norm"):
        certify.exact_distance(net, x, y, norm="l2", bounds=BOX)
    with pytest.raises(ValueError, match="upper"):
        certify.exact_distance(net, x, y, norm="linf", bounds=None)
    with pytest.raises(ValueError, match="time_limit"):
        certify.exact_distance(net, x, y, norm="linf", bounds=BOX, time_limit=-1)
    with pytest.raises(ValueError, match=r"weights\[1\]"):
        certify.mlp([(np.ones((4, 2), np.float32), np.ones(4, np.float32)),
                     (np.ones((3, 5), np.float32), np.ones(3, np.float32))])
    with pytest.raises(ValueError, match="W"):
        certify.mlp([(np.ones((4, 2), np.int32), np.ones(4, np.float32))])
    with pytest.raises(ValueError, match="params"):
        certify.from_model(models.ModelConfig(arch="mlp", input_shape=(4,), hidden=(3,)), {"Dense_0": {}})
    with pytest.raises(ValueError, match="eps"):
        certify.logit_bounds(net, x, -0.1, norm="linf", bounds=BOX)
    with pytest.raises(ValueError, match="lower"):
        certify.band_summary(np.ones(3), np.ones(2), [0.0, 1.0])
