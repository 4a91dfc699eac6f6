"""rcurves.certify.onnx_layers on the input layouts ONNX files come in: vectors as (N, d), (N, d, 1), (N, 1, d),
(N, 1, d, 1) (PyTorch exports of one example: a fixed batch of 1), a matrix per point, NCHW and NHWC images.

Each file is written here with ``onnx.helper`` from seeded weights, with a float64 NumPy forward pass of its own
(in the file's layout). Checked: the reader's logits against it, the certify network's logits against the
reader's, the bounds against sampled points, and ``rcurves verify`` on VNN-LIB boxes written in the file's
order of ``X_i`` (per-element boxes; a point box whose class changes when the vector is read in another order).
"""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import jax  # noqa: E402

from rcurves import certify  # noqa: E402
from rcurves.certify import onnx_layers  # noqa: E402
from rcurves.models import load  # noqa: E402
from tests.models.test_onnx_reader import np_avgpool, np_conv, relu  # noqa: E402

_logits = jax.jit(lambda net, x: net.logits(x))
D, H, K = 20, 12, 4            # the MLPs' input, hidden and output sizes


def write(path, nodes, inits, in_dims, out_dims):
    """An ONNX file: ``in_dims`` / ``out_dims`` include the batch (``"N"`` symbolic, or 1 as PyTorch fixes it)."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_dims))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_dims))],
        initializer=[numpy_helper.from_array(np.asarray(v), name=k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def _w(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _f64(*arrays):
    return [np.asarray(a, np.float64) for a in arrays]


# ---------------------------------------------------------------------------------------------------------------
# the files: each returns (path, ref, point shape in the file); ref maps (n, *point shape) -> (n, K) logits


def vector(path, rng, d=D):
    """(N, d): Sub a mean, Div a std, Gemm (transB=1), Relu, Gemm (transB=0, alpha, beta)."""
    mean, w1, b1, w2, b2 = rng.uniform(0, 1, d).astype(np.float32), _w(rng, H, d), _w(rng, H), _w(rng, H, K), _w(rng, K)
    nodes = [helper.make_node("Sub", ["x", "mean"], ["xs"], name="sub"),
             helper.make_node("Div", ["xs", "std"], ["xn"], name="div"),
             helper.make_node("Gemm", ["xn", "w1", "b1"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["a"], name="relu"),
             helper.make_node("Gemm", ["a", "w2", "b2"], ["y"], name="fc2", alpha=0.5, beta=2.0)]
    write(path, nodes, dict(mean=mean, std=np.float32(0.5), w1=w1, b1=b1, w2=w2, b2=b2), ["N", d], ["N", K])
    mean, w1, b1, w2, b2 = _f64(mean, w1, b1, w2, b2)
    return str(path), lambda x: 0.5 * (relu((x - mean) / np.float32(0.5) @ w1.T + b1) @ w2) + 2.0 * b2, (d,)


def column_of_one(path, rng, d=D):
    """(1, d, 1), PyTorch's export of one column: Sub / Div, MatMul W @ x, Add a (h, 1) bias, Relu, MatMul,
    Add, Reshape to the fixed target [1, K]."""
    mean, std = rng.uniform(0, 1, (d, 1)).astype(np.float32), np.float32(0.3)
    w1, b1, w2, b2 = _w(rng, H, d, scale=d ** -0.5), _w(rng, H, 1), _w(rng, K, H), _w(rng, K, 1)
    nodes = [helper.make_node("Sub", ["x", "mean"], ["xs"], name="sub"),
             helper.make_node("Div", ["xs", "std"], ["xn"], name="div"),
             helper.make_node("MatMul", ["w1", "xn"], ["m1"], name="mm1"),
             helper.make_node("Add", ["m1", "b1"], ["h1"], name="add1"),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu"),
             helper.make_node("MatMul", ["w2", "a1"], ["m2"], name="mm2"),
             helper.make_node("Add", ["m2", "b2"], ["h2"], name="add2"),
             helper.make_node("Reshape", ["h2", "shape"], ["y"], name="to_logits")]
    write(path, nodes, dict(mean=mean, std=std, w1=w1, b1=b1, w2=w2, b2=b2, shape=np.array([1, K], np.int64)),
          [1, d, 1], [1, K])
    mean, w1, b1, w2, b2 = _f64(mean, w1, b1, w2, b2)

    def ref(x):                                               # x (n, d, 1)
        a = relu(np.einsum("hd,ndo->nho", w1, (x - mean) / std) + b1)
        return (np.einsum("kh,nho->nko", w2, a) + b2)[:, :, 0]
    return str(path), ref, (d, 1)


def column_flattened(path, rng, d=D):
    """(N, d, 1): Reshape to [-1, d], MatMul x @ W, Add, Relu, Gemm (transB=1)."""
    w1, b1, w2, b2 = _w(rng, d, H, scale=d ** -0.5), _w(rng, H), _w(rng, K, H), _w(rng, K)
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "w1"], ["m1"], name="mm1"),
             helper.make_node("Add", ["b1", "m1"], ["h1"], name="add1"),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu"),
             helper.make_node("Gemm", ["a1", "w2", "b2"], ["y"], name="fc2", transB=1)]
    write(path, nodes, dict(shape=np.array([-1, d], np.int64), w1=w1, b1=b1, w2=w2, b2=b2), ["N", d, 1], ["N", K])
    w1, b1, w2, b2 = _f64(w1, b1, w2, b2)
    return str(path), lambda x: relu(x[:, :, 0] @ w1 + b1) @ w2.T + b2, (d, 1)


def row(path, rng, d=D):
    """(N, 1, d): MatMul x @ W (a row per point), Add, Relu, MatMul, Add, Flatten."""
    w1, b1, w2, b2 = _w(rng, d, H, scale=d ** -0.5), _w(rng, H), _w(rng, H, K), _w(rng, K)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"], name="mm1"),
             helper.make_node("Add", ["m1", "b1"], ["h1"], name="add1"),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu"),
             helper.make_node("MatMul", ["a1", "w2"], ["m2"], name="mm2"),
             helper.make_node("Add", ["m2", "b2"], ["h2"], name="add2"),
             helper.make_node("Flatten", ["h2"], ["y"], name="flat")]
    write(path, nodes, dict(w1=w1, b1=b1, w2=w2, b2=b2), ["N", 1, d], ["N", K])
    w1, b1, w2, b2 = _f64(w1, b1, w2, b2)
    return str(path), lambda x: relu(x[:, 0] @ w1 + b1) @ w2 + b2, (1, d)


def row_column_of_one(path, rng, d=D):
    """(1, 1, d, 1) (a 4-d input, read as a 1 x d x 1 NCHW image): Squeeze axes 1 and 3, Gemm, Relu, Gemm."""
    w1, b1, w2, b2 = _w(rng, H, d, scale=d ** -0.5), _w(rng, H), _w(rng, K, H), _w(rng, K)
    nodes = [helper.make_node("Squeeze", ["x", "axes"], ["f"], name="squeeze"),
             helper.make_node("Gemm", ["f", "w1", "b1"], ["h1"], name="fc1", transB=1),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu"),
             helper.make_node("Gemm", ["a1", "w2", "b2"], ["y"], name="fc2", transB=1)]
    write(path, nodes, dict(axes=np.array([1, 3], np.int64), w1=w1, b1=b1, w2=w2, b2=b2), [1, 1, d, 1], [1, K])
    w1, b1, w2, b2 = _f64(w1, b1, w2, b2)
    return str(path), lambda x: relu(x[:, 0, :, 0] @ w1.T + b1) @ w2.T + b2, (1, d, 1)


def matrix(path, rng):
    """(N, 4, 5): Transpose to (5, 4), MatMul by a (4, 3) weight row by row, Add, Relu, a (2, 5) weight times
    the (5, 3) activation column by column, Unsqueeze, Flatten, Gemm."""
    w1, b1, a2, w3, b3 = _w(rng, 4, 3), _w(rng, 3), _w(rng, 2, 5), _w(rng, K, 6), _w(rng, K)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], name="swap", perm=[0, 2, 1]),
             helper.make_node("MatMul", ["t", "w1"], ["m1"], name="rows"),
             helper.make_node("Add", ["m1", "b1"], ["h1"], name="add1"),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu"),
             helper.make_node("MatMul", ["a2", "a1"], ["m2"], name="columns"),
             helper.make_node("Unsqueeze", ["m2", "axes"], ["u"], name="unsqueeze"),
             helper.make_node("Flatten", ["u"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="fc", transB=1)]
    write(path, nodes, dict(w1=w1, b1=b1, a2=a2, axes=np.array([2], np.int64), w3=w3, b3=b3), ["N", 4, 5], ["N", K])
    w1, b1, a2, w3, b3 = _f64(w1, b1, a2, w3, b3)

    def ref(x):
        h = relu(x.transpose(0, 2, 1) @ w1 + b1)                                  # (n, 5, 3)
        return np.einsum("km,nmj->nkj", a2, h).reshape(len(x), -1) @ w3.T + b3
    return str(path), ref, (4, 5)


def nchw(path, rng):
    """(N, 2, 6, 6): Sub / Div per channel, Conv 3x3 without padding, Relu, Conv 3x3 stride 2 pads 1 (PyTorch's
    padding=1: not 'SAME' at stride 2), Relu, Flatten, Gemm."""
    mean = rng.uniform(0, 1, (1, 2, 1, 1)).astype(np.float32)
    std = np.array([0.3, 0.6], np.float32).reshape(1, 2, 1, 1)
    w1, c1, w2, c2 = _w(rng, 3, 2, 3, 3, scale=0.4), _w(rng, 3), _w(rng, 4, 3, 3, 3, scale=0.4), _w(rng, 4)
    w3, c3 = _w(rng, K, 16), _w(rng, K)
    nodes = [helper.make_node("Sub", ["x", "mean"], ["xs"], name="sub"),
             helper.make_node("Div", ["xs", "std"], ["xn"], name="div"),
             helper.make_node("Conv", ["xn", "w1", "c1"], ["h1"], name="conv_valid"),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
             helper.make_node("Conv", ["a1", "w2", "c2"], ["h2"], name="conv_s2", strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h2"], ["a2"], name="relu2"),
             helper.make_node("Flatten", ["a2"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w3", "c3"], ["y"], name="fc", transB=1)]
    write(path, nodes, dict(mean=mean, std=std, w1=w1, c1=c1, w2=w2, c2=c2, w3=w3, c3=c3), ["N", 2, 6, 6], ["N", K])

    def ref(x):
        a1 = relu(np_conv((x - mean) / std, w1, c1))
        a2 = relu(np_conv(a1, w2, c2, strides=(2, 2), pads=(1, 1, 1, 1)))
        return a2.reshape(len(x), -1) @ w3.T.astype(np.float64) + c3
    return str(path), ref, (2, 6, 6)


def nhwc(path, rng):
    """(N, 6, 6, 2), as JAX / TensorFlow export: Transpose to NCHW, Conv 3x3 pads 1, Relu, Transpose back,
    Flatten (in H, W, C order), Gemm."""
    w1, c1, w2, c2 = _w(rng, 3, 2, 3, 3, scale=0.4), _w(rng, 3), _w(rng, K, 108, scale=0.2), _w(rng, K)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], name="to_nchw", perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["t", "w1", "c1"], ["h1"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu"),
             helper.make_node("Transpose", ["a1"], ["b"], name="to_nhwc", perm=[0, 2, 3, 1]),
             helper.make_node("Flatten", ["b"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w2", "c2"], ["y"], name="fc", transB=1)]
    write(path, nodes, dict(w1=w1, c1=c1, w2=w2, c2=c2), ["N", 6, 6, 2], ["N", K])

    def ref(x):
        a = relu(np_conv(x.transpose(0, 3, 1, 2), w1, c1, pads=(1, 1, 1, 1)))
        return a.transpose(0, 2, 3, 1).reshape(len(x), -1) @ w2.T.astype(np.float64) + c2
    return str(path), ref, (6, 6, 2)


LAYOUTS = dict(vector=vector, column_of_one=column_of_one, column_flattened=column_flattened, row=row,
               row_column_of_one=row_column_of_one, matrix=matrix, nchw=nchw, nhwc=nhwc)


def toolkit(model, x):
    """Points ``x (n, *file point shape)`` in the toolkit's layout of ``model`` (NHWC for an NCHW file)."""
    if model.logits_fn.graph.nchw:
        x = x.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(x.reshape((len(x),) + tuple(model.info["input_shape"])), np.float32)


