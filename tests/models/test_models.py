"""Models: the CNN of paper 000 appendix C.1, the MLP and the linear model."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rcurves.models import (
    ModelConfig,
    accuracy,
    apply_fn,
    conv2d_patches,
    init_params,
    make_logits_fn,
    param_shapes,
)

KEY = jax.random.PRNGKey(0)


def _np_params(cfg, seed=0):
    """Random float32 parameters of the right shapes without compiling an initialiser."""
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(lambda s: (0.3 * rng.standard_normal(s.shape)).astype(np.float32),
                                  param_shapes(cfg))


@pytest.mark.parametrize(
    "shape,kernel,stride",
    [((2, 28, 28, 1), (4, 4, 1, 16), 2), ((3, 8, 8, 3), (4, 4, 3, 5), 2), ((2, 7, 9, 2), (3, 3, 2, 4), 2),
     ((2, 6, 6, 2), (3, 3, 2, 3), 1), ((1, 5, 5, 1), (4, 4, 1, 2), 3)],
)
def test_patch_convolution_equals_lax_conv(shape, kernel, stride):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in (shape, kernel, kernel[-1:]))
    ref = jax.lax.conv_general_dilated(
        x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    ) + b
    got = conv2d_patches(x, w, b, stride)
    assert got.shape == ref.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-5, atol=1e-5)


def test_cnn_has_the_architecture_of_appendix_c1():
    cfg = ModelConfig(arch="cnn", input_shape=(28, 28, 1), n_classes=10)
    shapes = jax.tree_util.tree_map(lambda s: s.shape, param_shapes(cfg))
    assert shapes == {
        "Conv2d_0": {"kernel": (4, 4, 1, 16), "bias": (16,)},
        "Conv2d_1": {"kernel": (4, 4, 16, 32), "bias": (32,)},
        "Dense_0": {"kernel": (7 * 7 * 32, 100), "bias": (100,)},   # 28 -> 14 -> 7 ('SAME', stride 2)
        "Dense_1": {"kernel": (100, 10), "bias": (10,)},
    }
    x = np.random.default_rng(1).random((5, 28, 28, 1), np.float32)
    assert make_logits_fn(cfg, _np_params(cfg))(x).shape == (5, 10)


def test_cnn_forward_matches_a_reference_written_with_lax_conv():
    cfg = ModelConfig(arch="cnn", input_shape=(8, 8, 1), n_classes=10)
    p = _np_params(cfg)
    x = np.random.default_rng(1).random((4, 8, 8, 1), np.float32)

    def conv(h, layer):
        return jax.nn.relu(jax.lax.conv_general_dilated(
            h, layer["kernel"], (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + layer["bias"])

    h = conv(conv(x, p["Conv2d_0"]), p["Conv2d_1"]).reshape(4, -1)
    h = jax.nn.relu(h @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"])
    ref = h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]
    np.testing.assert_allclose(np.asarray(make_logits_fn(cfg, p)(x)), np.asarray(ref), rtol=1e-5, atol=1e-6)


def test_flat_inputs_are_reshaped_to_images():
    img = ModelConfig(arch="cnn", input_shape=(8, 8, 1), n_classes=3)
    flat = ModelConfig(arch="cnn", input_shape=(64,), n_classes=3)
    assert flat.image_shape == (8, 8, 1)
    p = _np_params(img)
    x = np.random.default_rng(1).random((3, 8, 8, 1), np.float32)
    np.testing.assert_array_equal(np.asarray(make_logits_fn(img, p)(x)),
                                  np.asarray(make_logits_fn(flat, p)(x.reshape(3, 64))))


@pytest.mark.highest
def test_linear_model_is_wx_plus_b():
    cfg = ModelConfig(arch="linear", input_shape=(4, 3), n_classes=5)
    p = _np_params(cfg)
    x = np.random.default_rng(0).normal(size=(6, 4, 3)).astype(np.float32)
    ref = x.reshape(6, 12).astype(np.float64) @ np.asarray(p["Dense_0"]["kernel"], np.float64) + np.asarray(
        p["Dense_0"]["bias"], np.float64)
    np.testing.assert_allclose(np.asarray(make_logits_fn(cfg, p)(x)), ref, rtol=1e-5, atol=1e-5)


def test_mlp_layers_and_row_independence():
    cfg = ModelConfig(arch="mlp", input_shape=(10,), n_classes=4, hidden=(7, 5))
    shapes = jax.tree_util.tree_map(lambda s: s.shape, param_shapes(cfg))
    assert [shapes[f"Dense_{i}"]["kernel"] for i in range(3)] == [(10, 7), (7, 5), (5, 4)]
    f = make_logits_fn(cfg, _np_params(cfg))
    x = np.random.default_rng(1).standard_normal((6, 10)).astype(np.float32)
    batch = np.asarray(f(x))
    rows = np.concatenate([np.asarray(f(x[i:i + 1])) for i in range(6)])
    np.testing.assert_allclose(batch, rows, rtol=1e-6, atol=1e-6)


def test_init_is_deterministic_in_the_key():
    cfg = ModelConfig(arch="mlp", input_shape=(400,), n_classes=3, hidden=(300,))
    a, b, c = init_params(cfg, KEY), init_params(cfg, KEY), init_params(cfg, jax.random.PRNGKey(1))
    leaves = lambda t: [np.asarray(v) for v in jax.tree_util.tree_leaves(t)]  # noqa: E731
    assert all(np.array_equal(u, v) for u, v in zip(leaves(a), leaves(b)))
    assert not all(np.array_equal(u, v) for u, v in zip(leaves(a), leaves(c)))


def test_accuracy_counts_correct_predictions():
    # a fixed linear model: class = argmax of the identity logits
    def f(x):
        return x
    x = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0], [0.0, 3.0]], np.float32)
    y = np.array([0, 0, 0, 1])
    assert accuracy(f, x, y, batch_size=3) == 0.75


def test_config_validation_and_round_trip():
    with pytest.raises(ValueError, match="arch"):
        ModelConfig(arch="transformer")
    with pytest.raises(ValueError, match="n_classes"):
        ModelConfig(arch="mlp", n_classes=1)
    with pytest.raises(ValueError, match="image_shape"):
        ModelConfig(arch="cnn", input_shape=(30,))          # not a square, no image_shape
    with pytest.raises(ValueError, match="image_shape"):
        ModelConfig(arch="cnn", input_shape=(64,), image_shape=(8, 7, 1))
    cfg = ModelConfig(arch="cnn", input_shape=(28, 28, 1), n_classes=10)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown fields"):
        ModelConfig.from_dict({**cfg.to_dict(), "heads": 3})
    assert hash(cfg) == hash(ModelConfig.from_dict(cfg.to_dict()))


def test_apply_fn_is_pure_in_params():
    cfg = ModelConfig(arch="linear", input_shape=(3,), n_classes=2)
    apply = apply_fn(cfg)
    p = _np_params(cfg)
    q = jax.tree_util.tree_map(lambda a: 2 * a, p)
    x = jnp.ones((1, 3))
    np.testing.assert_allclose(np.asarray(apply(q, x)), 2 * np.asarray(apply(p, x)), rtol=1e-6)


def test_init_gives_lecun_scaled_weights_and_zero_biases():
    cfg = ModelConfig(arch="mlp", input_shape=(400,), n_classes=3, hidden=(300,))
    p = init_params(cfg, KEY)
    k = np.asarray(p["Dense_0"]["kernel"])
    # LeCun normal: std 1/sqrt(fan_in) (truncated at 2 std, variance-corrected)
    assert abs(k.std() * math.sqrt(400) - 1.0) < 0.02
    assert np.all(np.asarray(p["Dense_0"]["bias"]) == 0) and np.all(np.asarray(p["Dense_1"]["bias"]) == 0)


# ------------------------------------------------------------ ResNet (CIFAR-style)


def _resnet_param_count(depth, width, k=10, c_in=3):
    """He et al.'s CIFAR ResNet with 1x1 projections where the shape changes, counted by hand."""
    n = (depth - 2) // 6
    total = 9 * c_in * width + 2 * width                  # stem conv (no bias) + its batch norm scale/bias
    c = width
    for stage in range(3):
        f = width * 2 ** stage
        for block in range(n):
            total += 9 * c * f + 2 * f + 9 * f * f + 2 * f
            if c != f:
                total += c * f + 2 * f
            c = f
    return total + c * k + k


