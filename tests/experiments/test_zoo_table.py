"""The zoo tables of README.md and docs/zoo.md are generated from the shipped weights' records, and current."""
import json
import os
import shutil

from tests._experiments import load
from tests.models.test_shipped import _copy_weights


def test_committed_tables_are_what_the_generator_writes(tmp_path):
    mod = load("zoo_table")
    for rel in mod.MARKERS:
        os.makedirs(tmp_path / os.path.dirname(rel), exist_ok=True)
        shutil.copy(os.path.join(mod.ROOT, rel), tmp_path / rel)
    mod.write_tables(str(tmp_path))
    for rel in mod.MARKERS:
        assert (tmp_path / rel).read_text() == open(os.path.join(mod.ROOT, rel)).read(), (
            f"{rel}: zoo table out of date; run python experiments/zoo_table.py --tables")


def test_rows_carry_the_recorded_numbers_and_drop_measurements_of_another_recipe(tmp_path, monkeypatch):
    from rcurves.models import shipped

    mod = load("zoo_table")
    name = "digits-mlp-st"
    rec = shipped.manifest()[name]
    dest, _ = _copy_weights(tmp_path, name)
    monkeypatch.setenv("RCURVES_WEIGHTS", str(dest))
    acc = json.load(open(dest / rec["folder"] / "meta.json"))["metrics"]["test_accuracy"]
    row = [r for r in mod.table_rows("small") if r.startswith(f"| `{name}`")][0]
    assert f"| {acc:.4f} | not measured |" in row
    assert [r for r in mod.table_rows("small") if "digits-mlp-at" in r][0].count("not shipped") == 1
    mod.record_measured(name, {"recipe_key": rec["recipe_key"], "norm": "linf", "eps": 0.05, "robust_error": 0.125,
                               "median_distance": 0.0987, "n_test": 359, "whole_split": True})
    row = [r for r in mod.table_rows("small") if r.startswith(f"| `{name}`")][0]
    assert "| 0.125 (linf, 0.05) | 0.0987 | 359 |" in row
    mod.record_measured(name, {"recipe_key": "0" * 16, "norm": "linf", "eps": 0.05, "robust_error": 0.5,
                               "median_distance": 0.01, "n_test": 359, "whole_split": True})
    row = [r for r in mod.table_rows("small") if r.startswith(f"| `{name}`")][0]
    assert "not measured" in row and "0.5" not in row                 # measured under another recipe: not shown
