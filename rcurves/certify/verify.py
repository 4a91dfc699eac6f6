"""Decide a local robustness property over a per-input box: verified, falsified or unknown.

:func:`verify` answers "inside the box ``[x_lo, x_hi]``, does ``label`` stay
the argmax (over the classes ``others``)?" -- the property of a VNN-LIB file
(:func:`rcurves.certify.read_vnnlib`) -- in stages, each ending the search
when it decides:

1. **pgd** (falsify, cheap): PGD (``attacks.pgd``, ``ATTACK_RESTARTS``
   random restarts of ``ATTACK_STEPS`` steps, the logit-margin loss)
   maximises the best other class's margin inside the box;
2. **crown**: CROWN's lower bounds on the margins ``z_label - z_j``; all
   positive proves the property;
3. **the attacks** (falsify, before any branching): the adaptive default
   (``attacks.minimal_distance`` with its default schedule: targeted APGD
   lanes and FMN on models of four or more classes) and then, while at least
   ``ENSEMBLE_SHARE`` of the time limit is left, ``attacks.ensemble`` (its
   default members, about ``ENSEMBLE_GRADIENTS`` gradients), both on the
   reduced network's unit ball (below) with ``eps_max = 1``: any point they
   return lies in the box;
4. **bab**: branch and bound (``certify.bab.bab_search``: alpha-beta-CROWN on
   ReLU splits, filtered smart branching), by default one margin at a time
   (``per_margin``): each margin ``z_label - z_j`` that CROWN leaves
   unproven, the lowest first, gets a search of its own on the box (the
   property is proven when every margin is, each on a partition of the box
   of its own), until a margin is not proven, the time limit passes (read
   between steps: ``batch`` subdomains split, ``2 batch`` children bounded;
   ``"auto"`` by default, sized to the device) or ``budget`` subdomains have
   been bounded over all margins; the frontier lives on the device and grows
   as needed. Each search's root is alpha-CROWN (optimised slopes, no split
   yet): a proof with every margin proven there is reported as stage
   ``'crown'``. It ends 'unknown' when the time or the budget is out, or for
   good when a subdomain with no unstable ReLU left still has a bound that
   is not positive and its exact LP (the network is affine there:
   ``bab_lp._exact_leaf``) neither proves it nor gives a counterexample (with
   ``per_margin=False``, one joint search of all margins, also when more than ``bab.BaBConfig.rows`` (9) classes are in
   ``others`` and a margin outside the 9 it branches on is not proven by
   CROWN at the root). Every subdomain it bounds also proposes a
   counterexample, its *primal* point (the vertex of the box where its
   optimised linear bound of the (worst) margin is lowest, as
   alpha-beta-CROWN checks); those on which the searched margin (with
   ``per_margin=False``, some margin) is not positive are re-checked on the
   model over every class of ``others``, and the first one confirmed ends
   it 'falsified' (detail ``'bab'``).

Every candidate point of an attack, and the box's centre, is re-checked on
the *original* model in float32 (the ``logits_fn`` of an ONNX file, not the
certify network): a point inside the box on which some class of ``others``
scores at least as high as ``label`` is a counterexample (ties count, as in
VNN-LIB's ``(>= Y_j Y_label)``); nothing else is reported as falsified.

**The reduction to a ball.** The bounds of ``nets.bounds`` / ``certify.bab``
take a point, an l_inf radius and one scalar pair of input bounds. A box is
the image of the cube ``[-1, 1]^D`` under ``x = c + r * d`` with ``c = (lo +
hi) / 2``, ``r = (hi - lo) / 2``, so the property of the network ``f`` on the
box is the property of ``g(d) = f(c + r * d)`` on the l_inf ball of radius 1
around ``d = 0`` with input bounds ``(-1, 1)``. :func:`box_network` builds
``g`` as a certify :class:`~rcurves.certify.Network` over the flat ``d`` (in
C order of the network's ``input_shape``): the affine map is folded into the
first layer when that is ``Dense`` (``W diag(r)``, ``W c + b``), otherwise
prepended as a diagonal ``Dense`` (``D x D``) and a ``Reshape`` back to the
input shape. Inputs with ``r = 0`` (``lo == hi``, fixed pixels) are constants
of ``g``: their columns are zero. The logits are reduced the same way to
``(z_label, z_others...)`` (rows of the last ``Dense`` selected, or a
selection layer appended), so ``g``'s label is 0 and its margins are exactly
the property's. Folding is done in float64 and stored in float32 (the
verifiers' precision): ``g`` equals ``f(c + r d)`` up to float32 rounding, the
same caveat as every bound of the toolkit. The attacks run on the original
model through the same map (``d -> f(c + r d)``), not on ``g``.

**Layout.** ``x_lo`` and ``x_hi`` are in the toolkit's layout of the model's
input: ``input_shape`` of the network (``(H, W, C)`` for an image model,
NHWC), either of that shape or flattened in its C order. A VNN-LIB box is
flat in the order of the ONNX input, NCHW for image models: convert it with
``RobustnessProperty.box_nhwc((C, H, W))`` (or :func:`~rcurves.certify.to_nhwc`);
for one channel and for vector inputs (``(d,)``, ``(d, 1)``, ``(1, d)``, ...) the
two orders coincide, and an NHWC file's order is the toolkit's. The
counterexample comes back in the toolkit layout, shape ``input_shape``
(``from_nhwc`` gives the VNN-LIB order).

**Time.** ``time_limit`` is checked before each stage and, inside branch and
bound, before each batch of subdomains: ``seconds`` exceeds it by at most
one stage's or one batch's time (and a compilation that started before the
limit). Compilation counts: every program takes the network's arrays as
traced arguments, so it compiles once per architecture (and number of
classes in ``others``) in a process; on a busy 2-core machine, for the MLP
784-256-256-10: about 3 s for PGD, 2 s for CROWN, 7 s for the adaptive
search, 16 s for the ensemble and 7 s for branch and bound (two programs, one
for any budget; the per-margin search compiles them once for the network
reduced to one margin, whichever margin it is). ``RCURVES_JAX_CACHE=1``
keeps them on disk for the command line; a benchmark over many boxes of one model pays them once.
"""
from __future__ import annotations

