"""The experiments of papers 000 and 001, in --quick mode: each asserts its exact facts.

The zoo-based scripts (Table 1 / Figures 2, 3, 4, 7) run on tiny stand-in models
trained here (CI has no model cache); their checks are on the pipeline's
invariants (tables equal to the distances, exact crossings, re-checked
adversarial examples), not on the paper's verdicts.
"""
import json
import math

import numpy as np
import pytest

from tests._experiments import load as _load

from rcurves.claims.record import code_fingerprint


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("exp-cache"))


def _run(name, tmp_path, cache=None, *extra):
    mod = _load(name)
    argv = ["--quick", "--out", str(tmp_path), "--no-progress"] + (["--cache", cache] if cache else []) + list(extra)
    out = mod.main(argv)
    with open(tmp_path / f"{name}.json") as f:
        doc = json.loads(f.read(), parse_constant=lambda t: (_ for _ in ()).throw(ValueError(t)))  # strict JSON
    for c in doc["claims"]:
        assert set(c) == {"paper", "item", "claim", "ours", "verdict", "why", "kind"}
        assert c["verdict"] in ("reproduced", "differs", "inconclusive", "not reproducible here")
        assert c["verdict"] == "reproduced" or c["why"]
    for fig in doc["figures"]:
        assert (tmp_path / fig).stat().st_size > 1000
    return mod, out, doc


def _verdicts(doc):
    return {c["item"]: c["verdict"] for c in doc["claims"]}


# ---------------------------------------------------------------------------
# exact experiments: the paper's claims hold even in --quick mode


def test_fig6_l2_curves_cross_linf_curves_do_not(tmp_path):
    mod, out, doc = _run("fig6_linear_crossing", tmp_path)
    assert out["intersections_exact"]["linf"].size == 0
    assert out["intersections_exact"]["l2"].size >= 1
    assert not out["order"]["linf"]["orange_better_somewhere"] and out["order"]["linf"]["blue_better_somewhere"]
    assert out["order"]["l2"]["orange_better_somewhere"] and out["order"]["l2"]["blue_better_somewhere"]
    assert all(v == 1.0 for v in out["accuracy"].values())
    for r in out["attack_over_exact"].values():          # the attack never beats Lemma 1
        for norm in r.values():
            assert norm["min"] >= 1 - 1e-5 and norm["max"] <= 1.01
    assert set(_verdicts(doc).values()) == {"reproduced"}


def test_fig1_smooth_and_squiggly_boundaries(tmp_path):
    mod, out, doc = _run("fig1_toy_boundaries", tmp_path)
    re = out["robust_error_exact"]
    for norm in ("l2", "linf"):
        assert re["blue (smooth)"][norm] == {"1": 0.5, "2": 0.5}
        assert re["orange (squiggly)"][norm] == {"1": 0.0, "2": 1.0}
    for r in out["attack_over_exact"].values():
        for norm in r.values():
            assert norm["min"] >= 1 - 1e-5 and norm["max"] <= 1.01
    # the polyline distance against a dense sampling of the polyline (an upper bound, tight to its spacing)
    x, y, kx, ky = mod.make_problem(8, 3)
    t = np.linspace(kx[0], kx[-1], 200001)
    pts = np.stack([t, np.interp(t, kx, ky)], 1)
    for norm, o in (("l2", 2), ("linf", np.inf)):
        dense = np.array([np.linalg.norm(pts - p, ord=o, axis=1).min() for p in x])
        exact = mod.polyline_distance(x, kx, ky, norm)
        assert np.all(exact <= dense + 1e-12) and np.allclose(exact, dense, atol=1e-3)


def test_theorem2_on_a_trained_binary_linear_model(tmp_path):
    mod, out, doc = _run("theorem2_linear", tmp_path)
    b = out["binary"]
    for norm, r in b["attack_over_exact"].items():
        assert r["min"] >= 1 - 1e-4, norm                  # never below Lemma 1
        assert r["max"] <= 1.01, norm
    for pair in b["collapse_exact"].values():
        assert pair["horizontal_gap"] <= 1e-5             # exact distances: one curve, rescaled
    assert b["default_l1_attack_over_exact"]["median"] > 1.05   # the documented weakness of sparse l1 steps
    d = np.array([0.0, 1.0, 2.0, np.inf])
    assert mod.horizontal_gap(d, d * 1.01) == pytest.approx(0.01)
    assert mod.horizontal_gap(d, np.array([0.0, 1.0, 2.0, 3.0])) == math.inf


