"""The linear programs of the host search (HiGHS through scipy, float64 on the host).

* :func:`_exact_leaf`: a subdomain whose bound fails with no unstable unit left to split is a region where the
  network is affine; its exact smallest margin is an LP over the box with every unit's sign fixed, which
  either proves the subdomain, or gives a counterexample to re-check, or is empty;
* :func:`_second_tightened`: the second hidden layer's root bounds tightened by the LP over the first layer
  with its own cuts (``BaBConfig.second_cuts``, :func:`rcurves.certify.cutting.second_layer_bounds`), where a
  search is still open after ``bab_host.SECOND_AFTER`` subdomains.

(The root LP that separates the first layer's cuts is ``bab_cuts._root_cuts``.)
"""
from __future__ import annotations

import math
import time

import jax.numpy as jnp
import numpy as np

from rcurves.certify.bab_root import Root
from rcurves.certify.bab_settings import BaBConfig
from rcurves.nets.bounds import Prepared, _box
from rcurves.nets.layers import block_jacobian


#: An exact leaf counts as proven when the lower bound its LP's multipliers give exceeds this (logit units).
LEAF_TOL = 0.0


def _leaf_blocks(prep: Prepared):
    """Per hidden block, ``(jac (m, D_in), const (m,))`` in float64: the affine map :func:`_exact_leaf`
    composes (the dense linear part and ``prep.consts``). Built once per ``bab_host.bab_search``, on its first
    exact leaf."""
    net = prep.net
    out = []
    for k in range(len(net.blocks) - 1):
        jac = np.asarray(block_jacobian(net.blocks[k], net.shapes[k], net.shapes[k + 1]), np.float64)
        out.append((jac.reshape(jac.shape[0], -1), np.asarray(prep.consts[k], np.float64).reshape(-1)))
    return out


def _exact_leaf(blocks, root: Root, leaf_bounds, x, eps, cfg: BaBConfig, sgn=None, time_limit: float = math.inf):
    """The exact smallest margin over a subdomain with no unstable unit left, by linear programming.

    On such a subdomain every hidden unit has one state (active where its bounds are ``l >= 0``, inactive
    where ``u <= 0``), so the network is affine there and the subdomain is the polytope of the l_inf box
    (clipped to the domain) where every pre-activation has its sign: ``min_x c_r . x + d_r`` over it, per
    branched margin row ``r`` (``root.lam0``, ``root.b0``), is an LP (HiGHS, float64 on the float32 weights).

    ``blocks``: :func:`_leaf_blocks` of the network. ``sgn``: the subdomain's split signs (a split unit takes
    its split's state, whatever its bounds say);
    ``time_limit``: seconds for all its LPs (HiGHS's own limit).

    ``value`` does not rest on HiGHS's tolerances: it is the Lagrangian bound of the LP's inequality
    multipliers ``mu >= 0`` (``res.ineqlin.marginals``), ``min_{x in box} (c + A^T mu) . x - mu . b + d``,
    a lower bound on the row's margin over the polytope for any ``mu >= 0`` (weak duality), equal to the LP's
    minimum at the optimal multipliers (float64 rounding apart).

    Returns ``(value, point)``: that lower bound of the smallest margin over the rows (or, as soon as one
    row's bound is not above ``LEAF_TOL``, that row's) and the LP's minimiser of that row (``(D,)`` float64,
    in the box); ``(inf, None)``
    when the polytope is empty (no point of the ball is in the subdomain); None when the LP is not
    available (not l_inf, a unit still unstable, HiGHS failed or ran out of time)."""
    from scipy.optimize import linprog

    if cfg.bound.norm != "linf":
        return None
    xf = np.asarray(x, np.float64).reshape(-1)
    lo, hi = xf - float(eps), xf + float(eps)
    if cfg.bound.domain is not None:
        lo, hi = np.clip(lo, *cfg.bound.domain), np.clip(hi, *cfg.bound.domain)
    a_mat, a_vec = np.eye(xf.size), np.zeros(xf.size)
    rows_a, rows_b = [], []
    t_end = time.perf_counter() + time_limit
    sizes = [math.prod(np.shape(l)) for l, _ in leaf_bounds]
    split = (np.zeros(sum(sizes), np.int8) if sgn is None else np.asarray(sgn).reshape(-1))
    for k, (l, u) in enumerate(leaf_bounds):
        l, u = np.asarray(l, np.float64).reshape(-1), np.asarray(u, np.float64).reshape(-1)
        s_k = split[sum(sizes[:k]):sum(sizes[:k + 1])]
        active = np.where(s_k < 0, True, np.where(s_k > 0, False, l >= 0))
        inactive = ~active & ((s_k > 0) | (u <= 0))
        if not np.all(active | inactive):
            return None
        jac, const = blocks[k]
        z_mat, z_vec = jac @ a_mat, jac @ a_vec + const
        sign = np.where(active, -1.0, 1.0)                 # active: -z <= 0; inactive: z <= 0
        rows_a.append(sign[:, None] * z_mat)
        rows_b.append(-sign * z_vec)
        a_mat, a_vec = z_mat * active[:, None], z_vec * active
    lam = np.asarray(root.lam0, np.float64).reshape(root.lam0.shape[0], -1)
    c_rows, d_rows = lam @ a_mat, lam @ a_vec + np.asarray(root.b0, np.float64)
    a_ub, b_ub = np.concatenate(rows_a), np.concatenate(rows_b)
    best, point = math.inf, None
    for c, d in zip(c_rows, d_rows):
        left = t_end - time.perf_counter()
        if not left > 0:
            return None
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=np.stack([lo, hi], 1), method="highs",
                      options={"time_limit": left})
        if res.status == 2:                                # infeasible: the subdomain holds no point
            return math.inf, None
        if res.status != 0:
            return None
        mu = np.maximum(-np.asarray(res.ineqlin.marginals, np.float64), 0.0)
        g = c + a_ub.T @ mu
        bound = float(np.sum(np.minimum(g * lo, g * hi)) - mu @ b_ub + d)
        if bound < best:
            best, point = bound, np.clip(res.x, lo, hi)
        if best <= LEAF_TOL:                               # not proven: this row's point is the candidate
            break
    return best, point


