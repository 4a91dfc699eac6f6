"""Models for the 002/003 experiments: the zoo in full runs, small MLPs trained in seconds for ``--quick``.

``--quick`` runs inside the test suite on a machine with an empty model
cache, so it never loads a zoo entry that would need training: it trains an
MLP with one hidden layer of 64 units for a few epochs here (memoised, so the
experiments run in one process share them). Full runs load the zoo's models
(``rcurves.zoo.load``; trained and cached on first use).
"""
from __future__ import annotations

import functools
from typing import Callable, Tuple

import numpy as np


class Model:
    """A named ``logits_fn`` with the training split it was trained on."""

    def __init__(self, name: str, logits_fn: Callable, x_train: np.ndarray, y_train: np.ndarray, note: str):
        self.name, self.logits_fn, self.x_train, self.y_train, self.note = name, logits_fn, x_train, y_train, note


@functools.lru_cache(maxsize=None)
def tiny(dataset: str, method: str = "st", eps: float = 0.0, epochs: int = 4, seed: int = 0) -> Model:
    """An MLP (hidden 64) trained here on ``dataset``'s training split: ST or l_inf PGD AT (5 steps)."""
    from rcurves.datasets import load_dataset
    from rcurves.models import ModelConfig, make_logits_fn
    from rcurves.training import TrainConfig, train

    x, y = load_dataset(dataset, "train")
    mc = ModelConfig(arch="mlp", input_shape=tuple(x.shape[1:]), n_classes=10, hidden=(64,))
    kw = dict(method=method, epochs=epochs, lr=3e-3, batch_size=128, seed=seed)
    if method == "at":
        kw.update(eps=eps, norm="linf", attack_steps=5)
    res = train(mc, TrainConfig(**kw), x, y, progress=False)
    label = "ST" if method == "st" else f"AT-linf-{eps:g}"
    return Model(f"tiny-{dataset}-mlp64-{label}", make_logits_fn(mc, res.params), x, y,
                 f"quick stand-in: MLP 64, {epochs} epochs, {label}")


def zoo_model(name: str, args) -> Model:
    """A zoo entry (trained and cached on first use), with its training split."""
    from rcurves import zoo

    m = zoo.load(name, cache=args.cache, retrain=args.retrain, progress=not args.no_progress)
    x, y = zoo.train_data(m)
    return Model(name, m.logits_fn, x, y, m.entry.note)


def predict(model: Model, x: np.ndarray, batch: int = 500) -> np.ndarray:
    """Arg-max predictions in batches."""
    out = [np.asarray(model.logits_fn(x[i:i + batch])).argmax(1) for i in range(0, x.shape[0], batch)]
    return np.concatenate(out).astype(np.int64)


def pair(args, dataset: str, st: str, at: str, quick_eps: float) -> Tuple[Model, Model]:
    """(ST, AT) models: zoo entries, or tiny MLPs in quick mode."""
    if args.quick:
        return tiny(dataset, "st", seed=args.seed), tiny(dataset, "at", quick_eps, seed=args.seed)
    return zoo_model(st, args), zoo_model(at, args)