def file_order(model, x):
    """Toolkit points back in the file's order, flat ``(n, d)``: the order of VNN-LIB's ``X_i``."""
    x = np.asarray(x, np.float64).reshape((len(x),) + tuple(model.info["input_shape"]))
    return (x.transpose(0, 3, 1, 2) if model.logits_fn.graph.nchw else x).reshape(len(x), -1)


@pytest.fixture(params=sorted(LAYOUTS))
def layout(request, tmp_path):
    """``(name, path, ref, file point shape, LoadedModel)`` of one file, seeded by its name."""
    rng = np.random.default_rng(sorted(LAYOUTS).index(request.param))
    path, ref, shape = LAYOUTS[request.param](tmp_path / f"{request.param}.onnx", rng)
    return request.param, path, ref, shape, load(path)


# ---------------------------------------------------------------------------------------------------------------
# logits and bounds


@pytest.mark.highest
def test_the_reader_and_the_network_give_the_files_logits(layout):
    name, path, ref, shape, m = layout
    x = np.random.default_rng(5).uniform(0, 1, (6,) + shape).astype(np.float32)
    want = ref(x.astype(np.float64))
    np.testing.assert_allclose(np.asarray(m.logits_fn(toolkit(m, x))), want, rtol=1e-5, atol=1e-5)
    net = certify.from_model(path)
    assert net.input_shape == tuple(m.info["input_shape"])
    for spec in (path, m):
        np.testing.assert_allclose(np.asarray(_logits(certify.from_model(spec), toolkit(m, x))),
                                   np.asarray(m.logits_fn(toolkit(m, x))), rtol=1e-5, atol=1e-5)
    if name in ("nchw", "nhwc"):    # normalisation: a 1x1 Conv; padded convolutions: Conv; the unpadded one: a Dense
        convs = [tuple(layer.kernel.shape) for layer in net.layers if isinstance(layer, certify.Conv)]
        assert convs == ([(1, 1, 2, 2), (4, 4, 3, 4)] if name == "nchw" else [(3, 3, 2, 3)])