def test_parabola_rows_and_attacks_against_closed_form(tmp_path):
    mod, rows, doc = _run("parabola_fig2", tmp_path)
    a = rows["a"]
    assert np.ptp(a["exact"]["l2"]) < 1e-5 and a["exact"]["l2"].min() == pytest.approx(1.0, abs=1e-6)
    ratio = a["exact"]["l1"] / a["exact"]["l2"]
    assert ratio.max() == pytest.approx(math.sqrt(2), abs=1e-5) and ratio.min() == pytest.approx(1.0, abs=1e-5)
    for r in rows.values():
        assert r["margin_equals_robustness"]
        for norm in ("l1", "l2", "linf"):
            assert np.all(r["attack"][norm] >= r["exact"][norm] * (1 - 1e-5))   # never below the truth
    v = _verdicts(doc)
    assert v["Figure 2, row a"] == v["Figure 2, row b"] == v["Figure 2, row c"] == "reproduced"


def test_linear_toy_theorem1_and_interclass_scripts(tmp_path):
    _, res, doc = _run("linear_toy_curves", tmp_path / "ltc")
    assert set(_verdicts(doc).values()) == {"reproduced"}
    mod, rec, doc = _run("theorem1_intersections", tmp_path / "t1")
    assert rec["all_hold"] and rec["crossings_match"]
    v = _verdicts(doc)
    assert v["Appendix A, Theorem 1 (corrected)"] == "reproduced"
    assert v["Appendix A, Theorem 1 (proof as printed)"] == "differs"
    _, rec, doc = _run("interclass_table", tmp_path / "ic")
    assert rec["datasets"]["digits"]["smallest"]["linf"] > 0
    assert max(rec["brute_force"]["digits"]["max_relative_error"].values()) <= 1e-5
    assert {c["kind"] for c in doc["claims"]} == {"self-check"}        # --quick: the digits only


def test_theorem1_printed_proof_is_reversed():
    mod = _load("theorem1_intersections")
    # T1 = {1, 3, 5}, T2 = {2, 4, 6}, n = 3: weights in units of 1/13
    d1, d2, w = mod.printed_construction([1, 3, 5], [2, 4, 6])
    assert w.sum() * 13 == pytest.approx(11)                         # (4n - 1) / (4n + 1): t'_{n+1} is missing
    r = mod.printed_check([1, 3, 5], [2, 4, 6])
    assert r["r1"][0] * 13 == pytest.approx(1) and r["r2"][0] == 0     # R^c1(t_1) = 1/13 > R^c2(t_1) = 0 on T1
    assert not r["holds"].any()                                       # every inequality the wrong way round
    assert mod.printed_check([1, 3, 5], [2, 4, 6], swap=True)["holds"].all()
    # exchanged, the class-0 step at (t_1 + t'_2) / 2 = 5.5 lies beyond t_2 = 2: the order is wrong there
    u = mod.printed_check([1, 2], [1.5, 10], swap=True)
    assert u["holds"].tolist() == [True, False, True, True]
    with pytest.raises(ValueError, match="t2"):
        mod.printed_construction([1, 3], [2, 2.5])


def test_interclass_rules_can_fail():
    mod = _load("interclass_table")
    paper = mod.PAPER_MNIST
    same = {"smallest": {"linf": 224 / 255, "l2": 3.034, "l1": 19.155}, "largest": {"linf": 1.0, "l2": 10.18,
                                                                                  "l1": 132.38}}
    assert mod.printed_precision(same, paper).verdict == "reproduced"     # 224/255 = 0.878 -> 0.88
    off = dict(same, smallest=dict(same["smallest"], linf=223 / 255))    # 0.8745 -> 0.87
    v = mod.printed_precision(off, paper)
    assert v.verdict == "differs" and "smallest linf" in v.why
    rng = np.random.default_rng(0)
    a = rng.uniform(0.9, 1.0, 500)
    assert mod.scale_verdict(a, rng.uniform(0.4, 0.9, 500)).verdict == "reproduced"
    assert mod.scale_verdict(a, rng.uniform(0.9, 1.0, 500)).verdict == "differs"      # same scale
    assert mod.scale_verdict(a, np.concatenate([[0.8], rng.uniform(0.85, 1.0, 500)])).verdict == "differs"  # 1.1x
    x = rng.random((30, 5)).astype(np.float32)
    y = np.arange(30) % 3
    from rcurves.exact.interclass import interclass_distances
    for p in ("linf", "l2", "l1"):
        np.testing.assert_allclose(interclass_distances(x, y, p), mod.brute_force(x, y, np.arange(30), p), rtol=1e-5)


