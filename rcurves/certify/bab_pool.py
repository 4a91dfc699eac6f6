"""The frontier of the host-driven search (``bab_host.bab_search``), kept on the device between steps.

A :class:`Pool` holds the undecided subdomains in ``C`` slots (``C`` a power of two): their split signs, bounds,
next units, ``(alpha, beta, ...)`` parameters and ages. A slot whose bound is ``+inf`` is free: an undecided
subdomain's bound is never ``+inf`` (a child with a positive bound is proven and never stored). Small jitted
programs move subdomains in and out without a copy to the host, each of fixed shapes (compiled once per
capacity, number of hidden units and parameter shapes), the pool's buffers donated to them (updated in place
where the device allows):

* :func:`_take`: the ``B`` subdomains with the lowest bounds (``lax.top_k``: the lower slot first on a tie),
  their slots freed; fewer than ``B`` are padded with copies of the first (bounded, never stored);
* :func:`_tail`: a step's children (the ``2 B`` of :func:`bab_step._search_split`) into the lowest free slots
  where open (valid, bound not positive), and what the host reads per step, a few numbers: how many bounds
  are NaN, how many primal points are candidate counterexamples (margin ``<= 0``), how many open children
  have no unit left to split (the exact LP's leaves), how many are open, the lowest bound of the proven ones,
  the pool's lowest bound before and after, and, for the next step's program, the most split first-layer
  units and the oldest age among the next ``B`` to be taken (:func:`_next_info`);
* :func:`_drop`: subdomains removed by slot (leaves the exact LP proved); :func:`_peek`: the next step's
  numbers again after that;
* :func:`_grow`: a pool of twice the slots, the subdomains in the same slots (the host grows it before a step
  whose children might not fit, so :func:`_tail` always finds free slots).

The host keeps the count of subdomains, the capacity and the clock; it asks for the children themselves only
when a step has candidate counterexamples or leaves.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

#: Slots of a new pool (at least ``2 batch``, rounded up to a power of two); it doubles when full.
INITIAL_CAPACITY = 1024


class Pool(NamedTuple):
    """The undecided subdomains of one search (``C`` slots, ``H`` hidden units); free slots have ``lb = +inf``."""

    sgn: jax.Array     # (C, H) int8 split signs: -1 active, +1 inactive, 0 free
    lb: jax.Array      # (C,) float32 lowest margin bound; +inf: the slot is free
    nxt: jax.Array     # (C,) int32 the unit it splits on next
    leaves: tuple      # the leaves of its parameters (alpha, beta[, theta][, hidden bounds]), each (C, ...)
    age: jax.Array     # (C,) int32 splits since its later layers' bounds were recomputed (BaBConfig.refresh)


def capacity_for(n: int, batch: int) -> int:
    """Slots of a new pool for ``n`` subdomains and batches of ``batch``: a power of two at least
    :data:`INITIAL_CAPACITY`, ``n + batch`` and ``2 batch``."""
    need = max(INITIAL_CAPACITY, n + batch, 2 * batch, 1)
    return 1 << (need - 1).bit_length()


@functools.partial(jax.jit, static_argnames=("capacity",))
def _new_pool(sgn, lb, nxt, leaves, *, capacity: int) -> Pool:
    """A pool of ``capacity`` slots holding the ``m`` subdomains given in its first ``m`` slots, all of age 0."""
    m = lb.shape[0]

    def put(a, fill):
        return jnp.full((capacity,) + a.shape[1:], fill, a.dtype).at[:m].set(a)

    return Pool(put(sgn, 0), put(lb.astype(jnp.float32), jnp.inf), put(nxt, -1), tuple(put(a, 0) for a in leaves),
                jnp.zeros((capacity,), jnp.int32))


@functools.partial(jax.jit, static_argnames=("capacity",))
def _grow(pool: Pool, *, capacity: int) -> Pool:
    """The pool in ``capacity`` slots (more than it has), each subdomain in its slot."""
    c = pool.lb.shape[0]

    def put(a, fill):
        return jnp.full((capacity,) + a.shape[1:], fill, a.dtype).at[:c].set(a)

    return Pool(put(pool.sgn, 0), put(pool.lb, jnp.inf), put(pool.nxt, -1), tuple(put(a, 0) for a in pool.leaves),
                put(pool.age, 0))


def _lowest(lb, batch: int):
    """``(slots (B,), valid (B,))``: the ``B`` lowest bounds' slots, the lower slot first on a tie."""
    _, idx = jax.lax.top_k(-lb, batch)
    return idx, lb[idx] < jnp.inf


