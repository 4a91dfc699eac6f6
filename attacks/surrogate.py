"""A ReLU network's exact function with a smooth derivative: gradients that see thresholds.

Adversarially trained networks often threshold their input in the first
layer: a ReLU unit stays off until a pixel has moved by a fixed amount, and
its derivative, 0 below that, tells a gradient step nothing about it. Near
the data the input gradient then points along the few units already on, and
the l_2 search, whose best adversarials on such models change a few pixels
by a lot, follows it to a far, dense adversarial (the l_inf 0.3 AT CNN's
default l_2 distances are 27-41% above the best known at the 90th
percentile). Athalye, Carlini and Wagner (2018) call the remedy BPDA: keep
the forward pass, replace the derivative.

:func:`smooth_relu_model` does that for a ``logits_fn`` built from ReLUs
(``jax.nn.relu``, ``flax.linen.relu``, or ``jnp.maximum(z, 0)``; which
equations it reaches: its docstring): the same logits, bit for bit the same
operations, and every ReLU's derivative
``1[z > 0]`` replaced by ``sigmoid(z / temperature)`` (the derivative of
``temperature * softplus(z / temperature)``), in the units of the
pre-activation ``z``. A unit just below its threshold now passes a share of
the gradient, so the step learns which pixels would switch it on.

The attacks' search lanes take their gradients from it, their losses,
adversarial checks and distances from the same (exact) forward pass, and
every returned adversarial is re-checked with ``logits_fn`` itself: a
surrogate can only change where the search looks, never what it reports.
"""
from __future__ import annotations

import functools
import math
import numbers
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from attacks.interpret import CALLS, inner_jaxpr, literal, rewritten


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def smooth_relu(z: jax.Array, temperature: float) -> jax.Array:
    """``max(z, 0)`` whose derivative in ``z`` is ``sigmoid(z / temperature)``."""
    del temperature
    return jnp.maximum(z, 0)


@smooth_relu.defjvp
def _smooth_relu_jvp(temperature, primals, tangents):
    (z,), (dz,) = primals, tangents
    return jnp.maximum(z, 0), dz * jax.nn.sigmoid(z / temperature)


def _zero_max(eqn) -> Optional[int]:
    """The index of ``z`` when ``eqn`` is ``max(z, 0)`` (``z`` a variable, the
    other operand a literal scalar zero), else None (a ``max`` of two
    literals, or against anything but zero, is not a ReLU)."""
    if eqn.primitive.name != "max" or len(eqn.invars) != 2:
        return None
    vals = [literal(v) for v in eqn.invars]
    zero = [v is not None and jnp.ndim(v) == 0 and float(v) == 0.0 for v in vals]
    for i in (0, 1):
        if vals[i] is None and zero[1 - i]:
            return i
    return None


def _only_eqn(jaxpr):
    """The single equation of an open jaxpr's body, looking through nested
    one-equation calls (``jit``), else None."""
    while len(jaxpr.eqns) == 1 and jaxpr.eqns[0].primitive.name in CALLS:
        jaxpr = inner_jaxpr(jaxpr.eqns[0])
    return jaxpr.eqns[0] if len(jaxpr.eqns) == 1 else None


def relu_operand(eqn) -> Optional[int]:
    """The index of the ReLU's input among ``eqn.invars`` when the jaxpr
    equation is a ReLU, else None: ``max(z, 0)`` itself, or a custom
    derivative (``jax.nn.relu``) of one input whose body is nothing but that
    (index 0)."""
    i = _zero_max(eqn)
    if i is not None:
        return i
    if eqn.primitive.name == "custom_jvp_call" and len(eqn.invars) == 1:
        inner = _only_eqn(inner_jaxpr(eqn))
        return 0 if inner is not None and _zero_max(inner) is not None else None
    return None


def is_relu(eqn) -> bool:
    """Whether a jaxpr equation is a ReLU (:func:`relu_operand`)."""
    return relu_operand(eqn) is not None


#: The normal float32 range a temperature must lie in (the rewrite divides float32 pre-activations by it).
_FLOAT32_TINY, _FLOAT32_MAX = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)


def check_temperature(temperature, name: str = "relu_temperature", allow_zero: bool = False) -> float:
    """``float(temperature)`` when it is a real number (a Python or numpy scalar, or a 0-d array; not a bool,
    not a string) in float32's normal range (the rewrite divides float32 pre-activations by it), or 0 with
    ``allow_zero`` (no smoothing); else a ValueError naming ``name``."""
    kind = getattr(getattr(temperature, "dtype", None), "kind", None)
    real = (isinstance(temperature, numbers.Real) and not isinstance(temperature, (bool, np.bool_))) or (
        kind in ("i", "u", "f") and np.ndim(temperature) == 0)       # also a 0-d numpy / jax array
    t = float(temperature) if real else math.nan
    if not (_FLOAT32_TINY <= t <= _FLOAT32_MAX or (allow_zero and t == 0.0)):
        zero = " (or 0: none)" if allow_zero else ""
        raise ValueError(f"{name}: expected a finite number > 0 (a normal float32){zero}, got {temperature!r}")
    return abs(t)      # -0.0 -> 0.0


def smooth_relu_model(logits_fn: Callable, temperature: float) -> Callable:
    """``logits_fn`` (same signature, same values) with the derivative of each
    ReLU replaced by ``sigmoid(z / temperature)``; ``temperature > 0`` in the
    pre-activations' units.

    What counts as a ReLU (:func:`is_relu`): any ``max`` of a variable and a
    literal scalar zero (not a ``max`` of two constants), and any
    ``custom_jvp`` derivative of one input whose body is nothing but that
    (``jax.nn.relu``, but also a user's own, e.g. a straight-through
    estimator, which loses its derivative; a ``custom_vjp`` one keeps it). So a ``max(0, var)`` elsewhere
    (flax ``LayerNorm``'s variance) is smoothed too: its values stay, its
    derivative changes. ReLUs inside ``lax.scan``, ``remat`` / ``checkpoint``
    or ``cond`` are not reached (only ``jit`` calls are inlined) and keep
    their exact derivative; so do ``jnp.maximum(z, zeros_like(z))`` and
    ``where(z > 0, z, 0)``. The model is traced once per input shape and
    dtype: arrays it closes over are read at that first call."""
    t = check_temperature(temperature)

    def rule(eqn, invals):
        i = relu_operand(eqn)
        return None if i is None else [smooth_relu(invals[i], t)]

    return rewritten(logits_fn, rule)


__all__ = ["check_temperature", "is_relu", "relu_operand", "smooth_relu", "smooth_relu_model"]
