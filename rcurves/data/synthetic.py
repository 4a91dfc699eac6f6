"""The papers' synthetic distributions and exact constructions.

Every generator draws from an explicit ``seed`` (an ``int`` or a
``numpy.random.Generator``) and returns numpy arrays ``(x, y)``: ``x`` float32
of shape ``(n, *input_shape)``, ``y`` int64 class indices in ``0..K-1``.

Label convention for the papers' binary labels in {-1, +1}: **class 1 <-> +1,
class 0 <-> -1**. A binary linear classifier ``sign(w.x + b)`` therefore
predicts class 1 where ``w.x + b > 0``; as a model it is the two-logit function
``[-(w.x+b)/2, (w.x+b)/2]`` (DESIGN.md).

Contents (paper files in ``shared/papers``):

* ``tsipras_p1``, ``nakkiran_p2``, ``toy_linear_classifiers`` -- 001 eq. (9),
  (10) and the classifiers f_avg, f_rob, f_s of its Figure 1.
* ``parabola_points``, ``parabola_logits_fn``, ``parabola_distance`` -- the
  quadratic classifier sign(x1^2 - x2) of 001 Figure 2, with exact l_1, l_2,
  l_inf distances to its boundary.
* ``theorem1_construction`` -- 000 Appendix A, Theorem 1 (robustness curves
  that cross between any chosen thresholds), in a corrected general form.
* ``toy_1d``, ``toy_1d_classifiers``, ``sunset``, ``sunset_oracle_logits_fn``
  -- 002 Sections 1.2.1 and 1.3.1.
* ``overly_robust_features``, ``overly_robust_classifiers`` -- the model D_k
  of 003 Section 5 / Appendix E (Lemma 6, 7).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple, Union

import jax.numpy as jnp
import numpy as np

from attacks.checks import check_norm, check_positive_float, check_positive_int

Seed = Union[int, np.integer, np.random.Generator]
LinearModel = Tuple[np.ndarray, np.float32]

_LABEL_DTYPE = np.int64


# ---------------------------------------------------------------------------
# helpers


def _rng(seed: Seed, name: str = "seed") -> np.random.Generator:
    """A numpy Generator from an int seed (>= 0) or a Generator (used as is)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{name}: expected an int >= 0 or a numpy Generator, got {seed!r}")
    return np.random.default_rng(int(seed))


def _probability(v: Any, name: str) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a probability in [0, 1], got {v!r}") from None
    if not (0.0 <= f <= 1.0):
        raise ValueError(f"{name}: expected a probability in [0, 1], got {v!r}")
    return f


def _finite_float(v: Any, name: str) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a finite number, got {v!r}") from None
    if not math.isfinite(f):
        raise ValueError(f"{name}: expected a finite number, got {v!r}")
    return f