import functools
import math
import os
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks import checks
from rcurves.nets.layers import Dense, Network, Reshape, network
from attacks.precision import exact_precision

#: PGD restarts and steps of the first, cheap falsify stage (one jitted program).
ATTACK_RESTARTS = 8
ATTACK_STEPS = 50
#: Gradients per point of ``attacks.ensemble``'s default members in the second falsify stage.
ENSEMBLE_GRADIENTS = 1000
#: The ensemble runs only while at least this share of ``time_limit`` is left (its first call on an
#: architecture compiles several programs: about 16 s for a 784-256-256-10 MLP on 2 busy cores).
ENSEMBLE_SHARE = 0.5
#: Adam steps on ``(alpha, beta)`` per subdomain in branch and bound (``bab.BaBConfig.steps``). The cost of a
#: subdomain is mostly its recomputed hidden bounds and the branching scores, so halving the steps from 20
#: buys more subdomains per second than it loses in bound quality: on four boxes of the full-MNIST
#: 784-256-256-10 MLP at l_inf 0.02-0.03 that CROWN leaves open (20 s each, alone on 2 cores), 10 steps
#: bounded 213-336 subdomains/s against 163-252 with 20, proved one box more (2 of 4), and needed 1,447
#: subdomains instead of 1,387 on the box both proved; 5 steps: 254-384/s, 1,639 subdomains there; batches
#: of 16 parents instead of 8 were slower.
BAB_STEPS = 10
#: ``bab.BaBConfig.batch`` of the searches: subdomains split per step, ``"auto"``: sized to the device
#: (``bab_batch``: 8 on a CPU, where larger batches were slower; up to 4,096 on a GPU or TPU, as its memory
#: allows), at most half the budget left.
BAB_BATCH = "auto"
#: Units filtered smart branching scores per subdomain in the per-margin search (``bab.BaBConfig.candidates``;
#: the joint search keeps its 8). With one margin row per subdomain a candidate's estimate costs a ninth of
#: the joint search's, and more candidates pay: on ``benchmarks/verify_speed.py``'s 784-256-256-10 MLP
#: (alone, 2 cores) the 27,160-subdomain per-margin proof at eps 0.05 took 11,582 subdomains and 9.7 s with
#: 16 (17.1 s with 8; 32: 16.2 s, 64: 21.2 s), and after 30 s the hardest margin's lower bound on three open
#: boxes was -0.46 / -0.53 / -2.37 with 16 against -0.92 / -1.51 (60 s) / -2.74 (60 s) with 8 (32: -0.19 /
#: -0.76 / -1.97; 64: -0.29 / -0.88 / -2.31).
BAB_CANDIDATES = 16
#: ``bab.BaBConfig.refresh`` of the searches on networks with more than two hidden layers: a subdomain's
#: bounds of the third and later hidden layers are recomputed every ``REFRESH`` splits and inherited from its
#: parent in between (on two hidden layers nothing is inherited: the second layer's recompute is cheap). On
#: ``benchmarks/verify_speed.py --layers 4``'s MLP (per-margin search, alone on 2 cores, 30 s per box): the
#: two proofs at eps 0.03 took 2,659 / 3,773 subdomains and 13.6 / 13.1 s with 2 / 4 against 2,857 and 18.6 s
#: recomputing every subdomain (177 subdomains and 3.0 s -> 185 / 317 and 2.0 / 1.7 s); on two open boxes
#: at eps 0.02 the lower bound after 30 s went from -1.13 / -7.75 to -0.96 / -7.58 (2) and -0.92 / -7.39 (4),
#: with 1.2x / 1.6x the subdomains per second; 8 was worse than 4 on all three (the proof: 7,275
#: subdomains, 23.1 s), and never recomputing (only the root's bounds) lost the proof (-4.0 after 30 s).
REFRESH = 4
#: ``bab.BaBConfig.cuts`` of the searches on networks with two hidden layers: rounds of separating Anderson
#: et al.'s cuts of the first layer from the root LP (HiGHS, about 0.6 s per round on 784-256-256-10). On
#: ``benchmarks/verify_speed.py``'s MLP (alone on 2 cores): the table went from 66 to 67 of 90 (eps 0.03
#: point 2 proven in 28.8 s), the long proof at eps 0.05 from 11,582 to 478 subdomains; on the worst margin
#: of five open boxes the bound after 30 s rose by 16-57% (e.g. -1.32 -> -0.57) at 0.66-1.07x the
#: subdomains per second; 2 and 4 rounds were no better than 1 (more cuts per subdomain). On 784-256x4-10
#: (four boxes) -9% to +23%: deeper networks do not use them (see ``docs/certify.md``).
CUTS = 1
#: ``bab.BaBConfig.second_cuts`` of the searches (MLPs of any depth): rounds of separating the first layer's
#: cuts for each bound of the second layer's unstable units, where a search is still open after
#: ``bab_host.SECOND_AFTER`` subdomains without (``certify.cutting.second_layer_bounds``). On
#: ``benchmarks/verify_speed.py``'s MLPs (alone on 2 cores): 784-256-256-10 from 67 to 69 of 90, both open
#: boxes at eps 0.02 proven (13.1 s and 37.1 s; one was open after 210 s before), eps 0.03 point 2 in 2,462
#: subdomains instead of 40,991; 784-256x4-10 from 13 to 16 of 30. The LPs cost 3-20 s per box (see
#: ``docs/certify.md``).
SECOND_CUTS = 2
#: Default and largest ``budget`` (subdomains bounded by branch and bound, over all margins). One margin's
#: subdomain holds about 9 bytes per hidden unit (4.6 kB for 512 units) and the frontier at most half the
#: subdomains bounded: the default's stays under 0.6 GB on the 784-256-256-10 MLP (its arrays double when
#: full: up to 1.2 GB allocated, twice that for a moment), which bounds about 1,500-
#: 2,200 subdomains per second on 2 cores (so the budget, 2^17 before, no longer ends a 60-s search first:
#: it did once in the 90 properties of ``benchmarks/verify_speed.py``, at 59.2 s).
DEFAULT_BUDGET = 2 ** 18
MAX_BUDGET = 2 ** 19
#: The words VNN-COMP answers with, per status.
RESULT_WORDS = {"verified": "holds", "falsified": "violated", "unknown": "unknown"}
STATUSES = tuple(RESULT_WORDS)
STAGES = ("attack", "crown", "bab")
_DOMAIN = (-1.0, 1.0)


