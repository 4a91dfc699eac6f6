"""rcurves.certify.verify: per-input boxes decided by attack, CROWN and branch and bound.

Every network here is a tiny MLP with NumPy weights; each answer is checked
against something independent of the bounds: a float64 NumPy forward pass on
thousands of points sampled in the box (and all its corners), and the exact
MILP (``certify.milp``, HiGHS) on the same box.
"""
import functools
import itertools
import math
import sys

import numpy as np
import pytest

from rcurves import certify
from rcurves.certify.verify import box_network, verify

VERIFY = sys.modules["rcurves.certify.verify"]   # (certify.verify is the function)
SIZES = (4, 8, 8, 3)
BUDGET = 256          # one branch-and-bound round: one compiled program for every test


def weights(seed, sizes=SIZES):
    rng = np.random.default_rng(seed)
    return [((rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32),
             (0.3 * rng.standard_normal(o)).astype(np.float32)) for i, o in zip(sizes[:-1], sizes[1:])]


def np_logits(ws, x):
    """Float64 NumPy reference of ``certify.mlp(ws)``: ``x (n, d) -> (n, K)``."""
    z = np.asarray(x, np.float64).reshape(len(x), -1)
    for i, (w, b) in enumerate(ws):
        if i:
            z = np.maximum(z, 0.0)
        z = z @ w.astype(np.float64).T + b.astype(np.float64)
    return z


def np_margin(ws, x, label, others):
    z = np_logits(ws, x)
    return z[:, label] - z[:, list(others)].max(axis=1)


def box_points(lo, hi, n, seed):
    """``n`` uniform points of the box, its centre and every corner (over the inputs that are free)."""
    rng = np.random.default_rng(seed)
    pts = [rng.uniform(lo, hi, (n, lo.size)), ((lo + hi) / 2)[None]]
    free = np.flatnonzero(hi > lo)
    corners = np.tile(lo, (2 ** free.size, 1))
    for row, bits in enumerate(itertools.product((0, 1), repeat=free.size)):
        corners[row, free] = np.where(np.array(bits, bool), hi[free], lo[free])
    return np.concatenate(pts + [corners])


def random_box(rng, ws, eps, fixed=()):
    x = rng.uniform(-1, 1, SIZES[0])
    r = rng.uniform(0.3, 1.0, SIZES[0]) * eps
    r[list(fixed)] = 0.0
    label = int(np.argmax(np_logits(ws, x[None])[0]))
    return x - r, x + r, label


def milp_answer(ws, lo, hi, label, others):
    """'holds' / 'violated' / None by the exact MILP of ``certify.milp`` (Tjeng et al.'s encoding, HiGHS) on
    the box itself, over the original weights (big-M constants from float64 interval bounds, not from
    the verifier's); a solver point counts as a violation once a point on its ray from the centre, clipped
    to the box, violates in the float64 reference."""
    from rcurves.certify import milp

    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    mats = [w.astype(np.float64) for w, _ in ws]
    consts = [b.astype(np.float64) for _, b in ws]
    hidden, l, u = [], lo, hi
    for w, b in zip(mats[:-1], consts[:-1]):
        c, r = (l + u) / 2, (u - l) / 2
        hl, hu = w @ c + b - np.abs(w) @ r, w @ c + b + np.abs(w) @ r
        hidden.append((hl, hu))
        l, u = np.maximum(hl, 0.0), np.maximum(hu, 0.0)
    margin_lb = np.where(np.isin(np.arange(len(consts[-1])), others), -np.inf, np.inf)   # classes outside others
    centre = (lo + hi) / 2
    model = milp._build(mats, consts, hidden, margin_lb, centre, label, float(np.max(hi - lo)) + 1.0, (lo, hi),
                        "linf")
    sol = milp._solve(model, 5.0)
    if sol.status == "infeasible":
        return "holds"
    if sol.x is not None:
        ray = centre + np.asarray(milp.NUDGES)[:, None] * (sol.x[:lo.size] - centre)
        if np_margin(ws, np.clip(ray, lo, hi), label, others).min() < 0:
            return "violated"
    return None


@pytest.fixture(scope="module")
def compiled():
    """Compile the programs every test shares (4-8-8-3 MLPs: attack, CROWN, one branch-and-bound round)."""
    ws = weights(0)
    net = certify.mlp(ws)
    lo, hi = np.full(4, -0.5), np.full(4, 0.5)
    verify(net, lo, hi, 0, budget=BUDGET)
    VERIFY._branch_and_bound(box_network(net, lo, hi, 0, (1, 2)), math.inf, BUDGET)
    return True


# ---------------------------------------------------------------------------------------------------------------
# the reduction


