"""Decide a local robustness property over a per-input box: verified, falsified or unknown.

:func:`verify` answers "inside the box ``[x_lo, x_hi]``, does ``label`` stay
the argmax (over the classes ``others``)?" -- the property of a VNN-LIB file
(:func:`rcurves.certify.read_vnnlib`) -- in three stages, each ending the
search when it decides:

1. **attack** (falsify): PGD (``attacks.pgd``, ``ATTACK_RESTARTS`` random
   restarts of ``ATTACK_STEPS`` steps, the logit-margin loss) maximises the
   best other class's margin inside the box; its point and the box's centre
   are re-checked on the *original* model in float32 (the ``logits_fn`` of an
   ONNX file, not the certify network): a point inside the box on which some
   class of ``others`` scores at least as high as ``label`` is a
   counterexample (ties count, as in VNN-LIB's ``(>= Y_j Y_label)``);
2. **crown**: CROWN's lower bounds on the margins ``z_label - z_j``; all
   positive proves the property;
3. **bab**: branch and bound (``certify.bab``: alpha-beta-CROWN on ReLU
   splits) in rounds of growing subdomain budgets, ``FIRST_BUDGET`` then
   ``GROWTH`` times more each round up to ``budget`` (256, 2048, 16384 by
   default); each round is one jitted program and goes on from the undecided
   subdomains the previous round left (its frontier, copied into the larger
   one), so a round repeats only the bounding of those. The root of the
   first round is alpha-CROWN (optimised slopes, no split yet): a proof
   there is reported as stage ``'crown'``. The search ends 'unknown' when
   the time is out, the last budget is spent, or branch and bound fails for
   good: a subdomain with no unstable ReLU left whose bound is still not
   positive, or, with more than ``bab.BaBConfig.rows`` (9) classes in
   ``others``, a margin outside the 9 it branches on that CROWN does not
   prove at the root.

**The reduction to a ball.** The bounds of ``certify.bounds`` / ``certify.bab``
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
same caveat as every bound of the toolkit.

**Layout.** ``x_lo`` and ``x_hi`` are in the toolkit's layout of the model's
input: ``input_shape`` of the network (``(H, W, C)`` for an image model,
NHWC), either of that shape or flattened in its C order. A VNN-LIB box is
flat in the order of the ONNX input, NCHW for image models: convert it with
``RobustnessProperty.box_nhwc((C, H, W))`` (or :func:`~rcurves.certify.to_nhwc`);
for one channel and for vector inputs the two orders coincide. The
counterexample comes back in the toolkit layout, shape ``input_shape``
(``from_nhwc`` gives the VNN-LIB order).

**Time.** ``time_limit`` is checked before each stage and between the rounds
of branch and bound: a later round starts only when its predicted time (the
previous round's compile time plus its run time scaled by the budget ratio)
fits in what is left. ``certify.bab`` has no clock of its own, so the first
round starts whenever any time is left, and a round, once started, runs to
its budget: ``seconds`` may exceed ``time_limit`` by about one round.
Compilation counts: every program takes the network's arrays as traced
arguments, so it compiles once per architecture and round size (4-8-8-3 MLP
on a busy 2-core machine: about 3 s for the attack, 1.5 s for CROWN, 7-8 s
per branch-and-bound round size; 784-64-64-10: about 8 s per round size),
and a fresh process compiles again (``RCURVES_JAX_CACHE=1`` keeps them on
disk for the command line).
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
from rcurves.certify.layers import Dense, Network, Reshape, network

#: PGD restarts and steps of the falsify stage (one jitted program).
ATTACK_RESTARTS = 8
ATTACK_STEPS = 50
#: Subdomains of the first branch-and-bound round, and the factor between rounds.
FIRST_BUDGET = 256
GROWTH = 8
#: Default and largest ``budget`` (subdomains bounded in the last round).
DEFAULT_BUDGET = 16384
MAX_BUDGET = 2 ** 16
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
      margin_lower: the best lower bound reached on ``min_{x in box} min_{j in others} (z_label - z_j)``;
        CROWN's (``> 0``) when CROWN proved it, ``0.0`` when branch and bound did (alpha-CROWN at its root,
        stage 'crown', included: every subdomain's bound was positive, their minimum is not kept), ``-inf``
        when no bound was computed (falsified first).
      margin_upper: the smallest margin ``min_j (z_label - z_j)`` evaluated at a point of the box (the
        centre, the attack's point): an upper bound on that minimum; ``<= 0`` when falsified.
      seconds: wall-clock time of the call (compilation included).
      subdomains: subdomains bounded by branch and bound (0 if it did not run).
      stage: the stage that decided, or the last one that ran: 'attack', 'crown' or 'bab'.
    """

    status: str
    counterexample: Optional[np.ndarray]
    margin_lower: float
    margin_upper: float
    seconds: float
    subdomains: int
    stage: str

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
    from rcurves.models.loader import LoadedModel

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
            from rcurves.certify.layers import from_model

            return from_model(net_or_model.model, net_or_model.params), net_or_model.logits_fn
        raise ValueError(f"net_or_model: the LoadedModel {net_or_model.label!r} is neither an ONNX model "
                         f"(load_onnx) nor a toolkit model with its architecture and parameters")
    raise ValueError(f"net_or_model: expected an rcurves.certify.Network, a LoadedModel (load_onnx, zoo) or a "
                     f"path to an .onnx file, got {type(net_or_model).__name__}")


