"""The first layer's cuts over the input box (Anderson et al. 2020), and the second layer's bounds they give.

A first-layer unit ``a = relu(w . x + b)`` on the box ``lo <= x <= hi`` has, with ``Lb_i`` / ``Ub_i`` the
end of ``[lo_i, hi_i]`` where ``w_i x_i`` is smallest / largest and ``t in [0, 1]`` its big-M variable, the
family of valid inequalities (Anderson et al., "Strong mixed-integer programming formulations for trained
neural networks", 2020, Theorem 1: together with ``a >= w . x + b``, ``a >= 0`` they describe the convex hull
of the unit's graph over the box), one per subset ``I`` of the inputs::

    a <= sum_{i in I} w_i (x_i - Lb_i (1 - t)) + (b + sum_{i not in I} w_i Ub_i) t.

At a point ``(x, a, t)`` the most violated one takes ``I = {i: w_i (x_i - Lb_i (1 - t)) < w_i Ub_i t}``
(section 3.2: linear time). :func:`separate` finds it for every unstable unit at once.

:func:`second_layer_bounds` uses them for the bounds of the second hidden layer's pre-activations
``z_k = W2_k . a + b2_k``: one LP over ``(x, a, t)`` (the box, each first-layer unit's ``a >= w . x + b``
and big-M pair), and for each unstable unit ``k`` and side, the LP minimising ``+-W2_k . a``, re-solved
after adding the most violated cuts at its optimum (``rounds`` times, at most ``top`` cuts per round),
with HiGHS warm-started from the previous basis; cuts no longer binding are dropped before the next
bound, so the LP stays small. Each bound is the weak-duality bound of the LP's row multipliers (computed
here in float64 from the LP's data, so it does not rest on HiGHS's tolerances): sound whatever the
solver returns. On the 784-256-256-10 MNIST MLP of ``benchmarks/verify_speed.py`` (a box at l_inf 0.02
that branch and bound left open in 60 s) the second layer's unstable units went from 91 to 71 and their
mean width from 1.79 to 1.38 in 3.1 s (the LP without cuts: 1.77).
"""
from __future__ import annotations

import math
import time
from typing import NamedTuple, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from rcurves.certify.highs import _HIGHS, _h, lp_model
from attacks.precision import exact_precision


class Separated(NamedTuple):
    """The most violated cut of each unit that has one: ``units (k,)`` (indices into the rows of ``w``),
    ``inside (k, D) bool`` (the subset ``I``), ``violation (k,)``, largest first."""

    units: np.ndarray
    inside: np.ndarray
    violation: np.ndarray