@pytest.mark.parametrize("method", ["ibp", "crown"])
def test_bounds_hold_at_points_sampled_in_the_box(layout, method):
    name, path, ref, shape, m = layout
    rng = np.random.default_rng(6)
    net = certify.from_model(m)
    x = rng.uniform(0.2, 0.8, (3,) + shape)
    eps = 0.05
    lo, hi = (np.asarray(b) for b in certify.logit_bounds(net, toolkit(m, x), eps, norm="linf", method=method))
    pts = x[:, None] + rng.uniform(-eps, eps, (3, 200) + shape)
    pts[:, 0] = x + eps * np.sign(rng.standard_normal(x.shape))          # a corner
    z = ref(pts.reshape((-1,) + shape)).reshape(3, 200, K)
    assert np.all(lo[:, None] <= z + 1e-4) and np.all(z <= hi[:, None] + 1e-4)
    assert np.all(hi - lo > 0)


# ---------------------------------------------------------------------------------------------------------------
# rcurves verify on VNN-LIB boxes in the file's order


def run_cli(capsys, *argv):
    from rcurves.cli import main

    assert main(["verify", *map(str, argv)]) == 0
    return capsys.readouterr().out.strip()


def _top(z):
    s = np.sort(z, 1)
    return z.argmax(1), s[:, -1] - s[:, -2]


