"""How the attack programs are jitted: ``jax.jit`` plus XLA options that suit them.

Every attack is one XLA program whose steps are a model gradient plus a few
per-point reductions (norms of perturbations and gradients) and elementwise
updates. Two defaults of the XLA:CPU in jaxlib 0.10 cost those reductions more
than the rest of the bookkeeping together (measured on this project's 2-core
machine, ``benchmarks/attack_overhead.py``):

* reductions are handed to YNNPACK, where a per-row reduction of a
  ``(256, 784)`` batch takes about ten times as long as XLA's own loop (1.5 ms
  vs 0.11-0.17 ms per call; a known regression, jax-ml/jax#37465, whose
  suggested workaround is ``--xla_cpu_experimental_ynn_fusion_type=-reduce``);
* the ``tree_reduction_rewriter`` pass splits every reduction longer than 32
  elements into a reduce-window plus a second reduce (for float accuracy), and
  the reduce-window cannot take its producer in: each l_2 norm of a
  perturbation first writes the squares to memory and reads them back, three
  passes over the input where one does. Disabling the pass took the l_2 lane
  of the MNIST MLP from 1.31 to 1.15 times the cost of its bare gradients. A
  row of ``d`` float32 values is then summed in XLA's vectorised loop (8-16
  partial sums): relative error about ``d / 16 * 6e-8`` at worst, 3e-6 for
  MNIST, far below what any attack's distance resolves; the returned distance
  is recomputed on the returned example anyway.

A third option only prefers 512-bit vectors for XLA's own loops (LLVM keeps
to what the CPU has): the l_2 step's passes over the input ran faster with
them on this AVX-512 machine (MNIST MLP l_2 search 1.18 -> 1.14 of its bare
gradients, same process; l_inf and CW unchanged).

:func:`program` jits a function with those options applied to the function's
own executable only (``jax.jit(..., compiler_options=...)``), keeping YNNPACK
for the matrix products. Nothing changes for the user's other programs, and:

* an option the user's ``XLA_FLAGS`` already set is left to them (their choice
  wins), and ``RCURVES_XLA_DEFAULTS=1`` turns all of them off;
* each option is probed once, at the first compilation, by compiling a tiny
  function with it; a jaxlib that does not know it gets plain ``jax.jit``;
* when an attack is called inside a user's own ``jit``/``shard_map``/``pmap``
  it is inlined into the user's program and compiled with the user's options.

:func:`materialize` is the other half: a way to make XLA write an array (the
model's input gradient) to memory once instead of recomputing it inside every
fusion that reads it.
"""
from __future__ import annotations

import functools
import inspect
import math
import os
from typing import Any, Callable, Dict, Optional, Sequence

import jax
import jax.numpy as jnp

from attacks.interpret import inner_jaxpr
from attacks.modeltree import merge_model, split_model

YNN_OPTION = "xla_cpu_experimental_ynn_fusion_type"
PASSES_OPTION = "xla_disable_hlo_passes"
VECTOR_OPTION = "xla_cpu_prefer_vector_width"
#: The attack programs' options: XLA's default YNNPACK fusion list (matrix
#: products and reductions) minus reductions, no tree-reduction rewrite, and
#: 512-bit vectors preferred.
WORKAROUND: Dict[str, Any] = {
    YNN_OPTION: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT",
    PASSES_OPTION: "tree_reduction_rewriter",
    VECTOR_OPTION: 512,
}


@functools.lru_cache(maxsize=None)
def _probe(name: str) -> bool:
    """Whether this jaxlib compiles with option ``name`` of ``WORKAROUND``."""
    try:
        f = jax.jit(lambda v: jnp.max(jnp.abs(v)), compiler_options={name: WORKAROUND[name]})
        f.lower(jnp.zeros((4,), jnp.float32)).compile()
    except Exception:  # an older/newer jaxlib without the option
        return False
    return True


#: the XLA flag that makes XLA:GPU's reductions (scatter-add, some sums) run in a fixed order: bit-for-bit repeats
DETERMINISTIC_FLAG = "--xla_gpu_deterministic_ops=true"


