"""One subdomain's bound, and the unit it splits next.

:func:`_bounder` builds, for one ball's ``bab_root.Root``, the function that bounds a subdomain given its
split signs: its hidden bounds, the Adam run on its ``(alpha, beta)``, its lowest margin bound and the unit
to split next. Both searches call it (``bab_device``, ``bab_host``).

Each subdomain is bounded by alpha-beta-CROWN (Wang et al. 2021, eq. 5-7):

* its hidden layers' bounds are CROWN's through the earlier layers'
  relaxations *with the subdomain's splits made exact* (split units clipped at
  0), intersected with the root's. The second layer's come cheaply
  (``BaBConfig.first_splits``, :func:`_second_layer`): the first layer's
  bounds are exact intervals, so a subdomain's relaxation of it differs from
  the root's only at its split units, and its pull-back is the root's plus
  one rank-one correction per split unit instead of a product with the whole
  first layer. Measured side by side (``bab_search`` at 10-15 s per box,
  open boxes of ``benchmarks/verify_speed.py``'s full-MNIST MLPs, loaded 2
  cores): on 784-256-256-10 (eps 0.03) 1.5-1.8x the subdomains per second
  of the full pull-back (162 -> 288, 160 -> 292, 181 -> 311, 191 -> 279),
  the same bounds on the same subdomains; on 784-256x4-10 (eps 0.02) 1.17x
  (71 -> 84), its third and fourth layers still pulled back in full;
* the lower bound of each margin row is pulled back as in CROWN
  (``bounds.backsub``), with, at each split unit, the split constraint added
  with a multiplier ``beta >= 0``: on ``{h_i >= 0}``, ``f >= f - beta h_i``; on
  ``{h_i <= 0}``, ``f >= f + beta h_i``; the bound of the right-hand side over
  the whole ball is a lower bound of ``f`` over the subdomain for every
  ``beta >= 0`` and every lower slope ``alpha in [0, 1]``;
* ``alpha`` and ``beta`` are optimised with Adam (optax, ``steps`` steps) to
  raise the violated rows' bounds; every iterate is sound and the best bound
  of each row over the iterates is kept. A child starts from its parent's
  optimised ``(alpha, beta)`` (the new split's ``beta`` at 0), so the
  optimisation continues down the tree instead of restarting (without it,
  20 steps per subdomain left fully split subdomains unproven on the test
  MLP 2-16-16-3 at 0.95 of the exact distance; with it they close).

The first layer's cuts, where there are any, enter the bound through ``bab_cuts``.

Branching (BaBSR, Bunel et al. 2020, its intercept term): with ``lam`` the
CROWN coefficients of the subdomain's worst margin row over the hidden
activations, unit ``i`` scores ``|lam_i| u_i (-l_i) / (u_i - l_i)``; split
units are stable in their subdomain and score 0. By default
(``branching='fsb'``, filtered smart branching, De Palma et al. 2021,
"Improved branch and bound for neural network verification via Lagrangian
decomposition") the ``candidates`` (8) best units by that score are scored
again by the bound each split would actually give: for each, both children's
margin bounds with the subdomain's optimised ``(alpha, beta)`` and hidden
bounds, only the split unit's own bounds clipped at 0 (one back-substitution
per child, no optimisation); the unit whose worse child is highest is split
(BaBSR's best on a tie). Measured with ``bab_host.bab_search`` (``verify``'s branch
and bound) on boxes that CROWN does not prove and PGD does not break, 2
busy cores, in the balls every rule proved:

| network | proved by BaBSR / FSB (time limit) | subdomains BaBSR / FSB | time BaBSR / FSB |
|---|---|---|---|
| random MLP 16-64-64-10 | 12 / 12 of 12 (20 s) | 3,070 / 308 | 2.0 s / 0.7 s |
| random MLP 16-32-32-32-32-10 | 11 / 11 of 11 (20 s) | 2,617 / 295 | 2.2 s / 0.7 s |
| random MLP 32-128-128-10 | 9 / 9 of 10 (15 s) | 17,945 / 2,653 | 18.6 s / 4.8 s |
| MNIST MLP 784-256-256-10 (eps 0.015-0.02) | 4 / 5 of 7 (30 s) | 1,094 / 536 | 27.7 s / 16.8 s |

With 16 candidates: 10 of 10 on the 32-128-128 MLP (1,785 subdomains, 3.8 s
on the 9) but 4 of 7 on the MNIST MLP (584, 24.8 s); with 4: 5 of 7 on MNIST
(478, 14.0 s) but 9,783 subdomains on the 32-128-128 MLP. In
``certified_radius(method='bab')`` (random 16-64-64-10, 12 points, budget
256) the median attack/certified ratio went from 1.185 (BaBSR) to 1.092
(FSB, 8 candidates; CROWN 1.667) for 1.3x the time; BaBSR with twice the
budget reached 1.145 in 1.8x.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import List

import jax
import jax.numpy as jnp
import optax

from rcurves.certify.bab_cuts import _cut_terms
from rcurves.certify.bab_root import Root, _layer_rows
from rcurves.certify.bab_settings import BaBConfig
from rcurves.nets.bounds import BoundConfig, Prepared, Relax, _box, backsub, concretize, relax
from rcurves.nets.layers import block_jacobian, block_transpose


def _backsub_split(prep: Prepared, relaxes: List[Relax], sgns, betas, lam, bias, cut=None):
    """``bounds.backsub`` with the split constraints' terms ``beta * sgn`` added
    to the coefficients of each hidden pre-activation (``sgn`` -1 on units
    split active, +1 on units split inactive, 0 elsewhere). ``cut``: None, or
    ``(cuts, theta, unstable)`` (``bab_cuts.Cuts``, the rows' mixture logits ``(R, C)``, the first layer's
    units still unstable ``(H_1,)``): their upper relaxation is a mixture of the cuts (``bab_cuts._cut_terms``)."""
    net = prep.net
    shapes, blocks = net.shapes, net.blocks
    for j in range(len(relaxes), 0, -1):
        r = relaxes[j - 1]
        pos, neg = jnp.maximum(lam, 0.0), jnp.minimum(lam, 0.0)
        extra = None
        if j == 1 and cut is not None:
            cuts, theta, unstable = cut
            negf = neg.reshape(neg.shape[0], -1)
            extra = _cut_terms(cuts, theta, jnp.where(unstable.reshape(-1)[None, :], negf, 0.0))
            neg = jnp.where(unstable, 0.0, neg)          # those units' upper side: the cuts, not the triangle
        bias = bias + jnp.sum((neg * r.tu).reshape(lam.shape[0], -1), axis=1)
        lam = pos * r.sl + neg * r.su + betas[j - 1] * sgns[j - 1]
        bias = bias + lam.reshape(lam.shape[0], -1) @ prep.consts[j - 1]
        lam = jax.vmap(block_transpose(blocks[j - 1], shapes[j - 1]))(lam)
        if extra is not None:
            lam = lam + extra[0].reshape(lam.shape)
            bias = bias + extra[1]
    return lam, bias


def _activation_coefficients(prep: Prepared, relaxes: List[Relax], lam):
    """CROWN's back-substitution of one row ``lam`` (over the last hidden
    activation), returning its coefficients over every hidden activation
    ``a_j`` (list over ``j = 1..L-1``, each of the shape of ``h_j``)."""
    net = prep.net
    shapes, blocks = net.shapes, net.blocks
    out = [None] * len(relaxes)
    for j in range(len(relaxes), 0, -1):
        out[j - 1] = lam
        r = relaxes[j - 1]
        lam = jnp.maximum(lam, 0.0) * r.sl + jnp.minimum(lam, 0.0) * r.su
        if j > 1:
            lam = block_transpose(blocks[j - 1], shapes[j - 1])(lam)
    return out


def _scores(bounds, coeffs):
    """BaBSR intercept score of every hidden unit, flattened over the layers (0 if stable)."""
    out = []
    for (l, u), c in zip(bounds, coeffs):
        unstable = (l < 0) & (u > 0)
        height = jnp.where(unstable, u * (-l) / jnp.where(unstable, u - l, 1.0), 0.0)
        # + a small multiple of the height: an unstable unit the worst row does
        # not weigh is still a unit to split (0 only for stable ones)
        out.append(((jnp.abs(c) + 1e-6) * height).reshape(-1))
    return jnp.concatenate(out)


#: Largest ``H_1 x D`` (first hidden layer x input) for which :func:`_second_layer` keeps the first block's
#: dense matrix (16 MB in float32); a larger first layer pulls each split unit back through the block.
FIRST_JACOBIAN_MAX = 1 << 22


def _second_layer(prep: Prepared, root: Root, x, eps, bcfg: BoundConfig, r, n_splits: int):
    """``lb(s0) -> (2R,)``: CROWN's lower bounds of the second hidden layer's rows ``r`` (all units if None),
    lower rows then negated upper rows, on the subdomain whose first-layer split signs are ``s0 (H_1,)``
    (-1 active, +1 inactive, 0 free).

    On a subdomain the first layer's bounds are the root's (exact intervals) with split units clipped at 0,
    so its CROWN relaxation (``relax``) is the root's except at split units, which become exact (slope 1 or
    0, no intercept). The pull-back of row ``k`` through it is linear in the relaxation's slopes and
    intercepts, so with ``g_k`` the root's coefficients over the first layer's pre-activations,

        lam_k = A_root_k + sum_{i split} dg_ki J_i,    bias_k = b_root_k + sum_{i split} (neg_ki dtu_i + dg_ki c_i),

    ``A_root (2R, D)`` and ``b_root`` the root's pull-back (once per call, not per subdomain), ``J_i`` row
    ``i`` of the first block's linear map and ``c_i`` its bias, ``dg_ki = pos_ki dsl_i + neg_ki dsu_i``
    (``pos``/``neg`` the parts of the row's coefficient over unit ``i``, ``dsl``/``dsu``/``dtu`` the change of the
    lower slope, upper slope and upper intercept). The first ``n_splits`` split units (in index order) are corrected;
    any further ones keep the root's relaxation, which holds on the whole ball (sound)."""
    net = prep.net
    l0, u0 = root.bounds[0]
    h1 = math.prod(l0.shape)
    lam, bias = _layer_rows(prep, 1, r)
    rel0 = relax(l0, u0)
    a_root, b_root = backsub(prep, [rel0], lam, bias, 1)
    a_root = a_root.reshape(a_root.shape[0], -1)
    coef = lam.reshape(lam.shape[0], -1)                               # (2R, H_1)
    sl0, su0, tu0 = (v.reshape(-1) for v in rel0)
    c0 = prep.consts[0]
    d = math.prod(net.input_shape)
    if h1 * d <= FIRST_JACOBIAN_MAX:
        jac0 = block_jacobian(net.blocks[0], net.shapes[0], net.shapes[1]).reshape(h1, d)
        rows_of = lambda idx: jac0[idx]                               # noqa: E731
    else:
        pull = block_transpose(net.blocks[0], net.shapes[0])
        rows_of = lambda idx: jax.vmap(lambda i: pull(                # noqa: E731
            (jnp.arange(h1) == i).astype(jnp.float32).reshape(net.shapes[1])).reshape(-1))(idx)

    def lb(s0):
        s0 = s0.reshape(-1)
        (idx,) = jnp.nonzero(s0, size=n_splits, fill_value=0)
        sg = jnp.where(jnp.arange(n_splits) < jnp.count_nonzero(s0), s0[idx], 0).astype(jnp.float32)
        new = jnp.where(sg < 0, 1.0, 0.0)             # split active: slopes 1; inactive: 0; intercepts 0
        on = sg != 0
        dsl = jnp.where(on, new - sl0[idx], 0.0)
        dsu = jnp.where(on, new - su0[idx], 0.0)
        dtu = jnp.where(on, -tu0[idx], 0.0)
        cols = coef[:, idx]
        pos, neg = jnp.maximum(cols, 0.0), jnp.minimum(cols, 0.0)
        dg = pos * dsl + neg * dsu                                     # (2R, S)
        a = a_root + dg @ rows_of(idx)
        b = b_root + neg @ dtu + dg @ c0[idx]
        return concretize(a.reshape((a.shape[0],) + tuple(net.input_shape)), b, x, eps, bcfg)[0]

    return lb


