"""Several minimal-distance attacks under one budget: per point the smallest verified distance.

``ensemble`` runs its members one after the other, each as one jitted
program over all points (``vmap`` inside, no Python loop over points). The
first member starts from nothing; every later one starts from the best
adversarial found so far and only looks below it, unless it is a ``fresh``
search:

* a radius search (``Search``, and ``APGDT``: the same search with
  Croce & Hein's targeted DLR loss, one lane per target class) starts from
  the bracket ``[0, d_best]`` with the best point as its warm start
  (``attacks.minimal``), so its rounds are spent below the current best;
  ``Search(fresh=True)`` starts from nothing instead, an independent search
  that finds its own basin (the default members from 600 gradients are
  several such searches, ``default_attacks``);
* DDN and FMN start from the best adversarial at ``eps_0 = d_best``, with
  step sizes relative to it (``alpha`` is then a fraction of ``d_best``):
  a local refinement of the best point;
* CW starts every constant of its search from the best point, which is
  also its starting best.

Points already misclassified (distance 0) are left as they are. Per point
the result is the smallest distance over the members, each of which was
re-checked by its own program (``attacks.result.finalize``: misclassified,
inside the box, distance recomputed on the returned example), and ``winner``
says which member found it (the earliest, on a tie).

Every member's budget is counted in gradient evaluations per point
(``member.gradients_for(norm, n_classes)``); ``default_attacks(norm,
gradients)`` splits a budget over the members chosen on trained networks
(``benchmarks/attack_quality.py``).

    res = attacks.ensemble(logits_fn, x, y, norm="linf", key=key)       # ~1,000 gradients per point
    res.distance, res.winner                                              # (n,), (n,) member index
    res = attacks.ensemble(logits_fn, x, y, norm="l2", key=key,
                           attacks=(attacks.Search(), attacks.DDN(steps=200), attacks.CW()))
"""
from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp

from attacks import checks
from attacks.cw import CWConfig, _cw_jit, _cw_warm_jit
from attacks.ddn import DDNConfig, _ddn_jit, _ddn_warm_jit
from attacks.fmn import FMNConfig, _fmn_jit, _fmn_warm_jit
from attacks.losses import MIN_CLASSES
from attacks.minimal import (SearchConfig, _minimal_below_jit, _minimal_jit, budget_schedule, check_eps_max,
                             noise_in_input_units, search_config, search_gradients, targeted_default)
from attacks.result import MinimalResult, raise_nonfinite


class EnsembleResult(NamedTuple):
    """Per-point minimal distances over several attacks.

    Attributes:
      distance: ``(n,)`` float32, the smallest verified distance over the
        members (``0`` for misclassified points, ``inf`` where none broke it).
      x_adv: ``(n, *shape)`` the adversarial example at that distance (``x``
        where none).
      success: ``(n,)`` bool, ``distance < inf``.
      winner: ``(n,)`` int32, index into the members of the one that found
        ``x_adv`` (the earliest on a tie); ``-1`` where no member did (points
        already misclassified, and points no member broke).
    """

    distance: jax.Array
    x_adv: jax.Array
    success: jax.Array
    winner: jax.Array


# ---------------------------------------------------------------------------
# members