# ---------------------------------------------------------------------------------------------------------------
# the reduction


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


def _falsify(fn, lo, hi, sel, shape, seed):
    """``(counterexample or None, smallest margin seen)``: the centre and PGD's point, re-checked."""
    import attacks

    c, r = (lo + hi) / 2.0, (hi - lo) / 2.0
    d = lo.size
    boxed = _BoxFn(fn, jnp.asarray(c, jnp.float32), jnp.asarray(r, jnp.float32), jnp.asarray(sel, jnp.int32),
                   tuple(shape))
    d_adv = attacks.pgd(boxed, jnp.zeros((1, d), jnp.float32), jnp.zeros((1,), jnp.int32), 1.0, norm="linf",
                        steps=ATTACK_STEPS, key=jax.random.PRNGKey(seed), bounds=_DOMAIN,
                        restarts=ATTACK_RESTARTS, loss="margin")
    d_adv = np.clip(np.asarray(d_adv, np.float64).reshape(-1), -1.0, 1.0)
    pts = np.stack([_into_box(p, lo, hi) for p in (c, c + r * d_adv)])
    xs = pts.astype(np.float32).reshape((len(pts),) + tuple(shape))
    m = np.asarray(_margins(fn, jnp.asarray(xs), jnp.asarray(sel, jnp.int32)), np.float64)
    i = int(np.argmin(m))
    return (pts[i] if m[i] <= 0 else None), float(m[i])


@functools.partial(jax.jit, static_argnames=("cfg",))
def _bab_round(net: Network, prev, *, cfg):
    """One branch and bound of ``net`` on the ball of radius 1 around 0 (label 0), from ``prev``'s frontier."""
    from rcurves.certify.bab import bab_certify_point
    from rcurves.certify.bounds import prepare

    prep = prepare(net, cfg.bound)
    x = jnp.zeros(net.input_shape, jnp.float32)
    return bab_certify_point(prep, x, jnp.int32(0), jnp.float32(1.0), cfg, prev, prev is not None)


def _widen(f, slots: int):
    """The frontier ``f`` in ``slots`` slots (the new ones empty), for a round with a larger budget."""
    k = slots - f.lb.shape[0]
    if k <= 0:
        return f

    def pad(a, v):
        return jnp.concatenate([a, jnp.full((k,) + a.shape[1:], v, a.dtype)])

    return f._replace(sgn=pad(f.sgn, 0), lb=pad(f.lb, jnp.inf), nxt=pad(f.nxt, -1), alive=pad(f.alive, False),
                      params=jax.tree_util.tree_map(lambda a: pad(a, 0), f.params), stale=pad(f.stale, False))


def _schedule(budget: int) -> Tuple[int, ...]:
    out = [min(FIRST_BUDGET, budget)]
    while out[-1] < budget:
        out.append(min(out[-1] * GROWTH, budget))
    return tuple(out)