def _next_info(pool: Pool, batch: int, h1: int):
    """``(most split first-layer units, oldest age)`` over the ``B`` subdomains :func:`_take` would take next,
    each counted with the unit it splits on (``bab_host``'s choice of program: ``FEW_FIRST_SPLITS``, ``refresh``);
    0 and 0 when the pool is empty."""
    idx, valid = _lowest(pool.lb, batch)
    nxt = pool.nxt[idx]
    n1 = jnp.count_nonzero(pool.sgn[idx, :h1], axis=1) + ((nxt >= 0) & (nxt < h1))
    return (jnp.max(jnp.where(valid, n1, 0)).astype(jnp.int32),
            jnp.max(jnp.where(valid, pool.age[idx], 0)).astype(jnp.int32))


@functools.partial(jax.jit, static_argnames=("batch",), donate_argnums=0)
def _take(pool: Pool, *, batch: int):
    """``(pool, sgn (B, H), nxt (B,), leaves [(B, ...)], age (B,))``: the ``B`` subdomains with the lowest bounds,
    their slots freed; where fewer are held, the rest copies of the first (their results unused)."""
    idx, valid = _lowest(pool.lb, batch)
    idx = jnp.where(valid, idx, idx[0])
    out = (pool.sgn[idx], pool.nxt[idx], tuple(a[idx] for a in pool.leaves), pool.age[idx])
    return (pool._replace(lb=pool.lb.at[idx].set(jnp.inf)), *out)


@functools.partial(jax.jit, static_argnames=("batch", "h1", "fresh"), donate_argnums=0)
def _tail(pool: Pool, kids, klb, knxt, kleaves, kmarg, age, m, *, batch: int, h1: int, fresh: bool):
    """The children ``kids (2B, H)`` with bounds ``klb``, next units ``knxt``, parameters ``kleaves`` and primal
    margins ``kmarg``, of parents of ages ``age (B,)``, of which the first ``m`` are real (their children
    *valid*, the others copies): the open ones (valid, bound not positive) put in the lowest free slots (age 0
    with ``fresh``, else their parent's + 1).

    Returns ``(pool, counts, values, dest)``: ``counts`` int32 ``[NaN bounds, candidate counterexamples
    (margin <= 0), leaves (open, no unit left), open, next step's most split first-layer units, next step's
    oldest age]`` over the valid children; ``values`` float32 ``[lowest proven bound (inf: none), the pool's
    lowest bound before, after]``; ``dest (2B,)`` the slot of each child (``C``: not stored)."""
    c = pool.lb.shape[0]
    valid = jnp.concatenate([jnp.arange(batch) < m] * 2)
    kage = jnp.zeros((2 * batch,), jnp.int32) if fresh else jnp.concatenate([age, age]) + 1
    shut = valid & (klb > 0)
    open_ = valid & ~(klb > 0)                         # (NaN is open: the host stops before it matters)
    free = jnp.nonzero(pool.lb == jnp.inf, size=2 * batch, fill_value=c)[0]
    rank = jnp.clip(jnp.cumsum(open_) - 1, 0, 2 * batch - 1)
    dest = jnp.where(open_, free[rank], c).astype(jnp.int32)
    new = Pool(pool.sgn.at[dest].set(kids, mode="drop"), pool.lb.at[dest].set(klb, mode="drop"),
               pool.nxt.at[dest].set(knxt, mode="drop"),
               tuple(a.at[dest].set(k, mode="drop") for a, k in zip(pool.leaves, kleaves)),
               pool.age.at[dest].set(kage, mode="drop"))
    n1, oldest = _next_info(new, batch, h1)
    counts = jnp.stack([jnp.sum(valid & jnp.isnan(klb)), jnp.sum(valid & (kmarg <= 0)),
                        jnp.sum(open_ & (knxt < 0)), jnp.sum(open_), n1, oldest]).astype(jnp.int32)
    values = jnp.stack([jnp.min(jnp.where(shut, klb, jnp.inf)), jnp.min(pool.lb), jnp.min(new.lb)])
    return new, counts, values.astype(jnp.float32), dest


@functools.partial(jax.jit, donate_argnums=0)
def _drop(pool: Pool, slots) -> Pool:
    """The pool without the subdomains in ``slots`` (an index ``C`` is ignored)."""
    return pool._replace(lb=pool.lb.at[slots].set(jnp.inf, mode="drop"))


@functools.partial(jax.jit, static_argnames=("batch", "h1"))
def _peek(pool: Pool, *, batch: int, h1: int):
    """``(int32 [next step's most split first-layer units, oldest age], the pool's lowest bound)``."""
    n1, oldest = _next_info(pool, batch, h1)
    return jnp.stack([n1, oldest]), jnp.min(pool.lb)


__all__ = ["INITIAL_CAPACITY", "Pool", "capacity_for"]
