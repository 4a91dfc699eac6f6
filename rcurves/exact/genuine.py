"""Standard and genuine adversarial accuracy (paper 002), exact where the data are known.

002 compares two measures of robustness at a perturbation size eps:

* **standard adversarial accuracy** (002 Definition 2, "by maximum perturbation
  norm"): ``a_std(eps) = E_x 1[f(x') = c_x for every x' with ||x' - x|| <= eps]``
  (the worst case x* of the loss over the closed eps-ball). On finite data it
  is the robust accuracy ``P(d(x) > eps)`` of the minimal adversarial distances
  (:func:`rcurves.robust_accuracy`).
* **genuine adversarial accuracy** (002 Definition 3, "by exact perturbation
  norm"): a perturbed point x' counts only for the data point it is *uniquely
  nearest* to, and only at the radius ``eps = dist(x', closure X)``: x' must lie
  outside the previously allowed region ``X_eps = {x' : dist(x', cl X) < eps}``
  and off the Voronoi boundary ``VB(X)`` (points with two nearest points of
  ``cl X``). ``S_exact(eps)`` is the set of data points that are the nearest
  point of some such x' at distance exactly eps;
  ``a_gen(eps) = E_{x in S_exact(eps)} 1[f(x*) = c_x]`` with x* the worst such
  x' of x, and ``a_gen(0)`` is the clean accuracy. Each x' in R^d is used at
  most once (002 Theorem 1), and the 1-NN classifier of the data gets
  ``a_gen = 1`` at every eps (002 Theorem 2).

Exact 1-D computation (002 Section 1.2.1, Figures 4 and 6). Data are closed
intervals with known class and probability mass (uniform density inside), a
classifier is piecewise constant (:class:`Piecewise1D`). ``a_std`` is interval
arithmetic: a point x of class c is robust iff ``[x - eps, x + eps]`` lies in
one run ``[l, r)`` of label c, i.e. ``x in [l + eps, r - eps)``, so its value is
a sum of interval-overlap lengths, piecewise linear in eps (its area, the ARA of
Woods et al. that 002 quotes, is integrated exactly). For ``a_gen`` with
``eps > 0`` only the endpoints of the connected components of ``cl X`` can be
in ``S_exact(eps)`` (an interior point x has the data point x +- eps/2 closer
than eps to x +- eps); an endpoint e of a component, with x' = e - eps (left
end) or e + eps (right end), is in it iff every *other* component is farther
than eps from x' (strictly: equality puts x' on VB).

Reading of the expectation over ``S_exact(eps)`` (002's Appendix A, which gives
the calculation, is not in our copy): ``S_exact(eps)`` is a null set of the data
density for eps > 0, so the expectation is over its points with equal weights,
the limit of 002's finite-sample definition (a finite sample of the intervals
has exactly the sample extremes in ``S_exact(eps)`` as n grows, each counted
once). The data set is the closure ``cl X`` (002 uses ``cl X`` for ``X_eps``; with
half-open intervals the right ends -1 and 2 of the toy data would drop out).
Either choice gives f3 = 1 and the same ranking of f1, f2, f3.

The sunset data set (002 Section 1.3.1): :func:`sunset_genuine_accuracy` does
the same in 2-D, l_2, with deterministic quadrature on the circle and the
segment (data points on smooth curves: the candidates x' are x +- eps n(x) for
the unit normal n(x); endpoints of the segment are a null set).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, NamedTuple, Tuple

import numpy as np

from attacks.checks import check_positive_float, check_positive_int


class IntervalData(NamedTuple):
    """A 1-D data distribution: closed intervals, each with a class and a mass.

    Fields (all ``(m,)``): ``lo <= hi`` the interval ends, ``label`` its class
    (int), ``mass`` its probability (uniform density inside; sums to 1). A
    zero-length interval (``lo == hi``) is a single point carrying its mass.
    """

    lo: np.ndarray
    hi: np.ndarray
    label: np.ndarray
    mass: np.ndarray


class Piecewise1D(NamedTuple):
    """A piecewise-constant 1-D classifier, right-continuous.

    ``breaks (b,)`` strictly increasing, ``labels (b + 1,)``: label ``labels[0]``
    on ``(-inf, breaks[0])``, ``labels[i]`` on ``[breaks[i-1], breaks[i])``, the
    last on ``[breaks[-1], inf)``. So ``step(x) = 1 if x >= 0 else -1`` of 002
    is ``Piecewise1D([0.], [-1, 1])`` (labels here are class indices).
    """

    breaks: np.ndarray
    labels: np.ndarray


# ---------------------------------------------------------------------------
# construction and validation


def interval_data(lo: Any, hi: Any, label: Any, mass: Any = None) -> IntervalData:
    """Validated :class:`IntervalData` (float64 ends, int64 labels, masses summing to 1).

    ``mass=None`` gives every interval equal mass. Raises ``ValueError`` for
    non-finite ends, ``lo > hi``, negative or all-zero masses, or intervals of
    different classes whose closures meet (002's exclusive class assumption).
    """
    lo = np.atleast_1d(np.asarray(lo, dtype=np.float64))
    hi = np.atleast_1d(np.asarray(hi, dtype=np.float64))
    label = np.atleast_1d(np.asarray(label))
    if lo.ndim != 1 or lo.shape != hi.shape or lo.shape != label.shape or lo.size == 0:
        raise ValueError(f"lo, hi, label: expected equal non-empty 1-D shapes, got {lo.shape}, {hi.shape}, "
                         f"{label.shape}")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ValueError("lo, hi: expected finite interval ends")
    if np.any(lo > hi):
        raise ValueError("lo, hi: expected lo <= hi for every interval")
    if not np.issubdtype(label.dtype, np.integer):
        raise ValueError(f"label: expected integer classes, got dtype {label.dtype}")
    if mass is None:
        mass = np.full(lo.shape, 1.0 / lo.size)
    mass = np.atleast_1d(np.asarray(mass, dtype=np.float64))
    if mass.shape != lo.shape or not np.all(np.isfinite(mass)) or np.any(mass < 0) or mass.sum() <= 0:
        raise ValueError("mass: expected non-negative finite masses, one per interval, not all zero")
    data = IntervalData(lo, hi, label.astype(np.int64), mass / mass.sum())
    _components(data)                       # raises on touching classes
    return data


def piecewise(breaks: Any, labels: Any) -> Piecewise1D:
    """Validated :class:`Piecewise1D` (``len(labels) == len(breaks) + 1``, breaks increasing)."""
    b = np.atleast_1d(np.asarray(breaks, dtype=np.float64)) if np.size(breaks) else np.zeros(0)
    lab = np.atleast_1d(np.asarray(labels)).astype(np.int64)
    if b.ndim != 1 or lab.ndim != 1 or lab.size != b.size + 1:
        raise ValueError(f"labels: expected len(breaks) + 1 = {b.size + 1} labels, got {lab.size}")
    if not np.all(np.isfinite(b)) or np.any(np.diff(b) <= 0):
        raise ValueError("breaks: expected finite, strictly increasing break points")
    return Piecewise1D(b, lab)


def piecewise_predict(clf: Piecewise1D, x: Any) -> np.ndarray:
    """Labels of ``clf`` at points ``x`` (any shape), right-continuous at breaks."""
    x = np.asarray(x, dtype=np.float64)
    return clf.labels[np.searchsorted(clf.breaks, x, side="right")]


def _runs(clf: Piecewise1D) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximal runs ``[l, r)`` of one label (adjacent equal labels merged)."""
    edges = np.concatenate([[-np.inf], clf.breaks, [np.inf]])
    keep = np.concatenate([[True], clf.labels[1:] != clf.labels[:-1]])
    starts = np.flatnonzero(keep)
    ends = np.concatenate([starts[1:], [clf.labels.size]])
    return edges[starts], edges[ends], clf.labels[starts]


def _components(data: IntervalData) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Connected components of the closure of the data: (lo, hi, label), sorted."""
    order = np.lexsort((data.hi, data.lo))
    lo, hi, lab = data.lo[order], data.hi[order], data.label[order]
    c_lo, c_hi, c_lab = [lo[0]], [hi[0]], [lab[0]]
    for a, b, c in zip(lo[1:], hi[1:], lab[1:]):      # loop over intervals (a handful)
        if a <= c_hi[-1]:                             # closures meet
            if c != c_lab[-1]:
                raise ValueError("data: intervals of different classes touch or overlap "
                                 "(002's exclusive class assumption)")
            c_hi[-1] = max(c_hi[-1], b)
        else:
            c_lo.append(a)
            c_hi.append(b)
            c_lab.append(c)
    return np.asarray(c_lo), np.asarray(c_hi), np.asarray(c_lab)


def _eps_array(eps: Any) -> np.ndarray:
    e = np.atleast_1d(np.asarray(eps, dtype=np.float64))
    if e.ndim != 1 or not np.all(np.isfinite(e)) or np.any(e < 0):
        raise ValueError("eps: expected finite thresholds >= 0 (a scalar or a 1-D array)")
    return e


# ---------------------------------------------------------------------------
# 002 Section 1.2.1: the toy example


def toy_1d_data() -> IntervalData:
    """002's 1-D toy data: c = -1 (class 0) on [-2, -1), c = +1 (class 1) on [1, 2), prior 1/2 each.

    The same distribution :func:`rcurves.data.toy_1d` samples from (stored
    as closed intervals; the ends are a null set).
    """
    return interval_data([-2.0, 1.0], [-1.0, 2.0], [0, 1], [0.5, 0.5])


def toy_1d_piecewise() -> Dict[str, Piecewise1D]:
    """002 Figure 3's f1, f2, f3 as exact piecewise classifiers (class 1 <-> +1).

    With ``step(x) = 1 for x >= 0, -1 otherwise``:
    f1(x) = step(x - 1); f2(x) = 1 - step(x + 4) + step(x) (+1 on x < -4 and
    x >= 0, -1 on [-4, 0)); f3(x) = step(x), the oracle. At the break points
    these follow 002's step (f2(0) = f3(0) = f1(1) = +1); the two-logit
    :func:`rcurves.data.toy_1d_classifiers` give class 0 there (a tie of
    the logits), which changes nothing off a null set.
    """
    return {"f1": piecewise([1.0], [0, 1]),
            "f2": piecewise([-4.0, 0.0], [1, 0, 1]),
            "f3": piecewise([0.0], [0, 1])}


def nn1_classifier_1d(data: IntervalData) -> Piecewise1D:
    """The 1-NN classifier of ``cl X``: breaks at the midpoints of gaps between classes.

    Off the Voronoi boundary (those midpoints) every x gets the class of its
    nearest data point; at a midpoint the right-hand class (a null set that
    002's measures ignore). This is the classifier 002 Theorem 2 says
    maximises the genuine adversarial accuracy (for the toy data, f3).
    """
    lo, hi, lab = _components(data)
    change = np.flatnonzero(lab[1:] != lab[:-1])
    breaks = (hi[change] + lo[change + 1]) / 2.0
    labels = np.concatenate([lab[:1], lab[change + 1]])
    return Piecewise1D(breaks.astype(np.float64), labels.astype(np.int64))


# ---------------------------------------------------------------------------
# the two measures, exact in 1-D


def clean_accuracy_1d(data: IntervalData, clf: Piecewise1D) -> float:
    """``P(f(x) = c_x)``: the measure of each interval where the label is right."""
    return float(standard_adversarial_accuracy_1d(data, clf, 0.0)[0])


def _overlap(a, b, l, r):
    """Length of [a, b] intersect [l, r] (broadcasting), 0 if empty."""
    return np.maximum(0.0, np.minimum(b, r) - np.maximum(a, l))


def standard_adversarial_accuracy_1d(data: IntervalData, clf: Piecewise1D, eps: Any) -> np.ndarray:
    """Exact ``a_std(eps)`` (002 Definition 2) of a piecewise classifier on interval data.

    ``a_std(eps) = sum_k mass_k |{x in I_k : [x - eps, x + eps] in one run [l, r)
    of label c_k}| / |I_k|`` = the overlap of ``I_k`` with ``[l + eps, r - eps)``
    summed over the runs of label ``c_k`` (a point interval counts 1 if it is in
    that set). Interval arithmetic, no sampling.

    Args:
      data: :class:`IntervalData`; clf: :class:`Piecewise1D`.
      eps: a threshold or ``(m,)`` thresholds >= 0.

    Returns:
      ``(m,)`` float64 in [0, 1].
    """
    e = _eps_array(eps)[:, None, None]                      # (m, 1, 1)
    l, r, run_lab = _runs(clf)
    a, b, c = data.lo[None, :, None], data.hi[None, :, None], data.label[None, :, None]
    L, R = l[None, None, :] + e, r[None, None, :] - e     # robust set [l + eps, r - eps)
    same = c == run_lab[None, None, :]
    length = b - a
    frac = np.where(length > 0, _overlap(a, b, L, R) / np.where(length > 0, length, 1.0),
                    ((a >= L) & (a < R)).astype(np.float64))
    frac = np.where(same, frac, 0.0).sum(-1)                # (m, k)
    return (frac * data.mass[None, :]).sum(-1)


def standard_ara_1d(data: IntervalData, clf: Piecewise1D) -> float:
    """The area under ``a_std`` over eps in [0, inf) (Woods et al.'s ARA, 002 Section 1.2.1).

    ``a_std`` is piecewise linear in eps with kinks among ``{a - l, b - l,
    r - a, r - b, (r - l)/2}`` (interval ends a, b, run ends l, r), and 0 beyond
    the largest; evaluating it there and summing trapezoids is exact.
    """
    l, r, _ = _runs(clf)
    a, b = data.lo[:, None], data.hi[:, None]
    cand = np.concatenate([(a - l[None]).ravel(), (b - l[None]).ravel(), (r[None] - a).ravel(),
                           (r[None] - b).ravel(), ((r - l) / 2.0)])
    cand = cand[np.isfinite(cand) & (cand > 0)]
    knots = np.unique(np.concatenate([[0.0], cand]))
    vals = standard_adversarial_accuracy_1d(data, clf, knots)
    if vals[-1] > 0:
        return math.inf                                    # a run of infinite length
    return float(np.sum((vals[1:] + vals[:-1]) / 2.0 * np.diff(knots)))


class GenuineDetail(NamedTuple):
    """Per-eps detail of :func:`genuine_adversarial_accuracy_1d`.

    ``accuracy (m,)`` (NaN where ``S_exact(eps)`` is empty); ``points (P,)`` the
    candidate data points (component ends); ``in_s (m, P)`` membership of
    ``S_exact(eps)``; ``correct (m, P)`` whether f is right at every eligible x'.
    """

    accuracy: np.ndarray
    points: np.ndarray
    in_s: np.ndarray
    correct: np.ndarray


def genuine_adversarial_accuracy_1d(data: IntervalData, clf: Piecewise1D, eps: Any,
                                    *, detail: bool = False):
    """Exact ``a_gen(eps)`` (002 Definition 3) of a piecewise classifier on interval data.

    ``eps = 0``: the clean accuracy. ``eps > 0``: the fraction, over the data
    points in ``S_exact(eps)`` (the component ends e whose outward point
    x' = e -+ eps is farther than eps from every other component, so that e is
    its unique nearest point of ``cl X``), of those where f(x') = c_e for every
    such x' (the worst case). Points of ``S_exact(eps)`` have equal weight (see
    the module docstring for why). NaN where ``S_exact(eps)`` is empty.

    Args:
      data: :class:`IntervalData`; clf: :class:`Piecewise1D`.
      eps: a threshold or ``(m,)`` thresholds >= 0.
      detail: also return the :class:`GenuineDetail`.

    Returns:
      ``(m,)`` float64, or ``GenuineDetail`` when ``detail``.
    """
    e = _eps_array(eps)
    lo, hi, lab = _components(data)
    # candidate (point, direction) pairs: left end looks left, right end right
    pts = np.concatenate([lo, hi])
    dirs = np.concatenate([-np.ones_like(lo), np.ones_like(hi)])
    own = np.concatenate([np.arange(lo.size), np.arange(lo.size)])
    cls = np.concatenate([lab, lab])
    xp = pts[None, :] + dirs[None, :] * e[:, None]                     # (m, 2c)
    # distance of x' to every component: max(lo - x', x' - hi, 0)
    dist = np.maximum(np.maximum(lo[None, None, :] - xp[..., None], xp[..., None] - hi[None, None, :]), 0.0)
    other = own[None, :, None] != np.arange(lo.size)[None, None, :]
    eligible = np.all(np.where(other, dist > e[:, None, None], True), axis=-1)
    ok = piecewise_predict(clf, xp) == cls[None, :]
    # merge the two directions of a point component (lo == hi) into one data point
    points, inverse = np.unique(pts, return_inverse=True)
    m, P = e.size, points.size
    in_s = np.zeros((m, P), bool)
    bad = np.zeros((m, P), bool)
    for k in range(pts.size):                                        # 2 x components (a handful)
        in_s[:, inverse[k]] |= eligible[:, k]
        bad[:, inverse[k]] |= eligible[:, k] & ~ok[:, k]
    n_s = in_s.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(n_s > 0, (in_s & ~bad).sum(1) / np.maximum(n_s, 1), np.nan)
    zero = e == 0
    if zero.any():
        acc = np.where(zero, clean_accuracy_1d(data, clf), acc)
        in_s[zero] = False
    if detail:
        return GenuineDetail(acc, points, in_s, in_s & ~bad)
    return acc


# ---------------------------------------------------------------------------
# 002 Section 1.3.1: the sunset data set (2-D, l_2), by quadrature


class SunsetQuadrature(NamedTuple):
    """Deterministic quadrature of the sunset distribution (:func:`rcurves.data.sunset`, d = 2).

    ``x (n, 2)`` nodes: midpoints of ``n_circle`` equal arcs of the unit circle
    centred at (0, 1) (class 0, "sun") and of ``n_line`` equal pieces of the
    segment [-width, width] x {0} (class 1, "horizon"); ``normal (n, 2)`` unit
    normals (outward for the circle, +x_2 for the segment); ``y (n,)``;
    ``weight (n,)`` summing to 1 (1/2 per class, the sampler's prior).
    """

    x: np.ndarray
    normal: np.ndarray
    y: np.ndarray
    weight: np.ndarray


def sunset_quadrature(n_circle: int = 4096, n_line: int = 4096, *, width: float = 2.0) -> SunsetQuadrature:
    n_circle = check_positive_int(n_circle, "n_circle")
    n_line = check_positive_int(n_line, "n_line")
    width = check_positive_float(width, "width")
    th = (np.arange(n_circle) + 0.5) * (2 * np.pi / n_circle)
    nc = np.stack([np.cos(th), np.sin(th)], 1)
    xc = nc + np.array([0.0, 1.0])
    t = -width + (np.arange(n_line) + 0.5) * (2 * width / n_line)
    xl = np.stack([t, np.zeros_like(t)], 1)
    nl = np.tile([0.0, 1.0], (n_line, 1))
    x = np.concatenate([xc, xl])
    normal = np.concatenate([nc, nl])
    y = np.concatenate([np.zeros(n_circle, np.int64), np.ones(n_line, np.int64)])
    w = np.concatenate([np.full(n_circle, 0.5 / n_circle), np.full(n_line, 0.5 / n_line)])
    return SunsetQuadrature(x, normal, y, w)


def sunset_set_distances(z: Any, *, width: float = 2.0) -> Tuple[np.ndarray, np.ndarray]:
    """l_2 distances of points ``z (..., 2)`` to the sunset's circle and to its segment."""
    z = np.asarray(z, dtype=np.float64)
    d_circle = np.abs(np.hypot(z[..., 0], z[..., 1] - 1.0) - 1.0)
    d_line = np.hypot(np.maximum(np.abs(z[..., 0]) - width, 0.0), z[..., 1])
    return d_circle, d_line


def sunset_nn1_predict(z: Any, *, width: float = 2.0) -> np.ndarray:
    """The l_2 1-NN classifier of the sunset sets (circle -> 0, segment -> 1) at ``z (k, 2)``.

    Class 1 where the segment [-width, width] x {0} is strictly closer than the
    circle. :func:`rcurves.data.sunset_oracle_logits_fn` is the 1-NN of the
    circle and the *unbounded* line; the two agree for ``|z_1| <= width``.
    """
    d_c, d_l = sunset_set_distances(z, width=width)
    return (d_l < d_c).astype(np.int64)


def sunset_genuine_accuracy(predict: Callable[[np.ndarray], np.ndarray], eps: Any, *,
                            quad: SunsetQuadrature = None, width: float = 2.0) -> np.ndarray:
    """``a_gen(eps)`` (002 Definition 3, l_2) of a classifier on the sunset data, by quadrature.

    For a data point x on the circle or the segment the perturbed points at
    exact distance eps whose unique nearest data point is x are among
    ``x +- eps n(x)`` (n the unit normal); such an x' is eligible iff its
    distance to the *other* set is > eps (the own set is at eps: for the
    circle's inner side this needs eps < 1). ``S_exact(eps)`` is weighted by
    the data distribution (a set of positive measure here), x* is the worst
    eligible x'. ``eps = 0`` gives the clean accuracy.

    Args:
      predict: ``(k, 2) float64 -> (k,)`` class labels (0 = sun, 1 = horizon).
      eps: a threshold or ``(m,)`` thresholds >= 0.
      quad: the quadrature (default :func:`sunset_quadrature` with ``width``).

    Returns:
      ``(m,)`` float64; NaN where ``S_exact(eps)`` is empty.
    """
    e = _eps_array(eps)
    q = sunset_quadrature(width=width) if quad is None else quad
    on_circle = q.y == 0
    out = np.empty(e.size)
    clean = np.asarray(predict(q.x)) == q.y
    for i, ev in enumerate(e):                         # loop over thresholds only
        if ev == 0:
            out[i] = float((q.weight * clean).sum())
            continue
        in_s = np.zeros(q.y.size, bool)
        bad = np.zeros(q.y.size, bool)
        for s in (1.0, -1.0):
            xp = q.x + s * ev * q.normal
            d_c, d_l = sunset_set_distances(xp, width=width)
            d_other = np.where(on_circle, d_l, d_c)
            d_own = np.where(on_circle, d_c, d_l)
            elig = (d_other > ev) & np.isclose(d_own, ev, rtol=1e-9, atol=1e-12)
            wrong = np.asarray(predict(xp)) != q.y
            in_s |= elig
            bad |= elig & wrong
        w = q.weight[in_s].sum()
        out[i] = (q.weight * (in_s & ~bad)).sum() / w if w > 0 else np.nan
    return out


__all__ = [
    "GenuineDetail",
    "IntervalData",
    "Piecewise1D",
    "SunsetQuadrature",
    "clean_accuracy_1d",
    "genuine_adversarial_accuracy_1d",
    "interval_data",
    "nn1_classifier_1d",
    "piecewise",
    "piecewise_predict",
    "standard_adversarial_accuracy_1d",
    "standard_ara_1d",
    "sunset_genuine_accuracy",
    "sunset_nn1_predict",
    "sunset_quadrature",
    "sunset_set_distances",
    "toy_1d_data",
    "toy_1d_piecewise",
]
