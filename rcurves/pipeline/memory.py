"""Chunks that fit in memory: ``chunk_size="auto"`` from XLA's own memory analysis of the attack program.

A chunk of ``n`` points runs through compiled programs whose buffers grow
linearly in ``n``: the inputs and outputs, and the temporaries of the
attack's loops (on XLA:CPU the convolutions-as-patches rewrite of
``attacks.xla.loop_model`` holds ``kh * kw`` copies of each convolution's
input). :func:`program_bytes` compiles the default radius search
(``attacks.minimal._minimal_jit``, the largest of the default attack's
programs: the adaptive attack's probe and escalation chunks and CW hold
fewer lanes) for a given ``n`` without running it and reads
``compiled.memory_analysis()``: temporaries + arguments + outputs, in bytes,
exact for that program and independent of the machine's load.

:func:`auto_chunk_size` measures it at two chunk sizes (``PROBE_SIZES``),
fits ``bytes(n) = fixed + per_point * n`` and takes the largest ``n`` (at
most ``max_chunk``) whose ``SAFETY * bytes(n)`` fits the budget: by default
``DEFAULT_FRACTION`` of the memory available now (:func:`available_bytes`:
the free memory of the first device where the runtime reports it, else the
host's ``MemAvailable``; it and the fit live in ``attacks.memory``, shared with
branch and bound's ``batch="auto"``). It costs two compilations of the search program
(seconds on a CNN), so it is opt-in: ``evaluate(..., chunk_size="auto")``,
``rcurves curves --chunk-size auto``.

**The conv rewrite, where it must.** When not even one point fits the budget
with the rewrite (``ChunkChoice.fits`` would be False), the same fit is
measured with the model's convolutions left as they are
(``attacks.xla.PlainConvolutions``; two more compilations), and where that
fits, the choice says ``rewrite=False``: ``evaluate`` then runs that model and
norm without the rewrite, slower per gradient on XLA:CPU (ResNet-20: about
4.6x, ``docs/attacks.md``) but within the memory. Whenever one point fits with
the rewrite it is kept (a chunk of one point runs at nearly the speed per
point of a large one on a CPU; the rewrite's speed-up does not shrink with
the chunk). A model without convolutions compiles to the same program either
way, so nothing changes for it.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Tuple

import jax
import jax.numpy as jnp

from attacks.memory import LinearBytes, available_bytes, compiled_bytes

#: share of the available memory ``chunk_size="auto"`` plans for by default
DEFAULT_FRACTION = 0.5
#: the chunk sizes the linear fit is measured at
PROBE_SIZES = (1, 8)
#: headroom over the search program's own accounting (the runtime's buffers, the host copies of a chunk)
SAFETY = 1.25


@dataclasses.dataclass(frozen=True)
class ChunkChoice:
    """What ``auto_chunk_size`` chose and why (bytes).

    Attributes:
      chunk: points per chunk (``1 <= chunk <= max_chunk``).
      fixed_bytes, per_point_bytes: the fit ``bytes(n) = fixed + per_point * n``.
      budget_bytes: the memory planned for.
      fits: whether ``SAFETY * bytes(chunk) <= budget`` (False only when even one point does not fit, with
        the rewrite or without: the chunk is then 1, and the run may still fail for lack of memory).
      rewrite: whether the attacks keep ``attacks.xla.loop_model``'s conv-as-patches rewrite (False: the
        fit is that of the model with its convolutions as they are, ``attacks.xla.PlainConvolutions``).
    """

    chunk: int
    fixed_bytes: int
    per_point_bytes: int
    budget_bytes: int
    fits: bool
    rewrite: bool = True

    def bytes_for(self, n: int) -> int:
        return int(self.fixed_bytes + self.per_point_bytes * n)


def program_bytes(logits_fn: Callable, input_shape: Tuple[int, ...], norm: str, n: int, *,
                  bounds=(0.0, 1.0), n_classes: Optional[int] = None, rewrite: bool = True) -> int:
    """Bytes of the default ``norm`` radius search compiled for a chunk of ``n`` points of ``input_shape``
    (XLA's ``memory_analysis``: temporaries + arguments + outputs), with or without (``rewrite=False``) the
    conv-as-patches rewrite. Compiles, does not run."""
    from attacks import checks
    from attacks.minimal import _minimal_jit, search_config
    from attacks.xla import plain_convolutions

    norm = checks.check_norm(norm)
    n = checks.check_positive_int(n, "n")
    shape = tuple(int(s) for s in input_shape)
    x = jax.ShapeDtypeStruct((n,) + shape, jnp.float32)
    if n_classes is None:
        from rcurves.pipeline.runner import _n_classes

        n_classes = _n_classes(logits_fn, jax.ShapeDtypeStruct((1,) + shape, jnp.float32))
    cfg = search_config(norm, n_classes)
    lowered = _minimal_jit.lower(plain_convolutions(logits_fn, not rewrite), x, jax.ShapeDtypeStruct((n,), jnp.int32),
                                 jax.ShapeDtypeStruct((n, 2), jnp.uint32), jax.ShapeDtypeStruct((n,), jnp.float32),
                                 cfg=cfg, bounds=checks.check_bounds(bounds))
    return compiled_bytes(lowered.compile())


def auto_chunk_size(logits_fn: Callable, input_shape: Tuple[int, ...], norm: str, *, bounds=(0.0, 1.0),
                    budget_bytes: Optional[int] = None, fraction: float = DEFAULT_FRACTION,
                    max_chunk: int = 100) -> ChunkChoice:
    """The largest chunk (``<= max_chunk``) whose attack programs fit ``budget_bytes`` (default ``fraction``
    of :func:`available_bytes`), from the search program's memory at ``PROBE_SIZES`` points."""
    from attacks import checks

    if not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
        raise ValueError(f"fraction: expected a number in (0, 1], got {fraction!r}")
    max_chunk = checks.check_positive_int(max_chunk, "max_chunk")
    if budget_bytes is None:
        budget_bytes = int(fraction * available_bytes())
    budget_bytes = checks.check_positive_int(int(budget_bytes), "budget_bytes")
    def fit(rewrite: bool) -> ChunkChoice:
        a, b = PROBE_SIZES
        ba = program_bytes(logits_fn, input_shape, norm, a, bounds=bounds, rewrite=rewrite)
        bb = program_bytes(logits_fn, input_shape, norm, b, bounds=bounds, rewrite=rewrite)
        line = LinearBytes.fit(a, ba, b, bb)
        chunk = line.largest(budget_bytes, SAFETY, max_chunk)
        fits = bool(SAFETY * line.bytes_for(chunk) <= budget_bytes)
        return ChunkChoice(chunk, line.fixed, line.per_item, budget_bytes, fits, rewrite)

    with_rewrite = fit(True)
    if with_rewrite.fits or not _convolves(logits_fn, input_shape):
        return with_rewrite
    plain = fit(False)
    # the plain convolutions where they fit, or where neither fits, whichever needs less for one point
    return plain if plain.fits or plain.bytes_for(1) < with_rewrite.bytes_for(1) else with_rewrite


def _convolves(logits_fn: Callable, input_shape: Tuple[int, ...]) -> bool:
    """Whether the attacks would rewrite ``logits_fn``'s convolutions (XLA:CPU, a convolution in its graph)."""
    from attacks.xla import loop_model

    return loop_model(logits_fn, (1,) + tuple(input_shape)) is not logits_fn


__all__ = ["ChunkChoice", "DEFAULT_FRACTION", "PROBE_SIZES", "SAFETY", "auto_chunk_size", "available_bytes",
           "program_bytes"]