def input_ends(w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(Lb, Ub)``, each ``(m, D)``: per unit and input, the end of the box where ``w_i x_i`` is smallest /
    largest (``w (m, D)``, ``lo``, ``hi (D,)``)."""
    return np.where(w >= 0, lo[None, :], hi[None, :]), np.where(w >= 0, hi[None, :], lo[None, :])


def separate(w, b, lb, ub, x, a, t, tol: float = 1e-6) -> Separated:
    """The most violated cut of each unit at the point ``x (D,)``, ``a (m,)``, ``t (m,)`` (the units' rows of
    the first layer ``w (m, D)``, ``b (m,)``, and their :func:`input_ends`); units whose best cut holds (by
    more than ``-tol``) are left out."""
    t = np.asarray(t, np.float64)[:, None]
    t_in = w * (x[None, :] - lb * (1.0 - t))
    t_out = w * ub * t
    inside = t_in < t_out
    viol = a - (np.sum(np.where(inside, t_in, t_out), axis=1) + b * t[:, 0])
    order = np.argsort(-viol, kind="stable")
    order = order[viol[order] > tol]
    return Separated(order, inside[order], viol[order])


def cut_row(w, b, lb, ub, inside):
    """The cut of subset ``inside (D,)`` for one unit (``w (D,)``, ``b``, its ``lb``, ``ub (D,)``) as
    ``a - coef . x - kappa t <= rhs``: ``(coef (D,), kappa, rhs)`` (``coef`` is ``w`` on ``I``, 0 elsewhere)."""
    coef = np.where(inside, w, 0.0)
    kappa = float(np.sum(np.where(inside, w * lb, w * ub)) + b)
    return coef, kappa, -float(np.sum(coef * lb))


class _Rows:
    """The LP's rows ``lo <= A v <= hi`` kept on the host beside HiGHS's copy (for the weak-duality bound):
    a fixed CSR block, then the cuts in the order HiGHS holds them."""

    def __init__(self, base: sp.csr_matrix, lo, hi):
        self.base, self.lo, self.hi = base, np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        self.cuts = []                                   # (cols, vals, hi)

    def dual_bound(self, cost, col_lo, col_hi, y) -> float:
        """``min cost . v`` over the LP is at least this, for any row multipliers ``y`` (Lagrangian
        relaxation: ``cost . v = (cost - A^T y) . v + y . A v``; a multiplier whose row side is infinite is
        taken as 0)."""
        n0 = self.base.shape[0]
        lo = np.r_[self.lo, np.full(len(self.cuts), -np.inf)]
        hi = np.r_[self.hi, [h for _, _, h in self.cuts]]
        y = np.asarray(y, np.float64).copy()
        y[(y > 0) & ~np.isfinite(lo)] = 0.0
        y[(y < 0) & ~np.isfinite(hi)] = 0.0
        red = np.asarray(cost, np.float64) - self.base.T @ y[:n0]
        for (cols, vals, _), yc in zip(self.cuts, y[n0:]):
            if yc != 0.0:
                np.subtract.at(red, cols, yc * vals)
        row_part = np.sum(np.where(y > 0, y * np.where(np.isfinite(lo), lo, 0.0),
                                   y * np.where(np.isfinite(hi), hi, 0.0)))
        return float(np.sum(np.minimum(red * col_lo, red * col_hi)) + row_part)


def _solver(a: sp.csc_matrix, row_lo, row_hi, col_lo, col_hi):
    s = _HIGHS()
    s.setOptionValue("output_flag", False)
    s.setOptionValue("threads", 1)
    s.passModel(lp_model(np.zeros(a.shape[1]), a, row_lo, row_hi, col_lo, col_hi))
    return s


class LayerBounds(NamedTuple):
    """What :func:`second_layer_bounds` returns: the second layer's ``lower``, ``upper (H_2,)`` (each at
    least as tight as the given ones), how many bounds were tightened by an LP (``bounds``: 2 per unit done),
    ``solves`` (LP solves), ``cuts`` (added over all bounds) and ``seconds``."""

    lower: np.ndarray
    upper: np.ndarray
    bounds: int
    solves: int
    cuts: int
    seconds: float


@exact_precision
def second_layer_bounds(blocks, bounds, lo, hi, *, rounds: int = 2, top: int = 16, priority=None,
                        time_limit: float = math.inf) -> Optional[LayerBounds]:
    """Bounds of the second hidden layer's pre-activations over the box, from the LP with the first layer's
    cuts (see the module doc).

    Args:
      blocks: per hidden block ``(W (m, D_in), b (m,))`` float64 (at least two: the first and second layer).
      bounds: per hidden layer ``(l, u)`` of the pre-activations (flat); the first layer's must hold on the
        box (they are the big-M constants), the second's are the ones tightened.
      lo, hi: the input box ``(D,)``.
      rounds: separation rounds per bound (0: the LP without cuts). top: most cuts added per round.
      priority: None, or ``(H_2,)`` scores: the unstable units are tightened in decreasing order of it (default:
        their width ``u - l``), so that a time limit leaves the least important ones.
      time_limit: seconds; no bound starts after it (the units not reached keep their bounds).

    Returns:
      :class:`LayerBounds`, or None where HiGHS's bindings are missing or no unit of either layer is
      unstable.
    """
    if _HIGHS is None:
        return None
    t0 = time.perf_counter()
    (w1, b1), (w2, b2) = blocks[0], blocks[1]
    l1, u1 = (np.asarray(v, np.float64).reshape(-1) for v in bounds[0])
    l2, u2 = (np.asarray(v, np.float64).reshape(-1) for v in bounds[1])
    lo, hi = np.asarray(lo, np.float64).reshape(-1), np.asarray(hi, np.float64).reshape(-1)
    unst = np.flatnonzero((l1 < 0) & (u1 > 0))
    todo = np.flatnonzero((l2 < 0) & (u2 > 0))
    if unst.size == 0 or todo.size == 0:
        return None
    score = (u2 - l2) if priority is None else np.asarray(priority, np.float64).reshape(-1)
    todo = todo[np.argsort(-score[todo], kind="stable")]
    d, h1 = w1.shape[1], w1.shape[0]
    oa, ot = d, d + h1                                       # columns: x (D), a (H_1), t (unstable units)
    nv = ot + unst.size
    col_lo = np.r_[lo, np.maximum(l1, 0.0), np.zeros(unst.size)]
    col_hi = np.r_[hi, np.maximum(u1, 0.0), np.ones(unst.size)]
    rows, r_lo, r_hi = [], [], []
    t_of = np.full(h1, -1)
    t_of[unst] = ot + np.arange(unst.size)
    for k in range(h1):
        if l1[k] >= 0:                                       # active: a = w . x + b
            rows.append((np.r_[oa + k, np.arange(d)], np.r_[1.0, -w1[k]])); r_lo.append(b1[k]); r_hi.append(b1[k])
        elif u1[k] > 0:
            rows.append((np.r_[oa + k, np.arange(d)], np.r_[1.0, -w1[k]])); r_lo.append(b1[k]); r_hi.append(np.inf)
            rows.append((np.r_[oa + k, np.arange(d), t_of[k]], np.r_[1.0, -w1[k], -l1[k]]))
            r_lo.append(-np.inf); r_hi.append(b1[k] - l1[k])
            rows.append((np.r_[oa + k, t_of[k]], np.r_[1.0, -u1[k]])); r_lo.append(-np.inf); r_hi.append(0.0)
    ptr = np.r_[0, np.cumsum([len(i) for i, _ in rows])]
    base = sp.csr_matrix((np.concatenate([v for _, v in rows]), np.concatenate([i for i, _ in rows]), ptr),
                         shape=(len(rows), nv))
    host = _Rows(base, r_lo, r_hi)
    s = _solver(base.tocsc(), r_lo, r_hi, col_lo, col_hi)
    w_u, b_u = w1[unst], b1[unst]                             # the unstable units' rows, once
    lb_in, ub_in = input_ends(w_u, lo, hi)
    a_cols = np.arange(oa, oa + h1, dtype=np.int32)
    new_l, new_u = l2.copy(), u2.copy()
    done = solves = n_cuts = 0
    opt = _h.HighsModelStatus.kOptimal
    for k in todo:
        for side in (1.0, -1.0):
            if time.perf_counter() - t0 >= time_limit:
                break
            cost = np.zeros(nv)
            cost[oa:oa + h1] = side * w2[k]
            s.changeColsCost(h1, a_cols, side * w2[k])
            for rd in range(rounds + 1):
                s.run()
                solves += 1
                if s.getModelStatus() != opt or rd == rounds:
                    break
                v = np.asarray(s.getSolution().col_value, np.float64)
                sep = separate(w_u, b_u, lb_in, ub_in, v[:d], v[oa + unst], v[ot:ot + unst.size])
                if sep.units.size == 0:
                    break
                new = []
                for j, inside in zip(sep.units[:top], sep.inside[:top]):
                    coef, kappa, rhs = cut_row(w_u[j], b_u[j], lb_in[j], ub_in[j], inside)
                    nz = np.flatnonzero(coef)
                    new.append((np.r_[oa + unst[j], nz, ot + j].astype(np.int32), np.r_[1.0, -coef[nz], -kappa], rhs))
                starts = np.r_[0, np.cumsum([len(c) for c, _, _ in new])[:-1]].astype(np.int32)
                s.addRows(len(new), np.full(len(new), -np.inf), np.array([h for _, _, h in new]),
                          int(starts[-1] + len(new[-1][0])), starts,
                          np.concatenate([c for c, _, _ in new]), np.concatenate([v for _, v, _ in new]))
                host.cuts.extend(new)
                n_cuts += len(new)
            if s.getModelStatus() == opt:
                y = np.asarray(s.getSolution().row_dual, np.float64)
                val = host.dual_bound(cost, col_lo, col_hi, y)
                if math.isfinite(val):
                    if side > 0:
                        new_l[k] = max(new_l[k], val + b2[k])
                    else:
                        new_u[k] = min(new_u[k], -val + b2[k])
                    done += 1
                # drop the cuts this bound's optimum does not use (they stay valid; the LP stays small)
                slack = np.flatnonzero(np.abs(y[base.shape[0]:]) < 1e-12)
                if slack.size:
                    s.deleteRows(int(slack.size), (slack + base.shape[0]).astype(np.int32))
                    keep = np.ones(len(host.cuts), bool)
                    keep[slack] = False
                    host.cuts = [c for c, kp in zip(host.cuts, keep) if kp]
    return LayerBounds(new_l, new_u, done, solves, n_cuts, time.perf_counter() - t0)


__all__ = ["LayerBounds", "Separated", "cut_row", "input_ends", "second_layer_bounds", "separate"]
