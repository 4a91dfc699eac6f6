"""The zoo's shipped weights: every entry is shipped under its current recipe, loads without training, is
refused when altered, and retrains to the same parameters."""
import dataclasses
import json
import os
import shutil

import numpy as np
import pytest

from rcurves.models import shipped, zoo
from rcurves.models.checkpoint import CheckpointError, load_checkpoint


#: entries whose weights the repository does not ship yet (trained on first use; ``rcurves zoo --train NAME
#: --ship`` adds them); empty once every entry is shipped
NOT_SHIPPED = ()


def _small_names():
    return zoo.names("mnist") + zoo.names("digits")


def test_every_entry_is_shipped_under_its_current_recipe():
    """A recipe edited without `rcurves zoo --train NAME --ship` fails here (its key no longer matches)."""
    listed = shipped.manifest()
    assert set(listed) == set(zoo.ENTRIES) - set(NOT_SHIPPED), set(zoo.ENTRIES) ^ set(listed)
    assert set(NOT_SHIPPED) <= set(zoo.ENTRIES) and not any(zoo.is_shipped(n) for n in NOT_SHIPPED)
    total = 0
    for name, rec in listed.items():
        e = zoo.entry(name)
        # the key of the current recipe on the data the weights were trained on
        assert zoo.cache_key(e, rec["data_fingerprint"]) == rec["recipe_key"], name
        folder = os.path.join(shipped.WEIGHTS_DIR, rec["folder"])
        meta = json.load(open(os.path.join(folder, "meta.json")))
        assert meta["zoo"]["recipe_key"] == rec["recipe_key"] and meta["train"] == e.train.to_dict(), name
        assert meta["data_fingerprint"] == rec["data_fingerprint"] and len(meta["metrics"]["history"]) == e.train.epochs
        total += sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    assert total < 30e6
    for name in _small_names():            # their training data is installed: the key on the data itself
        assert zoo.recipe_key(name) == listed[name]["recipe_key"], name


def test_load_takes_the_shipped_weights_and_trains_nothing(tmp_path):
    for name in zoo.DEMO_MODELS + ("digits-mlp-st",):
        m = zoo.load(name, cache=str(tmp_path), progress=False)
        assert m.source == "shipped" and not m.trained_now, name
        assert m.path.startswith(shipped.WEIGHTS_DIR)
    assert not os.path.exists(tmp_path / "models") or not any(
        p.endswith(".json") for p in os.listdir(tmp_path / "models"))
    xt, yt = zoo.test_data("digits-mlp-st")
    m = zoo.load("digits-mlp-st", cache=str(tmp_path), progress=False)
    acc = float(np.mean(np.argmax(np.asarray(m.logits_fn(xt)), 1) == yt))
    assert acc == pytest.approx(m.metrics["test_accuracy"])          # the recorded number is the model's


def _copy_weights(tmp_path, name):
    rec = shipped.manifest()[name]
    dest = tmp_path / "weights"
    shutil.copytree(os.path.join(shipped.WEIGHTS_DIR, rec["folder"]), dest / rec["folder"])
    (dest / "manifest.json").write_text(json.dumps({"format": "rcurves-zoo-weights", "version": 1,
                                                    "models": {name: rec}}))
    return dest, dest / rec["folder"]


@pytest.mark.parametrize("file", ["params.msgpack", "meta.json"])
def test_an_altered_weight_file_is_refused_never_loaded(tmp_path, monkeypatch, file):
    dest, folder = _copy_weights(tmp_path, "digits-mlp-st")
    monkeypatch.setenv("RCURVES_WEIGHTS", str(dest))
    assert zoo.load("digits-mlp-st", cache=str(tmp_path / "c"), progress=False).source == "shipped"
    blob = bytearray((folder / file).read_bytes())
    blob[len(blob) // 2] ^= 1                                          # one bit
    (folder / file).write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match=f"{file}.*sha256 [0-9a-f]{{64}} differs from the manifest"):
        zoo.load("digits-mlp-st", cache=str(tmp_path / "c"), progress=False)
    os.remove(folder / file)
    with pytest.raises(CheckpointError, match=f"{file}.*missing"):
        zoo.load("digits-mlp-st", cache=str(tmp_path / "c"), progress=False)


