"""Readers for the data formats researchers keep on disk: IDX (MNIST, Fashion-MNIST) and CIFAR binary.

No downloads: the user points at a folder of files in the original formats.

* IDX (LeCun's MNIST format, also Fashion-MNIST, KMNIST): a big-endian header
  ``0x00 0x00 <dtype code> <ndim>`` then ``ndim`` uint32 sizes, then the
  data; ``*-images-idx3-ubyte`` (n, 28, 28) uint8 and ``*-labels-idx1-ubyte``
  (n,) uint8, optionally gzip-compressed (``.gz``). Splits: ``train-*`` and
  ``t10k-*``.
* CIFAR-10 binary (``data_batch_1.bin`` .. ``data_batch_5.bin``,
  ``test_batch.bin``): records of 1 label byte and 3,072 pixel bytes (the red,
  green and blue 32x32 planes, row-major). CIFAR-100 binary (``train.bin``,
  ``test.bin``): 2 label bytes (coarse, fine) then the same 3,072. No pickle
  is ever read.

Every reader checks sizes against the header or the record length and raises
a ``ValueError`` naming the file on a truncated or corrupt one; nothing is
returned half-loaded. :func:`load_folder` returns ``x (n, H, W, C)`` float32
in [0, 1] (pixel / 255) and ``y (n,)`` int64, in the class-interleaved order
of every built-in split (:func:`rcurves.data.sampling.interleaved_order`, seed 0).
Spellings accepted by ``load_data`` / ``evaluate`` / the CLI:
``mnist-idx:DIR``, ``cifar10:DIR``, ``cifar100:DIR`` (fine labels) and
``cifar100-coarse:DIR``.
"""
from __future__ import annotations

import gzip
import os
import struct
from typing import List, Optional, Tuple

import numpy as np

__all__ = ["FORMATS", "load_folder", "parse_spec", "read_cifar_bin", "read_idx"]

FORMATS = ("mnist-idx", "cifar10", "cifar100", "cifar100-coarse")
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
               0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
_CIFAR_PIXELS = 3 * 32 * 32


def _read_bytes(path: str) -> bytes:
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such file")
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        with open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError) as e:
        raise ValueError(f"{path}: cannot read ({type(e).__name__}: {e}; a truncated .gz?)") from None


def read_idx(path: str) -> np.ndarray:
    """One IDX file (optionally ``.gz``) as a numpy array of the header's shape and dtype.

    Raises ``ValueError`` naming the file when the magic number, the dtype
    code or the size do not match the header (truncated or extra bytes).
    """
    raw = _read_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file (bad magic number {raw[:4].hex() if raw else 'empty'})")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown IDX data type code 0x{code:02x}")
    if ndim < 1 or len(raw) < 4 + 4 * ndim:
        raise ValueError(f"{path}: truncated IDX header ({len(raw)} bytes for {ndim} dimensions)")
    shape = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    dtype = np.dtype(_IDX_DTYPES[code])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    body = raw[4 + 4 * ndim:]
    if len(body) != expected:
        what = "truncated" if len(body) < expected else "has extra bytes"
        raise ValueError(f"{path}: {what}: the header says {shape} x {dtype.itemsize} bytes = {expected}, "
                         f"the file holds {len(body)}")
    return np.frombuffer(body, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="), copy=True)


def _find(folder: str, stem: str) -> str:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    raise ValueError(f"{folder}: no {stem}[.gz] in this folder")


def _read_idx_split(folder: str, split: str) -> Tuple[np.ndarray, np.ndarray]:
    prefix = {"train": "train", "test": "t10k"}[split]
    ipath = _find(folder, f"{prefix}-images-idx3-ubyte")
    lpath = _find(folder, f"{prefix}-labels-idx1-ubyte")
    x, y = read_idx(ipath), read_idx(lpath)
    if x.ndim != 3 or x.dtype != np.uint8:
        raise ValueError(f"{ipath}: expected uint8 images of shape (n, H, W), got {x.dtype} {x.shape}")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"{lpath}: expected {x.shape[0]} labels (one per image of {os.path.basename(ipath)}), "
                         f"got shape {y.shape}")
    return x[..., None], y.astype(np.int64)


def read_cifar_bin(path: str, label_bytes: int = 1, label_index: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """One CIFAR binary file: ``x (n, 32, 32, 3)`` uint8 and ``y (n,)`` int64.

    ``label_bytes``: 1 (CIFAR-10) or 2 (CIFAR-100: coarse then fine);
    ``label_index``: which label byte to return. The file must be a whole
    number of records; else a ``ValueError`` naming it.
    """
    raw = _read_bytes(path)
    rec = label_bytes + _CIFAR_PIXELS
    if len(raw) == 0 or len(raw) % rec:
        raise ValueError(f"{path}: {len(raw)} bytes is not a whole number of {rec}-byte CIFAR records "
                         f"(truncated or not a CIFAR-{10 if label_bytes == 1 else 100} binary file)")
    a = np.frombuffer(raw, np.uint8).reshape(-1, rec)
    y = a[:, label_index].astype(np.int64)
    x = a[:, label_bytes:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    n_classes = 10 if label_bytes == 1 else (20 if label_index == 0 else 100)
    if y.max(initial=0) >= n_classes:
        raise ValueError(f"{path}: label {int(y.max())} out of range for {n_classes} classes (corrupt file?)")
    return np.ascontiguousarray(x), y


def _read_cifar_split(folder: str, fmt: str, split: str) -> Tuple[np.ndarray, np.ndarray]:
    if fmt == "cifar10":
        names = [f"data_batch_{i}.bin" for i in range(1, 6)] if split == "train" else ["test_batch.bin"]
        lb, li = 1, 0
    else:
        names = ["train.bin" if split == "train" else "test.bin"]
        lb, li = 2, (0 if fmt == "cifar100-coarse" else 1)
    parts = []
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise ValueError(f"{folder}: no {name} in this folder (the {fmt} binary version)")
        parts.append(read_cifar_bin(path, lb, li))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def parse_spec(spec: str) -> Optional[Tuple[str, str]]:
    """``'cifar10:DIR'`` -> ``('cifar10', 'DIR')``; None when ``spec`` names no reader format."""
    if not isinstance(spec, str) or ":" not in spec:
        return None
    fmt, folder = spec.split(":", 1)
    return (fmt, folder) if fmt in FORMATS else None


def load_folder(fmt: str, folder: str, split: str = "test") -> Tuple[np.ndarray, np.ndarray]:
    """A split of a data set kept in its original files.

    Args:
      fmt: one of :data:`FORMATS`.
      folder: the folder holding the files.
      split: 'train', 'test' or 'all' (train then test, interleaved together).

    Returns:
      ``x (n, H, W, C)`` float32 in [0, 1], ``y (n,)`` int64, class-interleaved.
    """
    from rcurves.data.sampling import interleaved_order

    if fmt not in FORMATS:
        raise ValueError(f"format: expected one of {FORMATS}, got {fmt!r}")
    if split not in ("train", "test", "all"):
        raise ValueError(f"split: expected one of ('train', 'test', 'all'), got {split!r}")
    if not os.path.isdir(folder):
        raise ValueError(f"{folder}: no such folder (for {fmt}:{folder})")
    read = _read_idx_split if fmt == "mnist-idx" else (lambda d, s: _read_cifar_split(d, fmt, s))
    splits: List[str] = ["train", "test"] if split == "all" else [split]
    parts = [read(folder, s) for s in splits]
    x = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    order = interleaved_order(y, 0)
    return x[order].astype(np.float32) / np.float32(255.0), y[order]