def request_deterministic() -> bool:
    """Add :data:`DETERMINISTIC_FLAG` to ``XLA_FLAGS`` (a no-op on CPUs and TPUs, whose programs already repeat).

    XLA reads its flags when JAX first starts a backend, so this must run before anything touches a device;
    after that it raises a ``RuntimeError`` saying so. Returns True when the flag was added, False when
    ``XLA_FLAGS`` already named ``xla_gpu_deterministic_ops`` (the user's setting is kept).
    ``rcurves --deterministic ...`` and ``RCURVES_DETERMINISTIC=1`` call it (docs/precision.md).
    """
    from jax._src import xla_bridge

    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_deterministic_ops" in flags:
        return False
    if xla_bridge.backends_are_initialized():
        raise RuntimeError("deterministic: JAX has already started its backends; set "
                           f"XLA_FLAGS={DETERMINISTIC_FLAG} before the program touches a device")
    os.environ["XLA_FLAGS"] = f"{flags} {DETERMINISTIC_FLAG}".strip()
    return True


def compiler_options() -> Optional[Dict[str, Any]]:
    """The XLA compile options of the attack programs (None: XLA's defaults).

    ``WORKAROUND`` minus the options this jaxlib does not know and those the
    user's ``XLA_FLAGS`` set; None when nothing is left or
    ``RCURVES_XLA_DEFAULTS=1``.
    """
    if os.environ.get("RCURVES_XLA_DEFAULTS", "") not in ("", "0"):
        return None
    flags = os.environ.get("XLA_FLAGS", "")
    opts = {k: v for k, v in WORKAROUND.items() if k not in flags and _probe(k)}
    return opts or None


#: Primitives that only relabel an array (XLA turns them into bitcasts or
#: fuses them for free): looked through when finding who computed a gradient.
_RELABEL = {"reshape", "squeeze", "expand_dims", "convert_element_type", "copy", "transpose"}
#: Primitives whose result XLA always writes to memory (library calls).
_WRITTEN = {"dot_general", "conv_general_dilated"}


def _gradient_jaxpr(fn1: Callable, x: jax.Array):
    """The open jaxpr of ``grad(sum(fn1))`` at ``x``'s shape and dtype (raises if ``fn1`` cannot be traced
    apart from the caller's transformation)."""
    spec = jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))
    return jax.make_jaxpr(jax.grad(lambda v: jnp.sum(fn1(v))))(spec).jaxpr


def _producer(jaxpr, var) -> Optional[str]:
    """Name of the primitive that computes ``var`` in ``jaxpr``, looking
    through relabelling ops and into nested calls (jit, custom derivatives)."""
    producers = {id(v): e for e in jaxpr.eqns for v in e.outvars}
    while id(var) in producers:
        eqn = producers[id(var)]
        name = eqn.primitive.name
        if name in _RELABEL:
            var = eqn.invars[0]
            continue
        inner = inner_jaxpr(eqn)
        if inner is not None:
            return _producer(inner, inner.outvars[[id(v) for v in eqn.outvars].index(id(var))])
        return name
    return None  # an input or a constant


def gradient_is_written(fn1: Callable, x: jax.Array) -> bool:
    """Whether XLA writes ``grad(sum(fn1))(x)`` to memory as it computes it.

    True when the input gradient of the one-point model ``fn1`` comes out of a
    matrix product or a convolution (a dense or ``lax.conv`` first layer),
    false when it is a chain of elementwise ops, pads and slices (e.g. the
    transpose of an im2col patch extraction), which XLA recomputes inside
    every fusion that reads it. Traces the model once more, on ``x``'s shape
    only; True (the attacks then add nothing) if the model cannot be traced
    apart from the attack, e.g. when it closes over a tracer of the user's
    own transformation.
    """
    try:
        jaxpr = _gradient_jaxpr(fn1, x)
        return _producer(jaxpr, jaxpr.outvars[0]) in _WRITTEN
    except Exception:  # noqa: BLE001 - a speed heuristic must never fail an attack
        return True


#: The most bytes of gradient intermediates (:func:`gradient_bytes` per
#: point, times points, times lanes) for which a search's lanes of every point
#: are ``vmap``ped into one batch; above it they run one after the other, each
#: over all points (:func:`lanes_in_loop`).
LANE_BATCH_BYTES = 2 ** 28


