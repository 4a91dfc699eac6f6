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
   subdomain whose bound fails has no unstable unit left to split (in
   :func:`bab_search`, only when the exact LP of such a subdomain,
   :func:`_exact_leaf`, neither proves it nor yields a confirmed
   counterexample).

Each subdomain is bounded by alpha-beta-CROWN (Wang et al. 2021, eq. 5-7):

* its hidden layers' bounds are CROWN's through the earlier layers'
  relaxations *with the subdomain's splits made exact* (split units clipped at
  0), intersected with the root's. The second layer's come cheaply
  (``BaBConfig.first_splits``, :func:`_second_layer`): the first layer's
  bounds are exact intervals, so a subdomain's relaxation of it differs from
  the root's only at its split units, and its pull-back is the root's plus
  one rank-one correction per split unit instead of a product with the whole
  first layer. Measured side by side (``bab_search`` at 10-15 s per box,
  open boxes of ``benchmarks/verify_speed.py``'s full-MNIST MLPs, loaded 2
  cores): on 784-256-256-10 (eps 0.03) 1.5-1.8x the subdomains per second
  of the full pull-back (162 -> 288, 160 -> 292, 181 -> 311, 191 -> 279),
  the same bounds on the same subdomains; on 784-256x4-10 (eps 0.02) 1.17x
  (71 -> 84), its third and fourth layers still pulled back in full;
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