# ---------------------------------------------------------------------------
# zoo experiments on tiny stand-ins: the pipeline's invariants


def test_table1_fig2_table_and_crossings_are_those_of_the_distances(tmp_path, cache):
    from rcurves.curves import exact_curve_intersections, robust_error
    from rcurves.pipeline.evaluation import Evaluation

    mod, out, doc = _run("table1_fig2", tmp_path, cache)
    ev = Evaluation.load(str(tmp_path))
    for norm, rows in out["table"].items():
        for e, row in rows.items():
            errs = {m: float(robust_error(ev.distance(m, norm), float(e))) for m in row}
            for m, cell in row.items():
                assert cell["robust_error"] == pytest.approx(errs[m])
                assert cell["rank"] == 1 + sum(v < errs[m] for v in errs.values())
    for norm, cs in out["crossings"].items():
        for c in cs:
            np.testing.assert_allclose(c["eps"], exact_curve_intersections(ev.distance(c["a"], norm),
                                                                            ev.distance(c["b"], norm)))
    kinds = {c["item"]: c["kind"] for c in doc["claims"]}
    assert kinds["Table 1 (l_inf)"] == "paper" and kinds["Table 1 (l_2)"] == "beyond"
    for c in doc["claims"]:
        assert "32 random points" in c["ours"]                       # every row states n and the draw
    # the Table 1 tests are those of the distances: McNemar counts at the thresholds, recomputed
    for norm, t in out["table1_tests"].items():
        pairs, oa, ob = mod.pointwise_tests({m: ev.distance(m, norm) for m in ev.labels}, mod.THRESHOLDS[norm])
        assert [list(p) for p in pairs] == t["pairs"]
        assert np.array_equal(np.asarray(t["sides"]), mod.orderings_verdict(oa, ob, mod.THRESHOLDS[norm], pairs)[1]["sides"])


def test_table1_orderings_rule_can_fail():
    mod = _load("table1_fig2")
    thr = (0.1, 0.2, 0.3)
    pairs = [("A", "B"), ("A", "C"), ("B", "C")]
    # level 0.05 / 9: 60 vs 5 discordant points is significant, 3 vs 2 is not
    big, small = (5, 60), (3, 2)
    def counts(rows):
        return (np.array([[c[0] for c in r] for r in rows]), np.array([[c[1] for c in r] for r in rows]))
    rev = lambda c: (c[1], c[0])                                                   # noqa: E731
    # A/B reversed between 0.1 and 0.2 (and 0.1 / 0.3), A/C between 0.2 and 0.3: all three threshold pairs
    oa, ob = counts([[big, rev(big), rev(big)], [big, big, rev(big)], [small, small, small]])
    v, det = mod.orderings_verdict(oa, ob, thr, pairs)
    assert v.verdict == "reproduced" and det["reversed_pairs"] == [("A", "B"), ("A", "C")]
    # the old l_inf row: one pair reversed, at two thresholds: 0.2 and 0.3 order the models alike
    oa, ob = counts([[big, rev(big), rev(big)], [big, big, big], [small, small, small]])
    v, det = mod.orderings_verdict(oa, ob, thr, pairs)
    assert v.verdict == "differs" and len(det["reversed_pairs"]) == 1 and "0.2 / 0.3" in v.why
    oa, ob = counts([[small, rev(small), small]] * 3)                          # too few points anywhere
    assert mod.orderings_verdict(oa, ob, thr, pairs)[0].verdict == "inconclusive"


