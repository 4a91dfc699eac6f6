"""Cuts of the first layer (``BaBConfig.cuts``): separated once at the root, mixed into every subdomain's bound.

Used by ``bab_host.bab_search`` on MLPs on an l_inf box (``certify.verify`` on two hidden layers). The
triangle is the tightest relaxation of one ReLU given only its pre-activation's interval, and after alpha and
beta are optimised the bound of a subdomain is the LP of the triangles (on the open box of the 784-256-256-10
MNIST MLP measured in ``certify.verify.CUTS``: -3.2100 for both). But a first-layer unit's pre-activation
``w . x + b`` is a function of the *box*, and over the box the convex hull of ``(x, relu(w . x + b))`` is much
tighter than the triangle in ``w . x``: Anderson et al. (2020) describe it by one inequality per subset ``I``
of the inputs (:class:`Cuts`), and the most violated one at a point is found in linear time. At the root,
:func:`_root_cuts` solves the LP (triangles, the first layer in its big-M form) and adds, per unstable
first-layer unit, the cut its optimum violates most (``cuts`` rounds; one in ``verify``: -3.21 -> -2.06 on
that box). Every subdomain then bounds each still-unstable first-layer unit from above by a convex mixture of
its cuts (the big-M pair, whose mixture at the triangle's slope is the triangle, and the separated ones), the
mixture's logits optimised by Adam with ``(alpha, beta)``: a Lagrangian bound of the LP with the cuts, sound
for any mixture (:func:`_cut_terms`, called by ``bab_bounds._backsub_split``).
"""
from __future__ import annotations

import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rcurves.certify.bab_root import Root
from rcurves.certify.bab_settings import BaBConfig
from rcurves.nets.bounds import _box


class Cuts(NamedTuple):
    """Upper bounds of first-layer ReLUs over the input box (Anderson et al. 2020, "Strong mixed-integer
    programming formulations for trained neural networks", eq. (3) / Prop. 12): for unit ``k`` with
    ``z_k = w . x + b`` on the box ``[L, U]`` (``L_i`` / ``U_i`` swapped where ``w_i < 0``: ``Lb``, ``Ub``) and a
    subset ``I`` of the inputs, ``relu(z_k) <= sum_{i in I} w_i (x_i - Lb_i (1 - t)) + (b + sum_{i not in I}
    w_i Ub_i) t`` for some ``t in [0, 1]``; ``I`` = all inputs and ``I`` empty are the big-M pair whose
    mixture with weights ``(s, 1 - s)``, ``s = u / (u - l)``, is the triangle (``t`` cancels). ``C`` cuts:
    ``unit (C,)`` (``H_1`` for padding), ``mat (C, D)`` the ``w_i`` on ``I`` (0 elsewhere), ``const (C,)``
    ``-sum_{i in I} w_i Lb_i``, ``kappa (C,)`` the coefficient of ``t``, ``theta0 (C,)`` starting mixture logits
    (the triangle's)."""

    unit: jax.Array
    mat: jax.Array
    const: jax.Array
    kappa: jax.Array
    theta0: jax.Array


def _cut_terms(cuts: Cuts, theta, negf):
    """``(d-coefficients (R, D), constants (R,))`` of ``sum_k neg_k relu(z_k)`` bounded below through each
    unit's cuts mixed by ``softmax(theta)`` over the unit's cuts: ``neg_k sum_c pi_c g_c(x, t_k)``, ``t_k in [0,
    1]`` minimised in closed form (``min(0, coefficient)``). ``negf (R, H_1)``: the rows' negative coefficients
    (0 where a unit uses its own relaxation). Sound for any ``theta``: each ``g_c`` bounds ``relu(z_k)``."""
    h1 = negf.shape[1]
    seg = cuts.unit

    def one(th, ng):
        mx = jax.ops.segment_max(th, seg, num_segments=h1 + 1)
        ex = jnp.exp(th - mx[seg])
        pi = ex / jax.ops.segment_sum(ex, seg, num_segments=h1 + 1)[seg]
        wt = jnp.concatenate([ng, jnp.zeros((1,), ng.dtype)])[seg] * pi          # (C,) <= 0
        tcoef = jax.ops.segment_sum(wt * cuts.kappa, seg, num_segments=h1 + 1)[:h1]
        return wt @ cuts.mat, wt @ cuts.const + jnp.sum(jnp.minimum(tcoef, 0.0))

    return jax.vmap(one)(theta, negf)


#: Starting mixture logit of a separated cut (the triangle's pair starts at ``log s``, ``log (1 - s)``).
CUT_THETA0 = -2.0


def _is_mlp(net) -> bool:
    """Whether ``net`` is an MLP: reshapes aside, Dense and ReLU alternating, Dense first and last (the
    networks ``bab_host.bab_search`` adds cuts to)."""
    from rcurves.nets.layers import Dense, ReLU, Reshape

    layers = [l for l in net.layers if not isinstance(l, Reshape)]
    return (len(layers) >= 3 and len(layers) % 2 == 1
            and all(isinstance(l, Dense if i % 2 == 0 else ReLU) for i, l in enumerate(layers)))