def test_a_changed_recipe_is_not_served_the_shipped_weights(tmp_path, monkeypatch):
    changed = zoo.variant("digits-mlp-st", new_name="digits-mlp-st", epochs=1)   # same name, another recipe
    assert not zoo.is_shipped(changed)
    m = zoo.load(changed, cache=str(tmp_path), progress=False)
    assert m.source == "trained"
    # shipping it (rcurves zoo --train NAME --ship) replaces the old recipe's folder and then serves it
    dest, old = _copy_weights(tmp_path, "digits-mlp-st")
    monkeypatch.setenv("RCURVES_WEIGHTS", str(dest))
    new = shipped.ship("digits-mlp-st", zoo.recipe_key(changed), m.path)
    assert not old.exists() and os.path.isdir(new)
    again = zoo.load(changed, cache=str(tmp_path / "other"), progress=False)
    assert again.source == "shipped" and again.metrics["history"] == m.metrics["history"]
    assert zoo.load("digits-mlp-st", cache=str(tmp_path / "c"), progress=False).source == "trained"  # old recipe


@pytest.mark.highest
def test_retraining_a_small_entry_gives_the_shipped_parameters(tmp_path):
    """Training is deterministic in its key: on the machine and JAX the weights were shipped from, bit-identical;
    elsewhere XLA may order float sums differently, so then the same held-out accuracy within 1% and 97% of the
    predictions agree."""
    name = "digits-mlp-st"
    shipped_model = zoo.load(name, cache=str(tmp_path), progress=False)
    assert shipped_model.source == "shipped"
    fresh = zoo.load(name, cache=str(tmp_path), progress=False, retrain=True)
    assert fresh.source == "trained"
    a = jax_leaves(shipped_model.params)
    b = jax_leaves(fresh.params)
    same_machine = shipped_model.checkpoint.meta["zoo"]["shipped_from"] == shipped._machine()
    if same_machine:
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    else:
        xt, yt = zoo.test_data(name)
        pa = np.argmax(np.asarray(shipped_model.logits_fn(xt)), 1)
        pb = np.argmax(np.asarray(fresh.logits_fn(xt)), 1)
        assert abs(np.mean(pa == yt) - np.mean(pb == yt)) <= 0.01 and np.mean(pa == pb) >= 0.97


def jax_leaves(tree):
    import jax

    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def test_shipped_checkpoints_are_plain_checkpoints():
    """Any shipped folder is also a checkpoint `rcurves.models.load(path)` reads."""
    rec = shipped.manifest()["mnist-linear"]
    ckpt = load_checkpoint(os.path.join(shipped.WEIGHTS_DIR, rec["folder"]))
    assert ckpt.meta["params_sha256"] == rec["params_sha256"]
    assert dataclasses.asdict(ckpt.model)["arch"] == "linear"


def test_cli_ship_writes_the_weights_of_a_changed_recipe(tmp_path, monkeypatch, capsys):
    from rcurves.cli import main

    dest, old = _copy_weights(tmp_path, "digits-mlp-st")
    monkeypatch.setenv("RCURVES_WEIGHTS", str(dest))
    changed = zoo.variant("digits-mlp-st", new_name="digits-mlp-st", epochs=1)
    monkeypatch.setitem(zoo.ENTRIES, "digits-mlp-st", changed)
    assert not zoo.is_shipped("digits-mlp-st")
    assert main(["zoo", "--train", "digits-mlp-st", "--ship", "--cache", str(tmp_path / "c"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "digits-mlp-st: trained" in out and "shipped: " in out
    assert zoo.is_shipped("digits-mlp-st") and not old.exists()
    rec = shipped.manifest(str(dest))["digits-mlp-st"]
    assert rec["recipe_key"] == zoo.recipe_key(changed)
    m = zoo.load("digits-mlp-st", cache=str(tmp_path / "fresh"), progress=False)
    assert m.source == "shipped" and len(m.metrics["history"]) == 1
    assert main(["zoo", "--ship"]) != 0                               # --ship names no entry: a usage error
    assert "--ship: name the entries" in capsys.readouterr().err
