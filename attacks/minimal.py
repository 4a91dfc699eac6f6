"""Per-point minimal adversarial distance: a radius search with PGD as the oracle.

For each point, rounds of PGD at candidate radii narrow a bracket
``[lo, hi]`` around the smallest radius at which an adversarial is found:

* round 0 runs at ``eps_max`` (or ``candidates`` radii spread up to it); a
  point not broken there keeps being attacked at ``eps_max`` with fresh random
  restarts in later rounds, and stays ``inf`` if nothing ever breaks it;
* ``hi`` is always the *norm of the best adversarial actually found*, not the
  radius that was tried; ``lo`` the largest radius at which every lane failed;
* every round warm-starts its first lane from the best adversarial
  projected onto the smaller ball, the other lanes from uniform random
  points of the ball (Croce & Hein 2020's restarts), with APGD step sizes;
* with a targeted loss (the default for l_inf and l_2 on models of at least
  four classes, ``TARGETED_SCHEDULE``) lane ``r`` maximises the targeted DLR
  loss toward its own class (APGD-T, Croce & Hein 2020), each lane starting
  every round from its own last point (``warm='own'``); the classes are ranked (``target_rank``) by logit at ``x``
  or by the distance to their boundary of the model linearised at ``x``
  inside the box (``attacks.ranking``), by default alternately. A single untargeted lane
  follows the one class whose boundary it met first; on trained networks
  that is the wrong class for about one point in ten, which then ends 10-40%
  above its distance (``benchmarks/attack_quality.py``);
* with ``brackets='lane'`` (the l_2 default with targeted lanes) every lane
  runs the whole search below on its own, with its own radius and bracket,
  toward its own class, and the smallest adversarial of the lanes is kept: a
  lane whose class is reached late (masked gradients) descends at its own
  pace instead of being asked for the radius another class reached;
* while a point (or, with ``brackets='lane'``, a lane) is unbroken, its
  lanes start every round from their own last point at ``eps_max`` with the
  step APGD had halved them to (``warm='own'``): the rounds add up to one
  long APGD run instead of restarting at a step of ``2 eps_max`` that short
  lanes never shrink enough (l_2 on l_inf-AT CNNs stayed ``inf`` on points
  an l_inf attack broke);
* the round's adversarial is the smallest-norm one over the lanes; lanes
  within ``NORM_TIE_RTOL`` of it (for l_inf every lane's point lies on the
  ball's surface) count as tied and the largest margin wins, so that a lane
  that crossed into a nearer class's region takes over the search.

How the next radius is chosen (``radius=``):

* ``'falsi'`` (default for l_inf and l_2): regula falsi, Illinois variant, on
  ``M(eps)``, the largest logit margin within radius ``eps``. Every lane
  already knows its highest margin (APGD tracks the highest-loss iterate), so
  each round gives ``M(hi) > 0`` or ``M(lo) < 0`` for free and the secant
  through them picks the next radius. For a linear model ``M`` is affine
  (000 Lemma 1) and the secant lands on the minimal distance in one round; on
  curved models it converges faster than halving. One ray search
  (``attacks.refine.ray_search``, ``refine_steps`` forward passes) polishes
  the final adversarial. With ``candidates > 1`` the radii are spread evenly
  in the bracket as for ``'bisect'``.
* ``'bisect'`` (default for l_1): bisection (``candidates`` radii spread
  evenly in ``(lo, hi)`` per round), and after every round the round's best
  adversarial is pulled toward the clean point along its ray
  (``refine_steps`` forward passes per round). l_1's sparse steps estimate
  ``M`` too poorly for the secant (``benchmarks/attack_strength.py``).

Cost per point: ``(1 + search_steps) * candidates * restarts * steps``
gradient evaluations, plus ``refine_steps + 4`` forward passes (``'falsi'``)
or ``(1 + search_steps) * refine_steps + 3`` (``'bisect'``), all in one
jitted program (points ``vmap``ped; lanes ``vmap``ped with them, or in a
``lax.map`` when their batch outgrows the caches, ``attacks.xla.lanes_in_loop``;
rounds and steps ``lax.scan``ned). The returned distance is re-checked on the returned example
(``attacks.result.finalize``).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from attacks import checks
from attacks.engine import EngineConfig, flat, run_lane, single
from attacks.fmn import FMNConfig, _fmn_point
from attacks.norms import geometry, like
from attacks.losses import CONFIDENCE_RTOL, MIN_CLASSES, TARGETED_LOSSES, margin
from attacks.ranking import gradients_for_ranking, linear_distances, nearest_targets
from attacks.refine import ray_search
from attacks.result import MinimalResult, finalize, raise_nonfinite
from attacks.surrogate import check_temperature
from attacks.xla import lanes_in_loop, program


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Static configuration of the radius search (see ``minimal_distance``)."""

    engine: EngineConfig
    search_steps: int = 10
    restarts: int = 1
    candidates: int = 1
    refine_steps: int = 4
    rel_step: Optional[float] = None  # fixed step = rel_step * eps; None = APGD
    radius: str = "falsi"             # 'falsi' (regula falsi on the margin) or 'bisect'
    polish_steps: int = 0             # FMN steps from the best adversarial after the search
    warm_lanes: int = 1               # lanes 0 .. warm_lanes-1 start from the best point, the rest at random
    target_rank: str = "logits"       # targeted lanes aim at classes ranked by 'logits' or 'linear' distance
    own_lanes: bool = False           # warm='own': lane r starts each round from its own last point
    lane_brackets: bool = False       # every targeted lane searches its own radius (its own bracket)
    relu_temperature: float = 0.0     # > 0: gradients through smoothed ReLUs (attacks.surrogate)

    @property
    def ranked(self) -> bool:
        """Whether the lanes' targets are ranked by linearised distance
        (``attacks.ranking``: a Jacobian per point, ``search_gradients``)."""
        return self.target_rank in ("linear", "mixed") and self.engine.loss in TARGETED_LOSSES