def test_box_network_is_the_model_on_the_box_for_dense_and_conv_first_layers():
    rng = np.random.default_rng(1)
    ws = weights(1)
    conv = certify.network([
        certify.Conv(rng.standard_normal((2, 2, 1, 2)).astype(np.float32), rng.standard_normal(2).astype(np.float32)),
        certify.ReLU(), certify.Reshape((8,)),
        certify.Dense(rng.standard_normal((3, 8)).astype(np.float32), rng.standard_normal(3).astype(np.float32)),
        certify.Reshape((3,))], (2, 2, 1))     # a first layer that is not Dense, a last one that is not either
    for net, shape in ((certify.mlp(ws), (4,)), (conv, (2, 2, 1))):
        lo = rng.uniform(-1, 0, shape)
        hi = lo + rng.uniform(0, 1, shape) * (rng.uniform(size=shape) > 0.3)    # some inputs fixed
        for label, others in ((0, (1, 2)), (2, (0,)), (1, (2, 0))):
            g = box_network(net, lo, hi, label, sorted(others))
            assert g.input_shape == (4,) and g.n_classes == 1 + len(others)
            d = rng.uniform(-1, 1, (50, 4)).astype(np.float32)
            x = ((lo + hi) / 2).reshape(1, -1) + ((hi - lo) / 2).reshape(1, -1) * d
            want = np.asarray(net.logits(x.reshape((50,) + shape).astype(np.float32)))[:, [label, *sorted(others)]]
            np.testing.assert_allclose(np.asarray(g.logits(d)), want, rtol=1e-5, atol=1e-5)
    # the Dense-first case folds (no extra layer); the conv case prepends a diagonal Dense and a Reshape
    assert len(box_network(certify.mlp(ws), lo.reshape(-1), hi.reshape(-1), 0, (1, 2)).layers) == 5
    layers = box_network(conv, lo, hi, 0, (1, 2)).layers
    assert isinstance(layers[0], certify.Dense) and isinstance(layers[1], certify.Reshape)


# ---------------------------------------------------------------------------------------------------------------
# soundness against sampling, agreement with the MILP


@pytest.mark.parametrize("cuts, second", [(0, 0), (1, 2)])
def test_verified_boxes_hold_at_every_sampled_point_and_corner(compiled, monkeypatch, cuts, second):
    """With and without the first layer's cuts (``verify.CUTS`` on the margin, ``verify.SECOND_CUTS`` on the
    second layer's bounds; with them the boxes that needed branching are proven at the root: the search's
    root, detail 'alpha-crown')."""
    monkeypatch.setattr(VERIFY, "CUTS", cuts)
    monkeypatch.setattr(VERIFY, "SECOND_CUTS", second)
    rng = np.random.default_rng(5)
    stages, details = set(), set()
    n_verified = 0
    for seed in (0, 2):
        ws = weights(seed)
        net = certify.mlp(ws)
        for eps in (0.05, 0.15, 0.3, 0.45, 0.6):
            lo, hi, label = random_box(rng, ws, eps)
            res = verify(net, lo, hi, label, budget=BUDGET)
            others = [j for j in range(3) if j != label]
            m = np_margin(ws, box_points(lo, hi, 4000, seed), label, others)
            assert res.margin_lower <= m.min() + 1e-4            # a lower bound, whatever the status
            assert res.margin_upper >= m.min() - 1e-4 or res.status == "falsified"
            if res.status == "verified":
                n_verified += 1
                stages.add(res.stage)
                details.add(res.detail)
                assert m.min() > 0, (seed, eps, res)
                assert res.margin_lower > 0 and res.counterexample is None
    assert n_verified >= 5 and "crown" in details
    assert {"crown", "bab"} <= stages if cuts == 0 else "alpha-crown" in details   # both proof stages exercised


def test_falsified_boxes_carry_a_counterexample_inside_the_box_that_violates_it(compiled):
    rng = np.random.default_rng(7)
    n = 0
    for seed in (0, 2):
        ws = weights(seed)
        net = certify.mlp(ws)
        for eps in (0.5, 0.7, 0.9, 1.2, 1.5):
            lo, hi, label = random_box(rng, ws, eps)
            res = verify(net, lo, hi, label, budget=BUDGET)
            if res.status != "falsified":
                continue
            n += 1
            x = res.counterexample
            assert x.dtype == np.float64 and x.shape == (4,) and res.stage == "attack"
            assert np.all(x >= lo) and np.all(x <= hi)
            assert np.all(x.astype(np.float32) == x)      # float32 numbers: what the model sees
            others = [j for j in range(3) if j != label]
            z32 = np.asarray(net.logits(x[None].astype(np.float32)))[0]
            assert z32[label] <= z32[others].max()                     # the model itself, float32
            assert np_margin(ws, x[None], label, others)[0] <= 1e-5     # and the float64 reference
            assert res.margin_upper <= 0 and res.subdomains == 0
    assert n >= 5


@pytest.mark.accelerator("bf16")
@pytest.mark.parametrize("cuts, second", [(0, 0), (1, 2)])
def test_status_agrees_with_the_exact_milp_on_random_boxes(compiled, monkeypatch, cuts, second):
    """With and without the first layer's cuts (``verify.CUTS``, ``verify.SECOND_CUTS``): no contradiction with
    the exact MILP; without them some boxes need branching, with them those are proven by the search's
    root."""
    monkeypatch.setattr(VERIFY, "CUTS", cuts)
    monkeypatch.setattr(VERIFY, "SECOND_CUTS", second)
    rng = np.random.default_rng(11)
    table, stages, details = {}, {}, {}
    for seed in (0, 2, 3, 4, 5):
        ws = weights(seed)
        net = certify.mlp(ws)
        for eps in (0.1, 0.25, 0.4, 0.55, 0.7, 0.9, 1.2):
            fixed = (1,) if eps > 0.5 else (0, 3) if eps == 0.4 else ()
            lo, hi, label = random_box(rng, ws, eps, fixed)
            res = verify(net, lo, hi, label, budget=BUDGET)
            exact = milp_answer(ws, lo, hi, label, [j for j in range(3) if j != label])
            table[(res.status, exact)] = table.get((res.status, exact), 0) + 1
            stages[res.stage] = stages.get(res.stage, 0) + 1
            details[res.detail] = details.get(res.detail, 0) + 1
            assert not (res.status == "verified" and exact == "violated"), (seed, eps, res)
            assert not (res.status == "falsified" and exact == "holds"), (seed, eps, res)
    print("verify vs MILP:", table, "stages:", stages, "details:", details)
    assert table.get(("verified", "holds"), 0) >= 10 and table.get(("falsified", "violated"), 0) >= 8
    assert sum(v for (s, e), v in table.items() if e is not None and s == "unknown") <= 2   # decided where MILP is
    if cuts == 0:
        assert stages.get("bab", 0) >= 2                 # some of them needed branching
    else:
        assert details.get("alpha-crown", 0) + details.get("bab", 0) >= 2     # the search (its root) proved some


