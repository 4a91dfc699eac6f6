"""The settings of one branch-and-bound search: :class:`BaBConfig`, static (each jitted program of the
search is compiled for one), and :func:`bab_config`, which builds one whose frontier cannot overflow and checks
its settings. What each setting does is described with it; the code it steers is in the other ``bab_*`` modules
(named at each setting). ``batch="auto"`` is resolved to a number by ``bab_batch`` (:func:`with_batch` puts it
in).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from attacks.checks import check_positive_int
from rcurves.nets.bounds import BoundConfig


#: The branching rules of :class:`BaBConfig`.
BRANCHING = ("babsr", "fsb")
RECOMPUTE = ("unstable", "all")


@dataclasses.dataclass(frozen=True)
class BaBConfig:
    """Static settings of one branch-and-bound certification.

    Attributes:
      bound: the norm and input domain (its method is ignored: CROWN bounds the
        hidden layers, alpha-beta-CROWN the margins).
      batch: subdomains split per iteration (``2 batch`` children bounded at once), or ``"auto"``: the
        largest that the device's cap and its memory allow (``bab_batch``; ``bab_host.bab_search`` and
        ``certified_radius(method='bab')`` resolve it, ``bab_device.bab_certify_point`` needs a number).
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
      branching: 'fsb' (filtered smart branching, De Palma et al. 2021:
        BaBSR's ``candidates`` best units, each scored by the bound its worse
        child would get, the best of them split; see ``bab_bounds``) or
        'babsr' (the highest BaBSR score).
      recompute: which hidden bounds ``bab_search`` recomputes per subdomain
        (measured on boxes of the full-MNIST 784-256-256-10 MLP at l_inf
        0.02-0.03 that CROWN leaves open, 512 subdomains each, warm, side by
        side on a loaded 2-core machine: 'unstable' took 4.0-5.9 s where
        'all' took 5.5-6.5 s, 1.0-1.6x faster, the same verdicts and
        subdomain counts)
        (layers after the first): 'unstable' (default) only the units
        unstable at the root, gathered on the host and padded to a power of
        two (a unit stable at the root is stable in every subdomain, whose
        bounds are intersected with the root's, and its relaxation is exact
        whatever its bounds); 'all' every unit (as ``bab_certify_point``,
        whose root is traced, always does). Recomputing nothing (the
        root's bounds, split units clipped: alpha-beta-CROWN's cheapest
        mode) was tried and dropped: on the same MLP it bounded about 2x
        the subdomains per second (the recomputed rows' back-substitution
        through the first layer was most of a subdomain's cost: 1.9 against
        4.5-6.1 ms, before ``first_splits`` made the second layer's cheap),
        but its bounds were weaker: of 12 boxes proved by both, the largest proof took 3,009 subdomains and 6.4 s
        against 497 and 2.0 s, and on 4 open boxes its lower bounds after 50 s were lower
        (-2.35 against -2.11, -4.63 against -3.78).
      candidates: units 'fsb' scores per subdomain (see ``bab_bounds``: 8
        is a compromise between the random MLPs, where 16 proved more, and
        the MNIST MLP, where 4 and 8 did; 32 and 64 needed no fewer
        subdomains than 16 and took 1.4x and 2.9x its time).
      tighten: Adam steps of alpha-CROWN on the root's hidden bounds (layers after the first; 0: CROWN's),
        see ``bab_root._tightened``. Every subdomain's hidden bounds are intersected with the root's, so a
        tighter root narrows them all.
      first_splits: how the second hidden layer's bounds are recomputed per subdomain. The first layer's
        bounds are exact intervals, so on a subdomain its relaxation differs from the root's only at its
        split units, and the second layer's rows pulled back to the input are the root's (computed once per
        program call, outside the map over its subdomains) plus one correction per split first-layer unit:
        ``(2R, S) @ (S, D)`` for ``S = first_splits`` instead of the full pull-back
        ``(2R, H_1) @ (H_1, D)`` per subdomain (see ``bab_bounds._second_layer``). Equal to the full recompute
        on every subdomain with at most ``S`` split first-layer units; one with more keeps the root's relaxation at
        the split units past the first ``S`` (sound: it holds on the whole ball, so on the subdomain; concretized
        over the ball it is not always looser than the exact one). 0: the full pull-back every time.
        ``bab_host.bab_search`` runs batches with at most ``bab_host.FEW_FIRST_SPLITS`` split first-layer units through
        the program that corrects that many (the same bounds up to float rounding, faster).
      refresh: 0 (default): a subdomain's hidden bounds are recomputed (``recompute``) and intersected with the
        root's. ``k >= 1``: each subdomain keeps its hidden bounds of the layers after the first (with its
        ``(alpha, beta)``, a child's starting point) and a child's recomputed bounds are intersected with its
        parent's, so they only narrow down the tree; in ``bab_host.bab_search``, on networks with more than two
        hidden layers, the bounds of the third and later layers are recomputed only every ``k``-th split
        (inherited, the new split clipped, in between): a batch of parents is recomputed when one of them
        has gone ``k - 1`` splits without (the second layer, cheap with ``first_splits``, every time).
        Measured in ``certify.verify.REFRESH`` (4 there for deep networks); ``bab_certify_point`` recomputes
        every time.
      cuts: 0 (default): the first layer's unstable units are relaxed by the triangle. ``k >= 1`` (MLPs on an
        l_inf box, ``bab_host.bab_search`` only): ``k`` rounds of separating Anderson et al.'s cuts of the first
        layer over the input box from the root LP (``bab_cuts._root_cuts``; HiGHS, within the time limit), then
        in every subdomain each still-unstable first-layer unit's upper relaxation is a mixture of its cuts
        (the triangle's pair included) with logits optimised by Adam alongside ``(alpha, beta)``
        (``bab_cuts.Cuts``, ``bab_cuts._cut_terms``): the Lagrangian dual of the LP with those cuts, sound for every
        mixture. On the 784-256-256-10 MNIST MLP the root LP of an open margin went from -3.21 (triangle)
        to -2.06 with one round (``certify.verify.CUTS``).
      second_cuts: 0 (default): the root's bounds of the second hidden layer are CROWN's. ``k >= 1`` (MLPs with
        at least two hidden layers on an l_inf box, ``bab_host.bab_search`` only): each unstable second-layer unit's
        lower and upper bound is tightened by the LP over the first layer with ``k`` rounds of its own cuts
        (:func:`rcurves.certify.cutting.second_layer_bounds`; HiGHS, within ``bab_lp.SECOND_SHARE`` of the time
        limit) where the search is still open after ``bab_host.SECOND_AFTER`` subdomains without (it then starts
        again from the root), and every subdomain's bounds are intersected with them (``certify.verify.SECOND_CUTS``).
    """

    bound: BoundConfig
    batch: "int | str" = 8
    budget: int = 256
    capacity: int = 137
    steps: int = 20
    lr: float = 0.1
    rows: int = 9
    branching: str = "fsb"
    candidates: int = 8
    recompute: str = "unstable"
    tighten: int = 0
    first_splits: int = 64
    refresh: int = 0
    cuts: int = 0
    second_cuts: int = 0


def check_batch(batch) -> "int | str":
    """``batch`` as given when it is a positive integer or ``"auto"``, else a ValueError naming it."""
    if isinstance(batch, str) and batch == "auto":
        return "auto"
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"batch: expected a positive integer or 'auto', got {batch!r}")
    return int(batch)


def with_batch(cfg: BaBConfig, batch: int) -> BaBConfig:
    """``cfg`` splitting ``batch`` subdomains per iteration (at most ``budget // 2``, at least 1), its capacity
    sized as :func:`bab_config` sizes it."""
    batch = max(1, min(check_batch(batch), cfg.budget // 2))
    return dataclasses.replace(cfg, batch=batch, capacity=cfg.budget + 2 * batch + 1)


def bab_config(bound: BoundConfig, budget: int, steps: int = 20, lr: float = 0.1, batch: "int | str" = 8,
               branching: str = BaBConfig.branching, candidates: int = BaBConfig.candidates,
               recompute: str = BaBConfig.recompute, tighten: int = BaBConfig.tighten,
               first_splits: int = BaBConfig.first_splits, refresh: int = BaBConfig.refresh,
               cuts: int = BaBConfig.cuts, second_cuts: int = BaBConfig.second_cuts) -> BaBConfig:
    """The :class:`BaBConfig` that bounds about ``budget`` subdomains per
    certification, ``batch`` split per iteration, with a frontier that cannot
    overflow. An iteration that splits ``v`` subdomains bounds ``2 v`` and
    adds at most ``v`` to the frontier; a round that starts from a previous
    round's ``n`` undecided subdomains bounds them again first (``n`` of its
    budget), so it ends with at most ``n + (budget - n) / 2 + batch`` of them.
    With ``capacity = budget + 2 batch + 1`` that is at most ``capacity``
    whenever ``n`` is, and a round from the root ends with at most
    ``1 + budget / 2 + batch``. (With half that capacity, a round that reused a
    nearly full frontier overflowed: it failed, sound but needlessly.) ``batch="auto"`` stays ``"auto"``
    (capacity 0) until ``bab_batch`` resolves it (:func:`with_batch`).

    Raises:
      ValueError: naming the setting (``batch`` neither a positive integer nor ``"auto"``, an unknown
        ``branching`` or ``recompute``, a negative or fractional count).
    """
    batch = check_batch(batch)
    if branching not in BRANCHING:
        raise ValueError(f"branching: expected one of {BRANCHING}, got {branching!r}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute: expected one of {RECOMPUTE}, got {recompute!r}")
    tighten = check_positive_int(tighten, "tighten", minimum=0)
    first_splits = check_positive_int(first_splits, "first_splits", minimum=0)
    refresh = check_positive_int(refresh, "refresh", minimum=0)
    cuts = check_positive_int(cuts, "cuts", minimum=0)
    second_cuts = check_positive_int(second_cuts, "second_cuts", minimum=0)
    cfg = BaBConfig(bound=bound, batch=batch, budget=budget, capacity=0, steps=steps, lr=lr,
                    branching=branching, candidates=max(1, int(candidates)), recompute=recompute,
                    tighten=tighten, first_splits=first_splits, refresh=refresh, cuts=cuts,
                    second_cuts=second_cuts)
    return cfg if batch == "auto" else with_batch(cfg, batch)


__all__ = ["BRANCHING", "BaBConfig", "RECOMPUTE", "bab_config", "check_batch", "with_batch"]