def test_fig3_slope_change_counts(tmp_path, cache):
    mod, out, doc = _run("fig3_slope", tmp_path, cache)
    d = np.array([0.05, 0.26, 0.29, 0.31, 0.32, 0.33, 0.34, 0.35, 0.9, np.inf])
    s = mod.slope_change(d, 0.3, 0.05)
    assert (s["k_below"], s["k_above"]) == (2, 5)
    assert s["slope_below"] == pytest.approx(2 / (10 * 0.05)) and s["slope_above"] == pytest.approx(5 / (10 * 0.05))
    assert s["ratio"] == pytest.approx(2.5)
    assert s["binomial_p"] == pytest.approx((1 + 7 + 21) / 2 ** 7)   # P(X >= 5), X ~ Bin(7, 1/2)
    assert set(out["rows"]) == {"AT-linf-0.3", "AT-l2-1.5"}      # the --quick subset of the models
    kinds = {c["item"]: c["kind"] for c in doc["claims"]}
    assert kinds == {"Figure 3 (AT-linf-0.3, l_inf)": "beyond", "Figure 3 (AT-l2-1.5, l_2)": "beyond"}
    assert "l_2 curve" in [c for c in doc["claims"] if "l2" in c["item"]][0]["claim"]
    for m, r in out["rows"].items():                             # the scan's counts are those of the distances
        sc = r["scan"]
        c = np.asarray(sc["centres"])
        assert np.all(np.diff(c) > 0) and c[0] == pytest.approx(r["h"])
        assert sc["level"] == pytest.approx(0.05 / c.size)


def test_fig3_rule_is_at_the_training_eps():
    mod = _load("fig3_slope")
    eps, h = 0.3, 0.05
    flat_steep = np.concatenate([np.linspace(0.001, 0.299, 100), np.linspace(0.3005, 0.4, 1500),
                                 np.linspace(0.401, 0.9, 400)])
    smooth = np.linspace(0.0005, 1.0, 2000)
    sc = mod.slope_scan(flat_steep, h, 3 * eps)
    ctrl = mod.slope_scan(smooth, h, 3 * eps)
    i = int(np.argmin(np.abs(sc["centres"] - 0.3)))
    assert sc["k_below"][i] == np.sum((flat_steep > sc["centres"][i] - h) & (flat_steep <= sc["centres"][i]))
    assert sc["k_above"][i] == np.sum((flat_steep > sc["centres"][i]) & (flat_steep <= sc["centres"][i] + h))
    assert not ctrl["significant"].any()                         # a uniform sample has no kink
    assert mod.slope_verdict(sc, ctrl, eps, h).verdict == "reproduced"
    # the same kink, but at 0.5: it is not at the training eps
    assert mod.slope_verdict(mod.slope_scan(flat_steep + 0.2, h, 3 * eps), ctrl, eps, h).verdict == "differs"
    # the control has the kink too: not the training's
    v = mod.slope_verdict(sc, sc, eps, h)
    assert v.verdict == "differs" and "control" in v.why
    assert mod.slope_verdict(ctrl, ctrl, eps, h).verdict == "differs"          # no kink anywhere, n could show one
    few = np.array([0.31, 0.32, 0.33])
    assert mod.slope_verdict(mod.slope_scan(few, h, 3 * eps), ctrl, eps, h).verdict == "inconclusive"


def test_fig4_dominance_is_exact(tmp_path, cache):
    mod, out, doc = _run("fig4_norms", tmp_path, cache)
    # R_a: 0 on [0,1), 1/2 on [1,3), 1 from 3; R_b: 1/2 on [2,4), 1 from 4 (0 before)
    da, db = np.array([1.0, 3.0]), np.array([2.0, 4.0])
    dom = mod.dominance(da, db)
    assert dom["range"] == 4.0
    assert dom["a_better"] == pytest.approx(0.0) and dom["b_better"] == pytest.approx(2 / 4)
    assert dom["area_b_minus_a"] == pytest.approx(-(0.5 * 1 + 0.5 * 1))
    assert 0.0 <= out["dominance"]["linf"]["a_better"] + out["dominance"]["linf"]["b_better"] <= 1.0
    # (1): better in l_inf everywhere but significantly worse at some l_2 threshold: differs, not "mostly better"
    eps = np.array([0.5, 1.0, 1.5, 2.0])
    scans = {"linf": (eps, np.array([0, 2, 3, 4]), np.array([40, 50, 60, 70])),
             "l2": (eps, np.array([0, 1, 60, 60]), np.array([30, 40, 2, 3]))}
    v = mod.transfer_verdict(scans, ("AT-linf", "AT-l2"))
    assert v.verdict == "differs" and "in l2 fails" in v.why
    scans["l2"] = (eps, np.array([0, 1, 2, 3]), np.array([30, 40, 50, 60]))
    assert mod.transfer_verdict(scans, ("AT-linf", "AT-l2")).verdict == "reproduced"