def test_boxes_just_inside_and_just_beyond_the_exact_radius(compiled):
    """Boxes ``c +- s w`` at 0.9 and 1.1 times the largest scale ``s`` the MILP proves: where the bounds
    need branching and the attack a good point."""
    rng = np.random.default_rng(21)
    counts = {}
    for seed in (0, 2, 3, 4, 5, 6):
        ws = weights(seed)
        net = certify.mlp(ws)
        c, w = rng.uniform(-1, 1, 4), rng.uniform(0.3, 1.0, 4)
        label = int(np.argmax(np_logits(ws, c[None])[0]))
        others = [j for j in range(3) if j != label]
        a, b = 0.0, 1.5                                           # holds at a; not proven at b
        if milp_answer(ws, c - b * w, c + b * w, label, others) == "holds":
            continue
        for _ in range(7):
            m = (a + b) / 2
            if milp_answer(ws, c - m * w, c + m * w, label, others) == "holds":
                a = m
            else:
                b = m
        for f, want in ((0.9 * a, "verified"), (1.1 * b, "falsified")):
            res = verify(net, c - f * w, c + f * w, label, budget=BUDGET)
            assert res.status in (want, "unknown"), (seed, f, res)
            counts[(res.status, res.stage)] = counts.get((res.status, res.stage), 0) + 1
    print("near the exact radius:", counts)
    total = sum(counts.values())
    assert total >= 6 and sum(v for (s, _), v in counts.items() if s != "unknown") >= total - 2
    assert counts.get(("verified", "bab"), 0) >= 2


def test_boxes_with_fixed_inputs(compiled):
    ws = weights(3)
    net = certify.mlp(ws)
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, 4)
    label = int(np.argmax(np_logits(ws, x[None])[0]))
    others = [j for j in range(3) if j != label]
    # a point (every input fixed): decided exactly, by its own margin
    res = verify(net, x, x, label, budget=BUDGET)
    m0 = np_margin(ws, x[None], label, others)[0]
    assert res.status == "verified" and res.margin_lower == pytest.approx(m0, abs=1e-4)
    assert verify(net, x, x, others[0], budget=BUDGET).status == "falsified"
    # inputs 0 and 2 fixed, 1 and 3 free: sampled points keep x[0], x[2] and the answer matches the MILP
    for eps in (0.2, 0.8):
        lo, hi = x.copy(), x.copy()
        lo[[1, 3]] -= eps
        hi[[1, 3]] += eps
        res = verify(net, lo, hi, label, budget=BUDGET)
        exact = milp_answer(ws, lo, hi, label, others)
        assert exact is not None and res.result_word == exact, (eps, res, exact)
        if res.status == "falsified":
            cex = res.counterexample          # inside the box: the fixed inputs exactly (no float32 equals them)
            assert cex[0] == x[0] and cex[2] == x[2] and np.all(cex >= lo) and np.all(cex <= hi)
            z = np.asarray(net.logits(cex[None].astype(np.float32)))[0]
            assert z[label] <= z[others].max()
        pts = box_points(lo, hi, 3000, 4)
        assert np.all(pts[:, [0, 2]] == x[[0, 2]])
        assert (np_margin(ws, pts, label, others).min() > 0) == (res.status == "verified")


def test_others_restricts_the_property_to_those_classes(compiled):
    ws = weights(2)
    net = certify.mlp(ws)
    rng = np.random.default_rng(3)
    found = 0
    for _ in range(40):
        lo, hi, label = random_box(rng, ws, 0.6)
        pts = box_points(lo, hi, 3000, 1)
        z = np_logits(ws, pts)
        for j in (j for j in range(3) if j != label):
            rest = [k for k in range(3) if k not in (j, label)]
            if (z[:, label] - z[:, j]).min() > 0.05 and (z[:, label] - z[:, rest].max(1)).min() < -0.05:
                # label beats j everywhere, but not the other class: the argmax property fails
                assert verify(net, lo, hi, label, others=[j], budget=BUDGET).status == "verified"
                res = verify(net, lo, hi, label, budget=BUDGET)
                assert res.status == "falsified"
                found += 1
        if found >= 2:
            break
    assert found >= 2


def test_a_time_limit_spent_by_the_attack_gives_unknown(compiled):
    ws = weights(0)
    lo, hi, label = random_box(np.random.default_rng(5), ws, 0.05)
    res = verify(certify.mlp(ws), lo, hi, label, time_limit=1e-9, budget=BUDGET)
    assert res.status == "unknown" and res.stage == "attack" and res.subdomains == 0
    assert res.margin_lower == -math.inf and res.margin_upper > 0


