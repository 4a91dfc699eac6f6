"""rcurves.certify.onnx_layers: ONNX graphs as certify Networks: same logits, sound bounds, equal to hand-built ones."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from rcurves import certify  # noqa: E402
from rcurves.certify import Conv, Dense, ReLU, Reshape  # noqa: E402
from rcurves.certify.onnx_layers import from_onnx  # noqa: E402
from rcurves.models.onnx_reader import load_onnx  # noqa: E402
from tests.models.test_onnx_reader import (conv_net, f32, mlp_gemm, mlp_matmul, nhwc_net_with_shape_arithmetic,  # noqa: E402,E501
                                           residual_net, to_nhwc, write_model)


_logits = jax.jit(lambda net, x: net.logits(x))      # one program, not one per operation


def _box_points(rng, x, eps, k=64):
    """``k`` random points in the l_inf ball of each point, clipped to [0, 1]: ``(n, k, ...)``."""
    pts = x[:, None] + rng.uniform(-eps, eps, size=(x.shape[0], k) + x.shape[1:]).astype(np.float32)
    pts[:, 0] = x                                  # the centre, and a corner of the box
    pts[:, 1] = x + eps * np.sign(rng.standard_normal(x.shape))
    return np.clip(pts, 0.0, 1.0).astype(np.float32)


def _assert_sound(rng, net, logits_fn, x, eps, method):
    lo, hi = (np.asarray(b) for b in certify.logit_bounds(net, x, eps, norm="linf", method=method))
    pts = _box_points(rng, x, eps)
    z = np.asarray(logits_fn(pts.reshape((-1,) + x.shape[1:]))).reshape(x.shape[0], pts.shape[1], -1)
    assert np.all(lo[:, None] <= z + 1e-5) and np.all(z <= hi[:, None] + 1e-5)
    assert np.all(hi - lo > 0)                      # a box, not a point: the bounds have a width
    return lo, hi


def _assert_same_bounds(net, hand, x, eps, method):
    a = certify.logit_bounds(net, x, eps, norm="linf", method=method)
    b = certify.logit_bounds(hand, x, eps, norm="linf", method=method)
    for u, v in zip(a, b):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-5, atol=1e-5)


@pytest.mark.accelerator("bf16")
@pytest.mark.parametrize("method", ["ibp", "crown"])
def test_gemm_mlp_bounds_are_sound_and_equal_the_hand_built_network(tmp_path, method):
    rng = np.random.default_rng(0)
    path, ref = mlp_gemm(tmp_path / "mlp.onnx", rng)
    net, m = from_onnx(path), load_onnx(path)
    x = rng.uniform(size=(4, 784)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(_logits(net, x)), ref(x), rtol=1e-5, atol=1e-5)
    init = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    hand = certify.network([Dense(jnp.asarray(init["w1"]), jnp.asarray(init["b1"])), ReLU(),
                            Dense(jnp.asarray(0.5 * init["w2"].T), jnp.asarray(2.0 * init["b2"]))], (784,))
    _assert_same_bounds(net, hand, x, 0.01, method)
    _assert_sound(rng, net, m.logits_fn, x, 0.01, method)


@pytest.mark.accelerator("bf16")
@pytest.mark.parametrize("method", ["ibp", "crown"])
def test_conv_net_with_normalisation_bounds_are_sound_and_equal_the_hand_built_network(tmp_path, method):
    rng = np.random.default_rng(2)
    path, ref = conv_net(tmp_path / "cnn.onnx", rng)
    net, m = from_onnx(path), load_onnx(path)
    assert net.input_shape == (8, 8, 3) and net.hidden_sizes == (8 * 8 * 4, 4 * 4 * 6)
    x = rng.uniform(size=(3, 3, 8, 8)).astype(np.float32)
    xh = to_nhwc(x)
    np.testing.assert_allclose(np.asarray(_logits(net, xh)), ref(x), rtol=1e-5, atol=1e-5)

    # the same network by hand: normalisation as a 1x1 conv, batch norm folded into conv1, the pool as a
    # conv with a diagonal kernel, the CHW flatten as a column permutation of the last Dense
    p = {t.name: onnx.numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(path).graph.initializer}
    mean, std = p["mean"].ravel(), np.array([0.2, 0.25, 0.3])
    a = p["bn_s"] / np.sqrt(p["bn_v"] + 1e-3)
    k1 = p["w1"].transpose(2, 3, 1, 0) * a
    c1 = (p["c1"] - p["bn_m"]) * a + p["bn_b"]
    pool = np.zeros((2, 2, 6, 6))
    pool[:, :, range(6), range(6)] = 0.25
    w3 = p["w3"].reshape(5, 6, 2, 2).transpose(0, 2, 3, 1).reshape(5, 24)
    f = lambda v: jnp.asarray(v, jnp.float32)  # noqa: E731
    hand = certify.network([
        Conv(f(np.diag(1 / std)[None, None]), f(-mean / std), 1),
        Conv(f(k1), f(c1), 1), ReLU(),
        Conv(f(p["w2"].transpose(2, 3, 1, 0)), f(p["c2"]), 2), ReLU(),
        Conv(f(pool), f(np.zeros(6)), 2), Reshape((24,)), Dense(f(w3), f(p["c3"]))], (8, 8, 3))
    _assert_same_bounds(net, hand, xh, 0.02, method)
    _assert_sound(rng, net, m.logits_fn, xh, 0.02, method)


def test_reshape_and_transpose_keep_the_file_order(tmp_path):
    """A flat input through Gemm, reshaped to a (2, 3, 3) image (its CHW order folded into the Gemm's rows),
    a padded conv, a Transpose to HWC before a Flatten, a Sub / Mul of per-element constants after a ReLU
    (a diagonal Dense): the network's logits are the reader's, its bounds sound."""
    rng = np.random.default_rng(7)
    inits = dict(w1=f32(rng, 18, 6), b1=f32(rng, 18), shape=np.array([-1, 2, 3, 3], np.int64),
                 wc=f32(rng, 3, 2, 3, 3), cc=f32(rng, 3), sub=f32(rng, 27), mul=f32(rng, 27), w2=f32(rng, 27, 4))
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
             helper.make_node("Reshape", ["h", "shape"], ["img"], name="unflatten"),
             helper.make_node("Relu", ["img"], ["a"], name="relu1"),
             helper.make_node("Conv", ["a", "wc", "cc"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["ac"], name="relu2"),
             helper.make_node("Transpose", ["ac"], ["t"], name="to_hwc", perm=[0, 2, 3, 1]),
             helper.make_node("Flatten", ["t"], ["fl"], name="flat"),
             helper.make_node("Sub", ["fl", "sub"], ["s"], name="shift"),
             helper.make_node("Mul", ["mul", "s"], ["ms"], name="scale"),
             helper.make_node("MatMul", ["ms", "w2"], ["y"], name="fc2")]
    path = write_model(tmp_path / "perm.onnx", nodes, inits, [6], [4])
    net, m = from_onnx(path), load_onnx(path)
    assert [type(layer).__name__ for layer in net.layers] == [
        "Dense", "Reshape", "ReLU", "Conv", "ReLU", "Reshape", "Dense", "Dense"]
    x = rng.uniform(size=(5, 6)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(_logits(net, x)), np.asarray(m.logits_fn(x)), rtol=1e-5, atol=1e-5)
    _assert_sound(rng, net, m.logits_fn, x, 0.05, "crown")


@pytest.mark.parametrize("method", ["ibp", "crown"])
def test_an_nhwc_file_with_shape_arithmetic_becomes_a_network_with_the_same_logits_and_sound_bounds(tmp_path,
                                                                                                   method):
    """An NHWC (8, 8, 3) file (Transposes around its Conv, a flatten whose target comes from Shape / Gather /
    Squeeze / Unsqueeze / Concat / Cast): the network takes the same NHWC points, gives the file's logits and
    sound bounds; a Shape of the activation adds no layer."""
    rng = np.random.default_rng(8)
    path, ref = nhwc_net_with_shape_arithmetic(tmp_path / "nhwc.onnx", rng)
    m = load_onnx(path)
    net = from_onnx(m)
    assert net.input_shape == (8, 8, 3)
    assert [type(l).__name__ for l in net.layers if not isinstance(l, Reshape)] == ["Conv", "ReLU", "Dense"]
    x = rng.uniform(size=(3, 8, 8, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(_logits(net, x)), ref(x), rtol=1e-5, atol=1e-5)
    _assert_sound(rng, net, m.logits_fn, x, 0.05, method)


def test_global_average_pool(tmp_path):
    rng = np.random.default_rng(8)
    nodes = [helper.make_node("Conv", ["x", "wg"], ["h"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["a"], name="relu"),
             helper.make_node("GlobalAveragePool", ["a"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "wo"], ["y"], name="fc", transB=1)]
    path = write_model(tmp_path / "gap.onnx", nodes, dict(wg=f32(rng, 4, 2, 3, 3), wo=f32(rng, 3, 4)),
                       [2, 5, 5], [3])
    net, m = from_onnx(path), load_onnx(path)
    x = rng.uniform(size=(3, 5, 5, 2)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(_logits(net, x)), np.asarray(m.logits_fn(x)), rtol=1e-5, atol=1e-5)
    _assert_sound(rng, net, m.logits_fn, x, 0.05, "crown")


def test_from_a_loaded_model_and_from_its_logits_fn(tmp_path):
    rng = np.random.default_rng(1)
    path, _ = mlp_matmul(tmp_path / "mm.onnx", rng)
    m = load_onnx(path)
    x = f32(rng, 3, 12)
    for spec in (m, m.logits_fn):
        np.testing.assert_allclose(np.asarray(_logits(from_onnx(spec), x)), np.asarray(m.logits_fn(x)), atol=1e-5)
    with pytest.raises(ValueError, match="model: expected an .onnx path"):
        from_onnx(42)


def test_residual_add_is_refused_and_an_unpadded_conv_is_the_dense_of_its_matrix(tmp_path):
    path, _ = residual_net(tmp_path / "res.onnx", np.random.default_rng(3))
    with pytest.raises(ValueError, match=r"node 'residual' \(Add\):.*skip connection"):
        from_onnx(path)
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], name="valid_conv"),          # no padding: 'VALID'
             helper.make_node("Flatten", ["h"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "wo"], ["y"], name="fc", transB=1)]
    path = write_model(tmp_path / "valid.onnx", nodes, dict(w=f32(rng, 2, 1, 3, 3), wo=f32(rng, 3, 2 * 4 * 4)),
                       [1, 6, 6], [3])
    net, m = from_onnx(path), load_onnx(path)
    assert [type(layer).__name__ for layer in net.layers if not isinstance(layer, Reshape)] == ["Dense", "Dense"]
    assert net.layers[1].w.shape == (2 * 4 * 4, 36)
    x = rng.uniform(size=(3, 6, 6, 1)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(_logits(net, x)), np.asarray(m.logits_fn(x)), rtol=1e-5, atol=1e-5)


def test_from_model_takes_an_onnx_path_and_a_loaded_model(tmp_path):
    """``certify.from_model`` accepts what ``rcurves.models.load`` returns: an ONNX path or its LoadedModel goes
    through ``from_onnx`` (same logits), a bare logits_fn is refused with the reason."""
    from rcurves.models import load

    rng = np.random.default_rng(2)
    path, _ = mlp_gemm(tmp_path / "g.onnx", rng)
    x = f32(rng, 4, 784)
    want = np.asarray(load_onnx(path).logits_fn(x))
    for spec in (path, load(path)):
        np.testing.assert_allclose(np.asarray(_logits(certify.from_model(spec), x)), want, atol=1e-4)
    with pytest.raises(ValueError, match="bare logits_fn"):
        certify.from_model(load(lambda z: z.reshape(len(z), -1)[:, :10]))
