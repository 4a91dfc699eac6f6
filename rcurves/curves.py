"""Robustness curves and margin curves from per-point distances.

A robustness curve (Definition 1 of paper 000; eqs. 3, 5-6 of paper 001) is
the distribution function of the minimal adversarial distance:

    R(eps) = P( exists x' : ||x' - x|| <= eps and f(x') != y ) = P(d <= eps),

where ``d(x, y)`` is ``0`` for a misclassified point and the distance to the
nearest point of another class otherwise. Given the distances of ``n``
sample points, the empirical curve is an exact right-continuous step
function: ``R_n(eps) = #{i : d_i <= eps} / n``. It changes only at the
distance values, which is what makes the knots (:func:`curve_points`) and the
intersections of two curves (:func:`exact_curve_intersections`) exact.

The margin curve (eqs. 4, 7-8 of paper 001) is label-free: the weight of all
points within ``eps`` of the decision boundary, ``L'(eps) = P(d_f <= eps)``
with ``d_f`` the distance from ``x`` to the nearest ``x'`` with
``f(x') != f(x)``. The two are tied by the split in the proof of Theorem 2 of
paper 000 (eqs. 7-9, 13): ``R(eps) = P(f(x) != y) + P(f(x) = y, d_f <= eps)``.

Conventions: ``inf`` distances (no adversarial found / no boundary) never
count at any finite ``eps``; NaN or negative distances are a ``ValueError``.
Fixed-size results are float32 jax arrays; variable-length results
(intersections, knots) are numpy arrays computed on the host.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks.checks import check_array, check_positive_int, is_concrete


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------


def _check_distances(distances: Any, name: str = "distances") -> jax.Array:
    """``(n,)`` float32, non-empty, no NaN, all ``>= 0`` (``inf`` allowed)."""
    d = check_array(distances, name, ndim=1, finite=False)
    if is_concrete(d):
        arr = np.asarray(d)
        if np.isnan(arr).any():
            raise ValueError(f"{name}: contains NaN values")
        if (arr < 0).any():
            raise ValueError(f"{name}: distances must be >= 0, got min {arr.min()}")
    return d


def _check_thresholds(eps: Any, name: str = "eps") -> jax.Array:
    """Scalar or 1-D, non-empty, finite and ``>= 0``."""
    if isinstance(eps, (int, float, np.integer, np.floating)) and not isinstance(eps, bool):
        eps = np.float32(eps)
    e = check_array(eps, name, finite=False)
    if e.ndim > 1:
        raise ValueError(f"{name}: expected a scalar or a 1-D array, got shape {tuple(e.shape)}")
    if is_concrete(e):
        arr = np.asarray(e)
        if np.isnan(arr).any():
            raise ValueError(f"{name}: contains NaN values")
        if np.isinf(arr).any():
            raise ValueError(f"{name}: thresholds must be finite")
        if (arr < 0).any():
            raise ValueError(f"{name}: thresholds must be >= 0, got min {arr.min()}")
    return e


def _check_mask(correct: Any, n: int, name: str = "correct") -> jax.Array:
    if correct is None or not hasattr(correct, "shape"):
        correct = np.asarray(correct)
    if correct.dtype != np.bool_ and correct.dtype != jnp.bool_:
        raise ValueError(f"{name}: expected a boolean array, got dtype {correct.dtype}")
    if tuple(correct.shape) != (n,):
        raise ValueError(f"{name}: expected shape ({n},) to match distances, got {tuple(correct.shape)}")
    return jnp.asarray(correct)


# ---------------------------------------------------------------------------
# curves
# ---------------------------------------------------------------------------


@jax.jit
def _counts(distances: jax.Array, eps: jax.Array) -> jax.Array:
    # #{d_i <= eps} by binary search in the sorted distances; inf sorts last
    # and thresholds are finite, so inf never counts.
    return jnp.searchsorted(jnp.sort(distances), eps, side="right")


@jax.jit
def _step_function(distances: jax.Array, eps: jax.Array) -> jax.Array:
    # float32 count / n (XLA's division may be off by one ulp from the
    # correctly rounded quotient; comparisons between curves use the counts).
    return _counts(distances, eps).astype(jnp.float32) / distances.shape[0]


def robustness_curve(distances: Any, eps: Any) -> jax.Array:
    """The empirical robustness curve ``R(eps) = #{i : d_i <= eps} / n``.

    Definition 1 of paper 000. Exact: a step function that is right-continuous
    (``d_i <= eps`` counts, inclusive) and changes only at the distances.

    Args:
      distances: ``(n,)`` minimal adversarial distances, ``>= 0``; ``0`` for a
        misclassified point (counts at every ``eps >= 0``), ``inf`` for a point
        with no adversarial (never counts). NaN is rejected.
      eps: a threshold or ``(m,)`` thresholds, finite and ``>= 0``, any order.

    Returns:
      float32 values ``count / n`` in ``[0, 1]`` (to one ulp) with the shape of ``eps``.

    Raises:
      ValueError: empty/NaN/negative ``distances``; NaN/inf/negative ``eps``.

    Examples:
      >>> import numpy as np
      >>> robustness_curve(np.array([0., 1., np.inf, 2.]), np.array([0., 1., 5.])).tolist()
      [0.25, 0.5, 0.75]
    """
    d = _check_distances(distances)
    e = _check_thresholds(eps)
    return _step_function(d, e)


def robust_error(distances: Any, eps: Any) -> jax.Array:
    """Point-wise robust error at the given thresholds: ``R(eps)`` (Definition 1)."""
    return robustness_curve(distances, eps)


def robust_accuracy(distances: Any, eps: Any) -> jax.Array:
    """Point-wise robust accuracy ``1 - R(eps)``: the fraction with ``d > eps``."""
    return 1.0 - robustness_curve(distances, eps)


def margin_curve(distances: Any, eps: Any, correct: Optional[Any] = None) -> jax.Array:
    """The margin curve ``L'(eps)`` of paper 001, eqs. 4 and 7.

    Semantics:
      * ``correct=None``: ``distances[i]`` is the distance from ``x_i`` to the
        decision boundary of ``f`` measured from ``f(x_i)`` (eq. 11; for a
        misclassified point, how far it must move for the prediction to change,
        e.g. an attack run with labels ``f(x)``). The result is exactly eq. 4,
        ``#{i : d_i <= eps} / n`` over *all* points, and ``L'(0) = 0`` unless a
        point lies on the boundary.
      * ``correct`` given (``(n,)`` bool, ``f(x_i) = y_i``): the boundary
        distance of misclassified points is taken as *unknown* (their entries
        are ignored; e.g. the ``0`` that attacks and ``linear_distance(..., y)``
        return). The result is ``#{i : correct_i and d_i <= eps} / n``, the
        weight of the set B(eps) of eq. 9 of paper 000, a lower bound on eq. 4
        (equal when every point is correct). It satisfies exactly

            robustness_curve(d, eps) = mean(~correct) + margin_curve(d, eps, correct)

        whenever ``d_i = 0`` for the misclassified points (eq. 13).

    Args:
      distances: ``(n,)`` boundary distances, ``>= 0``, ``inf`` allowed.
      eps: a threshold or ``(m,)`` thresholds, finite and ``>= 0``.
      correct: optional ``(n,)`` boolean mask of correctly classified points.

    Returns:
      float32 values in ``[0, 1]`` with the shape of ``eps``.
    """
    d = _check_distances(distances)
    e = _check_thresholds(eps)
    if correct is not None:
        mask = _check_mask(correct, d.shape[0])
        d = jnp.where(mask, d, jnp.inf)
    return _step_function(d, e)


# ---------------------------------------------------------------------------
# intersections
# ---------------------------------------------------------------------------


def _order_flips(sign: np.ndarray) -> np.ndarray:
    """Indices where the strict order changes, stretches of equality skipped."""
    nz = np.flatnonzero(sign)
    s = sign[nz]
    return nz[1:][s[1:] != s[:-1]]


def curve_intersections(eps: Any, curve_a: Any, curve_b: Any, atol: float = 0.0) -> np.ndarray:
    """Thresholds at which the order of two sampled curves flips.

    With ``s_k = sign(a_k - b_k)`` (``0`` when ``|a_k - b_k| <= atol``), a flip
    is a change from ``a < b`` to ``a > b`` or back, possibly through a stretch
    of equality (ties alone are not a flip). For each flip the returned value is
    ``eps[k]`` at the first sample where the *new* strict order holds.

    On a grid the answer is only as fine as the grid; for curves of distances use
    :func:`exact_curve_intersections`, which is exact.

    Args:
      eps: ``(m,)`` strictly increasing thresholds.
      curve_a, curve_b: ``(m,)`` curve values at ``eps``.
      atol: differences up to ``atol`` count as ties.

    Returns:
      numpy float array of the thresholds where the new order starts (may be empty).
    """
    e = np.asarray(_check_thresholds(eps, "eps"), dtype=np.float64).reshape(-1)
    if e.size > 1 and not np.all(np.diff(e) > 0):
        raise ValueError("eps: expected strictly increasing thresholds")
    a = np.asarray(check_array(curve_a, "curve_a", ndim=1), dtype=np.float64)
    b = np.asarray(check_array(curve_b, "curve_b", ndim=1), dtype=np.float64)
    for name, c in (("curve_a", a), ("curve_b", b)):
        if c.shape != e.shape:
            raise ValueError(f"{name}: expected shape {e.shape} to match eps, got {c.shape}")
    atol = float(atol)
    if not (atol >= 0 and math.isfinite(atol)):
        raise ValueError(f"atol: expected a finite number >= 0, got {atol!r}")
    diff = a - b
    sign = np.where(np.abs(diff) <= atol, 0, np.sign(diff)).astype(np.int8)
    return e[_order_flips(sign)]


def exact_curve_intersections(dist_a: Any, dist_b: Any) -> np.ndarray:
    """Exactly where the ranking of two models' robustness curves flips.

    Both empirical curves are right-continuous step functions that change only
    at their distance values, so the order of the two is constant on each
    interval ``[u_k, u_{k+1})`` of the sorted union ``u`` of ``{0}`` and all
    finite distances. Evaluating both curves at ``u`` decides the order
    everywhere; the result is the smallest ``eps`` at which each new strict
    order begins (exact, not grid-limited).

    Args:
      dist_a, dist_b: ``(n_a,)`` and ``(n_b,)`` distances of two models (the
        same or different point sets), as for :func:`robustness_curve`.

    Returns:
      numpy float array of thresholds (may be empty), increasing.
    """
    da = _check_distances(dist_a, "dist_a")
    db = _check_distances(dist_b, "dist_b")
    both = np.concatenate([np.zeros(1, np.float32), np.asarray(da), np.asarray(db)])
    knots = np.unique(both[np.isfinite(both)])
    # compare count_a / n_a with count_b / n_b exactly, in integers
    ca = np.asarray(_counts(da, jnp.asarray(knots)), dtype=np.int64) * db.shape[0]
    cb = np.asarray(_counts(db, jnp.asarray(knots)), dtype=np.int64) * da.shape[0]
    sign = np.sign(ca - cb).astype(np.int8)
    return knots[_order_flips(sign)].astype(np.float64)


# ---------------------------------------------------------------------------
# uncertainty and exact knots
# ---------------------------------------------------------------------------


def dkw_band(curve: Any, n: int, alpha: float = 0.05) -> Tuple[jax.Array, jax.Array]:
    """Dvoretzky-Kiefer-Wolfowitz confidence band for an empirical curve.

    An empirical robustness curve is the empirical CDF of ``n`` i.i.d.
    distances, so with probability at least ``1 - alpha`` the true curve lies
    within ``eps_n = sqrt(log(2 / alpha) / (2 n))`` of it *at every threshold
    simultaneously* (DKW inequality with Massart's constant).

    Args:
      curve: ``(m,)`` (or scalar) empirical curve values in ``[0, 1]``.
      n: number of points the curve was computed from.
      alpha: miscoverage level in ``(0, 1)``.

    Returns:
      ``(lower, upper)``, float32 with the shape of ``curve``, clipped to ``[0, 1]``.
    """
    c = check_array(np.float32(curve) if np.isscalar(curve) else curve, "curve")
    if is_concrete(c):
        arr = np.asarray(c)
        if (arr < 0).any() or (arr > 1).any():
            raise ValueError(f"curve: values must lie in [0, 1], got [{arr.min()}, {arr.max()}]")
    n = check_positive_int(n, "n")
    try:
        alpha = float(alpha)
    except (TypeError, ValueError):
        raise ValueError(f"alpha: expected a number in (0, 1), got {alpha!r}") from None
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: expected a number in (0, 1), got {alpha!r}")
    half_width = math.sqrt(math.log(2.0 / alpha) / (2.0 * n))
    return jnp.clip(c - half_width, 0.0, 1.0), jnp.clip(c + half_width, 0.0, 1.0)


def curve_points(distances: Any) -> Tuple[np.ndarray, np.ndarray]:
    """The exact knots of an empirical robustness curve.

    Returns ``(knots, values)``: the sorted distinct finite distances and
    ``values[k] = R(knots[k]) = #{i : d_i <= knots[k]} / n``. The curve is
    ``0`` on ``[0, knots[0])``, ``values[k]`` on ``[knots[k], knots[k+1])`` and
    ``values[-1]`` (``< 1`` when some distances are ``inf``) from the last
    knot on, i.e. ``drawstyle='steps-post'``.

    Args:
      distances: ``(n,)`` distances, as for :func:`robustness_curve`.

    Returns:
      numpy arrays ``knots`` (float32 values) and ``values`` (float64), both
      of length ``#distinct finite distances`` (possibly 0).
    """
    d = np.asarray(_check_distances(distances))
    knots, counts = np.unique(d[np.isfinite(d)], return_counts=True)
    return knots, np.cumsum(counts) / d.shape[0]


__all__ = [
    "curve_intersections",
    "curve_points",
    "dkw_band",
    "exact_curve_intersections",
    "margin_curve",
    "robust_accuracy",
    "robust_error",
    "robustness_curve",
]