class SearchState(NamedTuple):
    lo: jax.Array     # () largest radius at which the attack failed (below hi)
    hi: jax.Array     # () norm of the best adversarial found; inf if none
    best: jax.Array   # (*shape) the best adversarial point itself (x + delta)
    m_lo: jax.Array   # () largest logit margin the attack reached within radius lo (< 0)
    m_hi: jax.Array   # () logit margin at hi for the secant (> 0; halved by Illinois)
    side: jax.Array   # () which end moved last: +1 hi, -1 lo, 0 none yet (Illinois)
    m_best: jax.Array  # () logit margin of best itself (for the final ray search)
    lanes: Any = None  # (restarts, *shape) each lane's last highest-loss point (warm='own'), else None
    etas: Any = None   # (restarts,) each lane's last APGD step over its radius (warm='own'), else None


#: FMN's first step in the final polish, as a fraction of the distance
#: found (cosine-annealed to a hundredth of it).
POLISH_ALPHA = 0.1

#: In l_inf the polish's steps beyond :data:`POLISH_NARROW_STEPS` come first, a wide phase whose FMN steps start
#: at this fraction of the distance found (it finds better adversarials near the found one on adversarially
#: trained CNNs); the last :data:`POLISH_NARROW_STEPS` start from its best at :data:`POLISH_ALPHA`.
POLISH_WIDE_ALPHA = 1.0
POLISH_NARROW_STEPS = 54


def _wide_steps(norm: str, polish_steps: int) -> int:
    """Steps of the polish's wide phase (l_inf only): those beyond :data:`POLISH_NARROW_STEPS`."""
    return max(0, polish_steps - POLISH_NARROW_STEPS) if norm == "linf" else 0


#: Lanes whose adversarials' norms are within this relative distance of the
#: smallest count as tied; the tie goes to the largest margin.
NORM_TIE_RTOL = 1e-4


def _falsi_radius(st: SearchState, target) -> jax.Array:
    """Next radius of the regula falsi (Illinois) search for ``M(eps) = target``.

    ``M(eps)``, the largest logit margin within radius ``eps``, is increasing,
    negative below the minimal distance and positive above it; for a linear
    model it is affine (``M(eps) = m(x) + eps ||w||_*``, 000 Lemma 1), so the
    secant through ``(lo, m_lo)`` and ``(hi, m_hi)`` lands on the root in one
    round. The search aims at a small positive ``target`` margin (twice the
    tolerance of ``confidently_adversarial``) rather than at 0, so that the
    point found there counts as adversarial; the candidate stays strictly
    inside the bracket, and non-finite margins fall back to the midpoint.
    """
    width = st.hi - st.lo
    g_lo, g_hi = st.m_lo - target, st.m_hi - target
    denom = g_hi - g_lo
    ok = jnp.isfinite(denom) & (denom > 0) & (g_lo < 0)
    # Written with a division between every product and sum: XLA:CPU may fuse
    # ``a * b + c`` into an FMA in vectorised loops but not in their scalar
    # remainder, which would make the radius depend on the batch size.
    step = jnp.where(ok, (-g_lo * width) / jnp.where(ok, denom, 1.0), width / 2.0)
    return jnp.clip(st.lo + step, st.lo + width / 1e3, st.hi - width / 1e6)


def lane_targets(logits_clean, y, lanes: int) -> jax.Array:
    """``(lanes,)`` target classes: lane ``r`` aims at the ``r``-th most likely
    class other than ``y`` at the clean point (cycling when ``lanes >= K``)."""
    other = jnp.where(jnp.arange(logits_clean.shape[-1]) == y, -jnp.inf, logits_clean)
    order = jnp.argsort(-other)
    return order[jnp.arange(lanes) % (logits_clean.shape[-1] - 1)]


