"""rcurves.pipeline.evaluation / loading / report: the pipeline a research script calls in three lines."""
import json
import os

import numpy as np
import pytest

from tests._models import exact_multiclass, multiclass_linear
from rcurves.pipeline.evaluation import AttackSettings, Evaluation, evaluate

ATTACK = AttackSettings(search_steps=6, steps=10, cw=False)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(3)
    W = rng.normal(size=(4, 12)).astype(np.float32)
    b = rng.normal(size=4).astype(np.float32) * 0.1
    x = rng.normal(size=(40, 12)).astype(np.float32)
    y = np.argmax(x @ W.T + b, 1)
    y[:4] = (y[:4] + 1) % 4                                   # four misclassified points
    return W, b, x, y


@pytest.fixture(scope="module")
def ev(problem, tmp_path_factory):
    W, b, x, y = problem
    out = str(tmp_path_factory.mktemp("ev"))
    models = {"lin": multiclass_linear(W, b), "lin_half": multiclass_linear(W, b * 0.5)}
    ev = evaluate(models, (x, y), norms=("linf", "l2"), attack=ATTACK, bounds=None,
                  eps_max={"linf": 5.0, "l2": 20.0}, out_dir=out, progress=False)
    return ev, out, models


def test_distances_are_the_exact_multiclass_ones(problem, ev):
    W, b, x, y = problem
    e = ev[0]
    for norm in ("linf", "l2"):
        exact = exact_multiclass(W, b, x, y, norm)
        d = e.distance("lin", norm)
        assert np.all(d[:4] == 0) and np.all(exact[:4] == 0)
        assert np.all(d[4:] >= exact[4:] * (1 - 1e-5))       # never below the truth
        ratio = d[4:] / exact[4:]
        assert np.median(ratio) <= 1.001 and ratio.max() <= 1.25   # a small budget: close, never below
    assert e.accuracy["lin"] == pytest.approx(36 / 40)


def test_each_norm_is_bounded_by_the_other_norms_adversarials(problem, ev):
    """With l_inf and l_2 together, each norm's distance is the smallest verified one over both norms' attacks:
    ``distance = min(pgd, cross)``, where ``cross`` is the other norm's adversarial measured in this norm, so
    ``cross_linf <= pgd_l2`` (||v||_inf <= ||v||_2) and ``cross_l2 <= sqrt(D) pgd_linf`` (001 eq. 17), and
    never below the exact distance."""
    W, b, x, y = problem
    e = ev[0]
    for m in e.labels:
        r = {norm: e.distances[m][norm] for norm in ("linf", "l2")}
        for norm in ("linf", "l2"):
            np.testing.assert_array_equal(e.distance(m, norm), np.minimum(r[norm]["pgd"], r[norm]["cross"]))
        fin = np.isfinite(r["l2"]["pgd"])
        assert fin.all() and np.all(r["linf"]["cross"][fin] <= r["l2"]["pgd"][fin] * (1 + 1e-6))
        assert np.all(r["l2"]["cross"] <= np.sqrt(x.shape[1]) * r["linf"]["pgd"] * (1 + 1e-6))
        assert np.all(r["linf"]["cross"][:4] == 0) and np.all(r["l2"]["cross"][:4] == 0)   # misclassified
    for norm in ("linf", "l2"):
        exact = exact_multiclass(W, b, x, y, norm)
        assert np.all(e.distances["lin"][norm]["cross"] >= exact * (1 - 1e-5))


def test_table_ranks_flips_and_files(ev):
    from rcurves.curves import exact_curve_intersections, robust_error

    e = ev[0]
    doc, table = e.report()
    for m in e.labels:
        for norm in e.norms:
            for k, v in doc["robust_error"][m][norm].items():
                assert v == pytest.approx(float(robust_error(e.distance(m, norm), float(k))))
    for norm in e.norms:
        (flip,) = e.flips(norm)
        np.testing.assert_allclose(flip["eps"], exact_curve_intersections(e.distance("lin", norm),
                                                                          e.distance("lin_half", norm)))
    assert "Where the ranking flips" in table


def test_save_and_load_roundtrip(ev, tmp_path):
    e = ev[0]
    paths = e.save(str(tmp_path))
    assert sorted(os.path.basename(p) for p in paths) == ["curves.csv", "curves.json", "curves.png",
                                                          "distances.csv", "table.txt"]
    with open(tmp_path / "curves.json") as f:
        json.loads(f.read(), parse_constant=lambda t: (_ for _ in ()).throw(ValueError(t)))   # no NaN/Infinity
    back = Evaluation.load(str(tmp_path))
    for m in e.labels:
        for norm in e.norms:
            np.testing.assert_array_equal(back.distance(m, norm), e.distance(m, norm))
    assert back.table() == e.table().replace(e.data.name, back.data.name)


