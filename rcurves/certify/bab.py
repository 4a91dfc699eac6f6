"""Branch and bound on ReLU splits: a frontier of subdomains, split where the bound fails.

CROWN's bound is loose where hidden ReLUs are *unstable* on the ball (their
pre-activation bounds ``l < 0 < u``): each is replaced by its triangle
relaxation. Splitting an unstable unit ``i`` into the two cases ``h_i >= 0``
(the unit is the identity) and ``h_i <= 0`` (it is zero) removes its
relaxation; the ball is certified when every case is. A *subdomain* is a set
of such cases, one sign per split unit (``sgn (H,)`` over all hidden units:
``-1`` split active, ``+1`` split inactive, ``0`` not split); the subdomains
of a frontier partition the input space, so the ball is certified when the
margin bound is positive on each of them.

Branch and bound (the loop of alpha-beta-CROWN, Wang et al. 2021,
"Beta-CROWN: efficient bound propagation with per-neuron split constraints"):

1. bound the root (the whole ball); certified if its bound is positive;
2. otherwise the frontier holds the root; each iteration takes the ``batch``
   frontier subdomains with the lowest bounds, splits each on its own
   highest-scoring unstable unit into two children, bounds the ``2 batch``
   children side by side (``vmap``), drops the children that are certified
   (or empty: some unit's bounds crossed) and puts the others in the frontier;
3. until the frontier is empty (certified), or it fails: the ``budget`` of
   subdomains bounded is spent, the frontier (``capacity`` slots) overflows, or a
   subdomain whose bound fails has no unstable unit left to split.

Each subdomain is bounded by alpha-beta-CROWN (Wang et al. 2021, eq. 5-7):

* its hidden layers' bounds are CROWN's through the earlier layers'
  relaxations *with the subdomain's splits made exact* (split units clipped at
  0), intersected with the root's;
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

Branching (BaBSR, Bunel et al. 2020, its intercept term): with ``lam`` the
CROWN coefficients of the subdomain's worst margin row over the hidden
activations, unit ``i`` scores ``|lam_i| u_i (-l_i) / (u_i - l_i)``; split
units are stable in their subdomain and score 0.

Only the ``rows`` margins with the lowest root bounds are branched on (by
default all of them, up to 10 classes); the others must be certified at the
root (a root bound holds on every subdomain).

``certified_radius(method='bab')`` searches the radius by bisection in log
scale inside ``[lower, upper]`` (CROWN's certified radius and an attack's
distance), each round one branch and bound at the midpoint; after a failed
round the next, smaller radius starts from the frontier the failed one left
(its undecided subdomains bounded again), not from the root. Everything is one
jitted program; points ``lax.map``ped one at a time, each with its own
frontier (``lax.while_loop``).
"""
from __future__ import annotations

import dataclasses
import math
from typing import List, NamedTuple

import jax
import jax.numpy as jnp
import optax

from rcurves.certify.bounds import (
    BoundConfig, Prepared, Relax, _both, _spec_start, backsub, concretize, hidden_bounds, margin_spec, relax,
)
from rcurves.certify.layers import block_transpose, forward


@dataclasses.dataclass(frozen=True)
class BaBConfig:
    """Static settings of one branch-and-bound certification.

    Attributes:
      bound: the norm and input domain (its method is ignored: CROWN bounds the
        hidden layers, alpha-beta-CROWN the margins).
      batch: subdomains split per iteration (``2 batch`` children bounded at once).
      budget: subdomains bounded per certification: no iteration starts
        once ``budget`` have been (so at most ``budget + 2 batch - 1``).
      capacity: frontier slots; more undecided subdomains than this fails.
      steps: Adam steps on ``(alpha, beta)`` per subdomain.
      lr: Adam's learning rate.
      rows: margins branched on: the ``rows`` with the lowest CROWN bound at
        the root (the others must be certified there already). The default
        branches on every margin of up to 10 classes: with 3, a ball on which
        CROWN left more than 3 margins unproven failed at the root without a
        split (5 of 9 random points of the MNIST MLP AT at 0.75 of their attack
        distance), and the radii were 2.5% smaller at the median (1.547 vs
        1.508 attack/certified on 17 points) for 0.6 of the time.
    """

    bound: BoundConfig
    batch: int = 8
    budget: int = 256
    capacity: int = 137
    steps: int = 20
    lr: float = 0.1
    rows: int = 9


