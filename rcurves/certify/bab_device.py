"""Branch and bound inside one jitted program: one point's search, every step on the device.

:func:`bab_certify_point` runs the loop of ``certify.bab`` inside one ``lax.while_loop`` over a frontier of
``capacity = budget + 2 batch + 1`` slots (:class:`Frontier`; ``bab_settings.bab_config`` sizes it so that it
cannot overflow), each iteration the ``batch`` lowest subdomains split and their ``2 batch`` children bounded
side by side (``vmap``). It pays per iteration for the whole frontier: on the MNIST MLP 784-256-256-10 a
879-subdomain proof took 11.9 s with a budget of 4,096 and 27.7 s with 16,384; on a random MLP 16-64-64-10 a
1,641-subdomain one 2.8 s and 11.2 s. (``bab_host.bab_search``, the host-driven search, with the same BaBSR rule
bounds the same subdomains in 9.0-9.4 s and 0.57 s, whatever the budget.)

``cfg.batch`` is a number here (``certified_radius`` resolves ``"auto"`` first: ``bab_batch.choose`` on the
memory of :data:`bab_jit`'s whole program, frontier included).

``certified_radius(method='bab')`` (:data:`bab_jit`) searches the radius by bisection in log
scale inside ``[lower, upper]`` (CROWN's certified radius and an attack's
distance), each round one branch and bound at the midpoint; after a failed
round the next, smaller radius starts from the frontier the failed one left
(its undecided subdomains bounded again), not from the root. Everything is one
jitted program; points ``lax.map``ped one at a time, each with its own
frontier (``lax.while_loop``).
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from attacks.precision import exact_precision
from rcurves.certify.bab_bounds import _bounder
from rcurves.certify.bab_root import _root
from rcurves.certify.bab_settings import BaBConfig
from rcurves.nets.bounds import Prepared
from rcurves.nets.layers import forward


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


@exact_precision
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
    if not isinstance(cfg.batch, int):
        raise ValueError(f"batch: bab_certify_point needs a number, got {cfg.batch!r} (resolve 'auto' with "
                         "bab_batch.choose and bab_settings.with_batch, as certified_radius does)")
    root = _root(prep, x, y, eps, cfg)
    rest_ok = root.rest_ok
    bound_one, init_params, total, _ = _bounder(prep, root, x, eps, cfg)

    S, B = cfg.capacity, min(cfg.batch, cfg.capacity)
    root_sgn = jnp.zeros((total,), jnp.int8)
    lb_r, nxt_r, p_r = bound_one(root_sgn, init_params())
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


@exact_precision
def _bab_program(net, x, y, lo, hi, rounds, *, cfg: BaBConfig, batch: int):
    from rcurves.nets.bounds import prepare

    prep = prepare(net, dataclasses.replace(cfg.bound, method="crown"))
    # batch 1: a plain scan over points (lax.map's batches are vmapped: the
    # while_loop would then carry a batch axis and run until every point is done)
    return jax.lax.map(lambda a: _bab_point(prep, *a, rounds, cfg), (x, y, lo, hi),
                       batch_size=None if batch == 1 else batch)


bab_jit = jax.jit(_bab_program, static_argnames=("cfg", "batch"))


__all__ = ["Frontier", "bab_certify_point", "bab_jit"]