def _n_optimised(root: Root) -> int:
    """How many leading entries of a subdomain's params Adam optimises: ``(alpha, beta[, theta])``; any
    after them are the inherited hidden bounds (``BaBConfig.refresh``)."""
    return 2 if root.cuts is None else 3


def _start_params(root: Root, cfg: BaBConfig):
    """The root subdomain's params: CROWN's adaptive slopes (at the root's bounds), no split multipliers, with
    ``root.cuts`` the cut mixtures' starting logits ``theta0``; with ``cfg.refresh``, also the root's hidden
    bounds of the layers after the first (a subdomain's, inherited by its children)."""
    n_rows = root.lam0.shape[0]
    alpha = [jnp.broadcast_to((u > -l).astype(jnp.float32), (n_rows,) + l.shape) for l, u in root.bounds]
    beta = [jnp.zeros((n_rows,) + l.shape, jnp.float32) for l, _ in root.bounds]
    opt_part = (alpha, beta) if root.cuts is None else (alpha, beta, jnp.broadcast_to(
        root.cuts.theta0, (n_rows,) + root.cuts.theta0.shape))
    if cfg.refresh > 0:
        return (*opt_part, [(l, u) for l, u in root.bounds[1:]])
    return opt_part


def _bounder(prep: Prepared, root: Root, x, eps, cfg: BaBConfig, rows=None):
    """``(bound_one, init_params, total, sub_bounds)``: the bound of one subdomain of ``root``'s ball (see the
    module doc), its starting ``(alpha, beta)`` (with ``root.cuts`` also the cut mixtures' logits ``theta (R,
    C)``, then with ``cfg.refresh`` also the root's hidden bounds of the
    layers after the first: ``bound_one`` returns the subdomain's in the same place), the number ``H`` of
    hidden units (the length of a subdomain's ``sgn``), and ``sub_bounds(sgn, inherited=None, fresh=True) ->
    (bounds, relaxations)``: the hidden bounds ``bound_one`` uses.

    ``rows``: None (every unit's bounds recomputed per subdomain), or per hidden layer None or an int32
    array of the flat units whose bounds are recomputed (the others keep the root's)."""
    bcfg = dataclasses.replace(cfg.bound, method="crown")
    bounds, lam0, b0 = root.bounds, root.lam0, root.b0
    n_rows = lam0.shape[0]
    sizes = [math.prod(l.shape) for l, _ in bounds]
    shapes = [l.shape for l, _ in bounds]
    offsets = [sum(sizes[:j]) for j in range(len(sizes))]
    total = sum(sizes)

    def layers(flat):
        return [flat[offsets[j]:offsets[j] + sizes[j]].reshape(shapes[j]) for j in range(len(sizes))]

    second = None
    if cfg.first_splits > 0 and len(bounds) >= 2 and prep.jacs[1] is not None:
        second = _second_layer(prep, root, x, eps, bcfg, None if rows is None else rows[1],
                               min(cfg.first_splits, sizes[0]))

    def sub_bounds(sgn, inherited=None, fresh=True):
        """Hidden bounds on a subdomain: each layer's bounds recomputed by CROWN
        through the earlier layers' split relaxations (where the layer has a
        dense matrix), intersected with the root's (or, given ``inherited``, the list of ``(l, u)`` of the
        layers after the first that the parent's subdomain had), split units clipped at 0. With ``fresh``
        false, the layers after the second are not recomputed: the inherited bounds, split units clipped."""
        out, rels = [], []
        for j, ((l, u), s) in enumerate(zip(bounds, layers(sgn))):
            if j >= 1 and inherited is not None:
                l, u = inherited[j - 1]
            if j >= 1 and prep.jacs[j] is not None and (fresh or j == 1):
                r = None if rows is None else rows[j]
                if j == 1 and second is not None:
                    lb = second(layers(sgn)[0])
                else:
                    lam, b = backsub(prep, rels, *_layer_rows(prep, j, r), j)
                    lb = concretize(lam, b, x, eps, bcfg)[0]
                half = lb.shape[0] // 2
                if r is None:
                    l = jnp.maximum(l, lb[:half].reshape(shapes[j]))
                    u = jnp.minimum(u, -lb[half:].reshape(shapes[j]))
                else:       # scatter-max / -min: a padded (repeated) index gets the same value twice
                    l = l.reshape(-1).at[r].max(lb[:half]).reshape(shapes[j])
                    u = u.reshape(-1).at[r].min(-lb[half:]).reshape(shapes[j])
            l, u = jnp.where(s < 0, jnp.maximum(l, 0.0), l), jnp.where(s > 0, jnp.minimum(u, 0.0), u)
            out.append((l, u))
            rels.append(relax(l, u))
        return out, rels

    n_opt = _n_optimised(root)

    def cut_of(params, sb, w=None):
        if root.cuts is None:
            return None
        theta = params[2] if w is None else params[2][w][None]
        return root.cuts, theta, (sb[0][0] < 0) & (sb[0][1] > 0)

    def spec_lb(params, sgn, sb):
        alphas, betas = params[:2]
        rel = [relax(l, u, jnp.clip(a, 0.0, 1.0)) for (l, u), a in zip(sb, alphas)]
        sg = [s.astype(jnp.float32) for s in layers(sgn)]
        lam, b = _backsub_split(prep, rel, sg, [jnp.maximum(bt, 0.0) for bt in betas], lam0, b0, cut_of(params, sb))
        return concretize(lam, b, x, eps, bcfg)[0]

    init_params = functools.partial(_start_params, root, cfg)

    def child_estimates(params, sgn, sb, units):
        """``(2, k)``: the lowest margin bound of the active (row 0) and inactive (row 1) child of a split on
        each of ``units (k,)``, with the parent's ``(alpha, beta)`` and hidden bounds, only the split unit's
        own bounds clipped (no later layer recomputed, no optimisation): cheap estimates for choosing."""
        lf = jnp.concatenate([l.reshape(-1) for l, _ in sb])
        uf = jnp.concatenate([u.reshape(-1) for _, u in sb])
        at = jnp.arange(total)

        def one(unit, side):
            hit = at == unit
            l2 = jnp.where(hit & (side < 0), jnp.maximum(lf, 0.0), lf)
            u2 = jnp.where(hit & (side > 0), jnp.minimum(uf, 0.0), uf)
            return jnp.min(spec_lb(params, sgn, list(zip(layers(l2), layers(u2)))))

        sides = jnp.array([-1, 1], jnp.int32)
        return jax.vmap(lambda s: jax.vmap(lambda i: one(i, s))(units))(sides)

    def choose(params, sgn, sb, rels, best):
        """The unit to split next (-1: none unstable): BaBSR's best, or with ``branching='fsb'`` the one of
        BaBSR's ``candidates`` best whose worse child's estimated bound is highest."""
        worst = jnp.argmin(best)
        scores = _scores(sb, _activation_coefficients(prep, rels, lam0[worst]))
        if cfg.branching == "fsb":
            k = min(cfg.candidates, total)
            top_s, top_i = jax.lax.top_k(scores, k)
            est = jnp.min(child_estimates(params, sgn, sb, top_i), axis=0)
            est = jnp.where(top_s > 0, jnp.where(jnp.isnan(est), -jnp.inf, est), -jnp.inf)
            pick = top_i[jnp.argmax(est)]       # the first (BaBSR's best) on a tie
        else:
            pick = jnp.argmax(scores)
        return jnp.where(jnp.max(scores) > 0, pick, -1).astype(jnp.int32)

    def primal_point(params, sgn, sb, best):
        """The point of the ball (flat, ``(D,)``) that minimises the linear lower bound of the subdomain's
        worst margin row: a candidate counterexample (on l_inf a vertex of the box; on l_2 ``x - eps lam /
        ||lam||`` clipped to the domain, still inside the ball). Any point of the ball that the model
        misclassifies refutes the whole ball, whichever subdomain proposed it."""
        alphas, betas = params[:2]
        w = jnp.argmin(best)
        rel = [relax(l, u, jnp.clip(a[w][None], 0.0, 1.0)) for (l, u), a in zip(sb, alphas)]
        sg = [s.astype(jnp.float32) for s in layers(sgn)]
        lam, _ = _backsub_split(prep, rel, sg, [jnp.maximum(bt[w][None], 0.0) for bt in betas],
                                lam0[w][None], b0[w][None], cut_of(params, sb, w))
        lam, xf = lam.reshape(-1), x.reshape(-1)
        if bcfg.norm == "linf":
            lo, hi = _box(xf, eps, bcfg)
            return jnp.where(lam > 0, lo, hi)
        p = xf - eps * lam / jnp.maximum(jnp.linalg.norm(lam), 1e-12)
        return p if bcfg.domain is None else jnp.clip(p, *bcfg.domain)

    def bound_one(sgn, params0, primal=False, fresh=True):
        """``(lowest margin bound, next unit to split or -1, optimised (alpha, beta[, theta]))``
        of one subdomain, its Adam run started at ``params0`` (the parent's); with ``primal``, also
        :func:`primal_point` of its optimised bound. With ``cfg.refresh``, ``params0`` also holds the
        parent's hidden bounds (intersected with the recomputed ones; with ``fresh`` false, only the second
        layer's are recomputed) and the result holds the subdomain's."""
        inherited = params0[n_opt] if cfg.refresh > 0 else None
        params0 = tuple(params0[:n_opt])
        sb, rels = sub_bounds(sgn, inherited, fresh)
        empty = jnp.zeros((), bool)
        for l, u in sb:
            empty = empty | jnp.any((l - u) > 1e-4 * (1.0 + jnp.abs(u)))
        opt = optax.adam(cfg.lr)

        def loss(params):
            lb = spec_lb(params, sgn, sb)
            return -jnp.sum(jnp.minimum(lb, 0.0)), lb

        def step(carry, _):
            params, st, best, best_p = carry
            (_, lb), g = jax.value_and_grad(loss, has_aux=True)(params)
            better = jnp.min(lb) > jnp.min(best)
            best_p = jax.tree_util.tree_map(lambda a, b: jnp.where(better, a, b), params, best_p)
            upd, st = opt.update(g, st, params)
            alphas, betas, *theta = optax.apply_updates(params, upd)
            params = ([jnp.clip(a, 0.0, 1.0) for a in alphas], [jnp.maximum(b, 0.0) for b in betas], *theta)
            return (params, st, jnp.maximum(best, lb), best_p), None

        best0 = jnp.full((n_rows,), -jnp.inf)
        carry = (params0, opt.init(params0), best0, params0)
        (params, _, best, best_p), _ = jax.lax.scan(step, carry, None, length=cfg.steps)
        last = spec_lb(params, sgn, sb)
        best_p = jax.tree_util.tree_map(lambda a, b: jnp.where(jnp.min(last) > jnp.min(best), a, b), params, best_p)
        best = jnp.maximum(best, last)
        lb = jnp.where(empty, jnp.inf, jnp.min(best))
        if cfg.refresh > 0:
            best_p = (*best_p, list(sb[1:]))
        if primal:
            return lb, choose(best_p, sgn, sb, rels, best), best_p, primal_point(best_p, sgn, sb, best)
        return lb, choose(best_p, sgn, sb, rels, best), best_p

    return bound_one, init_params, total, sub_bounds


__all__ = ["FIRST_JACOBIAN_MAX"]
