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
import re
import tempfile
from typing import Any, Dict, NamedTuple, Optional

import jax
import numpy as np
from flax import serialization

from rcurves.models import ModelConfig, Params, make_logits_fn, param_shapes
from rcurves.training import TrainConfig

FORMAT = "rcurves-checkpoint"
VERSION = 1
PARAMS_FILE = "params.msgpack"
META_FILE = "meta.json"


class CheckpointError(ValueError):
    """A checkpoint is missing, corrupted, foreign or does not fit its model."""


class Checkpoint(NamedTuple):
    params: Params                       # pytree of numpy arrays
    model: ModelConfig
    train: Optional[TrainConfig]
    data_fingerprint: Optional[str]
    metrics: Dict[str, Any]


_TEMP_PREFIX = ".tmp-"
# mkstemp(prefix, suffix) names: prefix + 8 characters of tempfile's alphabet + suffix
_TEMP_NAME = re.compile(r"^" + re.escape(_TEMP_PREFIX) + r"[a-z0-9_]{8}-(?P<target>.+)$")


def atomic_temp_target(name: str) -> Optional[str]:
    """The file name an :func:`atomic_write_bytes` temp file named ``name`` was for, else None.

    A process killed in the middle of an atomic write leaves such a temp file
    behind (never the target: that only appears, complete, with the rename).
    """
    m = _TEMP_NAME.match(name)
    return m.group("target") if m else None


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file + fsync + ``os.replace``)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=_TEMP_PREFIX, suffix="-" + os.path.basename(path))
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(d)


def atomic_write_json(path: str, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n").encode())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(d: str) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
        (``rcurves.datasets.dataset_fingerprint``).
      metrics: JSON-serialisable numbers (e.g. test accuracy, history).
    """
    tree = _to_numpy_tree(params)
    _check_tree(tree, model, path)
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
    try:
        with open(meta_path, "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"checkpoint {path!r}: {META_FILE} is not valid JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {path!r}: not an rcurves checkpoint ({META_FILE} has no format {FORMAT!r})")
    if meta.get("version") != VERSION:
        raise CheckpointError(
            f"checkpoint {path!r}: unsupported version {meta.get('version')!r} (expected {VERSION})"
        )
    try:
        model = ModelConfig.from_dict(meta["model"])
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
    _check_tree(tree, model, path)
    return Checkpoint(
        params=tree,
        model=model,
        train=train,
        data_fingerprint=meta.get("data_fingerprint"),
        metrics=meta.get("metrics") or {},
    )


def logits_fn_from_checkpoint(path: str):
    """``(logits_fn, Checkpoint)`` for the checkpoint at ``path``."""
    ckpt = load_checkpoint(path)
    return make_logits_fn(ckpt.model, ckpt.params), ckpt


def _check_tree(tree: Any, model: ModelConfig, path: str) -> None:
    """The parameter tree must have exactly the architecture's keys, shapes and float32 dtype."""
    expected = param_shapes(model)
    exp_flat = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(expected)}
    try:
        got_flat = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(tree)}
    except Exception:  # noqa: BLE001
        raise CheckpointError(f"checkpoint {path!r}: parameters are not a tree of arrays") from None
    if set(exp_flat) != set(got_flat):
        missing = sorted(set(exp_flat) - set(got_flat))[:3]
        extra = sorted(set(got_flat) - set(exp_flat))[:3]
        raise CheckpointError(
            f"checkpoint {path!r}: parameters do not match a {model.arch} model "
            f"(missing {missing}, unexpected {extra})"
        )
    for k, e in exp_flat.items():
        g = got_flat[k]
        if not isinstance(g, np.ndarray) and not hasattr(g, "shape"):
            raise CheckpointError(f"checkpoint {path!r}: parameter {k} is not an array")
        if tuple(g.shape) != tuple(e.shape) or np.dtype(g.dtype) != np.dtype(e.dtype):
            raise CheckpointError(
                f"checkpoint {path!r}: parameter {k} has shape {tuple(g.shape)} {np.dtype(g.dtype)}, "
                f"the {model.arch} model expects {tuple(e.shape)} {np.dtype(e.dtype)}"
            )


__all__ = [
    "Checkpoint",
    "CheckpointError",
    "atomic_temp_target",
    "atomic_write_bytes",
    "atomic_write_json",
    "load_checkpoint",
    "logits_fn_from_checkpoint",
    "save_checkpoint",
]