@dataclasses.dataclass(frozen=True)
class Search:
    """``attacks.minimal_distance`` as a member (a radius search with APGD
    lanes); None fields take ``minimal_distance``'s defaults. Later in an
    ensemble it starts from the bracket ``[0, d_best]``, or, with
    ``fresh=True``, from nothing (an independent search, merged by the
    minimum). ``eps_scale`` (in ``(0, 1]``) multiplies ``eps_max``, the
    radius of its first round: its rounds break no point farther than
    that (its FMN polish still may, see ``minimal_distance``). ``grad_noise``: ``minimal_distance``'s (a fraction of the
    box width); ``relu_temperature``: ``minimal_distance``'s (gradients through smoothed ReLUs)."""

    search_steps: Optional[int] = None
    steps: Optional[int] = None
    restarts: Optional[int] = None
    loss: Optional[str] = None
    warm: Optional[str] = None
    radius: Optional[str] = None
    polish_steps: Optional[int] = None
    refine_steps: int = 4
    target_rank: Optional[str] = None
    brackets: Optional[str] = None
    grad_noise: float = 0.0
    relu_temperature: float = 0.0
    fresh: bool = False
    eps_scale: float = 1.0
    name: str = "search"
    norms: Tuple[str, ...] = ("linf", "l2", "l1")

    def config(self, norm: str, n_classes: int) -> SearchConfig:
        if not (isinstance(self.eps_scale, (int, float)) and 0 < self.eps_scale <= 1):
            raise ValueError(f"attacks: Search eps_scale must be in (0, 1], got {self.eps_scale!r}")
        loss = self.loss
        if loss == "dlr-t" and n_classes < MIN_CLASSES["dlr-t"]:
            loss = "margin-t"       # DLR-T needs four logits; the targeted margin is its unscaled form
        return search_config(norm, n_classes, search_steps=self.search_steps, steps=self.steps,
                             restarts=self.restarts, refine_steps=self.refine_steps, loss=loss, warm=self.warm,
                             radius=self.radius, polish_steps=self.polish_steps, target_rank=self.target_rank,
                             brackets=self.brackets, grad_noise=self.grad_noise,
                             relu_temperature=self.relu_temperature)

    def gradients_for(self, norm: str, n_classes: int) -> int:
        return search_gradients(self.config(norm, n_classes), n_classes)

    def run(self, logits_fn, x, y, keys, norm, bounds, eps_max, n_classes, best=None) -> MinimalResult:
        cfg = self.config(norm, n_classes)
        if self.grad_noise:
            cfg = dataclasses.replace(cfg, engine=dataclasses.replace(
                cfg.engine, grad_noise=noise_in_input_units(self.grad_noise, bounds)))
        eps_max = eps_max * self.eps_scale
        if best is None or self.fresh:
            return _minimal_jit(logits_fn, x, y, keys, eps_max, cfg=cfg, bounds=bounds)
        return _minimal_below_jit(logits_fn, x, y, keys, eps_max, best.x_adv, best.distance, cfg=cfg,
                                  bounds=bounds)


def APGDT(search_steps: int = 6, steps: int = 10, targets: int = 3, name: str = "apgd-t") -> Search:
    """The radius search with APGD-T as its oracle (Croce & Hein 2020): the
    targeted DLR loss, one lane per target class (the ``targets`` most likely
    classes other than the label at the clean point), every lane warm-started
    from the best adversarial so far. Models with fewer than four classes get
    the targeted logit margin instead."""
    return Search(search_steps=search_steps, steps=steps, restarts=targets, loss="dlr-t", polish_steps=0, name=name)


@dataclasses.dataclass(frozen=True)
class DDN:
    """``attacks.ddn`` (l_2) as a member. Later in an ensemble it starts from
    the best adversarial, at ``eps_0 = d_best``, with steps ``alpha * d_best``
    (``warm_alpha`` cosine-annealed to a hundredth of it)."""

    steps: int = 100
    gamma: float = 0.05
    warm_alpha: float = 0.1
    name: str = "ddn"
    norms: Tuple[str, ...] = ("l2",)

    def gradients_for(self, norm: str, n_classes: int) -> int:
        return self.steps

    def run(self, logits_fn, x, y, keys, norm, bounds, eps_max, n_classes, best=None) -> MinimalResult:
        refine = jnp.int32(4)
        if best is None:
            cfg = DDNConfig(steps=self.steps, gamma=self.gamma)
            return _ddn_jit(logits_fn, x, y, keys, jnp.ones(x.shape[0], jnp.float32), refine, cfg=cfg, bounds=bounds)
        cfg = DDNConfig(steps=self.steps, gamma=self.gamma, alpha_init=self.warm_alpha,
                        alpha_final=self.warm_alpha / 100.0)
        return _ddn_warm_jit(logits_fn, x, y, keys, jnp.ones(x.shape[0], jnp.float32), refine, best.x_adv,
                             best.distance, cfg=cfg, bounds=bounds)


