"""An accelerator's float32 products, on XLA:CPU: the tests' emulation of TF32 (NVIDIA) and bfloat16 (TPU).

On an NVIDIA GPU since Ampere a float32 ``dot_general`` or
``conv_general_dilated`` whose precision is not HIGHEST rounds its operands
to TensorFloat-32 (8 exponent bits, 10 mantissa bits) and accumulates in
float32; a TPU rounds them to bfloat16 (7 mantissa bits). XLA:CPU computes
them in float32 whatever the setting, so a test on a CPU cannot see an
accelerator's error. :func:`emulate` makes it see it: while it is active,
the CPU lowering of both primitives rounds each float32 operand with
``stablehlo.reduce_precision`` (round to nearest even, the operand rounding
of the hardware) unless the equation's precision is HIGHEST on both
operands, exactly as on the device. It works below the jaxpr, so it reaches
every product however it was written (``jnp.dot``, ``@``, ``einsum``, flax
modules, transposes made by ``grad``) and changes no jaxpr.

:func:`recording` records the precision of every such product lowered in a
block: the guard tests use it to show that an entry point promised exact
compiles no product below HIGHEST.

``RCURVES_TEST_EMULATE=tf32`` (or ``bf16``) runs the whole suite under it
(``tests/conftest.py``); tests marked ``@pytest.mark.accelerator`` run
under it in the default suite.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List

import jax
import numpy as np
from jax._src.interpreters import mlir
from jax._src.lax import convolution as _conv
from jax._src.lax import lax as _lax
from jax._src.lib.mlir.dialects import hlo

from attacks.precision import is_exact

#: mantissa bits an accelerator keeps of a float32 operand by default
BITS = {"tf32": 10, "bf16": 7}
_PRIMITIVES = (_lax.dot_general_p, _conv.conv_general_dilated_p)


def _base(prim):
    table = mlir._platform_specific_lowerings["cpu"]
    return table.get(prim) or mlir._lowerings[prim]


@contextlib.contextmanager
def _lowering(make_rule) -> Iterator[None]:
    """Replace the CPU lowering of dot_general and conv_general_dilated by ``make_rule(prim, original_rule)``
    for the block; compiled programs are dropped on entry and exit, so nothing compiled under one lowering is
    run under the other."""
    table = mlir._platform_specific_lowerings["cpu"]
    saved = {p: table.get(p) for p in _PRIMITIVES}
    for p in _PRIMITIVES:
        base = _base(p)
        table[p] = mlir.LoweringRuleEntry(make_rule(p, base.rule), base.inline)
    jax.clear_caches()
    try:
        yield
    finally:
        for p, entry in saved.items():
            if entry is None:
                table.pop(p, None)
            else:
                table[p] = entry
        jax.clear_caches()


@contextlib.contextmanager
def emulate(kind: str = "tf32") -> Iterator[None]:
    """Within the block, float32 products below HIGHEST precision round their operands as ``kind``
    (``'tf32'`` or ``'bf16'``) does."""
    bits = BITS[kind]

    def make_rule(prim, rule):
        def emulated(ctx, lhs, rhs, *, precision, **params):
            if not is_exact(precision):
                a_lhs, a_rhs = ctx.avals_in[:2]
                if a_lhs.dtype == np.float32:
                    lhs = hlo.reduce_precision(lhs, mlir.i32_attr(8), mlir.i32_attr(bits))
                if a_rhs.dtype == np.float32:
                    rhs = hlo.reduce_precision(rhs, mlir.i32_attr(8), mlir.i32_attr(bits))
            return rule(ctx, lhs, rhs, precision=precision, **params)
        return emulated

    _ACTIVE.append(kind)
    try:
        with _lowering(make_rule):
            yield
    finally:
        _ACTIVE.pop()


_ACTIVE: List[str] = []
_installed = []


def active() -> "str | None":
    """The kind being emulated now (``'tf32'``, ``'bf16'``), or None."""
    return _ACTIVE[-1] if _ACTIVE else None


def install(kind: str) -> None:
    """:func:`emulate` for the rest of the process (``RCURVES_TEST_EMULATE``)."""
    ctx = emulate(kind)
    ctx.__enter__()
    _installed.append(ctx)      # kept referenced: a collected generator would run its ``finally`` and restore


@contextlib.contextmanager
def recording() -> Iterator[List[tuple]]:
    """Within the block, every float32 dot_general / conv_general_dilated that is compiled appends
    ``(primitive name, precision, exact)`` to the yielded list."""
    seen: List[tuple] = []

    def make_rule(prim, rule):
        def recorded(ctx, lhs, rhs, *, precision, **params):
            if any(a.dtype == np.float32 for a in ctx.avals_in[:2]):
                seen.append((prim.name, precision, is_exact(precision)))
            return rule(ctx, lhs, rhs, precision=precision, **params)
        return recorded

    with _lowering(make_rule):
        yield seen
