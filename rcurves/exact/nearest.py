"""The 1-nearest-neighbour classifier: predictions with ties, and its exact adversarial distance.

002 Theorem 2: the 1-NN classifier of the data maximises the genuine
adversarial accuracy; 002 Table 3 reports 1-NN test accuracies as ranges
because l_inf distances tie. Two functions:

* :func:`nn1_predict` / :func:`nn1_neighbors`: the 1-NN prediction in l_2,
  l_inf (or l_1), with the classes that tie at the nearest distance. Query rows
  are processed in blocks; one jitted program per block computes the block's
  distances to all training points (``lax.scan`` over training blocks, the
  exact difference form ``|a - b|``, float32), so memory is
  ``O(block * n_train)``: linear in the number of points.
* :func:`nn1_distance`: the exact minimal adversarial distance, perturbation
  measured in l_inf, l_1 or l_2, of the **Euclidean** 1-NN classifier. The
  inputs the 1-NN labels differently from ``y`` form the union of the Voronoi
  cells of the other-class training points, and each cell is a polyhedron
  ``V_j = {z : ||z - x_j||_2 <= ||z - x_i||_2 for all i}`` = ``{z : 2 (x_i -
  x_j).z <= ||x_i||^2 - ||x_j||^2}``. The distance of x to ``V_j`` (within the
  input box) is a linear program for l_inf and l_1 (scipy's HiGHS, dual
  simplex) and a least-distance quadratic program for l_2 (Lawson & Hanson's
  LDP, solved exactly by NNLS, ``scipy.optimize.nnls``); the answer is the
  minimum over cells. See :func:`nn1_distance` for the pruning that keeps it
  exact and the handling of the boundary.
"""
from __future__ import annotations

import functools
import math
import time
from typing import Any, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
import scipy.sparse

from attacks.checks import check_array, check_bounds, check_labels, check_norm, check_positive_int
from attacks.precision import exact_precision

_ELEMENT_BUDGET = 1 << 24      # floats of one query block's distance rows (64 MB)


# ---------------------------------------------------------------------------
# validation


def _check_inputs(x_train, y_train, x, p, y=None):
    norm = check_norm(p, "p")
    xt = check_array(x_train, "x_train", min_ndim=2)
    n_t = xt.shape[0]
    yt = check_labels(y_train, n_t, "y_train")
    xq = check_array(x, "x", min_ndim=2)
    if tuple(xq.shape[1:]) != tuple(xt.shape[1:]):
        raise ValueError(f"x: expected inputs of shape {tuple(xt.shape[1:])} (as x_train), "
                         f"got {tuple(xq.shape[1:])}")
    if np.asarray(yt).min() < 0:
        raise ValueError("y_train: labels must be >= 0")
    out = [norm, xt, yt, xq]
    if y is not None:
        out.append(check_labels(y, xq.shape[0], "y"))
    return out


# ---------------------------------------------------------------------------
# nn1_predict


class Neighbors(NamedTuple):
    """The nearest training points of each query.

    Fields:
      distance: ``(n,)`` float32, distance to the nearest training point.
      counts: ``(n, K)`` int32, per class, the training points whose distance
        is within the tie tolerance of ``distance``.
      class_distance: ``(n, K)`` float32, the nearest distance per class
        (``inf`` for a class absent from the training set).
    """

    distance: np.ndarray
    counts: np.ndarray
    class_distance: np.ndarray


@functools.partial(jax.jit, static_argnames=("norm", "n_classes"))
@exact_precision
def _block_neighbors(xq, xt_blocks, onehot, valid, rtol, atol, *, norm, n_classes):
    """Neighbours of one query block.

    Args:
      xq: (bq, D); xt_blocks: (nb, bt, D); onehot: (nb * bt, K) float32 (zero
        rows for padding); valid: (nb * bt,) bool.

    Returns:
      (distance (bq,), counts (bq, K), class_distance (bq, K)).
    """
    def block_dist(_, xb):
        diff = jnp.abs(xq[:, None, :] - xb[None, :, :])               # fused into the reduce
        if norm == "linf":
            d = diff.max(-1)
        elif norm == "l2":
            d = jnp.sqrt((diff * diff).sum(-1))
        else:
            d = diff.sum(-1)
        return None, d

    _, d = jax.lax.scan(block_dist, None, xt_blocks)                 # (nb, bq, bt)
    d = jnp.transpose(d, (1, 0, 2)).reshape(xq.shape[0], -1)          # (bq, nt)
    d = jnp.where(valid[None, :], d, jnp.inf)
    dmin = d.min(axis=1)
    thr = dmin + jnp.maximum(atol, rtol * dmin)
    near = (d <= thr[:, None]).astype(jnp.float32)
    counts = jnp.round(near @ onehot).astype(jnp.int32)
    # per-class minimum, one fused masked reduction per class (no (bq, K, nt) temporary)
    cmin = jnp.stack([jnp.where(onehot[None, :, c] > 0, d, jnp.inf).min(1) for c in range(n_classes)], axis=1)
    return dmin, counts, cmin


