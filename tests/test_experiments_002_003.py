"""The --quick runs of the 002/003 experiment scripts, with the exact facts they must show."""
import importlib
import json
import math
import pathlib
import sys

import numpy as np
import pytest
import scipy.stats

EXP = pathlib.Path(__file__).resolve().parents[1] / "experiments"


def _run(name, tmp_path):
    if str(EXP) not in sys.path:
        sys.path.insert(0, str(EXP))
    mod = importlib.import_module(name)
    out = mod.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    doc = json.loads((tmp_path / f"{name}.json").read_text())
    assert doc["quick"] and doc["claims"]
    for c in doc["claims"]:
        assert c["verdict"] in ("reproduced", "differs", "not reproducible here")
    return out, doc


def test_genuine_toy_1d(tmp_path):
    out, doc = _run("genuine_toy_1d", tmp_path)
    assert out["f2_minus_f3_standard_max"] == 0.0
    assert all(v == pytest.approx(1.5, abs=1e-12) for v in out["ara"].values())
    assert out["genuine_f1_on_0_1"] == 0.75 and out["genuine_f2_beyond_2"] == 0.5 and out["nn1_is_f3"]
    assert np.all(np.asarray(out["genuine"]["f3"]) == 1.0)
    assert [c["verdict"] for c in doc["claims"]] == ["reproduced"] * 4


def test_genuine_theorem2(tmp_path):
    out, doc = _run("genuine_theorem2", tmp_path)
    assert out["toy"]["worst_nn1"] == pytest.approx(1.0, abs=1e-12) and out["toy"]["max_other"] <= 1.0 + 1e-12
    assert out["toy"]["moved_strictly_worse"] == out["toy"]["moved"] > 0
    gen = out["sunset_genuine"]
    assert np.all(gen["1-NN (circle, segment)"] == 1.0)
    for k, v in gen.items():
        if not k.startswith(("1-NN", "parabola c=4")):
            assert np.nanmin(v[1:]) < 1.0, k
    assert any(v != "parabola c=4 (oracle, 1-NN of circle and line)" for v in out["standard_best"].values())


def test_nn1_table3(tmp_path):
    from sklearn.neighbors import KNeighborsClassifier

    from rcurves.datasets import digits

    table, doc = _run("nn1_table3", tmp_path)
    xt, yt = digits("train")
    xq, yq = digits("test")
    sk = KNeighborsClassifier(1, algorithm="brute").fit(xt.reshape(len(xt), -1), yt).predict(xq.reshape(len(xq), -1))
    d2 = table["digits"]["l2"]
    assert d2["lower"] == d2["upper"] == pytest.approx(float((sk == yq).mean()))
    for ds in ("mnist", "digits"):
        for p in ("l2", "linf"):
            t = table[ds][p]
            assert t["lower"] <= t["majority_lower"] <= t["majority_upper"] <= t["upper"]
    assert table["mnist"]["linf"]["ties"] > 0.2 and table["mnist"]["l2"]["ties"] == 0.0


def test_nn1_agreement(tmp_path):
    rows, doc = _run("nn1_agreement", tmp_path)
    for r in rows:
        for key in ("linf_ignoring_ties", "linf_majority", "l2"):
            a = r[key]
            assert a["n10"] == round(a["prop_a"] * a["differ"]) and a["n01"] == round(a["prop_b"] * a["differ"])
            want = scipy.stats.binomtest(a["n10"], a["n01"] + a["n10"], 0.5).pvalue if a["n01"] + a["n10"] else 1.0
            assert a["pvalue"] == pytest.approx(want, rel=1e-12)


def test_nn1_exact_curve(tmp_path):
    out, doc = _run("nn1_exact_curve", tmp_path)
    e = out["exact"]["linf"]
    assert e["rechecked"] == out["n"] == 10
    d, adv = np.asarray(e["distance"]), np.asarray(e["adv_distance"])
    assert np.all(d >= 0) and np.all(adv >= d) and np.all(adv <= d + 1e-3)
    assert doc["claims"][1]["verdict"] == "reproduced"


def test_invariance_linf(tmp_path):
    out, doc = _run("invariance_linf", tmp_path)
    for eps, r in out["results"].items():
        assert r["oracles"]["source"]["accepted"] == 1.0          # the source label always differs from y
        for o in r["oracles"].values():
            assert 0.0 <= o["accepted"] <= 1.0
            assert o["n_accepted"] == round(o["accepted"] * r["n"])
            for m in o["models"].values():
                assert m["k"] <= o["n_accepted"] and m["ci95"][0] <= m["agree"] <= m["ci95"][1] + 1e-12
    assert doc["claims"][0]["verdict"] == "not reproducible here"


def test_invariance_robust_accuracy(tmp_path):
    table, doc = _run("invariance_robust_accuracy", tmp_path)
    for row in table.values():
        for v in row.values():
            assert 0.0 <= v <= 1.0 and abs(v * 24 - round(v * 24)) < 1e-9


def test_overly_robust_dk(tmp_path):
    out, doc = _run("overly_robust_dk", tmp_path)
    assert out["oracle_robust"] == {"0.49": 1.0, "0.5": 0.0}
    l7 = out["lemma7"]
    assert l7["robust_0.99"] == l7["accuracy"] and l7["invariance_agreement"] == 0.0
    q = (1 + 1 / 1.05) / 2
    assert l7["exact"] == pytest.approx(0.98 * q + 0.02 * (1 - q), rel=1e-12)
    assert out["lemma6"]["bayes_robust_0.49"] == 1.0
    at = out["adversarial_training"]
    assert at["0.7"]["top_feature"] == 2 and abs(at["0.7"]["w1"]) < 0.1 * abs(at["0.7"]["w2"])
    sweep = out["lemma6"]["sweep"]
    assert all(s["robust"]["8"] < 0.01 for s in sweep.values())
    assert math.isclose(out["lemma6"]["x1_free_exact_accuracy"],
                        q * scipy.stats.norm.cdf((math.log((1 + 1 / 1.05) / (1 - 1 / 1.05)) + 2 / 1.05)
                                                 / (2 / math.sqrt(1.05)))
                        + (1 - q) * scipy.stats.norm.cdf((2 / 1.05 - math.log((1 + 1 / 1.05) / (1 - 1 / 1.05)))
                                                         / (2 / math.sqrt(1.05))), rel_tol=1e-12)
