"""Parameters as data: a pytree callable's second checkpoint compiles nothing; a misbehaving model is refused.

The compile counter listens to JAX's own compilation events (every XLA
compilation of the process), so "no recompilation" is counted, not timed.
"""
import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from attacks.modeltree import Skeleton, merge_model, split_model
from rcurves.models import ModelConfig, ModelFn, init_params, make_logits_fn

_EVENTS = []


def _listener(name, *args, **kwargs):
    if name == "/jax/core/compile/backend_compile_duration":
        _EVENTS.append(name)


jax.monitoring.register_event_duration_secs_listener(_listener)


@contextlib.contextmanager
def compilations():
    """Yields a list whose length is the number of XLA compilations inside the block."""
    start = len(_EVENTS)
    out = []
    yield out
    out.extend(_EVENTS[start:])


def _apply(params, x):
    h = jnp.maximum(x.reshape(x.shape[0], -1) @ params["w1"] + params["b1"], 0.0)
    return h @ params["w2"]


def _params(seed, d=12, h=16, k=4):
    r = np.random.RandomState(seed)
    return {"w1": jnp.asarray(r.randn(d, h).astype(np.float32)), "b1": jnp.asarray(r.randn(h).astype(np.float32)),
            "w2": jnp.asarray(r.randn(h, k).astype(np.float32))}


@pytest.fixture(scope="module")
def data():
    r = np.random.RandomState(0)
    x = jnp.asarray(r.rand(6, 12).astype(np.float32))
    return x, jnp.asarray(np.argmax(np.asarray(_apply(_params(1), x)), 1).astype(np.int32))


def test_split_merge_roundtrip_and_static_closures():
    f = jax.tree_util.Partial(_apply, _params(1))
    static, leaves = split_model(f)
    assert isinstance(static, Skeleton) and len(leaves) == 3
    g = jax.tree_util.Partial(_apply, _params(2))
    assert split_model(g)[0] == static and hash(split_model(g)[0]) == hash(static)   # same architecture
    x = jnp.ones((2, 12))
    np.testing.assert_array_equal(merge_model(static, leaves)(x), f(x))
    closure = lambda x: _apply(_params(1), x)   # noqa: E731
    assert split_model(closure) == (closure, ())                                     # a closure stays static
    other = jax.tree_util.Partial(_apply, _params(1, h=8))
    assert split_model(other)[0] == static            # shapes are not part of the skeleton: jit keys on them