@dataclasses.dataclass(frozen=True)
class FMN:
    """``attacks.fmn`` as a member. Later in an ensemble it starts from the
    best adversarial, at ``eps_0 = d_best``, with steps ``alpha * d_best``
    (``warm_alpha`` cosine-annealed to a hundredth of it)."""

    steps: int = 100
    warm_alpha: float = 0.1
    name: str = "fmn"
    norms: Tuple[str, ...] = ("linf", "l2", "l1")

    def gradients_for(self, norm: str, n_classes: int) -> int:
        return self.steps

    def run(self, logits_fn, x, y, keys, norm, bounds, eps_max, n_classes, best=None) -> MinimalResult:
        refine = jnp.int32(4)
        if best is None:
            cfg = FMNConfig(norm=norm, steps=self.steps)
            return _fmn_jit(logits_fn, x, y, refine, cfg=cfg, bounds=bounds)
        cfg = FMNConfig(norm=norm, steps=self.steps, alpha_init=self.warm_alpha, alpha_final=self.warm_alpha / 100.0)
        return _fmn_warm_jit(logits_fn, x, y, refine, best.x_adv, best.distance, cfg=cfg, bounds=bounds)


@dataclasses.dataclass(frozen=True)
class CW:
    """``attacks.carlini_wagner_l2`` as a member (fixed-length Adam loops).
    Later in an ensemble every constant starts from the best adversarial."""

    binary_search_steps: int = 5
    steps: int = 20
    lr: float = 0.1
    initial_const: float = 0.1
    name: str = "cw"
    norms: Tuple[str, ...] = ("l2",)

    def gradients_for(self, norm: str, n_classes: int) -> int:
        return self.binary_search_steps * (self.steps - 1)

    def run(self, logits_fn, x, y, keys, norm, bounds, eps_max, n_classes, best=None) -> MinimalResult:
        cfg = CWConfig(binary_search_steps=self.binary_search_steps, steps=self.steps, lr=self.lr,
                       initial_const=self.initial_const, abort_early=False)
        if best is None:
            return _cw_jit(logits_fn, x, y, cfg=cfg, bounds=bounds)
        return _cw_warm_jit(logits_fn, x, y, best.x_adv, best.distance, cfg=cfg, bounds=bounds)


#: Gradients per point of each independent search in ``default_attacks``.
SEARCH_SHARE = 224

#: Gradient noise (``minimal_distance``'s ``grad_noise``, a fraction of the
#: box width) of ``default_attacks``' l_2 searches after the first: on the
#: l_inf 0.3 AT CNN, whose gradients are masked near the data, three of the
#: four 1,000-gradient searches with it took the ensemble's 90th-percentile
#: excess from 20.9% to 2.8% (256 random points of seed 1, against the best of
#: ~45 runs; two of four: 4.4%); on the ST CNN 0.12% -> 0.10% (64 points).
ENSEMBLE_L2_NOISE = 0.2

#: ``(target_rank, eps_scale)`` of the independent searches of
#: ``default_attacks``, in order (cycled): each finds its own basin.
SEARCH_VARIANTS = (("mixed", 1.0), ("logits", 1.0), ("linear", 1.0), ("mixed", 0.5),
                   ("linear", 0.5), ("logits", 0.5), ("mixed", 0.25), ("linear", 0.25))


