""":func:`bab_search`: branch and bound of one ball, driven from the host (``certify.verify``'s last stage).

The same search as ``bab_device.bab_certify_point``, driven from the host. Each iteration is one call of a
jitted program of fixed shapes (``batch`` parents in, their ``2 batch`` children bounded: ``bab_step._search_split``;
``batch="auto"``: ``bab_batch``), the frontier stays on the device in arrays that double when full
(``bab_pool``), and the clock is read between iterations: the time per subdomain does not grow with the
budget, and a time limit stops the search within one iteration.

**What stays on the device, what comes to the host.** Per iteration three programs are dispatched without
waiting: ``bab_pool._take`` (the ``batch`` lowest subdomains out of the frontier), ``_search_split`` (their
children bounded) and ``bab_pool._tail`` (the open children into the frontier); then one copy to the host of
nine numbers (NaN bounds, candidate counterexamples, leaves, open children, the lowest proven bound, the
frontier's lowest bound before and after, and for the next iteration's choice of program the most split
first-layer units and the oldest age among the next parents). The rest is on the host only when it happens:
the candidates' primal points (to re-check them, ``check``), the leaves' subdomains (their exact LPs, on the
host by HiGHS; those proven are then dropped from the frontier, ``bab_pool._drop``), the root's bound and
cuts (once per search). The host keeps the clock, the count of subdomains (and so when the frontier must
grow, before an iteration whose children might not fit), the budget and the second-layer LP restart (which
discards the frontier and starts a new one from the root). The staged refresh (``BaBConfig.refresh``) and
the ``FEW_FIRST_SPLITS`` program are chosen from those numbers, so the choice of program costs no extra copy. Every child's primal point is a candidate counterexample; a subdomain with no unstable unit left
goes to its exact LP (``bab_lp._exact_leaf``); on MLPs the root adds the first layer's cuts (``bab_cuts``) and,
after :data:`SECOND_AFTER` subdomains, the second layer's LP bounds (``bab_lp._second_tightened``).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks.losses import margin
from attacks.precision import exact_precision
from rcurves.certify import bab_batch, bab_step
from rcurves.certify.bab_bounds import _n_optimised, _start_params
from rcurves.certify.bab_cuts import _is_mlp, _root_cuts
from rcurves.certify.bab_lp import LEAF_TOL, _exact_leaf, _leaf_blocks, _second_tightened
from rcurves.certify.bab_pool import _drop, _grow, _new_pool, _peek, _tail, _take, capacity_for
from rcurves.certify.bab_root import Root
from rcurves.certify.bab_settings import RECOMPUTE, BaBConfig, check_batch
from rcurves.certify.bab_step import _leaf_bounds, _program_cfg, _search_root, _search_split  # noqa: F401
from rcurves.nets.bounds import Prepared


class SearchResult(NamedTuple):
    """The answer of :func:`bab_search` for one ball.

    Attributes:
      verified: every subdomain's bound is positive (and so are CROWN's bounds at the root of the margins
        not branched on).
      lower: a lower bound on ``min_{x' in ball} min_{j != y} (z_y - z_j)``: the larger of the root's bound
        (alpha-CROWN) and the lowest bound over the subdomains that partition the ball (the proven leaves
        and the undecided ones), capped by CROWN's root bound of the margins not branched on; ``-inf``
        where a bound was NaN. Positive when verified.
      bounded: subdomains bounded, the root included.
      at_root: verified by the root's bound (or, with no unstable unit at all, its exact LP), before any split.
      reason: why the search stopped: 'verified', 'falsified' (a counterexample, ``x_adv``), 'time',
        'budget', 'stuck' (a subdomain whose bound fails has no unstable ReLU left and whose exact LP
        neither proves it nor gives a counterexample: l_2, HiGHS failing, float rounding), 'rows' (a margin
        outside the ``rows`` branched on fails at the root) or 'nan' (a NaN bound: never proven).
      left: undecided subdomains when it stopped.
      peak: the most undecided subdomains held at once (the frontier's high-water mark).
      x_adv: with reason 'falsified', the counterexample (``(*net.input_shape)`` float64, inside the domain
        and the ball up to the float32 rounding of ``x +- eps``): a subdomain's primal point, or an exact
        leaf's LP point, on which the model's margin is not positive (re-checked by ``check`` where one was
        given); else None.
    """

    verified: bool
    lower: float
    bounded: int
    at_root: bool
    reason: str
    left: int
    peak: int
    x_adv: "np.ndarray | None" = None


def _now() -> float:
    """The clock of :func:`bab_search` (seconds)."""
    return time.perf_counter()


#: :func:`bab_search` bounds a batch whose subdomains have at most this many split first-layer units with a
#: program that corrects only that many (``BaBConfig.first_splits``; the same bounds up to float rounding, as
#: none is left out), the other batches with ``first_splits``. Side by side on ``benchmarks/verify_speed.py``'s 784-256-256-10 MLP
#: (per-margin search, alone on 2 cores): the 11,582-subdomain proof at eps 0.05 took 5.5 s against 7.5 s
#: with 64 (the same subdomains), and an open box at eps 0.02 bounded 77,503 subdomains in 30 s against
#: 62,655 (lower bound -0.44 against -0.46).
FEW_FIRST_SPLITS = 16


def _unstable_rows(prep: Prepared, root: Root):
    """Per hidden layer, None (the first layer, or no dense matrix: nothing recomputed) or the int32 flat
    indices of the units unstable at the root (``l < 0 < u``), padded with the first of them to a power of
    two (at most the layer's size), so that few shapes compile."""
    out = []
    for j, (l, u) in enumerate(root.bounds):
        if j == 0 or prep.jacs[j] is None:
            out.append(None)
            continue
        l, u = np.asarray(l).reshape(-1), np.asarray(u).reshape(-1)
        idx = np.flatnonzero((l < 0) & (u > 0)).astype(np.int32)
        size = min(l.size, 1 << max(0, int(idx.size - 1).bit_length()))
        fill = idx[0] if idx.size else 0
        out.append(jnp.asarray(np.concatenate([idx, np.full(size - idx.size, fill, np.int32)])))
    return tuple(out)


#: Subdomains a search bounds without ``bab_lp._second_tightened``'s LP bounds before it starts again from the root
#: with them (``BaBConfig.second_cuts``): the proofs that branch on ``benchmarks/verify_speed.py``'s
#: 784-256-256-10 MLP took 3-32 subdomains (0.4-1.2 s) and one 478 without them, and paying the LPs first
#: made them 2.3-17 s. (Counted, not timed: a first compilation would end a timed phase.)
SECOND_AFTER = 512


class _Ball(NamedTuple):
    """What every step of one ball's search shares (:func:`_prepare`)."""

    x: jax.Array
    y: jax.Array
    eps: jax.Array
    prep: Prepared
    root: Root
    p0: tuple             # the root subdomain's starting parameters
    rows: tuple           # the units recomputed per subdomain (``_unstable_rows``), or None: all
    leaf_blocks: list     # the hidden blocks' float64 maps (cuts, exact leaves, second-layer LPs), once built
    pcfg: BaBConfig       # the batch program's settings (``bab_step._program_cfg``)
    few: BaBConfig        # the same with ``FEW_FIRST_SPLITS`` corrected units
    smaller: bool         # whether batches with few split first-layer units run ``few``
    total: int            # hidden units (the length of a subdomain's signs)
    h1: int               # first-layer units
    treedef: object       # the structure of a subdomain's parameters


def _prepare(net, x, y, eps, cfg: BaBConfig, t_end: float) -> _Ball:
    """The ball's shared arrays (``bab_step._search_root``), with the first layer's cuts where ``cfg.cuts``
    asks for them (their LP within the time left before ``t_end``)."""
    pcfg = _program_cfg(cfg)
    x = jnp.asarray(x, jnp.float32)
    y, eps = jnp.int32(y), jnp.float32(eps)
    prep, root, p0 = _search_root(net, x, y, eps, cfg=pcfg)
    leaf_blocks = []
    if (cfg.cuts > 0 or cfg.second_cuts > 0) and _is_mlp(net) and cfg.bound.norm == "linf":
        leaf_blocks.extend(_leaf_blocks(prep))
        cuts = _root_cuts(leaf_blocks, root, x, eps, cfg, t_end - _now()) if cfg.cuts > 0 else None
        if cuts is not None:
            root = root._replace(cuts=cuts)
            p0 = _start_params(root, pcfg)
    rows = _unstable_rows(prep, root) if cfg.recompute == "unstable" else None
    h1 = math.prod(root.bounds[0][0].shape)
    # (only where the second layer is bounded by split corrections and the smaller program differs)
    smaller = (0 < FEW_FIRST_SPLITS < min(cfg.first_splits, h1) and len(root.bounds) >= 2
               and prep.jacs[1] is not None)
    return _Ball(x, y, eps, prep, root, p0, rows, leaf_blocks, pcfg,
                 dataclasses.replace(pcfg, first_splits=FEW_FIRST_SPLITS), smaller,
                 int(sum(math.prod(l.shape) for l, _ in root.bounds)), h1, jax.tree_util.tree_structure(p0))


def _program(ball: _Ball, n1: int) -> BaBConfig:
    """The batch program for parents with at most ``n1`` split first-layer units (their new splits counted)."""
    return ball.few if ball.smaller and n1 <= FEW_FIRST_SPLITS else ball.pcfg


def _root_args(ball: _Ball, b: int, p):
    """``b`` copies of the root subdomain, not split (unit -1), with parameters ``p``: ``(sgn, units, leaves)``."""
    return (jnp.zeros((b, ball.total), jnp.int8), jnp.full((b,), -1, jnp.int32),
            [jnp.repeat(jnp.asarray(a)[None], b, axis=0) for a in jax.tree_util.tree_leaves(p)])


def _lowering(ball: _Ball, cfg: "BaBConfig | None" = None):
    """``b -> `` the batch program of the root's step (``bab_step._search_split`` under ``cfg``, default the
    root's: :func:`_program` of 0 split units) lowered for ``b`` parents on this ball's arrays: the program a
    search with batch ``b`` compiles first."""
    use = _program(ball, 0) if cfg is None else cfg

    def lower(b: int):
        sgn, units, leaves = _root_args(ball, b, ball.p0)
        return bab_step._search_split.lower(ball.prep, ball.root, ball.x, ball.y, ball.eps, sgn, units,
                                            jax.tree_util.tree_unflatten(ball.treedef, leaves), ball.rows,
                                            cfg=use, fresh=True)

    return lower


def _auto_batch(ball: _Ball, cfg: BaBConfig) -> int:
    """``batch="auto"`` on this ball: ``bab_batch.choose`` on the root step's program, a power of two at most
    ``budget // 2`` (the cap it compiles at, so no program is compiled for a batch the budget rules out)."""
    key = ("host", _program(ball, 0), bab_batch.shapes_key(ball.prep, ball.root, ball.p0, ball.rows))
    cap = min(bab_batch.device_cap(), bab_batch.floor_pow2(cfg.budget // 2))
    return bab_batch.choose(_lowering(ball), key, cap=cap).batch


@exact_precision
def step_lowering(net, x, y, eps, cfg: BaBConfig, *, few: "bool | None" = None):
    """``b -> `` the bound step :func:`bab_search` runs on this ball lowered for ``b`` parents (compile it and
    read ``memory_analysis()``: what ``batch="auto"`` reads); ``few``: the program for batches with at most
    :data:`FEW_FIRST_SPLITS` split first-layer units (True), the full one (False), or the root's (None). Bounds
    the ball's root (and solves the cuts' LP) once."""
    ball = _prepare(net, x, y, eps, cfg, math.inf)
    return _lowering(ball, None if few is None else ball.few if few and ball.smaller else ball.pcfg)


@exact_precision
def bab_search(net, x, y, eps, cfg: BaBConfig, *, time_limit: float = math.inf, check=None) -> SearchResult:
    """Branch and bound of one ball, driven from the host, for as long as ``time_limit`` and ``cfg.budget``
    allow.

    The same search as ``bab_device.bab_certify_point`` (alpha-beta-CROWN per subdomain, children warm-started
    from their parent, the ``cfg.batch`` lowest subdomains split per iteration), but each iteration is one
    call of a jitted program of fixed shapes (``B`` parents in, ``2 B`` children out) and the frontier grows as
    needed (on the device, ``bab_pool``: the time per iteration does not depend on the budget), and the clock
    is read between iterations. One program bounds subdomains (the root too: ``B`` copies of it, unsplit), a
    small one prepares the ball: compiled once per architecture and ``cfg`` (its budget aside).

    Per iteration the host reads a few numbers (how many children are open, NaN, candidate counterexamples
    or leaves for the exact LP, the lowest bounds: ``bab_pool._tail``); the children's points and subdomains
    come to the host only when a step has candidate counterexamples or leaves.

    Args:
      net: a :class:`~rcurves.certify.Network`.
      x: the centre ``(*net.input_shape)``; y: its class; eps: the radius in ``cfg.bound.norm`` (inside
        ``cfg.bound.domain``).
      cfg: see :class:`BaBConfig` (``budget``: most subdomains bounded, at most ``budget + 2 batch - 1``;
        ``batch``: a number, or ``"auto"``: ``bab_batch.choose`` on this ball's bound step, a power of two at
        most ``budget // 2``; ``capacity`` unused: the frontier grows).
      time_limit: seconds; no iteration starts after it (one iteration, and the compilation of a program on
        its first call, may run past it: up to four variants of the batch program, with ``refresh`` and
        :data:`FEW_FIRST_SPLITS`, the later ones compiled when a search first needs them).
      check: None, or a host function ``points (k, *net.input_shape) float64 -> index or None`` that
        re-checks candidate counterexamples (e.g. on the original model, outside float32 rounding of the
        bound computation) and returns the index of one it confirms.

    Every bounded subdomain also proposes a counterexample: the point of the ball at which its optimised
    linear bound of the worst margin is lowest (its *primal* point, as alpha-beta-CROWN checks). The
    search stops 'falsified' at the first on which the model's float32 margin is not positive and
    ``check`` (if given) agrees: then no proof can exist.

    Returns:
      :class:`SearchResult`.

    Raises:
      ValueError: ``cfg.recompute`` or ``cfg.batch`` not one of the allowed values (before any compilation).
    """
    if cfg.recompute not in RECOMPUTE:
        raise ValueError(f"recompute: expected one of {RECOMPUTE}, got {cfg.recompute!r}")
    check_batch(cfg.batch)
    t_end = _now() + time_limit
    ball = _prepare(net, x, y, eps, cfg, t_end)
    x, y, eps, prep, p0, rows, leaf_blocks = ball.x, ball.y, ball.eps, ball.prep, ball.p0, ball.rows, ball.leaf_blocks
    root, pcfg, total, h1, treedef = ball.root, ball.pcfg, ball.total, ball.h1, ball.treedef
    second = cfg.second_cuts > 0 and len(leaf_blocks) >= 2   # the second layer's LP bounds: after SECOND_AFTER
    n_opt = _n_optimised(root)

    shape = tuple(net.input_shape)
    found = [None]

    def refuted(pts, margins, valid):
        """Record the first confirmed counterexample among the points with a margin <= 0 (``pts``: the primal
        points, on the device, of which only the candidates come to the host; or an exact leaf's float64 point)."""
        cand = np.flatnonzero(valid & (margins <= 0))
        if cand.size == 0:
            return False
        cand = cand[np.argsort(margins[cand], kind="stable")]
        pts = pts[cand] if isinstance(pts, np.ndarray) else pts[jnp.asarray(cand)]
        pts = np.asarray(pts).astype(np.float64).reshape((cand.size,) + shape)
        i = 0 if check is None else check(pts)
        if i is None:
            return False
        found[0] = pts[i]
        return True

    used = [pcfg]                         # the program of the last split (an exact leaf's bounds come from it)
    program = functools.partial(_program, ball)
    B = max(1, cfg.batch) if cfg.batch != "auto" else _auto_batch(ball, cfg)

    def split(sgn, units, leaves, n1, fresh=True):
        use = program(n1)
        out = _search_split(prep, root, x, y, eps, sgn, units, jax.tree_util.tree_unflatten(treedef, list(leaves)),
                            rows, cfg=use, fresh=fresh)
        kids, lb, nxt, params, pts, marg = out
        used[0] = use
        return kids, lb, nxt, jax.tree_util.tree_leaves(params), pts, marg

    def exact(sgn, leaves):
        """A subdomain with no unstable unit left (the network is affine on it): its exact minimum by an LP
        (``bab_lp._exact_leaf``, within the time left). The bound (> ``LEAF_TOL``) where it proves it, 'falsified'
        where the LP's point is a confirmed counterexample, 'time' when no time is left, else None (stuck)."""
        if _now() >= t_end:
            return "time"
        if not leaf_blocks:
            leaf_blocks.extend(_leaf_blocks(prep))
        sgn = np.asarray(sgn)
        inherited = None
        if cfg.refresh > 0:
            inherited = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(a) for a in leaves])[n_opt]
        leaf = _exact_leaf(leaf_blocks, root, _leaf_bounds(prep, root, x, eps, jnp.asarray(sgn), rows, inherited,
                                                           cfg=used[0]), x, eps, cfg, sgn, t_end - _now())
        if leaf is None:
            return None
        value, point = leaf
        if value > LEAF_TOL:
            return value
        if point is not None:
            z = net.logits(jnp.asarray(point, jnp.float32).reshape((1,) + shape))
            m_pt = -np.asarray(jax.vmap(margin, in_axes=(0, None))(z, y))
            if refuted(np.asarray(point)[None], m_pt, np.ones(1, bool)):
                return "falsified"
        return None

    def run(p0, start, may_restart):
        """Bound the root (from ``p0``) and search; ``(result, bounded)``, or ``(None, bounded)`` when
        ``may_restart`` and the search is still open after :data:`SECOND_AFTER` subdomains."""
        # the root: B copies, not split (unit -1), of which the first is kept
        _, lb_r, nxt_r, p_r, pts_r, m_r = split(*_root_args(ball, B, p0), 0)
        lb_r, nxt_r, m_r = (np.asarray(a) for a in jax.device_get((lb_r[:1], nxt_r[:1], m_r[:1])))
        rest_min = float(root.rest_min)
        lb_r, nxt_r, p_r = float(lb_r[0]), int(nxt_r[0]), [a[:1] for a in p_r]

        def done(verified, reason, part=-math.inf, bounded=start, left=0, peak=1):
            # part: the lowest bound over a partition of the ball (inf only if every piece was empty: ignored);
            # bounded counts an earlier run's subdomains too, at_root is this run's root
            part = part if part < math.inf else -math.inf
            lower = -math.inf if reason == "nan" or math.isnan(lb_r) else min(max(lb_r, part), rest_min)
            return SearchResult(verified, lower, bounded, bounded == start and verified, reason, left, peak,
                                found[0] if reason == "falsified" else None)

        if math.isnan(lb_r) or math.isnan(rest_min):
            return done(False, "nan"), start
        if not rest_min > 0:
            return done(False, "rows"), start
        if lb_r > 0:
            return done(True, "verified"), start
        if refuted(pts_r[:1], m_r, np.ones(1, bool)):
            return done(False, "falsified", lb_r), start
        if nxt_r < 0:
            leaf = exact(np.zeros(total, np.int8), [a[0] for a in p_r])
            if leaf == "falsified":
                return done(False, "falsified", lb_r), start
            if isinstance(leaf, float) and leaf < math.inf:    # (the ball holds x: an empty root is rounding)
                return done(True, "verified", leaf), start
            return done(False, "time" if leaf == "time" else "stuck", lb_r), start
        # the frontier, on the device (bab_pool); each subdomain's age: splits since its later layers' bounds
        # were recomputed (``cfg.refresh``)
        staged = cfg.refresh > 1 and len(root.bounds) > 2
        capacity = capacity_for(1, B)
        pool = _new_pool(jnp.zeros((1, total), jnp.int8), jnp.full((1,), lb_r, jnp.float32),
                         jnp.full((1,), nxt_r, jnp.int32), tuple(p_r), capacity=capacity)
        n, lowest = 1, lb_r               # subdomains held, their lowest bound
        n1, oldest = int(0 <= nxt_r < h1), 0     # of the next parents: split first-layer units, age
        proven, bounded, peak, reason = math.inf, start, 1, "verified"
        while n:
            if _now() >= t_end:
                reason = "time"
                break
            if may_restart and bounded >= SECOND_AFTER:
                return None, bounded                   # not done within SECOND_AFTER: restart with the LP bounds
            if bounded >= cfg.budget:
                reason = "budget"
                break
            m = min(B, n)
            if n + m > capacity:                       # room for every child of this step
                while n + m > capacity:
                    capacity *= 2
                pool = _grow(pool, capacity=capacity)
            pool, sgn, nxt, leaves, age = _take(pool, batch=B)
            fresh = not staged or oldest + 1 >= cfg.refresh
            kids, klb, knxt, kleaves, kpts, kmarg = split(sgn, nxt, leaves, n1, fresh)
            pool, counts, values, dest = _tail(pool, kids, klb, knxt, tuple(kleaves), kmarg, age, jnp.int32(m),
                                               batch=B, h1=h1, fresh=fresh)
            counts, values = jax.device_get((counts, values))          # the step's only copy to the host
            n_nan, n_cand, n_leaf, n_open, n1, oldest = (int(v) for v in counts)
            shut_min, lowest_before, lowest = (float(v) for v in values)
            bounded += 2 * m
            held = n - m                               # before this step's children
            valid = np.concatenate([np.arange(B) < m, np.arange(B) < m])
            if n_nan:
                reason = "nan"
                n, lowest = held, lowest_before
                break
            if n_cand and refuted(kpts, np.asarray(kmarg), valid):
                reason = "falsified"
                n, lowest = held, lowest_before
                break
            closed, late, stuck = [], False, False
            if n_leaf:                                 # leaves: their exact LPs, in order
                klb_h, knxt_h, dest_h = (np.asarray(a) for a in jax.device_get((klb, knxt, dest)))
                for i in np.flatnonzero(valid & ~(klb_h > 0) & (knxt_h < 0)):
                    leaf = exact(kids[i], [a[i] for a in kleaves])
                    if leaf == "falsified":
                        reason = "falsified"
                        break
                    if leaf == "time":                 # the open children stay in the frontier (their bound)
                        late = True
                        break
                    if leaf is None:
                        stuck = True
                    else:
                        closed.append(i)
                        shut_min = min(shut_min, leaf)
                if reason == "falsified":
                    n, lowest = held, lowest_before
                    break
                if closed:                             # proven by their LPs: out of the frontier
                    slots = np.full(2 * B, capacity, np.int32)              # (one shape: one program)
                    slots[:len(closed)] = dest_h[closed]
                    pool = _drop(pool, jnp.asarray(slots))
                    info, low = jax.device_get(_peek(pool, batch=B, h1=h1))
                    n1, oldest, lowest = int(info[0]), int(info[1]), float(low)
            proven = min(proven, shut_min)
            n = held + n_open - len(closed)
            peak = max(peak, n)
            if late:
                reason = "time"
                break
            if stuck:
                reason = "stuck"
                break
        verified = reason == "verified"
        return done(verified, reason, min(proven, lowest if n else math.inf), bounded, n, peak), bounded

    res, bounded = run(p0, 1, second)
    if res is None:
        # still open: tighten the second layer's bounds by the LP with cuts, then search again from the root
        # (the rows recomputed per subdomain stay those unstable before: the same programs; a search done
        # within SECOND_AFTER never pays for the LPs)
        root = root._replace(bounds=_second_tightened(leaf_blocks, root, x, eps, cfg, t_end - _now()))
        res, _ = run(_start_params(root, pcfg), bounded + 1, False)
    return res


__all__ = ["FEW_FIRST_SPLITS", "SECOND_AFTER", "SearchResult", "bab_search", "step_lowering"]
