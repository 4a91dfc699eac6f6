"""Data sets and models by name: what the evaluation pipeline and the CLI are pointed at.

* :func:`load_data`: a built-in split (``'mnist'``, ``'mnist-full'``,
  ``'digits'``), a folder of original files (``'mnist-idx:DIR'``,
  ``'cifar10:DIR'``, ``'cifar100:DIR'``: :mod:`rcurves.readers`) or a user's
  ``.npz`` with arrays ``x`` and ``y``, optionally a random subset.
* :func:`load_model`: a zoo name (:mod:`rcurves.zoo`), a checkpoint folder
  (``rcurves train``) or ``module:function`` returning a ``logits_fn``.
* :func:`as_model`: anything the pipeline accepts as a model (the above, a
  :class:`rcurves.zoo.ZooModel`, or a bare ``logits_fn``) as a
  :class:`LoadedModel`.

Every mistake a user can make is a ``ValueError`` with one clear line (the CLI
prints it as ``rcurves: error: ...``).
"""
from __future__ import annotations

import hashlib
import importlib
import os
from typing import Any, Callable, Dict, NamedTuple, Optional

import numpy as np

BUILTIN_DATA = ("mnist", "mnist-full", "digits")


class Data(NamedTuple):
    """A labelled point set: ``x (n, *input_shape)`` float32, ``y (n,)`` int64."""

    name: str
    x: np.ndarray
    y: np.ndarray


class LoadedModel(NamedTuple):
    """A model ready for the pipeline.

    ``identity`` is what a resumed run must match (a hash of the checkpoint's
    metadata, or the import path); ``info`` is JSON-ready provenance;
    ``model`` and ``params`` are the architecture and weights of a toolkit
    model (checkpoint or zoo; None for a bare ``logits_fn``), which
    ``rcurves.certify.from_model`` needs.
    """

    label: str
    logits_fn: Callable
    identity: str
    info: Dict[str, Any]
    model: Any = None
    params: Any = None


def load_data(spec: str, split: str = "test", n: Optional[int] = None, seed: int = 0) -> Data:
    """A built-in data set split or a user's ``.npz`` (arrays ``x`` and ``y``).

    With ``n``, a random subset of ``n`` points (``default_rng(seed)``, kept in
    their order; built-in splits are class-interleaved, so a prefix would be a
    stratified sample, but a user's file may be sorted).
    """
    from rcurves import datasets

    from rcurves import readers

    folder_spec = readers.parse_spec(spec) if isinstance(spec, str) else None
    if spec in BUILTIN_DATA:
        x, y = datasets.load_dataset(spec, split)
        name = f"{spec}:{split}"
    elif folder_spec is not None:
        x, y = readers.load_folder(folder_spec[0], folder_spec[1], split)
        name = f"{spec}:{split}"
    elif isinstance(spec, str) and (spec.endswith(".npz") or os.path.isfile(spec)):
        x, y = _read_npz(spec)
        name = os.path.basename(spec)
    else:
        raise ValueError(f"unknown data set {spec!r}: expected one of {', '.join(BUILTIN_DATA)}, a folder of "
                         f"original files (mnist-idx:DIR, cifar10:DIR, cifar100:DIR) or a .npz file with x and y")
    data = Data(name, np.ascontiguousarray(x), np.asarray(y, dtype=np.int64))
    return data if n is None else load_subset(data, n, seed)


def _read_npz(spec: str):
    if not os.path.isfile(spec):
        raise ValueError(f"data file {spec!r} not found")
    try:
        with np.load(spec, allow_pickle=False) as z:
            files = set(z.files)
            if not {"x", "y"} <= files:
                raise ValueError(f"{spec}: expected arrays named 'x' and 'y', found {sorted(files)}")
            x, y = np.asarray(z["x"]), np.asarray(z["y"])
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - unreadable user file
        raise ValueError(f"{spec}: cannot read as .npz ({type(e).__name__}: {e})") from None
    if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"{spec}: x must be floating point (inputs scaled to the bounds), got {x.dtype}")
    if not np.issubdtype(y.dtype, np.integer) or y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"{spec}: y must be integer labels of shape ({x.shape[0]},), got {y.dtype} {y.shape}")
    return x.astype(np.float32), y