@exact_precision
def nn1_neighbors(x_train: Any, y_train: Any, x: Any, *, p: Any, rtol: float = 1e-5, atol: float = 1e-6,
                  n_classes: Optional[int] = None, block: int = 256) -> Neighbors:
    """Nearest-training-point distance and the classes tied there, for every query.

    A training point is *at* the nearest distance ``d`` when its distance is
    ``<= d + max(atol, rtol * d)``: float32 cannot order closer pairs (l_inf
    distances of 8-bit images tie exactly in the data, but ``i/255 - j/255``
    is not exact in float32). Distances use the difference form ``|a - b|``
    (no ``|a|^2 + |b|^2 - 2ab`` cancellation).

    Args:
      x_train: ``(n_train, *shape)``; y_train: ``(n_train,)`` ints >= 0.
      x: ``(n, *shape)`` queries.
      p: 'linf' | 'l2' | 'l1' (or inf, 2, 1).
      rtol, atol: tie tolerance (see above).
      n_classes: K (default ``max(y_train) + 1``).
      block: query rows per jitted call (lowered so that a block's distance
        rows stay within 2^24 floats).

    Returns:
      :class:`Neighbors` (numpy arrays).
    """
    norm, xt, yt, xq = _check_inputs(x_train, y_train, x, p)
    block = check_positive_int(block, "block")
    if not (math.isfinite(rtol) and rtol >= 0 and math.isfinite(atol) and atol >= 0):
        raise ValueError("rtol, atol: expected finite tolerances >= 0")
    K = int(np.asarray(yt).max()) + 1 if n_classes is None else check_positive_int(n_classes, "n_classes")
    if int(np.asarray(yt).max()) >= K:
        raise ValueError(f"y_train: labels must lie in [0, {K}) (n_classes)")
    n_t, n = xt.shape[0], xq.shape[0]
    xtf = xt.reshape(n_t, -1)
    xqf = xq.reshape(n, -1)
    bt = min(512, n_t)
    nb = -(-n_t // bt)
    pad = nb * bt - n_t
    xt_blocks = jnp.pad(xtf, ((0, pad), (0, 0))).reshape(nb, bt, -1)
    valid = jnp.arange(nb * bt) < n_t
    onehot = jnp.pad(jax.nn.one_hot(yt, K, dtype=jnp.float32), ((0, pad), (0, 0)))
    bq = max(1, min(block, _ELEMENT_BUDGET // (nb * bt)))
    bq = min(bq, n)
    dist, counts, cdist = [], [], []
    for s in range(0, n, bq):                       # Python loop over query blocks only
        q = xqf[s:s + bq]
        m = q.shape[0]
        if m < bq:                                  # one shape: one compilation
            q = jnp.pad(q, ((0, bq - m), (0, 0)))
        d, c, cd = _block_neighbors(q, xt_blocks, onehot, valid, jnp.float32(rtol), jnp.float32(atol),
                                    norm=norm, n_classes=K)
        dist.append(np.asarray(d)[:m])
        counts.append(np.asarray(c)[:m])
        cdist.append(np.asarray(cd)[:m])
    return Neighbors(np.concatenate(dist), np.concatenate(counts), np.concatenate(cdist))


@exact_precision
def nn1_predict(x_train: Any, y_train: Any, x: Any, *, p: Any, rtol: float = 1e-5, atol: float = 1e-6,
                block: int = 256) -> Tuple[np.ndarray, np.ndarray]:
    """1-NN predictions and ties.

    ``pred`` is the class of the nearest training point; where several classes
    are at the nearest distance (``tie``, tolerance as in :func:`nn1_neighbors`)
    it is the class with most training points there (002 Table 3's values in
    parentheses), the smallest class index on equal counts.

    Args:
      x_train: ``(n_train, *shape)``; y_train: ``(n_train,)``; x: ``(n, *shape)``.
      p: 'linf' | 'l2' | 'l1'.

    Returns:
      ``(pred (n,) int64, tie (n,) bool)``.
    """
    nb = nn1_neighbors(x_train, y_train, x, p=p, rtol=rtol, atol=atol, block=block)
    return nb.counts.argmax(1).astype(np.int64), (nb.counts > 0).sum(1) > 1


class TieAccuracy(NamedTuple):
    """1-NN accuracy where ties make it a range (002 Table 3).

    ``lower``: tied queries counted wrong; ``upper``: counted right when the
    true class is among the tied classes; ``majority_lower`` /
    ``majority_upper``: the majority vote among the tied training points,
    where a tie of the vote counts wrong / right if the true class is in it;
    ``ties``: fraction of queries with a tie.
    """

    lower: float
    upper: float
    majority_lower: float
    majority_upper: float
    ties: float


def tie_accuracy(neighbors: Neighbors, y: Any) -> TieAccuracy:
    """The accuracy range of :class:`TieAccuracy` from :func:`nn1_neighbors` output."""
    c = np.asarray(neighbors.counts)
    y = np.asarray(y)
    if y.shape != (c.shape[0],):
        raise ValueError(f"y: expected shape ({c.shape[0]},), got {y.shape}")
    present = c > 0
    tie = present.sum(1) > 1
    rows = np.arange(y.size)
    y_in = present[rows, y]
    clean = ~tie & y_in
    top = c.max(1, keepdims=True)
    winners = c == top
    vote_tie = winners.sum(1) > 1
    y_wins = winners[rows, y]
    return TieAccuracy(float(clean.mean()), float((clean | (tie & y_in)).mean()),
                       float((y_wins & ~vote_tie).mean()), float(y_wins.mean()), float(tie.mean()))


# ---------------------------------------------------------------------------
# nn1_distance


class NN1Distance(NamedTuple):
    """Exact minimal adversarial perturbations of the Euclidean 1-NN classifier.

    Fields:
      distance: ``(n,)`` float64, ``inf_z { ||z - x||_p : 1-NN(z) != y }`` over
        the strictly adversarial z (another class strictly nearest), within
        ``bounds``: exact (to the LP/QP tolerance, ~1e-9); 0 where x is already
        misclassified or on a tie with another class; inf where no input in
        the box is adversarial (no other-class training point).
      x_boundary: ``(n, *shape)`` float64, a point attaining ``distance``: it
        lies in the closed cell of ``cell``, on a bisector with a ``y``-class
        point (an exact tie of the 1-NN), so it is the limit of strictly
        adversarial points, not one itself.
      x_adv: ``(n, *shape)`` float64, strictly adversarial:
        ``x_boundary + tau (x_cell - x_boundary)`` with the smallest ``tau`` of
        ``1e-7 * 2^k`` that makes the nearest other-class training point closer
        than every ``y``-class point by a factor ``1 + 1e-4`` in squared l_2
        distance (so :func:`nn1_predict` with its default tolerance sees no
        tie). The open segment from a point of the closed convex cell to its
        interior point ``x_cell`` lies inside the cell, so this always works.
      adv_distance: ``(n,)`` float64, ``||x_adv - x||_p`` (>= ``distance``, by
        at most ``tau (||x_cell - x||_p - distance)``).
      success: ``(n,)`` bool, ``x_adv`` passed the float64 re-check.
      cell: ``(n,)`` int64, index of the training point whose cell attains the
        distance (-1 where none).
      cells_solved: ``(n,)`` programs solved to optimality or pruned mid-way;
        ``solves``: ``(n,)`` LP/QP calls (constraint generation rounds).
      seconds: ``(n,)`` wall time per point.
    """

    distance: np.ndarray
    x_boundary: np.ndarray
    x_adv: np.ndarray
    adv_distance: np.ndarray
    success: np.ndarray
    cell: np.ndarray
    cells_solved: np.ndarray
    solves: np.ndarray
    seconds: np.ndarray


_NUDGE_MARGIN = 1e-4
_VIOLATION_TOL = 1e-9


def _pnorm(v: np.ndarray, norm: str) -> np.ndarray:
    a = np.abs(v)
    if norm == "linf":
        return a.max(-1)
    if norm == "l1":
        return a.sum(-1)
    return np.sqrt((a * a).sum(-1))


def _dual(norm: str) -> str:
    return {"linf": "l1", "l1": "linf", "l2": "l2"}[norm]


class _Cell:
    """Distance from x to the Voronoi cell of training point j (one query).

    ``solve(active, cutoff)`` runs constraint generation: the program with the
    bisectors of ``active`` is solved, every bisector is checked at its
    minimiser, the most violated are added, and so on until none is violated
    (then the minimiser is feasible for the full cell and optimal), or until
    the relaxed optimum is >= ``cutoff`` (a relaxation's optimum is a lower
    bound on the cell's distance, so the cell cannot beat the best: pruned).
    Variables are ``delta = z - x``; bisector i reads
    ``2 (x_i - x_j) . delta <= D2_i - D2_j`` with ``D2 = ||x_. - x||_2^2``.
    """

    def __init__(self, xt, d2, j, x, norm, lo, hi):
        self.xt, self.d2, self.j, self.x, self.norm = xt, d2, j, x, norm
        self.lo, self.hi = lo, hi
        self.solves = 0

    def _rows(self, idx):
        a = 2.0 * (self.xt[idx] - self.xt[self.j])
        b = self.d2[idx] - self.d2[self.j]
        return a, b

    def _program(self, a, b):
        """min ||delta||_p s.t. a delta <= b, lo <= x + delta <= hi. Returns (value, delta)."""
        self.solves += 1
        D = self.x.size
        lo = None if self.lo is None else self.lo - self.x
        hi = None if self.hi is None else self.hi - self.x
        if self.norm == "l2":
            return _ldp(a, b, lo, hi)
        opts = dict(primal_feasibility_tolerance=1e-10, dual_feasibility_tolerance=1e-10, presolve=True)
        if self.norm == "linf":
            # variables (delta, t): min t, |delta_k| <= t
            c = np.zeros(D + 1)
            c[-1] = 1.0
            eye = scipy.sparse.identity(D, format="csr")
            ones = scipy.sparse.csr_matrix(np.ones((D, 1)))
            box = scipy.sparse.vstack([scipy.sparse.hstack([eye, -ones]), scipy.sparse.hstack([-eye, -ones])])
            A = scipy.sparse.vstack([box, scipy.sparse.hstack([scipy.sparse.csr_matrix(a),
                                                               scipy.sparse.csr_matrix((a.shape[0], 1))])])
            rhs = np.concatenate([np.zeros(2 * D), b])
            bounds = [(None if lo is None else lo[k], None if hi is None else hi[k]) for k in range(D)]
            bounds.append((0, None))
            r = scipy.optimize.linprog(c, A_ub=A.tocsr(), b_ub=rhs, bounds=bounds, method="highs-ds",
                                       options=opts)
            if r.status != 0:
                raise RuntimeError(f"nn1_distance: HiGHS failed on cell {self.j}: {r.message}")
            return float(r.x[-1]), r.x[:D]
        # l1: delta = u - v, u, v >= 0, min sum(u + v)
        c = np.ones(2 * D)
        A = np.hstack([a, -a])
        ub_u = [None] * D if hi is None else list(np.maximum(hi, 0.0))
        ub_v = [None] * D if lo is None else list(np.maximum(-lo, 0.0))
        bounds = [(0, ub_u[k]) for k in range(D)] + [(0, ub_v[k]) for k in range(D)]
        r = scipy.optimize.linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs-ds", options=opts)
        if r.status != 0:
            raise RuntimeError(f"nn1_distance: HiGHS failed on cell {self.j}: {r.message}")
        delta = r.x[:D] - r.x[D:]
        return float(np.abs(delta).sum()), delta

    def solve(self, active, cutoff, add=16):
        active = np.setdiff1d(np.asarray(active), [self.j])
        all_idx = np.delete(np.arange(self.xt.shape[0]), self.j)
        A_all, b_all = self._rows(all_idx)
        scale = 1.0 + np.abs(b_all)
        while True:
            a, b = self._rows(active)
            val, delta = self._program(a, b)
            if val >= cutoff:
                return val, None                      # pruned: cannot beat the best
            viol = (A_all @ delta - b_all) / scale
            bad = viol > _VIOLATION_TOL
            if not bad.any():
                return val, delta
            worst = all_idx[bad][np.argsort(-viol[bad])[:add]]
            active = np.union1d(active, worst)


def _ldp(a, b, lo, hi):
    """Exact ``min ||delta||_2 s.t. a delta <= b, lo <= delta <= hi`` (Lawson & Hanson's LDP).

    With ``G delta >= h`` (G = -a, h = -b, plus the box rows), the NNLS problem
    ``min_{u >= 0} ||E u - f||``, ``E = [G^T; h^T]``, ``f = e_{D+1}``, has
    residual ``r = E u - f``; if ``r != 0`` the minimiser is
    ``delta = -r[:D] / r[D]`` (Lawson & Hanson 1974, Ch. 23), else infeasible.
    """
    D = a.shape[1]
    G, h = [-a], [-b]
    if lo is not None:
        G.append(np.eye(D))
        h.append(lo)
        G.append(-np.eye(D))
        h.append(-hi)
    G = np.vstack(G)
    h = np.concatenate(h)
    E = np.vstack([G.T, h[None, :]])
    f = np.zeros(D + 1)
    f[-1] = 1.0
    u, _ = scipy.optimize.nnls(E, f, maxiter=50 * E.shape[1])
    r = E @ u - f
    if abs(r[-1]) < 1e-14:
        raise RuntimeError("nn1_distance: the cell is empty inside the bounds (LDP infeasible)")
    delta = -r[:D] / r[-1]
    return float(np.sqrt(delta @ delta)), delta


def _strict_point(xt, yt, y, z, j):
    """``z + tau (x_j - z)`` strictly adversarial (see :class:`NN1Distance`): (point, tau) or (None, None)."""
    same = yt == y
    if not same.any():
        return z.copy(), 0.0

    def strict(zt):
        d2 = ((xt - zt) ** 2).sum(1)
        return d2[same].min() > (1.0 + _NUDGE_MARGIN) * d2[~same].min()

    tau = 0.0
    while tau < 1.0:                                      # at most ~24 doublings
        zt = z + tau * (xt[j] - z)
        if strict(zt):
            return zt, tau
        tau = 1e-7 if tau == 0.0 else 2.0 * tau
    zt = xt[j].astype(np.float64)
    return (zt, 1.0) if strict(zt) else (None, None)


@exact_precision
def nn1_distance(x_train: Any, y_train: Any, x: Any, y: Any, *, p: Any = "linf",
                 bounds: Optional[Tuple[float, float]] = (0.0, 1.0), neighbors: int = 8,
                 pruning: bool = True) -> np.ndarray:
    """``(n,)`` exact minimal adversarial distances of the Euclidean 1-NN classifier (DESIGN.md's
    signature): ``nn1_distance_result(...).distance``; see :func:`nn1_distance_result` for the
    attaining points, the strictly adversarial ``x_adv`` and the cost per point."""
    return nn1_distance_result(x_train, y_train, x, y, p=p, bounds=bounds, neighbors=neighbors,
                               pruning=pruning).distance


@exact_precision
def nn1_distance_result(x_train: Any, y_train: Any, x: Any, y: Any, *, p: Any = "linf",
                        bounds: Optional[Tuple[float, float]] = (0.0, 1.0), neighbors: int = 8,
                        pruning: bool = True) -> NN1Distance:
    """Exact minimal adversarial distance of the Euclidean 1-NN classifier, in l_p.

    The 1-NN (l_2 metric, the classifier of 002 Theorem 2) labels z with the
    class of its nearest training point. The inputs it labels differently from
    ``y`` are the union of the closed Voronoi cells ``V_j`` of the training
    points with ``y_j != y`` (up to the cell boundaries shared with ``y``-class
    cells, the ties), so

        d_p(x) = min_{j : y_j != y} min { ||z - x||_p : z in V_j, lo <= z <= hi },

    an LP per cell for l_inf and l_1, a QP for l_2 (module docstring). The
    minimum over the closed cells is the infimum over the strictly adversarial
    points (each is a limit of interior points), attained by ``x_boundary``.

    Exact pruning: every cell lies in each of its bisector half-spaces
    ``H_ji = {z : ||z - x_j||_2 <= ||z - x_i||_2}``, so
    ``d_p(x, V_j) >= max_i d_p(x, H_ji) = max_i max(0, D2_j - D2_i) /
    (2 ||x_i - x_j||_q)`` (q the dual norm, ``D2 = ||. - x||_2^2``); the max runs
    over the ``neighbors`` nearest training points i of x. Cells are solved in
    increasing order of this bound and the search stops when the next bound is
    >= the best distance found; inside a cell, constraint generation stops as
    soon as the relaxed optimum (itself a lower bound) reaches the best. Both
    only skip cells that cannot contain a closer point, so the result is the
    unpruned minimum (``pruning=False`` solves every cell, for tests).

    Cost per point: one pass over the training set for ``D2`` and
    ``neighbors`` passes for the bounds (numpy, float64), then one LP/QP per
    constraint-generation round of each cell not pruned (``cells_solved``,
    ``solves`` and ``seconds`` report it per point).

    Args:
      x_train: ``(n_train, *shape)``; y_train: ``(n_train,)``.
      x: ``(n, *shape)``; y: ``(n,)`` the labels the distance is measured for.
      p: the perturbation norm: 'linf' (default), 'l1' or 'l2'.
      bounds: input box ``(lo, hi)`` for the perturbed point, or None.
      neighbors: training points used for the lower bounds (>= 1).
      pruning: False solves every other-class cell to optimality.

    Returns:
      :class:`NN1Distance`.
    """
    norm, xt_j, yt_j, xq_j, yq_j = _check_inputs(x_train, y_train, x, p, y)
    bounds = check_bounds(bounds, xq_j)
    neighbors = check_positive_int(neighbors, "neighbors")
    shape = tuple(xq_j.shape[1:])
    xt = np.asarray(x_train, dtype=np.float64).reshape(xt_j.shape[0], -1)
    yt = np.asarray(yt_j).astype(np.int64)
    xq = np.asarray(x, dtype=np.float64).reshape(xq_j.shape[0], -1)
    yq = np.asarray(yq_j).astype(np.int64)
    n, D = xq.shape
    lo = None if bounds is None else np.full(D, bounds[0])
    hi = None if bounds is None else np.full(D, bounds[1])
    out_d = np.full(n, np.inf)
    out_zb = xq.copy()
    out_za = xq.copy()
    out_ad = np.full(n, np.inf)
    out_ok = np.zeros(n, bool)
    out_cell = np.full(n, -1, np.int64)
    out_cells = np.zeros(n, np.int64)
    out_solves = np.zeros(n, np.int64)
    out_sec = np.zeros(n)
    dual = _dual(norm)
    for q in range(n):                                    # points are independent LP families
        t0 = time.perf_counter()
        xv, yv = xq[q], yq[q]
        d2 = ((xt - xv) ** 2).sum(1)
        other = np.flatnonzero(yt != yv)
        same = yt == yv
        if other.size == 0:
            out_sec[q] = time.perf_counter() - t0
            continue
        j_near = other[np.argmin(d2[other])]
        if not same.any() or d2[j_near] <= d2[same].min():
            best, best_delta, best_j = 0.0, np.zeros(D), j_near       # already misclassified or tied
        else:
            order_nb = np.argsort(d2)[:neighbors]
            lb = np.zeros(other.size)
            if pruning:
                for i in order_nb:                        # `neighbors` passes over the cells
                    den = 2.0 * _pnorm(xt[other] - xt[i], dual)
                    num = d2[other] - d2[i]
                    with np.errstate(divide="ignore", invalid="ignore"):
                        bound = np.where((den > 0) & (num > 0), num / np.where(den > 0, den, 1.0), 0.0)
                    bound[other == i] = 0.0
                    lb = np.maximum(lb, bound)
            order = np.argsort(lb, kind="stable")
            best, best_delta, best_j = np.inf, None, -1
            for idx in order:                             # cells in increasing lower bound
                if pruning and lb[idx] >= best:
                    break
                j = other[idx]
                cell = _Cell(xt, d2, j, xv, norm, lo, hi)
                active = np.union1d(order_nb, np.argsort(((xt - xt[j]) ** 2).sum(1))[:neighbors + 1])
                val, delta = cell.solve(active, best if pruning else np.inf)
                out_cells[q] += 1
                out_solves[q] += cell.solves
                if delta is not None and val < best:
                    best, best_delta, best_j = val, delta, j
        z = xv + best_delta
        if lo is not None:
            z = np.clip(z, lo, hi)                        # LP bounds hold to 1e-10; make them exact
        zs, _ = _strict_point(xt, yt, yv, z, best_j)
        out_d[q] = best
        out_zb[q] = z
        out_cell[q] = best_j
        if zs is not None:
            out_za[q] = zs
            out_ad[q] = _pnorm(zs - xv, norm)
            out_ok[q] = True
        out_sec[q] = time.perf_counter() - t0
    return NN1Distance(out_d, out_zb.reshape((n,) + shape), out_za.reshape((n,) + shape), out_ad, out_ok,
                       out_cell, out_cells, out_solves, out_sec)


__all__ = [
    "NN1Distance",
    "Neighbors",
    "TieAccuracy",
    "nn1_distance",
    "nn1_distance_result",
    "nn1_neighbors",
    "nn1_predict",
    "tie_accuracy",
]