def test_a_second_evaluation_reuses_the_saved_runs(problem, ev):
    W, b, x, y = problem
    e, out, models = ev
    from rcurves.pipeline.runner import chunk_path

    path = chunk_path(os.path.join(out, "runs", "lin__linf"), 0)      # result.npz is rewritten; chunks are not
    before = os.stat(path).st_mtime_ns
    again = evaluate({"lin": models["lin"]}, (x, y), norms=("linf",), attack=ATTACK, bounds=None,
                     eps_max={"linf": 5.0}, out_dir=out, progress=False)
    # one norm alone: no other norm's adversarial to bound it, so the l_inf attack's own distances
    np.testing.assert_array_equal(again.distance("lin", "linf"), e.distances["lin"]["linf"]["pgd"])
    assert "cross" not in again.distances["lin"]["linf"]
    assert os.stat(path).st_mtime_ns == before                       # same model, settings, data: reused
    other = AttackSettings(search_steps=5, steps=10, cw=False)
    evaluate({"lin": models["lin"]}, (x, y), norms=("linf",), attack=other, bounds=None,
             eps_max={"linf": 5.0}, out_dir=out, progress=False)
    assert os.stat(path).st_mtime_ns != before                       # other settings: recomputed


@pytest.mark.highest
def test_the_default_attack_is_adaptive_and_says_what_it_spent(problem, tmp_path):
    """``AttackSettings()`` measures with ``attacks.adaptive_distance``: per point the gradients spent and
    whether it was escalated are kept, saved and printed. On a linear model (000 Lemma 1: the first search
    is exact) no point is escalated, the distances are the exact ones, and the probe costs at most 15% more
    gradients than the fixed default search."""
    from attacks.minimal import search_config, search_gradients

    W, b, x, y = problem
    e = evaluate({"lin": multiclass_linear(W, b)}, (x, y), norms=("l2",), attack=AttackSettings(cw=False),
                 bounds=None, eps_max={"l2": 20.0}, out_dir=str(tmp_path), progress=False)
    r = e.distances["lin"]["l2"]
    assert not np.any(r["escalated"])
    fixed = search_gradients(search_config("l2", 4), 4)
    assert np.all(r["gradients"] >= fixed) and np.mean(r["gradients"]) <= 1.15 * fixed
    exact = exact_multiclass(W, b, x, y, "l2")
    assert np.all(e.distance("lin", "l2") >= exact * (1 - 1e-5))
    np.testing.assert_allclose(e.distance("lin", "l2")[4:], exact[4:], rtol=2e-3)
    doc, table = e.report()
    budget = doc["attack_budget"]["l2"]["lin"]
    assert budget["escalated_fraction"] == 0.0 and budget["mean_gradients"] == pytest.approx(np.mean(r["gradients"]))
    assert "adaptive attack: lin 0% of the points escalated" in table
    e.save(str(tmp_path / "saved"))
    back = Evaluation.load(str(tmp_path / "saved"))
    np.testing.assert_array_equal(back.distances["lin"]["l2"]["gradients"], r["gradients"])
    assert e.settings["attack"]["adaptive"] is None             # the settings record the request as given


@pytest.mark.parametrize("kwargs,needle", [
    (dict(norms=("l3",)), "norm"),
    (dict(thresholds={"linf": [-1.0]}), "thresholds"),
    (dict(bounds=None), "eps_max"),
    (dict(bounds=(0.0, 0.5)), "outside bounds"),
    (dict(chunk_size=0), "chunk_size"),
])
def test_bad_input_is_a_value_error_before_any_attack(problem, kwargs, needle):
    W, b, x, y = problem
    args = dict(norms=("linf",), attack=ATTACK, progress=False)
    args.update(kwargs)
    with pytest.raises(ValueError, match=needle):
        evaluate({"lin": multiclass_linear(W, b)}, (np.abs(x) / np.abs(x).max(), y), **args)


def test_models_by_zoo_name_checkpoint_and_callable(tmp_path, monkeypatch):
    from rcurves.data import load_data
    from rcurves.models import load

    with pytest.raises(ValueError, match="zoo's models"):
        from rcurves.models import zoo
        zoo.entry("no-such-model")
    with pytest.raises(ValueError, match="unknown data set"):
        load_data("imagenet")
    m = load(lambda z: z, label="identity")
    assert m.label == "identity" and m.identity.startswith("callable:")
    d = load_data("digits", "test", n=50, seed=1)
    assert d.x.shape == (50, 8, 8, 1) and len(np.unique(d.y)) > 5


def test_the_attacks_fingerprint_follows_the_code_and_not_the_docstrings(tmp_path):
    """Saved runs are keyed by the attacks' code: a docstring or comment edit keeps them, a code edit does not."""
    import shutil

    import attacks
    from rcurves.pipeline.evaluation import attacks_fingerprint

    root = os.path.dirname(os.path.abspath(attacks.__file__))
    for name in os.listdir(root):
        if name.endswith(".py"):
            shutil.copy(os.path.join(root, name), tmp_path / name)
    first = attacks_fingerprint(str(tmp_path))
    assert first == attacks_fingerprint()
    path = tmp_path / "refine.py"
    src = path.read_text()
    path.write_text(src.replace('"""Boundary search along a ray', '"""A reworded docstring.\n\nBoundary search', 1)
                    + "\n# a comment\n")
    attacks_fingerprint.cache_clear()                  # computed once per process and folder
    assert attacks_fingerprint(str(tmp_path)) == first
    path.write_text(src + "\nEXTRA = 1\n")
    attacks_fingerprint.cache_clear()
    assert attacks_fingerprint(str(tmp_path)) != first