def _search_point(fn1, x, y, logits_clean, key, eps_max, cfg: SearchConfig, bounds, init=None, loop=False):
    """Radius search for one point; returns (best adversarial point, found).

    Started from ``init``, this is the ensemble's search below a known
    adversarial (``attacks.ensemble``). ``logits_clean``: the model's logits at ``x``, shape ``(K,)``. ``init``:
    ``(point, norm, margin)`` of an adversarial already known (norm ``inf``
    if none): the search then starts from the bracket ``[0, norm]`` with that
    point as its best, so it only looks below it.
    """
    geo = geometry(cfg.engine.norm, cfg.engine.l1_sparsity)
    R = cfg.restarts
    falsi = cfg.radius == "falsi" and cfg.candidates == 1
    m_clean = margin(logits_clean, y)
    if cfg.ranked:
        dist_lin, _ = linear_distances(fn1, x, y, geo.name, bounds)
        targets = nearest_targets(dist_lin, logits_clean, y, R, mix=cfg.target_rank == "mixed")
    else:
        targets = lane_targets(logits_clean, y, R)
    if cfg.lane_brackets:
        # One search of one lane per target class, each with its own radius
        # and bracket; the best of them is kept.
        sub = dataclasses.replace(cfg, restarts=1, lane_brackets=False)
        one = lambda t, k: _rounds(fn1, x, y, m_clean, logits_clean, t[None], k, eps_max, sub, bounds, init)  # noqa: E731
        lane_keys = jax.random.split(key, R)
        if loop:
            states = jax.lax.map(lambda tk: one(*tk), (targets, lane_keys))
        else:
            states = jax.vmap(one)(targets, lane_keys)
        st = jax.tree_util.tree_map(lambda a: a[jnp.argmin(states.hi)], states)
    else:
        st = _rounds(fn1, x, y, m_clean, logits_clean, targets, key, eps_max, cfg, bounds, init, loop)
    found = jnp.isfinite(st.hi)
    best = st.best
    if falsi and cfg.refine_steps > 0:
        # One ray search at the end, from the best adversarial of all rounds.
        delta = jnp.where(found, st.best - x, 0.0)
        refined = ray_search(fn1, x, y, delta, cfg.refine_steps, bounds, m_clean, st.m_best)
        best = jnp.where(found, refined, st.best)
    if cfg.polish_steps > 0:
        # FMN from the best adversarial, steps relative to its distance: the
        # search's lanes end near the boundary, FMN walks along it. In l_inf a
        # wide phase first (steps as large as the distance: it finds better
        # adversarials near the found one), then the usual narrow one from its best.
        def fmn(best, found, steps, alpha):
            fcfg = FMNConfig(norm=cfg.engine.norm, steps=steps, alpha_init=alpha,
                             alpha_final=alpha / 100.0, l1_sparsity=cfg.engine.l1_sparsity)
            nrm = jnp.where(found, geo.norm(best - x), jnp.inf)
            init = (best - x, nrm, margin(fn1(best), y), m_clean)
            polished, p_found = _fmn_point(fn1, x, y, cfg.refine_steps, fcfg, bounds, init)
            return jnp.where(found | p_found, polished, best), found | p_found

        wide = _wide_steps(cfg.engine.norm, cfg.polish_steps)
        if wide > 0:
            best, found = fmn(best, found, wide, POLISH_WIDE_ALPHA)
        if cfg.polish_steps - wide > 0:
            best, found = fmn(best, found, cfg.polish_steps - wide, POLISH_ALPHA)
        return best, found
    return best, found


def _rounds(fn1, x, y, m_clean, logits_clean, targets, key, eps_max, cfg: SearchConfig, bounds, init,
            loop=False) -> SearchState:
    """The rounds of the radius search of one point with lanes aiming at
    ``targets`` (``(restarts,)``): the final ``SearchState``. ``loop``: a
    round's lanes run one after the other (``xla.lanes_in_loop``), not
    ``vmap``ped."""
    geo = geometry(cfg.engine.norm, cfg.engine.l1_sparsity)
    K, R = cfg.candidates, cfg.restarts
    falsi = cfg.radius == "falsi" and K == 1
    ks = jnp.arange(1, K + 1, dtype=jnp.float32)
    target = 2 * CONFIDENCE_RTOL * jnp.maximum(1.0, jnp.max(jnp.abs(logits_clean)))

    def round_fn(st: SearchState, rkey):
        broken = jnp.isfinite(st.hi)
        first = eps_max * ks / K
        if falsi:
            inner = _falsi_radius(st, target)[None]
        else:
            inner = st.lo + (st.hi - st.lo) * ks / (K + 1)
        cands = jnp.where(broken, inner, first)                      # (K,)
        lane_keys = jax.random.split(rkey, K * R).reshape(K, R, -1)

        def lane(eps, rk, r):
            if cfg.rel_step is not None:
                step = eps * cfg.rel_step
            elif cfg.own_lanes:
                # While the point is unbroken every round runs at eps_max and
                # each lane continues from its own last point: it also
                # continues with the step APGD had halved it to, so that the
                # rounds add up to one long APGD run (restarted at 2 eps_max
                # each round, short lanes never settle: on the l_inf 0.4 AT
                # CNN 6 of 512 points stayed inf in l_2, all broken this way).
                step = eps * jnp.where(broken, 2.0, st.etas[r])
            else:
                step = eps * 2.0
            t = targets[r]
            nkey = jax.random.fold_in(rk, 1)
            all_warm = cfg.warm_lanes >= R
            # the warm start: the lane's own last point (warm='own') or the best
            start = st.lanes[r] if cfg.own_lanes else st.best
            if all_warm and geo.name == "l2":
                # For l_2 the warm start is projected onto the smaller ball
                # as the point of the segment x -> start at distance eps, a
                # rescaling by eps / ||start - x|| (for the best point that
                # norm is hi, from the lane that found it), inside the ball
                # and the box as it is.
                nrm = geo.norm(start - x) if cfg.own_lanes else st.hi
                scale = jnp.minimum(1.0, eps / jnp.maximum(nrm, 1e-30))
                return run_lane(fn1, x, y, eps, (start - x) * scale, step, cfg.engine, bounds, feasible=True,
                                target=t, key=nkey)
            if cfg.own_lanes:
                return run_lane(fn1, x, y, eps, start - x, step, cfg.engine, bounds, target=t, key=nkey)
            warm = geo.project(st.best - x, eps)
            d0 = warm if all_warm else jnp.where(r < cfg.warm_lanes, warm, geo.random(rk, x.shape, eps))
            return run_lane(fn1, x, y, eps, d0, step, cfg.engine, bounds, target=t, key=nkey)

        if loop:
            lanes_of = lambda e, kr: jax.lax.map(lambda a: lane(e, *a), (kr, jnp.arange(R)))  # noqa: E731
        else:
            lanes_of = lambda e, kr: jax.vmap(lambda k, r: lane(e, k, r))(kr, jnp.arange(R))  # noqa: E731
        res = jax.vmap(lanes_of)(cands, lane_keys)
        norms = res.adv_norm.reshape(-1)
        margins = res.adv_margin.reshape(-1)
        if K * R > 1:
            # The smallest-norm adversarial; among lanes within a hair of it
            # (for l_inf every lane's highest-loss point lies on the ball's
            # surface) the one with the largest margin.
            near = norms <= jnp.min(norms) * (1.0 + NORM_TIE_RTOL)
            i = jnp.argmax(jnp.where(near, margins, -jnp.inf))
        else:
            i = 0
        cand = res.adv_point.reshape((K * R,) + x.shape)[i]
        found_now = jnp.isfinite(norms[i])
        cand_margin = margins[i]
        if falsi:
            # No per-round ray search: the next round's radius comes from the
            # margins, and its warm start is this adversarial projected onto
            # the smaller ball (a point of the ray, for l_2). Its norm comes
            # from the lane, computed on the same arrays.
            cand_norm = norms[i]
        else:
            # Pull the round's best adversarial toward x along its ray.
            cand_delta = jnp.where(found_now, cand - x, 0.0)
            cand = ray_search(fn1, x, y, cand_delta, cfg.refine_steps, bounds, m_clean, cand_margin)
            cand_norm = jnp.where(found_now, geo.norm(cand - x), jnp.inf)
        better = cand_norm < st.hi
        hi = jnp.where(better, cand_norm, st.hi)
        best = jnp.where(better, cand, st.best)
        # Radii where every lane failed, below the new upper end, raise lo.
        failed = ~jnp.any(jnp.isfinite(res.adv_norm), axis=1)      # (K,)
        lo_c = jnp.max(jnp.where(failed & (cands < hi), cands, 0.0))
        lo = jnp.minimum(jnp.maximum(st.lo, lo_c), hi)
        lo = jnp.where(jnp.isfinite(hi), lo, 0.0)
        lanes = res.point_max[0] if cfg.own_lanes else st.lanes
        etas = jnp.where(jnp.isfinite(hi), 2.0, res.eta[0] / cands[0]) if cfg.own_lanes else st.etas
        if not falsi:
            return st._replace(lo=lo, hi=hi, best=best, lanes=lanes, etas=etas), None
        m_hi = jnp.where(better, cand_margin, st.m_hi)
        m_best = jnp.where(better, cand_margin, st.m_best)
        m_fail = jnp.max(jnp.where(failed, jnp.max(res.margin_max, axis=1), -jnp.inf))
        # An adversarial below lo means the attack missed one at lo: the
        # bracket restarts from 0 (where the margin is m_clean).
        missed = hi <= st.lo
        raised = (lo > st.lo) & ~missed
        lo = jnp.where(missed, 0.0, lo)
        m_lo = jnp.where(missed, m_clean, jnp.where(raised, m_fail, st.m_lo))
        # Illinois: when the same end moves twice in a row, halve the other
        # end's margin so that the secant does not stall on a curved M.
        moved = jnp.where(raised, -1, jnp.where(found_now & broken, 1, 0))
        m_lo = jnp.where((moved == 1) & (st.side == 1), 0.5 * m_lo, m_lo)
        m_hi = jnp.where((moved == -1) & (st.side == -1), 0.5 * m_hi, m_hi)
        side = jnp.where(moved != 0, moved, st.side)
        return SearchState(lo, hi, best, m_lo, m_hi, side, m_best, lanes, etas), None

    st0 = SearchState(like(x, 0.0), like(x, jnp.inf), x, m_clean, like(x, 0.0),
                      like(x, 0, jnp.int32), like(x, 0.0),
                      jnp.broadcast_to(x, (R,) + x.shape) if cfg.own_lanes else None,
                      jnp.full((R,), 2.0) + like(x, 0.0) if cfg.own_lanes else None)
    if init is not None:
        p0, n0, m0 = init
        known = jnp.isfinite(n0)
        st0 = st0._replace(hi=jnp.where(known, n0, jnp.inf), best=jnp.where(known, p0, x),
                           m_hi=jnp.where(known, m0, 0.0), m_best=jnp.where(known, m0, 0.0))
    keys = jax.random.split(key, cfg.search_steps + 1)
    st, _ = jax.lax.scan(round_fn, st0, keys)
    return st


