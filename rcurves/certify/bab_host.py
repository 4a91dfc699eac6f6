""":func:`bab_search`: branch and bound of one ball, driven from the host (``certify.verify``'s last stage).

The same search as ``bab_device.bab_certify_point``, driven from the host. Each iteration is one call of a
jitted program of fixed shapes (``batch`` parents in, their ``2 batch`` children bounded: :func:`_search_split`),
the frontier is kept in NumPy arrays that double when full (:class:`_Pool`), and the clock is read between
iterations: the time per subdomain does not grow with the budget, and a time limit stops the search within one
iteration. Every child's primal point is a candidate counterexample; a subdomain with no unstable unit left
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
from rcurves.certify.bab_bounds import _bounder, _n_optimised, _start_params
from rcurves.certify.bab_cuts import _is_mlp, _root_cuts
from rcurves.certify.bab_lp import LEAF_TOL, _exact_leaf, _leaf_blocks, _second_tightened
from rcurves.certify.bab_root import Root, _root
from rcurves.certify.bab_settings import RECOMPUTE, BaBConfig
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


def _program_cfg(cfg: BaBConfig) -> BaBConfig:
    """``cfg`` without the settings the host applies (budget, capacity, second_cuts): one program for any
    budget."""
    return dataclasses.replace(cfg, budget=0, capacity=0, second_cuts=0)


@functools.partial(jax.jit, static_argnames=("cfg",))
@exact_precision
def _search_root(net, x, y, eps, *, cfg: BaBConfig):
    """``(prep, root, params)``: the shared arrays of the ball and the root subdomain's starting
    ``(alpha, beta)`` (with ``cfg.refresh`` also the root's hidden bounds; the root has no cuts here:
    :func:`bab_search` adds them and their logits) (its bound comes from :func:`_search_split`: one program to
    compile, not two)."""
    from rcurves.nets.bounds import prepare

    prep = prepare(net, dataclasses.replace(cfg.bound, method="crown"))
    root = _root(prep, x, y, eps, cfg)
    return prep, root, _bounder(prep, root, x, eps, cfg)[1]()


@functools.partial(jax.jit, static_argnames=("cfg", "fresh"))
@exact_precision
def _search_split(prep, root, x, y, eps, parents, units, params, rows=None, *, cfg: BaBConfig, fresh=True):
    """The ``2 B`` children of ``parents (B, H)`` split on ``units (B,)`` (active ones first; a unit ``-1``
    leaves its parent as it is), each bounded from its parent's ``params``: ``(sgn (2B, H), lb (2B,),
    nxt (2B,), params, primal (2B, D), margin (2B,))``: each child's primal point (the point of the ball
    its bound's worst row is lowest at) and the model's smallest margin ``z_y - max_{j != y} z_j`` there,
    in float32 (negative: a candidate counterexample). ``rows``: see ``bab_bounds._bounder``."""
    bound_one, _, total, _ = _bounder(prep, root, x, eps, cfg, rows)
    cols = jnp.arange(total)[None, :] == units[:, None]
    kids = jnp.concatenate([jnp.where(cols, jnp.int8(-1), parents), jnp.where(cols, jnp.int8(1), parents)])
    warm = jax.tree_util.tree_map(lambda a: jnp.concatenate([a, a]), params)
    lb, nxt, kp, pts = jax.vmap(functools.partial(bound_one, primal=True, fresh=fresh))(kids, warm)
    z = prep.net.logits(pts.reshape((pts.shape[0],) + tuple(prep.net.input_shape)))
    return kids, lb, nxt, kp, pts, -jax.vmap(margin, in_axes=(0, None))(z, y)


@functools.partial(jax.jit, static_argnames=("cfg",))
@exact_precision
def _leaf_bounds(prep, root, x, eps, sgn, rows=None, inherited=None, *, cfg: BaBConfig):
    """The hidden pre-activation bounds ``[(l, u), ...]`` of the subdomain ``sgn (H,)`` (as :func:`_search_split`
    bounds it: the same recomputed rows; ``inherited``: with ``cfg.refresh``, the subdomain's own hidden bounds of
    the layers after the first: the second layer's recomputed and intersected with them, the later ones as they
    are, split units clipped)."""
    return _bounder(prep, root, x, eps, cfg, rows)[3](sgn, inherited, inherited is None)[0]


#: :func:`bab_search` bounds a batch whose subdomains have at most this many split first-layer units with a
#: program that corrects only that many (``BaBConfig.first_splits``; the same bounds up to float rounding, as
#: none is left out), the other batches with ``first_splits``. Side by side on ``benchmarks/verify_speed.py``'s 784-256-256-10 MLP
#: (per-margin search, alone on 2 cores): the 11,582-subdomain proof at eps 0.05 took 5.5 s against 7.5 s
#: with 64 (the same subdomains), and an open box at eps 0.02 bounded 77,503 subdomains in 30 s against
#: 62,655 (lower bound -0.44 against -0.46).
FEW_FIRST_SPLITS = 16


class _Pool:
    """The undecided subdomains, on the host: rows ``[0, n)`` of arrays that double in length when full
    (a frontier as large as the search needs, not as its budget allows)."""

    def __init__(self, sgn, lb, nxt, leaves):
        self.n = 0
        self.sgn = np.zeros((1,) + sgn.shape[1:], np.int8)
        self.lb = np.zeros(1, np.float32)
        self.nxt = np.zeros(1, np.int32)
        self.leaves = [np.zeros((1,) + a.shape[1:], a.dtype) for a in leaves]
        self.add(sgn, lb, nxt, leaves)

    def _arrays(self):
        return [self.sgn, self.lb, self.nxt] + self.leaves

    def add(self, sgn, lb, nxt, leaves):
        m = lb.shape[0]
        if self.n + m > self.lb.shape[0]:
            size = max(2 * self.lb.shape[0], self.n + m)
            grown = []
            for a in self._arrays():
                b = np.zeros((size,) + a.shape[1:], a.dtype)
                b[:self.n] = a[:self.n]
                grown.append(b)
            self.sgn, self.lb, self.nxt, *self.leaves = grown
        for a, v in zip(self._arrays(), [sgn, lb, nxt] + list(leaves)):
            a[self.n:self.n + m] = v
        self.n += m

    def take(self, k):
        """Remove the ``k`` subdomains with the lowest bounds (all if fewer): ``(sgn, nxt, leaves)``."""
        n = self.n
        idx = np.arange(n) if k >= n else np.argpartition(self.lb[:n], k - 1)[:k]
        out = (self.sgn[idx], self.nxt[idx], [a[idx] for a in self.leaves])
        m = idx.size
        gone = np.zeros(n, bool)
        gone[idx] = True
        holes = np.flatnonzero(gone[:n - m])
        movers = n - m + np.flatnonzero(~gone[n - m:])
        for a in self._arrays():
            a[holes] = a[movers]
        self.n = n - m
        return out

    def lowest(self) -> float:
        return float(np.min(self.lb[:self.n])) if self.n else math.inf


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


@exact_precision
def bab_search(net, x, y, eps, cfg: BaBConfig, *, time_limit: float = math.inf, check=None) -> SearchResult:
    """Branch and bound of one ball, driven from the host, for as long as ``time_limit`` and ``cfg.budget``
    allow.

    The same search as ``bab_device.bab_certify_point`` (alpha-beta-CROWN per subdomain, children warm-started
    from their parent, the ``cfg.batch`` lowest subdomains split per iteration), but each iteration is one
    call of a jitted program of fixed shapes (``B`` parents in, ``2 B`` children out) and the frontier lives
    on the host: it grows as needed, so the time per iteration does not depend on the budget, and the clock
    is read between iterations. One program bounds subdomains (the root too: ``B`` copies of it, unsplit),
    a small one prepares the ball: compiled once per architecture and ``cfg`` (its budget aside).

    Args:
      net: a :class:`~rcurves.certify.Network`.
      x: the centre ``(*net.input_shape)``; y: its class; eps: the radius in ``cfg.bound.norm`` (inside
        ``cfg.bound.domain``).
      cfg: see :class:`BaBConfig` (``budget``: most subdomains bounded, at most ``budget + 2 batch - 1``;
        ``capacity`` unused: the frontier grows).
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
    """
    if cfg.recompute not in RECOMPUTE:
        raise ValueError(f"recompute: expected one of {RECOMPUTE}, got {cfg.recompute!r}")
    t_end = _now() + time_limit
    pcfg = _program_cfg(cfg)
    x = jnp.asarray(x, jnp.float32)
    y, eps = jnp.int32(y), jnp.float32(eps)
    B = max(1, cfg.batch)
    prep, root, p0 = _search_root(net, x, y, eps, cfg=pcfg)
    leaf_blocks = []                      # the hidden blocks' float64 maps (cuts, exact leaves), built once
    second = False                        # the second layer's LP bounds: after SECOND_AFTER subdomains
    if (cfg.cuts > 0 or cfg.second_cuts > 0) and _is_mlp(net) and cfg.bound.norm == "linf":
        leaf_blocks.extend(_leaf_blocks(prep))
        second = cfg.second_cuts > 0 and len(leaf_blocks) >= 2
        cuts = _root_cuts(leaf_blocks, root, x, eps, cfg, t_end - _now()) if cfg.cuts > 0 else None
        if cuts is not None:
            root = root._replace(cuts=cuts)
            p0 = _start_params(root, pcfg)
    n_opt = _n_optimised(root)
    total = int(sum(math.prod(l.shape) for l, _ in root.bounds))
    treedef = jax.tree_util.tree_structure(p0)
    rows = _unstable_rows(prep, root) if cfg.recompute == "unstable" else None

    shape = tuple(net.input_shape)
    found = [None]

    def refuted(pts, margins, valid):
        """Record the first confirmed counterexample among the primal points with a margin <= 0 (``pts``
        stays on the device unless there is a candidate)."""
        cand = np.flatnonzero(valid & (margins <= 0))
        if cand.size == 0:
            return False
        cand = cand[np.argsort(margins[cand], kind="stable")]
        pts = np.asarray(pts)[cand].astype(np.float64).reshape((cand.size,) + shape)
        i = 0 if check is None else check(pts)
        if i is None:
            return False
        found[0] = pts[i]
        return True

    h1 = math.prod(root.bounds[0][0].shape)
    few = dataclasses.replace(pcfg, first_splits=FEW_FIRST_SPLITS)
    # (only where the second layer is bounded by split corrections and the smaller program differs)
    smaller = (0 < FEW_FIRST_SPLITS < min(cfg.first_splits, h1) and len(root.bounds) >= 2
               and prep.jacs[1] is not None)
    used = [pcfg]                         # the program of the last split (an exact leaf's bounds come from it)

    def split(sgn, units, leaves, fresh=True):
        # the children's split first-layer units, at most: within FEW_FIRST_SPLITS, the smaller program
        n1 = int(np.max(np.count_nonzero(sgn[:, :h1], axis=1) + ((units >= 0) & (units < h1)))) if smaller else 0
        use = few if smaller and n1 <= FEW_FIRST_SPLITS else pcfg
        out = _search_split(prep, root, x, y, eps, jnp.asarray(sgn), jnp.asarray(units),
                            jax.tree_util.tree_unflatten(treedef, [jnp.asarray(a) for a in leaves]), rows,
                            cfg=use, fresh=fresh)
        kids, lb, nxt, params, pts, marg = out
        leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(params)]
        used[0] = use
        return np.asarray(kids), np.asarray(lb), np.asarray(nxt), leaves, pts, np.asarray(marg)

    def exact(sgn, leaves):
        """A subdomain with no unstable unit left (the network is affine on it): its exact minimum by an LP
        (``bab_lp._exact_leaf``, within the time left). The bound (> ``LEAF_TOL``) where it proves it, 'falsified'
        where the LP's point is a confirmed counterexample, 'time' when no time is left, else None (stuck)."""
        if _now() >= t_end:
            return "time"
        if not leaf_blocks:
            leaf_blocks.extend(_leaf_blocks(prep))
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
            if refuted(point[None], m_pt, np.ones(1, bool)):
                return "falsified"
        return None

    def run(p0, start, may_restart):
        """Bound the root (from ``p0``) and search; ``(result, bounded)``, or ``(None, bounded)`` when
        ``may_restart`` and the search is still open after :data:`SECOND_AFTER` subdomains."""
        # the root: B copies, not split (unit -1), of which the first is kept
        _, lb_r, nxt_r, p_r, pts_r, m_r = split(
            np.zeros((B, total), np.int8), np.full(B, -1, np.int32),
            [np.repeat(np.asarray(a)[None], B, axis=0) for a in jax.tree_util.tree_leaves(p0)])
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
        if refuted(pts_r[:1], m_r[:1], np.ones(1, bool)):
            return done(False, "falsified", lb_r), start
        if nxt_r < 0:
            leaf = exact(np.zeros(total, np.int8), [a[0] for a in p_r])
            if leaf == "falsified":
                return done(False, "falsified", lb_r), start
            if isinstance(leaf, float) and leaf < math.inf:    # (the ball holds x: an empty root is rounding)
                return done(True, "verified", leaf), start
            return done(False, "time" if leaf == "time" else "stuck", lb_r), start
        # each subdomain's age (host only, the last of its leaves): splits since its later layers' bounds were
        # recomputed (``cfg.refresh``)
        staged = cfg.refresh > 1 and len(root.bounds) > 2
        pool = _Pool(np.zeros((1, total), np.int8), np.array([lb_r], np.float32), np.array([nxt_r], np.int32),
                     p_r + [np.zeros(1, np.int32)])
        proven, bounded, peak, reason = math.inf, start, 1, "verified"
        while pool.n:
            if _now() >= t_end:
                reason = "time"
                break
            if may_restart and bounded >= SECOND_AFTER:
                return None, bounded                   # not done within SECOND_AFTER: restart with the LP bounds
            if bounded >= cfg.budget:
                reason = "budget"
                break
            sgn, nxt, leaves = pool.take(B)
            *leaves, age = leaves
            m = nxt.shape[0]
            if m < B:                                 # pad with copies of the first parent (results unused)
                pad = lambda a: np.concatenate([a, np.repeat(a[:1], B - m, axis=0)])   # noqa: E731
                sgn, nxt, leaves, age = pad(sgn), pad(nxt), [pad(a) for a in leaves], pad(age)
            fresh = not staged or int(np.max(age[:m])) + 1 >= cfg.refresh
            kids, klb, knxt, kleaves, kpts, kmarg = split(sgn, nxt, leaves, fresh)
            kage = np.zeros(2 * B, np.int32) if fresh else np.concatenate([age, age]) + 1
            valid = np.concatenate([np.arange(B) < m, np.arange(B) < m])
            kids, klb, knxt = kids[valid], klb[valid], knxt[valid]
            kleaves = [a[valid] for a in kleaves] + [kage[valid]]
            bounded += 2 * m
            if np.isnan(klb).any():
                reason = "nan"
                break
            if refuted(kpts, kmarg, valid):
                reason = "falsified"
                break
            shut = klb > 0                            # proven (inf: empty, no point of the ball)
            late = False
            for i in np.flatnonzero(~shut & (knxt < 0)):
                leaf = exact(kids[i], [a[i] for a in kleaves[:-1]])
                if leaf == "falsified":
                    reason = "falsified"
                    break
                if leaf == "time":                    # the open children still go to the frontier (its bound)
                    late = True
                    break
                if leaf is not None:
                    shut[i], klb[i] = True, leaf
            if reason == "falsified":
                break
            if shut.any():
                proven = min(proven, float(np.min(klb[shut])))
            open_ = ~shut
            pool.add(kids[open_], klb[open_], knxt[open_], [a[open_] for a in kleaves])
            peak = max(peak, pool.n)
            if late:
                reason = "time"
                break
            if np.any(knxt[open_] < 0):
                reason = "stuck"
                break
        verified = reason == "verified"
        return done(verified, reason, min(proven, pool.lowest()), bounded, pool.n, peak), bounded

    res, bounded = run(p0, 1, second)
    if res is None:
        # still open: tighten the second layer's bounds by the LP with cuts, then search again from the root
        # (the rows recomputed per subdomain stay those unstable before: the same programs; a search done
        # within SECOND_AFTER never pays for the LPs)
        root = root._replace(bounds=_second_tightened(leaf_blocks, root, x, eps, cfg, t_end - _now()))
        res, _ = run(_start_params(root, pcfg), bounded + 1, False)
    return res


__all__ = ["FEW_FIRST_SPLITS", "SECOND_AFTER", "SearchResult", "bab_search"]
