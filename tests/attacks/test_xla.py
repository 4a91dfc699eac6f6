"""attacks.xla: the attack programs' compile options and where they apply."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from attacks import xla
from attacks.minimal import _minimal_jit
from tests._models import binary_linear, linear_data

KEY = jax.random.PRNGKey(0)


def _ynn_reduce_fusions(hlo: str) -> int:
    """Number of YNNPACK fusions whose computation contains a reduce."""
    count = 0
    for callee in re.findall(r"kind=kCustom, calls=(%[\w.\-]+)", hlo):
        start = hlo.index("\n" + callee + " ")
        body = hlo[start:hlo.index("\n}", start)]
        count += " reduce(" in body
    return count


@pytest.fixture(scope="module")
def case():
    w, b, x, y = linear_data(d=16, n=8)
    return binary_linear(w, b), x, y


def test_workaround_applies_unless_the_user_chose(monkeypatch):
    opts = xla.compiler_options()
    if opts != xla.WORKAROUND:
        pytest.skip("this jaxlib does not know every option")
    monkeypatch.setenv("RCURVES_XLA_DEFAULTS", "1")
    assert xla.compiler_options() is None
    monkeypatch.delenv("RCURVES_XLA_DEFAULTS")
    # An option the user set in XLA_FLAGS is theirs; the others still apply.
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=-reduce")
    assert xla.compiler_options() == {k: v for k, v in xla.WORKAROUND.items() if k != xla.YNN_OPTION}
    monkeypatch.setenv("XLA_FLAGS", "--xla_disable_hlo_passes=foo --xla_cpu_experimental_ynn_fusion_type=-reduce")
    assert xla.compiler_options() == {xla.VECTOR_OPTION: xla.WORKAROUND[xla.VECTOR_OPTION]}
    monkeypatch.setenv("XLA_FLAGS", "--xla_disable_hlo_passes=foo --xla_cpu_experimental_ynn_fusion_type=-reduce "
                       "--xla_cpu_prefer_vector_width=256")
    assert xla.compiler_options() is None


def test_attack_program_keeps_reductions_out_of_ynnpack():
    """The reason for the options: XLA's default sends per-point norms to YNNPACK
    (10x slower on this CPU); the attack's own program must not."""
    if xla.compiler_options() is None or jax.default_backend() != "cpu":
        pytest.skip("workaround not active")
    from attacks.engine import EngineConfig
    from attacks.minimal import SearchConfig
    w, b, x, y = linear_data(d=256, n=32)   # large enough for XLA to use YNNPACK (n d > ~4k)
    cfg = SearchConfig(engine=EngineConfig(norm="linf", steps=3), search_steps=1)
    args = (binary_linear(w, b), jnp.asarray(x), jnp.asarray(y), attacks.checks.check_key(KEY, len(x)),
            jnp.full((len(x),), 10.0))
    default = _minimal_jit.lower_plain(*args, cfg=cfg, bounds=None).compile().as_text()
    if _ynn_reduce_fusions(default) == 0:
        pytest.skip("this jaxlib does not send reductions to YNNPACK by default")
    tuned = _minimal_jit.lower(*args, cfg=cfg, bounds=None).compile().as_text()
    assert _ynn_reduce_fusions(tuned) == 0


def test_attack_program_sums_norms_without_a_reduce_window():
    """XLA:CPU's tree-reduction rewrite turns every per-point norm into a
    reduce-window that first writes the squares out; the attack's own program
    is compiled without it."""
    if xla.compiler_options() != xla.WORKAROUND or jax.default_backend() != "cpu":
        pytest.skip("workaround not active")
    from attacks.engine import EngineConfig
    from attacks.minimal import SearchConfig
    w, b, x, y = linear_data(d=256, n=8)
    cfg = SearchConfig(engine=EngineConfig(norm="l2", steps=3), search_steps=1)
    args = (binary_linear(w, b), jnp.asarray(x), jnp.asarray(y), attacks.checks.check_key(KEY, len(x)),
            jnp.full((len(x),), 10.0))
    default = _minimal_jit.lower_plain(*args, cfg=cfg, bounds=None).compile().as_text()
    if "reduce-window" not in default:
        pytest.skip("this jaxlib does not rewrite long reductions")
    tuned = _minimal_jit.lower(*args, cfg=cfg, bounds=None).compile().as_text()
    assert "reduce-window" not in tuned


def _mlp(x):
    w = jnp.linspace(-1.0, 1.0, 16 * 3).reshape(16, 3)
    return jnp.tanh(x.reshape(x.shape[0], -1) @ w)


