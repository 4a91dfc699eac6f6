"""Robustness over training: the curves of one model's checkpoints, epoch by epoch.

A *sweep* evaluates many checkpoints of one architecture on the same points
(paired). Because a toolkit model is a pytree callable
(:class:`rcurves.models.ModelFn`), its parameters are traced arguments of the
attack programs: the first checkpoint compiles them, every later one reuses
them (tested by a compilation counter in ``tests/pipeline/test_sweep.py``).

    from rcurves.pipeline import sweep
    sw = sweep.checkpoint_sweep("mnist-full-cnn-at-linf-0.3", every=2, norm="linf", n=500)
    print(sweep.table(sw)); sweep.plot(sw, "results/sweep/sweep.png")

:func:`checkpoint_sweep` trains a zoo entry keeping a checkpoint every
``every`` epochs (``rcurves.models.zoo.load(..., checkpoint_every=...)``) and
evaluates each; :func:`evaluate_checkpoints` takes any ``{epoch: model}``
(checkpoint folders, ``logits_fn``\\ s). The result holds the per-point
distances of every epoch, from which :func:`rows` gives clean accuracy,
median distance and robust error at chosen thresholds per epoch, and
:func:`plot` draws them with the curves themselves coloured by epoch.
``rcurves sweep`` is the command.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

import numpy as np

__all__ = ["Sweep", "checkpoint_epochs", "checkpoint_sweep", "evaluate_checkpoints", "plot", "rows", "save", "table"]


class Sweep(NamedTuple):
    """Checkpoints of one model evaluated on the same points.

    ``epochs``: the epochs, sorted; ``labels``: the evaluation's label of each
    (``'epoch 12'``); ``evaluation``: :class:`rcurves.pipeline.evaluation.Evaluation`;
    ``norm`` and ``thresholds``: what :func:`rows` reports; ``name``: the model.
    """

    name: str
    epochs: List[int]
    labels: List[str]
    evaluation: Any
    norm: str
    thresholds: Sequence[float]


def _label(epoch: int) -> str:
    return f"epoch {epoch}"


def evaluate_checkpoints(models: Mapping[int, Any], data, *, norm: str = "linf", thresholds: Sequence[float] = (),
                         name: str = "model", **evaluate_kw) -> Sweep:
    """Evaluate ``{epoch: model}`` (checkpoint folders, ``ZooModel``, ``logits_fn``) on the same points.

    ``data`` and ``evaluate_kw`` as :func:`rcurves.pipeline.evaluation.evaluate` (``n``,
    ``seed``, ``attack``, ``out_dir``, ...).
    """
    from attacks.checks import check_norm
    from rcurves.pipeline.evaluation import evaluate

    if not models:
        raise ValueError("models: expected at least one checkpoint")
    norm = check_norm(norm)
    epochs = sorted(int(e) for e in models)
    thr = tuple(float(t) for t in thresholds)
    labelled = {_label(e): models[e] for e in epochs}
    ev = evaluate(labelled, data, norms=(norm,), thresholds={norm: thr} if thr else None, **evaluate_kw)
    return Sweep(name, epochs, [_label(e) for e in epochs], ev, norm, thr or tuple(ev.thresholds[norm]))


def checkpoint_epochs(paths: Sequence[str]) -> Dict[int, str]:
    """``{epoch: path}`` of checkpoint folders given in order: each one's ``metrics['epoch']`` if stored
    (the zoo's epoch checkpoints), else its position (1, 2, ...). ``ValueError`` for a folder that is not
    a checkpoint."""
    import json

    from rcurves.models.checkpoint import META_FILE

    out = {}
    for i, path in enumerate(paths):
        meta = os.path.join(path, META_FILE)
        if not os.path.isfile(meta):
            raise ValueError(f"{path}: not a checkpoint folder (no {META_FILE})")
        with open(meta) as f:
            epoch = json.load(f).get("metrics", {}).get("epoch", i + 1)
        out[int(epoch)] = path
    return out


def checkpoint_sweep(name, *, every: int, data=None, norm: str = "linf", thresholds: Sequence[float] = (),
                     n: Optional[int] = 500, cache: Optional[str] = None, progress: bool = True,
                     **evaluate_kw) -> Sweep:
    """Train a zoo entry keeping a checkpoint every ``every`` epochs (if not cached) and evaluate each.

    Args:
      name: a zoo entry name or :class:`rcurves.models.zoo.ZooEntry`.
      every: keep a checkpoint every that many epochs (and the last).
      data: points (default: the entry's held-out split).
      norm, thresholds: the threat model and the thresholds of :func:`rows`.
      n: a random sample of that many points (``seed``), the same for every epoch.
      cache: the zoo's cache folder.
      evaluate_kw: more arguments of :func:`rcurves.pipeline.evaluation.evaluate`.
    """
    from rcurves.models import zoo

    entry = name if isinstance(name, zoo.ZooEntry) else zoo.entry(name)
    final = zoo.load(entry, cache=cache, checkpoint_every=every, progress=progress)
    kept = dict(zoo.epoch_checkpoints(entry, cache))
    epochs = zoo.kept_epochs(entry, every)
    models = {e: kept[e] for e in epochs}
    if data is None:
        data = entry.dataset
    sw = evaluate_checkpoints(models, data, norm=norm, thresholds=thresholds, name=final.name, n=n,
                              progress=progress, **evaluate_kw)
    return sw


def rows(sw: Sweep) -> List[Dict[str, Any]]:
    """Per epoch: clean accuracy, median distance and robust error at each threshold."""
    out = []
    for e, lab in zip(sw.epochs, sw.labels):
        d = sw.evaluation.distance(lab, sw.norm)
        rec = {"epoch": e, "clean_accuracy": float(sw.evaluation.accuracy[lab]),
               "median_distance": float(np.median(d)), "n": int(d.shape[0])}
        for t in sw.thresholds:
            rec[f"R({t:g})"] = float(np.mean(d <= t))
        out.append(rec)
    return out


def table(sw: Sweep) -> str:
    """The :func:`rows` as a text table."""
    rs = rows(sw)
    cols = ["epoch", "clean_accuracy", "median_distance"] + [f"R({t:g})" for t in sw.thresholds]
    lines = [f"{sw.name}, {sw.norm}, n = {rs[0]['n'] if rs else 0} points", "  ".join(f"{c:>15}" for c in cols)]
    for r in rs:
        lines.append("  ".join(f"{r[c]:>15.4g}" if isinstance(r[c], float) else f"{r[c]:>15}" for c in cols))
    return "\n".join(lines)


def plot(sw: Sweep, path: str, title: Optional[str] = None) -> str:
    """Two panels: robust error at the thresholds and median distance per epoch; the curves by epoch."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from rcurves.plotting import _save, step_curve

    rs = rows(sw)
    fig = Figure(figsize=(11, 4.2))
    ax1, ax2 = fig.subplots(1, 2)
    ep = [r["epoch"] for r in rs]
    for t in sw.thresholds:
        ax1.plot(ep, [r[f"R({t:g})"] for r in rs], marker="o", ms=3, label=f"robust error at {t:g}")
    ax1.plot(ep, [1 - r["clean_accuracy"] for r in rs], "k--", lw=1, label="clean error")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("error")
    ax1.set_ylim(0, 1)
    tw = ax1.twinx()
    tw.plot(ep, [r["median_distance"] for r in rs], color="grey", lw=1.5, label="median distance")
    tw.set_ylabel(f"median {sw.norm} distance")
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = tw.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, fontsize=7, loc="center right")
    cmap = plt.get_cmap("viridis")
    dmax = max((float(np.max(np.where(np.isfinite(d), d, 0.0))) for d in
                (sw.evaluation.distance(lab, sw.norm) for lab in sw.labels)), default=1.0) or 1.0
    for i, lab in enumerate(sw.labels):
        xs, ys = step_curve(sw.evaluation.distance(lab, sw.norm), eps_max=dmax)
        ax2.step(xs, ys, where="post", color=cmap(i / max(1, len(sw.labels) - 1)), lw=1.2,
                 label=lab if i in (0, len(sw.labels) - 1) or len(sw.labels) <= 6 else None)
    for t in sw.thresholds:
        ax2.axvline(t, color="k", lw=0.5, ls=":")
    ax2.set_xlabel(f"{sw.norm} radius eps")
    ax2.set_ylabel("robust error R(eps)")
    ax2.set_ylim(0, 1)
    ax2.legend(fontsize=7, loc="lower right")
    fig.suptitle(title or f"{sw.name}: robustness over training ({sw.norm}, n = {rs[0]['n'] if rs else 0})")
    fig.tight_layout()
    _save(fig, path)
    return path


def save(sw: Sweep, out_dir: str) -> List[str]:
    """``sweep.json`` (rows and per-epoch distances), ``sweep.csv``, ``sweep.png`` in ``out_dir``."""
    import csv
    import io

    from rcurves.files import atomic_write_bytes, json_list, write_json

    os.makedirs(out_dir, exist_ok=True)
    rs = rows(sw)
    doc = {"model": sw.name, "norm": sw.norm, "thresholds": list(sw.thresholds), "rows": rs,
           "data": sw.evaluation.data.name, "settings": sw.evaluation.settings,
           "distances": {str(e): json_list(sw.evaluation.distance(lab, sw.norm))
                         for e, lab in zip(sw.epochs, sw.labels)}}
    paths = [os.path.join(out_dir, "sweep.json"), os.path.join(out_dir, "sweep.csv"),
             os.path.join(out_dir, "sweep.png")]
    write_json(paths[0], doc)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rs[0]) if rs else ["epoch"])
    w.writeheader()
    w.writerows(rs)
    atomic_write_bytes(paths[1], buf.getvalue().encode())
    plot(sw, paths[2])
    return paths