@program(static_argnames=("logits_fn", "cfg", "bounds"))
def _minimal_jit(logits_fn, x, y, keys, eps_max, *, cfg: SearchConfig, bounds):
    fn1 = single(logits_fn, x.shape[1:], cfg.relu_temperature)
    clean = logits_fn(x)
    loop = lanes_in_loop(fn1, flat(x)[0], x.shape[0], cfg.restarts * cfg.candidates)
    x_adv, found = jax.vmap(
        lambda xi, yi, li, ki, ei: _search_point(fn1, xi, yi, li, ki, ei, cfg, bounds, loop=loop)
    )(flat(x), y, clean, keys, eps_max)
    x_adv = x_adv.reshape(x.shape)
    return finalize(logits_fn, x, y, x_adv, found, cfg.engine.norm, bounds)


@program(static_argnames=("logits_fn", "cfg", "bounds"))
def _minimal_below_jit(logits_fn, x, y, keys, eps_max, x_best, d_best, *, cfg: SearchConfig, bounds):
    """``_minimal_jit`` started from known adversarials ``x_best`` at
    distances ``d_best`` (``inf`` where none): a search below them only."""
    fn1 = single(logits_fn, x.shape[1:], cfg.relu_temperature)
    clean = logits_fn(x)
    m_best = jax.vmap(margin)(logits_fn(x_best), y)
    loop = lanes_in_loop(fn1, flat(x)[0], x.shape[0], cfg.restarts * cfg.candidates)
    x_adv, found = jax.vmap(
        lambda xi, yi, li, ki, ei, pb, nb, mb: _search_point(fn1, xi, yi, li, ki, ei, cfg, bounds, (pb, nb, mb),
                                                             loop=loop)
    )(flat(x), y, clean, keys, eps_max, flat(x_best), d_best, m_best)
    x_adv = x_adv.reshape(x.shape)
    return finalize(logits_fn, x, y, x_adv, found, cfg.engine.norm, bounds)