def test_l2_bounded_by_linf_adversarials(tmp_path, cache):
    import argparse
    import dataclasses

    shared = _load("shared")

    args = argparse.Namespace(quick=True, cache=cache, retrain=False, no_progress=True, seed=0)
    ev, models = shared.zoo_evaluation(args, ("mnist-full-cnn-st",))
    di = ev.distance("ST", "linf")
    i = int(np.flatnonzero(np.isfinite(di) & (di > 0))[0])
    d = {m: {k: dict(v) for k, v in r.items()} for m, r in ev.distances.items()}
    d["ST"]["l2"]["distance"] = np.where(np.arange(di.size) == i, np.inf, ev.distance("ST", "l2"))
    ev_inf = dataclasses.replace(ev, distances=d)          # the l_2 attacks "missed" point i
    ev2, info = shared.with_linf_adversarial_l2(args, ev_inf, models)
    b = ev2.distances["ST"]["l2"]["linf_adv"]
    assert info["ST"] == {"unbroken_l2": 1, "repaired": 1, "median_bound": b[i]}
    assert np.isinf(np.delete(b, i)).all() and np.isfinite(b[i])
    # an l_2 norm of an l_inf perturbation: at least its l_inf norm, at most sqrt(784) times (eq. 17)
    assert b[i] >= di[i] * (1 - 1e-3) and b[i] <= 28 * 1.5 * di[i]
    np.testing.assert_array_equal(np.delete(ev2.distance("ST", "l2"), i), np.delete(ev.distance("ST", "l2"), i))
    assert "bound" in shared.l2_repair_text(info) or "l_inf adversarial" in shared.l2_repair_text(info)


def test_fig7_examples_are_rechecked(tmp_path, cache):
    import jax.numpy as jnp

    mod, out, doc = _run("fig7_examples", tmp_path, cache)
    a = out["arrays"]
    f = out["logits_fn"]
    pred_min = np.asarray(jnp.argmax(f(a["x_min"]), -1))
    ok = a["ok_min"]
    assert np.all(pred_min[ok] != a["y"][ok])
    lin = np.abs(a["x_min"] - a["x"]).reshape(len(ok), -1).max(1)
    assert np.all(lin[ok] <= a["d_min"][ok] * (1 + 1e-5) + 1e-7)
    big = np.abs(a["x_big"] - a["x"]).reshape(len(ok), -1).max(1)
    assert np.all(big <= a["eps_big"] + 1e-6) and a["x_big"].min() >= 0 and a["x_big"].max() <= 1
    pred_big = np.asarray(jnp.argmax(f(a["x_big"]), -1))
    np.testing.assert_array_equal(pred_big != a["y"], a["ok_big"])


def test_norm_inequalities_counts(tmp_path, cache):
    mod, out, doc = _run("norm_inequalities", tmp_path, cache)
    assert out["dim"] == 784
    assert set(out["per_point"]) == {"ST", "AT-linf-0.3", "AT-l2-1.5"}
    for r in out["per_point"].values():
        for k in ("eq19", "eq20"):
            assert r[k]["count"] == len(r[k]["points"])
            assert r[k]["ratio_min"] is None or r[k]["ratio_min"] <= r[k]["ratio_median"] <= r[k]["ratio_max"]
    d_inf = np.array([0.0, 0.1, 0.2, 0.3, np.inf, 0.1, 0.05])
    d_2 = np.array([0.0, 0.5, 0.19, 0.3, 1.0, np.inf, 2.0])
    v = mod.point_violations(d_inf, d_2, 784)
    # eq. 19 d_inf <= d_2: broken at 2 (0.2 > 0.19) and 4 (inf > 1); eq. 20 d_2 <= 28 d_inf: 5 (inf), 6 (2 > 1.4)
    assert v["eq19"]["count"] == 2 and v["eq19"]["points"].tolist() == [2, 4]
    assert v["eq20"]["count"] == 2 and v["eq20"]["points"].tolist() == [5, 6]
    assert v["eq19"]["worst"] == math.inf and v["eq20"]["worst"] == math.inf
    assert v["eq19"]["ratio_min"] == pytest.approx(0.95) and v["eq19"]["ratio_max"] == pytest.approx(40.0)
    # per curve: sorted d_inf [0, .05, .1, .1, .2, .3, inf] vs sorted d_2 [0, .19, .3, .5, 1, 2, inf]: ordered
    assert mod.curve_violations(d_inf, d_2, 784) == {"eq19": 0, "eq20": 0}
    assert mod.curve_violations(np.array([0.3, 0.25]), np.array([0.2, 0.4]), 784) == {"eq19": 1, "eq20": 0}
    assert mod.curve_violations(np.array([0.01, 0.3]), np.array([0.5, 0.4]), 784) == {"eq19": 0, "eq20": 1}
    assert mod.inequality_verdict({"m": {"eq19": 0, "eq20": 0}}, "points").verdict == "reproduced"
    assert mod.inequality_verdict({"m": {"eq19": 1, "eq20": 0}}, "points").verdict == "differs"
    kinds = [c["kind"] for c in doc["claims"]]
    assert kinds == ["paper", "self-check"]                   # --quick: no l_1 attack (the links' rule below)
    # the links with l_1: d_2 <= d_1 <= 28 d_2, d_1 <= 784 d_inf, d_2 <= 28 d_1
    c = mod.l1_violations(np.array([0.1, 0.1, 0.001, 0.1]), np.array([1.0, 1.0, 1.0, 1.0]),
                          np.array([5.0, 0.9, 29.0, np.inf]), 784)
    assert c == {"d2<=d1": 1, "d1<=sqrt(d)d2": 2, "d1<=d dinf": 2, "d2<=sqrt(d)d1": 0}
    assert out["l1"] is None


