"""Invariance-based adversarial examples in l_inf (paper 003, Section 4.1, Appendix A).

An invariance example keeps a model's prediction while the *oracle's* label
changes (003 Definition 2). 003's model-agnostic l_inf attack: for a test
image x of class y, take a training image of another class, align it to x by
label-preserving transformations, and move x toward it as far as an l_inf
budget eps allows ("interpolating with x*, so as to minimise the distance
between x and the chosen target"); the attack always uses the full budget.
Our instantiation (:func:`linf_invariance_examples`):

1. candidates: the ``candidates`` training images of other classes nearest
   to x in l_2 (003 searches an augmented training set for the nearest one; we
   restrict the search to these, a cheap pre-filter);
2. alignment: every integer shift of each candidate by up to ``max_shift``
   pixels per axis (zero fill; 003 also uses rotations, shears and resizing);
3. choice: the aligned candidate x* that the eps-box around x gets closest to,
   i.e. the smallest ``||x* - clip(x*, x - eps, x + eps)||_2`` (003 picks the
   transformed input closest to x "under the considered l_p metric"; in l_inf
   most MNIST pairs are at distance ~1, so we take the l_2 distance left
   after the budget is spent);
4. the example: ``x_adv = clip(x*, x - eps, x + eps)`` (within [0, 1]), the
   point of the box nearest to x*.

003 does not use a fixed target mapping here (it restricts targets by hand,
e.g. 1 -> 7 or 4); we allow every other class.

Human labels are not available. :func:`knn_oracle` is the stand-in used by
the experiments: a shift-invariant k-nearest-neighbour vote over the training
set that *leaves out the source image* the example was built from, accepting
a label when at least a fraction ``agree`` of the k votes agree (003 counts
an example as successful when >= 70 % of humans agree on a label different
from the original).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from attacks.checks import check_array, check_labels, check_positive_int
from attacks.precision import exact_precision


def shifts(max_shift: int) -> np.ndarray:
    """All integer shifts ``(dy, dx)`` with ``|dy|, |dx| <= max_shift``: ``((2s+1)^2, 2)``, (0, 0) first."""
    s = check_positive_int(max_shift, "max_shift", minimum=0)
    grid = [(dy, dx) for dy in range(-s, s + 1) for dx in range(-s, s + 1)]
    grid.sort(key=lambda t: (abs(t[0]) + abs(t[1]), t))
    return np.asarray(grid, dtype=np.int64)


def shift_images(x: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """Images ``x (n, H, W, C)`` moved down by ``dy`` and right by ``dx`` pixels, zero fill."""
    out = np.zeros_like(x)
    H, W = x.shape[1], x.shape[2]
    ys, yd = (slice(0, H - dy), slice(dy, H)) if dy >= 0 else (slice(-dy, H), slice(0, H + dy))
    xs, xd = (slice(0, W - dx), slice(dx, W)) if dx >= 0 else (slice(-dx, W), slice(0, W + dx))
    out[:, yd, xd] = x[:, ys, xs]
    return out


class InvarianceExamples(NamedTuple):
    """Output of :func:`linf_invariance_examples` (n test images).

    Fields: ``x_adv (n, H, W, C)`` the examples, ``||x_adv - x||_inf <= eps``;
    ``source (n,)`` index of the training image used; ``target (n,)`` its
    label; ``shift (n, 2)`` the alignment (dy, dx); ``aligned (n, H, W, C)`` the
    aligned training image x*; ``residual (n,)`` ``||x_adv - x*||_2``.
    """

    x_adv: np.ndarray
    source: np.ndarray
    target: np.ndarray
    shift: np.ndarray
    aligned: np.ndarray
    residual: np.ndarray


def _check_images(x, name):
    a = np.asarray(check_array(x, name, ndim=4))
    return a.astype(np.float32)


def _sq_dist(a: np.ndarray, b: np.ndarray, b_sq: np.ndarray) -> np.ndarray:
    """Squared l_2 distances ``(len(a), len(b))`` by the expansion, clipped at 0 (float32 screening)."""
    a_sq = (a * a).sum(1)
    return np.maximum(a_sq[:, None] + b_sq[None, :] - 2.0 * (a @ b.T), 0.0)


@exact_precision
def linf_invariance_examples(x: Any, y: Any, x_train: Any, y_train: Any, eps: float, *, max_shift: int = 2,
                             candidates: int = 10, bounds: Tuple[float, float] = (0.0, 1.0),
                             chunk: int = 64) -> InvarianceExamples:
    """003's l_inf invariance examples (module docstring, steps 1-4).

    Args:
      x: ``(n, H, W, C)`` images in ``bounds``; y: ``(n,)`` their labels.
      x_train, y_train: the training set the targets come from.
      eps: the l_inf budget (> 0).
      max_shift: largest alignment shift in pixels per axis.
      candidates: nearest other-class training images considered per x.
      bounds: the image box.
      chunk: test images per block (memory ``chunk * n_train`` floats).

    Returns:
      :class:`InvarianceExamples`.
    """
    xq = _check_images(x, "x")
    xt = _check_images(x_train, "x_train")
    if xq.shape[1:] != xt.shape[1:]:
        raise ValueError(f"x: expected images of shape {xt.shape[1:]} (as x_train), got {xq.shape[1:]}")
    yq = np.asarray(check_labels(y, xq.shape[0], "y")).astype(np.int64)
    yt = np.asarray(check_labels(y_train, xt.shape[0], "y_train")).astype(np.int64)
    eps = float(eps)
    if not np.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps: expected a finite budget > 0, got {eps}")
    candidates = check_positive_int(candidates, "candidates")
    lo, hi = bounds
    n, D = xq.shape[0], int(np.prod(xq.shape[1:]))
    tf = xt.reshape(xt.shape[0], D)
    t_sq = (tf * tf).sum(1)
    sh = shifts(max_shift)
    out = InvarianceExamples(np.empty_like(xq), np.empty(n, np.int64), np.empty(n, np.int64),
                             np.empty((n, 2), np.int64), np.empty_like(xq), np.empty(n))
    for s in range(0, n, chunk):                              # blocks of test images
        q = xq[s:s + chunk]
        m = q.shape[0]
        d2 = _sq_dist(q.reshape(m, D), tf, t_sq)
        d2[yq[s:s + chunk, None] == yt[None, :]] = np.inf     # other classes only
        k = min(candidates, int(np.isfinite(d2).sum(1).min()))
        if k == 0:
            raise ValueError("y_train: some test image has no training image of another class")
        cand = np.argpartition(d2, k - 1, axis=1)[:, :k]      # (m, k)
        imgs = xt[cand.reshape(-1)]                           # (m * k, H, W, C)
        best = np.full(m, np.inf)
        for dy, dx in sh:                                     # (2s+1)^2 alignments
            al = shift_images(imgs, int(dy), int(dx)).reshape(m, k, -1)
            box = np.clip(al, q.reshape(m, 1, D) - eps, q.reshape(m, 1, D) + eps)
            res = np.sqrt(((al - box) ** 2).sum(-1))          # (m, k)
            j = res.argmin(1)
            r = res[np.arange(m), j]
            better = r < best
            rows = np.flatnonzero(better)
            best[better] = r[better]
            out.source[s + rows] = cand[rows, j[rows]]
            out.shift[s + rows] = (dy, dx)
            out.aligned[s + rows] = al[rows, j[rows]].reshape((-1,) + xq.shape[1:])
        out.residual[s:s + m] = best
    x_adv = np.clip(np.clip(out.aligned, xq - eps, xq + eps), lo, hi).astype(np.float32)
    e32 = np.float32(eps)
    for _ in range(4):                  # float32 rounding of x -+ eps: step back an ulp until in budget
        over = np.abs(x_adv - xq) > e32
        if not over.any():
            break
        x_adv = np.where(over, np.nextafter(x_adv, xq), x_adv)
    out = out._replace(x_adv=x_adv, target=yt[out.source])
    return out


class OracleVote(NamedTuple):
    """Stand-in oracle labels: ``label (n,)`` (-1 where no label reaches the
    agreement threshold), ``votes (n, K)`` the k neighbours' labels counted."""

    label: np.ndarray
    votes: np.ndarray


