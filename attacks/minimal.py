"""Per-point minimal adversarial distance: a radius search with PGD as the oracle.

For each point, rounds of PGD at candidate radii narrow a bracket
``[lo, hi]`` around the smallest radius at which an adversarial is found:

* round 0 runs at ``eps_max`` (or ``candidates`` radii spread up to it); a
  point not broken there keeps being attacked at ``eps_max`` with fresh random
  restarts in later rounds, and stays ``inf`` if nothing ever breaks it;
* once broken, each round tries ``candidates`` radii inside ``(lo, hi)``
  (bisection for ``candidates=1``), as parallel lanes;
* ``hi`` is always the *norm of the best adversarial actually found*, not the
  radius that was tried; every round warm-starts its first restart from that
  adversarial projected onto the smaller ball, the other restarts from
  uniform random points of the ball (Croce & Hein 2020's restarts), with APGD
  step sizes;
* every adversarial found is pulled toward the clean point along its ray with
  a few forward passes (``attacks.refine.ray_search``).

Cost per point: ``(1 + search_steps) * candidates * restarts * steps``
gradient evaluations plus ``(1 + search_steps) * (refine_steps + 2)`` forward
passes, all in one jitted program (points and lanes ``vmap``ped, rounds and
steps ``lax.scan``ned). The returned distance is re-checked on the returned
example (``attacks.result.finalize``).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from attacks import checks
from attacks.engine import EngineConfig, flat, run_lane, single
from attacks.norms import clip_box, geometry, like
from attacks.losses import margin
from attacks.refine import ray_search
from attacks.result import MinimalResult, finalize
from attacks.xla import program


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Static configuration of the radius search (see ``minimal_distance``)."""

    engine: EngineConfig
    search_steps: int = 10
    restarts: int = 1
    candidates: int = 1
    refine_steps: int = 4
    rel_step: Optional[float] = None  # fixed step = rel_step * eps; None = APGD


class SearchState(NamedTuple):
    lo: jax.Array     # () largest radius at which the attack failed (below hi)
    hi: jax.Array     # () norm of the best adversarial found; inf if none
    best: jax.Array   # (*shape) the best adversarial point itself (x + delta, as evaluated)


def _search_point(fn1, x, y, key, eps_max, cfg: SearchConfig, bounds):
    """Radius search for one point; returns (best adversarial point, found)."""
    geo = geometry(cfg.engine.norm, cfg.engine.l1_sparsity)
    K, R = cfg.candidates, cfg.restarts
    ks = jnp.arange(1, K + 1, dtype=jnp.float32)
    m_clean = margin(fn1(x), y)

    def round_fn(st: SearchState, rkey):
        broken = jnp.isfinite(st.hi)
        first = eps_max * ks / K
        inner = st.lo + (st.hi - st.lo) * ks / (K + 1)
        cands = jnp.where(broken, inner, first)                      # (K,)
        lane_keys = jax.random.split(rkey, K * R).reshape(K, R, -1)

        def lane(eps, rk, r):
            warm = geo.project(st.best - x, eps)
            rand = geo.random(rk, x.shape, eps)
            d0 = jnp.where(r == 0, warm, rand)
            step = eps * (cfg.rel_step if cfg.rel_step is not None else 2.0)
            return run_lane(fn1, x, y, eps, d0, step, cfg.engine, bounds)

        res = jax.vmap(
            lambda e, kr: jax.vmap(lambda k, r: lane(e, k, r))(kr, jnp.arange(R))
        )(cands, lane_keys)
        norms = res.adv_norm.reshape(-1)
        i = jnp.argmin(norms)
        cand_delta = res.adv_delta.reshape((K * R,) + x.shape)[i]
        found_now = jnp.isfinite(norms[i])
        # Pull the round's best adversarial toward x along its ray; the point is
        # stored exactly as it was evaluated.
        cand_margin = res.adv_margin.reshape(-1)[i]
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
        return SearchState(lo, hi, best), None

    st0 = SearchState(like(x, 0.0), like(x, jnp.inf), x)
    keys = jax.random.split(key, cfg.search_steps + 1)
    st, _ = jax.lax.scan(round_fn, st0, keys)
    return st.best, jnp.isfinite(st.hi)


@program(static_argnames=("logits_fn", "cfg", "bounds"))
def _minimal_jit(logits_fn, x, y, keys, eps_max, *, cfg: SearchConfig, bounds):
    fn1 = single(logits_fn, x.shape[1:])
    x_adv, found = jax.vmap(
        lambda xi, yi, ki, ei: _search_point(fn1, xi, yi, ki, ei, cfg, bounds)
    )(flat(x), y, keys, eps_max)
    x_adv = x_adv.reshape(x.shape)
    return finalize(logits_fn, x, y, x_adv, found, cfg.engine.norm, bounds)