def _decide(capsys, tmp_path, path, lo, hi, label, name):
    certify.write_vnnlib(tmp_path / f"{name}.vnnlib", lo, hi, int(label), K)
    return json.loads(run_cli(capsys, path, tmp_path / f"{name}.vnnlib", "--json", "--timeout", "60"))


def test_cli_decides_per_element_boxes_in_the_files_order(layout, tmp_path, capsys):
    """For each layout: a box of a different small width per input around a point of large margin holds; the
    box spanned by points of two classes is violated by a counterexample inside it (file order) that the
    file's function misclassifies; a point box holds for the class of the vector read in the file's order
    and is violated for the class of the same values read reversed."""
    name, path, ref, shape, m = layout
    rng = np.random.default_rng(9)
    d = int(np.prod(shape))
    xs = rng.uniform(-3, 3, (400, d))           # wide enough for every class to appear
    cls, margin = _top(ref(xs.reshape((-1,) + shape)))
    a = xs[np.argmax(margin)]
    r = rng.uniform(0.1, 1.0, d) * 1e-3
    res = _decide(capsys, tmp_path, path, a - r, a + r, cls[np.argmax(margin)], "holds")
    assert res["result"] == "holds" and res["margin_lower"] > 0

    i, j = 0, int(np.flatnonzero(cls != cls[0])[0])
    lo, hi = np.minimum(xs[i], xs[j]), np.maximum(xs[i], xs[j])
    res = _decide(capsys, tmp_path, path, lo, hi, cls[i], "violated")
    cex = np.asarray(res["counterexample"])
    assert res["result"] == "violated" and cex.shape == (d,)
    assert np.all(lo <= cex) and np.all(cex <= hi)
    z = ref(cex.reshape((1,) + shape))[0]
    assert z[cls[i]] <= np.delete(z, cls[i]).max() + 1e-5

    right, m1 = _top(ref(xs.reshape((-1,) + shape)))
    wrong, m2 = _top(ref(xs[:, ::-1].reshape((-1,) + shape)))
    k = int(np.flatnonzero((right != wrong) & (m1 > 0.05) & (m2 > 0.05))[0])
    assert _decide(capsys, tmp_path, path, xs[k], xs[k], right[k], "point")["result"] == "holds"
    assert _decide(capsys, tmp_path, path, xs[k], xs[k], wrong[k], "reversed")["result"] == "violated"