def as_data(data: Any, n: Optional[int] = None, seed: int = 0) -> Data:
    """``Data``, a name/path for :func:`load_data` (test split), or an ``(x, y)`` pair."""
    if isinstance(data, Data):
        return data if n is None else load_subset(data, n, seed)
    if isinstance(data, str):
        return load_data(data, "test", n=n, seed=seed)
    if isinstance(data, (tuple, list)) and len(data) == 2:
        from attacks import checks

        x = np.asarray(checks.check_array(data[0], "x", min_ndim=2), np.float32)
        y = np.asarray(checks.check_labels(data[1], x.shape[0], "y"), np.int64)
        return as_data(Data("data", x, y), n, seed)
    raise ValueError(f"data: expected one of {', '.join(BUILTIN_DATA)}, a .npz path, an (x, y) pair or Data, "
                     f"got {type(data).__name__}")


def load_subset(data: Data, n: int, seed: int = 0) -> Data:
    if n < 1:
        raise ValueError(f"n: expected a positive number of points, got {n}")
    if n >= data.x.shape[0]:
        return data
    idx = np.sort(np.random.default_rng(seed).permutation(data.x.shape[0])[:n])
    return Data(data.name, data.x[idx], data.y[idx])


def load_model(spec: str, label: Optional[str] = None, *, cache: Optional[str] = None,
               progress: bool = True) -> LoadedModel:
    """A zoo name, a checkpoint directory, or ``module:function`` returning a ``logits_fn``."""
    from rcurves import zoo

    if spec in zoo.ENTRIES:
        return from_zoo(zoo.load(spec, cache=cache, progress=progress), label)
    looks_like_import = ":" in spec and not os.path.exists(spec) and "/" not in spec.split(":", 1)[0]
    if not looks_like_import:
        return _from_checkpoint(spec, label)
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
    from rcurves.checkpoint import META_FILE, CheckpointError, load_checkpoint
    from rcurves.models import make_logits_fn

    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as e:
        raise ValueError(str(e)) from None
    with open(os.path.join(path, META_FILE), "rb") as f:
        ident = hashlib.sha256(f.read()).hexdigest()
    name = label or (ckpt.train.name if ckpt.train is not None else os.path.basename(os.path.normpath(path)))
    info = {
        "source": os.path.abspath(path),
        "model": ckpt.model.to_dict(),
        "train": ckpt.train.to_dict() if ckpt.train is not None else None,
        "metrics": {k: v for k, v in ckpt.metrics.items() if k != "history"},
    }
    return LoadedModel(name, make_logits_fn(ckpt.model, ckpt.params), ident, info, ckpt.model, ckpt.params)


def from_zoo(m, label: Optional[str] = None) -> LoadedModel:
    """A :class:`rcurves.zoo.ZooModel` as a pipeline model, labelled by its training ('ST', 'AT-linf-0.3', ...)."""
    loaded = _from_checkpoint(m.path, label or m.entry.train.name)
    loaded.info["zoo"] = m.name
    return loaded


def as_model(model: Any, label: Optional[str] = None) -> LoadedModel:
    """A :class:`LoadedModel` from a ``LoadedModel``, ``ZooModel``, zoo name,
    checkpoint path, ``module:function`` or a bare ``logits_fn``."""
    from rcurves import zoo

    if isinstance(model, LoadedModel):
        return model if label is None else model._replace(label=label)
    if isinstance(model, zoo.ZooModel):
        return from_zoo(model, label)
    if isinstance(model, str):
        return load_model(model, label)
    if callable(model):
        name = label or getattr(model, "__name__", "model")
        return LoadedModel(name, model, f"callable:{name}:{id(model)}", {"source": "logits_fn"})
    raise ValueError(f"model: expected a zoo name, checkpoint path, module:function, ZooModel or logits_fn, "
                     f"got {type(model).__name__}")


def check_model_on_data(model: LoadedModel, data: Data) -> int:
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
    from rcurves.models import accuracy

    return float(accuracy(logits_fn, x, y, batch_size=500))


__all__ = ["BUILTIN_DATA", "Data", "LoadedModel", "as_data", "as_model", "check_model_on_data", "clean_accuracy",
           "from_zoo", "load_data", "load_model", "load_subset"]
