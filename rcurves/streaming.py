"""Data sets larger than memory: apply a per-point function chunk by chunk.

``map_points`` walks ``x`` (a numpy array, an ``np.load(..., mmap_mode='r')``
memory map, or an iterator of ``(x_chunk, y_chunk)`` pairs) in fixed-size
chunks, so device and host memory stay bounded by the chunk size whatever the
number of points. The last chunk is padded to the chunk size (copies of its
first point, results dropped) so one compiled program serves every chunk.
Per-point keys are ``fold_in(key, i)`` with ``i`` the point's global index, so
the answer does not depend on the chunk size.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Optional, Tuple

import jax
import numpy as np

from attacks.checks import check_positive_int


def iter_chunks(x, y=None, *, chunk_size: int) -> Iterator[Tuple[int, np.ndarray, Optional[np.ndarray]]]:
    """Yield ``(start, x_chunk, y_chunk)``; x may be an array, a memmap or an iterator of pairs."""
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if hasattr(x, "shape"):
        n = x.shape[0]
        if y is not None and len(y) != n:
            raise ValueError(f"y: expected length {n} to match x, got {len(y)}")
        for start in range(0, n, chunk_size):
            stop = min(start + chunk_size, n)
            yield start, np.asarray(x[start:stop]), None if y is None else np.asarray(y[start:stop])
        return
    start = 0
    for item in x:
        xc, yc = item if isinstance(item, tuple) else (item, None)
        xc = np.asarray(xc)
        for s in range(0, xc.shape[0], chunk_size):
            yield start + s, xc[s:s + chunk_size], None if yc is None else np.asarray(yc[s:s + chunk_size])
        start += xc.shape[0]


def _pad(a: np.ndarray, total: int) -> np.ndarray:
    if a.shape[0] == total:
        return a
    return np.concatenate([a, np.broadcast_to(a[:1], (total - a.shape[0],) + a.shape[1:])], axis=0)


def map_points(
    fn: Callable,
    x,
    y=None,
    *,
    chunk_size: int = 4096,
    key=None,
    on_chunk: Optional[Callable[[int, Any], None]] = None,
    **kwargs,
):
    """Apply ``fn`` to every chunk of points and concatenate the results on the host.

    ``fn`` is called as ``fn(x_chunk, [y_chunk], [key=keys_chunk], **kwargs)``
    and must return an array or a pytree of arrays whose leading axis is the
    chunk's points (e.g. ``MinimalResult``). ``on_chunk(start, result)`` is
    called after each chunk (progress bars, writing to disk).

    Returns the concatenated pytree of numpy arrays.

    Example (a million rows from a memory map, bounded memory)::

        x = np.load("big.npy", mmap_mode="r")
        d = map_points(lambda xc: rcurves.linear_distance(w, b, xc, 2), x, chunk_size=8192)
    """
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    base_key = None
    if key is not None:
        base_key = key
        if hasattr(base_key, "dtype") and jax.dtypes.issubdtype(base_key.dtype, jax.dtypes.prng_key):
            base_key = jax.random.key_data(base_key)
        if getattr(base_key, "shape", None) != (2,) or base_key.dtype != np.uint32:
            raise ValueError("key: map_points takes one PRNG key; point i uses fold_in(key, i)")
    parts = []
    for start, xc, yc in iter_chunks(x, y, chunk_size=chunk_size):
        m = xc.shape[0]
        args = [_pad(xc, chunk_size)]
        if yc is not None:
            args.append(_pad(yc, chunk_size))
        kw = dict(kwargs)
        if base_key is not None:
            idx = np.arange(start, start + chunk_size, dtype=np.uint32)
            idx[m:] = start
            kw["key"] = jax.vmap(lambda i: jax.random.fold_in(base_key, i))(idx)
        out = fn(*args, **kw)
        out = jax.tree_util.tree_map(lambda a: np.asarray(a)[:m], out)
        if on_chunk is not None:
            on_chunk(start, out)
        parts.append(out)
    if not parts:
        raise ValueError("x: expected at least one point")
    return jax.tree_util.tree_map(lambda *a: np.concatenate(a, axis=0), *parts)


__all__ = ["iter_chunks", "map_points"]