#: Per-norm ``(restarts, steps)`` of ``minimal_distance`` for models with
#: fewer than four classes (and for l_1 always): the same budget of 20
#: gradient evaluations per radius either way. For l_1 the sparse steps of a
#: single lane get stuck: at this budget ``benchmarks/attack_strength.py``
#: measured the 90th-percentile excess over the exact distance at 2.1%
#: (10-class linear) and 49% (parabola) with one lane of 20 steps and 0.18% /
#: 0.12% with two lanes of 10; for l_inf and l_2 two lanes were worse on the
#: l_2-ball model (p90 1.05% vs 0.10%).
DEFAULT_SCHEDULE = {"linf": (1, 20), "l2": (1, 20), "l1": (2, 10)}

#: ``(restarts, steps, search_steps, polish_steps)`` of ``minimal_distance``
#: for l_inf and l_2 on models with at least four classes: four lanes per
#: round, each aiming at one target class with the targeted DLR loss (APGD-T,
#: Croce & Hein 2020; the classes ranked as ``DEFAULT_TARGET_RANK`` says, a
#: Jacobian of 10 backward passes for 10 classes), 8 rounds of 5 steps, then
#: 54 FMN steps from the best adversarial (224 gradients per point; in
#: l_inf 7 rounds and 74 FMN steps, 20 of them wide: ``POLISH_WIDE_ALPHA``). Chosen on
#: trained networks (MNIST and digits MLPs, MNIST CNN, ST and AT) at about
#: 200 gradients per point against one untargeted lane of 20 steps in 11
#: rounds (the earlier default; 9-19% above the best known distance at the
#: 90th percentile there, the lane follows the first class it meets), random
#: restarts, 2-5 targets, 5-22 rounds and 4-14 steps: the targets fix the
#: class, the polish the last percent that few steps per lane leave on a CNN
#: (``benchmarks/attack_quality.py``; the numbers in the README). For l_2,
#: 6 rounds of 7 steps and 46 FMN steps (also 224): on the l_inf 0.3 AT CNN,
#: whose l_2 landscape is masked near the data, 5-step lanes stall (90th
#: percentile 24% above the best of the schedules tried, 13% with 7 steps);
#: on the MLPs and the ST CNN the two are within 0.5% of the best (a sweep
#: of 13 schedules of about 224 gradients; ``benchmarks/attack_quality.py``
#: measures the default against every other attack).
TARGETED_SCHEDULE = {"linf": (4, 5, 6, 74), "l2": (4, 7, 5, 46)}

#: How targeted lanes choose their classes when ``target_rank`` is not given:
#: 'mixed', alternately the nearest class of the model linearised at the
#: clean point inside the box (``attacks.ranking``) and the most likely class
#: by logit. Measured against a reference of two 3,000-gradient ensembles per
#: point (90th-percentile excess, l_inf, 256 points; CNNs 64-128): by logit
#: (APGD-T's choice; 64 polish steps) the digits and MNIST MLPs trained at
#: l_inf 0.1 were 1.51% and 0.63% above it, the class of the reference
#: adversarial outside the four most likely for 19 and 5 of ~250 points;
#: 'mixed' 0.47% and 0.42%, the ST MLPs 0.03% -> 0.02% and 0.06% -> 0.04%,
#: the CNNs within the noise (ST 0.25 -> 0.26%, l_inf 0.3 AT 0.98 -> 0.98%,
#: l_inf 0.1 AT 1.67 -> 1.89% on 128 points); for l_2 the AT MLPs 0.19 ->
#: 0.08% and 0.20 -> 0.10%. 'linear' alone misses the class on the l_inf 0.3
#: AT CNN, whose gradients at the data are masked (13 of 63 points outside
#: its first four, none by logit).
DEFAULT_TARGET_RANK = "mixed"

#: Per-norm radius search of ``minimal_distance`` when not given (see
#: ``radius`` there): regula falsi for l_inf and l_2, bisection with a ray
#: search every round for l_1, whose sparse steps estimate the largest margin
#: in the ball too poorly for the secant (benchmarks/attack_strength.py).
DEFAULT_RADIUS = {"linf": "falsi", "l2": "falsi", "l1": "bisect"}

#: Per-norm ``brackets`` of ``minimal_distance`` with targeted lanes (see
#: there): for l_2 every lane searches its own radius.
DEFAULT_BRACKETS = {"linf": "shared", "l2": "lane", "l1": "shared"}


def targeted_default(norm: str, n_classes: int) -> bool:
    """Whether ``minimal_distance``'s defaults for ``norm`` and a model of
    ``n_classes`` classes are the targeted ones (``TARGETED_SCHEDULE``)."""
    return norm in TARGETED_SCHEDULE and n_classes >= MIN_CLASSES["dlr-t"]


def default_schedule(norm: str, restarts: Optional[int] = None, steps: Optional[int] = None,
                     n_classes: int = 2) -> Tuple[int, int]:
    """``(restarts, steps)`` with the per-norm defaults filled in (those of a
    model with ``n_classes`` classes; see ``targeted_default``)."""
    norm = checks.check_norm(norm)
    r, s = TARGETED_SCHEDULE[norm][:2] if targeted_default(norm, n_classes) else DEFAULT_SCHEDULE[norm]
    return (r if restarts is None else restarts), (s if steps is None else steps)


def default_search_steps(norm: str, n_classes: int = 2) -> int:
    """Rounds after the first of ``minimal_distance``'s default schedule."""
    return TARGETED_SCHEDULE[norm][2] if targeted_default(checks.check_norm(norm), n_classes) else 10


def default_polish_steps(norm: str, n_classes: int = 2) -> int:
    """FMN steps after the search in ``minimal_distance``'s default schedule."""
    return TARGETED_SCHEDULE[norm][3] if targeted_default(checks.check_norm(norm), n_classes) else 0