# ---------------------------------------------------------------------------------------------------------------
# bad arguments


def test_bad_arguments_name_the_argument_before_anything_runs(monkeypatch):
    def never(*a, **k):
        raise AssertionError("a stage ran before the arguments were checked")

    monkeypatch.setattr(VERIFY, "_pgd", never)
    net = certify.mlp(weights(0))
    lo, hi = np.zeros(4), np.ones(4)
    cases = [
        (dict(net_or_model=object()), "net_or_model"),
        (dict(net_or_model="model.pt"), "net_or_model"),
        (dict(net_or_model="/no/such/model.onnx"), "net_or_model"),
        (dict(x_lo=np.zeros(5)), "x_lo"),
        (dict(x_hi=np.ones((2, 2))), "x_hi"),
        (dict(x_lo=np.array([0, np.nan, 0, 0])), "x_lo"),
        (dict(x_lo=np.array([0, 2.0, 0, 0])), "x_hi"),          # lo > hi at input 1
        (dict(label=3), "label"),
        (dict(label=-1), "label"),
        (dict(label=1.0), "label"),
        (dict(others=[0]), "others"),                           # the label itself
        (dict(others=[5]), "others"),
        (dict(others=[]), "others"),
        (dict(time_limit=0), "time_limit"),
        (dict(time_limit=-1.0), "time_limit"),
        (dict(time_limit=float("nan")), "time_limit"),
        (dict(budget=2), "budget"),
        (dict(seed=0.5), "seed"),
        (dict(per_margin="yes"), "per_margin"),
        (dict(batch=0), "batch"),
        (dict(batch="big"), "batch"),
        (dict(batch=2.5), "batch"),
        (dict(batch=True), "batch"),
    ]
    for change, name in cases:
        kw = dict(net_or_model=net, x_lo=lo, x_hi=hi, label=0)
        kw.update(change)
        with pytest.raises(ValueError, match=f"^{name}: "):
            verify(kw.pop("net_or_model"), kw.pop("x_lo"), kw.pop("x_hi"), kw.pop("label"), **kw)


# ---------------------------------------------------------------------------------------------------------------
# ONNX + VNN-LIB, through the command line


def write_onnx(path, nodes, inits, in_shape, n_out):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *in_shape])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", n_out])],
        initializer=[numpy_helper.from_array(np.asarray(v), name=k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def write_mlp_onnx(path, ws):
    """``ws`` as Gemm (transB) / Relu nodes: the function of ``certify.mlp(ws)``."""
    from onnx import helper

    nodes, inits, cur = [], {}, "x"
    for i, (w, b) in enumerate(ws):
        if i:
            nodes.append(helper.make_node("Relu", [cur], [f"r{i}"]))
            cur = f"r{i}"
        out = "y" if i == len(ws) - 1 else f"h{i}"
        nodes.append(helper.make_node("Gemm", [cur, f"w{i}", f"b{i}"], [out], transB=1))
        inits[f"w{i}"], inits[f"b{i}"] = w, b
        cur = out
    return write_onnx(path, nodes, inits, [ws[0][0].shape[1]], ws[-1][0].shape[0])


def run_cli(capsys, *argv):
    from rcurves.cli import main

    assert main(["verify", *map(str, argv)]) == 0
    return capsys.readouterr().out.strip()


def test_cli_answers_holds_and_violated_on_vnnlib_properties_of_an_onnx_mlp(compiled, tmp_path, capsys):
    import json

    ws = weights(2)
    model = write_mlp_onnx(tmp_path / "mlp.onnx", ws)
    rng = np.random.default_rng(0)
    xs = rng.uniform(-1, 1, (400, 4))
    z = np_logits(ws, xs)
    cls = z.argmax(1)
    margin = z.max(1) - np.sort(z, 1)[:, -2]
    # true: a tiny box around the point with the largest margin
    a = xs[np.argmax(margin)]
    certify.write_vnnlib(tmp_path / "true.vnnlib", a - 0.01, a + 0.01, int(cls[np.argmax(margin)]), 3)
    out = run_cli(capsys, model, tmp_path / "true.vnnlib", "--timeout", "60")
    word, secs = out.split()
    assert word == "holds" and secs.endswith("s") and 0 < float(secs[:-1]) < 60
    # false: the box spanned by two points of different classes contains the second one
    i, j = 0, int(np.flatnonzero(cls != cls[0])[0])
    lo, hi = np.minimum(xs[i], xs[j]), np.maximum(xs[i], xs[j])
    certify.write_vnnlib(tmp_path / "false.vnnlib", lo, hi, int(cls[i]), 3)
    assert run_cli(capsys, model, tmp_path / "false.vnnlib", "--timeout", "60").split()[0] == "violated"
    res = json.loads(run_cli(capsys, model, tmp_path / "false.vnnlib", "--json"))
    cex = np.asarray(res["counterexample"])
    assert res["result"] == "violated" and res["status"] == "falsified" and res["stage"] == "attack"
    assert cex.shape == (4,) and np.all(cex >= lo) and np.all(cex <= hi)
    assert np_margin(ws, cex[None], int(cls[i]), [k for k in range(3) if k != cls[i]])[0] <= 1e-5
    assert json.loads(run_cli(capsys, model, tmp_path / "true.vnnlib", "--json"))["margin_lower"] > 0


def test_cli_reads_an_nchw_box_in_the_order_of_the_onnx_input(tmp_path, capsys):
    """A 2-channel 2x2 image model: the property's X_i are NCHW; a point box holds for the class of the
    NCHW reading of the vector and is violated for another one, where the NHWC reading has another class."""
    from onnx import helper

    rng = np.random.default_rng(4)
    w1 = rng.standard_normal((3, 2, 1, 1)).astype(np.float32)
    b1 = rng.standard_normal(3).astype(np.float32)
    w2 = rng.standard_normal((3, 12)).astype(np.float32)
    b2 = rng.standard_normal(3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["h"], ["r"]), helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], transB=1)]
    model = write_onnx(tmp_path / "conv.onnx", nodes, dict(w1=w1, b1=b1, w2=w2, b2=b2), [2, 2, 2], 3)

    def np_model(v):                         # v: flat NCHW vectors (n, 8), the file's own order
        x = v.reshape(-1, 2, 2, 2)
        h = np.maximum(np.einsum("nchw,fc->nfhw", x, w1[:, :, 0, 0]) + b1[None, :, None, None], 0)
        return h.reshape(len(v), -1) @ w2.T + b2

    def top(z):
        s = np.sort(z, 1)
        return z.argmax(1), s[:, -1] - s[:, -2]

    vs = rng.uniform(0, 1, (500, 8)).astype(np.float32).astype(np.float64)
    nhwc_read = vs.reshape(-1, 2, 2, 2).transpose(0, 3, 1, 2).reshape(-1, 8)   # the vector taken as H, W, C
    (right, m1), (wrong, m2) = top(np_model(vs)), top(np_model(nhwc_read))
    k = int(np.flatnonzero((right != wrong) & (m1 > 0.05) & (m2 > 0.05))[0])
    v = vs[k]
    certify.write_vnnlib(tmp_path / "p.vnnlib", v, v, int(right[k]), 3)
    certify.write_vnnlib(tmp_path / "q.vnnlib", v, v, int(wrong[k]), 3)
    assert run_cli(capsys, model, tmp_path / "p.vnnlib").split()[0] == "holds"
    assert run_cli(capsys, model, tmp_path / "q.vnnlib").split()[0] == "violated"


