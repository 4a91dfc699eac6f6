"""Inter-class distances: how far each point is from the nearest other-class point.

000 Section 3.3 (Table 2, Figure 5): the distance from a sample to the nearest
sample of another class bounds the perturbation size at which *any* classifier
must trade accuracy for robustness; its distribution gives a data-dependent
scale for robustness thresholds. 003 Section 3 uses the same nearest
other-class example to build invariance adversarial examples.

The n x n distance matrix is never formed: rows are processed in blocks of
``block`` points (a Python loop over row blocks only), and inside one jitted
program a ``lax.scan`` runs over column blocks keeping a running minimum; the
``(block, block)`` pair distances are accumulated by a second ``lax.scan`` over
chunks of features, so the largest temporary is ``block x block x 16`` floats.
All norms use the exact difference form ``|a_i - b_i|`` (no ``|a|^2 + |b|^2 -
2ab`` expansion, so no cancellation for near-duplicates), in float32.
"""
from __future__ import annotations

import functools
from typing import Any, Dict, NamedTuple, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks.checks import check_array, check_labels, check_norm, check_positive_int
from attacks.precision import exact_precision

_FEATURE_CHUNK = 16


@functools.partial(jax.jit, static_argnames=("norm",))
@exact_precision
def _row_block_min(xr, yr, xc, yc, vc, *, norm):
    """Min over valid other-class columns of the ``norm`` distance, for one row block.

    Args:
      xr: (b, F, fc) row block, features split into F chunks of fc.
      yr: (b,) labels of the rows.
      xc: (nb, c, F, fc) all column blocks; yc, vc: (nb, c) labels and validity.

    Returns:
      (b,) float32 minimum distance (inf where no other-class column exists).
    """
    def pair_block(xcb):
        # accumulate over feature chunks: carry (b, c)
        def feat_step(acc, chunks):
            a, c = chunks                                   # (b, fc), (c, fc)
            diff = jnp.abs(a[:, None, :] - c[None, :, :])   # (b, c, fc)
            if norm == "linf":
                return jnp.maximum(acc, diff.max(-1)), None
            if norm == "l2":
                return acc + (diff * diff).sum(-1), None
            return acc + diff.sum(-1), None
        acc0 = jnp.zeros((xr.shape[0], xcb.shape[0]), jnp.float32)
        acc, _ = jax.lax.scan(feat_step, acc0,
                              (jnp.swapaxes(xr, 0, 1), jnp.swapaxes(xcb, 0, 1)))
        return jnp.sqrt(acc) if norm == "l2" else acc

    def col_step(best, cols):
        xcb, ycb, vcb = cols
        dist = pair_block(xcb)
        other = (yr[:, None] != ycb[None, :]) & vcb[None, :]
        dist = jnp.where(other, dist, jnp.inf)
        return jnp.minimum(best, dist.min(axis=1)), None

    best0 = jnp.full((xr.shape[0],), jnp.inf, jnp.float32)
    best, _ = jax.lax.scan(col_step, best0, (xc, yc, vc))
    return best


