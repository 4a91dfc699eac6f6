"""Branch and bound on ReLU splits: beta-CROWN over a fixed set of subdomains.

CROWN's bound is loose where hidden ReLUs are *unstable* on the ball (their
pre-activation bounds ``l < 0 < u``): each is replaced by its triangle
relaxation. Splitting an unstable unit ``i`` of layer ``j`` into the two
cases ``h_i >= 0`` (the unit is the identity) and ``h_i <= 0`` (it is zero)
removes its relaxation; the ball is certified when every case is. This module
splits the ``k`` units with the largest relaxation cost at once, so the ball
becomes ``2**k`` subdomains, bounded side by side (``vmap``), each by
alpha-beta-CROWN (Wang et al. 2021, "Beta-CROWN: efficient bound propagation
with per-neuron split constraints", eq. 5-7):

* the lower bound of the margin spec is pulled back as in CROWN
  (``bounds.backsub``), with the split units' relaxations made exact and, at
  each split unit, the split constraint added with a multiplier
  ``beta >= 0``: on ``{h_i >= 0}``, ``f >= f - beta h_i``; on
  ``{h_i <= 0}``, ``f >= f + beta h_i``; the bound of the right-hand side over
  the whole ball is then a lower bound of ``f`` over the subdomain, for every
  ``beta >= 0`` and every lower slope ``alpha in [0, 1]``;
* ``alpha`` (one per unstable unit and spec row) and ``beta`` (one per split
  and spec row) are optimised with Adam (optax) to raise the violated spec
  bounds; every iterate is sound, the best bound of each row over the
  iterates is kept;
* the hidden layers' bounds are CROWN's on the whole ball (sound on every
  subdomain; the split units' own bounds are clipped at 0).

Choice of the splits: with ``lam`` the worst spec row's CROWN coefficients of
the hidden activations, unit ``i`` costs ``|lam_i| u_i (-l_i) / (u_i - l_i)``
(the height of its triangle times its weight in the bound, the intercept
term of BaBSR, Bunel et al. 2020); the ``k`` largest over all hidden layers
are split.

``certified_radius(method='bab')`` searches the radius by bisection in log
scale inside ``[lower, upper]``
(CROWN's certified radius and an attack's distance): each round certifies the
midpoint's ball on all ``2**k`` subdomains. Everything is one jitted program,
points ``lax.map``ped in chunks.
"""
from __future__ import annotations

import dataclasses
import math
from typing import List

import jax
import jax.numpy as jnp
import optax

from rcurves.certify.bounds import (
    BoundConfig, Prepared, Relax, _both, _rows, _spec_start, backsub, concretize, hidden_bounds, margin_spec, relax,
)
from rcurves.certify.layers import block_transpose, forward


@dataclasses.dataclass(frozen=True)
class BaBConfig:
    """Static settings of one branch-and-bound certification.

    Attributes:
      bound: the norm and input domain (its method is ignored: CROWN bounds the
        hidden layers, alpha-beta-CROWN the spec).
      splits: ``k``, unstable units split at once (``2**k`` subdomains).
      steps: Adam steps on ``(alpha, beta)``.
      lr: Adam's learning rate.
      rows: margins branched on: the ``rows`` with the lowest CROWN bound at
        the root (the others must be certified there already).
      sub_batch: subdomains whose hidden bounds are computed at once.
    """

    bound: BoundConfig
    splits: int = 6
    steps: int = 20
    lr: float = 0.1
    rows: int = 3
    sub_batch: int = 256


def _backsub_split(prep: Prepared, relaxes: List[Relax], sgns, betas, lam, bias):
    """``bounds.backsub`` with the split constraints' terms ``beta * sgn`` added
    to the coefficients of each hidden pre-activation (``sgn`` -1 on units
    split active, +1 on units split inactive, 0 elsewhere)."""
    net = prep.net
    shapes, blocks = net.shapes, net.blocks
    for j in range(len(relaxes), 0, -1):
        r = relaxes[j - 1]
        pos, neg = jnp.maximum(lam, 0.0), jnp.minimum(lam, 0.0)
        bias = bias + jnp.sum(_rows(neg * r.tu), axis=1)
        lam = pos * r.sl + neg * r.su + betas[j - 1] * sgns[j - 1]
        bias = bias + _rows(lam) @ prep.consts[j - 1]
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