def _backsub_split(prep: Prepared, relaxes: List[Relax], sgns, betas, lam, bias):
    """``bounds.backsub`` with the split constraints' terms ``beta * sgn`` added
    to the coefficients of each hidden pre-activation (``sgn`` -1 on units
    split active, +1 on units split inactive, 0 elsewhere)."""
    net = prep.net
    shapes, blocks = net.shapes, net.blocks
    for j in range(len(relaxes), 0, -1):
        r = relaxes[j - 1]
        pos, neg = jnp.maximum(lam, 0.0), jnp.minimum(lam, 0.0)
        bias = bias + jnp.sum((neg * r.tu).reshape(lam.shape[0], -1), axis=1)
        lam = pos * r.sl + neg * r.su + betas[j - 1] * sgns[j - 1]
        bias = bias + lam.reshape(lam.shape[0], -1) @ prep.consts[j - 1]
        lam = jax.vmap(block_transpose(blocks[j - 1], shapes[j - 1]))(lam)
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


class Frontier(NamedTuple):
    """The undecided subdomains of one point at one radius (``S`` slots, ``H`` hidden units)."""

    sgn: jax.Array     # (S, H) int8 split signs: -1 active, +1 inactive, 0 free
    lb: jax.Array      # (S,) lowest margin bound of the subdomain
    nxt: jax.Array     # (S,) unit it splits on next (-1: none unstable)
    alive: jax.Array   # (S,) bool, the slot holds an undecided subdomain
    failed: jax.Array  # () bool: overflow, or a failing subdomain with nothing to split
    bounded: jax.Array  # () subdomains bounded so far
    params: tuple      # each subdomain's optimised (alpha, beta), (S, rows, ...) leaves: its children's start
    stale: jax.Array   # (S,) bool, bounded at another radius: to be bounded again before any split
    whole: jax.Array   # () bool, no child was ever dropped (the subdomains still cover the ball)