def _jaxpr_bytes(jaxpr) -> int:
    """Bytes of every value ``jaxpr``'s equations compute, looking into nested calls."""
    total = 0
    for eqn in jaxpr.eqns:
        inner = inner_jaxpr(eqn)
        if inner is not None:
            total += _jaxpr_bytes(inner)
            continue
        for v in eqn.outvars:
            aval = getattr(v, "aval", None)
            if hasattr(aval, "shape") and hasattr(aval, "dtype"):
                total += math.prod(aval.shape) * jnp.dtype(aval.dtype).itemsize
    return total


def gradient_bytes(fn1: Callable, x: jax.Array) -> int:
    """Bytes of the values computed by one input gradient of the one-point
    model ``fn1`` at ``x``'s shape: the sum over the equations of the traced
    ``grad(sum(fn1))`` (a measure of its working set, before XLA fuses any of
    them away; 2026-11-28: 33 KB for the benchmarks' MNIST MLP, 1.1 MB for their
    2-conv CNN). 0 if the model cannot be traced apart from the attack."""
    try:
        return int(_jaxpr_bytes(_gradient_jaxpr(fn1, x)))
    except Exception:  # noqa: BLE001 - a speed heuristic must never fail an attack
        return 0


def lanes_in_loop(fn1: Callable, x: jax.Array, points: int, lanes: int) -> bool:
    """Whether a search runs the ``lanes`` lanes of its ``points`` points one
    lane after the other (``lax.map``, each lane a batch of ``points``) rather
    than as one ``vmap``ped batch of ``points * lanes``.

    A gradient's cost per point rises once the batch's working set outgrows
    the caches, and falls with the batch below that. Measured on XLA:CPU (2
    cores, ``benchmarks/attack_overhead.py``'s ratio to bare gradients, the
    default l_inf search, 4 lanes, side by side in one process, 2026-11-28):
    the patch CNN (1.1 MB per point) with 16 / 32 / 48 points took 0.80 /
    0.95 / 1.00 vmapped and 1.03 / 1.11 / 1.03 looped, with 64 / 200 points
    1.10 / 1.46 vmapped and 1.02 / 1.05 looped; the MLP (33 KB) with 64 / 256
    points 0.95 / 1.00-1.08 vmapped and 1.16 / 1.10-1.17 looped. The switch,
    ``points * lanes * gradient_bytes > LANE_BATCH_BYTES`` (256 MiB), lies
    between the CNN's 48 and 64 points. The results are the same up to float
    rounding either way.
    """
    if lanes <= 1:
        return False
    return points * lanes * gradient_bytes(fn1, x) > LANE_BATCH_BYTES


def materialize(fn: Callable, operand, index):
    """``fn(operand)``, computed as a unit whose outputs XLA writes to memory.

    XLA fuses cheap producers (elementwise ops, pads, slices) into each of
    their consumers and recomputes them there; when a model's input gradient
    is such a chain (the 16 padded slices of the CNN's col2im) and the step
    reads it in four fusions, it is computed four times. Inside a
    ``lax.cond`` the computation is one branch whose results are written once.
    ``index`` must be an unbatched scalar that XLA cannot constant-fold (the
    step counter of a ``lax.scan``): its predicate ``index >= 0`` is always
    true, but a batched predicate would turn the cond into a select under
    ``vmap`` and a constant one would be folded away. No copy is made: the
    branch's results are its outputs. ``optimization_barrier`` does not do
    this on XLA:CPU (it is removed before fusion).
    """
    shapes = jax.eval_shape(fn, operand)
    zeros = lambda _: jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)  # noqa: E731
    return jax.lax.cond(index >= 0, fn, zeros, operand)


def gradient_caller(fn1: Callable, x: jax.Array) -> Callable:
    """``call(fn, operand, index) -> fn(operand)`` for an attack step that
    evaluates a gradient of the one-point model ``fn1`` at ``operand``.

    Decided once per trace: when :func:`gradient_is_written` says XLA would
    recompute the model's input gradient in every fusion that reads it (CNN
    l_2 lane 1.29 -> 1.09 of bare gradients), ``fn`` runs inside
    :func:`materialize`; when a dense or ``lax.conv`` first layer writes it
    anyway, plainly, since the cond would only add its thunk (MLP l_2 lane
    +0.02). ``index`` is the step's unbatched counter; pass None where there
    is none (a ``while_loop`` under ``vmap``) to call ``fn`` plainly.
    """
    if gradient_is_written(fn1, x):
        return lambda fn, operand, index: fn(operand)
    return lambda fn, operand, index: fn(operand) if index is None else materialize(fn, operand, index)