@pytest.mark.parametrize("depth,width", [(8, 4), (20, 16)])
def test_resnet20_structure_and_frozen_batch_norm(depth, width):
    import jax
    import jax.numpy as jnp

    from rcurves.models import ModelConfig, init_params, make_logits_fn

    cfg = ModelConfig(arch="resnet", input_shape=(32, 32, 3), n_classes=10, depth=depth, width=width)
    p = init_params(cfg, jax.random.PRNGKey(0))
    trained = sum(int(a.size) for path, a in jax.tree_util.tree_leaves_with_path(p)
                  if not str(path[-1]).endswith(("'mean']", "'var']")))
    assert trained == _resnet_param_count(depth, width)
    if (depth, width) == (20, 16):
        assert trained == 272_474                        # ResNet-20: the 0.27M of He et al.
    f = make_logits_fn(cfg, p)
    x = jnp.asarray(np.random.RandomState(0).rand(3, 32, 32, 3).astype(np.float32))
    assert f(x).shape == (3, 10)
    # inference-mode batch norm is the affine map of its statistics: shifting a stem mean by m
    # equals shifting that channel of the stem's output by -m
    bn = [k for k in p if k.startswith("FrozenBatchNorm")][0]
    p2 = jax.tree_util.tree_map(lambda a: a, p)
    p2[bn] = dict(p[bn], mean=p[bn]["mean"] + 0.5, var=p[bn]["var"] * 4.0)
    assert not np.allclose(np.asarray(make_logits_fn(cfg, p2)(x)), np.asarray(f(x)))
    if depth != 8:
        return
    # the statistics get no gradient (training never changes them; checked on the small one)
    from rcurves.models import apply_fn

    g = jax.grad(lambda q: apply_fn(cfg)(q, x).sum())(p)
    assert float(jnp.abs(g[bn]["mean"]).max()) == 0.0 and float(jnp.abs(g[bn]["var"]).max()) == 0.0
    with pytest.raises(ValueError, match="depth"):
        ModelConfig(arch="resnet", input_shape=(32, 32, 3), depth=21)
