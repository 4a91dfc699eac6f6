"""``batch="auto"``: branch and bound's parents per step, sized to the device.

A step of branch and bound bounds the ``2 B`` children of ``B`` parents side by side (``vmap``). On an
accelerator a larger ``B`` fills the device (alpha-beta-CROWN bounds thousands of subdomains per pass); on a
CPU the cores are full at a few parents, and a larger ``B`` only makes each step longer (and the search less
best-first). The rule:

    batch = the largest power of two <= min(DEVICE_CAP[platform], the memory fit)

* :data:`DEVICE_CAP`: the most parents per step by platform: on a CPU the batch measured fastest
  (``benchmarks/verify_speed.py --batch-sweep``, below), on GPUs and TPUs :data:`MAX_BATCH`;
* the memory fit: XLA's memory analysis (temporaries + arguments + outputs, ``attacks.memory
  .compiled_bytes``) of the compiled program that runs the search's steps: ``bab_host.bab_search``'s bound
  step (``bab_step._search_split``, on the ball's own arrays; its frontier, which grows with the search, gets
  the rest of the memory), or ``certified_radius(method='bab')``'s whole search (``bab_device.bab_jit``, its
  frontier of ``budget + 2 batch + 1`` slots included). It is read first at the cap: where
  ``SAFETY * bytes(cap)`` fits :data:`BATCH_FRACTION` of the device's free memory (``attacks.memory
  .available_bytes``) the cap is taken (one compilation, the one the search runs first: the jitted call
  reuses it); otherwise also at :data:`PROBE` parents, and the line through both (``attacks.memory
  .LinearBytes``) gives the largest power of two whose bytes fit (at least 1).

The choice is cached per platform and device kind, cap, budget and the caller's key (the program's settings
and the shapes of its arguments: the architecture, the rows recomputed per subdomain, the cuts, the points):
it costs a compilation once per process, when the search compiles anyway.

**How the CPU cap was chosen.** ``python benchmarks/verify_speed.py --batch-sweep``
(``benchmarks/measured/verify_batch_sweep.json``): ``verify``'s per-margin search on the hardest margin of three
boxes of the 784-256-256-10 MNIST MLP that ``verify`` leaves open (eps 0.03 points 3 and 16, eps 0.05 point 6),
10 s per batch and box, twice, warm, on the project's shared 2-core CPU machine (load about 4): the median
over the boxes of subdomains per second (from the first step after the root) was 574 at batch 8, 479 at 16,
483 at 32, 317 at 64 and 227 at 128, with XLA's bytes of the bound step 9.6, 17.0, 31.7, 77.2 and 152 MiB;
at a load of about 2, 747, 659, 705, 556 and 221. The cores are full at 8 parents: a larger batch only
makes each step longer. No accelerator was measured: the GPU and TPU cap is alpha-beta-CROWN's order of
magnitude, bounded by the memory fit.
"""
from __future__ import annotations

from typing import Callable, Hashable, NamedTuple, Optional

import jax

from attacks.memory import LinearBytes, available_bytes, compiled_bytes
from attacks.precision import exact_precision

#: The largest batch ``"auto"`` chooses (parents per step; ``2 * MAX_BATCH`` children bounded at once).
MAX_BATCH = 4096
#: The most parents per step by platform (``jax.Device.platform``; others: :data:`MAX_BATCH`). CPU: the fastest
#: batch measured (8: 574 subdomains/s against 479 at 16 and 317 at 64; see the module doc).
DEVICE_CAP = {"cpu": 8, "gpu": MAX_BATCH, "cuda": MAX_BATCH, "rocm": MAX_BATCH, "tpu": MAX_BATCH}
#: Share of the device's free memory the bound step may use (the frontier, which doubles when full, the rest).
BATCH_FRACTION = 0.25
#: Headroom over XLA's accounting of the step (the runtime's own buffers, the children copied to the frontier).
SAFETY = 1.25
#: The second batch measured where the cap does not fit.
PROBE = 8


class BatchChoice(NamedTuple):
    """What ``"auto"`` chose and why (bytes).

    Attributes:
      batch: parents per step (a power of two in ``[1, cap]``).
      cap: :data:`DEVICE_CAP` of the device.
      step_bytes: XLA's bytes of the bound step at ``batch`` parents (measured at the cap, else the fit's).
      budget_bytes: the memory planned for (:data:`BATCH_FRACTION` of the free memory, unless given).
      fits: ``SAFETY * step_bytes <= budget_bytes`` (False only when not even one parent fits: then 1).
      line: the fit ``bytes(B) = fixed + per_item * B`` where the cap did not fit (else None).
    """

    batch: int
    cap: int
    step_bytes: int
    budget_bytes: int
    fits: bool
    line: Optional[LinearBytes] = None


_CHOICES: dict = {}


def device_cap(device=None) -> int:
    """:data:`DEVICE_CAP` of ``device`` (default the first device)."""
    dev = jax.devices()[0] if device is None else device
    return int(DEVICE_CAP.get(dev.platform, MAX_BATCH))


def floor_pow2(n: int) -> int:
    """The largest power of two ``<= max(1, n)``."""
    return 1 << (max(1, int(n)).bit_length() - 1)


@exact_precision
def choose(lower: Callable[[int], "jax.stages.Lowered"], key: Hashable, *, cap: Optional[int] = None,
           budget_bytes: Optional[int] = None) -> BatchChoice:
    """The batch for the bound step that ``lower(B)`` lowers for ``B`` parents (see the module doc), cached
    under ``key`` (with the device and the budget). ``cap``: default :func:`device_cap`; ``budget_bytes``:
    default :data:`BATCH_FRACTION` of ``attacks.memory.available_bytes()``."""
    dev = jax.devices()[0]
    cap = floor_pow2(min(MAX_BATCH, device_cap(dev) if cap is None else int(cap)))
    full = (dev.platform, dev.device_kind, cap, budget_bytes, key)
    if full in _CHOICES:
        return _CHOICES[full]
    budget = int(BATCH_FRACTION * available_bytes(dev)) if budget_bytes is None else int(budget_bytes)
    at_cap = compiled_bytes(lower(cap).compile())
    if SAFETY * at_cap <= budget or cap == 1:
        choice = BatchChoice(cap, cap, at_cap, budget, bool(SAFETY * at_cap <= budget))
    else:
        probe = min(PROBE, cap // 2)
        line = LinearBytes.fit(probe, compiled_bytes(lower(probe).compile()), cap, at_cap)
        batch = floor_pow2(line.largest(budget, SAFETY, cap))
        choice = BatchChoice(batch, cap, line.bytes_for(batch), budget, bool(SAFETY * line.bytes_for(batch) <= budget),
                             line)
    _CHOICES[full] = choice
    return choice


def shapes_key(*trees) -> tuple:
    """A hashable key of the structure, shapes and dtypes of ``trees`` (the arguments of a program)."""
    leaves, treedef = jax.tree_util.tree_flatten(trees)
    return (str(treedef), tuple((tuple(getattr(a, "shape", ())), str(getattr(a, "dtype", type(a).__name__)))
                                for a in leaves))


__all__ = ["BATCH_FRACTION", "BatchChoice", "DEVICE_CAP", "MAX_BATCH", "PROBE", "SAFETY", "choose", "device_cap",
           "floor_pow2", "shapes_key"]