# ---------------------------------------------------------------------------
# run_all


def test_run_all_discovers_scripts_and_builds_the_claims_table(tmp_path):
    mod = _load("run_all")
    names = mod.scripts()
    assert {"fig6_linear_crossing", "table1_fig2", "parabola_fig2", "theorem1_intersections"} <= set(names)
    assert "run_all" not in names and "shared" not in names and "sparsity_study" not in names
    for name in names:
        assert hasattr(_load(name), "main"), name
    out = tmp_path / "res"
    (out / "fig6_linear_crossing").mkdir(parents=True)
    claim = {"paper": "000", "item": "Figure 6", "claim": "curves | cross", "ours": "they do", "verdict": "differs",
             "why": "because", "kind": "paper"}
    code = code_fingerprint(["experiments/000_global_comparison/fig6_linear_crossing.py"])
    (out / "fig6_linear_crossing" / "fig6_linear_crossing.json").write_text(
        json.dumps({"claims": [claim], "seconds": 3.0, "quick": False, "code": code}))
    kept = tmp_path / "claims"
    text = mod.readme(str(out), False, {"fig6_linear_crossing": 12.0}, claims_dir=str(kept))
    row = [l for l in text.splitlines() if l.startswith("| Figure 6")][0]
    assert "curves \\| cross" in row and "**differs**" in row and "because" in row and "12 s" in row
    assert "| paper |" in row and "stale" not in row
    assert "## 000" in text and "Paper claims: 1 differs" in text
    # a result whose code has changed since is marked stale and not counted
    code["files"]["experiments/000_global_comparison/fig6_linear_crossing.py"] = "0" * 64
    (out / "fig6_linear_crossing" / "fig6_linear_crossing.json").write_text(
        json.dumps({"claims": [claim], "seconds": 3.0, "quick": False, "code": code}))
    text = mod.readme(str(out), False, {}, claims_dir=str(kept))
    assert "(stale: code changed since this run)" in text and "Paper claims: none" in text
    # a full run's claims are kept (without the payload) and used when --out has no run of the script
    code = code_fingerprint(["experiments/000_global_comparison/fig6_linear_crossing.py"])
    (out / "fig6_linear_crossing" / "fig6_linear_crossing.json").write_text(
        json.dumps({"claims": [claim], "seconds": 3.0, "quick": False, "code": code, "distances": [1.0] * 5}))
    target = mod.keep_claims(str(out), "fig6_linear_crossing", claims_dir=str(kept))
    assert "distances" not in json.loads(open(target).read())
    other = tmp_path / "empty"
    text = mod.readme(str(other), False, {}, claims_dir=str(kept))
    header = [l for l in text.splitlines() if l.startswith("Paper claims:")][0]
    assert "Paper claims: 1 differs" in header and "fig6_linear_crossing" not in header
    assert "Paper claims: none" in mod.readme(str(other), True, {}, claims_dir=str(kept))   # quick: never kept runs
