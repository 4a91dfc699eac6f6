"""rcurves.models.onnx_reader: ONNX files written here with onnx.helper, read back, compared with NumPy references."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import jax  # noqa: E402

from rcurves.models import LoadedModel  # noqa: E402
from rcurves.models.onnx_reader import OnnxFn, load_onnx  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# writing ONNX files


def write_model(path, nodes, inits, in_shape, out_shape, *, opset=17, in_name="x", out_name="y"):
    """An ONNX file at ``path``: ``nodes`` (helper.make_node), ``inits`` {name: numpy array}, a batch-symbolic
    float input ``(N, *in_shape)`` and output ``(N, *out_shape)``."""
    tensors = [numpy_helper.from_array(np.asarray(v), name=k) for k, v in inits.items()]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(in_name, TensorProto.FLOAT, ["N", *in_shape])],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, ["N", *out_shape])], initializer=tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="rcurves-tests")
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ---------------------------------------------------------------------------------------------------------------
# NumPy references (float64, loops over output positions; independent of the converter)


def np_conv(x, w, b, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1)):
    """x (N, C, H, W), w (F, C, kh, kw), pads (top, left, bottom, right)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    f, c, kh, kw = w.shape
    ekh, ekw = (kh - 1) * dil[0] + 1, (kw - 1) * dil[1] + 1
    ho = (x.shape[2] - ekh) // strides[0] + 1
    wo = (x.shape[3] - ekw) // strides[1] + 1
    out = np.zeros((x.shape[0], f, ho, wo))
    for i in range(ho):
        for j in range(wo):
            r, s = i * strides[0], j * strides[1]
            patch = x[:, :, r:r + ekh:dil[0], s:s + ekw:dil[1]]        # (N, C, kh, kw)
            out[:, :, i, j] = np.einsum("nckl,fckl->nf", patch, w.astype(np.float64))
    return out + (0 if b is None else b.reshape(1, -1, 1, 1))


def np_avgpool(x, k, s, pads=(0, 0, 0, 0), include_pad=False):
    n, c, h, w = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    valid = np.pad(np.ones((h, w)), ((pads[0], pads[2]), (pads[1], pads[3])))
    ho, wo = (xp.shape[2] - k[0]) // s[0] + 1, (xp.shape[3] - k[1]) // s[1] + 1
    out = np.zeros((n, c, ho, wo))
    for i in range(ho):
        for j in range(wo):
            r, q = i * s[0], j * s[1]
            total = xp[:, :, r:r + k[0], q:q + k[1]].sum(axis=(2, 3))
            count = k[0] * k[1] if include_pad else valid[r:r + k[0], q:q + k[1]].sum()
            out[:, :, i, j] = total / count
    return out


def np_bn(x, scale, bias, mean, var, eps):
    sh = (1, -1, 1, 1)
    return (x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + eps) * scale.reshape(sh) + bias.reshape(sh)


def relu(z):
    return np.maximum(z, 0.0)


def to_nhwc(x):
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


# ---------------------------------------------------------------------------------------------------------------
# the test graphs (shared with tests/certify/test_onnx_layers.py)


def mlp_gemm(path, rng):
    """784 -> Gemm(transB=1) -> Relu -> Gemm(transB=0, alpha, beta) -> 10 (flat input, an MNIST MLP's layout)."""
    w1, b1 = f32(rng, 32, 784, scale=0.05), f32(rng, 32)
    w2, b2 = f32(rng, 32, 10, scale=0.3), f32(rng, 10)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["a"], name="relu1"),
             helper.make_node("Gemm", ["a", "w2", "b2"], ["y"], name="fc2", alpha=0.5, beta=2.0)]
    write_model(path, nodes, dict(w1=w1, b1=b1, w2=w2, b2=b2), [784], [10])
    ref = lambda x: 0.5 * (relu(x @ w1.T.astype(np.float64) + b1) @ w2) + 2.0 * b2  # noqa: E731
    return str(path), ref


