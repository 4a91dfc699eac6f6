"""Measures of a model or a data set run at scale: adversarial sparsity and inter-class distances.

What :func:`rcurves.pipeline.evaluation.evaluate` is for distances, these are
for the other two measures the command line offers:

* :func:`sparsity_run` -- the adversarial sparsity (paper 004) of a model on
  every point of a data set, through :func:`rcurves.pipeline.runner.run_chunked`
  (chunked, atomic, resumable, one chunk per device), and
  :func:`save_sparsity` its ``sparsity.json``;
* :func:`interclass_run` -- every point's distance to the nearest point of
  another class (paper 000, Sec. 3.3) per norm, duplicates removed, and
  :func:`save_interclass` its ``interclass.json``, ``interclass.csv`` and
  ``interclass.png``.
"""
from __future__ import annotations

import csv
import io
import os
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from rcurves.files import json_float, json_list, write_json, write_text

SPARSITY_UNITS = {"l2": "mean angle (rad) of the cap", "linf": "mean number of free dimensions"}


def _safe_name(label: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
    return keep or "model"


class SparsityRun(NamedTuple):
    """Per-point adversarial sparsity of one model on a data set (``nan`` where not measured)."""

    model: Any            # rcurves.models.LoadedModel
    data: Any             # rcurves.data.Data
    norm: str
    eps: float
    config: Dict[str, Any]
    sparsity: np.ndarray  # (n,)

    @property
    def vulnerable(self) -> np.ndarray:
        return self.sparsity[np.isfinite(self.sparsity)]

    def summary(self) -> Dict[str, Any]:
        fin = self.vulnerable
        return {
            "format": "rcurves-sparsity", "version": 1, "model": self.model.label, "model_info": self.model.info,
            "data": {"name": self.data.name, "n": int(self.data.x.shape[0])}, "norm": self.norm, "eps": self.eps,
            "unit": SPARSITY_UNITS[self.norm], "config": self.config, "sparsity": json_list(self.sparsity),
            "n_vulnerable": int(fin.size),
            "mean_over_vulnerable": json_float(fin.mean()) if fin.size else None,
            "median_over_vulnerable": json_float(np.median(fin)) if fin.size else None,
        }

    def line(self) -> str:
        """One line for a terminal."""
        fin = self.vulnerable
        return (f"{self.model.label}: {self.norm} adversarial sparsity at eps={self.eps:g} on {self.data.name}: "
                f"{fin.size}/{self.sparsity.size} points vulnerable"
                + (f", {SPARSITY_UNITS[self.norm]} mean {fin.mean():.4g}, median {np.median(fin):.4g}"
                   if fin.size else ""))


def sparsity_run(model: Any, data: Any, norm: str, eps: float, *, directions: int = 8, search_steps: int = 8,
                 steps: int = 20, bounds: Optional[Tuple[float, float]] = (0.0, 1.0), seed: int = 0,
                 out_dir: Optional[str] = None, chunk_size: int = 100, resume: bool = False,
                 devices: Optional[int] = None, progress: bool = True) -> SparsityRun:
    """The adversarial sparsity of ``model`` at ``eps`` on every point of ``data``.

    Args:
      model: anything :func:`rcurves.models.load` takes.
      data: anything :func:`rcurves.data.as_data` takes.
      norm: ``'l2'`` (mean cap angle, radians) or ``'linf'`` (mean number of
        free dimensions): :func:`rcurves.sparsity.l2_sparsity` /
        :func:`rcurves.sparsity.linf_sparsity` with ``directions``,
        ``search_steps`` and ``steps``.
      out_dir: with it, the run is chunked under
        ``out_dir/runs/<model>__sparsity_<norm>`` and ``resume`` reuses its
        finished chunks (same settings and data); ``devices`` runs one chunk
        per device.

    Returns:
      :class:`SparsityRun` (``nan`` where a point is misclassified or robust at eps).
    """
    import jax

    from rcurves import sparsity
    from rcurves.data.loader import as_data
    from rcurves.models.loader import check_model_on_data, load
    from rcurves.pipeline.distributed import per_shard
    from rcurves.pipeline.runner import run_chunked

    if norm not in SPARSITY_UNITS:
        raise ValueError(f"norm: adversarial sparsity is defined for exactly one of l2, linf, got {norm!r}")
    if not eps > 0:
        raise ValueError(f"eps: expected a positive radius, got {eps}")
    model, data = load(model), as_data(data)
    check_model_on_data(model, data)
    func = sparsity.l2_sparsity if norm == "l2" else sparsity.linf_sparsity

    def chunk_fn(x, y, keys):
        v = func(model.logits_fn, x, y, eps, key=keys, n_directions=directions, search_steps=search_steps,
                 steps=steps, bounds=bounds)
        return {"sparsity": np.asarray(v, np.float64)}

    config = {"model": model.identity, "norm": norm, "eps": eps, "directions": directions,
              "search_steps": search_steps, "steps": steps, "bounds": list(bounds) if bounds else None}
    run_dir = None if out_dir is None else os.path.join(out_dir, "runs", f"{_safe_name(model.label)}__sparsity_{norm}")
    # per_shard: each device runs the estimator on its own chunk (it batches points on the host)
    res = run_chunked(per_shard(chunk_fn), data.x, data.y, key=jax.random.PRNGKey(seed), out_dir=run_dir,
                      config=config, chunk_size=min(chunk_size, data.x.shape[0]), resume=resume,
                      progress=progress, desc=f"{model.label} {norm} sparsity", devices=devices)
    return SparsityRun(model, data, norm, float(eps), config, np.asarray(res["sparsity"], np.float64))


def save_sparsity(run: SparsityRun, out_dir: str) -> List[str]:
    """Write ``out_dir/sparsity.json`` (per-point values, ``null`` where not measured, and the summary)."""
    path = os.path.join(out_dir, "sparsity.json")
    write_json(path, run.summary())
    return [path]


class InterclassRun(NamedTuple):
    """Inter-class distances of a data set, per norm, after removing duplicates."""

    data: Any                      # rcurves.data.Data (before deduplication)
    x: np.ndarray
    y: np.ndarray
    removed: int
    norms: List[str]
    thresholds: Dict[str, List[float]]
    distances: Dict[str, np.ndarray]

    def summary(self) -> Dict[str, Dict[str, Any]]:
        from rcurves.curves import robustness_curve

        out = {}
        for norm in self.norms:
            d = self.distances[norm]
            fin = d[np.isfinite(d)]
            out[norm] = {"smallest": json_float(fin.min()) if fin.size else None,
                         "median": json_float(np.median(d)),
                         "largest": json_float(fin.max()) if fin.size else None,
                         "fraction_within": {f"{e:g}": float(robustness_curve(d, e)) for e in self.thresholds[norm]}}
        return out

    def lines(self) -> List[str]:
        """The table for a terminal."""
        out = [f"Inter-class distances of {self.data.name}: {self.x.shape[0]} points ({self.removed} "
               f"conflicting/duplicate removed)", "norm  smallest   median    largest   fraction within each threshold"]
        for norm, s in self.summary().items():
            d = self.distances[norm]
            fin = d[np.isfinite(d)]
            fr = "  ".join(f"<= {k}: {v:.3f}" for k, v in s["fraction_within"].items())
            out.append(f"{norm:<5} {fin.min():<10.4g} {np.median(d):<9.4g} {fin.max():<9.4g} {fr}")
        return out


def interclass_run(data: Any, norms: Sequence[str] = ("linf", "l2", "l1"),
                   thresholds: Optional[Dict[str, Sequence[float]]] = None, *, progress: bool = True) -> InterclassRun:
    """Every point's distance to the nearest point of another class, per norm (exact duplicates removed first).

    ``thresholds`` (per norm; default :data:`rcurves.pipeline.report.DEFAULT_THRESHOLDS`) are where the
    fraction of points within is reported.
    """
    from rcurves.data.loader import as_data
    from rcurves.exact.interclass import deduplicate, interclass_distances
    from rcurves.pipeline.report import DEFAULT_THRESHOLDS

    data = as_data(data)
    norms = list(norms)
    thr = {n: list((thresholds or {}).get(n, DEFAULT_THRESHOLDS[n])) for n in norms}
    x, y, removed = deduplicate(data.x, data.y)
    it = norms
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(norms, desc="inter-class", unit="norm", leave=False)
    dists = {norm: np.asarray(interclass_distances(x, y, norm), np.float64) for norm in it}
    return InterclassRun(data, x, y, removed, norms, thr, dists)


def save_interclass(run: InterclassRun, out_dir: str) -> List[str]:
    """Write ``interclass.json``, ``interclass.csv`` (one row per point) and ``interclass.png``."""
    from rcurves.plotting import plot_step_curves

    os.makedirs(out_dir, exist_ok=True)
    doc = {"format": "rcurves-interclass", "version": 1,
           "data": {"name": run.data.name, "n": int(run.x.shape[0]), "duplicates_removed": run.removed},
           "norms": run.norms, "thresholds": run.thresholds,
           "distances": {n: json_list(run.distances[n]) for n in run.norms}, "summary": run.summary()}
    paths = [os.path.join(out_dir, f) for f in ("interclass.json", "interclass.csv", "interclass.png")]
    write_json(paths[0], doc)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["point", "label"] + run.norms)
    for i in range(run.x.shape[0]):
        w.writerow([i, int(run.y[i])] + [f"{run.distances[n][i]:.9g}" for n in run.norms])
    write_text(paths[1], buf.getvalue())
    plot_step_curves({"inter-class": run.distances}, paths[2], thresholds=run.thresholds,
                     title=f"inter-class distances, {run.data.name}")
    return paths


__all__ = ["InterclassRun", "SPARSITY_UNITS", "SparsityRun", "interclass_run", "save_interclass", "save_sparsity",
           "sparsity_run"]