def split_scores(prep: Prepared, bounds, relaxes: List[Relax], C, x, eps, cfg: BoundConfig):
    """Per hidden unit (flattened over all hidden layers) the BaBSR intercept
    score of the worst spec row (0 for stable units), and CROWN's bound of
    every spec row ``(R,)``."""
    lam, b = _spec_start(prep, C)
    full, fb = backsub(prep, relaxes, lam, b, len(relaxes))
    lb = concretize(full, fb, x, eps, cfg)[0]
    worst = jnp.argmin(jnp.where(jnp.any(C != 0, axis=1), lb, jnp.inf))
    coeffs = _activation_coefficients(prep, relaxes, lam[worst])
    scores = []
    for (l, u), c in zip(bounds, coeffs):
        unstable = (l < 0) & (u > 0)
        height = jnp.where(unstable, u * (-l) / jnp.where(unstable, u - l, 1.0), 0.0)
        scores.append((jnp.abs(c) * height).reshape(-1))
    return jnp.concatenate(scores), lb


def bab_certify_point(prep: Prepared, x, y, eps, cfg: BaBConfig):
    """Is the ball of radius ``eps`` around ``x`` certified on all ``2**k`` subdomains?

    Returns ``(ok, m)``: ``m`` the smallest lower bound of a margin
    ``z_y - z_j`` over the subdomains (``ok`` is ``m > 0``).
    """
    bcfg = dataclasses.replace(cfg.bound, method="crown")
    k_cls = prep.net.n_classes
    C = margin_spec(y, k_cls)
    other = jnp.arange(k_cls) != y
    bounds, relaxes = hidden_bounds(prep, x, eps, bcfg)
    sizes = [math.prod(l.shape) for l, _ in bounds]
    shapes = [l.shape for l, _ in bounds]
    total = sum(sizes)
    k = min(cfg.splits, total)
    scores, root_lb = split_scores(prep, bounds, relaxes, C, x, eps, bcfg)
    # Only the cfg.rows worst margins are branched on; the others must hold at the root
    # (a root bound holds on every subdomain).
    n_rows = min(cfg.rows, k_cls - 1)
    root_lb = jnp.where(other, root_lb, jnp.inf)
    order = jnp.argsort(root_lb)
    kept, rest = order[:n_rows], order[n_rows:]
    rest_ok = jnp.min(root_lb[rest], initial=jnp.inf) > 0
    C = C[kept]
    top_scores, idx = jax.lax.top_k(scores, k)
    real = top_scores > 0                                          # only unstable units are split
    bits = (jnp.arange(2 ** k)[:, None] >> jnp.arange(k)[None, :]) & 1   # (S, k): 1 = active
    sgn_flat = jax.vmap(lambda b: jnp.zeros(total).at[idx].set(jnp.where(real, 1.0 - 2.0 * b, 0.0)))(bits)
    offsets = [sum(sizes[:j]) for j in range(len(sizes))]
    lam0, b0 = _spec_start(prep, C)

    def sub_bounds(sgn):
        """The hidden bounds on one subdomain: each layer's bounds recomputed by
        CROWN through the earlier layers' split relaxations (where the layer has
        a dense matrix), intersected with the root's, split units clipped at 0."""
        out, rels = [], []
        for j, (l, u) in enumerate(bounds):
            if j >= 1 and prep.jacs[j] is not None:
                lam, b = _both(prep.jacs[j], prep.consts[j])
                lam, b = backsub(prep, rels, lam, b, j)
                lb = concretize(lam, b, x, eps, bcfg)[0]
                half = lb.shape[0] // 2
                l = jnp.maximum(l, lb[:half].reshape(shapes[j]))
                u = jnp.minimum(u, -lb[half:].reshape(shapes[j]))
            s = sgn[offsets[j]:offsets[j] + sizes[j]].reshape(shapes[j])
            l, u = jnp.where(s < 0, jnp.maximum(l, 0.0), l), jnp.where(s > 0, jnp.minimum(u, 0.0), u)
            out.append((l, u))
            rels.append(relax(l, u))
        return out

    def sub_sgns(sgn):
        return [sgn[offsets[j]:offsets[j] + sizes[j]].reshape(shapes[j]) for j in range(len(sizes))]

    def spec_lb(params, sgn, sb):
        alphas, betas = params
        rel = [relax(l, u, jnp.clip(a, 0.0, 1.0)) for (l, u), a in zip(sb, alphas)]
        lam, b = _backsub_split(prep, rel, sub_sgns(sgn), [jnp.maximum(bt, 0.0) for bt in betas], lam0, b0)
        return concretize(lam, b, x, eps, bcfg)[0]

    rows = C.shape[0]
    sub = jax.lax.map(sub_bounds, sgn_flat, batch_size=min(2 ** k, cfg.sub_batch))
    # an empty subdomain (some unit's bounds crossed, beyond float32 noise) has no adversarial
    empty = jnp.zeros(2 ** k, bool)
    for l, u in sub:
        gap = (l - u).reshape(2 ** k, -1) > 1e-4 * (1.0 + jnp.abs(u).reshape(2 ** k, -1))
        empty = empty | jnp.any(gap, axis=1)
    all_lb = jax.vmap(spec_lb, in_axes=((0, 0), 0, 0))
    alpha0 = [jnp.broadcast_to((u > -l).astype(jnp.float32)[:, None], (2 ** k, rows) + l.shape[1:]) for l, u in sub]
    beta0 = [jnp.zeros((2 ** k, rows) + l.shape, jnp.float32) for l, _ in bounds]
    params0 = (alpha0, beta0)

    def loss(params):
        lb = all_lb(params, sgn_flat, sub)
        return -jnp.sum(jnp.minimum(lb, 0.0)), lb

    opt = optax.adam(cfg.lr)

    def step(carry, _):
        params, st, best = carry
        (_, lb), g = jax.value_and_grad(loss, has_aux=True)(params)
        upd, st = opt.update(g, st, params)
        params = optax.apply_updates(params, upd)
        alphas, betas = params
        params = ([jnp.clip(a, 0.0, 1.0) for a in alphas], [jnp.maximum(b, 0.0) for b in betas])
        return (params, st, jnp.maximum(best, lb)), None

    best0 = jnp.full((2 ** k, rows), -jnp.inf)
    (params, _, best), _ = jax.lax.scan(step, (params0, opt.init(params0), best0), None, length=cfg.steps)
    best = jnp.maximum(best, all_lb(params, sgn_flat, sub))
    best = jnp.where(empty[:, None], jnp.inf, best)
    m = jnp.where(rest_ok, jnp.min(best), jnp.minimum(jnp.min(best), jnp.min(root_lb[rest], initial=jnp.inf)))
    return m > 0, m


def _bab_point(prep, x, y, lo, hi, rounds, cfg: BaBConfig):
    logits = forward(prep.net, x)
    correct = jnp.argmax(logits) == y

    def body(_, st):
        lo, hi = st
        mid = jnp.where(lo > 0, jnp.sqrt(jnp.maximum(lo, 1e-30) * hi), 0.5 * hi)
        ok, _ = bab_certify_point(prep, x, y, mid, cfg)
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

    lo2, _ = jax.lax.fori_loop(0, rounds, body, (lo, hi))
    return jnp.where(correct & (hi > 0), jnp.maximum(lo, lo2), 0.0)


def _bab_program(net, x, y, lo, hi, rounds, *, cfg: BaBConfig, batch: int):
    from rcurves.certify.bounds import prepare

    prep = prepare(net, dataclasses.replace(cfg.bound, method="crown"))
    return jax.lax.map(lambda a: _bab_point(prep, *a, rounds, cfg), (x, y, lo, hi), batch_size=batch)


bab_jit = jax.jit(_bab_program, static_argnames=("cfg", "batch"))

__all__ = ["BaBConfig", "bab_certify_point", "bab_jit", "split_scores"]
