"""A zoo name becomes a model in one pass: its training data and recipe key once, then the shipped weights,
else the cache, else training, each step at most once and in that order, none calling back."""
import collections

import jax
import pytest

import rcurves.data.builtin as builtin
from rcurves import models
from rcurves.models import checkpoint, init_params, shipped, zoo

NAME = "digits-mlp-st"


@pytest.fixture
def calls(monkeypatch):
    """Count (in order) the steps of a load: data, key, manifest, shipped lookup, cache read, training."""
    seen = []

    def spy(owner, attr, label):
        real = getattr(owner, attr)

        def wrapped(*a, **k):
            seen.append(label)
            return real(*a, **k)

        monkeypatch.setattr(owner, attr, wrapped)

    spy(builtin, "training_set", "data")
    spy(zoo, "cache_key", "key")
    spy(shipped, "manifest", "manifest")
    spy(shipped, "find", "shipped")
    spy(zoo, "load_checkpoint", "cache")
    spy(zoo, "_train_and_save", "train")
    return seen


def test_a_shipped_name_is_served_by_its_first_steps_only(calls):
    m = models.load(NAME, progress=False)
    assert m.info["source"].startswith(shipped.WEIGHTS_DIR) and m.info["zoo"] == NAME
    assert calls == ["data", "key", "shipped", "manifest"]


def test_otherwise_the_cache_then_training_each_once(calls, monkeypatch, tmp_path):
    monkeypatch.setenv("RCURVES_WEIGHTS", str(tmp_path / "no-weights"))        # nothing shipped
    e = zoo.entry(NAME)

    def quick_train(entry, x, y, fp, path, *, progress, every=None):     # the training step, without the epochs
        checkpoint.save_checkpoint(path, init_params(entry.model, jax.random.PRNGKey(0)), entry.model,
                                   train=entry.train, data_fingerprint=fp, metrics={"zoo_name": entry.name})

    monkeypatch.setattr(zoo, "_train_and_save", quick_train)
    calls_train = collections.Counter()
    real = zoo._train_and_save

    def counted(*a, **k):
        calls_train["train"] += 1
        return real(*a, **k)

    monkeypatch.setattr(zoo, "_train_and_save", counted)
    first = zoo.load(e, cache=str(tmp_path / "cache"), progress=False)
    assert (first.source, calls_train["train"]) == ("trained", 1)
    assert calls == ["data", "key", "shipped", "manifest", "cache"]      # no cache yet: train, then read it once
    del calls[:]
    second = models.load(e, cache=str(tmp_path / "cache"), progress=False)
    assert calls_train["train"] == 1 and second.info["source"] == first.path
    assert calls == ["data", "key", "shipped", "manifest", "cache"]      # the cached checkpoint, read once