def _root_cuts(blocks, root: Root, x, eps, cfg: BaBConfig, time_limit: float = math.inf):
    """:class:`Cuts` for the first layer of an MLP: the LP of the triangle relaxation of every layer (the root's
    bounds) with the first layer in its big-M form (a variable ``t_k in [0, 1]`` per unstable unit), minimising
    the worst branched row, and ``cfg.cuts`` rounds of separation (Anderson et al. 2020, section 3.2: for the
    LP's point, per unit the subset ``I = {i: w_i (x_i - Lb_i (1 - t)) < w_i Ub_i t}`` gives the most violated
    cut of the family in linear time), each solved again with the violated cuts added (HiGHS through scipy).
    ``blocks``: ``bab_lp._leaf_blocks`` of the network (its hidden blocks' affine maps; ``bab_host.bab_search`` passes
    them only for MLPs on an l_inf ball). None where no first-layer unit is unstable."""
    import scipy.sparse as sps
    from scipy.optimize import linprog

    from rcurves.certify.cutting import cut_row, input_ends, separate

    t_end = time.perf_counter() + time_limit
    lo, hi = (np.asarray(v, np.float64) for v in _box(jnp.asarray(x).reshape(-1), eps, cfg.bound))
    bnds = [(np.asarray(l, np.float64).reshape(-1), np.asarray(u, np.float64).reshape(-1)) for l, u in root.bounds]
    w1, b1 = blocks[0]
    l1, u1 = bnds[0]
    unst = np.flatnonzero((l1 < 0) & (u1 > 0))
    if unst.size == 0:
        return None
    D, sizes = w1.shape[1], [w.shape[0] for w, _ in blocks]
    off = [D + sum(sizes[:j]) for j in range(len(sizes))]          # a_j's first variable
    it = off[-1] + sizes[-1]                                        # the t variables
    nv = it + unst.size
    var_b = [(a, b) for a, b in zip(lo, hi)]
    for (l, u) in bnds:
        var_b += [(max(0.0, a), max(0.0, b)) for a, b in zip(l, u)]
    var_b += [(0.0, 1.0)] * unst.size
    rows, rhs, eqs, eq_rhs = [], [], [], []
    for j, ((w, b), (l, u)) in enumerate(zip(blocks, bnds)):
        src = np.arange(D) if j == 0 else off[j - 1] + np.arange(sizes[j - 1])
        for k in range(w.shape[0]):
            a = off[j] + k
            if l[k] >= 0:
                eqs.append((np.r_[a, src], np.r_[1.0, -w[k]])); eq_rhs.append(b[k])
            elif u[k] > 0:
                rows.append((np.r_[a, src], np.r_[-1.0, w[k]])); rhs.append(-b[k])          # a >= z
                if j == 0:
                    t = it + np.searchsorted(unst, k)                                        # big-M pair
                    rows.append((np.r_[a, src, t], np.r_[1.0, -w[k], -l[k]])); rhs.append(b[k] - l[k])
                    rows.append((np.r_[a, t], np.r_[1.0, -u[k]])); rhs.append(0.0)
                else:
                    s = u[k] / (u[k] - l[k])
                    rows.append((np.r_[a, src], np.r_[1.0, -s * w[k]])); rhs.append(s * (b[k] - l[k]))
    obj = np.zeros(nv)
    obj[off[-1]:off[-1] + sizes[-1]] = np.asarray(root.lam0[0], np.float64).reshape(-1)

    def mat(rs):
        r = np.concatenate([np.full(len(i), n) for n, (i, _) in enumerate(rs)])
        return sps.csr_matrix((np.concatenate([v for _, v in rs]), (r, np.concatenate([i for i, _ in rs]))),
                              shape=(len(rs), nv))

    a_eq = mat(eqs) if eqs else None
    lb_in, ub_in = input_ends(w1, lo, hi)                           # Lb, Ub per (unit, input)
    found = []                                                      # (unit, cut_row(...))
    for _ in range(cfg.cuts):
        if time.perf_counter() >= t_end:
            break
        res = linprog(obj, A_ub=mat(rows), b_ub=np.array(rhs), A_eq=a_eq, b_eq=np.array(eq_rhs) if eqs else None,
                      bounds=var_b, method="highs", options={"time_limit": max(t_end - time.perf_counter(), 0.01)})
        if res.status != 0:
            break
        xv = res.x
        sep = separate(w1[unst], b1[unst], lb_in[unst], ub_in[unst], xv[:D], xv[off[0] + unst], xv[it:it + unst.size])
        for n_, inside in sorted(zip(sep.units.tolist(), sep.inside), key=lambda p: p[0]):
            k = unst[n_]
            cut = cut_row(w1[k], b1[k], lb_in[k], ub_in[k], inside)
            idx = np.flatnonzero(inside)
            rows.append((np.r_[off[0] + k, idx, it + n_], np.r_[1.0, -cut[0][idx], -cut[1]]))
            rhs.append(cut[2])
            found.append((k, cut))
        if sep.units.size == 0:
            break
    # every unstable unit: I = all, I = empty (the triangle's pair), then the cuts found
    units, mats, consts, kaps, th = [], [], [], [], []
    def add(k, cut, theta):
        units.append(k)
        mats.append(cut[0])
        kaps.append(cut[1])
        consts.append(cut[2])
        th.append(theta)

    for k in unst:
        s = u1[k] / (u1[k] - l1[k])
        for inside, theta in ((True, math.log(max(s, 1e-6))), (False, math.log(max(1.0 - s, 1e-6)))):
            add(k, cut_row(w1[k], b1[k], lb_in[k], ub_in[k], np.full(D, inside)), theta)
    for k, cut in found:
        add(k, cut, CUT_THETA0)
    c = len(units)
    pad = -c % 64
    h1 = w1.shape[0]
    f32 = lambda v: jnp.asarray(np.asarray(v, np.float64), jnp.float32)      # noqa: E731
    return Cuts(jnp.asarray(np.r_[units, np.full(pad, h1)], jnp.int32), f32(np.r_[mats, np.zeros((pad, D))]),
                f32(np.r_[consts, np.zeros(pad)]), f32(np.r_[kaps, np.zeros(pad)]), f32(np.r_[th, np.zeros(pad)]))


__all__ = ["CUT_THETA0", "Cuts"]