# ---------------------------------------------------------------------------------------------------------------
# the attacks before branching, the lower bound after it


def sampled_scale(ws, c, w, label, others, seed):
    """``(sampled_min, a, b)``: ``sampled_min(s)`` the smallest margin over ``others`` at 3,000 sampled points
    and the corners of the box ``c +- s w``, and ``[a, b]`` the bracket of the largest scale at which it stays
    positive, bisected 10 times from ``[0, 1.5]``; ``(None, None, None)`` when it is positive at 1.5."""

    def sampled_min(s):
        return np_margin(ws, box_points(c - s * w, c + s * w, 3000, seed), label, others).min()

    a, b = 0.0, 1.5
    if sampled_min(b) > 0:
        return None, None, None
    for _ in range(10):
        a, b = ((a + b) / 2, b) if sampled_min((a + b) / 2) > 0 else (a, (a + b) / 2)
    return sampled_min, a, b


def near_radius_boxes(n_boxes, factor=0.85):
    """``(ws, lo, hi, label, others, sampled min margin)`` of boxes ``c +- factor s* w`` on the 4-8-8-3 MLPs,
    ``s*`` the largest scale at which 3,000 sampled points and the corners all keep the label (bisected):
    boxes that hold at every sampled point, where CROWN is usually not enough (a few do not hold: a violation
    between the samples, which branch and bound's exact leaves find)."""
    rng = np.random.default_rng(31)
    out = []
    for seed in range(40):
        ws = weights(seed)
        c, w = rng.uniform(-1, 1, 4), rng.uniform(0.3, 1.0, 4)
        label = int(np.argmax(np_logits(ws, c[None])[0]))
        others = [j for j in range(3) if j != label]
        sampled_min, a, b = sampled_scale(ws, c, w, label, others, seed)
        if sampled_min is None:
            continue
        s = factor * a
        out.append((ws, c - s * w, c + s * w, label, others, sampled_min(s)))
        if len(out) == n_boxes:
            break
    return out


@functools.lru_cache(maxsize=None)
def near_radius_results():
    """:func:`near_radius_boxes` (12 of them) with their :func:`verify` results."""
    return [(box, verify(certify.mlp(box[0]), box[1], box[2], box[3], budget=BUDGET)) for box in near_radius_boxes(12)]


def bab_box(most=False):
    """A near-radius box that branch and bound proved (the first, or the one that took most subdomains)."""
    found = [(box, res) for box, res in near_radius_results() if res.detail == "bab" and res.status == "verified"]
    return max(found, key=lambda f: f[1].subdomains)[0] if most else found[0][0]


def test_margin_lower_after_branch_and_bound_is_positive_and_below_the_sampled_minimum(compiled):
    stages = []
    for (ws, lo, hi, label, others, m), res in near_radius_results():
        assert m > 0
        if res.status == "falsified":                               # a violation between the samples: real
            x = res.counterexample
            assert np.all(x >= lo) and np.all(x <= hi) and np_margin(ws, x[None], label, others)[0] <= 1e-6
            assert milp_answer(ws, lo, hi, label, others) == "violated"
            continue
        assert res.margin_lower <= m + 1e-5, (res, m)              # a lower bound of the true minimum
        assert res.margin_lower <= res.margin_upper + 1e-5              # (float32 rounding apart)
        if res.status == "verified":
            stages.append(res.detail)
            assert 0 < res.margin_lower, res                        # the bound branch and bound reached
    assert stages.count("bab") >= 3, stages
    # every one decided: the fully split subdomains that alpha-beta-CROWN leaves open are exact LPs
    assert all(res.status != "unknown" for _, res in near_radius_results())


