"""What a compiled program needs and what the device has: the memory behind every ``"auto"`` size.

The attacks' ``chunk_size="auto"`` (``rcurves.pipeline.memory``) and branch and bound's ``batch="auto"``
(``rcurves.certify.bab_batch``) size their batches alike:

* :func:`compiled_bytes`: XLA's own accounting of a compiled program (``compiled.memory_analysis()``:
  temporaries + arguments + outputs), exact for that program and independent of the machine's load;
* :class:`LinearBytes`: that count measured at two sizes and fitted as ``bytes(n) = fixed + per_item * n``
  (the buffers of a program over a batch grow linearly in the batch), and the largest ``n`` whose bytes,
  times a safety factor, fit a budget;
* :func:`available_bytes`: the budget's base, the memory free now on the device the programs run on.
"""
from __future__ import annotations

import math
import os
from typing import NamedTuple

import jax


def available_bytes(device=None) -> int:
    """Memory available now, in bytes: ``device``'s (default the first device's) free memory where the runtime
    reports it (GPU, TPU: ``bytes_limit - bytes_in_use``), else the host's (``MemAvailable`` of
    ``/proc/meminfo``, else the physical memory by ``os.sysconf``)."""
    dev = jax.devices()[0] if device is None else device
    stats = None
    try:
        stats = dev.memory_stats()
    except Exception:  # noqa: BLE001 - CPU backends may not implement it
        stats = None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def compiled_bytes(compiled) -> int:
    """Bytes a compiled program holds while it runs (``jax.jit(f).lower(...).compile()``): XLA's temporaries +
    arguments + outputs. Raises ``RuntimeError`` where the backend reports no memory analysis."""
    ma = compiled.memory_analysis()
    if ma is None:
        raise RuntimeError("compiled_bytes: this backend reports no memory analysis")
    return int(ma.temp_size_in_bytes + ma.argument_size_in_bytes + ma.output_size_in_bytes)


class LinearBytes(NamedTuple):
    """``bytes(n) = fixed + per_item * n``: a program's memory as a function of its batch ``n``."""

    fixed: int
    per_item: int

    @classmethod
    def fit(cls, a: int, bytes_a: int, b: int, bytes_b: int) -> "LinearBytes":
        """The line through ``(a, bytes_a)`` and ``(b, bytes_b)`` (``a < b``), its slope at least one byte per
        item (rounded up) and its intercept at least 0."""
        per_item = max(1, int(math.ceil((bytes_b - bytes_a) / (b - a))))
        return cls(max(0, int(bytes_a - per_item * a)), per_item)

    def bytes_for(self, n: int) -> int:
        return int(self.fixed + self.per_item * n)

    def largest(self, budget_bytes: int, safety: float, cap: int) -> int:
        """The largest ``n`` in ``[1, cap]`` with ``safety * bytes(n) <= budget_bytes`` (1 where none fits)."""
        room = budget_bytes / safety - self.fixed
        return int(min(cap, max(1, math.floor(room / self.per_item))))


__all__ = ["LinearBytes", "available_bytes", "compiled_bytes"]
