"""rcurves.certify.verify: per-input boxes decided by attack, CROWN and branch and bound.

Every network here is a tiny MLP with NumPy weights; each answer is checked
against something independent of the bounds: a float64 NumPy forward pass on
thousands of points sampled in the box (and all its corners), and the exact
MILP (``certify.milp``, HiGHS) on the same box.
"""
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


def test_verified_boxes_hold_at_every_sampled_point_and_corner(compiled):
    rng = np.random.default_rng(5)
    stages = set()
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
                assert m.min() > 0, (seed, eps, res)
                assert res.margin_lower >= 0 and res.counterexample is None
    assert n_verified >= 5 and {"crown", "bab"} <= stages      # both proof stages exercised


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


def test_status_agrees_with_the_exact_milp_on_random_boxes(compiled):
    rng = np.random.default_rng(11)
    table, stages = {}, {}
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
            assert not (res.status == "verified" and exact == "violated"), (seed, eps, res)
            assert not (res.status == "falsified" and exact == "holds"), (seed, eps, res)
    print("verify vs MILP:", table, "stages:", stages)
    assert table.get(("verified", "holds"), 0) >= 10 and table.get(("falsified", "violated"), 0) >= 8
    assert sum(v for (s, e), v in table.items() if e is not None and s == "unknown") <= 2   # decided where MILP is
    assert stages.get("bab", 0) >= 2                     # some of them needed branching


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

    monkeypatch.setattr(VERIFY, "_falsify", never)
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
# branch-and-bound rounds


def test_a_larger_round_takes_the_frontier_in_empty_slots():
    from rcurves.certify.bab import Frontier

    s, h = 5, 3
    f = Frontier(sgn=np.ones((s, h), np.int8), lb=np.arange(s, dtype=np.float32), nxt=np.arange(s, dtype=np.int32),
                 alive=np.ones(s, bool), failed=np.array(False), bounded=np.array(7, np.int32),
                 params=([np.ones((s, 2, h), np.float32)], [np.full((s, 2, h), 2.0, np.float32)]),
                 stale=np.zeros(s, bool), whole=np.array(True))
    g = VERIFY._widen(f, 9)
    assert g.sgn.shape == (9, h) and np.all(np.asarray(g.sgn[:s]) == 1) and np.all(np.asarray(g.sgn[s:]) == 0)
    assert np.all(np.asarray(g.lb[s:]) == np.inf) and np.all(np.asarray(g.nxt[s:]) == -1)
    assert np.asarray(g.alive).tolist() == [True] * s + [False] * 4 and not np.asarray(g.stale).any()
    assert g.params[0][0].shape == (9, 2, h) and np.all(np.asarray(g.params[1][0][:s]) == 2.0)
    assert np.all(np.asarray(g.params[1][0][s:]) == 0.0) and int(g.bounded) == 7 and bool(g.whole)
    assert VERIFY._widen(f, s) is f
    assert VERIFY._schedule(16384) == (256, 2048, 16384) and VERIFY._schedule(100) == (100,)
    assert VERIFY._schedule(300) == (256, 300)


def test_no_round_starts_after_the_deadline():
    net = certify.mlp(weights(0))
    rnet = box_network(net, np.full(4, -0.5), np.full(4, 0.5), 0, (1, 2))
    assert VERIFY._branch_and_bound(rnet, 0.0, 256) == (False, -math.inf, 0, False)


@pytest.mark.slow
def test_rounds_go_on_from_the_previous_frontier(monkeypatch):
    """A first round of 8 subdomains, then one of 32 from its frontier (3 compilations: slow)."""
    ws = weights(0)
    net = certify.mlp(ws)
    rng = np.random.default_rng(100)
    for _ in range(10):                      # the 10th box of this stream needs 23 subdomains from the root
        eps = rng.uniform(0.2, 0.7)
        lo, hi, label = random_box(rng, ws, eps)
    one = verify(net, lo, hi, label, budget=BUDGET)
    assert one.status == "verified" and one.stage == "bab" and one.subdomains > 15

    monkeypatch.setattr(VERIFY, "FIRST_BUDGET", 8)      # at most 8 + 2 * 4 - 1 = 15 subdomains in round 1
    monkeypatch.setattr(VERIFY, "GROWTH", 4)
    widened = []
    widen = VERIFY._widen
    monkeypatch.setattr(VERIFY, "_widen", lambda f, slots: widened.append((int(f.alive.sum()), slots)) or
                        widen(f, slots))
    res = verify(net, lo, hi, label, budget=32)
    assert res.status == "verified" and res.stage == "bab" and res.subdomains > 15
    assert len(widened) == 1 and widened[0][0] > 0     # the second round started from the first one's frontier
    others = [j for j in range(3) if j != label]
    assert np_margin(ws, box_points(lo, hi, 20000, 0), label, others).min() > 0