class VerifyResult(NamedTuple):
    """The answer of :func:`verify`.

    Attributes:
      status: 'verified' (a proof: every margin's lower bound is positive on the whole box),
        'falsified' (``counterexample`` violates the property) or 'unknown'.
      counterexample: ``(*input_shape)`` float64, toolkit layout: a point inside ``[x_lo, x_hi]`` (exactly, in
        float64) on which the model, evaluated in float32 at ``counterexample.astype(float32)``, scores some
        class of ``others`` at least as high as ``label``; None unless falsified. Each entry is a float32
        number wherever its interval holds one, so the float32 model sees exactly this point; an interval
        holding none (``lo == hi == 0.1``) keeps its float64 value, which the model rounds by half an ulp.
      margin_lower: the best lower bound reached on ``m* = min_{x in box} min_{j in others} (z_label - z_j)``
        (so ``> 0`` when verified): the larger of CROWN's and branch and bound's (the root's alpha-CROWN
        bound, or the lowest bound over the subdomains that partition the box: those it proved and those
        left undecided; ``certify.bab.SearchResult.lower``), with ``per_margin`` per margin and then the
        lowest over the margins (CROWN's for a margin whose search never started); ``-inf`` when no bound
        was computed (falsified first) or a bound was NaN.
      margin_upper: the smallest margin ``min_j (z_label - z_j)`` evaluated at a point of the box (the
        centre, the attacks' points): an upper bound on ``m*``; ``<= 0`` when falsified.
      seconds: wall-clock time of the call (compilation included).
      subdomains: subdomains bounded by branch and bound, over all margins with ``per_margin`` (each search's
        root included; 0 if it did not run).
      stage: the stage that decided, or the last one that ran: 'attack', 'crown' or 'bab'.
      detail: falsified: the attack whose point is the counterexample ('centre', 'pgd', 'search' -- the
        adaptive default --, 'ensemble', or 'bab': a branch-and-bound subdomain's primal point); verified:
        'crown', 'alpha-crown' (branch and bound's root) or 'bab'; unknown: why it stopped -- 'time'
        (before or during any stage), 'budget', 'stuck' (a subdomain with no ReLU left to split that its
        exact LP does not decide), 'rows'
        (a margin branch and bound does not branch on), 'nan' (a NaN bound) or 'linear' (no hidden ReLU:
        CROWN's bound is exact and not positive, yet no attack found a counterexample).
    """

    status: str
    counterexample: Optional[np.ndarray]
    margin_lower: float
    margin_upper: float
    seconds: float
    subdomains: int
    stage: str
    detail: str = ""

    @property
    def result_word(self) -> str:
        """``holds`` / ``violated`` / ``unknown``: the VNN-COMP answer."""
        return RESULT_WORDS[self.status]


