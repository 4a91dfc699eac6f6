"""Disk caches of the 002/003 experiments' expensive, shared computations.

Two computations are needed by more than one script and take minutes on
full MNIST: the 1-NN neighbours of the 10,000 test images among the 60,000
training images (``nn1_table3``, ``nn1_agreement``, ``genuine_mnist``) and
003's invariance examples with their stand-in oracle labels
(``invariance_linf``, ``invariance_robust_accuracy``). Full runs keep them
under ``<cache>/nn1`` and ``<cache>/invariance`` (default
``~/.cache/rcurves``), keyed by a digest of the data; ``--quick`` computes
them in memory.
"""
from __future__ import annotations

import numpy as np


def _digest(*arrays) -> str:
    """sha256 (first 16 hex digits) of the arrays' shapes, dtypes and bytes: a cache key for data."""
    import hashlib

    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def cached_neighbors(args, x_train: np.ndarray, y_train: np.ndarray, x: np.ndarray, p: str, tag: str,
                     chunk: int = 1000, return_seconds: bool = False):
    """``rcurves.nearest.nn1_neighbors(x_train, y_train, x, p=p)``, kept on disk and resumed by chunks.

    The 1-NN of full MNIST's 60,000 training images over its 10,000 test images
    takes ~6 min per norm on 2 cores (exact difference form; l_inf has no
    matrix-product shortcut), and three scripts need it (``nn1_table3``,
    ``nn1_agreement``, ``genuine_mnist``): the result is stored under
    ``<cache>/nn1/<tag>-<p>-<digest of the data>.npz``, ``chunk`` queries at a
    time (atomic writes), so an interrupted run resumes. ``--quick`` does not
    cache (its sets are small).

    Returns:
      :class:`rcurves.nearest.Neighbors`; with ``return_seconds``, also the
      compute time in seconds (summed over the chunks, whenever they ran).
    """
    import io
    import os
    import time

    from rcurves import zoo
    from rcurves.checkpoint import atomic_write_bytes
    from rcurves.nearest import Neighbors, nn1_neighbors

    if args.quick:
        t0 = time.perf_counter()
        nb = nn1_neighbors(x_train, y_train, x, p=p)
        return (nb, time.perf_counter() - t0) if return_seconds else nb
    folder = os.path.join(args.cache or zoo.default_cache(), "nn1")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{tag}-{p}-{_digest(x_train, y_train, x)}.npz")
    parts = {}
    if os.path.exists(path):
        with np.load(path) as z:
            parts = {k: z[k] for k in z.files}
    n = x.shape[0]
    done = int(parts["done"]) if parts else 0
    fields = ("distance", "counts", "class_distance")
    while done < n:
        t0 = time.perf_counter()
        nb = nn1_neighbors(x_train, y_train, x[done:done + chunk], p=p)
        parts["seconds"] = np.float64(float(parts.get("seconds", 0.0)) + time.perf_counter() - t0)
        for f in fields:
            parts[f] = np.concatenate([parts[f], getattr(nb, f)]) if f in parts else getattr(nb, f)
        done = min(n, done + chunk)
        parts["done"] = np.int64(done)
        buf = io.BytesIO()
        np.savez(buf, **parts)
        atomic_write_bytes(path, buf.getvalue())
        if not args.no_progress:
            print(f"1-NN ({p}) of {tag}: {done}/{n} queries", flush=True)
    nb = Neighbors(*(parts[f] for f in fields))
    return (nb, float(parts.get("seconds", float("nan")))) if return_seconds else nb


def invariance_set(args, x: np.ndarray, y: np.ndarray, x_train: np.ndarray, y_train: np.ndarray, eps: float,
                   max_shift: int) -> dict:
    """003's l_inf invariance examples of ``x`` at ``eps`` and the stand-in oracles' labels, cached on disk.

    ``rcurves.invariance.linf_invariance_examples`` (targets from ``x_train``,
    aligned by shifts of up to ``max_shift`` pixels) and three oracles of
    the examples: ``knn`` (shift-invariant 5-NN vote, >= 4 of 5, the source
    image left out: the stand-in for 003's humans), ``source`` (the source
    image's label) and ``nn1`` (plain l_2 1-NN, source left out). The 5-NN
    vote over 60,000 training images costs ~1.5 min per 1,000 examples, and
    ``invariance_linf.py`` and ``invariance_robust_accuracy.py`` use the same
    examples: full runs keep them under ``<cache>/invariance/`` (keyed by a
    digest of the data, eps and shift).

    Returns:
      ``{'x_adv', 'source', 'target', 'shift', 'residual', 'knn', 'nn1', 'source_label'}`` arrays.
    """
    import io
    import os

    from rcurves import zoo
    from rcurves.checkpoint import atomic_write_bytes
    from rcurves.invariance import knn_oracle, linf_invariance_examples

    path = None
    if not args.quick:
        folder = os.path.join(args.cache or zoo.default_cache(), "invariance")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"linf-{eps:g}-shift{max_shift}-{_digest(x, y, x_train, y_train)}.npz")
        if os.path.exists(path):
            with np.load(path) as z:
                return {k: z[k] for k in z.files}
    inv = linf_invariance_examples(x, y, x_train, y_train, eps, max_shift=max_shift)
    out = {"x_adv": inv.x_adv, "source": inv.source, "target": inv.target, "shift": inv.shift,
           "residual": inv.residual,
           "knn": knn_oracle(inv.x_adv, x_train, y_train, max_shift=max_shift, exclude=inv.source, chunk=256).label,
           "nn1": knn_oracle(inv.x_adv, x_train, y_train, k=1, agree=1.0, max_shift=0, exclude=inv.source,
                             chunk=256).label}
    out["source_label"] = out["target"].copy()
    if path is not None:
        buf = io.BytesIO()
        np.savez(buf, **out)
        atomic_write_bytes(path, buf.getvalue())
    return out