def test_the_attacks_after_crown_find_what_pgd_misses_and_every_point_is_rechecked(compiled, monkeypatch):
    ws = weights(2)
    net = certify.mlp(ws)
    rng = np.random.default_rng(7)
    boxes = [random_box(rng, ws, eps) for eps in (0.9, 1.2, 1.5, 1.2, 0.9)]

    def centre_only(fn, lo, hi, sel, shape, seed):      # a PGD that finds nothing: the centre alone
        return None, VERIFY._recheck(fn, lo, hi, sel, shape, np.zeros((1, lo.size)))[1], "centre", True

    monkeypatch.setattr(VERIFY, "_pgd", centre_only)
    search = VERIFY._search
    calls = []
    monkeypatch.setattr(VERIFY, "_search", lambda *a: calls.append(a[-1]) or search(*a))
    found = {}
    for lo, hi, label in boxes:
        res = verify(net, lo, hi, label, budget=BUDGET)
        if res.status == "falsified":
            found[res.detail] = found.get(res.detail, 0) + 1
            x = res.counterexample
            assert res.stage == "attack" and res.subdomains == 0 and np.all(x >= lo) and np.all(x <= hi)
            z = np.asarray(net.logits(x[None].astype(np.float32)))[0]
            assert z[label] <= np.delete(z, label).max() and res.margin_upper <= 0
    assert found.get("search", 0) >= 3 and calls[0] is False, (found, calls)

    # the ensemble after the adaptive search, when that finds nothing
    monkeypatch.setattr(VERIFY, "_search", lambda *a: (None, math.inf) if a[-1] is False else search(*a))
    lo, hi, label = boxes[0]
    res = verify(net, lo, hi, label, budget=BUDGET)
    assert res.status == "falsified" and res.detail == "ensemble"

    # an attack's point that does not violate the property is not a counterexample
    import attacks

    fake = attacks.MinimalResult(np.full(1, 0.5, np.float32), np.zeros((1, 4), np.float32), np.ones(1, bool))
    monkeypatch.setattr(VERIFY, "_search", search)
    monkeypatch.setattr(attacks, "minimal_distance", lambda *a, **k: fake)
    monkeypatch.setattr(attacks, "ensemble", lambda *a, **k: fake)
    ws0, lo, hi, label, others, m = bab_box()
    res = verify(certify.mlp(ws0), lo, hi, label, budget=BUDGET)
    assert res.status != "falsified" and res.margin_upper > 0


def test_branch_and_bound_falsifies_with_a_rechecked_primal_point_when_the_attacks_miss(compiled, monkeypatch):
    """With every attack disabled, a violated box reaches branch and bound, whose subdomains' primal points
    (vertices of the box) are counterexamples: 'falsified' by 'bab', the point inside the box and
    misclassified by the model; a re-check that confirms nothing never lets the search say 'falsified'."""
    from rcurves.certify import bab
    from rcurves.nets.bounds import BoundConfig

    def centre_only(fn, lo, hi, sel, shape, seed):
        return None, VERIFY._recheck(fn, lo, hi, sel, shape, np.zeros((1, lo.size)))[1], "centre", True

    monkeypatch.setattr(VERIFY, "_pgd", centre_only)
    monkeypatch.setattr(VERIFY, "_search", lambda *a: (None, math.inf))
    rng = np.random.default_rng(5)
    found = 0
    for seed in range(4):
        ws = weights(seed)
        net = certify.mlp(ws)
        for eps in (1.2, 1.5):
            lo, hi, label = random_box(rng, ws, eps)
            if milp_answer(ws, lo, hi, label, [j for j in range(3) if j != label]) != "violated":
                continue
            res = verify(net, lo, hi, label, budget=BUDGET)
            assert res.status != "verified", (seed, eps, res)
            if res.status == "falsified":
                found += 1
                x = res.counterexample
                assert res.detail == "bab" and res.stage == "bab" and np.all(x >= lo) and np.all(x <= hi)
                z = np.asarray(net.logits(x[None].astype(np.float32)))[0]
                assert z[label] <= np.delete(z, label).max() and res.margin_upper <= 0
                rnet = box_network(net, lo, hi, label, [j for j in range(3) if j != label])
                cfg = bab.bab_config(BoundConfig(norm="linf", method="crown", domain=(-1.0, 1.0)), 64)
                never = bab.bab_search(rnet, np.zeros(4, np.float32), 0, 1.0, cfg, check=lambda pts: None)
                assert never.reason != "falsified" and never.x_adv is None and not never.verified
    assert found >= 3, found


def test_the_ensemble_waits_for_half_the_time_limit(compiled, monkeypatch):
    ws, lo, hi, label, others, m = bab_box()
    calls = []
    search = VERIFY._search
    monkeypatch.setattr(VERIFY, "_search", lambda *a: calls.append(a[-1]) or search(*a))
    res = verify(certify.mlp(ws), lo, hi, label, budget=BUDGET)
    assert calls == [False, True] and res.status == "verified"
    calls.clear()
    monkeypatch.setattr(VERIFY, "ENSEMBLE_SHARE", 1.0)         # never half the limit left after the search
    res = verify(certify.mlp(ws), lo, hi, label, budget=BUDGET)
    assert calls == [False] and res.status == "verified"


