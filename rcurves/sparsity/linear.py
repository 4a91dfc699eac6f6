"""Exact adversarial sparsity of a binary linear classifier (paper 004, closed forms).

For ``sign(w.x + b)`` the adversarial set at radius eps is a half-space, so
the smallest cap angle (l_2) and the fewest free coordinates (l_inf) per
direction have closed forms; they test the estimators of
:mod:`rcurves.sparsity.estimators`.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from attacks import checks
from attacks.precision import exact_precision



def _linear_inputs(w, b, x, eps, u, y):
    """Validated ``(w (d,), b (), x (n, d), eps (n,), u (n, D, d), y (n,) or -1s)``."""
    w = checks.check_array(w, "w", min_ndim=1).reshape(-1)
    x = checks.check_array(x, "x", min_ndim=2)
    n, d = x.shape[0], int(math.prod(x.shape[1:]))
    shape = tuple(x.shape[1:])
    if w.shape[0] != d:
        raise ValueError(f"w: expected {d} weights to match x of shape {tuple(x.shape)}, got {w.shape[0]}")
    if checks.is_concrete(w) and not np.any(np.asarray(w) != 0):
        raise ValueError("w: expected a non-zero normal vector (w = 0 has no boundary)")
    b = checks.check_array(np.asarray(b, np.float32).reshape(()), "b", ndim=0)
    eps = checks.check_eps(eps, n, "eps")
    u = checks.check_array(u, "u", min_ndim=2)
    if u.ndim == x.ndim and tuple(u.shape[1:]) == shape:
        u = jnp.broadcast_to(u.reshape(1, u.shape[0], d), (n, u.shape[0], d))
    elif u.ndim == x.ndim + 1 and u.shape[0] == n and tuple(u.shape[2:]) == shape:
        u = u.reshape(n, u.shape[1], d)
    else:
        raise ValueError(f"u: expected shape (D, *{shape}) or ({n}, D, *{shape}), got {tuple(u.shape)}")
    if checks.is_concrete(u) and bool(jnp.any(jnp.sum(jnp.square(u), axis=-1) == 0)):
        raise ValueError("u: every direction must be non-zero")
    y = jnp.full((n,), -1, jnp.int32) if y is None else checks.check_labels(y, n, "y", 2)
    return w, b, x.reshape(n, d), eps, u, y


@jax.jit
@exact_precision
def _linear_l2_core(w, b, x, eps, u, y):
    s = x @ w + b
    wn = jnp.sqrt(jnp.sum(w * w))
    v = jnp.where(s > 0, -1.0, 1.0)[:, None] * (w / wn)[None, :]      # (n, d)
    uh = u / jnp.linalg.norm(u, axis=-1, keepdims=True)
    c = jnp.einsum("nkd,nd->nk", uh, v)
    sn = jnp.linalg.norm(uh - c[..., None] * v[:, None, :], axis=-1)
    phi = jnp.arctan2(sn, c)
    reach = eps * wn
    ok = (y < 0) | ((s > 0).astype(jnp.int32) == y)
    broken = jnp.where(s > 0, s <= reach, -s < reach) & ok
    beta = jnp.arccos(jnp.clip(jnp.abs(s) / jnp.maximum(reach, 1e-30), 0.0, 1.0))
    out = jnp.maximum(0.0, phi - beta[:, None])
    return jnp.where(broken[:, None], out, jnp.nan)


@jax.jit
@exact_precision
def _linear_linf_core(w, b, x, eps, u, sigma, y):
    s = x @ w + b
    cls = (s > 0).astype(jnp.int32)
    wp = w[sigma]                                                     # (n, D, d) in sigma order
    up = jnp.take_along_axis(u, sigma, axis=-1)
    e = eps[:, None, None]
    fixed = e * wp * up
    zero = jnp.zeros(fixed.shape[:-1] + (1,))
    tail = jnp.concatenate([jnp.cumsum(fixed[..., ::-1], axis=-1)[..., ::-1], zero], axis=-1)
    head = jnp.concatenate([zero, jnp.cumsum(e * jnp.abs(wp), axis=-1)], axis=-1)
    sgn = jnp.where(cls == 1, -1.0, 1.0)[:, None, None]
    sm = s[:, None, None] + tail + sgn * head                         # (n, D, d + 1): m = 0..d
    cross = jnp.where(cls[:, None, None] == 1, sm <= 0, sm > 0)
    ok = (y < 0) | (cls == y)
    m = jnp.argmax(cross, axis=-1).astype(jnp.float32)
    return jnp.where(jnp.any(cross, axis=-1) & ok[:, None], m, jnp.nan)


@exact_precision
def linear_l2_sparsity(w, b, x, eps, u, y=None) -> jax.Array:
    """Exact angular sparsity of ``[w.x + b > 0]`` in each direction ``u``.

    Derivation. Let ``s = w.x + b``. A point predicted 1 (``s > 0``) is broken
    by ``delta`` iff ``s + w.delta <= 0``; on the sphere ``||delta|| = eps``,
    ``w.delta = eps ||w|| cos angle(delta, w) = -eps ||w|| cos angle(delta, -w)``,
    so the adversarial set is the cap around ``v = -w/||w||``

        Adv = { angle(delta, v) <= beta },  cos(beta) = s / (eps ||w||),

    non-empty iff ``s <= eps ||w||``. A point predicted 0 (``s <= 0``) is
    broken iff ``w.delta > -s = |s|``: the (open) cap around ``v = +w/||w||``
    with ``cos(beta) = |s| / (eps ||w||)``, non-empty iff ``|s| < eps ||w||``.
    Two caps ``Sc(u, alpha)`` and ``Sc(v, beta)`` meet iff
    ``angle(u, v) <= alpha + beta`` (the great circle through ``u`` and ``v``
    carries the nearest points), so the smallest ``alpha`` is

        AS(u) = max(0, angle(u, v) - beta).

    Args:
      w: ``(d,)`` (or the shape of one input); b: scalar.
      x: ``(n, *shape)``.
      eps: l_2 radius, scalar or ``(n,)``.
      u: directions ``(D, *shape)`` (shared) or ``(n, D, *shape)``; any
        non-zero vectors.
      y: optional labels; misclassified points get nan (as the estimator).

    Returns:
      ``(n, D)`` angles in radians; nan where the point is robust at ``eps``
      (or misclassified).
    """
    return _linear_l2_core(*_linear_inputs(w, b, x, eps, u, y))


@exact_precision
def linear_linf_sparsity(w, b, x, eps, u, sigma, y=None) -> jax.Array:
    """Exact l_inf sparsity of ``[w.x + b > 0]`` for each vertex ``u`` and permutation ``sigma``.

    With ``sigma[:m]`` free in ``[-eps, eps]`` and the rest at ``eps u``, the
    score ``s + w.delta`` is extremal at ``delta_i = -eps sign(w_i)`` on free
    coordinates (for a point predicted 1; ``+eps sign(w_i)`` for class 0):

        s(m) = s + eps sum_{k >= m} w_{sigma k} u_{sigma k} -+ eps sum_{k < m} |w_{sigma k}|,

    monotone in ``m``; the sparsity is the smallest ``m`` in ``{0, ..., d}``
    with ``s(m) <= 0`` (class 1) or ``s(m) > 0`` (class 0).

    Args:
      w, b, x, eps, y: as :func:`linear_l2_sparsity` (eps in l_inf).
      u: vertices ``(D, *shape)`` or ``(n, D, *shape)``, entries +-1.
      sigma: permutations ``(D, d)`` or ``(n, D, d)`` of the flat indices.

    Returns:
      ``(n, D)`` float; nan where even ``m = d`` does not cross (robust) or the
      point is misclassified.
    """
    w, b, x, eps, u, y = _linear_inputs(w, b, x, eps, u, y)
    n, n_dir, d = u.shape
    if checks.is_concrete(u) and not bool(jnp.all(jnp.abs(u) == 1.0)):
        raise ValueError("u: expected vertices with entries in {-1, +1}")
    sg = np.asarray(sigma) if checks.is_concrete(sigma) else sigma
    if not np.issubdtype(np.dtype(sg.dtype), np.integer):
        raise ValueError(f"sigma: expected integer flat indices, got dtype {sg.dtype}")
    want = (n, n_dir, d)
    if tuple(sg.shape) == (n_dir, d):
        sg = np.broadcast_to(sg, want) if isinstance(sg, np.ndarray) else jnp.broadcast_to(sg, want)
    elif tuple(sg.shape) != want:
        raise ValueError(f"sigma: expected shape ({n_dir}, {d}) or {want}, got {tuple(sg.shape)}")
    if isinstance(sg, np.ndarray) and not np.array_equal(np.sort(sg, axis=-1),
                                                         np.broadcast_to(np.arange(d), want)):
        raise ValueError(f"sigma: every row must be a permutation of range({d})")
    return _linear_linf_core(w, b, x, eps, u, jnp.asarray(sg, jnp.int32), y)