def _signs(rng: np.random.Generator, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """Uniform labels: class indices y in {0, 1} and signs s = 2y - 1 in {-1, +1}."""
    y = rng.integers(0, 2, size=n).astype(_LABEL_DTYPE)
    return y, (2.0 * y - 1.0)


def _flip(rng: np.random.Generator, s: np.ndarray, keep_prob: float) -> np.ndarray:
    """``s`` with each entry kept w.p. ``keep_prob`` and negated otherwise."""
    keep = rng.random(s.shape) < keep_prob
    return np.where(keep, s, -s)


def _linear(w: Sequence[float], b: float = 0.0) -> LinearModel:
    return np.asarray(w, dtype=np.float32), np.float32(b)


# ---------------------------------------------------------------------------
# 001: Tsipras et al. P1, Nakkiran P2 and the linear classifiers of Figure 1


def tsipras_p1(n: int, *, d: int, p: float = 0.95, eta: Optional[float] = None,
               seed: Seed = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Tsipras et al.'s distribution P1 (001 eq. 9).

    y is uniform on {-1, +1};  x_1 = +y w.p. p, -y w.p. 1 - p (the robust,
    weakly predictive feature);  x_2, ..., x_{d+1} ~ N(eta * y, 1) i.i.d.
    (non-robust, jointly strongly predictive features).

    Note: 001 typesets eq. (9) as "x_1 = 1 w.p. p, -1 w.p. 1-p", which would
    make x_1 independent of y; its text (f_rob "has high robustness but low
    accuracy") and the source (Tsipras et al. 2019) mean x_1 = +y w.p. p, which
    is what is implemented.

    Args:
      n: number of samples.
      d: number of Gaussian features (x has d + 1 coordinates).
      p: probability that x_1 equals the label sign; f_rob has accuracy p.
      eta: mean shift of the Gaussian features. Default ``2 / sqrt(d)``
        (Tsipras et al. take eta = Theta(1/sqrt(d))); f_avg then has accuracy
        Phi(eta * sqrt(d)) = Phi(2) ~ 0.977 and is l_inf-fooled at eps >= 2 eta.
      seed: int or numpy Generator.

    Returns:
      x: (n, d + 1) float32; y: (n,) int64 in {0, 1} (1 <-> +1).
    """
    n = check_positive_int(n, "n")
    d = check_positive_int(d, "d")
    p = _probability(p, "p")
    eta = 2.0 / math.sqrt(d) if eta is None else _finite_float(eta, "eta")
    rng = _rng(seed)
    y, s = _signs(rng, n)
    x1 = _flip(rng, s, p)
    rest = eta * s[:, None] + rng.standard_normal((n, d))
    x = np.concatenate([x1[:, None], rest], axis=1).astype(np.float32)
    return x, y


def nakkiran_p2(n: int, *, d: int, q: float = 0.51,
                seed: Seed = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Nakkiran's distribution P2 (001 eq. 10).

    y is uniform on {-1, +1}; every x_i = +y w.p. q (= 0.51 in the paper), -y
    otherwise, independently. f_s = sign(sum_i x_i) is accurate for large d
    (accuracy P(Binomial(d, q) > d/2); at even d a tie gives w.x = 0, which the
    two-logit model maps to class 0), yet its l_inf distance |sum_i x_i| / d
    (000 Lemma 1) tends to only 2q - 1 = 0.02 as d grows.

    Returns:
      x: (n, d) float32 with entries in {-1, +1}; y: (n,) int64 in {0, 1}.
    """
    n = check_positive_int(n, "n")
    d = check_positive_int(d, "d")
    q = _probability(q, "q")
    rng = _rng(seed)
    y, s = _signs(rng, n)
    x = _flip(rng, np.broadcast_to(s[:, None], (n, d)), q).astype(np.float32)
    return x, y


def toy_linear_classifiers(d: int) -> Dict[str, LinearModel]:
    """The linear classifiers of 001 Figure 1, as ``(w, b)`` float32 pairs.

    * ``f_avg``: w = (0, 1/d, ..., 1/d) on d + 1 dims (for ``tsipras_p1``),
    * ``f_rob``: w = (1, 0, ..., 0) on d + 1 dims (for ``tsipras_p1``),
    * ``f_s``:   w = (1, ..., 1) on d dims (for ``nakkiran_p2``);

    all with b = 0; each predicts class 1 where ``w.x + b > 0``.
    """
    d = check_positive_int(d, "d")
    w_avg = np.full(d + 1, 1.0 / d)
    w_avg[0] = 0.0
    w_rob = np.zeros(d + 1)
    w_rob[0] = 1.0
    return {"f_avg": _linear(w_avg), "f_rob": _linear(w_rob), "f_s": _linear(np.ones(d))}


# ---------------------------------------------------------------------------
# 001 Figure 2: the parabola classifier sign(x1^2 - x2)


def parabola_logits_fn() -> Callable:
    """Logits of sign(x1^2 - x2) (001 Fig. 2) as a two-class model.

    ``logits_fn(x) = [-(x1^2 - x2)/2, (x1^2 - x2)/2]`` for x of shape (n, 2):
    class 1 (+1) below/outside the parabola (x2 < x1^2), class 0 (-1) inside
    (x2 > x1^2, the convex side).
    """
    def logits_fn(x):
        s = x[:, 0] ** 2 - x[:, 1]
        return jnp.stack([-s / 2, s / 2], axis=-1)
    return logits_fn


def _parabola_l2(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    """min_t ||(x1, x2) - (t, t^2)||_2 via the critical-point cubic.

    d/dt [(x1 - t)^2 + (x2 - t^2)^2] = 0  <=>  t^3 + (1/2 - x2) t - x1/2 = 0.
    All roots come from one batched companion-matrix eigenvalue call; the real
    parts of all three are candidates (a complex pair only adds harmless
    feasible candidates), polished by Newton steps on the cubic.
    """
    n = x1.shape[0]
    comp = np.zeros((n, 3, 3))
    comp[:, 0, 1] = -(0.5 - x2)
    comp[:, 0, 2] = x1 / 2
    comp[:, 1, 0] = 1.0
    comp[:, 2, 1] = 1.0
    t = np.linalg.eigvals(comp).real                      # (n, 3)
    a, c = (0.5 - x2)[:, None], (-x1 / 2)[:, None]
    for _ in range(3):                                    # Newton polish
        f = t ** 3 + a * t + c
        fp = 3 * t ** 2 + a
        step = np.where(np.abs(fp) > 1e-300, f / np.where(fp == 0, 1.0, fp), 0.0)
        t_new = t - step
        better = np.abs(t_new ** 3 + a * t_new + c) < np.abs(f)
        t = np.where(better, t_new, t)
    t = np.concatenate([t, x1[:, None]], axis=1)          # extra feasible candidate
    d2 = (x1[:, None] - t) ** 2 + (x2[:, None] - t ** 2) ** 2
    return np.sqrt(d2.min(axis=1))


def parabola_distance(x: Any, p: Any) -> np.ndarray:
    """Exact l_p distance of each point to the boundary x2 = x1^2 (001 Fig. 2).

    The distance of a point to the other class's region (the closed set on the
    other side) is attained on the boundary curve {(t, t^2)} for any norm, so
    ``dist_p(x) = min_t ||x - (t, t^2)||_p``. The 1-D minimisation is solved in
    closed form by enumerating a candidate set that provably contains the
    minimiser (no grid, no iterative optimiser):

    * l_2: the real roots of the cubic 2t^3 + (1 - 2 x2) t - x1 = 0.
    * l_1: h(t) = |x1 - t| + |x2 - t^2| is a quadratic in t between its kinks
      t = x1, t = +-sqrt(x2); on each piece its minimum is at a kink or at the
      vertex t = +-1/2. Candidates: {x1, +-sqrt(max(x2, 0)), +-1/2}.
    * l_inf: the minimum of max(f, g), f = |x1 - t|, g = |x2 - t^2|, is at a
      local minimum of f (t = x1), of g (t = 0, +-sqrt(max(x2, 0))), or where
      f = g: the real roots of t^2 + t - (x1 + x2) and t^2 - t + (x1 - x2).

    Args:
      x: (n, 2) points (any float dtype; computed in float64).
      p: 1, 2, inf (or 'l1', 'l2', 'linf').

    Returns:
      (n,) float64 distances (0 on the boundary).
    """
    norm = check_norm(p, "p")
    arr = np.asarray(x)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"x: expected shape (n, 2), got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number) or not np.all(np.isfinite(arr)):
        raise ValueError("x: expected finite real numbers")
    arr = arr.astype(np.float64)
    x1, x2 = arr[:, 0], arr[:, 1]
    if norm == "l2":
        return _parabola_l2(x1, x2)
    r = np.sqrt(np.maximum(x2, 0.0))
    if norm == "l1":
        half = np.full_like(x1, 0.5)
        t = np.stack([x1, r, -r, half, -half], axis=1)
        h = np.abs(x1[:, None] - t) + np.abs(x2[:, None] - t ** 2)
        return h.min(axis=1)
    # linf: roots of t^2 + t - (x1 + x2) = 0 and t^2 - t + (x1 - x2) = 0
    disc1 = 1.0 + 4.0 * (x1 + x2)
    disc2 = 1.0 - 4.0 * (x1 - x2)
    s1 = np.sqrt(np.maximum(disc1, 0.0))
    s2 = np.sqrt(np.maximum(disc2, 0.0))
    cands = [x1, np.zeros_like(x1), r, -r]
    for root, ok in (((-1 + s1) / 2, disc1 >= 0), ((-1 - s1) / 2, disc1 >= 0),
                     ((1 + s2) / 2, disc2 >= 0), ((1 - s2) / 2, disc2 >= 0)):
        cands.append(np.where(ok, root, x1))             # x1 is a harmless filler
    t = np.stack(cands, axis=1)
    h = np.maximum(np.abs(x1[:, None] - t), np.abs(x2[:, None] - t ** 2))
    return h.min(axis=1)


def _parabola_offset(t: np.ndarray, r: np.ndarray, outside: np.ndarray) -> np.ndarray:
    """Boundary point (t, t^2) moved by l_2 length r along the unit normal.

    The outward normal (towards x2 < x1^2, class 1) is (2t, -1)/sqrt(1 + 4t^2).
    """
    nrm = np.sqrt(1.0 + 4.0 * t ** 2)
    sgn = np.where(outside, 1.0, -1.0)
    x1 = t + sgn * r * 2.0 * t / nrm
    x2 = t ** 2 - sgn * r / nrm
    return np.stack([x1, x2], axis=1)


# Feet of the "discrete" example: outside points at t = 0 (normal along an
# axis: l_1 = l_2 = l_inf = 1), t = +-1/2 (diagonal normal: l_1 = sqrt 2,
# l_inf = 1/sqrt 2, the maximal separation of eq. 17 for d = 2), t = +-1, +-2;
# inside points at t = +-1, +-2 (|t| >= sqrt(3)/2 so the foot is the nearest
# boundary point at l_2 distance 1).
_DISCRETE_OUT = (0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0)
_DISCRETE_IN = (1.0, -1.0, 2.0, -2.0)
_INSIDE_MIN_T = 0.9   # > sqrt(3)/2: inside points at distance 1 keep their foot


def parabola_points(kind: str, n: int, *, seed: Seed = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Points for the classifier sign(x1^2 - x2) of 001 Figure 2.

    Every point is a boundary point (t, t^2) moved along the unit normal by an
    l_2 length r, outwards (class 1, x2 < x1^2) or inwards (class 0), so its
    exact l_2 distance to the boundary is r (for inward moves this needs
    r <= sqrt(1 + 4 t^2) / 2, i.e. |t| >= sqrt(3)/2 for r = 1, which is
    respected). Labels are the classifier's own predictions (zero standard loss).

    kinds:
      * ``"discrete"`` (row a): n draws, uniformly, from 11 fixed points, all at
        l_2 distance exactly 1 on both sides (see ``_DISCRETE_OUT/_IN``); their
        l_1 distances range over [1, sqrt 2] and l_inf over [1/sqrt 2, 1], so the
        l_2 curve is one step at 1 and the l_1/l_inf curves are staircases.
      * ``"continuous"`` (row b): r = 1; outside w.p. 1/2 with t ~ U[-2, 2],
        inside otherwise with |t| ~ U[0.9, 2] and a random sign.
      * ``"similar"`` (row c, our choice; the paper gives no parameters): feet
        far along the arms, |t| ~ U[8, 16] with random sign and side, so the
        normal is within 3.6 degrees of horizontal, and r ~ U[0.1, 1]; the l_1,
        l_2 and l_inf distances then agree to within ~6 %, and the three
        robustness curves nearly coincide.

    Returns:
      x: (n, 2) float32; y: (n,) int64, 1 where x1^2 > x2.
    """
    if kind not in ("discrete", "continuous", "similar"):
        raise ValueError(f"kind: expected 'discrete', 'continuous' or 'similar', got {kind!r}")
    n = check_positive_int(n, "n")
    rng = _rng(seed)
    if kind == "discrete":
        t_all = np.array(_DISCRETE_OUT + _DISCRETE_IN)
        out_all = np.array([True] * len(_DISCRETE_OUT) + [False] * len(_DISCRETE_IN))
        idx = rng.integers(0, t_all.shape[0], size=n)
        t, outside, r = t_all[idx], out_all[idx], np.ones(n)
    elif kind == "continuous":
        outside = rng.random(n) < 0.5
        t_out = rng.uniform(-2.0, 2.0, size=n)
        t_in = rng.uniform(_INSIDE_MIN_T, 2.0, size=n) * rng.choice([-1.0, 1.0], size=n)
        t, r = np.where(outside, t_out, t_in), np.ones(n)
    else:
        outside = rng.random(n) < 0.5
        t = rng.uniform(8.0, 16.0, size=n) * rng.choice([-1.0, 1.0], size=n)
        r = rng.uniform(0.1, 1.0, size=n)
    x = _parabola_offset(t, r, outside).astype(np.float32)
    return x, outside.astype(_LABEL_DTYPE)


# ---------------------------------------------------------------------------
# 000 Appendix A, Theorem 1: robustness curves crossing at chosen places


class Theorem1Construction(NamedTuple):
    """A 1-D distribution and two threshold classifiers (000 Theorem 1).

    Fields:
      x: (m, 1) float64 support points (float64 keeps the construction exact).
      y: (m,) int64 labels (all points are correctly classified by both).
      weights: (m,) float64 probabilities, summing to 1.
      counts: (m,) int64 integer multiplicities with weights = counts/sum;
        ``np.repeat(x, counts, 0)`` is an equally-weighted sample with the
        same robustness curves.
      classifier_1: (w (1,), b) float64 with c1(x) = 1[w x + b >= 0] = 1[x >= -d].
      classifier_2: (w (1,), b) float64 with c2(x) = 1[x >= d].
      distances_1, distances_2: (m,) exact distances |w x + b| / |w| of each point
        to c1's / c2's decision boundary (the minimal adversarial distances).
      crossings: (k,) sorted places where the order of the two robustness
        curves flips (the midpoints between consecutive runs of T1 and T2).
      d: the offset of the decision boundaries.
    """
    x: np.ndarray
    y: np.ndarray
    weights: np.ndarray
    counts: np.ndarray
    classifier_1: Tuple[np.ndarray, float]
    classifier_2: Tuple[np.ndarray, float]
    distances_1: np.ndarray
    distances_2: np.ndarray
    crossings: np.ndarray
    d: float


def _threshold_set(t: Any, name: str) -> np.ndarray:
    arr = np.asarray(t if t is not None else [], dtype=np.float64).ravel()
    if arr.size and not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
        raise ValueError(f"{name}: expected finite thresholds > 0, got {arr.tolist()}")
    return np.unique(arr)


def theorem1_construction(t1: Sequence[float], t2: Sequence[float], *,
                          d: Optional[float] = None) -> Theorem1Construction:
    """Robustness curves with R^{c1} < R^{c2} on T1 and R^{c1} > R^{c2} on T2.

    000 Appendix A proves Theorem 1 with c1(x) = 1[x >= -d], c2(x) = 1[x >= d]
    and a distribution of class-0 points left of -d (which only c1 can lose at
    small eps) and class-1 points right of d (which only c2 can lose). The
    printed proof assumes interleaved sets of equal size t_i < t'_i < t_{i+1}
    and slips: with its weights R^{c1}(t_1) = 1/(4n+1) > R^{c2}(t_1) = 0 for
    t_1 in T1 (the orientation is reversed), the class-0 point at
    (t_i + t'_{i+1})/2 can lie beyond t_{i+1}, and t'_{n+1} does not exist.

    Corrected general construction used here: sort T = T1 u T2 and split it into
    maximal runs of thresholds from the same set. In a T1 run c2's curve must be
    the higher one, in a T2 run c1's. The curve that must be higher in the first
    run gets a step of weight 1 at min(T)/2; at the midpoint between
    consecutive runs, the curve that must become higher gets a step of weight
    2. The higher curve then always leads by exactly 1 unit, the order flips
    exactly at those midpoints and nowhere else below 2d. A step of c1's curve
    at s is a class-0 point at -d - s (distance s to c1's boundary, 2d + s to
    c2's); a step of c2's at s is a class-1 point at d + s. Weights are
    normalised by the total 1 + 2 (runs - 1).

    Robustness curves here are R(eps) = P(distance <= eps) (no point is
    misclassified). If two consecutive thresholds are adjacent floats, no
    float lies strictly between them and the step is put at the larger one.

    Args:
      t1, t2: finite sets (any sequences) of thresholds > 0, disjoint, not both
        empty.
      d: boundary offset; default max(T) as in the paper; must satisfy
        2 d > max(T) so the far-side points never act below max(T).

    Returns:
      ``Theorem1Construction``.
    """
    a = _threshold_set(t1, "t1")
    b = _threshold_set(t2, "t2")
    if a.size + b.size == 0:
        raise ValueError("t1, t2: expected at least one threshold in total, got two empty sets")
    common = np.intersect1d(a, b)
    if common.size:
        raise ValueError(f"t2: expected to be disjoint from t1, both contain {common.tolist()}")
    thr = np.concatenate([a, b])
    which = np.concatenate([np.ones(a.size, int), np.full(b.size, 2)])
    order = np.argsort(thr, kind="stable")
    thr, which = thr[order], which[order]
    t_max = float(thr[-1])
    if d is None:
        d = t_max
    else:
        d = _finite_float(d, "d")
        if not 2.0 * d > t_max:
            raise ValueError(f"d: expected 2 d > max threshold {t_max}, got {d}")
    # runs: first index of every maximal run of equal `which`
    starts = np.flatnonzero(np.concatenate([[True], which[1:] != which[:-1]]))
    run_set = which[starts]                      # 1 -> c2 higher, 2 -> c1 higher
    mids = []
    for k in range(1, starts.size):              # loop over runs (a handful), not points
        lo, hi = thr[starts[k] - 1], thr[starts[k]]
        m = lo + (hi - lo) / 2.0
        mids.append(m if lo < m <= hi and m != lo else hi)
    crossings = np.asarray(mids, dtype=np.float64)
    step_at = np.concatenate([[thr[0] / 2.0], crossings])
    step_count = np.concatenate([[1], np.full(crossings.size, 2)]).astype(np.int64)
    on_c1 = run_set == 2                          # c1's curve gets the step
    x = np.where(on_c1, -d - step_at, d + step_at)
    y = np.where(on_c1, 0, 1).astype(_LABEL_DTYPE)
    dist_1 = np.where(on_c1, step_at, 2.0 * d + step_at)
    dist_2 = np.where(on_c1, 2.0 * d + step_at, step_at)
    weights = step_count / step_count.sum()
    one = np.ones(1, dtype=np.float64)
    return Theorem1Construction(
        x=x[:, None], y=y, weights=weights, counts=step_count,
        classifier_1=(one, float(d)), classifier_2=(one.copy(), float(-d)),
        distances_1=dist_1, distances_2=dist_2, crossings=crossings, d=float(d))


# ---------------------------------------------------------------------------
# 002: the one-dimensional toy example and the sunset data set


def toy_1d(n: int, *, seed: Seed = 0) -> Tuple[np.ndarray, np.ndarray]:
    """The 1-D toy example of 002 Section 1.2.1 (its Figure 2).

    Classes c = -1 and c = +1 with equal prior; x | c=-1 ~ U[-2, -1) and
    x | c=+1 ~ U[1, 2) (the paper shows flat class densities on these sets).

    Returns:
      x: (n, 1) float32; y: (n,) int64, class 1 <-> c = +1.
    """
    n = check_positive_int(n, "n")
    rng = _rng(seed)
    y, s = _signs(rng, n)
    u = rng.random(n)                            # [0, 1)
    x = np.where(s > 0, 1.0 + u, -2.0 + u)
    return x[:, None].astype(np.float32), y


def toy_1d_classifiers() -> Dict[str, Callable]:
    """f1, f2, f3 of 002 Figure 3 as two-class logits_fns on x of shape (n, 1).

    With step(x) = 1 for x >= 0, -1 otherwise:
      f1(x) = step(x - 1)                       score x - 1,
      f2(x) = 1 - step(x + 4) + step(x)         score max(-(x + 4), x)
              (+1 on x < -4 and x >= 0, -1 on [-4, 0): overly invariant),
      f3(x) = step(x)   (the oracle)            score x.
    Each logits_fn returns [-score/2, score/2]; the scores are continuous and
    vanish exactly on each decision boundary, so |score| is the distance for
    f1, f3 (slope 1) and for f2.
    """
    def make(score):
        def logits_fn(x):
            s = score(x[:, 0])
            return jnp.stack([-s / 2, s / 2], axis=-1)
        return logits_fn
    return {
        "f1": make(lambda t: t - 1.0),
        "f2": make(lambda t: jnp.maximum(-(t + 4.0), t)),
        "f3": make(lambda t: t),
    }


def sunset(n: int, *, d: int = 2, width: float = 2.0,
           seed: Seed = 0) -> Tuple[np.ndarray, np.ndarray]:
    """The sunset data set of 002 Section 1.3.1 (its Figure 5).

    Class A ("sun", class 0): uniform on the sphere of radius 1 centred at
    e_d = (0, ..., 0, 1). Class B ("horizon", class 1): the hyperplane x_d = 0
    tangent to it at the origin, sampled uniformly on [-width, width]^{d-1}
    (the paper's hyperplane is unbounded; ``width`` is our choice). Classes are
    equally likely. In 2-D this matches the paper: (0, 2) is the top of the sun,
    (e, 1 - sqrt(1 - e^2)) lies on it, and the l_2 1-NN oracle boundary is the
    parabola x1^2 = 4 x2. The infimum inter-class distance is 0.

    Returns:
      x: (n, d) float32; y: (n,) int64 (0 = A/sun, 1 = B/horizon).
    """
    n = check_positive_int(n, "n")
    d = check_positive_int(d, "d", minimum=2)
    width = check_positive_float(width, "width")
    rng = _rng(seed)
    y = rng.integers(0, 2, size=n).astype(_LABEL_DTYPE)
    g = rng.standard_normal((n, d))
    sphere = g / np.linalg.norm(g, axis=1, keepdims=True)
    sphere[:, -1] += 1.0
    plane = np.zeros((n, d))
    plane[:, :-1] = rng.uniform(-width, width, size=(n, d - 1))
    x = np.where(y[:, None] == 0, sphere, plane).astype(np.float32)
    return x, y


def sunset_oracle_logits_fn() -> Callable:
    """The l_2 1-NN oracle of the (unbounded) sunset data (002 Fig. 5).

    score(x) = dist(x, sphere) - dist(x, plane) = | ||x - e_d|| - 1 | - |x_d|,
    positive (class 1, horizon) where x is closer to the hyperplane. In 2-D,
    for x2 >= 0 outside the sun, the boundary is the parabola x1^2 = 4 x2.
    """
    def logits_fn(x):
        e = jnp.zeros(x.shape[-1]).at[-1].set(1.0)
        d_sphere = jnp.abs(jnp.linalg.norm(x - e, axis=-1) - 1.0)
        s = d_sphere - jnp.abs(x[:, -1])
        return jnp.stack([-s / 2, s / 2], axis=-1)
    return logits_fn


# ---------------------------------------------------------------------------
# 003 Section 5 / Appendix E: the overly-robust-features model D_k


def overly_robust_features(n: int, *, k: float, d: int = 100, delta: float = 0.0,
                           seed: Seed = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Samples of 003's D*_k (Section 5, Appendix E), labelled.

    z uniform on {-1, +1};  x_1 = z / 2;  x_2 = +z w.p. (1 + 1/k)/2, -z
    otherwise;  x_3, ..., x_{d+2} ~ N(z / sqrt(d), k) i.i.d. (variance k, as
    N(mu, sigma^2) is the paper's notation). The oracle is O(x) = sign(x_1) = z,
    robust to every l_inf perturbation below 1/2 (Claim 5). The label is
    y = O(x) w.p. 1 - delta and -O(x) w.p. delta.

    * ``delta=0`` gives the paper's D*_k with oracle labels (k = 100 in the text).
    * ``k = 1 + alpha, delta > 0`` gives its sanitised training distribution D,
      on which sign(x_2) has accuracy (1-delta) q + delta (1-q) with
      q = (1 + 1/(1+alpha))/2 and cannot be changed by l_inf perturbations < 1
      (Lemma 7; the paper's bound 1 - alpha/2 ignores delta).

    Args:
      n: samples; k: > 1 (the paper's parameter); d: number of Gaussian
        features (x has d + 2 coordinates); delta: label noise in [0, 1];
      seed: int or numpy Generator.

    Returns:
      x: (n, d + 2) float32; y: (n,) int64, class 1 <-> +1.
    """
    n = check_positive_int(n, "n")
    d = check_positive_int(d, "d")
    k = _finite_float(k, "k")
    if not k > 1.0:
        raise ValueError(f"k: expected k > 1, got {k}")
    delta = _probability(delta, "delta")
    rng = _rng(seed)
    _, z = _signs(rng, n)
    x1 = z / 2.0
    x2 = _flip(rng, z, (1.0 + 1.0 / k) / 2.0)
    rest = z[:, None] / math.sqrt(d) + math.sqrt(k) * rng.standard_normal((n, d))
    x = np.concatenate([x1[:, None], x2[:, None], rest], axis=1).astype(np.float32)
    label = _flip(rng, z, 1.0 - delta)
    return x, ((label + 1) // 2).astype(_LABEL_DTYPE)


def overly_robust_classifiers(d: int = 100) -> Dict[str, LinearModel]:
    """Linear classifiers on D_k's d + 2 coordinates, as ``(w, b)`` float32.

    * ``oracle``: sign(x_1) (w = e_1), l_inf distance |x_1| = 1/2 for every point.
    * ``x2``: sign(x_2) (w = e_2), Lemma 7's overly-robust model: l_inf
      distance |x_2| = 1 for every point.
    * ``noise_avg``: sign(mean(x_3..x_{d+2})) (w = (0, 0, 1/d, ...)), a model on
      the weakly-correlated "noise" features; its l_inf distances are
      O(1/sqrt(d)) smaller than its accuracy would suggest (the sensitivity of
      Lemma 6).
    """
    d = check_positive_int(d, "d")
    e1 = np.zeros(d + 2)
    e1[0] = 1.0
    e2 = np.zeros(d + 2)
    e2[1] = 1.0
    avg = np.zeros(d + 2)
    avg[2:] = 1.0 / d
    return {"oracle": _linear(e1), "x2": _linear(e2), "noise_avg": _linear(avg)}


__all__ = [
    "Theorem1Construction",
    "nakkiran_p2",
    "overly_robust_classifiers",
    "overly_robust_features",
    "parabola_distance",
    "parabola_logits_fn",
    "parabola_points",
    "sunset",
    "sunset_oracle_logits_fn",
    "theorem1_construction",
    "toy_1d",
    "toy_1d_classifiers",
    "toy_linear_classifiers",
    "tsipras_p1",
]
