"""Model checkpoints in a safe, self-describing format (never pickle).

A checkpoint is a directory holding two files:

* ``params.msgpack`` — the parameter pytree, serialised with
  ``flax.serialization.msgpack_serialize`` (msgpack of dtype, shape and raw
  bytes per array: loading runs no code and restores every bit);
* ``meta.json`` — ``{"format": "rcurves-checkpoint", "version": 1,
  "model": ModelConfig, "train": TrainConfig | null, "data_fingerprint": str |
  null, "metrics": {...}, "params_sha256": hex}``.

Both are written to a temporary file, flushed, fsync'ed and moved into place
with ``os.replace``; ``params.msgpack`` first, so a checkpoint whose
``meta.json`` exists is complete. Loading re-hashes the parameter bytes and
compares the tree's shapes with the architecture's, so a truncated, corrupted
or foreign file is reported as a :class:`CheckpointError` (a ``ValueError``)
with a one-line message, never as a traceback from deep inside msgpack.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

import jax
import numpy as np
from flax import serialization

from rcurves.files import atomic_write_bytes, atomic_write_json
from rcurves.models.architectures import ModelConfig, Params, check_params, restore
from rcurves.models.training import TrainConfig

FORMAT = "rcurves-checkpoint"
VERSION = 1
PARAMS_FILE = "params.msgpack"
META_FILE = "meta.json"


class CheckpointError(ValueError):
    """A checkpoint is missing, corrupted, foreign or does not fit its model."""


class Checkpoint(NamedTuple):
    """A loaded checkpoint: the model ready to attack and where it came from.

    ``logits_fn`` is the architecture's :class:`~rcurves.models.architectures.ModelFn`
    over ``params``; ``identity`` the sha256 of ``meta.json`` (what a resumed
    run must match); ``meta`` the ``meta.json`` document as stored.
    """

    params: Params                       # pytree of numpy arrays
    model: ModelConfig
    train: Optional[TrainConfig]
    data_fingerprint: Optional[str]
    metrics: Dict[str, Any]
    logits_fn: Optional[Callable] = None
    identity: str = ""
    meta: Optional[Dict[str, Any]] = None


def _to_numpy_tree(params: Params) -> Dict[str, Any]:
    tree = serialization.to_state_dict(params)
    return jax.tree_util.tree_map(lambda a: np.asarray(a), tree)


def save_checkpoint(
    path: str,
    params: Params,
    model: ModelConfig,
    *,
    train: Optional[TrainConfig] = None,
    data_fingerprint: Optional[str] = None,
    metrics: Optional[Dict[str, Any]] = None,
) -> str:
    """Write a checkpoint directory at ``path`` and return ``path``.

    Args:
      path: directory to create (or overwrite).
      params: the parameter pytree (flax ``params`` collection).
      model: its architecture.
      train: how it was trained (stored for provenance and caching).
      data_fingerprint: fingerprint of the training data
        (``rcurves.data.dataset_fingerprint``).
      metrics: JSON-serialisable numbers (e.g. test accuracy, history).
    """
    tree = _to_numpy_tree(params)
    try:
        check_params(model, tree)
    except ValueError as e:
        raise CheckpointError(f"checkpoint {path!r}: {e}") from None
    blob = serialization.msgpack_serialize(tree)
    os.makedirs(path, exist_ok=True)
    atomic_write_bytes(os.path.join(path, PARAMS_FILE), blob)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "model": model.to_dict(),
        "train": train.to_dict() if train is not None else None,
        "data_fingerprint": data_fingerprint,
        "metrics": metrics or {},
        "params_sha256": hashlib.sha256(blob).hexdigest(),
    }
    atomic_write_json(os.path.join(path, META_FILE), meta)
    return path


def train_checkpoint(path: str, model: ModelConfig, train: TrainConfig, x, y, *,
                     test: Optional[Tuple[Any, Any, str]] = None, data_fingerprint: Optional[str] = None,
                     metrics: Optional[Dict[str, Any]] = None, progress: bool = True, desc: Optional[str] = None,
                     on_epoch: Optional[Callable] = None) -> Dict[str, Any]:
    """Train ``model`` with ``train`` on ``(x, y)`` (:func:`rcurves.models.training.train`, key
    ``PRNGKey(train.seed)``) and save the checkpoint at ``path``.

    ``test = (x_test, y_test, name)`` adds the held-out accuracy to the metrics;
    ``data_fingerprint`` defaults to the training data's
    (:func:`rcurves.data.dataset_fingerprint`); ``metrics`` are stored too.
    Returns the stored metrics (``train_seconds``, ``history``, ...).
    """
    import time

    from rcurves.models.architectures import accuracy, make_logits_fn
    from rcurves.models.training import train as fit

    if data_fingerprint is None:
        from rcurves.data.builtin import dataset_fingerprint

        data_fingerprint = dataset_fingerprint(x, y)
    t0 = time.time()
    res = fit(model, train, x, y, key=jax.random.PRNGKey(train.seed), progress=progress, desc=desc or f"train {train.name}",
              on_epoch=on_epoch)
    out: Dict[str, Any] = {"train_seconds": round(time.time() - t0, 2), "history": res.history}
    if test is not None:
        out["test_accuracy"] = accuracy(make_logits_fn(model, res.params), test[0], test[1])
        out["test_data"] = test[2]
    out.update(metrics or {})
    save_checkpoint(path, res.params, model, train=train, data_fingerprint=data_fingerprint, metrics=out)
    return out


def load_checkpoint(path: str) -> Checkpoint:
    """Read and verify a checkpoint written by :func:`save_checkpoint`.

    Raises:
      CheckpointError: missing directory or files, a ``meta.json`` that is not
        an rcurves checkpoint, a hash mismatch (corruption), undecodable
        parameters, or parameters whose shapes do not fit the stored model.
    """
    if not os.path.isdir(path):
        if os.path.exists(path):
            raise CheckpointError(
                f"checkpoint {path!r}: expected a checkpoint directory (with {META_FILE} and "
                f"{PARAMS_FILE}), got a file"
            )
        raise CheckpointError(f"checkpoint {path!r}: no such directory")
    meta_path = os.path.join(path, META_FILE)
    params_path = os.path.join(path, PARAMS_FILE)
    if not os.path.exists(meta_path):
        raise CheckpointError(f"checkpoint {path!r}: missing {META_FILE} (not an rcurves checkpoint?)")
    with open(meta_path, "rb") as f:
        meta_bytes = f.read()
    try:
        meta = json.loads(meta_bytes.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"checkpoint {path!r}: {META_FILE} is not valid JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {path!r}: not an rcurves checkpoint ({META_FILE} has no format {FORMAT!r})")
    if meta.get("version") != VERSION:
        raise CheckpointError(
            f"checkpoint {path!r}: unsupported version {meta.get('version')!r} (expected {VERSION})"
        )
    try:
        train = TrainConfig.from_dict(meta["train"]) if meta.get("train") else None
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint {path!r}: invalid configuration in {META_FILE} ({e})") from None
    if not os.path.exists(params_path):
        raise CheckpointError(f"checkpoint {path!r}: missing {PARAMS_FILE}")
    with open(params_path, "rb") as f:
        blob = f.read()
    if hashlib.sha256(blob).hexdigest() != meta.get("params_sha256"):
        raise CheckpointError(
            f"checkpoint {path!r}: {PARAMS_FILE} is corrupted (sha256 differs from {META_FILE})"
        )
    try:
        tree = serialization.msgpack_restore(blob)
    except Exception as e:  # noqa: BLE001 - any decoding failure is a corrupt file
        raise CheckpointError(f"checkpoint {path!r}: cannot decode {PARAMS_FILE} ({type(e).__name__})") from None
    try:
        logits_fn = restore(meta.get("model"), tree)
    except ValueError as e:
        raise CheckpointError(f"checkpoint {path!r}: {e}") from None
    return Checkpoint(
        params=tree,
        model=logits_fn.cfg,
        train=train,
        data_fingerprint=meta.get("data_fingerprint"),
        metrics=meta.get("metrics") or {},
        logits_fn=logits_fn,
        identity=hashlib.sha256(meta_bytes).hexdigest(),
        meta=meta,
    )


def logits_fn_from_checkpoint(path: str):
    """``(logits_fn, Checkpoint)`` for the checkpoint at ``path``."""
    ckpt = load_checkpoint(path)
    return ckpt.logits_fn, ckpt


__all__ = [
    "Checkpoint",
    "CheckpointError",
    "load_checkpoint",
    "logits_fn_from_checkpoint",
    "save_checkpoint",
    "train_checkpoint",
]