def _patch_cnn(x):
    """A conv as im2col patches times a matrix: its input gradient is pads and adds."""
    img = x.reshape(x.shape[0], 4, 4)
    patches = jnp.stack([img[:, i:i + 3, j:j + 3].reshape(x.shape[0], -1)
                         for i in range(2) for j in range(2)], axis=1)        # (n, 4, 9)
    h = jnp.maximum(patches @ jnp.linspace(-1.0, 1.0, 9 * 2).reshape(9, 2), 0.0)
    return h.reshape(x.shape[0], -1)[:, :3]


def _lax_cnn(x):
    img = x.reshape(x.shape[0], 1, 4, 4)
    k = jnp.linspace(-1.0, 1.0, 3 * 9).reshape(3, 1, 3, 3)
    out = jax.lax.conv_general_dilated(img, k, (1, 1), "VALID")
    return out.mean(axis=(2, 3))


@pytest.mark.parametrize("model, written", [(_mlp, True), (_lax_cnn, True), (_patch_cnn, False)])
def test_gradient_is_written_tells_matrix_products_from_fused_chains(model, written):
    fn1 = lambda v: model(v.reshape(1, 16))[0]   # noqa: E731 - the model as the user wrote it
    assert xla.gradient_is_written(fn1, jax.ShapeDtypeStruct((16,), jnp.float32)) is written


def test_attack_view_of_a_lax_conv_is_a_patch_chain_on_cpu():
    """Inside the attacks (``engine.single``) a ``lax.conv`` becomes patch
    matrices on XLA:CPU (``xla.loop_model``), whose input gradient is a fused
    chain: the attacks then materialize it, as for a patch CNN."""
    from attacks.engine import single

    fn1 = single(_lax_cnn, (16,))
    v = jnp.linspace(0.0, 1.0, 16)
    np.testing.assert_allclose(fn1(v), _lax_cnn(v.reshape(1, 16))[0], rtol=1e-5, atol=1e-6)
    rewritten = xla.loop_model(_lax_cnn, (1, 16)) is not _lax_cnn   # off on other backends / RCURVES_XLA_DEFAULTS=1
    assert xla.gradient_is_written(fn1, jax.ShapeDtypeStruct((16,), jnp.float32)) is (not rewritten)


