"""The precision policy: what is promised exact is computed with float32 products at ``Precision.HIGHEST``.

On NVIDIA GPUs since Ampere, XLA computes a float32 matrix product or
convolution whose ``precision`` is unset in TensorFloat-32 (operands rounded
to 10 mantissa bits, relative error up to ``2**-11``); TPUs use one bfloat16
pass (7 bits, ``2**-8``). XLA:CPU computes every float32 product in float32
whatever the setting. So a bound, an exact distance or a verdict that is
sound on a CPU can be false on an accelerator unless its products ask for
``jax.lax.Precision.HIGHEST`` (full float32 on every device).

The toolkit's rule (docs/precision.md):

* everything called *exact*, *certified* / *sound* or *verified* is computed
  under :func:`exact_precision`: the exact distances of :mod:`rcurves.exact`,
  every bound, branch and bound, the MILP's inputs and ``verify`` in
  :mod:`rcurves.certify`, MMR's region distances, the exact sparsity of
  linear models, and the attacks' re-check (:func:`attacks.result.finalize`)
  that makes a returned distance verified;
* the attacks' search steps (gradients, candidate tests) keep the device's
  fast default: what they find is reported only after that re-check.

:func:`exact_precision` is a context manager and a decorator around
``jax.default_matmul_precision("highest")``: every ``dot_general`` and
``conv_general_dilated`` *traced* inside it (the toolkit's own code, a
user's ``logits_fn``, a flax module) carries ``precision=(HIGHEST,
HIGHEST)`` in its jaxpr, unless the call names a precision of its own. JAX
keys its compilation caches on this setting, so a jitted function traced
once outside the context is traced again inside it, never reused. A
function decorated with it keeps the policy when it is called from inside
another trace.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import jax

#: the precision of every product the toolkit calls exact (full float32 on every device)
EXACT = jax.lax.Precision.HIGHEST

F = TypeVar("F", bound=Callable)


@contextmanager
def _highest() -> Iterator[None]:
    with jax.default_matmul_precision("highest"):
        yield


def exact_precision(fn: F | None = None):
    """``with exact_precision():`` or ``@exact_precision``: float32 products traced inside are at HIGHEST.

    As a decorator it wraps ``fn`` so that its body (and so everything it
    traces, compiles or calls) runs under the policy; as a context manager it
    does the same for a block.
    """
    if fn is None:
        return _highest()

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with _highest():
            return fn(*args, **kwargs)

    wrapped.__exact_precision__ = True
    return wrapped


def is_exact(precision) -> bool:
    """Whether a jaxpr equation's ``precision`` parameter is HIGHEST on both operands (None is not)."""
    if precision is None:
        return False
    if isinstance(precision, (tuple, list)):
        return len(precision) == 2 and all(p == EXACT for p in precision)
    return precision == EXACT


__all__ = ["EXACT", "exact_precision", "is_exact"]