def loop_model(logits_fn: Callable, shape=None) -> Callable:
    """The model an attack's loop evaluates: ``logits_fn`` itself, or on
    XLA:CPU, when it has convolutions, the same function with them computed
    as patch matrices (``attacks.convrewrite.patches_model``).

    XLA:CPU runs ``lax.conv_general_dilated`` inside a ``while`` loop far
    slower than the same convolution outside one (a flax ``nn.Conv`` CNN, 64
    MNIST points: 220 gradients in one ``lax.scan`` took 1.6-15x the time of
    220 separate jitted calls, depending on load), while strided slices and a
    matrix product run at full speed in both (``benchmarks/attack_overhead.py``,
    the ``flax nn.Conv`` rows). The rewritten model computes the same function
    up to the summation order of the products (about 1e-7 relative on MNIST
    logits); the attacks' results are re-checked with ``logits_fn`` itself.
    ``shape``: the batched input shape the loop calls it with (None: decided
    at the first call). Off with ``RCURVES_XLA_DEFAULTS=1`` or
    ``RCURVES_CONV_REWRITE=0`` (the rewrite alone; the patches hold ``kh kw``
    times the activations of each convolution, which
    ``benchmarks/model_scale.py`` measures), for one model by wrapping it in
    :class:`PlainConvolutions` (what ``chunk_size="auto"`` does where the
    rewrite does not fit in memory), and on other backends; a model
    that cannot be traced apart from the attack (it closes over a tracer of
    the user's transformation) is left as it is.
    """
    if (isinstance(logits_fn, PlainConvolutions)
            or os.environ.get("RCURVES_XLA_DEFAULTS", "") not in ("", "0") or os.environ.get("RCURVES_CONV_REWRITE") == "0"
            or jax.default_backend() != "cpu"):
        return logits_fn
    from attacks.convrewrite import has_conv, patches_model

    def convolves(shp, dtype=jnp.float32) -> bool:
        try:
            return has_conv(jax.make_jaxpr(logits_fn)(jax.ShapeDtypeStruct(tuple(shp), dtype)))
        except Exception:  # noqa: BLE001 - a speed rewrite must never fail an attack
            return False

    if shape is not None:
        return patches_model(logits_fn) if convolves(shape) else logits_fn
    patched = patches_model(logits_fn)
    return lambda xb: patched(xb) if convolves(xb.shape, jnp.result_type(xb)) else logits_fn(xb)


@jax.tree_util.register_pytree_node_class
class PlainConvolutions:
    """``logits_fn`` itself, marked so that :func:`loop_model` leaves its convolutions as they are (no
    patches rewrite): the same function, with the memory of the plain convolutions (``kh kw`` times less
    for each convolution's input than the rewrite) at their speed on XLA:CPU.

    A pytree callable whose only child is ``logits_fn``: a pytree ``logits_fn``'s arrays stay traced
    arguments of the attack programs (one program per architecture), and a closure stays static. Two
    wrappers of the same ``logits_fn`` are equal (one compiled program). Unwrapped by
    :func:`plain_convolutions` ``(..., False)`` -> ``fn.fn``.
    """

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, x):
        return self.fn(x)

    def tree_flatten(self):
        return (self.fn,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0])

    def __eq__(self, other) -> bool:
        return isinstance(other, PlainConvolutions) and other.fn is self.fn

    def __hash__(self) -> int:
        return hash((PlainConvolutions, id(self.fn)))

    def __repr__(self) -> str:
        return f"PlainConvolutions({self.fn!r})"


def plain_convolutions(logits_fn: Callable, plain: bool = True) -> Callable:
    """``logits_fn`` for the attacks with (``plain``) or without the conv rewrite switched off for it (see
    :class:`PlainConvolutions`); the model's function is unchanged either way."""
    inner = logits_fn.fn if isinstance(logits_fn, PlainConvolutions) else logits_fn
    return PlainConvolutions(inner) if plain else inner


