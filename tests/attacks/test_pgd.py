"""Fixed-radius PGD: constraints, linear-model facts, determinism."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from attacks.engine import apgd_checkpoints
from tests._models import binary_linear, exact_binary

KEY = jax.random.PRNGKey(0)


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(0)
    d, n = 20, 32
    w = rng.normal(size=d).astype(np.float32)
    x = rng.uniform(0.2, 0.8, size=(n, d)).astype(np.float32)
    b = -np.float32(np.median(x @ w))
    y = (x @ w + b > 0).astype(np.int32)
    return w, b, x, y


@pytest.mark.parametrize("norm", ["linf", "l2", "l1"])
@pytest.mark.parametrize("step_size", [None, 0.05])
def test_pgd_respects_ball_and_box(case, norm, step_size):
    w, b, x, y = case
    f = binary_linear(w, b)
    eps = np.linspace(0.05, 0.5, len(x)).astype(np.float32)   # one radius per point
    xa = np.asarray(attacks.pgd(f, x, y, eps, norm=norm, steps=8, key=KEY, step_size=step_size,
                                restarts=2))
    q = {"linf": np.inf, "l2": 2, "l1": 1}[norm]
    dn = np.linalg.norm(xa - x, ord=q, axis=1)
    assert np.all(dn <= eps * (1 + 1e-5) + 1e-7)
    assert xa.min() >= 0 and xa.max() <= 1


@pytest.mark.parametrize("norm", ["linf", "l2", "l1"])
def test_pgd_breaks_exactly_the_breakable_linear_points(norm):
    """Unbounded linear model: PGD at eps breaks every point with d < eps, none with d > eps."""
    rng = np.random.default_rng(1)
    d, n = 30, 64
    w = rng.normal(size=d).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x @ w > 0).astype(np.int32)
    f = binary_linear(w, 0.0)
    exact = exact_binary(w, 0.0, x, norm)
    eps = float(np.median(exact))
    xa, ok = attacks.pgd(f, x, y, eps, norm=norm, steps=10, key=KEY, bounds=None, loss="margin",
                         return_success=True)
    fooled = np.asarray(jnp.argmax(f(xa), -1)) != y
    assert np.all(fooled[exact < eps * 0.999])
    assert not np.any(fooled[exact > eps * 1.001])
    np.testing.assert_array_equal(np.asarray(ok), fooled)        # the success flag is the re-check
    np.testing.assert_array_equal(np.asarray(attacks.pgd(f, x, y, eps, norm=norm, steps=10, key=KEY, bounds=None,
                                                         loss="margin")), np.asarray(xa))


def test_pgd_deterministic_and_jittable(case):
    w, b, x, y = case
    f = binary_linear(w, b)
    a = attacks.pgd(f, x, y, 0.1, norm="linf", steps=5, key=KEY)
    c = attacks.pgd(f, x, y, 0.1, norm="linf", steps=5, key=KEY)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(c))
    jitted = jax.jit(lambda xx, k: attacks.pgd(f, xx, y, 0.1, norm="linf", steps=5, key=k))
    np.testing.assert_allclose(np.asarray(jitted(x, KEY)), np.asarray(a), atol=1e-6)
    # a gradient step of a training loop can call it with traced arguments
    grad = jax.grad(lambda xx: jnp.sum(f(jax.lax.stop_gradient(
        attacks.pgd(f, xx, y, 0.1, norm="l2", steps=3, key=KEY)))))(jnp.asarray(x))
    assert grad.shape == x.shape


def test_apgd_checkpoints_follow_croce_hein():
    m = apgd_checkpoints(100)
    # p = 0, 0.22, 0.41, 0.57, 0.7, 0.8, 0.87, 0.93, 0.99 (rounded up)
    assert list(np.flatnonzero(m)) == [22, 41, 57, 70, 80, 87, 93, 99]


@pytest.mark.parametrize("steps", [1, 2, 5, 6])
def test_lane_evaluates_every_iterate_with_one_gradient_fewer(case, steps):
    """A lane of ``steps`` evaluates ``steps`` iterates; the last one needs no
    gradient (the step it would feed is never evaluated): ``steps - 1``
    backward passes (engine docstring; benchmarks/attack_overhead.py)."""
    from tests._models import counting_linear
    w, b, x, y = case
    counts = {}
    f = counting_linear(w, b, counts)
    out = attacks.pgd(f, x[:1], y[:1], 0.05, norm="l2", steps=steps, key=KEY)
    jax.block_until_ready(out)
    assert counts == {"forward": steps, "backward": steps - 1} if steps > 1 else counts == {"forward": 1}