def bab_certify_point(prep: Prepared, x, y, eps, cfg: BaBConfig, prev: "Frontier | None" = None, use_prev=False):
    """Is the ball of radius ``eps`` around ``x`` certified for class ``y``?

    ``prev``: the frontier a failed certification at a *larger* radius left
    (used where ``use_prev`` is true and it is whole, i.e. never overflowed):
    its undecided subdomains are bounded again at ``eps`` and the search
    goes on from them instead of from the root; the subdomains it certified
    stay certified, since the smaller ball lies inside the larger one.

    Returns ``(ok, m, n, frontier)``: ``m`` the lowest bound left in the
    frontier (``inf`` when certified), ``n`` the number of subdomains bounded.
    """
    bcfg = dataclasses.replace(cfg.bound, method="crown")
    k_cls = prep.net.n_classes
    C = margin_spec(y, k_cls)
    other = jnp.arange(k_cls) != y
    bounds, relaxes = hidden_bounds(prep, x, eps, bcfg)
    sizes = [math.prod(l.shape) for l, _ in bounds]
    shapes = [l.shape for l, _ in bounds]
    offsets = [sum(sizes[:j]) for j in range(len(sizes))]
    total = sum(sizes)

    # root: CROWN on every margin; only the cfg.rows worst are branched on
    lam_all, b_all = _spec_start(prep, C)
    full, fb = backsub(prep, relaxes, lam_all, b_all, len(relaxes))
    root_lb = jnp.where(other, concretize(full, fb, x, eps, bcfg)[0], jnp.inf)
    n_rows = min(cfg.rows, k_cls - 1)
    order = jnp.argsort(root_lb)
    kept, rest = order[:n_rows], order[n_rows:]
    rest_ok = jnp.min(root_lb[rest], initial=jnp.inf) > 0
    lam0, b0 = lam_all[kept], b_all[kept]

    def layers(sgn):
        return [sgn[offsets[j]:offsets[j] + sizes[j]].reshape(shapes[j]) for j in range(len(sizes))]

    def sub_bounds(sgn):
        """Hidden bounds on a subdomain: each layer's bounds recomputed by CROWN
        through the earlier layers' split relaxations (where the layer has a
        dense matrix), intersected with the root's, split units clipped at 0."""
        out, rels = [], []
        for j, ((l, u), s) in enumerate(zip(bounds, layers(sgn))):
            if j >= 1 and prep.jacs[j] is not None:
                lam, b = _both(prep.jacs[j], prep.consts[j])
                lam, b = backsub(prep, rels, lam, b, j)
                lb = concretize(lam, b, x, eps, bcfg)[0]
                half = lb.shape[0] // 2
                l = jnp.maximum(l, lb[:half].reshape(shapes[j]))
                u = jnp.minimum(u, -lb[half:].reshape(shapes[j]))
            l, u = jnp.where(s < 0, jnp.maximum(l, 0.0), l), jnp.where(s > 0, jnp.minimum(u, 0.0), u)
            out.append((l, u))
            rels.append(relax(l, u))
        return out, rels

    def spec_lb(params, sgn, sb):
        alphas, betas = params
        rel = [relax(l, u, jnp.clip(a, 0.0, 1.0)) for (l, u), a in zip(sb, alphas)]
        sg = [s.astype(jnp.float32) for s in layers(sgn)]
        lam, b = _backsub_split(prep, rel, sg, [jnp.maximum(bt, 0.0) for bt in betas], lam0, b0)
        return concretize(lam, b, x, eps, bcfg)[0]

    def init_params(sgn):
        """CROWN's adaptive slopes (at the root's bounds) and no split multipliers."""
        alpha = [jnp.broadcast_to((u > -l).astype(jnp.float32), (n_rows,) + l.shape) for l, u in bounds]
        beta = [jnp.zeros((n_rows,) + l.shape, jnp.float32) for l, _ in bounds]
        return alpha, beta

    def bound_one(sgn, params0):
        """``(lowest margin bound, next unit to split or -1, optimised (alpha, beta))``
        of one subdomain, its Adam run started at ``params0`` (the parent's)."""
        sb, rels = sub_bounds(sgn)
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
            alphas, betas = optax.apply_updates(params, upd)
            params = ([jnp.clip(a, 0.0, 1.0) for a in alphas], [jnp.maximum(b, 0.0) for b in betas])
            return (params, st, jnp.maximum(best, lb), best_p), None

        best0 = jnp.full((n_rows,), -jnp.inf)
        carry = (params0, opt.init(params0), best0, params0)
        (params, _, best, best_p), _ = jax.lax.scan(step, carry, None, length=cfg.steps)
        last = spec_lb(params, sgn, sb)
        best_p = jax.tree_util.tree_map(lambda a, b: jnp.where(jnp.min(last) > jnp.min(best), a, b), params, best_p)
        best = jnp.maximum(best, last)
        lb = jnp.where(empty, jnp.inf, jnp.min(best))
        worst = jnp.argmin(best)
        scores = _scores(sb, _activation_coefficients(prep, rels, lam0[worst]))
        nxt = jnp.where(jnp.max(scores) > 0, jnp.argmax(scores), -1).astype(jnp.int32)
        return lb, nxt, best_p

    S, B = cfg.capacity, min(cfg.batch, cfg.capacity)
    root_sgn = jnp.zeros((total,), jnp.int8)
    lb_r, nxt_r, p_r = bound_one(root_sgn, init_params(root_sgn))
    fresh = Frontier(
        sgn=jnp.zeros((S, total), jnp.int8),
        lb=jnp.full((S,), jnp.inf).at[0].set(lb_r),
        nxt=jnp.full((S,), -1, jnp.int32).at[0].set(nxt_r),
        alive=jnp.zeros((S,), bool).at[0].set(~(lb_r > 0)),   # NaN is open, never certified
        failed=~rest_ok | (~(lb_r > 0) & (nxt_r < 0)),
        bounded=jnp.ones((), jnp.int32),
        params=jax.tree_util.tree_map(lambda a: jnp.zeros((S,) + a.shape, a.dtype).at[0].set(a), p_r),
        stale=jnp.zeros((S,), bool),
        whole=jnp.ones((), bool),
    )
    if prev is None:
        start = fresh
    else:
        # the previous frontier's undecided subdomains, to be bounded again at
        # this (smaller) radius; the ones it certified stay certified (a
        # smaller ball is inside the larger one)
        again = Frontier(sgn=prev.sgn, lb=jnp.where(prev.alive, -jnp.inf, jnp.inf), nxt=prev.nxt,
                         alive=prev.alive, failed=~rest_ok, bounded=jnp.zeros((), jnp.int32), params=prev.params,
                         stale=prev.alive, whole=prev.whole)
        # (not where the root alone already certifies this radius)
        use = use_prev & prev.whole & jnp.any(prev.alive) & ~(lb_r > 0)
        start = jax.tree_util.tree_map(lambda a, b: jnp.where(use, a, b), again, fresh)

    def cond(f: Frontier):
        return jnp.any(f.alive) & ~f.failed & (f.bounded < cfg.budget)

    def body(f: Frontier):
        rebound = jnp.any(f.stale)
        # either up to 2B stale subdomains bounded again as they are ...
        _, rs = jax.lax.top_k(f.stale.astype(jnp.float32), 2 * B)
        r_valid = f.stale[rs]
        # ... or the B lowest undecided subdomains split in two
        _, sel = jax.lax.top_k(jnp.where(f.alive, -f.lb, -jnp.inf), B)
        valid = f.alive[sel]
        unit = f.nxt[sel]
        parents = f.sgn[sel]                                             # (B, H)
        cols = jnp.arange(total)[None, :] == jnp.maximum(unit, 0)[:, None]
        kids = jnp.concatenate([jnp.where(cols, jnp.int8(-1), parents),  # active
                                jnp.where(cols, jnp.int8(1), parents)])  # inactive
        kids = jnp.where(rebound, f.sgn[rs], kids)
        warm = jax.tree_util.tree_map(lambda a: jnp.where(rebound, a[rs], jnp.concatenate([a[sel], a[sel]])),
                                      f.params)
        klb, knxt, kparams = jax.vmap(bound_one)(kids, warm)

        # rebound: results in place
        r_open = r_valid & ~(klb > 0)
        keep = lambda new, old: jnp.where(r_valid.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)  # noqa: E731
        f_re = Frontier(
            sgn=f.sgn, lb=f.lb.at[rs].set(jnp.where(r_valid, klb, f.lb[rs])),
            nxt=f.nxt.at[rs].set(jnp.where(r_valid, knxt, f.nxt[rs])),
            alive=f.alive.at[rs].set(jnp.where(r_valid, r_open, f.alive[rs])),
            failed=f.failed | jnp.any(r_open & (knxt < 0)),
            bounded=f.bounded + jnp.sum(r_valid),
            params=jax.tree_util.tree_map(lambda a, k: a.at[rs].set(keep(k, a[rs])), f.params, kparams),
            stale=f.stale.at[rs].set(False), whole=f.whole)

        # split: the parents leave, their open children take free slots
        kvalid = jnp.concatenate([valid, valid])
        open_ = kvalid & ~(klb > 0)
        stuck = jnp.any(valid & (unit < 0)) | jnp.any(open_ & (knxt < 0))
        alive = f.alive.at[sel].set(False)
        overflow = jnp.sum(open_) > jnp.sum(~alive)
        free_idx = jnp.argsort(alive, stable=True)[:2 * B]               # free slots first
        rank = jnp.cumsum(open_) - 1
        dest = jnp.where(open_, free_idx[jnp.clip(rank, 0, 2 * B - 1)], S)   # S: dropped
        f_split = Frontier(
            sgn=f.sgn.at[dest].set(kids, mode="drop"),
            lb=f.lb.at[dest].set(klb, mode="drop"),
            nxt=f.nxt.at[dest].set(knxt, mode="drop"),
            alive=alive.at[dest].set(True, mode="drop"),
            failed=f.failed | stuck | overflow,
            bounded=f.bounded + 2 * jnp.sum(valid),
            params=jax.tree_util.tree_map(lambda a, k: a.at[dest].set(k, mode="drop"), f.params, kparams),
            stale=f.stale, whole=f.whole & ~overflow)
        return jax.tree_util.tree_map(lambda a, b: jnp.where(rebound, a, b), f_re, f_split)

    f = jax.lax.while_loop(cond, body, start)
    ok = ~jnp.any(f.alive) & ~f.failed
    m = jnp.where(ok, jnp.inf, jnp.min(jnp.where(f.alive, f.lb, jnp.inf)))
    return ok, m, f.bounded, f