#: Per-norm ``(restarts, steps)`` of ``minimal_distance`` when not given: the
#: same budget of 20 gradient evaluations per radius either way. For l_1 the
#: sparse steps of a single lane get stuck: at this budget
#: ``benchmarks/attack_strength.py`` measured the 90th-percentile excess over
#: the exact distance at 2.1% (10-class linear) and 49% (parabola) with one
#: lane of 20 steps and 0.18% / 0.12% with two lanes of 10; for l_inf and l_2
#: two lanes were worse on the l_2-ball model (p90 1.05% vs 0.10%).
DEFAULT_SCHEDULE = {"linf": (1, 20), "l2": (1, 20), "l1": (2, 10)}


def default_schedule(norm: str, restarts: Optional[int] = None, steps: Optional[int] = None) -> Tuple[int, int]:
    """``(restarts, steps)`` with the per-norm defaults filled in."""
    r, s = DEFAULT_SCHEDULE[checks.check_norm(norm)]
    return (r if restarts is None else restarts), (s if steps is None else steps)


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
    search_steps: int = 10,
    steps: Optional[int] = None,
    bounds: Optional[Tuple[float, float]] = (0.0, 1.0),
    restarts: Optional[int] = None,
    candidates: int = 1,
    refine_steps: int = 4,
    loss: str = "margin",
    step_size: Optional[float] = None,
    l1_sparsity: float = 0.99,
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
      search_steps: rounds after the first (bisection steps for
        ``candidates=1``); the bracket shrinks by ``candidates + 1`` per round.
      steps: PGD gradient steps per lane and round (default 20; 10 for l1).
      bounds: ``(lo, hi)`` input domain or None (unbounded R^d).
      restarts: lanes per candidate radius (one warm start, the rest random;
        default 1; 2 for l1, whose sparse steps get stuck in one lane: see
        ``DEFAULT_SCHEDULE``).
      candidates: radii tried in parallel per round.
      refine_steps: forward passes of the ray search after each round.
      loss: 'margin' (default) or 'ce'.
      step_size: None for APGD's adaptive steps; a float ``s`` for fixed steps
        of ``s * eps`` (relative to each candidate radius).
      l1_sparsity: for 'l1', the |grad| quantile above which coordinates move.

    Returns:
      ``MinimalResult(distance (n,), x_adv (n, *shape), success (n,))``:
      distance 0 for misclassified points, ``inf`` where nothing was found
      within ``eps_max``; every finite distance is the norm of its re-checked
      ``x_adv - x``.

    Cost: ``(1 + search_steps) * candidates * restarts * steps`` gradient
    evaluations per point, plus ``(1 + search_steps) * (refine_steps + 2)``
    forward passes.
    """
    x, y, bounds, _ = checks.check_model_inputs(logits_fn, x, y, bounds)
    n = x.shape[0]
    norm = checks.check_norm(norm)
    restarts, steps = default_schedule(norm, restarts, steps)
    steps = checks.check_positive_int(steps, "steps")
    search_steps = checks.check_positive_int(search_steps, "search_steps", minimum=0)
    restarts = checks.check_positive_int(restarts, "restarts")
    candidates = checks.check_positive_int(candidates, "candidates")
    refine_steps = checks.check_positive_int(refine_steps, "refine_steps", minimum=0)
    keys = checks.check_key(key, n)
    if eps_max is None:
        if bounds is None:
            raise ValueError("eps_max: required when bounds is None (unbounded inputs)")
        eps_max = default_eps_max(norm, bounds, x.shape[1:])
    eps_max = checks.check_eps(eps_max, n, "eps_max")
    if checks.is_concrete(eps_max) and bool(jnp.any(eps_max <= 0)):
        raise ValueError("eps_max: must be > 0")
    if loss not in ("ce", "margin"):
        raise ValueError(f"loss: expected 'ce' or 'margin', got {loss!r}")
    if step_size is not None:
        step_size = checks.check_positive_float(step_size, "step_size")
    engine = EngineConfig(
        norm=norm, steps=steps, loss=loss, schedule="apgd" if step_size is None else "fixed",
        l1_sparsity=float(l1_sparsity),
    )
    cfg = SearchConfig(
        engine=engine, search_steps=search_steps, restarts=restarts, candidates=candidates,
        refine_steps=refine_steps, rel_step=step_size,
    )
    return _minimal_jit(logits_fn, x, y, keys, eps_max, cfg=cfg, bounds=bounds)


__all__ = ["DEFAULT_SCHEDULE", "SearchConfig", "default_eps_max", "default_schedule", "minimal_distance"]