class Program:
    """``jax.jit(fun, static_argnames=...)``, built at its first call with
    :func:`compiler_options` (so importing the toolkit never initialises a
    backend, e.g. before ``jax.distributed.initialize``).

    JAX accepts compile options only on a top-level ``jit``: a call made while
    tracing (inside a user's ``jit``, ``vmap``, ``shard_map``, ``pmap``) goes
    to a plain ``jax.jit`` of the same function and is inlined into the
    caller's program.

    A static ``logits_fn`` (the first argument) that is a pytree callable is
    split (:func:`attacks.modeltree.split_model`): its skeleton is the static
    argument and its array leaves are traced arguments, so every checkpoint
    of one architecture shares the compiled program.
    """

    def __init__(self, fun: Callable, static_argnames: Sequence[str]):
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._static = tuple(static_argnames)
        self._splits = "logits_fn" in self._static
        target = _with_model_leaves(fun) if self._splits else fun
        self._target = target
        self._plain = jax.jit(target, static_argnames=self._static)
        self._tuned = None

    def jitted(self):
        """The top-level jitted function (with the compile options, if any)."""
        if self._tuned is None:
            opts = compiler_options()
            self._tuned = (self._plain if opts is None else
                           jax.jit(self._target, static_argnames=self._static, compiler_options=opts))
        return self._tuned

    def _split(self, args, kwargs):
        if not self._splits:
            return args, kwargs
        if args:
            static, leaves = split_model(args[0])
            return (static, leaves) + tuple(args[1:]), kwargs
        kwargs = dict(kwargs)
        static, leaves = split_model(kwargs.pop("logits_fn"))
        return (static, leaves), kwargs

    def __call__(self, *args, **kwargs):
        args, kwargs = self._split(args, kwargs)
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if any(isinstance(v, jax.core.Tracer) for v in leaves):
            return self._plain(*args, **kwargs)
        tuned = self.jitted()
        if tuned is self._plain:
            return tuned(*args, **kwargs)
        try:
            return tuned(*args, **kwargs)
        except ValueError as e:  # traced from a context whose arguments are all constants
            if "compiler_options" not in str(e):
                raise
            return self._plain(*args, **kwargs)

    def lower(self, *args, **kwargs):
        args, kwargs = self._split(args, kwargs)
        return self.jitted().lower(*args, **kwargs)

    def lower_plain(self, *args, **kwargs):
        """``lower`` without the compile options (XLA's defaults), to compare the two."""
        args, kwargs = self._split(args, kwargs)
        return self._plain.lower(*args, **kwargs)

    def _cache_size(self) -> int:
        return self.jitted()._cache_size()


def _with_model_leaves(fun: Callable) -> Callable:
    """``fun(logits_fn, *a, **k)`` as ``g(logits_fn, model_leaves, *a, **k)`` that rebuilds the model
    from its static part and traced leaves (:func:`attacks.modeltree.merge_model`), with a signature
    jit can read the static argument names from."""
    sig = inspect.signature(fun)
    params = list(sig.parameters.values())
    if not params or params[0].name != "logits_fn":
        raise TypeError(f"{fun.__name__}: a program with a static logits_fn takes it as its first argument")
    extra = inspect.Parameter("model_leaves", inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def g(logits_fn, model_leaves, *args, **kwargs):
        return fun(merge_model(logits_fn, model_leaves), *args, **kwargs)

    functools.update_wrapper(g, fun)
    g.__signature__ = sig.replace(parameters=[params[0], extra] + params[1:])
    del g.__wrapped__
    return g


def program(*, static_argnames: Sequence[str] = ()) -> Callable[[Callable], Program]:
    """Decorator: ``@program(static_argnames=("logits_fn", "cfg"))``."""
    return lambda fun: Program(fun, static_argnames)


__all__ = ["LANE_BATCH_BYTES", "PlainConvolutions", "Program", "WORKAROUND", "compiler_options", "gradient_bytes",
           "gradient_caller", "gradient_is_written", "lanes_in_loop", "loop_model", "materialize", "plain_convolutions",
           "program"]