# ---------------------------------------------------------------------------------------------------------------
# the model: a certify network for the bounds, a logits function for the attack and the re-check


@functools.partial(jax.tree_util.register_dataclass, data_fields=["net"], meta_fields=[])
class _NetFn:
    """A :class:`Network` as a pytree callable ``x (n, *input_shape) -> (n, K)``."""

    def __init__(self, net: Network):
        self.net = net

    def __call__(self, x):
        return self.net.logits(x)


@functools.partial(jax.tree_util.register_dataclass, data_fields=["fn", "c", "r", "sel"], meta_fields=["shape"])
class _BoxFn:
    """``d (n, D) -> fn(reshape(c + r * d))[:, sel]``: the model on the box, as the attack sees it (a pytree
    callable: the model's arrays, ``c``, ``r`` and ``sel`` are traced, one program per architecture)."""

    def __init__(self, fn, c, r, sel, shape):
        self.fn, self.c, self.r, self.sel, self.shape = fn, c, r, sel, shape

    def __call__(self, d):
        x = self.c + self.r * d.reshape(d.shape[0], -1)
        return self.fn(x.reshape((d.shape[0],) + tuple(self.shape)))[:, self.sel]


def _model_parts(net_or_model: Any) -> Tuple[Network, Callable]:
    """``(certify network, logits function)`` of a Network, a LoadedModel or an .onnx path."""
    from rcurves.models.loaded import LoadedModel

    if isinstance(net_or_model, Network):
        return net_or_model, _NetFn(net_or_model)
    if isinstance(net_or_model, (str, os.PathLike)):
        path = os.fspath(net_or_model)
        if not path.endswith(".onnx"):
            raise ValueError(f"net_or_model: expected a path to an .onnx file, got {path!r}")
        if not os.path.isfile(path):
            raise ValueError(f"net_or_model: no such file {path!r}")
        from rcurves.models.onnx_reader import load_onnx

        net_or_model = load_onnx(path)
    if isinstance(net_or_model, LoadedModel):
        from rcurves.models.onnx_reader import OnnxFn

        if isinstance(net_or_model.logits_fn, OnnxFn):
            from rcurves.certify.onnx_layers import from_onnx

            return from_onnx(net_or_model), net_or_model.logits_fn
        if net_or_model.model is not None and net_or_model.params is not None:
            from rcurves.certify.convert import from_model

            return from_model(net_or_model.model, net_or_model.params), net_or_model.logits_fn
        raise ValueError(f"net_or_model: the LoadedModel {net_or_model.label!r} is neither an ONNX model "
                         f"(load_onnx) nor a toolkit model with its architecture and parameters")
    raise ValueError(f"net_or_model: expected an rcurves.certify.Network, a LoadedModel (load_onnx, zoo) or a "
                     f"path to an .onnx file, got {type(net_or_model).__name__}")


# ---------------------------------------------------------------------------------------------------------------
# the reduction


@exact_precision
def box_network(net: Network, x_lo: Any, x_hi: Any, label: int, others: Sequence[int]) -> Network:
    """The network ``g(d) = (z_label, z_others...)(c + r * d)`` on ``d in [-1, 1]^D`` (see the module doc).

    Args:
      net: the certify network ``f``.
      x_lo, x_hi: the box, ``D = prod(net.input_shape)`` values each in C order of ``net.input_shape``.
      label: the class that must stay on top; others: the classes it is compared against (sorted here).

    Returns:
      a :class:`Network` with ``input_shape (D,)`` and ``1 + len(others)`` outputs, output 0 being ``label``:
      ``g.logits(d) == f.logits(c + r d)[:, [label, *others]]`` up to float32 rounding.
    """
    from rcurves.certify.checks import check_net
    from rcurves.certify.vnnlib import _check_label, _check_others

    net = check_net(net)
    lo, hi = _check_box(x_lo, x_hi, tuple(net.input_shape))
    k, label = _check_label(label, net.n_classes)
    others = _check_others(others, label, k)
    c, r = (lo + hi) / 2.0, (hi - lo) / 2.0
    d = lo.size
    layers = list(net.layers)
    i = 0
    while i < len(layers) and isinstance(layers[i], Reshape):
        i += 1
    if i < len(layers) and isinstance(layers[i], Dense):
        # the input reshapes only flatten (C order): fold x = c + r d into the first Dense
        w, b = np.asarray(layers[i].w, np.float64), np.asarray(layers[i].b, np.float64)
        layers = [Dense(jnp.asarray(w * r[None, :], jnp.float32), jnp.asarray(w @ c + b, jnp.float32))]
        layers += list(net.layers[i + 1:])
    else:
        first = [Dense(jnp.asarray(np.diag(r), jnp.float32), jnp.asarray(c, jnp.float32))]
        if tuple(net.input_shape) != (d,):
            first.append(Reshape(tuple(net.input_shape)))
        layers = first + layers
    sel = np.asarray([label, *others], np.int64)
    if isinstance(layers[-1], Dense):
        last = layers[-1]
        layers[-1] = Dense(jnp.asarray(np.asarray(last.w)[sel]), jnp.asarray(np.asarray(last.b)[sel]))
    else:
        layers.append(Dense(jnp.asarray(np.eye(k, dtype=np.float32)[sel]), jnp.zeros(sel.size, jnp.float32)))
    return network(layers, (d,))


