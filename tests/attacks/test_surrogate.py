"""attacks.surrogate: the model's exact logits, ReLU derivatives smoothed; and the searches that use it."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from attacks.minimal import _minimal_jit
from attacks.surrogate import check_temperature, is_relu, relu_operand, smooth_relu_model

RNG = np.random.default_rng(0)
W1 = jnp.asarray(RNG.normal(size=(6, 5)).astype(np.float32))
B1 = jnp.asarray(RNG.normal(size=(5,)).astype(np.float32))
W2 = jnp.asarray(RNG.normal(size=(5, 3)).astype(np.float32))
X = jnp.asarray(RNG.normal(size=(4, 6)).astype(np.float32))


def _net(relu):
    return lambda x: relu(x @ W1 + B1) @ W2


RELUS = {
    "jax.nn.relu": jax.nn.relu,
    "flax nn.relu": nn.relu,
    "maximum(z, 0)": lambda z: jnp.maximum(z, 0.0),
    "maximum(0, z)": lambda z: jnp.maximum(0.0, z),
}


@pytest.mark.highest
@pytest.mark.parametrize("relu", list(RELUS))
def test_same_logits_and_the_closed_form_smoothed_gradient(relu):
    f = _net(RELUS[relu])
    t = 0.3
    g = smooth_relu_model(f, t)
    # the forward pass is the model's, bit for bit
    np.testing.assert_array_equal(np.asarray(g(X)), np.asarray(f(X)))
    # d/dx of logit c: W1 diag(sigmoid(z / t)) W2[:, c], z = x W1 + b1 (the only ReLU replaced)
    z = X @ W1 + B1
    want = jnp.einsum("ij,nj,j->ni", W1, jax.nn.sigmoid(z / t), W2[:, 1])
    got = jax.vmap(jax.grad(lambda v: g(v[None])[0, 1]))(X)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    # and it differs from the exact gradient (some unit is off)
    exact = jax.vmap(jax.grad(lambda v: f(v[None])[0, 1]))(X)
    assert float(jnp.abs(exact - got).max()) > 1e-2
    # as the temperature falls, the exact gradient comes back (no pre-activation within 1e-3 of 0 here)
    assert float(jnp.abs(z).min()) > 1e-3
    cold = jax.vmap(jax.grad(lambda v: smooth_relu_model(f, 1e-5)(v[None])[0, 1]))(X)
    np.testing.assert_allclose(np.asarray(cold), np.asarray(exact), rtol=1e-5, atol=1e-6)


def test_only_relus_are_rewritten():
    # a max against another constant and a custom derivative whose body is not a ReLU keep their derivatives
    @jax.custom_jvp
    def own(z):
        return jnp.maximum(z, 0.0) + 0.1 * z

    @own.defjvp
    def _(p, t):
        return own(p[0]), 2.0 * t[0]

    for op in (lambda z: jnp.maximum(z, 1.0), own):
        f = _net(op)
        exact = jax.grad(lambda v: f(v).sum())(X)
        got = jax.grad(lambda v: smooth_relu_model(f, 0.3)(v).sum())(X)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(exact))
    eqns = jax.make_jaxpr(lambda z: (jax.nn.relu(z), jnp.maximum(z, 0.0), jnp.maximum(z, 1.0), own(z)))(X).eqns
    assert [is_relu(e) for e in eqns] == [True, True, False, False]
    # the ReLU's input is the variable operand, whichever side the zero is on
    eqns = jax.make_jaxpr(lambda z: (jnp.maximum(z, 0.0), jnp.maximum(0.0, z), jax.nn.relu(z)))(X).eqns
    assert [relu_operand(e) for e in eqns] == [0, 1, 0]


def test_a_max_of_two_constants_is_not_a_relu_and_keeps_its_value():
    # max(2, 0) and an int8 max(3, 0) stay what they are: the rewrite must not read the 0 as the ReLU's input
    def f(x):
        return x @ W1 * jnp.maximum(2.0, 0.0) + jax.lax.max(jnp.int8(3), jnp.int8(0)).astype(jnp.float32)

    eqns = [e for e in jax.make_jaxpr(f)(X).eqns if e.primitive.name == "max"]
    assert len(eqns) == 2 and not any(is_relu(e) for e in eqns)
    np.testing.assert_array_equal(np.asarray(smooth_relu_model(f, 0.3)(X)), np.asarray(f(X)))


def test_bad_temperature_raises_before_compilation():
    # minimal_distance / search_config share the rewrite's check (0: no smoothing), before any compilation
    # (before, True passed as 1.0, and 1e-46 / 1e39 failed only inside the trace)
    compiled = _minimal_jit._cache_size()
    for bad in (-0.1, float("nan"), float("inf"), "x", "0.1", True, np.bool_(True), 1e-46, 1e39, np.array([0.1])):
        with pytest.raises(ValueError, match="relu_temperature"):
            attacks.minimal_distance(_net(jax.nn.relu), X, jnp.zeros(4, jnp.int32), norm="l2",
                                     key=jax.random.PRNGKey(0), bounds=None, eps_max=1.0, relu_temperature=bad)
    assert _minimal_jit._cache_size() == compiled
    assert check_temperature(np.array(0.1)) == check_temperature(0.1) and check_temperature(0, allow_zero=True) == 0
    # the rewrite itself: no bools, no temperature that is 0 in float32; numpy scalars are numbers
    for bad in (True, 1e-46, 1e39, 0, -1.0, None):
        with pytest.raises(ValueError, match="relu_temperature"):
            smooth_relu_model(_net(jax.nn.relu), bad)
    f = _net(jax.nn.relu)
    np.testing.assert_array_equal(np.asarray(smooth_relu_model(f, np.float32(0.3))(X)), np.asarray(f(X)))


THETA = 0.5
WEIGHTS = jnp.asarray([1.0, 2.0, 10.0, 1.0, 3.0, 1.0, 1.0, 2.0], jnp.float32)


def _threshold_model():
    """Two classes, logits ``(0, sum_i w_i relu(x_i - THETA) - 0.1)`` on ``[0, 1]^8``: at ``x = 0.2`` every
    unit is off and the gradient is exactly zero in the whole ball of l_inf radius 0.3. The nearest
    adversarial in l_2 moves the pixel of the largest weight (10) to ``THETA + 0.01``: exactly 0.31 (any
    other pixel costs at least 0.3 + 0.1 / 3, two pixels at least 0.3 sqrt(2))."""
    def f(x):
        h = jax.nn.relu(x.reshape(x.shape[0], -1) - THETA)
        return jnp.stack([jnp.zeros(x.shape[0]), h @ WEIGHTS - 0.1], 1)
    return f


def test_a_threshold_the_exact_gradient_cannot_see_is_found_through_the_surrogate():
    f = _threshold_model()
    x = jnp.full((3, 8), 0.2, jnp.float32)
    y = jnp.zeros(3, jnp.int32)
    key = jax.random.PRNGKey(0)
    plain = attacks.minimal_distance(f, x, y, norm="l2", key=key)
    smooth = attacks.minimal_distance(f, x, y, norm="l2", key=key, relu_temperature=0.1)
    assert attacks.verify(f, x, y, smooth, "l2", (0.0, 1.0)) == {}
    assert attacks.verify(f, x, y, plain, "l2", (0.0, 1.0)) == {}
    d_plain, d = np.asarray(plain.distance), np.asarray(smooth.distance)
    # never below the exact distance, and within 1% of it: the sparse adversarial
    assert np.all(d >= 0.31 * (1 - 1e-5)) and np.all(d <= 0.31 * 1.01)
    # the exact gradients' search does not get there (zero gradients: it finds no adversarial at all)
    assert np.all(d_plain > 1.1 * d)