def _bab_point(prep, x, y, lo, hi, rounds, cfg: BaBConfig):
    logits = forward(prep.net, x)
    correct = jnp.argmax(logits) == y

    def round_(prev, use_prev, lo, hi):
        mid = jnp.where(lo > 0, jnp.sqrt(jnp.maximum(lo, 1e-30) * hi), 0.5 * hi)
        ok, _, k, f = bab_certify_point(prep, x, y, mid, cfg, prev, use_prev)
        return f, ~ok, jnp.where(ok, mid, lo), jnp.where(ok, hi, mid), k

    # the first round from the root fixes the frontier's shapes; after a failed
    # round the next (smaller) radius starts from its frontier
    f0, reuse0, lo1, hi1, k0 = round_(None, False, lo, hi)

    def body(_, st):
        f, reuse, lo, hi, n = st
        f, reuse, lo, hi, k = round_(f, reuse, lo, hi)
        return f, reuse, lo, hi, n + k

    _, _, lo2, _, n = jax.lax.fori_loop(0, rounds - 1, body, (f0, reuse0, lo1, hi1, k0))
    return jnp.where(correct & (hi > 0), jnp.maximum(lo, lo2), 0.0), n


def _bab_program(net, x, y, lo, hi, rounds, *, cfg: BaBConfig, batch: int):
    from rcurves.certify.bounds import prepare

    prep = prepare(net, dataclasses.replace(cfg.bound, method="crown"))
    # batch 1: a plain scan over points (lax.map's batches are vmapped: the
    # while_loop would then carry a batch axis and run until every point is done)
    return jax.lax.map(lambda a: _bab_point(prep, *a, rounds, cfg), (x, y, lo, hi),
                       batch_size=None if batch == 1 else batch)


def bab_config(bound: BoundConfig, budget: int, steps: int = 20, lr: float = 0.1, batch: int = 8) -> BaBConfig:
    """The :class:`BaBConfig` that bounds about ``budget`` subdomains per
    certification, ``batch`` split per iteration, with a frontier that cannot
    overflow. An iteration that splits ``v`` subdomains bounds ``2 v`` and
    adds at most ``v`` to the frontier; a round that starts from a previous
    round's ``n`` undecided subdomains bounds them again first (``n`` of its
    budget), so it ends with at most ``n + (budget - n) / 2 + batch`` of them.
    With ``capacity = budget + 2 batch + 1`` that is at most ``capacity``
    whenever ``n`` is, and a round from the root ends with at most
    ``1 + budget / 2 + batch``. (With half that capacity, a round that reused a
    nearly full frontier overflowed: it failed, sound but needlessly.)"""
    batch = max(1, min(batch, budget // 2))
    return BaBConfig(bound=bound, batch=batch, budget=budget, capacity=budget + 2 * batch + 1, steps=steps, lr=lr)


bab_jit = jax.jit(_bab_program, static_argnames=("cfg", "batch"))

__all__ = ["BaBConfig", "Frontier", "bab_certify_point", "bab_config", "bab_jit"]