**Cuts of the first layer** (``BaBConfig.cuts``, :func:`bab_search` on MLPs, ``certify.verify`` on two
hidden layers). The triangle is the tightest relaxation of one ReLU given only its pre-activation's
interval, and after alpha and beta are optimised the bound of a subdomain is the LP of the triangles
(on the open box of the 784-256-256-10 MNIST MLP measured in ``certify.verify.CUTS``: -3.2100 for both).
But a first-layer unit's pre-activation ``w . x + b`` is a function of the *box*, and over the box the
convex hull of ``(x, relu(w . x + b))`` is much tighter than the triangle in ``w . x``: Anderson et al.
(2020) describe it by one inequality per subset ``I`` of the inputs (:class:`Cuts`), and the most
violated one at a point is found in linear time. At the root, :func:`_root_cuts` solves the LP
(triangles, the first layer in its big-M form) and adds, per unstable first-layer unit, the cut its
optimum violates most (``cuts`` rounds; one in ``verify``: -3.21 -> -2.06 on that box). Every subdomain
then bounds each still-unstable first-layer unit from above by a convex mixture of its cuts (the
big-M pair, whose mixture at the triangle's slope is the triangle, and the separated ones), the mixture's
logits optimised by Adam with ``(alpha, beta)``: a Lagrangian bound of the LP with the cuts, sound for
any mixture (:func:`_cut_terms`).

Branching (BaBSR, Bunel et al. 2020, its intercept term): with ``lam`` the
CROWN coefficients of the subdomain's worst margin row over the hidden
activations, unit ``i`` scores ``|lam_i| u_i (-l_i) / (u_i - l_i)``; split
units are stable in their subdomain and score 0. By default
(``branching='fsb'``, filtered smart branching, De Palma et al. 2021,
"Improved branch and bound for neural network verification via Lagrangian
decomposition") the ``candidates`` (8) best units by that score are scored
again by the bound each split would actually give: for each, both children's
margin bounds with the subdomain's optimised ``(alpha, beta)`` and hidden
bounds, only the split unit's own bounds clipped at 0 (one back-substitution
per child, no optimisation); the unit whose worse child is highest is split
(BaBSR's best on a tie). Measured with ``bab_search`` (``verify``'s branch
and bound) on boxes that CROWN does not prove and PGD does not break, 2
busy cores, in the balls every rule proved:

| network | proved by BaBSR / FSB (time limit) | subdomains BaBSR / FSB | time BaBSR / FSB |
|---|---|---|---|
| random MLP 16-64-64-10 | 12 / 12 of 12 (20 s) | 3,070 / 308 | 2.0 s / 0.7 s |
| random MLP 16-32-32-32-32-10 | 11 / 11 of 11 (20 s) | 2,617 / 295 | 2.2 s / 0.7 s |
| random MLP 32-128-128-10 | 9 / 9 of 10 (15 s) | 17,945 / 2,653 | 18.6 s / 4.8 s |
| MNIST MLP 784-256-256-10 (eps 0.015-0.02) | 4 / 5 of 7 (30 s) | 1,094 / 536 | 27.7 s / 16.8 s |

With 16 candidates: 10 of 10 on the 32-128-128 MLP (1,785 subdomains, 3.8 s
on the 9) but 4 of 7 on the MNIST MLP (584, 24.8 s); with 4: 5 of 7 on MNIST
(478, 14.0 s) but 9,783 subdomains on the 32-128-128 MLP. In
``certified_radius(method='bab')`` (random 16-64-64-10, 12 points, budget
256) the median attack/certified ratio went from 1.185 (BaBSR) to 1.092
(FSB, 8 candidates; CROWN 1.667) for 1.3x the time; BaBSR with twice the
budget reached 1.145 in 1.8x.

Only the ``rows`` margins with the lowest root bounds are branched on (by
default all of them, up to 10 classes); the others must be certified at the
root (a root bound holds on every subdomain).

:func:`bab_search` decides one ball (``certify.verify``'s last stage): the
same search, driven from the host. Each iteration is one call of a jitted
program of fixed shapes (``batch`` parents in, their ``2 batch`` children
bounded), the frontier is kept in NumPy arrays that double when full, and
the clock is read between iterations: the time per subdomain does not grow
with the budget, and a time limit stops the search within one iteration.
(Branch and bound inside one jitted ``lax.while_loop`` over a frontier of
``capacity = budget + 2 batch + 1`` slots, :func:`bab_certify_point`, pays
per iteration for the whole frontier: on the MNIST MLP 784-256-256-10 a
879-subdomain proof took 11.9 s with a budget of 4,096 and 27.7 s with
16,384; on a random MLP 16-64-64-10 a 1,641-subdomain one 2.8 s and 11.2 s.
:func:`bab_search` with the same BaBSR rule bounds the same subdomains in
9.0-9.4 s and 0.57 s, whatever the budget.)

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
import functools
import math
import time
from typing import List, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from attacks.checks import check_positive_int
from attacks.losses import margin
from rcurves.nets.bounds import (
    BoundConfig, Prepared, Relax, _both, _box, _spec_start, backsub, concretize, hidden_bounds, margin_spec, relax,
)
from rcurves.nets.layers import block_jacobian, block_transpose, forward
from attacks.precision import exact_precision


#: The branching rules of :class:`BaBConfig`.
BRANCHING = ("babsr", "fsb")
RECOMPUTE = ("unstable", "all")


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
      branching: 'fsb' (filtered smart branching, De Palma et al. 2021:
        BaBSR's ``candidates`` best units, each scored by the bound its worse
        child would get, the best of them split; see the module doc) or
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
      candidates: units 'fsb' scores per subdomain (see the module doc: 8
        is a compromise between the random MLPs, where 16 proved more, and
        the MNIST MLP, where 4 and 8 did; 32 and 64 needed no fewer
        subdomains than 16 and took 1.4x and 2.9x its time).
      tighten: Adam steps of alpha-CROWN on the root's hidden bounds (layers after the first; 0: CROWN's),
        see :func:`_tightened`. Every subdomain's hidden bounds are intersected with the root's, so a
        tighter root narrows them all.
      first_splits: how the second hidden layer's bounds are recomputed per subdomain. The first layer's
        bounds are exact intervals, so on a subdomain its relaxation differs from the root's only at its
        split units, and the second layer's rows pulled back to the input are the root's (computed once per
        program call, outside the map over its subdomains) plus one correction per split first-layer unit:
        ``(2R, S) @ (S, D)`` for ``S = first_splits`` instead of the full pull-back
        ``(2R, H_1) @ (H_1, D)`` per subdomain (see :func:`_second_layer`). Equal to the full recompute
        on every subdomain with at most ``S`` split first-layer units; one with more keeps the root's relaxation at
        the split units past the first ``S`` (sound: it holds on the whole ball, so on the subdomain; concretized
        over the ball it is not always looser than the exact one). 0: the full pull-back every time.
        :func:`bab_search` runs batches with at most :data:`FEW_FIRST_SPLITS` split first-layer units through
        the program that corrects that many (the same bounds up to float rounding, faster).
      refresh: 0 (default): a subdomain's hidden bounds are recomputed (``recompute``) and intersected with the
        root's. ``k >= 1``: each subdomain keeps its hidden bounds of the layers after the first (with its
        ``(alpha, beta)``, a child's starting point) and a child's recomputed bounds are intersected with its
        parent's, so they only narrow down the tree; in :func:`bab_search`, on networks with more than two
        hidden layers, the bounds of the third and later layers are recomputed only every ``k``-th split
        (inherited, the new split clipped, in between): a batch of parents is recomputed when one of them
        has gone ``k - 1`` splits without (the second layer, cheap with ``first_splits``, every time).
        Measured in ``certify.verify.REFRESH`` (4 there for deep networks); ``bab_certify_point`` recomputes
        every time.
      cuts: 0 (default): the first layer's unstable units are relaxed by the triangle. ``k >= 1`` (MLPs on an
        l_inf box, :func:`bab_search` only): ``k`` rounds of separating Anderson et al.'s cuts of the first
        layer over the input box from the root LP (:func:`_root_cuts`; HiGHS, within the time limit), then
        in every subdomain each still-unstable first-layer unit's upper relaxation is a mixture of its cuts
        (the triangle's pair included) with logits optimised by Adam alongside ``(alpha, beta)``
        (:class:`Cuts`, :func:`_cut_terms`): the Lagrangian dual of the LP with those cuts, sound for every
        mixture. On the 784-256-256-10 MNIST MLP the root LP of an open margin went from -3.21 (triangle)
        to -2.06 with one round (``certify.verify.CUTS``).
      second_cuts: 0 (default): the root's bounds of the second hidden layer are CROWN's. ``k >= 1`` (MLPs with
        at least two hidden layers on an l_inf box, :func:`bab_search` only): each unstable second-layer unit's
        lower and upper bound is tightened by the LP over the first layer with ``k`` rounds of its own cuts
        (:func:`rcurves.certify.cutting.second_layer_bounds`; HiGHS, within :data:`SECOND_SHARE` of the time
        limit) where the search is still open after :data:`SECOND_AFTER` subdomains without (it then starts
        again from the root), and every subdomain's bounds are intersected with them (``certify.verify.SECOND_CUTS``).
    """

    bound: BoundConfig
    batch: int = 8
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


def _backsub_split(prep: Prepared, relaxes: List[Relax], sgns, betas, lam, bias, cut=None):
    """``bounds.backsub`` with the split constraints' terms ``beta * sgn`` added
    to the coefficients of each hidden pre-activation (``sgn`` -1 on units
    split active, +1 on units split inactive, 0 elsewhere). ``cut``: None, or
    ``(cuts, theta, unstable)`` (:class:`Cuts`, the rows' mixture logits ``(R, C)``, the first layer's
    units still unstable ``(H_1,)``): their upper relaxation is a mixture of the cuts (:func:`_cut_terms`)."""
    net = prep.net
    shapes, blocks = net.shapes, net.blocks
    for j in range(len(relaxes), 0, -1):
        r = relaxes[j - 1]
        pos, neg = jnp.maximum(lam, 0.0), jnp.minimum(lam, 0.0)
        extra = None
        if j == 1 and cut is not None:
            cuts, theta, unstable = cut
            negf = neg.reshape(neg.shape[0], -1)
            extra = _cut_terms(cuts, theta, jnp.where(unstable.reshape(-1)[None, :], negf, 0.0))
            neg = jnp.where(unstable, 0.0, neg)          # those units' upper side: the cuts, not the triangle
        bias = bias + jnp.sum((neg * r.tu).reshape(lam.shape[0], -1), axis=1)
        lam = pos * r.sl + neg * r.su + betas[j - 1] * sgns[j - 1]
        bias = bias + lam.reshape(lam.shape[0], -1) @ prep.consts[j - 1]
        lam = jax.vmap(block_transpose(blocks[j - 1], shapes[j - 1]))(lam)
        if extra is not None:
            lam = lam + extra[0].reshape(lam.shape)
            bias = bias + extra[1]
    return lam, bias


class Cuts(NamedTuple):
    """Upper bounds of first-layer ReLUs over the input box (Anderson et al. 2020, "Strong mixed-integer
    programming formulations for trained neural networks", eq. (3) / Prop. 12): for unit ``k`` with
    ``z_k = w . x + b`` on the box ``[L, U]`` (``L_i`` / ``U_i`` swapped where ``w_i < 0``: ``Lb``, ``Ub``) and a
    subset ``I`` of the inputs, ``relu(z_k) <= sum_{i in I} w_i (x_i - Lb_i (1 - t)) + (b + sum_{i not in I}
    w_i Ub_i) t`` for some ``t in [0, 1]``; ``I`` = all inputs and ``I`` empty are the big-M pair whose
    mixture with weights ``(s, 1 - s)``, ``s = u / (u - l)``, is the triangle (``t`` cancels). ``C`` cuts:
    ``unit (C,)`` (``H_1`` for padding), ``mat (C, D)`` the ``w_i`` on ``I`` (0 elsewhere), ``const (C,)``
    ``-sum_{i in I} w_i Lb_i``, ``kappa (C,)`` the coefficient of ``t``, ``theta0 (C,)`` starting mixture logits
    (the triangle's)."""

    unit: jax.Array
    mat: jax.Array
    const: jax.Array
    kappa: jax.Array
    theta0: jax.Array


def _cut_terms(cuts: Cuts, theta, negf):
    """``(d-coefficients (R, D), constants (R,))`` of ``sum_k neg_k relu(z_k)`` bounded below through each
    unit's cuts mixed by ``softmax(theta)`` over the unit's cuts: ``neg_k sum_c pi_c g_c(x, t_k)``, ``t_k in [0,
    1]`` minimised in closed form (``min(0, coefficient)``). ``negf (R, H_1)``: the rows' negative coefficients
    (0 where a unit uses its own relaxation). Sound for any ``theta``: each ``g_c`` bounds ``relu(z_k)``."""
    h1 = negf.shape[1]
    seg = cuts.unit

    def one(th, ng):
        mx = jax.ops.segment_max(th, seg, num_segments=h1 + 1)
        ex = jnp.exp(th - mx[seg])
        pi = ex / jax.ops.segment_sum(ex, seg, num_segments=h1 + 1)[seg]
        wt = jnp.concatenate([ng, jnp.zeros((1,), ng.dtype)])[seg] * pi          # (C,) <= 0
        tcoef = jax.ops.segment_sum(wt * cuts.kappa, seg, num_segments=h1 + 1)[:h1]
        return wt @ cuts.mat, wt @ cuts.const + jnp.sum(jnp.minimum(tcoef, 0.0))

    return jax.vmap(one)(theta, negf)


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


class Root(NamedTuple):
    """What every subdomain of one ball shares, computed once at the root (``L`` hidden layers, ``R`` rows).

    ``bounds``: CROWN's ``(l, u)`` of each hidden pre-activation on the ball; ``lam0 (R, *h_L)``, ``b0 (R,)``:
    the branched margin rows pulled back to the last hidden activation; ``root_lb (K,)``: CROWN's bound of
    every margin (``inf`` at ``y``); ``rest_min``: the lowest of them over the margins not branched on
    (``inf`` if none); ``rest_ok``: ``rest_min > 0``.
    """

    bounds: list
    lam0: jax.Array
    b0: jax.Array
    root_lb: jax.Array
    rest_min: jax.Array
    rest_ok: jax.Array
    cuts: "Cuts | None" = None


def _layer_rows(prep: Prepared, j: int, r=None):
    """``(lam (2R, *h_j), bias (2R,))``: hidden layer ``j``'s pre-activations of units ``r`` (all if None) as
    rows over the previous activation, lower rows then negated upper rows (``bounds._both``)."""
    jac, const = prep.jacs[j], prep.consts[j]
    if r is not None:
        jac, const = jac[r], const[r]
    return _both(jac, const)


def _tightened(prep: Prepared, x, eps, bcfg: BoundConfig, bounds, steps: int, lr: float = 0.1):
    """alpha-CROWN's bounds of the hidden pre-activations (Xu et al. 2021, "Fast and complete", section 3.1:
    the intermediate layers' slopes optimised for their own bounds), layer by layer from the second: the
    lower and upper bound of every unit of layer ``k`` is a back-substitution row with its own lower slopes
    of the ReLUs of layers ``1 .. k-1`` (started at CROWN's adaptive choice, at the bounds already tightened
    below ``k``), raised by ``steps`` Adam steps projected to ``[0, 1]``; the best bound of each row over the
    iterates is kept (every iterate is sound) and intersected with CROWN's ``bounds``. Rows of units that
    CROWN already shows stable are not optimised (their relaxation is exact). Layers without a dense
    matrix, and the second layer where ``nets.local`` bounds it, keep CROWN's bounds.

    Measured on boxes of the full-MNIST MLPs that ``verify`` leaves open (50 steps, ``benchmarks/
    verify_speed.py``'s models): on 784-256-256-10 (5 boxes) the second layer's unstable units went from
    91-199 to 90-196, its mean width 1-3% narrower; on 784-256x4-10 the last hidden layer's mean width was
    4-17% narrower, and on 8 boxes at eps 0.02-0.03, after 1,039 subdomains each, branch and bound's lower
    bound was 8-23% higher (e.g. -14.5 -> -12.4, -105 -> -86) for 0-14% more time (alone, 2 cores), with
    no box decided either way. Off by default (``verify`` does not use it): it decided nothing more."""
    out = [bounds[0]]
    for k in range(2, len(bounds) + 1):
        l0, u0 = bounds[k - 1]
        if prep.jacs[k - 1] is None or (k == 2 and prep.local):
            out.append((l0, u0))
            continue
        m = math.prod(l0.shape)
        unstable = jnp.concatenate([(l0 < 0) & (u0 > 0)] * 2, axis=None)
        lam, b = _layer_rows(prep, k - 1)
        base = [jnp.broadcast_to((u > -l).astype(jnp.float32), (2 * m,) + l.shape) for l, u in out]

        def lbs(a, lam=lam, b=b, k=k):
            rel = [relax(l, u, ai) for (l, u), ai in zip(out, a)]
            lm, bb = backsub(prep, rel, lam, b, k - 1)
            return concretize(lm, bb, x, eps, bcfg)[0]

        opt = optax.adam(lr)

        def objective(a, lbs=lbs, unstable=unstable):
            lb = lbs(a)
            return -jnp.sum(jnp.where(unstable, lb, 0.0)), lb

        def step(carry, _, objective=objective):
            a, st, best = carry      # one back-substitution per step: the bound at ``a`` and its gradient
            (_, lb), g = jax.value_and_grad(objective, has_aux=True)(a)
            upd, st = opt.update(g, st, a)
            a = [jnp.clip(ai + ui, 0.0, 1.0) for ai, ui in zip(a, upd)]
            return (a, st, jnp.maximum(best, lb)), None

        start = (base, opt.init(base), jnp.full((2 * m,), -jnp.inf))
        (a, _, best), _ = jax.lax.scan(step, start, None, length=steps)
        best = jnp.maximum(best, lbs(a))                   # the last iterate's bound
        l = jnp.maximum(l0.reshape(-1), best[:m]).reshape(l0.shape)
        u = jnp.minimum(u0.reshape(-1), -best[m:]).reshape(u0.shape)
        out.append((l, u))
    return out


def _root(prep: Prepared, x, y, eps, cfg: BaBConfig) -> Root:
    """CROWN on every margin of the ball (on alpha-CROWN's hidden bounds with ``cfg.tighten``); only the
    ``cfg.rows`` worst are branched on."""
    bcfg = dataclasses.replace(cfg.bound, method="crown")
    k_cls = prep.net.n_classes
    C = margin_spec(y, k_cls)
    other = jnp.arange(k_cls) != y
    bounds, relaxes = hidden_bounds(prep, x, eps, bcfg)
    if cfg.tighten > 0:
        bounds = _tightened(prep, x, eps, bcfg, bounds, cfg.tighten)
        relaxes = [relax(l, u) for l, u in bounds]
    lam_all, b_all = _spec_start(prep, C)
    full, fb = backsub(prep, relaxes, lam_all, b_all, len(relaxes))
    root_lb = jnp.where(other, concretize(full, fb, x, eps, bcfg)[0], jnp.inf)
    n_rows = min(cfg.rows, k_cls - 1)
    order = jnp.argsort(root_lb)
    kept, rest = order[:n_rows], order[n_rows:]
    rest_min = jnp.min(root_lb[rest], initial=jnp.inf)
    return Root(bounds, lam_all[kept], b_all[kept], root_lb, rest_min, rest_min > 0)


#: Largest ``H_1 x D`` (first hidden layer x input) for which :func:`_second_layer` keeps the first block's
#: dense matrix (16 MB in float32); a larger first layer pulls each split unit back through the block.
FIRST_JACOBIAN_MAX = 1 << 22


def _second_layer(prep: Prepared, root: Root, x, eps, bcfg: BoundConfig, r, n_splits: int):
    """``lb(s0) -> (2R,)``: CROWN's lower bounds of the second hidden layer's rows ``r`` (all units if None),
    lower rows then negated upper rows, on the subdomain whose first-layer split signs are ``s0 (H_1,)``
    (-1 active, +1 inactive, 0 free).

    On a subdomain the first layer's bounds are the root's (exact intervals) with split units clipped at 0,
    so its CROWN relaxation (``relax``) is the root's except at split units, which become exact (slope 1 or
    0, no intercept). The pull-back of row ``k`` through it is linear in the relaxation's slopes and
    intercepts, so with ``g_k`` the root's coefficients over the first layer's pre-activations,

        lam_k = A_root_k + sum_{i split} dg_ki J_i,    bias_k = b_root_k + sum_{i split} (neg_ki dtu_i + dg_ki c_i),

    ``A_root (2R, D)`` and ``b_root`` the root's pull-back (once per call, not per subdomain), ``J_i`` row
    ``i`` of the first block's linear map and ``c_i`` its bias, ``dg_ki = pos_ki dsl_i + neg_ki dsu_i``
    (``pos``/``neg`` the parts of the row's coefficient over unit ``i``, ``dsl``/``dsu``/``dtu`` the change of the
    lower slope, upper slope and upper intercept). The first ``n_splits`` split units (in index order) are corrected;
    any further ones keep the root's relaxation, which holds on the whole ball (sound)."""
    net = prep.net
    l0, u0 = root.bounds[0]
    h1 = math.prod(l0.shape)
    lam, bias = _layer_rows(prep, 1, r)
    rel0 = relax(l0, u0)
    a_root, b_root = backsub(prep, [rel0], lam, bias, 1)
    a_root = a_root.reshape(a_root.shape[0], -1)
    coef = lam.reshape(lam.shape[0], -1)                               # (2R, H_1)
    sl0, su0, tu0 = (v.reshape(-1) for v in rel0)
    c0 = prep.consts[0]
    d = math.prod(net.input_shape)
    if h1 * d <= FIRST_JACOBIAN_MAX:
        jac0 = block_jacobian(net.blocks[0], net.shapes[0], net.shapes[1]).reshape(h1, d)
        rows_of = lambda idx: jac0[idx]                               # noqa: E731
    else:
        pull = block_transpose(net.blocks[0], net.shapes[0])
        rows_of = lambda idx: jax.vmap(lambda i: pull(                # noqa: E731
            (jnp.arange(h1) == i).astype(jnp.float32).reshape(net.shapes[1])).reshape(-1))(idx)

    def lb(s0):
        s0 = s0.reshape(-1)
        (idx,) = jnp.nonzero(s0, size=n_splits, fill_value=0)
        sg = jnp.where(jnp.arange(n_splits) < jnp.count_nonzero(s0), s0[idx], 0).astype(jnp.float32)
        new = jnp.where(sg < 0, 1.0, 0.0)             # split active: slopes 1; inactive: 0; intercepts 0
        on = sg != 0
        dsl = jnp.where(on, new - sl0[idx], 0.0)
        dsu = jnp.where(on, new - su0[idx], 0.0)
        dtu = jnp.where(on, -tu0[idx], 0.0)
        cols = coef[:, idx]
        pos, neg = jnp.maximum(cols, 0.0), jnp.minimum(cols, 0.0)
        dg = pos * dsl + neg * dsu                                     # (2R, S)
        a = a_root + dg @ rows_of(idx)
        b = b_root + neg @ dtu + dg @ c0[idx]
        return concretize(a.reshape((a.shape[0],) + tuple(net.input_shape)), b, x, eps, bcfg)[0]

    return lb


def _n_optimised(root: Root) -> int:
    """How many leading entries of a subdomain's params Adam optimises: ``(alpha, beta[, theta])``; any
    after them are the inherited hidden bounds (``BaBConfig.refresh``)."""
    return 2 if root.cuts is None else 3


def _start_params(root: Root, cfg: BaBConfig):
    """The root subdomain's params: CROWN's adaptive slopes (at the root's bounds), no split multipliers, with
    ``root.cuts`` the cut mixtures' starting logits ``theta0``; with ``cfg.refresh``, also the root's hidden
    bounds of the layers after the first (a subdomain's, inherited by its children)."""
    n_rows = root.lam0.shape[0]
    alpha = [jnp.broadcast_to((u > -l).astype(jnp.float32), (n_rows,) + l.shape) for l, u in root.bounds]
    beta = [jnp.zeros((n_rows,) + l.shape, jnp.float32) for l, _ in root.bounds]
    opt_part = (alpha, beta) if root.cuts is None else (alpha, beta, jnp.broadcast_to(
        root.cuts.theta0, (n_rows,) + root.cuts.theta0.shape))
    if cfg.refresh > 0:
        return (*opt_part, [(l, u) for l, u in root.bounds[1:]])
    return opt_part


def _bounder(prep: Prepared, root: Root, x, eps, cfg: BaBConfig, rows=None):
    """``(bound_one, init_params, total, sub_bounds)``: the bound of one subdomain of ``root``'s ball (see the
    module doc), its starting ``(alpha, beta)`` (with ``root.cuts`` also the cut mixtures' logits ``theta (R,
    C)``, then with ``cfg.refresh`` also the root's hidden bounds of the
    layers after the first: ``bound_one`` returns the subdomain's in the same place), the number ``H`` of
    hidden units (the length of a subdomain's ``sgn``), and ``sub_bounds(sgn, inherited=None, fresh=True) ->
    (bounds, relaxations)``: the hidden bounds ``bound_one`` uses.

    ``rows``: None (every unit's bounds recomputed per subdomain), or per hidden layer None or an int32
    array of the flat units whose bounds are recomputed (the others keep the root's)."""
    bcfg = dataclasses.replace(cfg.bound, method="crown")
    bounds, lam0, b0 = root.bounds, root.lam0, root.b0
    n_rows = lam0.shape[0]
    sizes = [math.prod(l.shape) for l, _ in bounds]
    shapes = [l.shape for l, _ in bounds]
    offsets = [sum(sizes[:j]) for j in range(len(sizes))]
    total = sum(sizes)

    def layers(flat):
        return [flat[offsets[j]:offsets[j] + sizes[j]].reshape(shapes[j]) for j in range(len(sizes))]

    second = None
    if cfg.first_splits > 0 and len(bounds) >= 2 and prep.jacs[1] is not None:
        second = _second_layer(prep, root, x, eps, bcfg, None if rows is None else rows[1],
                               min(cfg.first_splits, sizes[0]))

    def sub_bounds(sgn, inherited=None, fresh=True):
        """Hidden bounds on a subdomain: each layer's bounds recomputed by CROWN
        through the earlier layers' split relaxations (where the layer has a
        dense matrix), intersected with the root's (or, given ``inherited``, the list of ``(l, u)`` of the
        layers after the first that the parent's subdomain had), split units clipped at 0. With ``fresh``
        false, the layers after the second are not recomputed: the inherited bounds, split units clipped."""
        out, rels = [], []
        for j, ((l, u), s) in enumerate(zip(bounds, layers(sgn))):
            if j >= 1 and inherited is not None:
                l, u = inherited[j - 1]
            if j >= 1 and prep.jacs[j] is not None and (fresh or j == 1):
                r = None if rows is None else rows[j]
                if j == 1 and second is not None:
                    lb = second(layers(sgn)[0])
                else:
                    lam, b = backsub(prep, rels, *_layer_rows(prep, j, r), j)
                    lb = concretize(lam, b, x, eps, bcfg)[0]
                half = lb.shape[0] // 2
                if r is None:
                    l = jnp.maximum(l, lb[:half].reshape(shapes[j]))
                    u = jnp.minimum(u, -lb[half:].reshape(shapes[j]))
                else:       # scatter-max / -min: a padded (repeated) index gets the same value twice
                    l = l.reshape(-1).at[r].max(lb[:half]).reshape(shapes[j])
                    u = u.reshape(-1).at[r].min(-lb[half:]).reshape(shapes[j])
            l, u = jnp.where(s < 0, jnp.maximum(l, 0.0), l), jnp.where(s > 0, jnp.minimum(u, 0.0), u)
            out.append((l, u))
            rels.append(relax(l, u))
        return out, rels

    n_opt = _n_optimised(root)

    def cut_of(params, sb, w=None):
        if root.cuts is None:
            return None
        theta = params[2] if w is None else params[2][w][None]
        return root.cuts, theta, (sb[0][0] < 0) & (sb[0][1] > 0)

    def spec_lb(params, sgn, sb):
        alphas, betas = params[:2]
        rel = [relax(l, u, jnp.clip(a, 0.0, 1.0)) for (l, u), a in zip(sb, alphas)]
        sg = [s.astype(jnp.float32) for s in layers(sgn)]
        lam, b = _backsub_split(prep, rel, sg, [jnp.maximum(bt, 0.0) for bt in betas], lam0, b0, cut_of(params, sb))
        return concretize(lam, b, x, eps, bcfg)[0]

    init_params = functools.partial(_start_params, root, cfg)

    def child_estimates(params, sgn, sb, units):
        """``(2, k)``: the lowest margin bound of the active (row 0) and inactive (row 1) child of a split on
        each of ``units (k,)``, with the parent's ``(alpha, beta)`` and hidden bounds, only the split unit's
        own bounds clipped (no later layer recomputed, no optimisation): cheap estimates for choosing."""
        lf = jnp.concatenate([l.reshape(-1) for l, _ in sb])
        uf = jnp.concatenate([u.reshape(-1) for _, u in sb])
        at = jnp.arange(total)

        def one(unit, side):
            hit = at == unit
            l2 = jnp.where(hit & (side < 0), jnp.maximum(lf, 0.0), lf)
            u2 = jnp.where(hit & (side > 0), jnp.minimum(uf, 0.0), uf)
            return jnp.min(spec_lb(params, sgn, list(zip(layers(l2), layers(u2)))))

        sides = jnp.array([-1, 1], jnp.int32)
        return jax.vmap(lambda s: jax.vmap(lambda i: one(i, s))(units))(sides)

    def choose(params, sgn, sb, rels, best):
        """The unit to split next (-1: none unstable): BaBSR's best, or with ``branching='fsb'`` the one of
        BaBSR's ``candidates`` best whose worse child's estimated bound is highest."""
        worst = jnp.argmin(best)
        scores = _scores(sb, _activation_coefficients(prep, rels, lam0[worst]))
        if cfg.branching == "fsb":
            k = min(cfg.candidates, total)
            top_s, top_i = jax.lax.top_k(scores, k)
            est = jnp.min(child_estimates(params, sgn, sb, top_i), axis=0)
            est = jnp.where(top_s > 0, jnp.where(jnp.isnan(est), -jnp.inf, est), -jnp.inf)
            pick = top_i[jnp.argmax(est)]       # the first (BaBSR's best) on a tie
        else:
            pick = jnp.argmax(scores)
        return jnp.where(jnp.max(scores) > 0, pick, -1).astype(jnp.int32)

    def primal_point(params, sgn, sb, best):
        """The point of the ball (flat, ``(D,)``) that minimises the linear lower bound of the subdomain's
        worst margin row: a candidate counterexample (on l_inf a vertex of the box; on l_2 ``x - eps lam /
        ||lam||`` clipped to the domain, still inside the ball). Any point of the ball that the model
        misclassifies refutes the whole ball, whichever subdomain proposed it."""
        alphas, betas = params[:2]
        w = jnp.argmin(best)
        rel = [relax(l, u, jnp.clip(a[w][None], 0.0, 1.0)) for (l, u), a in zip(sb, alphas)]
        sg = [s.astype(jnp.float32) for s in layers(sgn)]
        lam, _ = _backsub_split(prep, rel, sg, [jnp.maximum(bt[w][None], 0.0) for bt in betas],
                                lam0[w][None], b0[w][None], cut_of(params, sb, w))
        lam, xf = lam.reshape(-1), x.reshape(-1)
        if bcfg.norm == "linf":
            lo, hi = _box(xf, eps, bcfg)
            return jnp.where(lam > 0, lo, hi)
        p = xf - eps * lam / jnp.maximum(jnp.linalg.norm(lam), 1e-12)
        return p if bcfg.domain is None else jnp.clip(p, *bcfg.domain)

    def bound_one(sgn, params0, primal=False, fresh=True):
        """``(lowest margin bound, next unit to split or -1, optimised (alpha, beta[, theta]))``
        of one subdomain, its Adam run started at ``params0`` (the parent's); with ``primal``, also
        :func:`primal_point` of its optimised bound. With ``cfg.refresh``, ``params0`` also holds the
        parent's hidden bounds (intersected with the recomputed ones; with ``fresh`` false, only the second
        layer's are recomputed) and the result holds the subdomain's."""
        inherited = params0[n_opt] if cfg.refresh > 0 else None
        params0 = tuple(params0[:n_opt])
        sb, rels = sub_bounds(sgn, inherited, fresh)
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
            alphas, betas, *theta = optax.apply_updates(params, upd)
            params = ([jnp.clip(a, 0.0, 1.0) for a in alphas], [jnp.maximum(b, 0.0) for b in betas], *theta)
            return (params, st, jnp.maximum(best, lb), best_p), None

        best0 = jnp.full((n_rows,), -jnp.inf)
        carry = (params0, opt.init(params0), best0, params0)
        (params, _, best, best_p), _ = jax.lax.scan(step, carry, None, length=cfg.steps)
        last = spec_lb(params, sgn, sb)
        best_p = jax.tree_util.tree_map(lambda a, b: jnp.where(jnp.min(last) > jnp.min(best), a, b), params, best_p)
        best = jnp.maximum(best, last)
        lb = jnp.where(empty, jnp.inf, jnp.min(best))
        if cfg.refresh > 0:
            best_p = (*best_p, list(sb[1:]))
        if primal:
            return lb, choose(best_p, sgn, sb, rels, best), best_p, primal_point(best_p, sgn, sb, best)
        return lb, choose(best_p, sgn, sb, rels, best), best_p

    return bound_one, init_params, total, sub_bounds


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


def bab_config(bound: BoundConfig, budget: int, steps: int = 20, lr: float = 0.1, batch: int = 8,
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
    nearly full frontier overflowed: it failed, sound but needlessly.)"""
    batch = max(1, min(batch, budget // 2))
    if branching not in BRANCHING:
        raise ValueError(f"branching: expected one of {BRANCHING}, got {branching!r}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute: expected one of {RECOMPUTE}, got {recompute!r}")
    tighten = check_positive_int(tighten, "tighten", minimum=0)
    first_splits = check_positive_int(first_splits, "first_splits", minimum=0)
    refresh = check_positive_int(refresh, "refresh", minimum=0)
    cuts = check_positive_int(cuts, "cuts", minimum=0)
    second_cuts = check_positive_int(second_cuts, "second_cuts", minimum=0)
    return BaBConfig(bound=bound, batch=batch, budget=budget, capacity=budget + 2 * batch + 1, steps=steps, lr=lr,
                     branching=branching, candidates=max(1, int(candidates)), recompute=recompute,
                     tighten=tighten, first_splits=first_splits, refresh=refresh, cuts=cuts,
                     second_cuts=second_cuts)


bab_jit = jax.jit(_bab_program, static_argnames=("cfg", "batch"))


# ---------------------------------------------------------------------------------------------------------------
# one ball, driven from the host: a clock between batches, a frontier that grows as it needs


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
    in float32 (negative: a candidate counterexample). ``rows``: see :func:`_bounder`."""
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

#: An exact leaf counts as proven when the lower bound its LP's multipliers give exceeds this (logit units).
LEAF_TOL = 0.0


def _leaf_blocks(prep: Prepared):
    """Per hidden block, ``(jac (m, D_in), const (m,))`` in float64: the affine map :func:`_exact_leaf`
    composes (the dense linear part and ``prep.consts``). Built once per :func:`bab_search`, on its first
    exact leaf."""
    net = prep.net
    out = []
    for k in range(len(net.blocks) - 1):
        jac = np.asarray(block_jacobian(net.blocks[k], net.shapes[k], net.shapes[k + 1]), np.float64)
        out.append((jac.reshape(jac.shape[0], -1), np.asarray(prep.consts[k], np.float64).reshape(-1)))
    return out


def _exact_leaf(blocks, root: Root, leaf_bounds, x, eps, cfg: BaBConfig, sgn=None, time_limit: float = math.inf):
    """The exact smallest margin over a subdomain with no unstable unit left, by linear programming.

    On such a subdomain every hidden unit has one state (active where its bounds are ``l >= 0``, inactive
    where ``u <= 0``), so the network is affine there and the subdomain is the polytope of the l_inf box
    (clipped to the domain) where every pre-activation has its sign: ``min_x c_r . x + d_r`` over it, per
    branched margin row ``r`` (``root.lam0``, ``root.b0``), is an LP (HiGHS, float64 on the float32 weights).

    ``blocks``: :func:`_leaf_blocks` of the network. ``sgn``: the subdomain's split signs (a split unit takes
    its split's state, whatever its bounds say);
    ``time_limit``: seconds for all its LPs (HiGHS's own limit).

    ``value`` does not rest on HiGHS's tolerances: it is the Lagrangian bound of the LP's inequality
    multipliers ``mu >= 0`` (``res.ineqlin.marginals``), ``min_{x in box} (c + A^T mu) . x - mu . b + d``,
    a lower bound on the row's margin over the polytope for any ``mu >= 0`` (weak duality), equal to the LP's
    minimum at the optimal multipliers (float64 rounding apart).

    Returns ``(value, point)``: that lower bound of the smallest margin over the rows (or, as soon as one
    row's bound is not above ``LEAF_TOL``, that row's) and the LP's minimiser of that row (``(D,)`` float64,
    in the box); ``(inf, None)``
    when the polytope is empty (no point of the ball is in the subdomain); None when the LP is not
    available (not l_inf, a unit still unstable, HiGHS failed or ran out of time)."""
    from scipy.optimize import linprog

    if cfg.bound.norm != "linf":
        return None
    xf = np.asarray(x, np.float64).reshape(-1)
    lo, hi = xf - float(eps), xf + float(eps)
    if cfg.bound.domain is not None:
        lo, hi = np.clip(lo, *cfg.bound.domain), np.clip(hi, *cfg.bound.domain)
    a_mat, a_vec = np.eye(xf.size), np.zeros(xf.size)
    rows_a, rows_b = [], []
    t_end = time.perf_counter() + time_limit
    sizes = [math.prod(np.shape(l)) for l, _ in leaf_bounds]
    split = (np.zeros(sum(sizes), np.int8) if sgn is None else np.asarray(sgn).reshape(-1))
    for k, (l, u) in enumerate(leaf_bounds):
        l, u = np.asarray(l, np.float64).reshape(-1), np.asarray(u, np.float64).reshape(-1)
        s_k = split[sum(sizes[:k]):sum(sizes[:k + 1])]
        active = np.where(s_k < 0, True, np.where(s_k > 0, False, l >= 0))
        inactive = ~active & ((s_k > 0) | (u <= 0))
        if not np.all(active | inactive):
            return None
        jac, const = blocks[k]
        z_mat, z_vec = jac @ a_mat, jac @ a_vec + const
        sign = np.where(active, -1.0, 1.0)                 # active: -z <= 0; inactive: z <= 0
        rows_a.append(sign[:, None] * z_mat)
        rows_b.append(-sign * z_vec)
        a_mat, a_vec = z_mat * active[:, None], z_vec * active
    lam = np.asarray(root.lam0, np.float64).reshape(root.lam0.shape[0], -1)
    c_rows, d_rows = lam @ a_mat, lam @ a_vec + np.asarray(root.b0, np.float64)
    a_ub, b_ub = np.concatenate(rows_a), np.concatenate(rows_b)
    best, point = math.inf, None
    for c, d in zip(c_rows, d_rows):
        left = t_end - time.perf_counter()
        if not left > 0:
            return None
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=np.stack([lo, hi], 1), method="highs",
                      options={"time_limit": left})
        if res.status == 2:                                # infeasible: the subdomain holds no point
            return math.inf, None
        if res.status != 0:
            return None
        mu = np.maximum(-np.asarray(res.ineqlin.marginals, np.float64), 0.0)
        g = c + a_ub.T @ mu
        bound = float(np.sum(np.minimum(g * lo, g * hi)) - mu @ b_ub + d)
        if bound < best:
            best, point = bound, np.clip(res.x, lo, hi)
        if best <= LEAF_TOL:                               # not proven: this row's point is the candidate
            break
    return best, point


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


#: Starting mixture logit of a separated cut (the triangle's pair starts at ``log s``, ``log (1 - s)``).
CUT_THETA0 = -2.0


def _is_mlp(net) -> bool:
    """Whether ``net`` is an MLP: reshapes aside, Dense and ReLU alternating, Dense first and last (the
    networks :func:`bab_search` adds cuts to)."""
    from rcurves.nets.layers import Dense, ReLU, Reshape

    layers = [l for l in net.layers if not isinstance(l, Reshape)]
    return (len(layers) >= 3 and len(layers) % 2 == 1
            and all(isinstance(l, Dense if i % 2 == 0 else ReLU) for i, l in enumerate(layers)))


def _root_cuts(blocks, root: Root, x, eps, cfg: BaBConfig, time_limit: float = math.inf):
    """:class:`Cuts` for the first layer of an MLP: the LP of the triangle relaxation of every layer (the root's
    bounds) with the first layer in its big-M form (a variable ``t_k in [0, 1]`` per unstable unit), minimising
    the worst branched row, and ``cfg.cuts`` rounds of separation (Anderson et al. 2020, section 3.2: for the
    LP's point, per unit the subset ``I = {i: w_i (x_i - Lb_i (1 - t)) < w_i Ub_i t}`` gives the most violated
    cut of the family in linear time), each solved again with the violated cuts added (HiGHS through scipy).
    ``blocks``: :func:`_leaf_blocks` of the network (its hidden blocks' affine maps; :func:`bab_search` passes
    them only for MLPs on an l_inf ball). None where no first-layer unit is unstable."""
    import scipy.sparse as sps
    from scipy.optimize import linprog

    from rcurves.certify.cutting import cut_row, input_ends, separate

    t_end = _now() + time_limit
    lo, hi = (np.asarray(v, np.float64) for v in _box(jnp.asarray(x).reshape(-1), eps, cfg.bound))
    bnds = [(np.asarray(l, np.float64).reshape(-1), np.asarray(u, np.float64).reshape(-1)) for l, u in root.bounds]
    w1, b1 = blocks[0]
    l1, u1 = bnds[0]
    unst = np.flatnonzero((l1 < 0) & (u1 > 0))
    if unst.size == 0:
        return None
    D, sizes = w1.shape[1], [w.shape[0] for w, _ in blocks]
    off = [D + sum(sizes[:j]) for j in range(len(sizes))]          # a_j's first variable
    it = off[-1] + sizes[-1]                                        # the t variables
    nv = it + unst.size
    var_b = [(a, b) for a, b in zip(lo, hi)]
    for (l, u) in bnds:
        var_b += [(max(0.0, a), max(0.0, b)) for a, b in zip(l, u)]
    var_b += [(0.0, 1.0)] * unst.size
    rows, rhs, eqs, eq_rhs = [], [], [], []
    for j, ((w, b), (l, u)) in enumerate(zip(blocks, bnds)):
        src = np.arange(D) if j == 0 else off[j - 1] + np.arange(sizes[j - 1])
        for k in range(w.shape[0]):
            a = off[j] + k
            if l[k] >= 0:
                eqs.append((np.r_[a, src], np.r_[1.0, -w[k]])); eq_rhs.append(b[k])
            elif u[k] > 0:
                rows.append((np.r_[a, src], np.r_[-1.0, w[k]])); rhs.append(-b[k])          # a >= z
                if j == 0:
                    t = it + np.searchsorted(unst, k)                                        # big-M pair
                    rows.append((np.r_[a, src, t], np.r_[1.0, -w[k], -l[k]])); rhs.append(b[k] - l[k])
                    rows.append((np.r_[a, t], np.r_[1.0, -u[k]])); rhs.append(0.0)
                else:
                    s = u[k] / (u[k] - l[k])
                    rows.append((np.r_[a, src], np.r_[1.0, -s * w[k]])); rhs.append(s * (b[k] - l[k]))
    obj = np.zeros(nv)
    obj[off[-1]:off[-1] + sizes[-1]] = np.asarray(root.lam0[0], np.float64).reshape(-1)

    def mat(rs):
        r = np.concatenate([np.full(len(i), n) for n, (i, _) in enumerate(rs)])
        return sps.csr_matrix((np.concatenate([v for _, v in rs]), (r, np.concatenate([i for i, _ in rs]))),
                              shape=(len(rs), nv))

    a_eq = mat(eqs) if eqs else None
    lb_in, ub_in = input_ends(w1, lo, hi)                           # Lb, Ub per (unit, input)
    found = []                                                      # (unit, cut_row(...))
    for _ in range(cfg.cuts):
        if _now() >= t_end:
            break
        res = linprog(obj, A_ub=mat(rows), b_ub=np.array(rhs), A_eq=a_eq, b_eq=np.array(eq_rhs) if eqs else None,
                      bounds=var_b, method="highs", options={"time_limit": max(t_end - _now(), 0.01)})
        if res.status != 0:
            break
        xv = res.x
        sep = separate(w1[unst], b1[unst], lb_in[unst], ub_in[unst], xv[:D], xv[off[0] + unst], xv[it:it + unst.size])
        for n_, inside in sorted(zip(sep.units.tolist(), sep.inside), key=lambda p: p[0]):
            k = unst[n_]
            cut = cut_row(w1[k], b1[k], lb_in[k], ub_in[k], inside)
            idx = np.flatnonzero(inside)
            rows.append((np.r_[off[0] + k, idx, it + n_], np.r_[1.0, -cut[0][idx], -cut[1]]))
            rhs.append(cut[2])
            found.append((k, cut))
        if sep.units.size == 0:
            break
    # every unstable unit: I = all, I = empty (the triangle's pair), then the cuts found
    units, mats, consts, kaps, th = [], [], [], [], []
    def add(k, cut, theta):
        units.append(k)
        mats.append(cut[0])
        kaps.append(cut[1])
        consts.append(cut[2])
        th.append(theta)

    for k in unst:
        s = u1[k] / (u1[k] - l1[k])
        for inside, theta in ((True, math.log(max(s, 1e-6))), (False, math.log(max(1.0 - s, 1e-6)))):
            add(k, cut_row(w1[k], b1[k], lb_in[k], ub_in[k], np.full(D, inside)), theta)
    for k, cut in found:
        add(k, cut, CUT_THETA0)
    c = len(units)
    pad = -c % 64
    h1 = w1.shape[0]
    f32 = lambda v: jnp.asarray(np.asarray(v, np.float64), jnp.float32)      # noqa: E731
    return Cuts(jnp.asarray(np.r_[units, np.full(pad, h1)], jnp.int32), f32(np.r_[mats, np.zeros((pad, D))]),
                f32(np.r_[consts, np.zeros(pad)]), f32(np.r_[kaps, np.zeros(pad)]), f32(np.r_[th, np.zeros(pad)]))


#: Most of a search's time limit that :func:`_second_tightened`'s LPs may take (the units left keep CROWN's
#: bounds): on the 784-256-256-10 MLP of ``benchmarks/verify_speed.py`` the LPs took 3-7 s on boxes at l_inf
#: 0.02, 6-20 s at 0.03 and 16-24 s at 0.05.
SECOND_SHARE = 0.25

#: Subdomains a search bounds without :func:`_second_tightened`'s LP bounds before it starts again from the root
#: with them (``BaBConfig.second_cuts``): the proofs that branch on ``benchmarks/verify_speed.py``'s
#: 784-256-256-10 MLP took 3-32 subdomains (0.4-1.2 s) and one 478 without them, and paying the LPs first
#: made them 2.3-17 s. (Counted, not timed: a first compilation would end a timed phase.)
SECOND_AFTER = 512

#: :func:`_second_tightened`'s last results, by the digest of what they depend on: ``verify`` searches each
#: margin of a box on its own, and the margins' networks share the first two layers.
_SECOND_CACHE: dict = {}


def _outward(v: np.ndarray, down: bool) -> np.ndarray:
    """float64 ``v`` in float32, rounded down (``down``) or up: a bound that stays a bound."""
    f = v.astype(np.float32)
    step = np.nextafter(f, np.float32(-np.inf if down else np.inf))
    return np.where((f > v) if down else (f < v), step, f)


def _second_tightened(blocks, root: Root, x, eps, cfg: BaBConfig, time_limit: float):
    """``root.bounds`` with the second hidden layer's intersected with the LP bounds of
    :func:`rcurves.certify.cutting.second_layer_bounds` (``cfg.second_cuts`` rounds), rounded outward to
    float32; unchanged where HiGHS is missing or nothing is unstable. The units go in decreasing order of
    their triangle's gap weighted by the branched row's coefficient (``|lam0| (-l) u / (u - l)``), within
    :data:`SECOND_SHARE` of ``time_limit``. The result is kept for the next call on the same box and first two
    layers (:data:`_SECOND_CACHE`: the next margin of the box in ``verify``, which has less time left, so it
    would not get further)."""
    import hashlib

    from rcurves.certify.cutting import second_layer_bounds

    lo, hi = (np.asarray(v, np.float64) for v in _box(jnp.asarray(x).reshape(-1), eps, cfg.bound))
    l1, u1 = (np.asarray(v, np.float64).reshape(-1) for v in root.bounds[0])
    l2, u2 = (np.asarray(v, np.float32).reshape(-1) for v in root.bounds[1])
    parts = (*blocks[0], *blocks[1], lo, hi, l1, u1, l2, u2, np.asarray([cfg.second_cuts]))
    key = hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes() for a in parts)).hexdigest()
    got = _SECOND_CACHE.get(key)
    if got is None:
        gap = np.where((l2 < 0) & (u2 > 0), -l2.astype(np.float64) * u2 / np.maximum(u2 - l2, 1e-12), 0.0)
        weight = np.abs(np.asarray(root.lam0, np.float64)).reshape(root.lam0.shape[0], -1).max(axis=0) \
            if len(blocks) == 2 else np.ones_like(gap)
        res = second_layer_bounds(blocks, [(l1, u1), (l2, u2)], lo, hi, rounds=cfg.second_cuts,
                                  priority=weight * gap, time_limit=SECOND_SHARE * time_limit)
        if res is None:
            return root.bounds
        got = (np.maximum(l2, _outward(res.lower, True)), np.minimum(u2, _outward(res.upper, False)))
        _SECOND_CACHE.clear()
        _SECOND_CACHE[key] = got
    shape = root.bounds[1][0].shape
    return [root.bounds[0], (jnp.asarray(got[0].reshape(shape)), jnp.asarray(got[1].reshape(shape))),
            *root.bounds[2:]]


@exact_precision
def bab_search(net, x, y, eps, cfg: BaBConfig, *, time_limit: float = math.inf, check=None) -> SearchResult:
    """Branch and bound of one ball, driven from the host, for as long as ``time_limit`` and ``cfg.budget``
    allow.

    The same search as :func:`bab_certify_point` (alpha-beta-CROWN per subdomain, children warm-started
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
        (:func:`_exact_leaf`, within the time left). The bound (> ``LEAF_TOL``) where it proves it, 'falsified'
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


__all__ = ["BRANCHING", "BaBConfig", "Frontier", "SearchResult", "bab_certify_point", "bab_config", "bab_jit",
           "bab_search"]