def mlp_matmul(path, rng):
    """12 -> MatMul -> Add -> Relu -> MatMul -> Add -> 3."""
    w1, b1, w2, b2 = f32(rng, 12, 8), f32(rng, 8), f32(rng, 8, 3), f32(rng, 3)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"], name="mm1"),
             helper.make_node("Add", ["m1", "b1"], ["h"], name="add1"),
             helper.make_node("Relu", ["h"], ["a"], name="relu1"),
             helper.make_node("MatMul", ["a", "w2"], ["m2"], name="mm2"),
             helper.make_node("Add", ["b2", "m2"], ["y"], name="add2")]
    write_model(path, nodes, dict(w1=w1, b1=b1, w2=w2, b2=b2), [12], [3])
    return str(path), lambda x: relu(x @ w1.astype(np.float64) + b1) @ w2 + b2


def conv_net(path, rng):
    """(3, 8, 8) image: Sub mean, Div std (a Constant node), Conv 3x3 pads 1 + BatchNorm + Relu, Conv 4x4
    stride 2 pads 1 + Relu, AveragePool 2x2 stride 2, Flatten, Gemm -> 5."""
    mean = np.array([0.4, 0.5, 0.6], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.2, 0.25, 0.3], np.float32).reshape(3, 1, 1)
    w1, c1 = f32(rng, 4, 3, 3, 3, scale=0.3), f32(rng, 4)
    bn = dict(s=f32(rng, 4) + 1.0, b=f32(rng, 4), m=f32(rng, 4), v=np.abs(f32(rng, 4)) + 0.5)
    w2, c2 = f32(rng, 6, 4, 4, 4, scale=0.2), f32(rng, 6)
    w3, c3 = f32(rng, 5, 6 * 2 * 2), f32(rng, 5)
    nodes = [helper.make_node("Constant", [], ["std"], name="std_const",
                              value=numpy_helper.from_array(std, name="std_value")),
             helper.make_node("Sub", ["x", "mean"], ["xs"], name="sub_mean"),
             helper.make_node("Div", ["xs", "std"], ["xn"], name="div_std"),
             helper.make_node("Conv", ["xn", "w1", "c1"], ["h1"], name="conv1", pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("BatchNormalization", ["h1", "bn_s", "bn_b", "bn_m", "bn_v"], ["h1n"], name="bn1",
                              epsilon=1e-3),
             helper.make_node("Relu", ["h1n"], ["a1"], name="relu1"),
             helper.make_node("Conv", ["a1", "w2", "c2"], ["h2"], name="conv2", strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h2"], ["a2"], name="relu2"),
             helper.make_node("AveragePool", ["a2"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w3", "c3"], ["y"], name="fc", transB=1)]
    inits = dict(mean=mean, w1=w1, c1=c1, bn_s=bn["s"], bn_b=bn["b"], bn_m=bn["m"], bn_v=bn["v"], w2=w2, c2=c2,
                 w3=w3, c3=c3)
    write_model(path, nodes, inits, [3, 8, 8], [5])

    def ref(x):  # x NCHW
        z = (x - mean) / std
        z = relu(np_bn(np_conv(z, w1, c1, pads=(1, 1, 1, 1)), bn["s"], bn["b"], bn["m"], bn["v"], 1e-3))
        z = relu(np_conv(z, w2, c2, strides=(2, 2), pads=(1, 1, 1, 1)))
        z = np_avgpool(z, (2, 2), (2, 2))
        return z.reshape(z.shape[0], -1) @ w3.T + c3

    return str(path), ref


def residual_net(path, rng):
    """(2, 6, 6): Conv + Relu + Conv, Add the block's input (residual), Relu, GlobalAveragePool, Flatten, Gemm."""
    w1, c1 = f32(rng, 2, 2, 3, 3, scale=0.4), f32(rng, 2)
    w2, c2 = f32(rng, 2, 2, 3, 3, scale=0.4), f32(rng, 2)
    w3, c3 = f32(rng, 2, 4), f32(rng, 4)
    nodes = [helper.make_node("Conv", ["x", "w1", "c1"], ["h1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
             helper.make_node("Conv", ["a1", "w2", "c2"], ["h2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["h2", "x"], ["s"], name="residual"),
             helper.make_node("Relu", ["s"], ["a2"], name="relu2"),
             helper.make_node("GlobalAveragePool", ["a2"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "w3"], ["m"], name="fc"),
             helper.make_node("Add", ["m", "c3"], ["y"], name="fc_bias")]
    write_model(path, nodes, dict(w1=w1, c1=c1, w2=w2, c2=c2, w3=w3, c3=c3), [2, 6, 6], [4])

    def ref(x):
        h = np_conv(relu(np_conv(x, w1, c1, pads=(1, 1, 1, 1))), w2, c2, pads=(1, 1, 1, 1))
        g = relu(h + x).mean(axis=(2, 3))
        return g @ w3 + c3

    return str(path), ref


# ---------------------------------------------------------------------------------------------------------------
# logits against the references


def test_gemm_mlp_matches_numpy(tmp_path):
    rng = np.random.default_rng(0)
    path, ref = mlp_gemm(tmp_path / "mlp.onnx", rng)
    m = load_onnx(path)
    assert isinstance(m, LoadedModel) and isinstance(m.logits_fn, OnnxFn)
    assert m.label == "mlp" and m.identity.startswith("onnx:") and m.info["n_classes"] == 10
    assert m.logits_fn.input_shape == (784,) and m.info["operators"] == ["Gemm", "Relu"]
    x = rng.uniform(size=(7, 784)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(m.logits_fn(x)), ref(x), **TOL)
    # an MNIST image batch (n, 28, 28, 1) has the same 784 values per point
    np.testing.assert_allclose(np.asarray(m.logits_fn(x.reshape(7, 28, 28, 1))), ref(x), **TOL)


def test_matmul_add_mlp_matches_numpy(tmp_path):
    rng = np.random.default_rng(1)
    path, ref = mlp_matmul(tmp_path / "mm.onnx", rng)
    x = f32(rng, 9, 12)
    np.testing.assert_allclose(np.asarray(load_onnx(path).logits_fn(x)), ref(x), **TOL)


def test_conv_net_with_normalisation_takes_nhwc_and_matches_numpy(tmp_path):
    rng = np.random.default_rng(2)
    path, ref = conv_net(tmp_path / "cnn.onnx", rng)
    m = load_onnx(path, label="cnn")
    assert m.logits_fn.input_shape == (8, 8, 3) and m.info["file_input_shape"] == [3, 8, 8]
    x = rng.uniform(size=(6, 3, 8, 8)).astype(np.float32)        # NCHW, as the file
    expected = ref(x)
    got = np.asarray(m.logits_fn(to_nhwc(x)))                     # NHWC, as the toolkit
    np.testing.assert_allclose(got, expected, **TOL)
    # the layout matters: feeding NCHW values in NHWC order must give other logits
    assert not np.allclose(np.asarray(m.logits_fn(x.reshape(6, 8, 8, 3))), expected, atol=1e-3)


def test_residual_block_and_global_average_pool_match_numpy(tmp_path):
    rng = np.random.default_rng(3)
    path, ref = residual_net(tmp_path / "res.onnx", rng)
    x = f32(rng, 5, 2, 6, 6)
    np.testing.assert_allclose(np.asarray(load_onnx(path).logits_fn(to_nhwc(x))), ref(x), **TOL)


def test_conv_attributes_pooling_padding_reshape_transpose(tmp_path):
    """Dilation with SAME_UPPER, stride 2 with SAME_LOWER, asymmetric pads, AveragePool with pads
    (count_include_pad 0 and 1), a Reshape with 0 / -1, a Transpose and an Identity."""
    rng = np.random.default_rng(4)
    w1, w2, w3 = f32(rng, 3, 1, 3, 3), f32(rng, 2, 3, 2, 2), f32(rng, 2, 3, 3, 2)
    wf = f32(rng, 5 * 4 * 2, 3)   # after the transposed flatten
    shape = np.array([0, -1], np.int64)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h1"], name="dilated", dilations=[2, 2], auto_pad="SAME_UPPER"),
             helper.make_node("Conv", ["h1", "w2"], ["h2"], name="lower", strides=[2, 2], auto_pad="SAME_LOWER"),
             helper.make_node("Conv", ["h1", "w3"], ["h3"], name="asym", pads=[0, 1, 2, 0]),
             helper.make_node("AveragePool", ["h2"], ["p1"], name="pool_excl", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["h3"], ["p2"], name="pool_incl", kernel_shape=[2, 2], strides=[2, 2],
                              pads=[1, 0, 1, 1], count_include_pad=1),
             helper.make_node("Identity", ["p1"], ["p1i"], name="ident"),
             helper.make_node("Transpose", ["p2"], ["t"], name="tr", perm=[0, 2, 3, 1]),
             helper.make_node("Reshape", ["t", "shape"], ["r"], name="resh"),
             helper.make_node("Reshape", ["p1i", "shape"], ["r1"], name="resh1"),
             helper.make_node("MatMul", ["r1", "wa"], ["ma"], name="mma"),
             helper.make_node("MatMul", ["r", "wf"], ["mb"], name="mmb"),
             helper.make_node("Add", ["ma", "mb"], ["y"], name="sum")]
    wa = f32(rng, 2 * 5 * 4, 3)
    write_model(tmp_path / "attrs.onnx", nodes, dict(w1=w1, w2=w2, w3=w3, wf=wf, wa=wa, shape=shape),
                [1, 9, 8], [3])

    def ref(x):
        h1 = np_conv(x, w1, None, pads=(2, 2, 2, 2), dil=(2, 2))                # SAME for k_eff 5
        h2 = np_conv(h1, w2, None, strides=(2, 2), pads=(1, 0, 0, 0))         # 9x8, k 2, s 2: totals 1, 0
        h3 = np_conv(h1, w3, None, pads=(0, 1, 2, 0))
        p1 = np_avgpool(h2, (3, 3), (1, 1), pads=(1, 1, 1, 1))
        p2 = np_avgpool(h3, (2, 2), (2, 2), pads=(1, 0, 1, 1), include_pad=True)
        t = p2.transpose(0, 2, 3, 1).reshape(x.shape[0], -1)
        return p1.reshape(x.shape[0], -1) @ wa + t @ wf

    x = f32(rng, 4, 1, 9, 8)
    m = load_onnx(tmp_path / "attrs.onnx")
    assert m.logits_fn.input_shape == (9, 8, 1)
    np.testing.assert_allclose(np.asarray(m.logits_fn(to_nhwc(x))), ref(x), **TOL)


# ---------------------------------------------------------------------------------------------------------------
# what is refused


def test_unsupported_operator_names_node_and_operator(tmp_path):
    nodes = [helper.make_node("Gemm", ["x", "w"], ["h"], name="fc", transB=1),
             helper.make_node("Sigmoid", ["h"], ["y"], name="squash")]
    path = write_model(tmp_path / "sig.onnx", nodes, dict(w=np.ones((3, 4), np.float32)), [4], [3])
    with pytest.raises(ValueError, match=r"node 'squash' \(Sigmoid\): operator Sigmoid is not supported"):
        load_onnx(path)


def test_grouped_conv_is_refused(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], name="dw", group=2),
             helper.make_node("Flatten", ["h"], ["y"], name="flat")]
    path = write_model(tmp_path / "g.onnx", nodes, dict(w=np.ones((2, 1, 1, 1), np.float32)), [2, 3, 3], [18])
    with pytest.raises(ValueError, match=r"node 'dw' \(Conv\): group=2 is not supported"):
        load_onnx(path)


@pytest.mark.parametrize("case", ["attribute", "auto_pad", "ceil_mode", "fixed_batch", "training"])
def test_unsupported_attributes_and_fixed_batch_are_refused(tmp_path, case):
    w = np.ones((2, 1, 2, 2), np.float32)
    conv = dict(attribute=dict(pads=[0, 0, 0, 0], foo=1), auto_pad=dict(auto_pad="WEIRD")).get(case, {})
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], name="c", **conv)]
    inits = dict(w=w)
    if case == "ceil_mode":
        nodes.append(helper.make_node("AveragePool", ["h"], ["h2"], name="p", kernel_shape=[2, 2], ceil_mode=1))
    elif case == "training":
        nodes.append(helper.make_node("BatchNormalization", ["h", "s", "s", "s", "s"], ["h2"], name="bn",
                                      training_mode=1))
        inits["s"] = np.ones(2, np.float32)
    else:
        nodes.append(helper.make_node("Identity", ["h"], ["h2"], name="id"))
    inits["shape"] = np.array([1, -1] if case == "fixed_batch" else [-1, 8], np.int64)
    nodes.append(helper.make_node("Reshape", ["h2", "shape"], ["y"], name="flat"))
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
        initializer=[numpy_helper.from_array(v, name=k) for k, v in inits.items()]),
        opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / f"{case}.onnx")
    onnx.save(model, path)
    expected = {"attribute": r"node 'c' \(Conv\): attribute 'foo' is not supported",
                "auto_pad": r"node 'c' \(Conv\): auto_pad 'WEIRD'",
                "ceil_mode": r"node 'p' \(AveragePool\): ceil_mode=1",
                "fixed_batch": r"node 'flat' \(Reshape\): cannot reshape",
                "training": r"node 'bn' \(BatchNormalization\): training_mode=1"}[case]
    with pytest.raises(ValueError, match=expected):
        load_onnx(path)


def test_missing_or_broken_file_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        load_onnx(tmp_path / "absent.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"not a protobuf at all \x00\x01")
    with pytest.raises(ValueError, match="junk.onnx"):
        load_onnx(tmp_path / "junk.onnx")


# ---------------------------------------------------------------------------------------------------------------
# parameters are data: one program per architecture


def test_same_architecture_shares_one_compiled_program(tmp_path):
    a = load_onnx(mlp_matmul(tmp_path / "a.onnx", np.random.default_rng(5))[0])
    b = load_onnx(mlp_matmul(tmp_path / "b.onnx", np.random.default_rng(6))[0])
    assert a.logits_fn.graph == b.logits_fn.graph and a.identity != b.identity
    leaves, treedef = jax.tree_util.tree_flatten(a.logits_fn)
    assert len(leaves) == 4 and jax.tree_util.tree_structure(b.logits_fn) == treedef
    traces = []

    @jax.jit
    def logits(model, x):
        traces.append(1)
        return model(x)

    x = np.ones((3, 12), np.float32)
    la, lb = logits(a.logits_fn, x), logits(b.logits_fn, x)
    assert len(traces) == 1                              # the weights were arguments, not constants
    np.testing.assert_allclose(np.asarray(la), np.asarray(a.logits_fn(x)), **TOL)
    np.testing.assert_allclose(np.asarray(lb), np.asarray(b.logits_fn(x)), **TOL)
    assert not np.allclose(np.asarray(la), np.asarray(lb))


@pytest.mark.highest
def test_round_trip_through_jax2onnx(tmp_path):
    """A toolkit MLP exported by a third-party exporter (jax2onnx, when installed) reads back to the same logits."""
    jax2onnx = pytest.importorskip("jax2onnx")
    from rcurves.models import ModelConfig, apply_fn, init_params, make_logits_fn

    cfg = ModelConfig("mlp", (784,), 10, hidden=(32,))
    params = init_params(cfg, jax.random.PRNGKey(0))
    proto = jax2onnx.to_onnx(lambda x: apply_fn(cfg)(params, x), [("B", 784)])
    onnx.save(proto, str(tmp_path / "mlp.onnx"))
    m = load_onnx(tmp_path / "mlp.onnx")
    x = np.random.default_rng(9).uniform(size=(6, 28, 28, 1)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(m.logits_fn(x)), np.asarray(make_logits_fn(cfg, params)(x)), **TOL)


def _flax_cnn_of_the_zoo(cfg, params):
    """The zoo's CNN architecture (``ModelConfig('cnn')``, convolutions as patches) written as a user would,
    with ``flax.linen.Conv`` (``lax.conv``, NHWC) and the same parameters."""
    import flax.linen as nn

    class Plain(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = x.reshape((x.shape[0], 28, 28, 1))
            x = nn.relu(nn.Conv(16, (4, 4), strides=2, padding="SAME", name="Conv2d_0")(x))
            x = nn.relu(nn.Conv(32, (4, 4), strides=2, padding="SAME", name="Conv2d_1")(x))
            x = nn.relu(nn.Dense(100, name="Dense_0")(x.reshape((x.shape[0], -1))))
            return nn.Dense(cfg.n_classes, name="Dense_1")(x)

    return lambda x: Plain().apply({"params": params}, x)


@pytest.mark.highest
def test_round_trip_of_a_toolkit_cnn_through_jax2onnx_nhwc(tmp_path):
    """The zoo's CNN architecture exported by jax2onnx (NHWC input, Transpose to NCHW around the Conv nodes,
    the flatten's batch size computed by Shape / Gather / Squeeze / Unsqueeze / Concat) reads back as NHWC
    (``layout='auto'``) with the toolkit's logits."""
    jax2onnx = pytest.importorskip("jax2onnx")
    from rcurves.models import ModelConfig, init_params, make_logits_fn

    cfg = ModelConfig("cnn", (28, 28, 1), 10)
    params = init_params(cfg, jax.random.PRNGKey(1))
    proto = jax2onnx.to_onnx(_flax_cnn_of_the_zoo(cfg, params), [("B", 28, 28, 1)])
    onnx.save(proto, str(tmp_path / "cnn.onnx"))
    ops = {n.op_type for n in proto.graph.node}
    assert {"Conv", "Shape", "Concat"} <= ops                 # the exporter's graph, not one written here
    m = load_onnx(tmp_path / "cnn.onnx")
    assert m.info["layout"] == "NHWC (as in the file)" and m.logits_fn.input_shape == (28, 28, 1)
    x = np.random.default_rng(2).uniform(size=(5, 28, 28, 1)).astype(np.float32)
    want = np.asarray(make_logits_fn(cfg, params)(x))
    np.testing.assert_allclose(np.asarray(m.logits_fn(x)), want, **TOL)
    from rcurves.certify import from_onnx                    # and as a verifiable network

    np.testing.assert_allclose(np.asarray(from_onnx(m).logits(x)), want, **TOL)


def nhwc_net_with_shape_arithmetic(path, rng, opset=17):
    """An NHWC (8, 8, 3) input, Transpose to NCHW, Conv 3x3 pads 1 + Relu, Transpose back, then a flatten whose
    target shape is computed from the input's shape (Shape, Gather, Squeeze / Unsqueeze with axes as an
    input from opset 13, else as an attribute, Concat, Cast), Gemm -> 4."""
    w, c = f32(rng, 5, 3, 3, 3, scale=0.3), f32(rng, 5)
    w2, b2 = f32(rng, 4, 8 * 8 * 5, scale=0.05), f32(rng, 4)
    ax = lambda name: ([name], {}) if opset >= 13 else ([], dict(axes=[0]))     # noqa: E731
    sq_in, sq_kw = ax("zero")
    un_in, un_kw = ax("zero")
    nodes = [helper.make_node("Transpose", ["x"], ["t"], name="to_nchw", perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["t", "w", "c"], ["h"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["a"], name="relu"),
             helper.make_node("Transpose", ["a"], ["b"], name="to_nhwc", perm=[0, 2, 3, 1]),
             helper.make_node("Shape", ["b"], ["shp"], name="shape"),
             helper.make_node("Gather", ["shp", "idx"], ["n1"], name="batch", axis=0),
             helper.make_node("Squeeze", ["n1"] + sq_in, ["n0"], name="squeeze", **sq_kw),
             helper.make_node("Unsqueeze", ["n0"] + un_in, ["n"], name="unsqueeze", **un_kw),
             helper.make_node("Concat", ["n", "rest"], ["target64"], name="concat", axis=0),
             helper.make_node("Cast", ["target64"], ["target"], name="cast", to=TensorProto.INT64),
             helper.make_node("Reshape", ["b", "target"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], name="fc", transB=1)]
    inits = dict(w=w, c=c, w2=w2, b2=b2, idx=np.array([0], np.int64), rest=np.array([-1], np.int64))
    if opset >= 13:
        inits["zero"] = np.array([0], np.int64)
    write_model(path, nodes, inits, [8, 8, 3], [4], opset=opset)

    def ref(x_nhwc):
        h = relu(np_conv(x_nhwc.transpose(0, 3, 1, 2), w, c, pads=(1, 1, 1, 1))).transpose(0, 2, 3, 1)
        return h.reshape(len(h), -1) @ w2.T.astype(np.float64) + b2
    return str(path), ref


@pytest.mark.parametrize("opset", [11, 17])
def test_an_nhwc_file_with_shape_arithmetic_matches_numpy(tmp_path, opset):
    rng = np.random.default_rng(12)
    path, ref = nhwc_net_with_shape_arithmetic(tmp_path / "nhwc.onnx", rng, opset)
    m = load_onnx(path)
    assert m.info["layout"] == "NHWC (as in the file)" and m.logits_fn.input_shape == (8, 8, 3)
    for n in (1, 3):
        x = rng.uniform(size=(n, 8, 8, 3)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(m.logits_fn(x)), ref(x), **TOL)
    with pytest.raises(ValueError, match="layout"):
        load_onnx(path, layout="chw")
    # forced to NCHW, the file's declared (8, 8, 3) is read as (C, H, W): the toolkit's points are (8, 3, 8)
    assert load_onnx(path, layout="nchw").logits_fn.input_shape == (8, 3, 8)


@pytest.mark.parametrize("opset", [11, 17])
def test_pytorch_flatten_with_a_scalar_gather_index(tmp_path, opset):
    """PyTorch's ``x.view(x.size(0), -1)``: Shape, Gather with a 0-d index, Unsqueeze, Concat, Reshape (an
    NCHW input going into a Conv: read as NCHW even though its shape (8, 4, 4) would look NHWC)."""
    rng = np.random.default_rng(6)
    w, c = f32(rng, 3, 8, 3, 3, scale=0.3), f32(rng, 3)
    w2, b2 = f32(rng, 2, 3 * 4 * 4, scale=0.2), f32(rng, 2)
    un_in, un_kw = (["zero"], {}) if opset >= 13 else ([], dict(axes=[0]))
    nodes = [helper.make_node("Conv", ["x", "w", "c"], ["h"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["a"], name="relu"),
             helper.make_node("Shape", ["a"], ["shp"], name="shape"),
             helper.make_node("Gather", ["shp", "idx"], ["n0"], name="batch", axis=0),
             helper.make_node("Unsqueeze", ["n0"] + un_in, ["n"], name="unsqueeze", **un_kw),
             helper.make_node("Concat", ["n", "rest"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["a", "target"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], name="fc", transB=1)]
    inits = dict(w=w, c=c, w2=w2, b2=b2, idx=np.array(0, np.int64), rest=np.array([-1], np.int64))
    if opset >= 13:
        inits["zero"] = np.array([0], np.int64)
    path = write_model(tmp_path / "torch.onnx", nodes, inits, [8, 4, 4], [2], opset=opset)
    m = load_onnx(path)
    assert m.info["layout"] == "NHWC (file NCHW)" and m.logits_fn.input_shape == (4, 4, 8)
    x = rng.uniform(size=(3, 8, 4, 4)).astype(np.float32)                  # NCHW, as the file
    want = relu(np_conv(x, w, c, pads=(1, 1, 1, 1))).reshape(3, -1) @ w2.T.astype(np.float64) + b2
    np.testing.assert_allclose(np.asarray(m.logits_fn(to_nhwc(x))), want, **TOL)


def test_auto_layout_reads_channels_first_and_channels_last_images():
    from rcurves.models.onnx_reader import _layout

    assert _layout("auto", (3, 32, 32)) == "nchw" and _layout("auto", (1, 28, 28)) == "nchw"
    assert _layout("auto", (32, 32, 3)) == "nhwc" and _layout("auto", (28, 28, 1)) == "nhwc"
    assert _layout("auto", (4, 4, 4)) == "nchw" and _layout("auto", (784,)) == "nchw"   # ambiguous: ONNX's
    assert _layout("nhwc", (3, 32, 32)) == "nhwc"
    # the graph decides first: a Transpose to NCHW reads NHWC, a Conv on the input NCHW
    assert _layout("auto", (3, 32, 32), [("Transpose", (0, 3, 1, 2))]) == "nhwc"
    assert _layout("auto", (8, 4, 4), [("Conv", None)]) == "nchw"


@pytest.mark.parametrize("case", ["values_to_shape", "gather_batch", "squeeze_no_axes", "half_cast"])
def test_shape_values_computed_from_activations_are_refused(tmp_path, case):
    """A Reshape target computed from the input's *values* (Cast of an activation to integers), a Gather along
    an activation's batch axis, a Squeeze of an activation without axes, a Cast to float16: each a ValueError
    naming the node."""
    rng = np.random.default_rng(3)
    w, b = f32(rng, 6, 4), f32(rng, 6)
    head = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc", transB=1)]
    inits = dict(w=w, b=b)
    if case == "values_to_shape":
        nodes = head + [helper.make_node("Cast", ["h"], ["hi"], name="bad", to=TensorProto.INT64),
                        helper.make_node("Reshape", ["h", "hi"], ["y"], name="reshape")]
    elif case == "gather_batch":
        inits["i"] = np.array([0, 1], np.int64)
        nodes = head + [helper.make_node("Gather", ["h", "i"], ["y"], name="bad", axis=0)]
    elif case == "half_cast":                                   # float16 rounds differently from float32
        nodes = head + [helper.make_node("Cast", ["h"], ["y"], name="bad", to=TensorProto.FLOAT16)]
    else:
        nodes = head + [helper.make_node("Unsqueeze", ["h", "one"], ["u"], name="unsq"),
                        helper.make_node("Squeeze", ["u"], ["y"], name="bad")]
        inits["one"] = np.array([1], np.int64)
    path = write_model(tmp_path / f"{case}.onnx", nodes, inits, [4], [6])
    with pytest.raises(ValueError, match="'bad'|'reshape'"):
        load_onnx(path)


def test_models_load_and_evaluate_take_an_onnx_path(tmp_path):
    """``rcurves.models.load("x.onnx")`` is ``load_onnx`` (same logits, identity = the file's hash), and
    ``rcurves.evaluate`` takes the path like any model (points the file classifies correctly: positive
    distances)."""
    from rcurves import evaluate
    from rcurves.pipeline.evaluation import AttackSettings
    from rcurves.models import load

    rng = np.random.default_rng(4)
    path, ref = mlp_gemm(tmp_path / "net.onnx", rng)
    m = load(path)
    assert isinstance(m.logits_fn, OnnxFn) and m.identity == load_onnx(path).identity and m.label == "net"
    assert load(tmp_path / "net.onnx", "other").label == "other"          # a PathLike, relabelled
    x = rng.uniform(size=(6, 784)).astype(np.float32)
    y = np.argmax(ref(x), 1).astype(np.int32)
    ev = evaluate({"net": path}, (x, y), norms=("linf",), thresholds={"linf": (0.01,)}, n=6, progress=False,
                  attack=AttackSettings(cw=False, search_steps=2, steps=3, restarts=1, polish_steps=2))
    d = np.asarray(ev.distance("net", "linf"))
    assert d.shape == (6,) and np.all(d > 0) and np.isfinite(d).any()
    with pytest.raises(ValueError, match="missing.onnx"):
        load(tmp_path / "missing.onnx")
