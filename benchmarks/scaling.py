"""Time and peak memory vs number of points and input dimension.

Each measurement runs in a fresh subprocess (so its peak RSS is its own; read
from ``VmHWM`` in ``/proc/self/status``) on points stored in a ``.npy`` file
opened with ``np.load(..., mmap_mode='r')``:

* ``linear``: ``rcurves.linear_distance(w, b, x_memmap, 2)`` on MNIST-sized
  rows (784 features), n = 1k ... 1M (the 1M file is 3.1 GB). A memory map is
  streamed in chunks of ~48 MB whose pages are released after reading, so
  memory should not grow with n;
* ``mlp``: ``attacks.minimal_distance`` (l_inf) on a 784-256-10 ReLU MLP via
  ``rcurves.map_points`` (chunks of 1024 points), n = 1k ... 100k, with a
  *cheap* attack budget at every n: ``search_steps=2, steps=5`` (3 PGD runs of
  5 steps per point: ~15 gradient evaluations), ``eps_max=1``;
* ``interclass``: ``rcurves.interclass_distances`` (l_2, blocks of 1024):
  n^2 pairs, so time ~ n^2; memory ~ n (the points, plus a fixed block^2 buffer);
* ``dim``: ``linear_distance`` at n = 20k for d = 64 ... 12,288.

Reported per run: ``seconds`` (after a warm-up call on the first points with
the same chunk shapes, so compilation is outside the timing), ``peak_rss_mb``
(process peak) and ``growth_mb`` (peak minus the peak after the warm-up: the
memory the measured call itself added). The summary fits ``time ~ size^a``
(least squares of log time on log size, the smallest size dropped: fixed
start-up cost dominates there) and the growth of memory with n in MB per 1,000
points. The data files are freshly written, hence in the page cache: times
are not disk-bound.

    python benchmarks/scaling.py [--quick] [--out results/benchmarks/scaling.json]
    python benchmarks/scaling.py --only linear --sizes 1000000   # one case
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS, load_string, machine_info, print_table, write_json  # noqa: E402

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
        return rcurves.linear_distance(w, 0.0, xs, 2)          # a memmap: streamed
    if kind == "mlp":
        # keep only the distances: a whole MinimalResult would hold x_adv (n x d) on the host
        run = lambda xc, yc, key: attacks.minimal_distance(
            f, xc, jnp.argmax(f(xc), -1), key=key, norm="linf", eps_max=1.0, search_steps=2,
            steps=5).distance
        return rcurves.map_points(run, xs, np.zeros(m, np.int32), chunk_size=1024,
                                  key=jax.random.PRNGKey(0))
    y = (np.arange(m) % 10).astype(np.int32)
    return rcurves.interclass_distances(np.asarray(xs), y, 2, block=1024)
# warm-up: compile outside the timing, with the chunk shapes of the real call
stream_rows = max(1, rcurves.exact.linear._STREAM_BYTES // (x.itemsize * d))   # linear_distance's chunk
warm = {"linear": stream_rows, "dim": stream_rows, "mlp": 1024, "interclass": 1024}[kind]
jax.block_until_ready(job(x[: min(n, warm)]))
before = hwm_mb()
t0 = time.perf_counter()
out = jax.block_until_ready(job(x))
t = time.perf_counter() - t0
rss = hwm_mb()
print(json.dumps({"seconds": t, "peak_rss_mb": rss, "growth_mb": rss - before,
                  "n_out": int(np.shape(out)[0]), "finite": int(np.isfinite(np.asarray(out)).sum())}))
"""

PLANS = {
    "full": {
        "linear": [1_000, 10_000, 100_000, 1_000_000],
        "mlp": [1_000, 3_000, 10_000, 30_000, 100_000],
        "interclass": [1_000, 2_000, 4_000, 8_000, 16_000],
        "dim": [64, 256, 1024, 4096, 12288],
    },
    "quick": {
        "linear": [1_000, 10_000, 100_000],
        "mlp": [1_000, 2_000, 4_000],
        "interclass": [500, 1_000, 2_000],
        "dim": [64, 256, 1024],
    },
}
DIM_N = 20_000


def write_points(path: str, n: int, d: int) -> None:
    """``n x d`` uniform [0, 1) float32 rows as a ``.npy``, written in 64k-row slabs."""
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, d))
    rng = np.random.default_rng(n * 7919 + d)
    for s in range(0, n, 65536):
        e = min(s + 65536, n)
        mm[s:e] = rng.random((e - s, d), dtype=np.float32)
    mm.flush()
    del mm