#: Most of a search's time limit that :func:`_second_tightened`'s LPs may take (the units left keep CROWN's
#: bounds): on the 784-256-256-10 MLP of ``benchmarks/verify_speed.py`` the LPs took 3-7 s on boxes at l_inf
#: 0.02, 6-20 s at 0.03 and 16-24 s at 0.05.
SECOND_SHARE = 0.25


#: :func:`_second_tightened`'s last results, by the digest of what they depend on: ``verify`` searches each
#: margin of a box on its own, and the margins' networks share the first two layers.
_SECOND_CACHE: dict = {}


def _outward(v: np.ndarray, down: bool) -> np.ndarray:
    """float64 ``v`` in float32, rounded down (``down``) or up: a bound that stays a bound."""
    f = v.astype(np.float32)
    step = np.nextafter(f, np.float32(-np.inf if down else np.inf))
    return np.where((f > v) if down else (f < v), step, f)


def _second_tightened(blocks, root: Root, x, eps, cfg: BaBConfig, time_limit: float):
    """``root.bounds`` with the second hidden layer's intersected with the LP bounds of
    :func:`rcurves.certify.cutting.second_layer_bounds` (``cfg.second_cuts`` rounds), rounded outward to
    float32; unchanged where HiGHS is missing or nothing is unstable. The units go in decreasing order of
    their triangle's gap weighted by the branched row's coefficient (``|lam0| (-l) u / (u - l)``), within
    :data:`SECOND_SHARE` of ``time_limit``. The result is kept for the next call on the same box and first two
    layers (:data:`_SECOND_CACHE`: the next margin of the box in ``verify``, which has less time left, so it
    would not get further)."""
    import hashlib

    from rcurves.certify.cutting import second_layer_bounds

    lo, hi = (np.asarray(v, np.float64) for v in _box(jnp.asarray(x).reshape(-1), eps, cfg.bound))
    l1, u1 = (np.asarray(v, np.float64).reshape(-1) for v in root.bounds[0])
    l2, u2 = (np.asarray(v, np.float32).reshape(-1) for v in root.bounds[1])
    parts = (*blocks[0], *blocks[1], lo, hi, l1, u1, l2, u2, np.asarray([cfg.second_cuts]))
    key = hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes() for a in parts)).hexdigest()
    got = _SECOND_CACHE.get(key)
    if got is None:
        gap = np.where((l2 < 0) & (u2 > 0), -l2.astype(np.float64) * u2 / np.maximum(u2 - l2, 1e-12), 0.0)
        weight = np.abs(np.asarray(root.lam0, np.float64)).reshape(root.lam0.shape[0], -1).max(axis=0) \
            if len(blocks) == 2 else np.ones_like(gap)
        res = second_layer_bounds(blocks, [(l1, u1), (l2, u2)], lo, hi, rounds=cfg.second_cuts,
                                  priority=weight * gap, time_limit=SECOND_SHARE * time_limit)
        if res is None:
            return root.bounds
        got = (np.maximum(l2, _outward(res.lower, True)), np.minimum(u2, _outward(res.upper, False)))
        _SECOND_CACHE.clear()
        _SECOND_CACHE[key] = got
    shape = root.bounds[1][0].shape
    return [root.bounds[0], (jnp.asarray(got[0].reshape(shape)), jnp.asarray(got[1].reshape(shape))),
            *root.bounds[2:]]


__all__ = ["LEAF_TOL", "SECOND_SHARE"]
