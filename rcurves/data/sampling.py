"""Fair samples of a labelled data set: interleaved order, stratified, random and paired draws.

A claim about a model is only as good as the points it was measured on. Every
built-in split (:mod:`rcurves.data`) is served in the order of
:func:`interleaved_order`: a fixed, seeded order in which the classes take
turns in proportion to their sizes, so that **any prefix is a stratified
sample**: a prefix of ``m`` points holds ``m * n_c / n`` points of class ``c``
to within ``1/2 + K n_c / (2 n)`` (``K`` classes): within one point for
balanced classes, and within 0.89 on every prefix of full MNIST's test set
(tested for every prefix length); which points of a class come first is a
seeded random permutation.

The functions here say *how* a subset is drawn, so code that picks points can
state it in its output (:func:`describe`):

* :func:`stratified` -- ``m`` indices, each class in proportion (the interleaved
  order of the given labels, then its first ``m``).
* :func:`random_subset` -- ``m`` indices uniformly without replacement.
* :func:`paired` -- the points on which every one of several masks holds (e.g.
  correctly classified by all models compared), so that a comparison between
  models is on the same points.

All return sorted ``int64`` index arrays into the given labels (``y[idx]``),
except :func:`interleaved_order`, which returns a permutation.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from attacks.checks import check_positive_int

__all__ = ["class_counts", "describe", "interleaved_order", "paired", "random_subset", "stratified", "stratified_first"]


def _labels(y: Any, name: str = "y") -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-d array of class labels, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name}: expected integer class labels, got dtype {arr.dtype}")
    return arr


def _seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
    return int(seed)


def interleaved_order(y: Any, seed: int = 0) -> np.ndarray:
    """A fixed permutation of ``range(len(y))`` in which the classes interleave.

    Point ``r`` (0-based, in a seeded random order within its class) of class
    ``c`` (``n_c`` points) gets the key ``(r + 1/2) / n_c``; points are sorted by
    key, ties (equal keys of different classes) in a seeded random class order
    per key. Every prefix of ``m`` points then holds ``m n_c / n`` points of
    class ``c`` to within ``1/2 + K n_c / (2 n)`` (``K`` classes): a prefix
    ending at key ``t`` holds ``t n_c +- 1/2`` points of class ``c`` and so
    ``m = t n +- K/2`` points in all. With balanced classes that is one point,
    and every block of ``K`` consecutive points holds one of each class.

    Args:
      y: ``(n,)`` integer labels.
      seed: the permutations' seed (``numpy.random.default_rng``).

    Returns:
      ``(n,)`` int64 permutation.
    """
    y = _labels(y)
    rng = np.random.default_rng(_seed(seed))
    n = y.shape[0]
    keys = np.empty(n, dtype=np.float64)
    classes = np.unique(y)
    for c in classes:                                   # loop over classes, not points
        idx = np.flatnonzero(y == c)
        perm = idx[rng.permutation(idx.size)]
        keys[perm] = (np.arange(idx.size) + 0.5) / idx.size
    tie = rng.permutation(classes.size)[np.searchsorted(classes, y)] if n else np.zeros(0, int)
    return np.lexsort((tie, keys)).astype(np.int64)


def stratified_first(y: Any, m: int) -> np.ndarray:
    """The first ``m`` indices (``arange(m)``), checked against ``len(y)``: for data
    already in interleaved order (every built-in split), a stratified sample."""
    y = _labels(y)
    m = check_positive_int(m, "m")
    if m > y.shape[0]:
        raise ValueError(f"m: expected at most {y.shape[0]} (the number of points), got {m}")
    return np.arange(m, dtype=np.int64)


def stratified(y: Any, m: int, seed: int = 0, mask: Optional[Any] = None) -> np.ndarray:
    """``m`` indices with each class in proportion (to within one point), sorted.

    Among the points where ``mask`` holds (default: all), the first ``m`` of
    :func:`interleaved_order` of their labels.
    """
    y = _labels(y)
    m = check_positive_int(m, "m")
    pool = np.arange(y.shape[0]) if mask is None else np.flatnonzero(_mask(mask, y.shape[0], "mask"))
    if m > pool.size:
        raise ValueError(f"m: expected at most {pool.size} (the points available), got {m}")
    order = interleaved_order(y[pool], seed)
    return np.sort(pool[order[:m]]).astype(np.int64)


def random_subset(n: int, m: int, seed: int = 0, mask: Optional[Any] = None) -> np.ndarray:
    """``m`` of ``range(n)`` (where ``mask`` holds) uniformly without replacement, sorted."""
    n = check_positive_int(n, "n")
    m = check_positive_int(m, "m")
    pool = np.arange(n) if mask is None else np.flatnonzero(_mask(mask, n, "mask"))
    if m > pool.size:
        raise ValueError(f"m: expected at most {pool.size} (the points available), got {m}")
    rng = np.random.default_rng(_seed(seed))
    return np.sort(rng.choice(pool, size=m, replace=False)).astype(np.int64)


def paired(*masks: Any) -> np.ndarray:
    """Indices where every mask holds: the common points of a paired comparison."""
    if not masks:
        raise ValueError("masks: expected at least one boolean mask")
    n = np.asarray(masks[0]).shape[0]
    out = np.ones(n, dtype=bool)
    for i, mk in enumerate(masks):
        out &= _mask(mk, n, f"masks[{i}]")
    return np.flatnonzero(out).astype(np.int64)


def _mask(mask: Any, n: int, name: str) -> np.ndarray:
    arr = np.asarray(mask)
    if arr.dtype != bool or arr.shape != (n,):
        raise ValueError(f"{name}: expected a boolean array of shape ({n},), got {arr.dtype} {arr.shape}")
    return arr


def class_counts(y: Any, n_classes: Optional[int] = None) -> np.ndarray:
    """``bincount`` of the labels (length ``n_classes`` or max + 1)."""
    y = _labels(y)
    return np.bincount(y, minlength=n_classes or 0)


def describe(y: Any, idx: Any, how: str, n_classes: Optional[int] = None) -> Dict[str, Any]:
    """A JSON-ready statement of a sample: how it was drawn, n, and its class counts."""
    y = _labels(y)
    idx = np.asarray(idx, dtype=np.int64)
    counts = class_counts(y[idx], n_classes)
    return {"how": how, "n": int(idx.size), "class_counts": counts.tolist(),
            "text": f"{how}, n = {idx.size} (per class {min(counts) if counts.size else 0}-"
                    f"{max(counts) if counts.size else 0})"}