def default_loss(norm: str, restarts: int, n_classes: int) -> str:
    """The targeted DLR loss (one target class per lane) for l_inf and l_2
    with several lanes on models of at least four classes; else the logit
    margin."""
    return "dlr-t" if restarts > 1 and targeted_default(norm, n_classes) else "margin"


def budget_schedule(norm: str, gradients: int, n_classes: int) -> dict:
    """``minimal_distance`` keyword arguments for about ``gradients``
    gradient evaluations per point: the default schedule's lanes and rounds,
    the steps per lane and the polish scaled (at least 2 steps per lane)."""
    norm = checks.check_norm(norm)
    r, s = default_schedule(norm, n_classes=n_classes)
    rounds = 1 + default_search_steps(norm, n_classes)
    polish = default_polish_steps(norm, n_classes)
    rank = gradients_for_ranking(n_classes) if search_config(norm, n_classes).ranked else 0
    total = rounds * r * s + polish
    polish = int(round(max(gradients - rank, 0) * polish / total))
    steps = max(2, int(round((gradients - rank - polish) / (rounds * r))))
    return {"restarts": r, "steps": steps, "search_steps": rounds - 1, "polish_steps": polish}


def search_gradients(cfg: SearchConfig, n_classes: int) -> int:
    """Gradient evaluations per point of a search with ``cfg`` on a model
    of ``n_classes`` classes: ``(1 + search_steps) * candidates * restarts *
    steps + polish_steps``, plus the Jacobian of the target ranking
    (``attacks.ranking``: one backward pass per class) when the lanes'
    targets are ranked by linearised distance."""
    lanes = (1 + cfg.search_steps) * cfg.candidates * cfg.restarts * cfg.engine.steps
    return lanes + cfg.polish_steps + (gradients_for_ranking(n_classes) if cfg.ranked else 0)


def check_loss(loss, n_classes: int) -> str:
    """A loss name the engine knows that is defined for ``n_classes`` classes."""
    loss = checks.check_choice(loss, ("margin", "ce", "dlr", "dlr-t", "margin-t"), "loss")
    if n_classes < MIN_CLASSES[loss]:
        raise ValueError(f"loss: {loss!r} needs at least {MIN_CLASSES[loss]} classes, the model has {n_classes}")
    return loss


def default_eps_max(norm: str, bounds, shape) -> float:
    """Diameter of the box in ``norm`` (any two points of it are this close)."""
    d = int(math.prod(shape))
    width = bounds[1] - bounds[0]
    return {"linf": width, "l2": width * math.sqrt(d), "l1": width * d}[norm]


