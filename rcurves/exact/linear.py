"""Exact l_p geometry of linear classifiers.

For a binary linear classifier ``f(x) = [w.x + b > 0]`` the minimal l_p
perturbation that reaches the decision boundary has a closed form (Lemma 1 of
paper 000, Appendix B; eqs. 12-14 of paper 001):

    min{ ||delta||_p : w.(x + delta) + b = 0 } = |w.x + b| / ||w||_q,
    1/p + 1/q = 1,

attained by Eq. (3)::

    delta = -(w.x + b) / ||w||_inf * sgn(w_j) e_j,  j = argmax_i |w_i|      (p = 1)
    delta = -(w.x + b) / ||w||_q^q * (sgn(w_i) |w_i|^(1/(p-1)))_i          (p > 1)

with ``|w_i|^(1/(inf-1)) = 1``. Hence the robustness curves of one linear
classifier for two norms differ only by a scale (Theorem 2):
``R_p1(eps) = R_p2(c eps)`` with ``c = ||w||_q1 / ||w||_q2``.

A multi-class linear model ``argmax_k (W x + b)_k`` assigns class ``y`` on the
polytope ``{z : (W_y - W_j).z + b_y - b_j >= 0 for all j}``; the distance of a
point of that class to the nearest other class is the smallest distance to one
of the ``K - 1`` hyperplanes ``(W_y - W_j).z + b_y - b_j = 0``.

Conventions (shared with the rest of the toolkit): binary class 1 is
``w.x + b > 0`` (a point on the hyperplane is class 0, matching ``argmax`` of
the two logits ``[-s/2, s/2]``); distances are ``0`` for a misclassified point
(when labels are given) and ``inf`` when no boundary exists (``w = 0`` or two
identical rows of ``W``). Inputs may be numpy or jax arrays; outputs are
float32 jax arrays. ``p`` may be a float in ``[1, inf]``, ``np.inf`` or one of
``'l1'``, ``'l2'``, ``'linf'`` (a Python value, validated before tracing); it
enters the compiled programs as a float32 scalar, so computing curves for
several norms compiles once per shape.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks.checks import check_array, check_labels, check_p, is_concrete
from attacks.precision import exact_precision


# ---------------------------------------------------------------------------
# norms
# ---------------------------------------------------------------------------


def dual_exponent(p: Any, name: str = "p") -> float:
    """The Hoelder conjugate ``q`` with ``1/p + 1/q = 1`` (1 <-> inf).

    Args:
      p: an l_p exponent in ``[1, inf]`` or ``'l1' | 'l2' | 'linf'``.
      name: the argument name used in error messages.

    Returns:
      ``q`` as a Python float (``math.inf`` for ``p = 1``).
    """
    p = check_p(p, name)
    if p == 1.0:
        return math.inf
    if math.isinf(p):
        return 1.0
    return p / (p - 1.0)


@exact_precision
def lp_norm(v: jax.Array, p: Any, axis: int = -1) -> jax.Array:
    """``||v||_p`` along ``axis`` for any ``p`` in ``[1, inf]``.

    ``p`` is a Python float (branches resolved at trace time) or a scalar
    array (all branches computed, one selected; no recompilation per ``p``).
    The general case is computed as ``m * ||v / m||_p`` with ``m = max |v|``,
    so that large ``p`` neither overflows nor underflows in float32.
    """
    a = jnp.abs(v)
    if isinstance(p, (int, float)):
        if math.isinf(p):
            return jnp.max(a, axis=axis)
        if p == 1.0:
            return jnp.sum(a, axis=axis)
    m = jnp.max(a, axis=axis, keepdims=True)
    safe = jnp.where(m > 0, m, 1.0)
    general = jnp.squeeze(m, axis) * jnp.sum((a / safe) ** p, axis=axis) ** (1.0 / p)
    if isinstance(p, (int, float)):
        return general
    return jnp.where(jnp.isinf(p), jnp.squeeze(m, axis), jnp.where(p == 1.0, jnp.sum(a, axis=axis), general))


def _unit_direction(w: jax.Array, p: jax.Array) -> jax.Array:
    """Eq. (3) for a score of ``-1``: ``g`` with ``w.g = 1``, ``||g||_p = 1/||w||_q``.

    ``g`` is the cheapest l_p direction that raises ``w.x`` by one; the minimal
    perturbation of a point with score ``s`` is ``-s * g``. For ``p > 1`` it is
    written as ``sgn(u)|u|^(1/(p-1)) / (m ||u||_q^q)`` with ``u = w / m``,
    ``m = ||w||_inf`` (algebraically equal to Eq. (3), stable for any ``p``;
    ``|u|^0 = 1`` at ``p = inf``); for ``p = 1`` it is the unit vector of the
    first ``argmax |w_i|``. ``p`` is a scalar array. Zero for ``w = 0``.
    """
    a = jnp.abs(w)
    m = jnp.max(a)
    safe_m = jnp.where(m > 0, m, 1.0)
    j = jnp.argmax(a)
    one_hot = jnp.zeros_like(w).at[j].set(jnp.sign(w[j]) / safe_m)
    expo = jnp.where(jnp.isinf(p), 0.0, 1.0 / jnp.where(p > 1.0, p - 1.0, 1.0))
    u = w / safe_m
    num = jnp.sign(u) * jnp.abs(u) ** expo
    den = safe_m * jnp.sum(jnp.abs(u) * jnp.abs(num))  # m * ||u||_q^q >= m > 0
    g = jnp.where(p == 1.0, one_hot, num / jnp.where(den > 0, den, 1.0))
    return jnp.where(m > 0, g, 0.0)


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------


def _as_float_array(a: Any, name: str, **kw) -> jax.Array:
    if isinstance(a, (bool, np.bool_)):
        raise ValueError(f"{name}: expected a number or a floating array, got {a!r}")
    if isinstance(a, (int, float, np.integer, np.floating)):
        a = np.float32(a)
    return check_array(a, name, allow_empty=True, **kw)


def _check_model(w: Any, b: Any) -> Tuple[jax.Array, jax.Array, bool]:
    """Return ``(w, b, multiclass)`` with ``b`` a scalar (binary) or ``(K,)``."""
    w = check_array(w, "w")
    if w.ndim not in (1, 2):
        raise ValueError(f"w: expected shape (d,) or (K, d), got {tuple(w.shape)}")
    if w.shape[-1] == 0:
        raise ValueError(f"w: expected a non-empty array, got shape {tuple(w.shape)}")
    b = _as_float_array(b, "b")
    if w.ndim == 1:
        if b.size != 1 or b.ndim > 1:
            raise ValueError(f"b: expected a scalar for w of shape (d,), got shape {tuple(b.shape)}")
        return w, b.reshape(()), False
    k = w.shape[0]
    if k < 2:
        raise ValueError(f"w: a multi-class W needs K >= 2 rows, got shape {tuple(w.shape)}")
    if tuple(b.shape) != (k,):
        raise ValueError(f"b: expected shape ({k},) for W of shape {tuple(w.shape)}, got {tuple(b.shape)}")
    return w, b, True


def _check_x(x: Any, d: int, name: str = "x") -> jax.Array:
    x = check_array(x, name, min_ndim=2)
    flat = int(np.prod(x.shape[1:]))
    if flat != d:
        raise ValueError(
            f"{name}: expected points of {d} features (to match w) after flattening, "
            f"got shape {tuple(x.shape)}"
        )
    return x


# ---------------------------------------------------------------------------
# jitted cores: p and q are float32 scalars, so one compilation per shape
# serves every norm
# ---------------------------------------------------------------------------


def _rowdot(flat: jax.Array, w: jax.Array) -> jax.Array:
    """``flat @ w`` as an elementwise product and a row reduction.

    Unlike a matrix product, whose kernel (and so its rounding) depends on
    the number of rows, each row's result here depends only on that row: the
    answer for a point is bit-identical whatever the batch or device split.
    ``w`` is ``(d,)`` -> ``(n,)`` or ``(K, d)`` -> ``(n, K)``.
    """
    if w.ndim == 1:
        return jnp.sum(flat * w[None, :], axis=1)
    return jnp.sum(flat[:, None, :] * w[None, :, :], axis=2)


def _exponents(p: Any, name: str = "p") -> Tuple[jax.Array, jax.Array]:
    """Validated ``(p, q)`` as float32 scalars for the jitted cores."""
    pf = check_p(p, name)
    return jnp.float32(pf), jnp.float32(dual_exponent(pf, name))


@jax.jit
@exact_precision
def _binary_distance(w, b, x, q, y):
    s = _rowdot(x.reshape(x.shape[0], -1), w) + b
    nrm = lp_norm(w, q)
    dist = jnp.where(nrm > 0, jnp.abs(s) / jnp.where(nrm > 0, nrm, 1.0), jnp.inf)
    if y is None:
        return dist
    correct = (s > 0).astype(jnp.int32) == y
    return jnp.where(correct, dist, 0.0)


def _pairwise_dual_norms(w: jax.Array, q: jax.Array) -> jax.Array:
    """``N[k, j] = ||W_k - W_j||_q``, shape ``(K, K)``, one row at a time."""
    return jax.lax.map(lambda wk: lp_norm(wk[None, :] - w, q), w)


def _multiclass_geometry(w, b, x, y, q):
    """Per point: distance to each other class's hyperplane and correctness.

    Returns ``ratios (n, K)`` (inf for ``j = y`` and for unreachable classes),
    ``margins (n, K)`` = ``z_y - z_j`` and ``correct (n,)``.
    """
    logits = _rowdot(x.reshape(x.shape[0], -1), w) + b
    z_y = jnp.take_along_axis(logits, y[:, None], axis=1)
    margins = z_y - logits
    norms = _pairwise_dual_norms(w, q)[y]  # (n, K)
    k = w.shape[0]
    other = jnp.arange(k)[None, :] != y[:, None]
    ok = other & (norms > 0)
    ratios = jnp.where(ok, margins / jnp.where(norms > 0, norms, 1.0), jnp.inf)
    correct = jnp.argmax(logits, axis=1) == y
    return ratios, margins, correct


@jax.jit
@exact_precision
def _multiclass_distance(w, b, x, y, q):
    ratios, _, correct = _multiclass_geometry(w, b, x, y, q)
    return jnp.where(correct, jnp.min(ratios, axis=1), 0.0)


@jax.jit
@exact_precision
def _binary_perturbation(w, b, x, p, y):
    flat = x.reshape(x.shape[0], -1)
    s = _rowdot(flat, w) + b
    delta = -s[:, None] * _unit_direction(w, p)[None, :]
    if y is not None:
        correct = (s > 0).astype(jnp.int32) == y
        delta = jnp.where(correct[:, None], delta, 0.0)
    return delta.reshape(x.shape)


@jax.jit
@exact_precision
def _multiclass_perturbation(w, b, x, y, p, q):
    ratios, margins, correct = _multiclass_geometry(w, b, x, y, q)
    j = jnp.argmin(ratios, axis=1)
    w_eff = w[y] - w[j]  # (n, d): the hyperplane z_y = z_j
    s_eff = jnp.take_along_axis(margins, j[:, None], axis=1)[:, 0]
    g = jax.vmap(lambda v: _unit_direction(v, p))(w_eff)
    delta = -s_eff[:, None] * g
    keep = correct & jnp.isfinite(jnp.min(ratios, axis=1))
    delta = jnp.where(keep[:, None], delta, 0.0)
    return delta.reshape(x.shape)


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------


@exact_precision
def linear_distance(w: Any, b: Any, x: Any, p: Any, y: Optional[Any] = None) -> jax.Array:
    """Exact minimal l_p distance of each point to a linear decision boundary.

    Lemma 1 (paper 000, App. B): ``|w.x + b| / ||w||_q`` with ``1/p + 1/q = 1``.

    Args:
      w: ``(d,)`` normal of a binary classifier ``[w.x + b > 0]``, or ``(K, d)``
        weights of a multi-class model ``argmax(W x + b)``.
      b: scalar offset (binary) or ``(K,)`` biases.
      x: ``(n, d)`` points, or ``(n, *shape)`` with ``prod(shape) = d`` (flattened).
        An ``np.memmap`` (e.g. ``np.load(path, mmap_mode='r')``) is processed
        in chunks of about 48 MB, so memory stays bounded whatever ``n``.
      p: l_p exponent in ``[1, inf]`` (float, ``np.inf``, ``'l1' | 'l2' | 'linf'``).
      y: optional ``(n,)`` integer labels. Binary: ``{0, 1}`` with class 1 iff
        ``w.x + b > 0``; without ``y`` the plain distance to the hyperplane is
        returned. Multi-class: required, in ``[0, K)``.

    Returns:
      ``(n,)`` float32 distances. With labels: ``0`` for misclassified points;
      multi-class: ``min_{j != y} (z_y - z_j) / ||W_y - W_j||_q`` for correct
      points (``inf`` terms for rows ``W_j = W_y``). ``inf`` when ``w = 0``.

    Raises:
      ValueError: on bad shapes, NaN/inf inputs, ``p < 1`` or labels out of range.

    Examples:
      >>> import numpy as np
      >>> float(linear_distance(np.array([3., 4.]), 0., np.array([[3., 4.]]), 2)[0])
      5.0
    """
    _, q = _exponents(p)
    w, b, multi = _check_model(w, b)
    if isinstance(x, np.memmap):
        return _streamed_distance(w, b, x, p, y, multi)
    x = _check_x(x, w.shape[-1])
    n = x.shape[0]
    if multi:
        if y is None:
            raise ValueError("y: labels are required for a multi-class W of shape (K, d)")
        y = check_labels(y, n, "y", w.shape[0])
        return _multiclass_distance(w, b, x, y, q)
    if y is not None:
        y = check_labels(y, n, "y", 2)
    return _binary_distance(w, b, x, q, y)


# Bytes per chunk when x is a memory map. Above glibc's largest dynamic mmap
# threshold (32 MiB), so each chunk's buffers are fresh mappings returned to
# the system when freed: smaller chunks land in malloc arenas, which XLA's
# threads can fragment until the process grows with n (measured: 1M MNIST
# rows in 3 MB chunks peaked 20-800 MB above the start, in 48 MB chunks ~70 MB).
_STREAM_BYTES = 48 << 20


def _streamed_distance(w, b, x: np.memmap, p, y, multi: bool) -> jax.Array:
    """:func:`linear_distance` of a memory-mapped ``x``, chunk by chunk.

    Converting the whole map to one device array would read the file into
    memory; instead ``rcurves.data.streaming.map_points`` copies about
    ``_STREAM_BYTES`` of rows at a time and releases the map's pages, so
    memory stays bounded by the chunk whatever ``n``. Each row's distance depends only on that row
    (``_rowdot``), so the answer equals the in-memory one.
    """
    from rcurves.data.streaming import map_points

    if x.ndim < 2:
        raise ValueError(f"x: expected at least 2 dimensions, got shape {tuple(x.shape)}")
    check_array(x[:1], "x", allow_empty=True)  # dtype only; values are checked chunk by chunk
    _check_x(np.zeros((1,) + tuple(x.shape[1:]), np.float32), w.shape[-1])
    n = x.shape[0]
    if n == 0:
        raise ValueError(f"x: expected a non-empty array, got shape {tuple(x.shape)}")
    rows = min(n, max(1, _STREAM_BYTES // max(1, x.itemsize * int(np.prod(x.shape[1:])))))
    if multi and y is None:
        raise ValueError("y: labels are required for a multi-class W of shape (K, d)")
    if y is not None:
        y = np.asarray(check_labels(y, n, "y", w.shape[0] if multi else 2))
        out = map_points(lambda xc, yc: linear_distance(w, b, xc, p, yc), x, y, chunk_size=rows)
    else:
        out = map_points(lambda xc: linear_distance(w, b, xc, p), x, chunk_size=rows)
    return jnp.asarray(out)


@exact_precision
def linear_perturbation(w: Any, b: Any, x: Any, p: Any, y: Optional[Any] = None) -> jax.Array:
    """The minimal l_p perturbation onto a linear decision boundary (Eq. (3)).

    Binary ``w (d,)``: ``delta = -(w.x + b) * g`` with ``g`` from Eq. (3), so
    ``w.(x + delta) + b = 0`` and ``||delta||_p = |w.x + b| / ||w||_q``. For
    ``p = 1`` only the coordinate ``argmax_i |w_i|`` moves (first one on ties);
    for ``p = inf`` every coordinate moves by the same amount ``|s| / ||w||_1``.
    Multi-class ``W (K, d)`` (``y`` required): the minimiser towards the nearest
    other class ``j*``, which ends on the hyperplane ``z_y = z_{j*}`` (the
    closure of class ``y``'s region; a tie that ``argmax`` breaks by index).

    Args:
      w, b, x, p, y: as in :func:`linear_distance`.

    Returns:
      ``delta`` with the shape of ``x``, float32. Rows are zero for
      misclassified points (when ``y`` is given) and where the distance is
      ``inf`` (no boundary to reach).

    Raises:
      ValueError: as :func:`linear_distance`.
    """
    pf, q = _exponents(p)
    w, b, multi = _check_model(w, b)
    x = _check_x(x, w.shape[-1])
    n = x.shape[0]
    if multi:
        if y is None:
            raise ValueError("y: labels are required for a multi-class W of shape (K, d)")
        y = check_labels(y, n, "y", w.shape[0])
        return _multiclass_perturbation(w, b, x, y, pf, q)
    if y is not None:
        y = check_labels(y, n, "y", 2)
    return _binary_perturbation(w, b, x, pf, y)


@exact_precision
def linear_curve_scale(w: Any, p1: Any, p2: Any) -> jax.Array:
    """Theorem 2's scale ``c = ||w||_q1 / ||w||_q2``: ``R_p1(eps) = R_p2(c eps)``.

    Equivalently ``d_p2(x) = c * d_p1(x)`` for every point, since
    ``d_p(x) = |w.x + b| / ||w||_q``.

    Args:
      w: ``(d,)`` normal of a binary linear classifier, not all zero.
      p1, p2: l_p exponents in ``[1, inf]``.

    Returns:
      A float32 scalar ``c > 0``.

    Examples:
      >>> import numpy as np
      >>> float(linear_curve_scale(np.ones(4), "linf", "l2"))  # ||w||_1 / ||w||_2
      2.0
    """
    q1, q2 = dual_exponent(p1, "p1"), dual_exponent(p2, "p2")
    w = check_array(w, "w", ndim=1)
    if is_concrete(w) and not np.any(np.asarray(w) != 0):
        raise ValueError("w: expected a non-zero normal vector (w = 0 has no boundary)")
    return lp_norm(w, q1) / lp_norm(w, q2)


def linear_logits_fn(w: Any, b: Any) -> Callable[[jax.Array], jax.Array]:
    """The binary classifier ``[w.x + b > 0]`` as a two-logit model.

    Returns ``x -> [-(w.x + b)/2, (w.x + b)/2]`` for ``x (n, *shape)``, so that
    ``argmax`` is class 1 exactly when ``w.x + b > 0`` and the logit margin is
    ``|w.x + b|`` (the form in which attacks see a linear classifier).
    """
    w, b, multi = _check_model(w, b)
    if multi:
        raise ValueError(f"w: expected shape (d,) for a binary model, got {tuple(w.shape)}")

    def logits_fn(x: jax.Array) -> jax.Array:
        s = x.reshape(x.shape[0], -1) @ w + b
        return jnp.stack([-0.5 * s, 0.5 * s], axis=-1)

    return logits_fn


def multiclass_logits_fn(w: Any, b: Any) -> Callable[[jax.Array], jax.Array]:
    """The multi-class linear model ``x -> x_flat @ W.T + b`` (logits ``(n, K)``)."""
    w, b, multi = _check_model(w, b)
    if not multi:
        raise ValueError(f"w: expected shape (K, d) for a multi-class model, got {tuple(w.shape)}")

    def logits_fn(x: jax.Array) -> jax.Array:
        return x.reshape(x.shape[0], -1) @ w.T + b

    return logits_fn


__all__ = [
    "dual_exponent",
    "linear_curve_scale",
    "linear_distance",
    "linear_logits_fn",
    "linear_perturbation",
    "lp_norm",
    "multiclass_logits_fn",
]