def _branch_and_bound(rnet: Network, deadline: float, budget: int):
    """Branch and bound of ``rnet`` (a :func:`box_network`) in the rounds of :func:`_schedule` that fit the
    ``deadline`` (a ``time.perf_counter`` value): ``(verified, margin lower bound or -inf, subdomains bounded,
    verified at the root of the first round)``."""
    from rcurves.certify.bab import bab_config
    from rcurves.certify.bounds import BoundConfig

    bound = BoundConfig(norm="linf", method="crown", domain=_DOMAIN)
    prev, best, total = None, -math.inf, 0
    last = None                                  # (budget, compile seconds, run seconds) of the last round
    n_rows = rnet.n_classes - 1
    for b in _schedule(budget):
        now = time.perf_counter()
        if now >= deadline:
            break
        if last is not None and now + last[1] + last[2] * b / last[0] > deadline:
            break
        cfg = bab_config(bound, b)
        start = None if prev is None else _widen(prev, cfg.capacity)
        t0 = time.perf_counter()
        program = _bab_round.lower(rnet, start, cfg=cfg).compile()
        t1 = time.perf_counter()
        ok, m, n, f = jax.block_until_ready(program(rnet, start))
        t2 = time.perf_counter()
        last = (b, t1 - t0, t2 - t1)
        total += int(n)
        if bool(ok):
            return True, 0.0, total, int(n) == 1 and prev is None
        failed, whole, m = bool(f.failed), bool(f.whole), float(m)
        if not failed and whole and n_rows <= cfg.rows and not math.isnan(m):
            best = max(best, m)               # the lowest bound over the undecided subdomains: a global one
        if failed:                            # no split left where a bound fails, or margins it does not branch on
            break
        prev = f
    return False, best, total, False


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
      time_limit: seconds (``inf`` for none); checked between stages and branch-and-bound rounds.
      budget: most subdomains bounded by the last branch-and-bound round (rounds of ``FIRST_BUDGET``,
        ``GROWTH`` times more each, up to this), between 8 and ``MAX_BUDGET``.
      seed: the attack's random starts.

    Returns:
      :class:`VerifyResult`. A 'verified' answer is a proof (up to float32 rounding in the bound
      computation, as every bound of ``rcurves.certify``); a 'falsified' one carries its re-checked
      counterexample.

    Raises:
      ValueError: naming the argument (model, box shapes, ``x_lo > x_hi``, label, others, time_limit,
        budget, seed), before any compilation; or the ONNX reader's / converter's error naming the node.

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
    net, fn = _model_parts(net_or_model)
    shape = tuple(net.input_shape)
    lo, hi = _check_box(x_lo, x_hi, shape)
    k, label = _check_label(label, net.n_classes)
    others = tuple(j for j in range(k) if j != label) if others is None else _check_others(others, label, k)
    deadline = t_start + time_limit
    sel = np.asarray([label, *others], np.int64)

    def result(status, stage, cex=None, lower=-math.inf, upper=math.inf, subdomains=0):
        cex = None if cex is None else np.asarray(cex, np.float64).reshape(shape)
        return VerifyResult(status, cex, float(lower), float(upper), time.perf_counter() - t_start,
                            int(subdomains), stage)

    # 1. falsify
    cex, upper = _falsify(fn, lo, hi, sel, shape, seed)
    if cex is not None:
        return result("falsified", "attack", cex, upper=upper)
    if time.perf_counter() >= deadline:
        return result("unknown", "attack", upper=upper)

    # 2. CROWN on the box, as the unit ball of the reduced network
    from rcurves.certify.radius import margin_bounds

    rnet = box_network(net, lo, hi, label, others)
    lb = np.asarray(margin_bounds(rnet, np.zeros((1, lo.size), np.float32), np.zeros(1, np.int32), 1.0,
                                  norm="linf", method="crown", bounds=_DOMAIN))[0, 1:]
    lower = float(np.min(lb)) if not np.isnan(lb).any() else -math.inf
    if lower > 0:
        return result("verified", "crown", lower=lower, upper=upper)
    if not rnet.hidden_sizes or time.perf_counter() >= deadline:   # nothing to split (CROWN is exact), or no time
        return result("unknown", "crown", lower=lower, upper=upper)

    # 3. branch and bound in growing rounds
    ok, m, n, at_root = _branch_and_bound(rnet, deadline, budget)
    if ok:
        return result("verified", "crown" if at_root else "bab", lower=max(lower, 0.0), upper=upper, subdomains=n)
    return result("unknown", "bab", lower=max(lower, m), upper=upper, subdomains=n)


__all__ = ["ATTACK_RESTARTS", "ATTACK_STEPS", "DEFAULT_BUDGET", "FIRST_BUDGET", "GROWTH", "MAX_BUDGET",
           "RESULT_WORDS", "STAGES", "STATUSES", "VerifyResult", "box_network", "verify"]