def minimal_distance(
    logits_fn: Callable,
    x,
    y,
    *,
    norm: str,
    key,
    eps_max=None,
    search_steps: Optional[int] = None,
    steps: Optional[int] = None,
    bounds: Optional[Tuple[float, float]] = (0.0, 1.0),
    restarts: Optional[int] = None,
    candidates: int = 1,
    refine_steps: int = 4,
    loss: Optional[str] = None,
    step_size: Optional[float] = None,
    l1_sparsity: float = 0.99,
    track: str = "loss",
    radius: Optional[str] = None,
    warm: Optional[str] = None,
    polish_steps: Optional[int] = None,
    target_rank: Optional[str] = None,
    brackets: Optional[str] = None,
    grad_noise: float = 0.0,
    relu_temperature: float = 0.0,
) -> MinimalResult:
    """Per-point minimal adversarial distance in ``norm``.

    Args:
      logits_fn: ``(n, *shape) -> (n, K)``.
      x: inputs ``(n, *shape)``; y: labels ``(n,)``.
      norm: 'linf', 'l2' or 'l1'; distances are measured in this norm.
      key: PRNG key, or one per point ``(n, 2)`` (point ``i`` of a batch with
        a single key uses ``fold_in(key, i)``).
      eps_max: largest radius searched (scalar or ``(n,)``). Default: the
        box's diameter in ``norm`` (required when ``bounds`` is None).
      search_steps: rounds after the first. Default 7 for l_inf and l_2 on
        models of at least four classes (``TARGETED_SCHEDULE``), else 10.
      steps: PGD iterates per lane and round. Default 5 for l_inf and l_2 on
        models of at least four classes, else 20 (10 for l1).
      bounds: ``(lo, hi)`` input domain or None (unbounded R^d).
      restarts: lanes per candidate radius. Default 4 for l_inf and l_2 on
        models of at least four classes (one lane per target class, see
        ``loss``), else 1 (2 for l1, whose sparse steps get stuck in one
        lane: see ``DEFAULT_SCHEDULE``).
      candidates: radii tried in parallel per round.
      refine_steps: forward passes of the ray search (after the last round
        for 'falsi', after every round for 'bisect').
      loss: 'margin', 'ce', 'dlr' (Croce & Hein's difference of logits
        ratio, K >= 3), or a targeted loss: 'dlr-t' (targeted DLR, K >= 4) or
        'margin-t' (``z_t - z_y``); with a targeted loss lane ``r`` of each
        round aims at the ``r``-th class of ``target_rank``'s order (cycling),
        so ``restarts`` is the number of target classes (APGD-T of Croce &
        Hein 2020 as the oracle). Default (None): 'dlr-t' for l_inf and l_2
        with several lanes on models of at least four classes, else
        'margin' (``default_loss``).
      step_size: None for APGD's adaptive steps; a float ``s`` for fixed steps
        of ``s * eps`` (relative to each candidate radius).
      l1_sparsity: for 'l1', the |grad| quantile above which coordinates move.
      track: the adversarial each PGD lane reports: 'loss' (default; its
        highest-loss iterate, if misclassified: free, and on the exact-answer
        models of benchmarks/attack_strength.py as close as or closer than
        'norm') or 'norm' (its smallest-norm misclassified iterate; a norm
        and a select over the input per step).
      radius: 'falsi' or 'bisect' (see the module docstring); None for the
        per-norm default ``DEFAULT_RADIUS``.
      warm: where a round's lanes start: 'first' (the first lane from the
        best adversarial so far, projected onto the round's ball, the others
        from random points of the ball), 'all' (every lane from the best) or
        'own' (every lane from its own highest-loss point of the previous
        round, projected: each target's lane keeps to its own class's
        boundary instead of restarting from whichever class won). Default
        (None): 'own' with a targeted loss, else 'first'. Measured against a
        6,000-gradient reference (90th-percentile excess, 256 points, the
        CNNs 64-128), 'own' against every lane from the best: l_inf 0.47 ->
        0.42% (digits MLP AT), 0.98 -> 0.60% (CNN l_inf 0.3 AT), 1.89 ->
        1.16% (CNN l_inf 0.1 AT), 0.26 -> 0.16% (CNN ST), MNIST MLP AT
        0.42 -> 0.47%; l_2 on the CNN l_inf 0.3 AT 17.6 -> 8.3%, the others
        within 0.1%.
      polish_steps: FMN steps (``attacks.fmn``, Pintor et al. 2021) after the
        search, from its best adversarial with steps relative to its
        distance (``POLISH_ALPHA``): FMN walks along the boundary where the
        search's lanes only reach it. Default 54 (l_inf) and 46 (l_2) on
        models of at least four classes (``TARGETED_SCHEDULE``), else 0.
      target_rank: with a targeted loss, which classes the lanes aim at:
        'logits' (the most likely other classes at ``x``), 'linear' (the
        nearest boundaries of the model linearised at ``x`` inside the box,
        ``attacks.ranking``: one Jacobian, ``K`` backward passes) or 'mixed'
        (alternately one of each; the default, ``DEFAULT_TARGET_RANK``).
        With a lane for every other class there is nothing to rank: 'logits'.
      brackets: with targeted lanes, 'shared' (one radius per round for all
        lanes, from the best adversarial of any lane) or 'lane' (every lane
        runs a radius search of its own toward its class, with its own
        bracket; the smallest adversarial of the lanes is kept, then
        polished). Default (None): ``DEFAULT_BRACKETS``, 'lane' for l_2. A
        lane whose class is reached late (or whose gradients are masked)
        then descends at its own pace instead of being asked for the radius
        another class reached: on the l_inf 0.3 AT CNN (256 random points of
        seed 1, against the best of ~40 runs) the l_2 90th-percentile excess
        went from 21.7% to 19.7% and the 99th from 54% to 42%; on the ST CNN
        and the AT MLPs within 0.1% of 'shared'.
      grad_noise: 0 (default), or ``s > 0``: every lane step takes its
        gradient at a Gaussian-noisy copy of the iterate, ``sigma = s`` times
        the box width (``s`` itself when ``bounds`` is None), the loss and
        the adversarial at the iterate itself (``attacks.engine``: one more
        forward pass per step, no more gradients). Smooths gradients masked
        near the data: on the l_inf 0.3 AT CNN ``s = 0.2`` took the default
        l_2 search's 90th-percentile excess from 19.7% to 8.5% (0.1: 18%,
        0.3: 12%), but on the ST CNN from 0.21% to 1.2% (99th percentile
        0.8% to 25%): not a default; ``attacks.ensemble``'s l_2 searches
        after the first use it.
      relu_temperature: 0 (default), or ``t > 0``: the lanes and the polish
        (and the ``'linear'`` / ``'mixed'`` target ranking's Jacobian)
        take their gradients through the model with every ReLU's derivative
        replaced by ``sigmoid(z / t)`` (``attacks.surrogate``; ``z`` the
        pre-activation, in its own units), the logits unchanged; adversarials
        are checked on the same logits and re-checked with ``logits_fn``.
        A unit just below its threshold then passes gradient, which the
        masked models need: on the l_inf 0.3 AT CNN (5k MNIST, 64 random
        held-out points, seeds 0-2) ``t = 0.1`` took the l_2 search's
        90th-percentile excess over the best known from 27-41% to 5-7%.
        Not a default: ``attacks.adaptive``'s first escalation search uses
        it where the default is in doubt.

    Returns:
      ``MinimalResult(distance (n,), x_adv (n, *shape), success (n,))``:
      distance 0 for misclassified points, ``inf`` where nothing was found;
      every finite distance is the norm of its re-checked ``x_adv - x``. The
      rounds search radii up to ``eps_max``; the closing FMN polish (with
      ``polish_steps`` > 0) can still break a point they did not, and then
      its distance may exceed ``eps_max`` (a verified adversarial all the
      same; e.g. the l_inf 0.4 AT CNN's point 986 of the 2,000-point
      full-MNIST evaluation: 0.369 with ``eps_max`` 0.3).

    Cost: ``(1 + search_steps) * candidates * restarts * steps +
    polish_steps`` gradient evaluations per point (``K`` more for a ranked
    target choice, ``search_gradients``), plus ``refine_steps + 4``
    forward passes (``'falsi'``) or ``(1 + search_steps) * refine_steps + 3``
    (``'bisect'``), and ``refine_steps + 1`` more with a polish.
    """
    x, y, bounds, n_classes = checks.check_model_inputs(logits_fn, x, y, bounds)
    n = x.shape[0]
    norm = checks.check_norm(norm)
    grad_noise = noise_in_input_units(grad_noise, bounds)
    cfg = search_config(norm, n_classes, search_steps=search_steps, steps=steps, restarts=restarts,
                        candidates=candidates, refine_steps=refine_steps, loss=loss, step_size=step_size,
                        l1_sparsity=l1_sparsity, track=track, radius=radius, warm=warm,
                        polish_steps=polish_steps, target_rank=target_rank, brackets=brackets,
                        grad_noise=grad_noise, relu_temperature=relu_temperature)
    keys = checks.check_key(key, n)
    eps_max = check_eps_max(eps_max, norm, bounds, x)
    return raise_nonfinite(_minimal_jit(logits_fn, x, y, keys, eps_max, cfg=cfg, bounds=bounds))


