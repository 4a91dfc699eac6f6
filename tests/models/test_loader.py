"""rcurves.models.load: one entry for every kind of model spec, and a straight path to the logits_fn."""
import collections
import dataclasses
import sys

import numpy as np
import pytest

from rcurves import models
from rcurves.models import ModelConfig, zoo


def _tiny(tmp_path):
    e = zoo.entry("digits-mlp-st")
    t = dataclasses.replace(e.train, epochs=1, batch_size=64)
    return dataclasses.replace(e, name="tiny-loader", model=ModelConfig(arch="mlp", input_shape=(8, 8, 1), hidden=(8,)),
                               train=t)   # the whole training split, as the zoo entries


def _module_entries(fn):
    """Run ``fn()`` and count, per rcurves module, the calls that enter it from another rcurves module."""
    entries = collections.Counter()
    reads = []

    def prof(frame, event, arg):
        if event != "call":
            return
        mod = frame.f_globals.get("__name__", "")
        parent = frame.f_back.f_globals.get("__name__", "") if frame.f_back is not None else ""
        if mod.startswith("rcurves") and parent.startswith("rcurves") and mod != parent:
            entries[mod] += 1
        if mod == "rcurves.models.checkpoint" and frame.f_code.co_name == "load_checkpoint":
            reads.append(1)

    sys.setprofile(prof)
    try:
        out = fn()
    finally:
        sys.setprofile(None)
    return out, entries, len(reads)


def test_zoo_model_from_evaluate_to_its_logits_fn_enters_each_module_once(tmp_path):
    from rcurves.pipeline import evaluation

    e = _tiny(tmp_path)
    cache = str(tmp_path)
    zoo.load(e, cache=cache, progress=False)                      # train and cache it first
    e2 = dataclasses.replace(e)                                   # as a user would pass it again
    monkey = pytest.MonkeyPatch()
    monkey.setenv("RCURVES_CACHE", cache)
    try:
        loaded, entries, reads = _module_entries(lambda: evaluation._models([e2]))
    finally:
        monkey.undo()
    (m,) = loaded.values()
    assert reads == 1                                             # the checkpoint is read once
    path = ["rcurves.models.loader", "rcurves.models.zoo", "rcurves.data.builtin", "rcurves.models.checkpoint",
            "rcurves.models.architectures"]
    assert all(entries[p] == 1 for p in path), entries
    assert max(entries.values()) == 1, entries                    # no module is entered twice
    assert m.label == "ST" and m.info["zoo"] == "tiny-loader"
    x = np.zeros((3, 8, 8, 1), np.float32)
    assert np.asarray(m.logits_fn(x)).shape == (3, 10)


def test_every_spec_of_one_checkpoint_is_the_same_model(tmp_path):
    e = _tiny(tmp_path)
    zm = zoo.load(e, cache=str(tmp_path), progress=False)
    by_entry = models.load(e, cache=str(tmp_path))
    by_model = models.load(zm)
    by_folder = models.load(zm.path)
    assert by_entry.identity == by_model.identity == by_folder.identity != ""
    assert by_entry.label == by_model.label == by_folder.label == "ST"
    x = np.random.default_rng(0).random((4, 8, 8, 1)).astype(np.float32)
    for m in (by_model, by_folder):
        np.testing.assert_array_equal(np.asarray(m.logits_fn(x)), np.asarray(by_entry.logits_fn(x)))
    assert models.load(by_folder, label="mine").label == "mine"
    f = models.load(lambda z: z.reshape(z.shape[0], -1)[:, :10], label="first ten")
    assert f.label == "first ten" and f.model is None


def test_bad_specs_are_one_line_value_errors(tmp_path):
    with pytest.raises(ValueError, match="no such directory"):
        models.load(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="cannot import module"):
        models.load("no_such_module_xyz:f")
    with pytest.raises(ValueError, match="model: expected"):
        models.load(3.5)