@exact_precision
def interclass_distances(x: Any, y: Any, p: Any, *, block: int = 1024) -> np.ndarray:
    """Distance of every point to the nearest point of another class.

    ``d_i = min { ||x_i - x_j||_p : y_j != y_i }`` (000 Section 3.3), computed
    blockwise in bounded memory (see the module docstring). Exact duplicates
    with different labels give 0; use ``deduplicate`` first to drop them.

    Args:
      x: (n, *shape) floats; flattened to (n, D).
      y: (n,) integer labels.
      p: 1, 2, inf (or 'l1', 'l2', 'linf').
      block: points per row/column block (>= 1); any value works, it need not
        divide n. Memory ~ block^2 * 16 floats.

    Returns:
      (n,) float32 numpy array; ``inf`` for points with no other-class point.
    """
    norm = check_norm(p, "p")
    block = check_positive_int(block, "block")
    xa = check_array(x, "x", min_ndim=1)
    n = xa.shape[0]
    ya = check_labels(y, n, "y")
    xf = xa.reshape(n, -1)
    dim = xf.shape[1]
    fc = min(_FEATURE_CHUNK, dim)
    n_feat = -(-dim // fc)
    b = min(block, n)
    nb = -(-n // b)
    pad_n, pad_d = nb * b - n, n_feat * fc - dim
    # zero-padded features add 0 to every norm; padded points are invalid columns
    xp = jnp.pad(xf, ((0, pad_n), (0, pad_d))).reshape(nb, b, n_feat, fc)
    yp = jnp.pad(ya, (0, pad_n))
    valid = jnp.arange(nb * b) < n
    yc, vc = yp.reshape(nb, b), valid.reshape(nb, b)
    out = [np.asarray(_row_block_min(xp[i], yc[i], xp, yc, vc, norm=norm))
           for i in range(nb)]                  # Python loop over row blocks only
    return np.concatenate(out)[:n].astype(np.float32)


def deduplicate(x: Any, y: Any) -> Tuple[np.ndarray, np.ndarray, int]:
    """Drop exact duplicate inputs (000 Table 2: "duplicates ... removed").

    An input that occurs with more than one label is removed entirely (it
    would give an inter-class distance of 0); an input repeated with one label
    is kept once (first occurrence). Order is preserved.

    Returns:
      (x_kept, y_kept, n_removed).
    """
    xa = np.asarray(x)
    ya = np.asarray(y)
    n = xa.shape[0]
    flat = np.ascontiguousarray(xa.reshape(n, -1))
    rows = flat.view(np.dtype((np.void, flat.dtype.itemsize * flat.shape[1]))).ravel()
    _, first, inv = np.unique(rows, return_index=True, return_inverse=True)
    inv = inv.ravel()
    # groups of identical inputs with more than one distinct label
    n_groups = first.shape[0]
    lab_min = np.full(n_groups, np.iinfo(np.int64).max)
    lab_max = np.full(n_groups, np.iinfo(np.int64).min)
    np.minimum.at(lab_min, inv, ya.astype(np.int64))
    np.maximum.at(lab_max, inv, ya.astype(np.int64))
    conflict = lab_min != lab_max
    keep = np.zeros(n, dtype=bool)
    keep[first[~conflict]] = True
    return xa[keep], ya[keep], int(n - keep.sum())


class InterclassSummary(NamedTuple):
    """One norm's inter-class distances of a data set (a Table 2 entry).

    Fields: norm ('linf' | 'l2' | 'l1'); samples, classes, dimensionality
    (input shape) after deduplication; duplicates_removed; smallest, largest
    (over points with a finite distance); distances (samples,) float32.
    """
    norm: str
    samples: int
    classes: int
    dimensionality: Tuple[int, ...]
    duplicates_removed: int
    smallest: float
    largest: float
    distances: np.ndarray


@exact_precision
def interclass_summary(x: Any, y: Any, p: Any, *, block: int = 1024,
                       remove_duplicates: bool = True) -> InterclassSummary:
    """Smallest and largest inter-class distance of a data set in one norm.

    Exact duplicate inputs are removed first (``deduplicate``), so distance-0
    pairs of identical inputs with different labels are ignored, as in 000
    Table 2 ("duplicates and corrupted data points have been removed").
    """
    norm = check_norm(p, "p")
    xa = check_array(x, "x", min_ndim=1)
    check_labels(y, xa.shape[0], "y")
    xn, yn = np.asarray(xa), np.asarray(y)
    removed = 0
    if remove_duplicates:
        xn, yn, removed = deduplicate(xn, yn)
        if xn.shape[0] == 0:
            raise ValueError("x: no points left after removing conflicting duplicates")
    dist = interclass_distances(xn, yn, norm, block=block)
    finite = dist[np.isfinite(dist)]
    smallest = float(finite.min()) if finite.size else float("inf")
    largest = float(finite.max()) if finite.size else float("inf")
    return InterclassSummary(norm, int(xn.shape[0]), int(np.unique(yn).size),
                             tuple(int(s) for s in xn.shape[1:]), removed,
                             smallest, largest, dist)


@exact_precision
def interclass_table(x: Any, y: Any, norms: Sequence[Any] = ("linf", "l2", "l1"), *,
                     block: int = 1024) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """A Table-2 row (000) for several norms, plus the distances per norm.

    Returns:
      (row, distances): row is JSON-ready -- {"samples", "classes",
      "dimensionality", "duplicates_removed", "smallest": {norm: v},
      "largest": {norm: v}}; distances maps norm -> (samples,) float32.
    """
    canon = [check_norm(p, "norms") for p in norms]
    if not canon:
        raise ValueError("norms: expected at least one norm")
    summaries = [interclass_summary(x, y, p, block=block) for p in canon]
    s0 = summaries[0]
    row = {
        "samples": s0.samples, "classes": s0.classes,
        "dimensionality": list(s0.dimensionality),
        "duplicates_removed": s0.duplicates_removed,
        "smallest": {s.norm: s.smallest for s in summaries},
        "largest": {s.norm: s.largest for s in summaries},
    }
    return row, {s.norm: s.distances for s in summaries}


__all__ = [
    "InterclassSummary",
    "deduplicate",
    "interclass_distances",
    "interclass_summary",
    "interclass_table",
]
