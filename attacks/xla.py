"""How the attack programs are jitted: ``jax.jit`` plus XLA options that suit them.

Every attack is one XLA program whose steps are a model gradient plus a few
per-point reductions (norms of perturbations and gradients) and elementwise
updates. On the XLA:CPU of jaxlib 0.10-0.11 the reductions are by default
handed to YNNPACK, where a per-row reduction of a ``(256, 784)`` batch takes
about ten times as long as XLA's own loop (1.5 ms vs 0.11-0.17 ms per call,
measured on this project's 2-core machine; a known regression,
jax-ml/jax#37465, whose suggested workaround is the flag
``--xla_cpu_experimental_ynn_fusion_type=-reduce``). The l_inf norm alone
then cost more than the rest of the step's bookkeeping together.

:func:`program` jits a function with that workaround applied to the
function's own executable only (``jax.jit(..., compiler_options=...)``),
keeping YNNPACK for the matrix products, which is what XLA does by default
minus the reductions. Nothing changes for the user's other programs, and:

* the workaround is skipped when the user's ``XLA_FLAGS`` already set the
  option (their choice wins) or ``RCURVES_XLA_DEFAULTS=1`` is set;
* it is probed once, at the first compilation, by compiling a tiny function
  with it; a jaxlib that does not know the option gets plain ``jax.jit``;
* when an attack is called inside a user's own ``jit``/``shard_map``/``pmap``
  it is inlined into the user's program and compiled with the user's options.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Callable, Dict, Optional, Sequence

import jax
import jax.numpy as jnp

YNN_OPTION = "xla_cpu_experimental_ynn_fusion_type"
#: XLA's default YNNPACK fusion list (matrix products and reductions) minus reductions.
WORKAROUND: Dict[str, Any] = {YNN_OPTION: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}


@functools.lru_cache(maxsize=None)
def _probe() -> Optional[Dict[str, Any]]:
    try:
        f = jax.jit(lambda v: jnp.max(jnp.abs(v)), compiler_options=dict(WORKAROUND))
        f.lower(jnp.zeros((4,), jnp.float32)).compile()
    except Exception:  # an older/newer jaxlib without the option: plain jit
        return None
    return dict(WORKAROUND)


def compiler_options() -> Optional[Dict[str, Any]]:
    """The XLA compile options of the attack programs (None: XLA's defaults)."""
    if os.environ.get("RCURVES_XLA_DEFAULTS", "") not in ("", "0"):
        return None
    if YNN_OPTION in os.environ.get("XLA_FLAGS", ""):
        return None
    return _probe()


class Program:
    """``jax.jit(fun, static_argnames=...)``, built at its first call with
    :func:`compiler_options` (so importing the toolkit never initialises a
    backend, e.g. before ``jax.distributed.initialize``).

    JAX accepts compile options only on a top-level ``jit``: a call made while
    tracing (inside a user's ``jit``, ``vmap``, ``shard_map``, ``pmap``) goes
    to a plain ``jax.jit`` of the same function and is inlined into the
    caller's program.
    """

    def __init__(self, fun: Callable, static_argnames: Sequence[str]):
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._static = tuple(static_argnames)
        self._plain = jax.jit(fun, static_argnames=self._static)
        self._tuned = None

    def jitted(self):
        """The top-level jitted function (with the compile options, if any)."""
        if self._tuned is None:
            opts = compiler_options()
            self._tuned = (self._plain if opts is None else
                           jax.jit(self._fun, static_argnames=self._static, compiler_options=opts))
        return self._tuned

    def __call__(self, *args, **kwargs):
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
        return self.jitted().lower(*args, **kwargs)

    def _cache_size(self) -> int:
        return self.jitted()._cache_size()


def program(*, static_argnames: Sequence[str] = ()) -> Callable[[Callable], Program]:
    """Decorator: ``@program(static_argnames=("logits_fn", "cfg"))``."""
    return lambda fun: Program(fun, static_argnames)


__all__ = ["Program", "WORKAROUND", "compiler_options", "program"]
