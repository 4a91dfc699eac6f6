"""Time and peak memory vs number of points and input dimension.

Each measurement runs in a fresh subprocess (so peak RSS is its own) that
streams the points through ``rcurves.map_points`` in fixed-size chunks:

* ``linear``: ``rcurves.linear_distance`` on a memory-mapped ``.npy`` of
  MNIST-sized rows (784 features), n from 1k to 1M;
* ``mlp``: ``attacks.minimal_distance`` (l_inf, small budget) on a 784-256-10
  MLP, n from 1k to 16k;
* ``interclass``: ``rcurves.interclass_distances`` (n^2 time, blocked memory);
* ``dim``: ``linear_distance`` at fixed n for d from 64 to 12,288.

Prints a table with the fitted exponent of time ~ n^a (slope of log time
against log n over the larger sizes) and writes JSON.

    python benchmarks/scaling.py --out results/benchmarks/scaling.json [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

CHILD = r"""
import json, sys, time
import numpy as np
import jax, jax.numpy as jnp
import attacks, rcurves
kind, n, d, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
x = np.load(path, mmap_mode="r")
rng = np.random.default_rng(0)
w = rng.normal(size=d).astype(np.float32)
def hwm_mb():
    # VmHWM belongs to this process image (ru_maxrss would carry the parent's over exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
W1 = jnp.asarray(rng.normal(size=(d, 256)) / np.sqrt(d), jnp.float32)
W2 = jnp.asarray(rng.normal(size=(256, 10)) / 16.0, jnp.float32)
f = lambda xb: jax.nn.relu(xb.reshape(xb.shape[0], -1) @ W1) @ W2
def job(xs):
    m = xs.shape[0]
    if kind in ("linear", "dim"):
        return rcurves.map_points(lambda xc: rcurves.linear_distance(w, 0.0, xc, 2), xs, chunk_size=8192)
    if kind == "mlp":
        run = lambda xc, yc, key: attacks.minimal_distance(
            f, xc, jnp.argmax(f(xc), -1), key=key, norm="linf", eps_max=1.0, search_steps=2, steps=5)
        return rcurves.map_points(run, xs, np.zeros(m, np.int32), chunk_size=1024, key=jax.random.PRNGKey(0)).distance
    y = (np.arange(m) % 10).astype(np.int32)
    return rcurves.interclass_distances(np.asarray(xs), y, 2, block=1024)
job(x[: min(n, 64)])          # compile outside the timing (same chunk shapes)
t0 = time.perf_counter()
out = job(x)
t = time.perf_counter() - t0
rss = hwm_mb()
print(json.dumps({"seconds": t, "peak_rss_mb": rss, "n_out": int(np.shape(out)[0])}))
"""


def measure(kind, n, d, tmp):
    path = os.path.join(tmp, f"x_{n}_{d}.npy")
    if not os.path.exists(path):
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, d))
        rng = np.random.default_rng(n)
        for s in range(0, n, 65536):
            e = min(s + 65536, n)
            mm[s:e] = rng.uniform(0, 1, size=(e - s, d)).astype(np.float32)
        mm.flush()
        del mm
    res = subprocess.run([sys.executable, "-c", CHILD, kind, str(n), str(d), path],
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def slope(ns, ts):
    ln, lt = np.log(np.asarray(ns, float)), np.log(np.asarray(ts, float))
    return float(np.polyfit(ln, lt, 1)[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/benchmarks/scaling.json")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    plans = {
        "linear": ([1_000, 10_000, 100_000, 1_000_000] if not args.quick else [1_000, 10_000, 100_000], 784),
        "mlp": ([1_000, 4_000, 16_000] if not args.quick else [1_000, 2_000, 4_000], 784),
        "interclass": ([1_000, 2_000, 4_000, 8_000] if not args.quick else [500, 1_000, 2_000], 784),
    }
    dims = [64, 256, 1024, 4096, 12288] if not args.quick else [64, 256, 1024]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, (ns, d) in plans.items():
            for n in ns:
                r = measure(kind, n, d, tmp)
                rows.append({"kind": kind, "n": n, "d": d, **r})
                print(f"{kind:10s} n={n:>9,d} d={d:>6,d}  {r['seconds']:8.2f} s  peak {r['peak_rss_mb']:8.1f} MB", flush=True)
        for d in dims:
            r = measure("dim", 20_000, d, tmp)
            rows.append({"kind": "dim", "n": 20_000, "d": d, **r})
            print(f"{'dim':10s} n={20_000:>9,d} d={d:>6,d}  {r['seconds']:8.2f} s  peak {r['peak_rss_mb']:8.1f} MB", flush=True)
    summary = {}
    for kind in ("linear", "mlp", "interclass"):
        rr = [r for r in rows if r["kind"] == kind]
        big = rr[1:]  # drop the smallest size (fixed start-up cost dominates)
        summary[kind] = {
            "time_exponent": slope([r["n"] for r in big], [r["seconds"] for r in big]),
            "peak_mb_smallest": rr[0]["peak_rss_mb"], "peak_mb_largest": rr[-1]["peak_rss_mb"],
        }
    rr = [r for r in rows if r["kind"] == "dim"]
    summary["dim"] = {"time_exponent_in_d": slope([r["d"] for r in rr[1:]], [r["seconds"] for r in rr[1:]])}
    print("\nfitted exponents (time ~ size^a):")
    for k, v in summary.items():
        print(f"  {k:10s} {json.dumps(v)}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"rows": rows, "summary": summary}, fh, indent=2)


if __name__ == "__main__":
    main()
