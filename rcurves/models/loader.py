"""A model by name, folder, import path or function: the one entry, :func:`load`.

:func:`load` takes a zoo name or :class:`~rcurves.models.zoo.ZooEntry`
(:mod:`rcurves.models.zoo`: trained on first use and cached), a
:class:`~rcurves.models.zoo.ZooModel`, a checkpoint folder (``rcurves
train``), an ``.onnx`` file (:func:`rcurves.models.onnx_reader.load_onnx`), ``module:function`` returning a ``logits_fn``, a bare
``logits_fn`` or a :class:`LoadedModel`, and returns a :class:`LoadedModel`:
what every pipeline of the toolkit takes. Every mistake a user can make is a
``ValueError`` with one clear line (the CLI prints it as ``rcurves: error:
...``).
"""
from __future__ import annotations

import importlib
import os
from typing import Any, Callable, Optional

import numpy as np

from rcurves.models.loaded import LoadedModel


def load(spec: Any, label: Optional[str] = None, *, cache: Optional[str] = None, progress: bool = True,
         retrain: bool = False) -> LoadedModel:
    """Any model the toolkit takes, as a :class:`LoadedModel`.

    Args:
      spec: a zoo name or :class:`~rcurves.models.zoo.ZooEntry` (trained on
        first use and cached: :func:`rcurves.models.zoo.load`), a
        :class:`~rcurves.models.zoo.ZooModel`, a checkpoint folder, a path
        ending in ``.onnx`` (:func:`rcurves.models.onnx_reader.load_onnx`:
        NHWC inputs, the file's NCHW converted once), ``'module:function'`` (the function returns a ``logits_fn``), a
        ``logits_fn`` (any callable ``x (n, ...) -> logits (n, K)``) or a
        :class:`LoadedModel` (relabelled).
      label: its name in tables and files (default: a zoo or checkpoint
        model's training, e.g. ``'AT-linf-0.3'``; the function's name).
      cache, progress, retrain: for zoo models (:func:`rcurves.models.zoo.load`).

    Raises:
      ValueError: one line naming what could not be loaded and why.
    """
    from rcurves.models import zoo

    if isinstance(spec, LoadedModel):
        return spec if label is None else spec._replace(label=label)
    if isinstance(spec, zoo.ZooModel):
        return from_zoo(spec, label)
    if isinstance(spec, zoo.ZooEntry) or (isinstance(spec, str) and spec in zoo.ENTRIES):
        return from_zoo(zoo.load(spec, cache=cache, progress=progress, retrain=retrain), label)
    if isinstance(spec, (str, os.PathLike)) and os.fspath(spec).lower().endswith(".onnx"):
        from rcurves.models.onnx_reader import load_onnx

        return load_onnx(spec, label)
    if isinstance(spec, str):
        looks_like_import = ":" in spec and not os.path.exists(spec) and "/" not in spec.split(":", 1)[0]
        return _from_import(spec, label) if looks_like_import else _from_checkpoint(spec, label)
    if callable(spec):
        name = label or getattr(spec, "__name__", "model")
        return LoadedModel(name, spec, f"callable:{name}:{id(spec)}", {"source": "logits_fn"})
    raise ValueError(f"model: expected a zoo name, checkpoint path, module:function, ZooModel or logits_fn, "
                     f"got {type(spec).__name__}")


def _from_import(spec: str, label: Optional[str]) -> LoadedModel:
    module_name, func_name = spec.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - a user's module failing to import
        raise ValueError(f"model {spec!r}: cannot import module {module_name!r} ({type(e).__name__}: {e})") from None
    func = getattr(module, func_name, None)
    if func is None or not callable(func):
        raise ValueError(f"model {spec!r}: module {module_name!r} has no function {func_name!r}")
    try:
        logits_fn = func()
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"model {spec!r}: calling {func_name}() failed ({type(e).__name__}: {e})") from None
    if not callable(logits_fn):
        raise ValueError(f"model {spec!r}: {func_name}() must return a logits_fn, got {type(logits_fn).__name__}")
    return LoadedModel(label or func_name, logits_fn, f"import:{spec}", {"source": spec})


def _from_checkpoint(path: str, label: Optional[str]) -> LoadedModel:
    from rcurves.models.checkpoint import CheckpointError, load_checkpoint

    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as e:
        raise ValueError(str(e)) from None
    return _loaded(ckpt, path, label)


def _loaded(ckpt, path: str, label: Optional[str], **extra) -> LoadedModel:
    """A :class:`LoadedModel` of a read :class:`~rcurves.models.checkpoint.Checkpoint` (nothing is read again)."""
    name = label or (ckpt.train.name if ckpt.train is not None else os.path.basename(os.path.normpath(path)))
    info = {
        "source": os.path.abspath(path),
        "model": ckpt.meta["model"],
        "train": ckpt.meta.get("train") or None,
        "metrics": {k: v for k, v in ckpt.metrics.items() if k != "history"},
        **extra,
    }
    return LoadedModel(name, ckpt.logits_fn, ckpt.identity, info, ckpt.model, ckpt.params)


def from_zoo(m, label: Optional[str] = None) -> LoadedModel:
    """A :class:`rcurves.models.zoo.ZooModel` as a pipeline model, labelled by its training ('ST', 'AT-linf-0.3', ...)."""
    return _loaded(m.checkpoint, m.path, label or m.entry.label, zoo=m.name)


def check_model_on_data(model: LoadedModel, data) -> int:
    """The model's number of classes, after checking it takes ``data``'s inputs and labels."""
    import jax
    import jax.numpy as jnp

    try:
        out = jax.eval_shape(model.logits_fn, jax.ShapeDtypeStruct((2,) + data.x.shape[1:], jnp.float32))
    except Exception as e:  # noqa: BLE001
        raise ValueError(
            f"model {model.label!r} cannot take inputs of shape {data.x.shape[1:]} from {data.name} "
            f"({type(e).__name__})"
        ) from None
    shape = getattr(out, "shape", ())
    if len(shape) != 2 or shape[0] != 2:
        raise ValueError(f"model {model.label!r}: expected logits of shape (n, classes), got {shape}")
    k = int(shape[1])
    if data.y.size and (data.y.min() < 0 or data.y.max() >= k):
        raise ValueError(f"model {model.label!r} has {k} classes but {data.name} has labels up to {data.y.max()}")
    return k


def clean_accuracy(logits_fn: Callable, x: np.ndarray, y: np.ndarray) -> float:
    """Fraction of ``x`` classified as ``y`` (batches of 500)."""
    from rcurves.models.architectures import accuracy

    return float(accuracy(logits_fn, x, y, batch_size=500))


__all__ = ["LoadedModel", "check_model_on_data", "clean_accuracy", "from_zoo", "load"]
