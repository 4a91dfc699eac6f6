"""Evaluate a traced model with some of its operations replaced.

The attacks rewrite a user's ``logits_fn`` without asking the user to write
it differently: ``attacks.convrewrite`` computes its convolutions as patch
matrices, ``attacks.surrogate`` gives its ReLUs a smooth derivative. Both
trace the model to a jaxpr and evaluate it equation by equation with
:func:`evaluate`, which asks a ``rule`` about every equation first and binds
it as it was when the rule declines. Nested ``jit`` calls are inlined (so
operations inside them are seen too); other higher-order primitives (custom
derivatives, ``remat``, loops) are offered to the rule whole and otherwise
bound as they are.
"""
from __future__ import annotations

import functools
from typing import Callable, Optional, Sequence

import jax
import jax.numpy as jnp
from jax.extend import core as jex_core

#: Call primitives whose body is inlined.
CALLS = ("pjit", "closed_call", "core_call", "jit")

#: ``rule(eqn, invals) -> outs | None``: the outputs of the rewritten equation
#: (a list, one per ``eqn.outvars``), or None to bind it as it is.
Rule = Callable[[object, Sequence[jax.Array]], Optional[list]]


def literal(var):
    """The value of a jaxpr literal, None for a variable."""
    return var.val if isinstance(var, jex_core.Literal) else None


def inner_jaxpr(eqn):
    """The open jaxpr in an equation's ``jaxpr`` / ``call_jaxpr`` / ``fun_jaxpr`` parameter (the body of
    ``jit``, custom derivatives, ``scan``, ``remat``), None for equations without one."""
    inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr", eqn.params.get("fun_jaxpr")))
    return None if inner is None else getattr(inner, "jaxpr", inner)


def evaluate(jaxpr, consts, args, rule: Rule) -> list:
    """Outputs of ``jaxpr`` (an open jaxpr with its ``consts``) at ``args``,
    every equation first offered to ``rule``."""
    env = {}

    def read(v):
        val = literal(v)
        return env[v] if val is None else val

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        outs = rule(eqn, invals)
        if outs is None and eqn.primitive.name in CALLS and "jaxpr" in eqn.params:
            inner = eqn.params["jaxpr"]
            outs = evaluate(inner.jaxpr, inner.consts, invals, rule)
        if outs is None:
            with eqn.ctx.manager:
                outs = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(eqn.params))
            if not eqn.primitive.multiple_results:
                outs = [outs]
        for v, o in zip(eqn.outvars, outs):
            env[v] = o
    return [read(v) for v in jaxpr.outvars]


def rewritten(logits_fn: Callable, rule: Rule) -> Callable:
    """``logits_fn`` evaluated with ``rule`` (same signature): traced once per
    input shape and dtype."""

    @functools.lru_cache(maxsize=8)
    def traced(shape, dtype):
        return jax.make_jaxpr(logits_fn)(jax.ShapeDtypeStruct(shape, dtype))

    def fn(x):
        closed = traced(tuple(x.shape), jnp.result_type(x))
        out = evaluate(closed.jaxpr, closed.consts, [x], rule)
        return out[0] if len(out) == 1 else tuple(out)

    return fn


__all__ = ["CALLS", "Rule", "evaluate", "inner_jaxpr", "literal", "rewritten"]
