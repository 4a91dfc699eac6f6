"""Peak-memory measurements in a child process (test helpers for memory-mapped data)."""
import json
import os
import subprocess
import sys

import numpy as np

#: Child-script prelude: ``hwm_mb()``, the process's peak resident set (VmHWM) in MB.
HWM = r"""
def hwm_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
"""


def random_npy(path: str, rows: int = 32768, d: int = 784) -> str:
    """Write a float32 ``.npy`` of uniform rows (default: 100 MB of MNIST-sized rows)."""
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, d))
    mm[:] = np.random.default_rng(0).random((rows, d), dtype=np.float32)
    mm.flush()
    del mm
    return path


def run_child(script: str, *args: str) -> dict:
    """Run ``HWM + script`` in a fresh Python; return the JSON of its last output line.

    Freed buffers of 1 MB and more go back to the system at once
    (``MALLOC_MMAP_THRESHOLD_``): without this, glibc's growing mmap threshold
    keeps few-MB chunks in arenas that XLA's threads fragment, and the peak then
    measures the allocator, not what the toolkit holds (``rcurves.exact.linear``
    streams in 48 MB chunks, above that threshold, for this reason).
    """
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(1 << 20))
    res = subprocess.run([sys.executable, "-c", HWM + script, *args], capture_output=True, text=True,
                         timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])