def test_materialize_is_the_identity_and_stays_a_conditional():
    """Same values as the plain call, under vmap; the compiled scan keeps a
    real conditional (a folded or batched predicate would remove it)."""
    from attacks.engine import single
    fn1 = single(_patch_cnn, (16,))
    vg = jax.value_and_grad(lambda v: jnp.sum(fn1(v) ** 2))
    x = jax.random.uniform(KEY, (5, 16))

    def run(use):
        def body(p, k):
            f, g = xla.materialize(vg, p, k) if use else vg(p)
            return p + 1e-3 * g, f
        return jax.jit(jax.vmap(lambda p: jax.lax.scan(body, p, jnp.arange(4))))

    plain, mat = run(False)(x), run(True)(x)
    for a, b in zip(jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(mat)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert "conditional(" in run(True).lower(x).compile().as_text()


@pytest.mark.parametrize("attack", ["minimal", "cw", "fmn", "ddn"])
def test_materialized_gradient_gives_the_same_attack(monkeypatch, attack):
    """On a patch CNN the attacks compute the gradient inside a cond; they
    must find exactly what they find with the plain gradient, and every
    distance must be backed by a re-checked adversarial."""
    x = jax.random.uniform(KEY, (6, 16))
    y = jnp.argmax(_patch_cnn(x), axis=1)
    if attack == "minimal":
        run = lambda: attacks.minimal_distance(  # noqa: E731
            _patch_cnn, x, y, norm="l2", key=KEY, eps_max=4.0, search_steps=3, steps=6)
    elif attack == "fmn":
        run = lambda: attacks.fmn(_patch_cnn, x, y, norm="l2", steps=30, key=KEY)  # noqa: E731
    elif attack == "ddn":
        run = lambda: attacks.ddn(_patch_cnn, x, y, steps=30, key=KEY)  # noqa: E731
    else:
        run = lambda: attacks.carlini_wagner_l2(  # noqa: E731
            _patch_cnn, x, y, key=KEY, binary_search_steps=4, steps=20, initial_const=1.0, abort_early=False)
    jax.clear_caches()
    res = run()
    assert attacks.verify(_patch_cnn, x, y, res, "l2", (0.0, 1.0)) == {}
    assert int(jnp.sum(res.success)) >= 2
    calls = []
    monkeypatch.setattr(xla, "gradient_is_written", lambda fn1, x: calls.append(1) or True)
    jax.clear_caches()   # recompile: the cached program has the cond
    plain = run()
    assert calls, "the plain-gradient program was not traced"
    np.testing.assert_array_equal(np.asarray(plain.success), np.asarray(res.success))
    np.testing.assert_allclose(np.asarray(plain.distance), np.asarray(res.distance), rtol=1e-5)


@pytest.mark.parametrize("attack", ["fmn", "ddn"])
def test_fmn_and_ddn_programs_keep_the_conditional(attack):
    """FMN's and DDN's steps read the gradient in several fusions: on a patch CNN it is computed inside a cond
    (once), as in the search's lanes (CNN, 200 steps: FMN 1.22 -> 1.04 of bare gradients)."""
    from attacks.ddn import DDNConfig, _ddn_jit
    from attacks.fmn import FMNConfig, _fmn_jit
    x = jax.random.uniform(KEY, (4, 16))
    y = jnp.argmax(_patch_cnn(x), axis=1)
    if attack == "fmn":
        low = _fmn_jit.lower(_patch_cnn, x, y, 2, cfg=FMNConfig(norm="l2", steps=4), bounds=(0.0, 1.0))
    else:
        low = _ddn_jit.lower(_patch_cnn, x, y, jax.random.split(KEY, 4), jnp.ones(4), 2, cfg=DDNConfig(steps=4),
                             bounds=(0.0, 1.0))
    assert "conditional(" in low.compile().as_text()


def test_cw_program_keeps_the_conditional():
    from attacks.cw import CWConfig, _cw_jit
    x = jax.random.uniform(KEY, (4, 16))
    y = jnp.argmax(_patch_cnn(x), axis=1)
    hlo = _cw_jit.lower(_patch_cnn, x, y, cfg=CWConfig(binary_search_steps=2, steps=4, abort_early=False),
                        bounds=(0.0, 1.0)).compile().as_text()
    assert "conditional(" in hlo


def test_same_answer_top_level_and_inside_a_user_jit(case):
    f, x, y = case
    kw = dict(norm="l2", key=KEY, eps_max=10.0, bounds=None, search_steps=3, steps=5)
    top = attacks.minimal_distance(f, x, y, **kw)
    inner = jax.jit(lambda a, b: attacks.minimal_distance(f, a, b, **kw).distance)(x, y)
    # The two programs are compiled with different options (vector width,
    # reduction order): equal up to float32 rounding.
    np.testing.assert_allclose(np.asarray(inner), np.asarray(top.distance), rtol=1e-5)
    # The top-level program is compiled once, with the options; the nested call
    # went to the plain jit and did not add an entry to it.
    size = _minimal_jit._cache_size()
    attacks.minimal_distance(f, x, y, **kw)
    assert _minimal_jit._cache_size() == size


def test_model_closing_over_a_users_tracer(case):
    """Params passed through the user's own jit are tracers of the user's
    trace: the gradient check traces through them or falls back to the plain
    gradient; either way the answer is the top-level one."""
    f, x, y = case
    w = jnp.linspace(-1.0, 1.0, x.shape[1])

    def model(params, v):
        m = v @ params
        return jnp.stack([-m / 2, m / 2], axis=1)

    kw = dict(norm="l2", key=KEY, eps_max=10.0, bounds=None, search_steps=3, steps=5)
    yy = jnp.argmax(model(w, x), axis=1)
    top = attacks.minimal_distance(lambda v: model(w, v), x, yy, **kw)
    inner = jax.jit(lambda p, a, b: attacks.minimal_distance(lambda v: model(p, v), a, b, **kw).distance)(w, x, yy)
    np.testing.assert_allclose(np.asarray(inner), np.asarray(top.distance), rtol=1e-5)
    assert bool(jnp.all(jnp.isfinite(top.distance)))


def _wide_mlp(h):
    w1 = jnp.linspace(-1.0, 1.0, 16 * h).reshape(16, h)
    w2 = jnp.linspace(-1.0, 1.0, h * 5).reshape(h, 5)
    return lambda v: jnp.tanh(v @ w1) @ w2


def test_gradient_bytes_grow_with_the_model_and_decide_the_lane_loop():
    """The working-set measure: at least the float32 hidden layer (forward
    and backward), growing with the width; 0 when the model cannot be traced
    apart; the loop switch is its product with points and lanes."""
    spec = jax.ShapeDtypeStruct((16,), jnp.float32)
    small, large = xla.gradient_bytes(_wide_mlp(8), spec), xla.gradient_bytes(_wide_mlp(64), spec)
    assert small >= 2 * 8 * 4 and large >= 2 * 64 * 4 and large > small
    assert xla.gradient_bytes(lambda v: undefined_name(v), spec) == 0   # noqa: F821 - untraceable: measured 0
    per_point = xla.gradient_bytes(_wide_mlp(64), spec)
    limit = xla.LANE_BATCH_BYTES
    points = limit // (4 * per_point)                # 4 lanes of these many points: at the limit
    assert not xla.lanes_in_loop(_wide_mlp(64), spec, points, 4)
    assert xla.lanes_in_loop(_wide_mlp(64), spec, points + 1, 4)
    assert not xla.lanes_in_loop(_wide_mlp(64), spec, 10 ** 9, 1)   # one lane: nothing to loop over


@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_lanes_in_a_loop_are_the_same_search(monkeypatch, norm):
    """The search with its lanes in a ``lax.map`` (the program has more
    loops) finds what the vmapped one finds, and both are exact on a
    5-class linear model (000 Lemma 1), never below it."""
    import attacks.minimal as minimal
    from attacks.minimal import search_config
    from tests._models import exact_multiclass, multiclass_linear
    rng = np.random.default_rng(3)
    W, b = rng.normal(size=(5, 16)).astype(np.float32), rng.normal(size=5).astype(np.float32) * 0.1
    x = jnp.asarray(rng.uniform(0.2, 0.8, size=(6, 16)).astype(np.float32))
    f = multiclass_linear(W, b)
    y = jnp.argmax(f(x), axis=1)
    exact = exact_multiclass(W, b, np.asarray(x), np.asarray(y), norm)
    cfg = search_config(norm, 5)
    assert cfg.restarts > 1
    args = (f, x, y, attacks.checks.check_key(KEY, len(x)), jnp.full((len(x),), 4.0))
    out, loops = {}, {}
    for loop in (False, True):
        monkeypatch.setattr(minimal, "lanes_in_loop", lambda *a, loop=loop: loop)
        jax.clear_caches()
        loops[loop] = minimal._minimal_jit.lower(*args, cfg=cfg, bounds=None).as_text().count("stablehlo.while")
        out[loop] = attacks.minimal_distance(f, x, y, norm=norm, key=KEY, eps_max=4.0, bounds=None)
        assert attacks.verify(f, x, y, out[loop], norm, None) == {}
        d = np.asarray(out[loop].distance)
        assert np.all(d >= exact * (1 - 1e-4)) and np.all(d <= exact * 1.02)
    assert loops[True] > loops[False]
    np.testing.assert_allclose(np.asarray(out[True].distance), np.asarray(out[False].distance), rtol=1e-5)


def test_pgd_restarts_in_a_loop_are_the_same_attack(monkeypatch):
    """PGD's restarts in a ``lax.map`` return the iterate the vmapped restarts
    return, and break exactly the linear points within eps (000 Lemma 1)."""
    import importlib
    pgd_module = importlib.import_module("attacks.pgd")     # the module (``attacks.pgd`` is the function)
    from tests._models import exact_multiclass, multiclass_linear
    rng = np.random.default_rng(4)
    W, b = rng.normal(size=(5, 16)).astype(np.float32), np.zeros(5, np.float32)
    x = jnp.asarray(rng.uniform(0.2, 0.8, size=(8, 16)).astype(np.float32))
    f = multiclass_linear(W, b)
    y = jnp.argmax(f(x), axis=1)
    exact = exact_multiclass(W, b, np.asarray(x), np.asarray(y), "l2")
    eps = float(np.median(exact))
    out, mapped, lax_map = {}, [], jax.lax.map
    monkeypatch.setattr(jax.lax, "map", lambda *a, **k: mapped.append(1) or lax_map(*a, **k))
    for loop in (False, True):
        monkeypatch.setattr(pgd_module, "lanes_in_loop", lambda *a, loop=loop: loop)
        jax.clear_caches()
        out[loop] = np.asarray(attacks.pgd(f, x, y, eps, norm="l2", steps=30, key=KEY, restarts=3,
                                           bounds=None))
        assert bool(mapped) is loop         # the restarts went through lax.map exactly when looped
    np.testing.assert_allclose(out[True], out[False], rtol=1e-5, atol=1e-6)
    broken = np.asarray(jnp.argmax(f(jnp.asarray(out[True])), axis=1) != y)
    np.testing.assert_array_equal(broken, exact < eps * 0.999)
