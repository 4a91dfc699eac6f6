"""Sweeps over checkpoints: kept epochs, one compiled program for all of them, rows equal to the distances."""
import dataclasses
import json
import os

import jax
import numpy as np
import pytest

from rcurves.pipeline import sweep

from rcurves.models import zoo
from rcurves.models import ModelConfig
from rcurves.models.training import TrainConfig

_EVENTS = []
jax.monitoring.register_event_duration_secs_listener(
    lambda name, *a, **k: _EVENTS.append(name) if name == "/jax/core/compile/backend_compile_duration" else None)


def _entry():
    return zoo.ZooEntry("test-sweep-mlp", "digits", ModelConfig(arch="mlp", input_shape=(8, 8, 1), n_classes=10,
                                                                 hidden=(32,)),
                        TrainConfig(method="st", epochs=4, batch_size=64), n_train=400)


def test_training_keeps_epochs_and_final_model_is_the_zoo_model(tmp_path):
    e = _entry()
    cache = str(tmp_path)
    plain = zoo.load(e, cache=cache, progress=False)                 # trained without keeping epochs
    assert zoo.epoch_checkpoints(e, cache) == []
    m = zoo.load(e, cache=cache, progress=False, checkpoint_every=3)  # retrains, keeping epochs 3 and 4
    assert m.trained_now and [ep for ep, _ in zoo.epoch_checkpoints(e, cache)] == [3, 4] == zoo.kept_epochs(e, 3)
    from rcurves.models.checkpoint import load_checkpoint

    last = load_checkpoint(zoo.epoch_checkpoints(e, cache)[-1][1])
    for a, b in zip(jax.tree_util.tree_leaves(last.params), jax.tree_util.tree_leaves(m.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # the last kept epoch is the final model
    for a, b in zip(jax.tree_util.tree_leaves(plain.params), jax.tree_util.tree_leaves(m.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)  # deterministic training
    assert not zoo.load(e, cache=cache, progress=False, checkpoint_every=3).trained_now   # now cached


def test_sweep_compiles_once_and_rows_match_distances(tmp_path):
    e = _entry()
    cache = str(tmp_path)
    # first sweep on one epoch compiles the attack; the other epochs then compile nothing
    zoo.load(e, cache=cache, progress=False, checkpoint_every=1)
    kept = dict(zoo.epoch_checkpoints(e, cache))
    kw = dict(norm="linf", thresholds=(0.05, 0.1), n=24, seed=0, progress=False,
              attack=__import__("rcurves.pipeline.evaluation", fromlist=["AttackSettings"]).AttackSettings(gradients=40, cw=False))
    sweep.evaluate_checkpoints({1: kept[1]}, "digits", **kw)
    start = len(_EVENTS)
    sw = sweep.evaluate_checkpoints({k: kept[k] for k in (2, 3, 4)}, "digits", name=e.name, **kw)
    attack_compiles = len(_EVENTS) - start
    assert attack_compiles == 0, f"{attack_compiles} compilations for three more checkpoints"
    rs = sweep.rows(sw)
    assert [r["epoch"] for r in rs] == [2, 3, 4] and all(r["n"] == 24 for r in rs)
    for r, lab in zip(rs, sw.labels):
        d = sw.evaluation.distance(lab, "linf")
        assert r["R(0.1)"] == np.mean(d <= 0.1) and r["median_distance"] == np.median(d)
        assert r["R(0.05)"] <= r["R(0.1)"]                        # a robust-error curve is monotone
    paths = sweep.save(sw, str(tmp_path / "out"))
    assert all(os.path.getsize(p) > 100 for p in paths)
    doc = json.load(open(paths[0]))
    assert [r["epoch"] for r in doc["rows"]] == [2, 3, 4] and set(doc["distances"]) == {"2", "3", "4"}


def test_sweep_cli_errors(tmp_path, capsys):
    from rcurves.cli import main

    assert main(["sweep", "--model", "mnist-cnn-st", "--out", str(tmp_path)]) == 2
    assert "--every" in capsys.readouterr().err
    assert main(["sweep", "--checkpoints", str(tmp_path), "--data", "digits", "--out", str(tmp_path)]) == 2
    assert "not a checkpoint folder" in capsys.readouterr().err
    with pytest.raises(ValueError, match="checkpoint_every"):
        zoo.load(_entry(), cache=str(tmp_path), checkpoint_every=0)