# ---------------------------------------------------------------------------------------------------------------
# checks (before anything is compiled)


def _check_box(x_lo: Any, x_hi: Any, shape: Tuple[int, ...]) -> Tuple[np.ndarray, np.ndarray]:
    d = math.prod(shape)
    out = []
    for name, v in (("x_lo", x_lo), ("x_hi", x_hi)):
        try:
            a = np.array(v, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected an array of numbers, got {type(v).__name__}") from None
        if a.shape not in (tuple(shape), (d,)):
            raise ValueError(f"{name}: expected shape {tuple(shape)} (the model's input, toolkit layout: NHWC for "
                             f"images) or ({d},) flattened in that order, got {a.shape}; a VNN-LIB box of an NCHW "
                             f"model is converted with RobustnessProperty.box_nhwc")
        if not np.isfinite(a).all():
            i = int(np.argmin(np.isfinite(a.reshape(-1))))
            raise ValueError(f"{name}: expected finite numbers, entry {i} is {a.reshape(-1)[i]}")
        out.append(a.reshape(-1))
    lo, hi = out
    bad = lo > hi
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"x_hi: below x_lo at input {i} ({hi[i]!r} < {lo[i]!r}); expected x_lo <= x_hi")
    return lo, hi


def _check_settings(time_limit: Any, budget: Any, seed: Any) -> Tuple[float, int, int]:
    try:
        t = float(time_limit)
    except (TypeError, ValueError):
        raise ValueError(f"time_limit: expected a positive number of seconds, got {time_limit!r}") from None
    if not t > 0:        # NaN too
        raise ValueError(f"time_limit: expected a positive number of seconds, got {time_limit!r}")
    budget = checks.check_positive_int(budget, "budget")
    if not 8 <= budget <= MAX_BUDGET:
        raise ValueError(f"budget: expected between 8 and {MAX_BUDGET} subdomains, got {budget}")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed: expected an integer, got {seed!r}")
    return t, budget, int(seed)


# ---------------------------------------------------------------------------------------------------------------
# stages


@jax.jit
@exact_precision
def _margins(fn, x, sel):
    """``min_j (z_label - z_j)`` over ``others`` for each point ``x (n, *shape)`` (``sel = [label, *others]``)."""
    z = fn(x)[:, sel]
    return z[:, 0] - jnp.max(z[:, 1:], axis=1)