def test_cli_on_a_784_column_of_one_example(tmp_path, capsys):
    """The (1, 784, 1) layout of PyTorch-exported MNIST MLPs: a small box holds, a hull of two classes is
    violated, and the library's verify agrees on the same box given in the toolkit layout."""
    rng = np.random.default_rng(11)
    path, ref, shape = column_of_one(tmp_path / "mnist.onnx", rng, d=784)
    m = load(path)
    assert m.info["input_shape"] == [784, 1]
    xs = rng.uniform(0, 1, (300, 784))
    cls, margin = _top(ref(xs[:, :, None]))
    a, label = xs[np.argmax(margin)], cls[np.argmax(margin)]
    r = rng.uniform(0.1, 1.0, 784) * 1e-4
    assert _decide(capsys, tmp_path, path, a - r, a + r, label, "holds")["result"] == "holds"
    assert certify.verify(path, (a - r)[:, None], (a + r)[:, None], int(label)).status == "verified"
    i, j = 0, int(np.flatnonzero(cls != cls[0])[0])
    lo, hi = np.minimum(xs[i], xs[j]), np.maximum(xs[i], xs[j])
    res = _decide(capsys, tmp_path, path, lo, hi, cls[i], "violated")
    cex = np.asarray(res["counterexample"])
    assert res["result"] == "violated" and np.all(lo <= cex) and np.all(cex <= hi)
    assert ref(cex[None, :, None])[0].argmax() != cls[i]


# ---------------------------------------------------------------------------------------------------------------
# windows certify.Conv does not compute directly, and what is refused