CALLS = {
    "minimal_distance": lambda f, x, y, k: attacks.minimal_distance(f, x, y, norm="linf", key=k, eps_max=1.0,
                                                                    search_steps=2, steps=3, bounds=None),
    "pgd": lambda f, x, y, k: attacks.pgd(f, x, y, 0.1, norm="l2", steps=3, key=k, bounds=None),
    "cw": lambda f, x, y, k: attacks.carlini_wagner_l2(f, x, y, key=k, binary_search_steps=3, steps=30, lr=0.1,
                                                       bounds=(0.0, 1.0)),
    "ddn": lambda f, x, y, k: attacks.ddn(f, x, y, key=k, steps=20, bounds=(0.0, 1.0)),
    "fmn": lambda f, x, y, k: attacks.fmn(f, x, y, norm="l2", key=k, steps=20, bounds=(0.0, 1.0)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_second_checkpoint_compiles_nothing(name, data):
    x, y = data
    key = jax.random.PRNGKey(0)
    run = CALLS[name]
    a = run(jax.tree_util.Partial(_apply, _params(1)), x, y, key)
    jax.block_until_ready(a)
    with compilations() as c:
        b = run(jax.tree_util.Partial(_apply, _params(2)), x, y, key)     # another checkpoint, same architecture
        jax.block_until_ready(b)
    assert len(c) == 0
    # and the parameters were really used (not baked in from the first call)
    da = np.asarray(a.distance if hasattr(a, "distance") else a)
    db = np.asarray(b.distance if hasattr(b, "distance") else b)
    assert np.isfinite(db).any() and not np.array_equal(da, db)
    # the same result as the model written as a closure (its parameters constants)
    closure = lambda xb: _apply(_params(2), xb)   # noqa: E731
    dc = run(closure, x, y, key)
    dc = np.asarray(dc.distance if hasattr(dc, "distance") else dc)
    np.testing.assert_allclose(db, dc, rtol=1e-4, atol=1e-5)


def test_zoo_models_are_pytree_callables_sharing_programs():
    cfg = ModelConfig(arch="mlp", input_shape=(12,), n_classes=4, hidden=(16,))
    f1 = make_logits_fn(cfg, init_params(cfg, jax.random.PRNGKey(1)))
    f2 = make_logits_fn(cfg, init_params(cfg, jax.random.PRNGKey(2)))
    assert isinstance(f1, ModelFn) and split_model(f1)[0] == split_model(f2)[0]
    x = jnp.asarray(np.random.RandomState(3).rand(5, 12).astype(np.float32))
    y = jnp.argmax(f1(x), axis=1).astype(jnp.int32)
    kw = dict(norm="l2", key=jax.random.PRNGKey(0), eps_max=2.0, search_steps=2, steps=3, bounds=(0.0, 1.0))
    jax.block_until_ready(attacks.minimal_distance(f1, x, y, **kw))
    with compilations() as c:
        r = attacks.minimal_distance(f2, x, y, **kw)
        jax.block_until_ready(r)
    assert len(c) == 0
    assert not attacks.verify(f2, x, y, r, "l2", bounds=(0.0, 1.0))   # every claim re-checked on the new weights


def test_nan_logits_at_clean_points_are_a_value_error(data):
    x, _ = data
    y = jnp.array([0, 1, 2, 3, 0, 1], jnp.int32)

    def broken(xb):                       # NaN logits for points whose first input is > 0.5
        z = _apply(_params(1), xb)
        return jnp.where((xb[:, 0] > 0.5)[:, None], jnp.nan, z)

    bad = np.flatnonzero(np.asarray(x[:, 0]) > 0.5)
    assert bad.size and bad.size < 6
    for run in (CALLS["minimal_distance"], CALLS["cw"], CALLS["fmn"]):
        with pytest.raises(ValueError, match="non-finite logits") as e:
            run(broken, x, y, jax.random.PRNGKey(0))
        assert str(bad[0]) in str(e.value)


def test_nan_candidates_are_never_adversarial():
    """A model that is NaN away from the data: the attack must not report those points as broken."""
    x = jnp.full((4, 12), 0.5, jnp.float32)
    y = jnp.zeros(4, jnp.int32)

    def nan_off_data(xb):                 # class 0 at the data, NaN at any perturbed point
        moved = jnp.max(jnp.abs(xb - 0.5), axis=1) > 1e-6
        z = jnp.stack([jnp.ones(xb.shape[0]), jnp.zeros(xb.shape[0])], axis=1) + 0.0 * xb[:, :1]
        return jnp.where(moved[:, None], jnp.nan, z)

    r = attacks.minimal_distance(nan_off_data, x, y, norm="linf", key=jax.random.PRNGKey(0), eps_max=1.0,
                                 search_steps=2, steps=3, bounds=None)
    assert np.all(np.isinf(np.asarray(r.distance))) and not np.any(np.asarray(r.success))


def test_flax_nnx_modules_are_pytree_callables_sharing_programs():
    """A flax nnx module is a pytree: its parameters are traced, a second module of the same
    architecture compiles nothing, and the distances equal those of the same module as a closure."""
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(12, 8, rngs=rngs)
            self.l2 = nnx.Linear(8, 3, rngs=rngs)

        def __call__(self, x):
            return self.l2(jax.nn.relu(self.l1(x.reshape(x.shape[0], -1))))

    x = jnp.asarray(np.random.RandomState(3).rand(5, 12).astype(np.float32))
    key = jax.random.PRNGKey(0)
    m1, m2 = MLP(nnx.Rngs(0)), MLP(nnx.Rngs(1))
    y1, y2 = (jnp.argmax(m(x), -1) for m in (m1, m2))
    a = attacks.minimal_distance(m1, x, y1, norm="linf", key=key)
    with compilations() as c:
        b = attacks.minimal_distance(m2, x, y2, norm="linf", key=key)
    assert len(c) == 0
    closure = attacks.minimal_distance(lambda z: m2(z), x, y2, norm="linf", key=key)
    np.testing.assert_allclose(np.asarray(b.distance), np.asarray(closure.distance), rtol=1e-5)
    assert not np.allclose(np.asarray(a.distance), np.asarray(b.distance))    # the parameters did change