def _into_box(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``x`` clipped to the box, each entry the nearest float32 number inside its interval where there is one
    (so that the float32 model sees exactly this point), else the clipped float64 value (an interval such as
    ``[0.1, 0.1]`` holds no float32 number)."""
    x = np.clip(x, lo, hi)
    x32 = x.astype(np.float32)
    below = x32.astype(np.float64) < lo
    x32[below] = np.nextafter(x32[below], np.float32(np.inf))
    above = x32.astype(np.float64) > hi
    x32[above] = np.nextafter(x32[above], np.float32(-np.inf))
    xd = x32.astype(np.float64)
    return np.where((xd >= lo) & (xd <= hi), xd, x)


def _boxed(fn, lo, hi, sel, shape) -> "_BoxFn":
    c, r = (lo + hi) / 2.0, (hi - lo) / 2.0
    return _BoxFn(fn, jnp.asarray(c, jnp.float32), jnp.asarray(r, jnp.float32), jnp.asarray(sel, jnp.int32),
                  tuple(shape))


def _recheck(fn, lo, hi, sel, shape, ds) -> Tuple[Optional[np.ndarray], float, int]:
    """The points ``c + r d`` of the unit-ball points ``ds (k, D)`` (clipped to ``[-1, 1]``), put inside the box
    and evaluated on the model in float32: ``(counterexample or None, smallest margin, its index)``."""
    c, r = (lo + hi) / 2.0, (hi - lo) / 2.0
    ds = np.clip(np.asarray(ds, np.float64).reshape(len(ds), -1), -1.0, 1.0)
    pts = np.stack([_into_box(c + r * d, lo, hi) for d in ds])
    xs = pts.astype(np.float32).reshape((len(pts),) + tuple(shape))
    m = np.asarray(_margins(fn, jnp.asarray(xs), jnp.asarray(sel, jnp.int32)), np.float64)
    if np.isnan(m).all():
        return None, math.nan, 0
    i = int(np.nanargmin(m))
    return (pts[i] if m[i] <= 0 else None), float(m[i]), i


def _pgd(fn, lo, hi, sel, shape, seed):
    """``(counterexample or None, smallest margin seen, 'centre' or 'pgd', the centre's margin is finite)``:
    the centre and PGD's point, re-checked."""
    import attacks

    d = lo.size
    d_adv = attacks.pgd(_boxed(fn, lo, hi, sel, shape), jnp.zeros((1, d), jnp.float32), jnp.zeros((1,), jnp.int32),
                        1.0, norm="linf", steps=ATTACK_STEPS, key=jax.random.PRNGKey(seed), bounds=_DOMAIN,
                        restarts=ATTACK_RESTARTS, loss="margin")
    ds = np.stack([np.zeros(d), np.asarray(d_adv, np.float64)[0]])
    cex, m, i = _recheck(fn, lo, hi, sel, shape, ds)
    centre = _recheck(fn, lo, hi, sel, shape, ds[:1])[1]
    return cex, m, ("centre", "pgd")[i], math.isfinite(centre)


def _search(fn, lo, hi, sel, shape, seed, ensemble: bool):
    """``(counterexample or None, margin at the attack's point)``: the adaptive default search
    (``attacks.minimal_distance``) or ``attacks.ensemble`` on the unit ball, its point re-checked."""
    import attacks

    d = lo.size
    boxed = _boxed(fn, lo, hi, sel, shape)
    kw = dict(norm="linf", bounds=_DOMAIN, eps_max=1.0)
    z, y = jnp.zeros((1, d), jnp.float32), jnp.zeros((1,), jnp.int32)
    if ensemble:
        members = attacks.default_attacks("linf", ENSEMBLE_GRADIENTS, n_classes=len(sel))
        res = attacks.ensemble(boxed, z, y, key=jax.random.fold_in(jax.random.PRNGKey(seed), 2), attacks=members,
                               **kw)
    else:
        res = attacks.minimal_distance(boxed, z, y, key=jax.random.fold_in(jax.random.PRNGKey(seed), 1), **kw)
    if not bool(np.asarray(res.success)[0]):
        return None, math.inf
    cex, m, _ = _recheck(fn, lo, hi, sel, shape, np.asarray(res.x_adv, np.float64))
    return cex, m


def _branch_and_bound(rnet: Network, deadline: float, budget: int, check=None, **kw):
    """Branch and bound of ``rnet`` (a :func:`box_network`) on its unit ball, label 0, until the ``deadline``
    (a ``time.perf_counter`` value) or ``budget`` subdomains: a ``certify.bab.SearchResult``. ``check``:
    ``bab_search``'s re-check of the subdomains' primal points (unit-ball points). ``kw``: more settings of
    ``certify.bab.bab_config`` (``branching``, ``candidates``, ``recompute``, ``refresh``, ``cuts``; default the
    module's: ``refresh`` :data:`REFRESH` on networks with more than two hidden layers, ``cuts`` :data:`CUTS` on
    the others, ``second_cuts`` :data:`SECOND_CUTS` on all, ``batch`` :data:`BAB_BATCH`)."""
    from rcurves.certify.bab_host import SearchResult, bab_search
    from rcurves.certify.bab_settings import bab_config
    from rcurves.nets.bounds import BoundConfig

    left = deadline - time.perf_counter()
    if not left > 0:
        return SearchResult(False, -math.inf, 0, False, "time", 0, 0)
    by_depth = {"refresh": REFRESH} if len(rnet.hidden_sizes) > 2 else {"cuts": CUTS}
    by_depth["second_cuts"] = SECOND_CUTS
    by_depth["batch"] = BAB_BATCH
    cfg = bab_config(BoundConfig(norm="linf", method="crown", domain=_DOMAIN), budget,
                     **{"steps": BAB_STEPS, **by_depth, **kw})
    return bab_search(rnet, jnp.zeros(rnet.input_shape, jnp.float32), 0, 1.0, cfg, time_limit=left, check=check)


class _PerMargin(NamedTuple):
    """What :func:`_per_margin` ends with: ``bb`` the last margin's ``certify.bab.SearchResult`` (the one
    that decided: falsified, not proven, or the last one proven), ``lower`` the lowest bound over every
    margin (branch and bound's where it ran, else CROWN's), ``bounded`` the subdomains over all margins,
    ``at_root`` every margin branched on was proven at its root (alpha-CROWN)."""

    bb: Any
    lower: float
    bounded: int
    at_root: bool


def _per_margin(net: Network, lo, hi, label: int, others: Sequence[int], crown, deadline: float, budget: int,
                check=None, **kw) -> _PerMargin:
    """Branch and bound of each margin ``z_label - z_j`` on its own, the margins that CROWN does not prove
    (``crown (len(others),)``, its bounds) from the lowest up, each on :func:`box_network` of ``(label, j)``,
    until one is not proven (its search falsified it, ran out of time or budget, or is stuck). ``budget``:
    subdomains over all margins (a margin's search starts only with at least 16 left, so that every search
    can split 8 parents per step; with ``batch="auto"`` the batch is a power of two, at most half the budget
    left, so that few programs compile). ``check``, ``kw``: as :func:`_branch_and_bound`; a margin's
    search offers ``check`` the primal points on which *its* margin is not positive in float32.

    The property is the conjunction over the margins, so it is proven when each margin is, each by a
    partition of the box of its own: a margin's search splits only where that margin's bound fails, and
    bounds one row per subdomain where the joint search bounds all of them (``BaBConfig.rows``) and refines
    every subdomain until its worst row is proven. On ``benchmarks/verify_speed.py``'s 784-256-256-10 MLP
    (boxes at l_inf 0.02-0.05, alone on 2 cores, ``BAB_CANDIDATES``): 1,350-2,000 subdomains/s against
    600-890 for the joint search (9 rows); the joint search's 19,121-subdomain proof (25.5-27.5 s) in 11,582
    subdomains over 8 margins and 8.4-9.7 s; on open boxes the searched margin's bound rises further than
    the joint search's lowest bound (-0.36 after 60 s against -0.98; -0.53 after 30 s against -2.18 after
    60 s), but none of the 24 boxes the joint search leaves open within 60 s is decided."""
    from rcurves.certify.bab_host import SearchResult

    crown = np.asarray(crown, np.float64)
    lower = np.where(np.isnan(crown), -np.inf, crown)
    bounded, at_root = 0, True
    bb = SearchResult(True, math.inf, 0, True, "verified", 0, 0)
    for j in np.argsort(crown, kind="stable"):               # NaN last; the hardest margin first
        if crown[j] > 0:
            continue
        if budget - bounded < 16:
            bb = SearchResult(False, -math.inf, 0, False, "budget", 0, 0)
            break
        rnet = box_network(net, lo, hi, label, [others[j]])
        bb = _branch_and_bound(rnet, deadline, budget - bounded, check, **{"candidates": BAB_CANDIDATES, **kw})
        bounded += bb.bounded
        lower[j] = max(lower[j], bb.lower)
        at_root = at_root and bb.at_root
        if not bb.verified:
            break
    return _PerMargin(bb, float(np.min(lower)) if lower.size else math.inf, bounded, at_root)


@exact_precision
def verify(
    net_or_model: Any,
    x_lo: Any,
    x_hi: Any,
    label: Any,
    *,
    others: Optional[Sequence[int]] = None,
    time_limit: float = 60.0,
    budget: int = DEFAULT_BUDGET,
    seed: int = 0,
    per_margin: bool = True,
    batch: Any = BAB_BATCH,
) -> VerifyResult:
    """Decide "inside ``[x_lo, x_hi]``, ``label`` scores above every class of ``others``".

    Args:
      net_or_model: a certify :class:`~rcurves.certify.Network`, a :class:`~rcurves.models.LoadedModel` (of
        an ONNX file, ``load_onnx``, or a toolkit model with ``model`` and ``params``), or a path to an
        ``.onnx`` file. The bounds run on its certify network (``from_onnx`` / ``from_model``), the attack
        and the re-check on its ``logits_fn``.
      x_lo, x_hi: the box, in the toolkit layout of the model's input (see the module doc): shape
        ``input_shape`` or ``(prod(input_shape),)``; finite, ``x_lo <= x_hi`` (equal entries fix an input).
      label: the class that must stay on top.
      others: the classes compared with ``label`` (default: all others, "label stays the argmax").
      time_limit: seconds (``inf`` for none); checked between stages and between branch-and-bound batches.
      budget: most subdomains bounded by branch and bound over all margins (at most ``budget + 15``),
        between 8 and ``MAX_BUDGET``. It caps the memory (the undecided subdomains, each with its split
        signs and optimised slopes and multipliers: about ``2 * 4`` bytes per hidden unit per margin row
        and one for the sign, 4.6 kB for 512 units; with ``per_margin=False``, 9 rows: 37 kB; on networks
        with more than two hidden layers also 8 bytes per unit after the first layer, :data:`REFRESH`),
        not the time per subdomain: the frontier grows as needed.
      per_margin: branch and bound on each unproven margin on its own (True, the default), or one joint
        search of all of them (``bab.BaBConfig.rows``: a subdomain is split until its worst margin is
        proven). See :func:`_per_margin` for what each costs.
      seed: the attacks' random starts.
      batch: subdomains branch and bound splits per step (``2 batch`` children bounded at once): a positive
        integer, or ``"auto"`` (the default, :data:`BAB_BATCH`): sized to the device, from XLA's memory
        analysis of the compiled bound step and a per-platform cap (``certify.bab_batch``: 8 on a CPU, up to
        4,096 on a GPU or TPU); at most half the budget left. It changes the speed and the order of a
        search, not its subdomains: a completed proof splits the same ones whatever the batch (a search cut
        short by the clock or the budget stops elsewhere).

    Returns:
      :class:`VerifyResult`. A 'verified' answer is a proof (up to float32 rounding in the bound
      computation, as every bound of ``rcurves.certify``); a 'falsified' one carries its re-checked
      counterexample.

    Raises:
      ValueError: naming the argument (model, box shapes, ``x_lo > x_hi``, label, others, time_limit,
        budget, seed, per_margin, batch), before any compilation; or the ONNX reader's / converter's error naming
        the node.

    Example::

        prop = certify.read_vnnlib("prop.vnnlib")
        m = rcurves.models.load_onnx("model.onnx")              # NCHW (1, 28, 28) input
        lo, hi = prop.box_nhwc((1, 28, 28))                     # to the toolkit's (28, 28, 1)
        res = certify.verify(m, lo, hi, prop.label, others=prop.others, time_limit=60)
        print(res.result_word, f"{res.seconds:.2f}s")           # holds 3.21s
    """
    from rcurves.certify.vnnlib import _check_label, _check_others

    t_start = time.perf_counter()
    time_limit, budget, seed = _check_settings(time_limit, budget, seed)
    if not isinstance(per_margin, (bool, np.bool_)):
        raise ValueError(f"per_margin: expected True or False, got {per_margin!r}")
    from rcurves.certify.bab_settings import check_batch

    batch = check_batch(batch)
    net, fn = _model_parts(net_or_model)
    shape = tuple(net.input_shape)
    lo, hi = _check_box(x_lo, x_hi, shape)
    k, label = _check_label(label, net.n_classes)
    others = tuple(j for j in range(k) if j != label) if others is None else _check_others(others, label, k)
    deadline = t_start + time_limit
    sel = np.asarray([label, *others], np.int64)

    def result(status, stage, detail, cex=None, lower=-math.inf, upper=math.inf, subdomains=0):
        cex = None if cex is None else np.asarray(cex, np.float64).reshape(shape)
        return VerifyResult(status, cex, float(lower), float(upper), time.perf_counter() - t_start,
                            int(subdomains), stage, detail)

    # 1. falsify, cheaply: the centre and PGD
    cex, upper, found, finite = _pgd(fn, lo, hi, sel, shape, seed)
    if cex is not None:
        return result("falsified", "attack", found, cex, upper=upper)
    if time.perf_counter() >= deadline:
        return result("unknown", "attack", "time", upper=upper)

    # 2. CROWN on the box, as the unit ball of the reduced network
    from rcurves.certify.radius import margin_bounds

    rnet = box_network(net, lo, hi, label, others)
    lb = np.asarray(margin_bounds(rnet, np.zeros((1, lo.size), np.float32), np.zeros(1, np.int32), 1.0,
                                  norm="linf", method="crown", bounds=_DOMAIN))[0, 1:]
    lower = float(np.min(lb)) if not np.isnan(lb).any() else -math.inf
    if lower > 0:
        return result("verified", "crown", "crown", lower=lower, upper=upper)

    # 3. falsify with the attacks before any branching: the adaptive default, then the ensemble
    if finite:                                    # (NaN logits at the centre: the attacks refuse them)
        for name in ("search", "ensemble"):
            left = deadline - time.perf_counter()
            if left <= 0 or (name == "ensemble" and left < ENSEMBLE_SHARE * time_limit):
                break
            cex, m = _search(fn, lo, hi, sel, shape, seed, name == "ensemble")
            upper = min(upper, m)
            if cex is not None:
                return result("falsified", "attack", name, cex, lower=lower, upper=upper)
    if time.perf_counter() >= deadline:
        return result("unknown", "crown", "time", lower=lower, upper=upper)
    if not rnet.hidden_sizes:                     # nothing to split: CROWN is exact
        return result("unknown", "crown", "linear", lower=lower, upper=upper)

    # 4. branch and bound; each subdomain's primal point re-checked on the model as a counterexample
    confirmed = []

    def check(ds):
        cex, m, i = _recheck(fn, lo, hi, sel, shape, ds)
        if cex is None:
            return None
        confirmed.append((cex, m))
        return i

    if per_margin:
        bb, bab_lower, n_sub, at_root = _per_margin(net, lo, hi, label, others, lb, deadline, budget, check,
                                                    batch=batch)
    else:
        bb = _branch_and_bound(rnet, deadline, budget, check, batch=batch)
        bab_lower, n_sub, at_root = bb.lower, bb.bounded, bb.at_root
    if bb.reason == "falsified" and confirmed:
        cex, m = confirmed[-1]
        return result("falsified", "bab", "bab", cex, lower=lower, upper=min(upper, m), subdomains=n_sub)
    lower = max(lower, bab_lower)
    if bb.verified:
        return result("verified", "crown" if at_root else "bab", "alpha-crown" if at_root else "bab",
                      lower=lower, upper=upper, subdomains=n_sub)
    return result("unknown", "bab", bb.reason, lower=lower, upper=upper, subdomains=n_sub)


__all__ = ["ATTACK_RESTARTS", "ATTACK_STEPS", "BAB_CANDIDATES", "BAB_STEPS", "CUTS", "DEFAULT_BUDGET", "REFRESH",
           "ENSEMBLE_GRADIENTS", "ENSEMBLE_SHARE", "MAX_BUDGET", "RESULT_WORDS", "SECOND_CUTS", "STAGES", "STATUSES", "VerifyResult",
           "box_network", "verify"]