# ---------------------------------------------------------------------------------------------------------------
# branch and bound inside verify: one search, a clock, a frontier that grows


def test_no_branch_and_bound_starts_after_the_deadline():
    net = certify.mlp(weights(0))
    rnet = box_network(net, np.full(4, -0.5), np.full(4, 0.5), 0, (1, 2))
    res = VERIFY._branch_and_bound(rnet, 0.0, 256)
    assert not res.verified and res.reason == "time" and res.bounded == 0 and res.lower == -math.inf


def test_the_budget_does_not_change_the_search(compiled):
    ws, lo, hi, label, others, m = bab_box(most=True)
    rnet = box_network(certify.mlp(ws), lo, hi, label, others)
    small = VERIFY._branch_and_bound(rnet, math.inf, 256, batch=8)     # (on any device: "auto" is capped by
    large = VERIFY._branch_and_bound(rnet, math.inf, VERIFY.MAX_BUDGET, batch=8)      # half the budget)
    assert small.verified and small.bounded > 8 and small == large       # same search, whatever the budget
    assert small.peak < small.bounded <= 256
    # the box whose proof took most subdomains (more than 32), on a budget of 16 (batches of 8 parents)
    (ws, lo, hi, label, others, m), res = max(((b, r) for b, r in near_radius_results()
                                               if r.status == "verified" and r.detail == "bab"),
                                              key=lambda br: br[1].subdomains)
    assert res.subdomains > 32
    few = VERIFY._branch_and_bound(box_network(certify.mlp(ws), lo, hi, label, others), math.inf, 16)
    assert few.reason == "budget" and not few.verified and 16 <= few.bounded <= 16 + 2 * 8 - 1
    assert few.lower <= m + 1e-5 and few.left > 0


def test_branch_and_bound_stops_on_the_clock_and_on_nan(compiled, monkeypatch):
    from rcurves.certify import bab, bab_host
    from rcurves.nets.bounds import BoundConfig

    ws, lo, hi, label, others, m = bab_box(most=True)
    rnet = box_network(certify.mlp(ws), lo, hi, label, others)
    cfg = bab.bab_config(BoundConfig(norm="linf", method="crown", domain=(-1.0, 1.0)), 256)
    x = np.zeros(4, np.float32)
    assert bab.bab_search(rnet, x, 0, 1.0, cfg).bounded > 3                # more than one batch to a proof
    clock = iter(range(10 ** 6))
    monkeypatch.setattr(bab_host, "_now", lambda: float(next(clock)))          # one second per reading
    res = bab.bab_search(rnet, x, 0, 1.0, cfg, time_limit=1.5)            # read at 0 (start), 1, 2
    assert res.reason == "time" and res.bounded == 3 and not res.verified and res.left > 0
    assert res.lower <= m + 1e-5
    monkeypatch.undo()
    res = bab.bab_search(rnet, x, 0, np.float32(np.nan), cfg)
    assert not res.verified and res.reason == "nan" and res.lower == -np.inf


# ---------------------------------------------------------------------------------------------------------------
# branch and bound one margin at a time (the default) against the joint search


def test_each_margin_on_its_own_proves_what_the_joint_search_proves(compiled):
    """On the near-radius boxes (most of them true properties needing branching): every box the joint search
    proves, the per-margin search proves too, on the same total budget; what one falsifies the other never
    proves; each margin lower bound is below the sampled minimum."""
    joint_n = 0
    for (ws, lo, hi, label, others, m), res in near_radius_results():
        joint = verify(certify.mlp(ws), lo, hi, label, budget=BUDGET, per_margin=False)
        assert {res.status, joint.status} != {"verified", "falsified"}, (res, joint)
        if "falsified" not in (res.status, joint.status):
            assert res.margin_lower <= m + 1e-5 and joint.margin_lower <= m + 1e-5
        if joint.status == "verified":
            joint_n += 1
            assert res.status == "verified", (joint, res)
    assert joint_n >= 6