def measure(kind: str, n: int, d: int, tmp: str) -> dict:
    path = os.path.join(tmp, f"x_{n}_{d}.npy")
    if not os.path.exists(path):
        write_points(path, n, d)
    res = subprocess.run([sys.executable, "-c", CHILD, kind, str(n), str(d), path],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{kind} n={n} d={d} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def slope(xs, ys) -> float:
    """Least-squares slope of log y on log x."""
    lx, ly = np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float))
    return float(np.polyfit(lx, ly, 1)[0])


def summarize(rows) -> dict:
    summary = {}
    for kind in ("linear", "mlp", "interclass"):
        rr = sorted((r for r in rows if r["kind"] == kind), key=lambda r: r["n"])
        if len(rr) < 2:
            continue
        big = rr[1:] if len(rr) > 2 else rr
        ns = np.array([r["n"] for r in rr], float)
        summary[kind] = {
            "sizes": [r["n"] for r in rr],
            "time_exponent": slope([r["n"] for r in big], [r["seconds"] for r in big]),
            # memory: peak RSS against n, as MB per 1,000 points (0: bounded)
            "peak_mb_per_1k_points": float(np.polyfit(ns / 1000.0, [r["peak_rss_mb"] for r in rr], 1)[0]),
            "peak_mb_smallest": rr[0]["peak_rss_mb"], "peak_mb_largest": rr[-1]["peak_rss_mb"],
            "growth_mb_largest": rr[-1]["growth_mb"],
        }
    rr = sorted((r for r in rows if r["kind"] == "dim"), key=lambda r: r["d"])
    if len(rr) >= 2:
        big = rr[1:] if len(rr) > 2 else rr
        summary["dim"] = {
            "sizes": [r["d"] for r in rr],
            "time_exponent_in_d": slope([r["d"] for r in big], [r["seconds"] for r in big]),
            "peak_mb_smallest": rr[0]["peak_rss_mb"], "peak_mb_largest": rr[-1]["peak_rss_mb"],
        }
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="JSON path (default results/benchmarks/scaling[_quick].json)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke test)")
    ap.add_argument("--only", nargs="+", default=None, choices=("linear", "mlp", "interclass", "dim"),
                    help="run only these kinds")
    ap.add_argument("--sizes", nargs="+", type=int, default=None,
                    help="override the sizes (n, or d for 'dim') of the kinds run")
    ap.add_argument("--tmp", default=None, help="folder for the data files (default: a temporary one)")
    args = ap.parse_args(argv)
    plan = {k: list(v) for k, v in PLANS["quick" if args.quick else "full"].items()}
    if args.only:
        plan = {k: v for k, v in plan.items() if k in args.only}
    if args.sizes:
        plan = {k: list(args.sizes) for k in plan}
    out = args.out or os.path.join(RESULTS, "scaling_quick.json" if args.quick else "scaling.json")
    print(load_string(), flush=True)
    rows = []
    t_start = time.time()
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for kind, sizes in plan.items():
            for s in sizes:
                n, d = (DIM_N, s) if kind == "dim" else (s, 784)
                r = measure(kind, n, d, tmp)
                assert r["n_out"] == n, r
                rows.append({"kind": kind, "n": n, "d": d, **r})
                print(f"{kind:10s} n={n:>9,d} d={d:>6,d}  {r['seconds']:9.3f} s  "
                      f"peak {r['peak_rss_mb']:7.1f} MB  (+{r['growth_mb']:6.1f} MB in the call)", flush=True)
            for f in os.listdir(tmp):                       # free the disk between kinds
                os.unlink(os.path.join(tmp, f))
    summary = summarize(rows)
    print()
    print_table(rows, ["kind", "n", "d", "seconds", "peak_rss_mb", "growth_mb"], title="scaling")
    print("\nfitted exponents (time ~ size^a) and memory growth (MB per 1,000 points):")
    for k, v in summary.items():
        print(f"  {k:10s} {json.dumps(v)}")
    write_json(out, {"rows": rows, "summary": summary, "machine": machine_info(),
                     "mlp_attack": {"norm": "linf", "search_steps": 2, "steps": 5, "eps_max": 1.0,
                                    "chunk_size": 1024},
                     "wall_seconds": time.time() - t_start, "quick": args.quick})


if __name__ == "__main__":
    main()
