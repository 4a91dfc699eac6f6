"""A data set by name or file: what the pipeline and the CLI are pointed at.

:func:`load_data`: a built-in split (``'mnist'``, ``'mnist-full'``,
``'digits'``: :mod:`rcurves.data.builtin`), a folder of original files
(``'mnist-idx:DIR'``, ``'cifar10:DIR'``, ``'cifar100:DIR'``:
:mod:`rcurves.data.readers`) or a user's ``.npz`` with arrays ``x`` and ``y``,
optionally a random subset; :func:`as_data` also takes ``Data`` or an
``(x, y)`` pair. Every mistake a user can make is a ``ValueError`` with one
clear line (the CLI prints it as ``rcurves: error: ...``).
"""
from __future__ import annotations

import os
from typing import Any, NamedTuple, Optional

import numpy as np

BUILTIN_DATA = ("mnist", "mnist-full", "digits")


class Data(NamedTuple):
    """A labelled point set: ``x (n, *input_shape)`` float32, ``y (n,)`` int64."""

    name: str
    x: np.ndarray
    y: np.ndarray


def load_data(spec: str, split: str = "test", n: Optional[int] = None, seed: int = 0) -> Data:
    """A built-in data set split or a user's ``.npz`` (arrays ``x`` and ``y``).

    With ``n``, a random subset of ``n`` points (``default_rng(seed)``, kept in
    their order; built-in splits are class-interleaved, so a prefix would be a
    stratified sample, but a user's file may be sorted).
    """
    from rcurves.data import builtin as datasets

    from rcurves.data import readers

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
    from rcurves.data.sampling import random_subset

    idx = random_subset(data.x.shape[0], n, seed)
    return Data(data.name, data.x[idx], data.y[idx])


__all__ = ["BUILTIN_DATA", "Data", "as_data", "load_data", "load_subset"]
