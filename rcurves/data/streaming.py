"""Data sets larger than memory: apply a per-point function chunk by chunk.

``map_points`` walks ``x`` (a numpy array, an ``np.load(..., mmap_mode='r')``
memory map, or an iterator of ``(x_chunk, y_chunk)`` pairs) in fixed-size
chunks, so device and host memory stay bounded by the chunk size whatever the
number of points. The last chunk is padded to the chunk size (copies of its
first point, results dropped) so one compiled program serves every chunk.
Per-point keys are ``fold_in(key, i)`` with ``i`` the point's global index, so
the answer does not depend on the chunk size.

Memory maps: the pages of a memory map that a process has touched count in
its resident set (RSS) until they are unmapped, so merely reading a 3 GB
``.npy`` through ``np.load(..., mmap_mode='r')`` would make the process 3 GB
large. :func:`iter_chunks` therefore copies each chunk of a (shared,
C-contiguous) ``np.memmap`` into a fresh array and then drops the chunk's
pages from the process with ``madvise(MADV_DONTNEED)``: the data stay in the
kernel's page cache (a later access re-reads them from there), and the
process's peak memory is bounded by the chunk size, not by the file size.
"""
from __future__ import annotations

import mmap
from typing import Any, Callable, Iterator, Optional, Tuple

import jax
import numpy as np

from attacks.checks import check_positive_int


def _release_pages(a) -> None:
    """Drop the pages behind ``a`` (a slice of a shared ``np.memmap``) from this process.

    ``madvise(MADV_DONTNEED)`` on a shared file mapping unmaps the pages; the
    next access faults them back in from the page cache, so no data are lost.
    Private (copy-on-write, ``mode='c'``) maps are left alone: there the call
    would discard the caller's in-memory changes. Anything else is a no-op.
    """
    mm = getattr(a, "_mmap", None)
    if (mm is None or getattr(a, "mode", "c") == "c" or not hasattr(mm, "madvise")
            or not hasattr(mmap, "MADV_DONTNEED") or a.nbytes == 0 or not a.flags.c_contiguous):
        return
    try:
        base = np.frombuffer(mm, np.uint8).ctypes.data
    except (TypeError, ValueError, BufferError):  # a closed or unusual map: keep its pages
        return
    lo = a.ctypes.data - base
    hi = min(lo + a.nbytes, len(mm))
    lo -= lo % mmap.PAGESIZE  # madvise wants a page-aligned start
    if 0 <= lo < hi:
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _read_rows(x, start: int, stop: int) -> np.ndarray:
    """``x[start:stop]`` as an array; for a memory map, a copy whose pages are then released."""
    part = x[start:stop]
    if getattr(part, "_mmap", None) is None:
        return np.asarray(part)
    out = np.array(part)  # a fresh buffer, freed with the chunk
    _release_pages(part)
    return out


def _iter_views(x, chunk_size: int) -> Iterator[Tuple[int, Any]]:
    """Yield ``(start, x[start:start + chunk_size])``, views, not copies (for read-only passes).

    For a memory map each view's pages are released when the consumer asks
    for the next one (or stops): a pass over the whole file keeps about one
    block resident. A view used after its release still reads the right data
    (the pages fault back in from the page cache).
    """
    for start in range(0, x.shape[0], chunk_size):
        part = x[start:start + chunk_size]
        try:
            yield start, part
        finally:
            _release_pages(part)


def iter_chunks(x, y=None, *, chunk_size: int) -> Iterator[Tuple[int, np.ndarray, Optional[np.ndarray]]]:
    """Yield ``(start, x_chunk, y_chunk)``; x may be an array, a memmap or an iterator of pairs.

    Chunks of a memory map are fresh copies, and the map's pages they came
    from are released (module docstring), so memory stays bounded by
    ``chunk_size`` whatever the file size.
    """
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if hasattr(x, "shape"):
        n = x.shape[0]
        if y is not None and len(y) != n:
            raise ValueError(f"y: expected length {n} to match x, got {len(y)}")
        for start in range(0, n, chunk_size):
            stop = min(start + chunk_size, n)
            yield start, _read_rows(x, start, stop), None if y is None else _read_rows(y, start, stop)
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
        for leaf in jax.tree_util.tree_leaves(out):
            shape = np.shape(leaf)
            if not shape or shape[0] != chunk_size:
                raise ValueError(
                    f"fn: expected every output to have one row per point (leading axis {chunk_size} "
                    f"for a chunk of {chunk_size} points), got shape {tuple(shape)}"
                )
        out = jax.tree_util.tree_map(lambda a: np.asarray(a)[:m], out)
        if on_chunk is not None:
            on_chunk(start, out)
        parts.append(out)
        del xc, yc, args, kw  # let this chunk's buffers go before the next one is read
    if not parts:
        raise ValueError("x: expected at least one point")
    return jax.tree_util.tree_map(lambda *a: np.concatenate(a, axis=0), *parts)


__all__ = ["iter_chunks", "map_points"]