def default_attacks(norm: str, gradients: int = 1000, n_classes: int = 10) -> Tuple:
    """The members ``ensemble`` uses for ``norm`` when none are given, for a
    budget of about ``gradients`` gradient evaluations per point on a model
    of ``n_classes`` classes.

    From 600 gradients: ``k = round(0.9 * gradients / 224)`` independent
    radius searches (``minimal_distance``'s default schedule scaled to
    ``0.9 * gradients / k`` each), then FMN refining the best point with the
    rest (about 10%). Every search after the first is ``fresh``: it starts
    from nothing, not below the best so far, and differs from the others in
    how its lanes rank their target classes and in the radius its first
    round tries (``SEARCH_VARIANTS``: by linearised distance and logit
    alternately, by logit, by linearised distance, then the same with half
    the first radius, ...; for an untargeted schedule, fewer than four
    classes or l_1, the first radius only: 1, 1/2, 1/4, 1/8 of ``eps_max``;
    past the variants, random starts), so that each ends in a basin of its
    own and the ensemble keeps the nearest. For l_2 the searches after the
    first take their lanes' gradients at Gaussian-noisy copies of the
    iterates (``ENSEMBLE_L2_NOISE``: smoothed, for models whose gradients are
    masked near the data). A search whose first radius is a fraction of
    ``eps_max`` leaves points farther than that to the others (the first
    search always starts at ``eps_max``).

    On trained networks the tail of a single search's distances is a lottery
    over local optima rather than unfinished convergence: against the best
    known distance per point (256 points, l_inf; the CNNs 64; searches
    with every lane warm-started from the best, before ``warm='own'``), four
    independent 224-gradient searches and 100 FMN steps came within 0.15%
    (digits and MNIST MLPs AT), 0.43-0.49% (CNN l_inf 0.3 AT) and 0.01-0.11%
    (ST) at the 90th percentile, where the earlier default (one search of
    45% of the budget, APGD-T below it, FMN) was 0.48 / 0.65 / 1.26 / 0.01-
    0.25% and two ensembles of 3,000 gradients 0.29 / 0.56 / 1.44%; for l_2
    0.04 / 0.01 / 6.6 / 0.21% against the earlier l_2 default's (one
    9-target search and DDN) 0.08 / 0.39 / 12.0 / 0.33%
    (``benchmarks/attack_quality.py`` measures it beside every other attack).

    Below 600 gradients, only the first search, with the whole budget
    (``minimal_distance``'s default schedule scaled to it): split, each
    search's steps become too few to converge.
    """
    norm = checks.check_norm(norm)
    g = max(checks.check_positive_int(gradients, "gradients"), 20)
    if g < 600:
        return (Search(**budget_schedule(norm, g, n_classes)),)
    k = max(1, int(round(0.9 * g / SEARCH_SHARE)))
    share = int(0.9 * g / k)
    schedule = budget_schedule(norm, share, n_classes)
    targeted = targeted_default(norm, n_classes)
    variants = SEARCH_VARIANTS if targeted else tuple((None, 0.5 ** j) for j in range(4))
    members = []
    for i in range(k):
        rank, scale = variants[i % len(variants)]
        kw = dict(schedule)
        if i >= len(variants):
            # every variant taken: random starts for all lanes but the first
            # (one more lane where there is one), the member's own key
            if not targeted:
                kw["restarts"] = kw["restarts"] + 1
                kw["steps"] = max(2, int(round(kw["steps"] * schedule["restarts"] / kw["restarts"])))
            kw["warm"] = "first"
        name = "search" if i == 0 else "search-" + "-".join(
            [t for t in (rank, f"{scale:g}", "random" if i >= len(variants) else None) if t])
        noise = ENSEMBLE_L2_NOISE if (norm == "l2" and i > 0) else 0.0
        if noise:
            name += "-noisy"
        members.append(Search(**kw, target_rank=rank, eps_scale=scale, fresh=i > 0, grad_noise=noise, name=name))
    used = sum(m.gradients_for(norm, n_classes) for m in members)
    members.append(FMN(steps=max(2, g - used)))
    return tuple(members)


# ---------------------------------------------------------------------------
# the ensemble


@jax.jit
def _member_keys(keys: jax.Array, i) -> jax.Array:
    """Member ``i``'s per-point keys: ``fold_in(key_point, i)``."""
    return jax.vmap(lambda k: jax.random.fold_in(k, i))(keys)