@exact_precision
def knn_oracle(x: Any, x_train: Any, y_train: Any, *, k: int = 5, agree: float = 0.7, max_shift: int = 2,
               exclude: Optional[Sequence[int]] = None, n_classes: int = 10, chunk: int = 32) -> OracleVote:
    """Shift-invariant k-NN vote as a stand-in for 003's human labellers.

    The distance of x to a training image is ``min`` over shifts of x by up to
    ``max_shift`` pixels of the l_2 distance (a crude tangent distance: small
    translations do not change a digit's class). The k nearest training
    images vote; a label is returned when at least ``ceil(agree * k)`` votes
    agree (003: >= 70 % of humans), else -1. ``exclude[i]`` (a training index,
    or -1) is left out for query i: the source image an invariance example was
    built from, so the vote is not the example's own template.
    """
    xq = _check_images(x, "x")
    xt = _check_images(x_train, "x_train")
    yt = np.asarray(check_labels(y_train, xt.shape[0], "y_train")).astype(np.int64)
    k = check_positive_int(k, "k")
    if not 0.0 < agree <= 1.0:
        raise ValueError(f"agree: expected a fraction in (0, 1], got {agree}")
    n, D = xq.shape[0], int(np.prod(xq.shape[1:]))
    ex = np.full(n, -1, np.int64) if exclude is None else np.asarray(exclude, np.int64)
    if ex.shape != (n,):
        raise ValueError(f"exclude: expected shape ({n},), got {ex.shape}")
    tf = xt.reshape(xt.shape[0], D)
    t_sq = (tf * tf).sum(1)
    sh = shifts(max_shift)
    need = int(np.ceil(agree * k - 1e-9))
    labels = np.full(n, -1, np.int64)
    votes = np.zeros((n, n_classes), np.int64)
    for s in range(0, n, chunk):
        q = xq[s:s + chunk]
        m = q.shape[0]
        d2 = np.full((m, xt.shape[0]), np.inf, np.float32)
        for dy, dx in sh:
            qs = shift_images(q, int(dy), int(dx)).reshape(m, D)
            d2 = np.minimum(d2, _sq_dist(qs, tf, t_sq))
        rows = np.flatnonzero(ex[s:s + m] >= 0)
        d2[rows, ex[s:s + m][rows]] = np.inf
        nn = np.argpartition(d2, k - 1, axis=1)[:, :k]
        for c in range(n_classes):                             # ten classes
            votes[s:s + m, c] = (yt[nn] == c).sum(1)
        top = votes[s:s + m].argmax(1)
        ok = votes[s:s + m].max(1) >= need
        labels[s:s + m] = np.where(ok, top, -1)
    return OracleVote(labels, votes)


__all__ = [
    "InvarianceExamples",
    "OracleVote",
    "knn_oracle",
    "linf_invariance_examples",
    "shift_images",
    "shifts",
]
