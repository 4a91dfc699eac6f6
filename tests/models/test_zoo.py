"""rcurves.models.zoo: named recipes, cached checkpoints, keys that change with the recipe."""
import dataclasses
import threading

import numpy as np
import pytest

from rcurves.models import zoo
from rcurves.models import ModelConfig


def _tiny(name="digits-mlp-st", **train):
    e = zoo.entry(name)
    t = dataclasses.replace(e.train, epochs=1, batch_size=32, attack_steps=2, warmup_epochs=0.0, **train)
    return dataclasses.replace(e, name="tiny-" + name, model=ModelConfig(arch="mlp", input_shape=(8, 8, 1), hidden=(8,)),
                               train=t, n_train=128)


def test_entries_are_consistent():
    assert set(zoo.DEMO_MODELS) <= set(zoo.ENTRIES)
    for name, e in zoo.ENTRIES.items():
        assert e.name == name and e.dataset in zoo.DATASETS and e.note
        assert e.model.input_shape == {"mnist": (28, 28, 1), "mnist-full": (28, 28, 1), "digits": (8, 8, 1)}[e.dataset]
        # a name says the method and its threat model: -at-, -trades-, -crown-ibp-, -mmr-at- (MMR + AT), -mmr-univ
        tag = {"at": "at", "trades": "trades", "ibp": "ibp", "crown-ibp": "crown-ibp", "mmr": "mmr-at"}.get(e.train.method)
        if e.train.method == "mmr-univ":
            assert name.endswith("-mmr-univ"), name
        if e.train.method == "mmr":
            assert e.train.mmr_at_frac > 0 and e.train.eps > 0, name      # the zoo's MMR models are MMR + AT
        if tag is not None and e.train.eps > 0:
            head, sep, suffix = name.partition(f"-{tag}-{e.train.norm}-{e.train.eps:g}")
            assert sep and suffix in ("", "-1step", "-shift"), name
            assert (suffix == "-1step") == (e.train.attack_steps == 1), name
            assert (suffix == "-shift") == (e.train.augment == "shift"), name
    with pytest.raises(ValueError, match="name"):
        zoo.entry("mnist-resnet")


def test_cache_key_changes_with_the_recipe_and_not_otherwise(tmp_path):
    e = zoo.entry("digits-mlp-st")
    p = zoo.checkpoint_path(e, str(tmp_path))
    assert zoo.checkpoint_path(zoo.entry("digits-mlp-st"), str(tmp_path)) == p
    assert zoo.checkpoint_path(zoo.variant("digits-mlp-st", epochs=3), str(tmp_path)) != p
    assert zoo.checkpoint_path(dataclasses.replace(e, n_train=100), str(tmp_path)) != p


def test_load_trains_once_then_reuses(tmp_path):
    e = _tiny()
    assert not zoo.is_cached(e, str(tmp_path))
    m = zoo.load(e, cache=str(tmp_path), progress=False)
    assert m.trained_now and zoo.is_cached(e, str(tmp_path))
    x, y = zoo.train_data(e)
    assert x.shape[0] == 128
    xt, yt = zoo.test_data(e)
    acc = float(np.mean(np.argmax(np.asarray(m.logits_fn(xt)), 1) == yt))
    assert m.metrics["test_accuracy"] == pytest.approx(acc)
    again = zoo.load(e, cache=str(tmp_path), progress=False)
    assert not again.trained_now
    for a, b in zip(np.asarray(m.logits_fn(xt[:5])).ravel(), np.asarray(again.logits_fn(xt[:5])).ravel()):
        assert a == b


def test_two_processes_asking_at_once_train_once(tmp_path):
    e = _tiny(seed=7)
    got = []
    threads = [threading.Thread(target=lambda: got.append(zoo.load(e, cache=str(tmp_path), progress=False)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(m.trained_now for m in got) == [False, True]