@jax.jit
def _merge(best: MinimalResult, new: MinimalResult, winner: jax.Array, i) -> Tuple[MinimalResult, jax.Array]:
    """Keep, per point, the strictly smaller of two verified results."""
    better = new.distance < best.distance
    mask = better.reshape(better.shape + (1,) * (best.x_adv.ndim - 1))
    merged = MinimalResult(jnp.where(better, new.distance, best.distance), jnp.where(mask, new.x_adv, best.x_adv),
                           best.success | new.success)
    return merged, jnp.where(better, i, winner)


def ensemble(
    logits_fn: Callable,
    x,
    y,
    *,
    norm: str,
    key,
    attacks: Optional[Sequence] = None,
    bounds: Optional[Tuple[float, float]] = (0.0, 1.0),
    eps_max=None,
    return_members: bool = False,
):
    """Per-point smallest verified distance over several attacks.

    Args:
      logits_fn: ``(n, *shape) -> (n, K)``.
      x: inputs ``(n, *shape)``; y: labels ``(n,)``.
      norm: 'linf', 'l2' or 'l1'.
      key: PRNG key, or one per point ``(n, 2)``; member ``i`` uses
        ``fold_in(key_point, i)``.
      attacks: the members, in order (``Search``, ``APGDT(...)``, ``DDN``,
        ``FMN``, ``CW``); default ``default_attacks(norm)`` (about 1,000
        gradients per point). A member that does not measure ``norm`` is a
        ``ValueError``.
      bounds: ``(lo, hi)`` input domain or None (unbounded R^d).
      eps_max: largest radius of the searches (scalar or ``(n,)``); default
        the box's diameter in ``norm`` (required when ``bounds`` is None).
      return_members: also return each member's own result (a list of
        ``MinimalResult``, in order).

    Returns:
      ``EnsembleResult(distance, x_adv, success, winner)`` (and the members'
      results if asked). ``distance[i]`` is the minimum over the members'
      re-checked distances, ``x_adv[i]`` the winner's example.
    """
    x, y, bounds, n_classes = checks.check_model_inputs(logits_fn, x, y, bounds)
    n = x.shape[0]
    norm = checks.check_norm(norm)
    keys = checks.check_key(key, n)
    members = default_attacks(norm, n_classes=n_classes) if attacks is None else tuple(attacks)
    if not members:
        raise ValueError("attacks: expected at least one attack")
    for m in members:
        if not all(hasattr(m, a) for a in ("run", "norms", "gradients_for", "name")):
            raise ValueError(f"attacks: expected members such as attacks.Search(), attacks.FMN(), got {m!r}")
        if norm not in m.norms:
            raise ValueError(f"attacks: {m.name} does not measure {norm} distances (only {', '.join(m.norms)})")
        if isinstance(m, Search):
            m.config(norm, n_classes)       # checks the loss against the number of classes
    eps_max = check_eps_max(eps_max, norm, bounds, x)

    best, winner, results = None, jnp.full((n,), -1, jnp.int32), []
    for i, m in enumerate(members):
        res = raise_nonfinite(m.run(logits_fn, x, y, _member_keys(keys, i), norm, bounds, eps_max, n_classes, best))
        results.append(res)
        if best is None:
            best = res
            winner = jnp.where(res.distance > 0, jnp.where(jnp.isfinite(res.distance), 0, -1), -1).astype(jnp.int32)
        else:
            best, winner = _merge(best, res, winner, i)
    out = EnsembleResult(best.distance, best.x_adv, best.success, winner)
    return (out, results) if return_members else out


def member_names(members: Sequence) -> Tuple[str, ...]:
    """The members' names, made unique by their position where they repeat."""
    names = [m.name for m in members]
    return tuple(nm if names.count(nm) == 1 else f"{nm}#{i}" for i, nm in enumerate(names))


__all__ = ["APGDT", "CW", "DDN", "EnsembleResult", "FMN", "Search", "default_attacks", "ensemble", "member_names"]