def noise_in_input_units(grad_noise, bounds) -> float:
    """``grad_noise`` (a fraction of the box width) as a standard deviation
    in input units; itself when ``bounds`` is None."""
    grad_noise = checks.check_positive_float(grad_noise, "grad_noise", allow_zero=True)
    return grad_noise if bounds is None else grad_noise * float(bounds[1] - bounds[0])


def check_eps_max(eps_max, norm: str, bounds, x) -> jax.Array:
    """``eps_max`` as ``(n,)``, > 0; default the box's diameter in ``norm``."""
    if eps_max is None:
        if bounds is None:
            raise ValueError("eps_max: required when bounds is None (unbounded inputs)")
        eps_max = default_eps_max(norm, bounds, x.shape[1:])
    eps_max = checks.check_eps(eps_max, x.shape[0], "eps_max")
    if checks.is_concrete(eps_max) and bool(jnp.any(eps_max <= 0)):
        raise ValueError("eps_max: must be > 0")
    return eps_max


def search_config(norm: str, n_classes: int, *, search_steps=None, steps=None, restarts=None, candidates=1,
                  refine_steps=4, loss=None, step_size=None, l1_sparsity=0.99, track="loss", radius=None,
                  warm=None, polish_steps=None, target_rank=None, brackets=None, grad_noise=0.0,
                  relu_temperature=0.0) -> SearchConfig:
    """The validated ``SearchConfig`` of ``minimal_distance``'s arguments
    (None: the per-norm, per-class-count defaults) for a model of
    ``n_classes`` classes."""
    restarts, steps = default_schedule(norm, restarts, steps, n_classes)
    if search_steps is None:
        search_steps = default_search_steps(norm, n_classes)
    radius = checks.check_choice(DEFAULT_RADIUS[norm] if radius is None else radius, ("falsi", "bisect"), "radius")
    steps = checks.check_positive_int(steps, "steps")
    search_steps = checks.check_positive_int(search_steps, "search_steps", minimum=0)
    restarts = checks.check_positive_int(restarts, "restarts")
    candidates = checks.check_positive_int(candidates, "candidates")
    refine_steps = checks.check_positive_int(refine_steps, "refine_steps", minimum=0)
    if polish_steps is None:
        polish_steps = default_polish_steps(norm, n_classes)
    polish_steps = checks.check_positive_int(polish_steps, "polish_steps", minimum=0)
    loss = check_loss(default_loss(norm, restarts, n_classes) if loss is None else loss, n_classes)
    if warm is None:   # targeted: every lane from its own last point; untargeted: the first lane from the best
        warm = "own" if loss in TARGETED_LOSSES else "first"
    warm_lanes = {"first": 1, "all": restarts, "own": restarts}[checks.check_choice(warm, ("first", "all", "own"),
                                                                                      "warm")]
    if step_size is not None:
        step_size = checks.check_positive_float(step_size, "step_size")
    target_rank = checks.check_choice(DEFAULT_TARGET_RANK if target_rank is None else target_rank,
                                      ("logits", "linear", "mixed"), "target_rank")
    if restarts >= n_classes - 1:
        target_rank = "logits"   # every other class has a lane: nothing to rank, no Jacobian to pay for
    if brackets is None:
        brackets = DEFAULT_BRACKETS[norm] if (loss in TARGETED_LOSSES and warm == "own" and candidates == 1) \
            else "shared"
    brackets = checks.check_choice(brackets, ("shared", "lane"), "brackets")
    if brackets == "lane" and (loss not in TARGETED_LOSSES or warm != "own" or candidates != 1):
        raise ValueError("brackets: 'lane' needs a targeted loss, warm='own' and candidates=1 (each lane searches "
                         f"its own class's radius), got loss={loss!r}, warm={warm!r}, candidates={candidates}")
    grad_noise = checks.check_positive_float(grad_noise, "grad_noise", allow_zero=True)
    relu_temperature = check_temperature(relu_temperature, allow_zero=True)
    engine = EngineConfig(
        norm=norm, steps=steps, loss=loss, schedule="apgd" if step_size is None else "fixed",
        l1_sparsity=float(l1_sparsity), track=track, grad_noise=float(grad_noise),
    )
    return SearchConfig(
        engine=engine, search_steps=search_steps, restarts=restarts, candidates=candidates,
        refine_steps=refine_steps, rel_step=step_size, radius=radius, warm_lanes=warm_lanes,
        polish_steps=polish_steps, target_rank=target_rank, own_lanes=warm == "own",
        lane_brackets=brackets == "lane", relu_temperature=float(relu_temperature),
    )


__all__ = ["DEFAULT_BRACKETS", "DEFAULT_RADIUS", "DEFAULT_SCHEDULE", "DEFAULT_TARGET_RANK", "NORM_TIE_RTOL", "SearchConfig",
           "TARGETED_SCHEDULE", "budget_schedule", "search_gradients",
           "check_eps_max", "check_loss", "default_eps_max", "search_config", "default_loss", "default_polish_steps", "default_schedule",
           "default_search_steps",
           "lane_targets", "minimal_distance", "noise_in_input_units", "targeted_default"]
