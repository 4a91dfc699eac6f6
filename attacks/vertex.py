"""l_inf PGD on a subset of free dimensions around a vertex (paper 004, Sec. 4.2, eqs. 7 and 16).

Given a vertex ``u in {-1, +1}^d`` of the l_inf cube, a permutation ``sigma``
of the flat coordinates and a number ``m`` of free dimensions, the admissible
perturbations of one point are

    Delta^m = { delta : delta_{sigma(k)} = eps u_{sigma(k)} for k >= m,
                        |delta_{sigma(k)}| <= eps           for k <  m }

(0-based ``k``: the free coordinates are ``sigma[:m]``). Paper 004's eq. 16
re-fixes the constrained coordinates after the usual l_inf projection; a flaw
of the reference implementation let the free coordinates grow past ``eps``.
Here the projection is the exact Euclidean one onto the (convex, box-shaped)
``Delta^m``: free coordinates are clipped to ``[-eps, eps]``, the others set
to ``eps u``, at every step.

**Bounds.** With an input domain ``[lo, hi]``, the admissible set of the
point is the box ``B = [max(lo, x - eps), min(hi, x + eps)]`` (l_inf ball n
domain), whose vertex ``u`` has coordinate ``x_i + eps u_i`` where that is in
the domain and the domain's face ``lo``/``hi`` where it is not. Fixed
coordinates are set to that vertex and free ones range over ``B``; without
bounds this is exactly ``Delta^m``. So every returned point satisfies every
constraint exactly, with no clipping afterwards. (Demanding ``x_i + eps u_i``
itself would make most lanes of a point with saturated pixels — most of
MNIST — infeasible for every ``m < d``.)

All arithmetic is in input space: ``x_adv = where(free, clip(x_cand, A, B),
V)`` with ``A, B`` the box and ``V = clip(x + eps u, lo, hi)``, so ``x_adv ==
x + eps u`` bitwise on fixed coordinates (unbounded) and ``x - eps <= x_adv
<= x + eps`` on free ones, in float32.

The ascent is APGD-style (``attacks.cap.constrained_lane``) with the l_inf
step ``eta sign(g)`` and initial step ``2 eps``.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks import checks
from attacks.cap import CapConfig, ConstrainedResult, check_directions, constrained_lane
from attacks.engine import single
from attacks.norms import step_linf
from attacks.xla import program


def ranks(sigma: jax.Array) -> jax.Array:
    """Inverse permutation: ``rank[sigma[k]] = k`` (``(d,)`` int32)."""
    d = sigma.shape[0]
    return jnp.zeros((d,), jnp.int32).at[sigma].set(jnp.arange(d, dtype=jnp.int32))


def vertex_box(x, eps, u, bounds):
    """``(A, B, V)``: the admissible box ``[A, B]`` and its vertex ``V`` in input space."""
    lo_b = x - eps
    hi_b = x + eps
    v = x + eps * u
    if bounds is not None:
        lo_b = jnp.maximum(lo_b, bounds[0])
        hi_b = jnp.minimum(hi_b, bounds[1])
        v = jnp.clip(v, bounds[0], bounds[1])
    return lo_b, hi_b, v


def free_mask(rank: jax.Array, m, shape) -> jax.Array:
    """Boolean mask of the free coordinates ``sigma[:m]``, shape ``shape``."""
    return (rank < m).reshape(shape)


def vertex_projector(x, eps, u, rank, m, bounds) -> Callable:
    """``x_candidate -> x_adv`` projection onto the admissible set (one lane)."""
    a, b, v = vertex_box(x, eps, u, bounds)
    free = free_mask(rank, m, x.shape)
    return lambda xa: jnp.where(free, jnp.clip(xa, a, b), v)


def vertex_feasible(xa, x, eps, u, rank, m, bounds) -> jax.Array:
    """Exact check: fixed coordinates equal the vertex, free ones inside the box."""
    a, b, v = vertex_box(x, eps, u, bounds)
    free = free_mask(rank, m, x.shape)
    return jnp.all(jnp.where(free, (xa >= a) & (xa <= b), xa == v))


def m_effective(xa, x, eps, u, rank, bounds) -> jax.Array:
    """Smallest ``m`` with ``xa`` in ``Delta^m``: 1 + the largest rank of a coordinate off the vertex."""
    _, _, v = vertex_box(x, eps, u, bounds)
    off = (xa != v).reshape(-1)
    return jnp.max(jnp.where(off, rank + 1, 0))


def vertex_lane(fn1, x, y, eps, u, rank, m, start, cfg: CapConfig, bounds):
    """Vertex-constrained l_inf PGD for one (point, direction, m) lane.

    Args:
      fn1: ``(*shape) -> (K,)``; x: ``(*shape)``; y: ``()``; eps: ``()``.
      u: vertex in ``{-1, +1}`` ``(*shape)``; rank: inverse of sigma ``(d,)``.
      m: number of free coordinates ``()`` in ``[0, d]``.
      start: starting point in input space (projected first).

    Returns:
      ``(x_adv, adversarial, feasible)`` as in ``attacks.cap.constrained_lane``.
    """
    proj = vertex_projector(x, eps, u, rank, m, bounds)
    feas = lambda xa: vertex_feasible(xa, x, eps, u, rank, m, bounds)  # noqa: E731
    return constrained_lane(fn1, x, y, start, proj, feas, step_linf, cfg.initial_step * eps, cfg, bounds)


@program(static_argnames=("logits_fn", "cfg", "bounds"))
def _vertex_jit(logits_fn, x, y, eps, u, sigma, m, keys, *, cfg: CapConfig, bounds):
    fn1 = single(logits_fn)

    def point(xi, yi, ei, ui, si, mi, ki):
        start = xi + ei * jax.random.uniform(ki, xi.shape, minval=-1.0, maxval=1.0)
        return vertex_lane(fn1, xi, yi, ei, ui, ranks(si), mi, start, cfg, bounds)

    xa, adv, feas = jax.vmap(point)(x, y, eps, u, sigma, m, keys)
    la = logits_fn(xa)
    adv = adv & (jnp.argmax(la, axis=-1) != y) & jnp.all(jnp.isfinite(la), axis=-1)
    return ConstrainedResult(xa, adv, feas)


def check_vertex(u, x, name: str = "u") -> jax.Array:
    """Vertices with entries in {-1, +1}: shape of ``x`` or of one input."""
    u = check_directions(u, x, name)
    if checks.is_concrete(u) and not bool(jnp.all(jnp.abs(u) == 1.0)):
        raise ValueError(f"{name}: expected a vertex with entries in {{-1, +1}}")
    return u


def check_sigma(sigma, n: int, d: int, name: str = "sigma") -> jax.Array:
    """Permutations of ``range(d)``: ``(n, d)`` or ``(d,)`` (shared); returned ``(n, d)``."""
    if sigma is None or not hasattr(sigma, "shape"):
        sigma = np.asarray(sigma)
    if not np.issubdtype(np.dtype(sigma.dtype), np.integer):
        raise ValueError(f"{name}: expected integer flat indices, got dtype {sigma.dtype}")
    if tuple(sigma.shape) == (d,):
        sigma = jnp.broadcast_to(jnp.asarray(sigma, jnp.int32), (n, d))
    elif tuple(sigma.shape) != (n, d):
        raise ValueError(f"{name}: expected shape ({n}, {d}) or ({d},), got {tuple(sigma.shape)}")
    sigma = jnp.asarray(sigma, jnp.int32)
    if checks.is_concrete(sigma):
        srt = np.sort(np.asarray(sigma), axis=1)
        if not np.array_equal(srt, np.broadcast_to(np.arange(d), (n, d))):
            raise ValueError(f"{name}: every row must be a permutation of range({d})")
    return sigma


def check_m(m, n: int, d: int, name: str = "m") -> jax.Array:
    """Free-dimension counts in ``[0, d]``: scalar or ``(n,)`` integers."""
    if not hasattr(m, "shape"):
        m = np.asarray(m)
    if not np.issubdtype(np.dtype(m.dtype), np.integer):
        raise ValueError(f"{name}: expected integers in [0, {d}], got dtype {m.dtype}")
    if m.ndim > 1 or (m.ndim == 1 and m.shape[0] != n):
        raise ValueError(f"{name}: expected a scalar or shape ({n},), got {tuple(m.shape)}")
    if checks.is_concrete(m):
        a = np.asarray(m)
        if a.size and (a.min() < 0 or a.max() > d):
            raise ValueError(f"{name}: expected integers in [0, {d}], got range [{a.min()}, {a.max()}]")
    return jnp.broadcast_to(jnp.asarray(m, jnp.int32), (n,))


def vertex_pgd_result(
    logits_fn: Callable, x, y, eps, u, sigma, m, *, steps: int, key,
    bounds: Optional[Tuple[float, float]] = None,
) -> ConstrainedResult:
    """:func:`vertex_pgd` with its checks: ``ConstrainedResult(x_adv, adversarial, feasible)``."""
    x, y, bounds, _ = checks.check_model_inputs(logits_fn, x, y, bounds)
    n = x.shape[0]
    d = int(math.prod(x.shape[1:]))
    eps = checks.check_eps(eps, n, "eps")
    u = check_vertex(u, x)
    sigma = check_sigma(sigma, n, d)
    m = check_m(m, n, d)
    steps = checks.check_positive_int(steps, "steps")
    keys = checks.check_key(key, n)
    cfg = CapConfig(steps=steps)
    return _vertex_jit(logits_fn, x, y, eps, u, sigma, m, keys, cfg=cfg, bounds=bounds)


def vertex_pgd(
    logits_fn: Callable, x, y, eps, u, sigma, m, *, steps: int, key,
    bounds: Optional[Tuple[float, float]] = None,
) -> jax.Array:
    """l_inf PGD with only ``sigma[:m]`` free (paper 004, PGD_m).

    Maximises the logit margin over ``Delta^m`` (module docstring): the
    coordinates ``sigma[m:]`` are fixed at ``eps u`` and ``sigma[:m]`` range
    over ``[-eps, eps]``, from a random start.

    Args:
      logits_fn: ``(n, *shape) -> (n, K)``.
      x: clean inputs ``(n, *shape)``; y: labels ``(n,)``.
      eps: l_inf radius, scalar or ``(n,)``.
      u: vertex, entries in ``{-1, +1}``: shape of ``x`` or of one input.
      sigma: permutation of the flat indices ``range(d)``: ``(n, d)`` or ``(d,)``.
      m: number of free coordinates in ``[0, d]``: scalar or ``(n,)`` int.
      steps: gradient evaluations per point.
      key: PRNG key (or one per point) for the random start.
      bounds: ``(lo, hi)`` domain or None; with bounds the admissible set is
        the l_inf ball n domain and the fixed coordinates its vertex ``u``
        (``x + eps u`` clipped to the domain): see the module docstring.

    Returns:
      ``x_adv (n, *shape)``: the highest-margin adversarial iterate, else the
      highest-margin iterate; fixed coordinates equal ``x + eps u`` (clipped to
      the domain with bounds) exactly, free ones lie in ``[x - eps, x + eps]``
      (and in the domain).
    """
    return vertex_pgd_result(logits_fn, x, y, eps, u, sigma, m, steps=steps, key=key,
                             bounds=bounds).x_adv


__all__ = [
    "check_m",
    "check_sigma",
    "check_vertex",
    "m_effective",
    "ranks",
    "vertex_box",
    "vertex_feasible",
    "vertex_lane",
    "vertex_pgd",
    "vertex_pgd_result",
    "vertex_projector",
]