@pytest.mark.highest
def test_dilated_strided_and_border_averaged_windows_give_the_readers_logits(tmp_path):
    """A dilated conv (pads 2: a 'SAME' Conv with a 5x5 kernel of zeros around the taps), strides (1, 2) and an
    AveragePool with count_include_pad=0 (Dense layers of their matrices): the network's logits are the file's."""
    rng = np.random.default_rng(12)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h1"], name="dilated", dilations=[2, 2], pads=[2, 2, 2, 2]),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
             helper.make_node("Conv", ["a1", "w2", "c2"], ["h2"], name="strided", strides=[1, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h2"], ["a2"], name="relu2"),
             helper.make_node("AveragePool", ["a2"], ["p"], name="pool", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w3"], ["y"], name="fc", transB=1)]
    w1, w2, c2, w3 = _w(rng, 3, 2, 3, 3), _w(rng, 2, 3, 3, 3), _w(rng, 2), _w(rng, K, 2 * 6 * 3)
    path = write(tmp_path / "win.onnx", nodes, dict(w1=w1, w2=w2, c2=c2, w3=w3), ["N", 2, 6, 6], ["N", K])
    m, net = load(path), certify.from_model(path)
    assert [type(layer).__name__ for layer in net.layers if not isinstance(layer, certify.Reshape)] == [
        "Conv", "ReLU", "Dense", "ReLU", "Dense", "Dense"]
    assert next(layer for layer in net.layers if isinstance(layer, certify.Conv)).kernel.shape == (5, 5, 2, 3)
    x = rng.uniform(0, 1, (4, 2, 6, 6))
    a1 = relu(np_conv(x, w1, None, pads=(2, 2, 2, 2), dil=(2, 2)))
    a2 = relu(np_conv(a1, w2, c2, strides=(1, 2), pads=(1, 1, 1, 1)))
    want = np_avgpool(a2, (3, 3), (1, 1), pads=(1, 1, 1, 1)).reshape(4, -1) @ w3.T.astype(np.float64)
    xt = toolkit(m, x)
    np.testing.assert_allclose(np.asarray(m.logits_fn(xt)), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(_logits(net, xt)), want, rtol=1e-5, atol=1e-5)


def _refusal(tmp_path, nodes, inits, in_dims=("N", 6), out_dims=("N", 3)):
    return write(tmp_path / "refused.onnx", nodes, inits, in_dims, out_dims)


def test_unsupported_operators_are_named_with_their_node_by_the_reader_and_the_bridge(tmp_path, monkeypatch):
    w = np.ones((3, 6), np.float32)
    fc = helper.make_node("Gemm", ["x", "w"], ["h"], name="fc", transB=1)
    # the reader: an operator it does not evaluate, by name or (unnamed) by index
    path = _refusal(tmp_path, [fc, helper.make_node("Sigmoid", ["h"], ["y"], name="squash")], dict(w=w))
    for call in (load, certify.from_model):
        with pytest.raises(ValueError, match=r"node 'squash' \(Sigmoid\): operator Sigmoid is not supported"):
            call(path)
    path = _refusal(tmp_path, [fc, helper.make_node("Softmax", ["h"], ["y"])], dict(w=w))
    with pytest.raises(ValueError, match=r"node '#1 Softmax' \(Softmax\): operator Softmax is not supported"):
        certify.from_model(path)
    # the bridge: operators the reader evaluates but no layer computes, by name or by index
    path = _refusal(tmp_path, [fc, helper.make_node("Concat", ["h", "h"], ["c"], name="cat", axis=1),
                               helper.make_node("Gemm", ["c", "w2"], ["y"], name="fc2", transB=1)],
                    dict(w=w, w2=np.ones((3, 6), np.float32)))
    load(path)
    with pytest.raises(ValueError, match=r"node 'cat' \(Concat\): Concat of an activation is not a layer"):
        certify.from_model(path)
    path = _refusal(tmp_path, [fc, helper.make_node("Gather", ["h", "idx"], ["y"], axis=1)],
                    dict(w=np.ones((4, 6), np.float32), idx=np.array([2, 0, 1], np.int64)))
    load(path)
    with pytest.raises(ValueError, match=r"node '#1 Gather' \(Gather\): Gather of an activation is not a layer"):
        certify.from_model(path)
    # a window too large for a Dense of its matrix
    monkeypatch.setattr(onnx_layers, "MAX_DENSE", 100)
    path = _refusal(tmp_path, [helper.make_node("Conv", ["x", "wc"], ["h"], name="valid"),
                               helper.make_node("Flatten", ["h"], ["f"], name="flat"),
                               helper.make_node("Gemm", ["f", "wo"], ["y"], name="fc", transB=1)],
                    dict(wc=np.ones((2, 1, 3, 3), np.float32), wo=np.ones((3, 32), np.float32)),
                    ("N", 1, 6, 6))
    load(path)
    with pytest.raises(ValueError, match=r"node 'valid' \(Conv\): padding \[\(0, 0\), \(0, 0\)\] .* exceeds MAX_DENSE"):
        certify.from_model(path)


def test_a_fixed_batch_target_is_the_batch_only_in_a_file_of_one_example(tmp_path):
    """Reshape to [1, 6]: in a file declared with a batch of 1 the 1 is the batch (any batch is evaluated, point
    by point); with a free batch it stays refused, naming the node."""
    rng = np.random.default_rng(13)
    w = _w(rng, 3, 6)
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w"], ["y"], name="fc", transB=1)]
    inits = dict(shape=np.array([1, 6], np.int64), w=w)
    x = rng.uniform(0, 1, (5, 2, 3)).astype(np.float32)
    path = write(tmp_path / "one.onnx", nodes, inits, [1, 2, 3], [1, 3])
    np.testing.assert_allclose(np.asarray(load(path).logits_fn(x)), x.reshape(5, 6) @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(_logits(certify.from_model(path), x)), x.reshape(5, 6) @ w.T,
                               rtol=1e-5, atol=1e-5)
    path = write(tmp_path / "free.onnx", nodes, inits, ["N", 2, 3], ["N", 3])
    with pytest.raises(ValueError, match=r"node 'flat' \(Reshape\): cannot reshape"):
        load(path)