def test_per_margin_branch_and_bound_on_six_classes_and_a_subset_of_others(monkeypatch):
    """With the attacks disabled (the centre only), boxes of 4-8-8-6 MLPs at 0.85 and 1.2 times the largest
    scale at which 3,000 sampled points and the corners keep ``label`` over an unsorted subset of ``others``:
    branch and bound decides them margin by margin. A 'verified' box has no sampled violation; a 'falsified'
    one carries a point of the box that the float64 reference misclassifies over that subset (a class
    outside it does not count); margin_lower is below the sampled minimum."""
    monkeypatch.setattr(VERIFY, "_pgd", lambda fn, lo, hi, sel, shape, seed: (
        None, VERIFY._recheck(fn, lo, hi, sel, shape, np.zeros((1, lo.size)))[1], "centre", True))
    monkeypatch.setattr(VERIFY, "_search", lambda *a: (None, math.inf))
    rng = np.random.default_rng(41)
    seen = {}
    for seed in range(12):
        ws = weights(100 + seed, (4, 8, 8, 6))
        net = certify.mlp(ws)
        c, w = rng.uniform(-1, 1, 4), rng.uniform(0.3, 1.0, 4)
        label = int(np.argmax(np_logits(ws, c[None])[0]))
        rest = [j for j in range(6) if j != label]
        others = list(rng.permutation(rest)[:3])                     # unsorted, 3 of the 5
        sampled_min, a, b = sampled_scale(ws, c, w, label, others, seed)
        if sampled_min is None:
            continue
        for f in (0.85 * a, 1.2 * b):
            lo, hi = c - f * w, c + f * w
            res = verify(net, lo, hi, label, others=others, budget=BUDGET)
            m = sampled_min(f)
            seen[(res.status, res.detail)] = seen.get((res.status, res.detail), 0) + 1
            assert res.margin_lower <= m + 1e-5, (seed, f, res, m)
            if res.status == "verified":
                assert m > 0, (seed, f, res)
            if res.status == "falsified":
                x = res.counterexample
                assert np.all(x >= lo) and np.all(x <= hi) and np_margin(ws, x[None], label, others)[0] <= 1e-6
    print("per margin, six classes:", seen)
    proven = seen.get(("verified", "bab"), 0) + seen.get(("verified", "alpha-crown"), 0)   # by the search (its root)
    assert proven >= 2 and seen.get(("falsified", "bab"), 0) >= 2, seen


def test_per_margin_searches_the_lowest_margin_first_and_stops_at_the_first_it_does_not_prove(monkeypatch):
    """``_per_margin`` on a fake branch and bound: margins CROWN proves are skipped, the others are searched
    from the lowest CROWN bound up, each on the reduced network of that one class, with the budget the earlier
    searches left (none starts with fewer than 16); the first one not proven ends it, and the lower bound is
    the lowest over all margins."""
    from rcurves.certify.bab import SearchResult

    net = certify.mlp(weights(0, (4, 8, 8, 6)))
    lo, hi = np.full(4, -0.5), np.full(4, 0.5)
    others = (1, 2, 3, 4, 5)
    crown = np.array([-0.5, 2.0, -3.0, -1.0, -2.0])        # margins of classes 1..5; class 2 proven by CROWN
    calls = []
    answers = {3: SearchResult(True, 0.25, 40, False, "verified", 0, 9),
               5: SearchResult(True, 0.5, 1, True, "verified", 0, 1),
               4: SearchResult(False, -0.75, 100, False, "time", 7, 30)}

    def fake(rnet, deadline, budget, check=None, **kw):
        z = np.asarray(rnet.logits(np.zeros((1, 4), np.float32)))[0]
        ref = np.asarray(net.logits(np.zeros((1, 4), np.float32)))[0]       # the box's centre
        cls = [j for j in others if np.isclose(z[1], ref[j], atol=1e-5)]
        assert rnet.n_classes == 2 and np.isclose(z[0], ref[0], atol=1e-5) and len(cls) == 1
        calls.append((cls[0], budget))
        return answers[cls[0]]

    monkeypatch.setattr(VERIFY, "_branch_and_bound", fake)
    pm = VERIFY._per_margin(net, lo, hi, 0, others, crown, math.inf, 1000)
    assert calls == [(3, 1000), (5, 960), (4, 959)]          # -3, -2, -1: then class 4 is not proven
    assert pm.bb is answers[4] and pm.bounded == 141 and not pm.at_root
    assert pm.lower == -0.75                                 # class 1 (-0.5, not searched) and 4 (-0.75)
    calls.clear()
    pm = VERIFY._per_margin(net, lo, hi, 0, others, crown, math.inf, 45)
    assert calls == [(3, 45)] and pm.bb.reason == "budget" and pm.bounded == 40   # 5 left: no search starts
    assert pm.lower == -2.0
    calls.clear()
    answers[3] = SearchResult(True, 0.25, 29, False, "verified", 0, 9)
    pm = VERIFY._per_margin(net, lo, hi, 0, others, crown, math.inf, 45)
    assert calls == [(3, 45), (5, 16)] and pm.bounded == 30 and pm.lower == -1.0  # 16 left: one more starts


def test_cli_batch_reaches_verify_and_a_bad_batch_is_refused_before_reading(tmp_path, capsys, monkeypatch):
    """``--batch`` is parsed as 'auto' or a positive integer and handed to ``certify.verify``; a bad value is an
    argparse error naming the flag, before the model file is read (it does not exist here)."""
    import importlib

    from rcurves.cli import main

    cv = importlib.import_module("rcurves.certify.verify")     # the module (the package re-exports the function)

    with pytest.raises(SystemExit) as e:
        main(["verify", str(tmp_path / "none.onnx"), str(tmp_path / "none.vnnlib"), "--batch", "0"])
    assert e.value.code == 2 and "--batch" in capsys.readouterr().err
    ws = weights(2)
    model = write_mlp_onnx(tmp_path / "mlp.onnx", ws)
    certify.write_vnnlib(tmp_path / "p.vnnlib", np.zeros(4) - 0.01, np.zeros(4) + 0.01, 0, 3)
    seen = []
    real = cv.verify
    monkeypatch.setattr(cv, "verify", lambda *a, **k: seen.append(k.get("batch")) or real(*a, **k))
    for flag, want in ((["--batch", "16"], 16), (["--batch", "AUTO"], "auto"), ([], "auto")):
        assert run_cli(capsys, model, tmp_path / "p.vnnlib", *flag).split()[0] in ("holds", "violated", "unknown")
        assert seen[-1] == want
