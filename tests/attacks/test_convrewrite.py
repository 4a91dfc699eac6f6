"""attacks.convrewrite: a model's convolutions as patch matrices compute the same function."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import attacks
from attacks.convrewrite import conv_as_patches, has_conv, patches_model

KEY = jax.random.PRNGKey(0)


@pytest.mark.parametrize("case", [
    dict(lhs=(2, 9, 7, 3), rhs=(4, 3, 3, 5), strides=(2, 1), padding="SAME", dn=("NHWC", "HWIO", "NHWC")),
    dict(lhs=(3, 2, 11), rhs=(6, 2, 4), strides=(3,), padding="VALID", dn=("NCW", "OIW", "NCW")),
])
def test_conv_as_patches_equals_lax_conv_and_its_gradient(case):
    k1, k2, k3 = jax.random.split(KEY, 3)
    lhs = jax.random.normal(k1, case["lhs"])
    rhs = jax.random.normal(k2, case["rhs"])

    def conv(x, patched):
        dn = lax.conv_dimension_numbers(x.shape, rhs.shape, case["dn"])
        pad = case["padding"]
        if isinstance(pad, str):
            pad = lax.padtype_to_pads(tuple(x.shape[i] for i in dn.lhs_spec[2:]),
                                      tuple(rhs.shape[i] for i in dn.rhs_spec[2:]), case["strides"], pad)
        kw = dict(window_strides=case["strides"], padding=tuple(pad), lhs_dilation=(1,) * len(case["strides"]),
                  rhs_dilation=(1,) * len(case["strides"]), dimension_numbers=dn, feature_group_count=1,
                  batch_group_count=1)
        return conv_as_patches(x, rhs, **kw) if patched else lax.conv_general_dilated(x, rhs, **kw)

    ct = jax.random.normal(k3, conv(lhs, False).shape)
    value_and_grad = jax.jit(lambda x: [jax.value_and_grad(lambda v, p=p: jnp.sum(conv(v, p) * ct))(x)
                                        for p in (False, True)])
    (v0, g0), (v1, g1) = value_and_grad(lhs)
    np.testing.assert_allclose(float(v1), float(v0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g1), np.asarray(g0), rtol=1e-5, atol=1e-5)


class _ConvNet(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(4, (3, 3), strides=2, padding="SAME")(x))
        x = jax.jit(lambda v: nn.relu(v))(x)          # a nested jit
        x = x.reshape((x.shape[0], -1))
        return nn.Dense(10)(x)


def test_flax_conv_model_rewritten_and_attacked_alike(monkeypatch):
    """A flax nn.Conv model: the rewrite leaves no convolution, computes the same
    logits, and an attack on it returns the same distances as on the model
    evaluated with lax.conv (to float rounding), every one re-checked."""
    model = _ConvNet()
    x = jax.random.uniform(KEY, (6, 8, 8, 1))
    params = model.init(KEY, x[:1])
    f = lambda v: model.apply(params, v)  # noqa: E731
    y = jnp.argmax(f(x), -1).astype(jnp.int32)
    g = patches_model(f)
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
    assert has_conv(jax.make_jaxpr(f)(spec)) and not has_conv(jax.make_jaxpr(g)(spec))
    np.testing.assert_allclose(np.asarray(g(x)), np.asarray(f(x)), rtol=1e-5, atol=1e-6)
    kw = dict(norm="l2", key=KEY, search_steps=3, steps=5, restarts=1, loss="margin")
    patched = attacks.minimal_distance(f, x, y, **kw)
    assert attacks.verify(f, x, y, patched, "l2", bounds=(0.0, 1.0)) == {}
    monkeypatch.setattr(attacks.xla, "loop_model", lambda fn, shape=None: fn)
    plain = attacks.minimal_distance(lambda v: f(v), x, y, **kw)       # a new function: traced again
    np.testing.assert_array_equal(np.asarray(patched.success), np.asarray(plain.success))
    np.testing.assert_allclose(np.asarray(patched.distance), np.asarray(plain.distance), rtol=1e-3)
