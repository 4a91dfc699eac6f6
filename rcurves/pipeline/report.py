"""Reports of an evaluation: the robust-error table with ranks, where rankings flip, files.

Given per-point distances ``{model: {norm: {'distance': (n,), ...}}}`` and
thresholds per norm, :func:`build_report` makes the JSON document and the
printed table of paper 000, Table 1 (robust error of every model at each
threshold, with its rank among the models) and names every exact crossing of
two models' robustness curves (:func:`ranking_flips`, from
``rcurves.exact_curve_intersections``), marked significant or noise by a
paired test (:func:`rcurves.claims.compare.significant_reversal`). :func:`write_report` writes it as
``curves.json``, ``curves.csv`` (the exact step curves at their knots),
``distances.csv``, ``table.txt`` and ``curves.png``.

JSON has no ``inf``: a point no attack broke is ``null`` in the files.
"""
from __future__ import annotations

import csv
import io
import math
import os
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from rcurves.files import json_float, json_list, write_json, write_text

DEFAULT_THRESHOLDS: Dict[str, Tuple[float, ...]] = {
    "linf": (0.05, 0.1, 0.2, 0.3),
    "l2": (0.5, 1.0, 1.5, 2.0),
    "l1": (2.0, 5.0, 10.0, 15.0),
}


def ranks(values: Sequence[float]) -> List[int]:
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
    data,
    models_info: Mapping[str, Mapping[str, Any]],
    settings: Mapping[str, Any],
) -> Tuple[Dict[str, Any], str]:
    """The JSON document and the printed table of an evaluation.

    ``data`` is a :class:`rcurves.data.Data` (its name, ``n`` and labels go
    into the document).
    """
    from rcurves.claims.compare import significant_reversal
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
            cells = "".join(f"{v:.3f} [{r}]".rjust(width) for v, r in zip(errs, ranks(errs)))
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
            doc["distances"][m][norm] = json_list(d)
            doc["attack_distances"][m][norm] = {k: json_list(v) for k, v in res.items() if k != "distance"}
            doc["robust_error"][m][norm] = {f"{e:g}": float(robust_error(d, float(e))) for e in thresholds[norm]}
            doc["median_distance"][m][norm] = json_float(np.median(d))
    for norm in norms:
        wins = [(m, np.asarray(distances[m][norm]["cw"]) < np.asarray(distances[m][norm]["pgd"]))
                for m in labels if "cw" in distances[m][norm]]
        if wins:
            doc.setdefault("cw_smaller_fraction", {})[norm] = {m: float(w.mean()) for m, w in wins}
            lines.append(f"{norm}: Carlini-Wagner found a smaller distance than the PGD radius search on "
                         + ", ".join(f"{m} {w.mean():.1%}" for m, w in wins) + " of the points")
    for norm in norms:
        own = {m: np.minimum(np.asarray(distances[m][norm]["pgd"]), np.asarray(distances[m][norm].get("cw", np.inf)))
               for m in labels if "cross" in distances[m][norm] and "pgd" in distances[m][norm]}
        wins = [(m, np.asarray(distances[m][norm]["cross"]) < own[m]) for m in own]
        if wins:
            doc.setdefault("cross_smaller_fraction", {})[norm] = {m: float(w.mean()) for m, w in wins}
            if any(w.any() for _, w in wins):
                lines.append(f"{norm}: another norm's verified adversarial was closer than the {norm} attacks' on "
                             + ", ".join(f"{m} {w.mean():.1%}" for m, w in wins) + " of the points (kept)")
    for norm in norms:
        spent = {m: distances[m][norm] for m in labels if "gradients" in distances[m][norm]}
        if spent:
            doc.setdefault("attack_budget", {})[norm] = {
                m: {"mean_gradients": float(np.mean(r["gradients"])),
                    "escalated_fraction": float(np.mean(np.asarray(r["escalated"]) > 0))} for m, r in spent.items()}
            lines.append(f"{norm}: adaptive attack: " + ", ".join(
                f"{m} {v['escalated_fraction']:.0%} of the points escalated, {v['mean_gradients']:.0f} gradients/point"
                for m, v in doc["attack_budget"][norm].items()))
    lines.append("Median distance (inf = no adversarial found for at least half the points):")
    for norm in norms:
        meds = "  ".join(f"{m}={np.median(np.asarray(distances[m][norm]['distance'])):.4g}" for m in labels)
        lines.append(f"  {norm:<5} {meds}")
    lines.append("")
    lines.append("Where the ranking flips (exact intersections of the robustness curves; [significant] when each "
                 "model is more robust than the other somewhere by an exact McNemar test, Bonferroni over thresholds "
                 "and pairs at 5%, else [noise]):")
    any_flip = False
    npairs = max(1, len(labels) * (len(labels) - 1) // 2)
    for norm in norms:
        doc["intersections"][norm] = []
        top = max(thresholds[norm]) if thresholds[norm] else math.inf
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                da, db = distances[a][norm]["distance"], distances[b][norm]["distance"]
                eps, first = ranking_flips(da, db)
                entry = {"a": a, "b": b, "eps": [float(v) for v in eps], "more_robust_first": {-1: a, 1: b}.get(first)}
                if eps.size:
                    entry["significant"] = significant_reversal(da, db, pairs=npairs)["found"]
                doc["intersections"][norm].append(entry)
                inside = eps[eps <= top]
                if not inside.size:
                    continue
                any_flip = True
                better = a if first < 0 else b
                other = b if better == a else a
                cuts = ", ".join(f"{v:.4g}" for v in inside[:6])
                more = f" (+{inside.size - 6} more)" if inside.size > 6 else ""
                tag = " [significant]" if entry["significant"] else " [noise]"
                if inside.size == 1:
                    lines.append(f"  {norm:<5} {a} vs {b}: {better} more robust for eps < {inside[0]:.4g}, "
                                 f"{other} from eps = {inside[0]:.4g} on{tag}")
                else:
                    lines.append(f"  {norm:<5} {a} vs {b}: {better} more robust for eps < {inside[0]:.4g}; "
                                 f"the order flips {inside.size} times, at eps = {cuts}{more}{tag}")
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
    write_text(path, buf.getvalue())


def write_distances_csv(path: str, distances, norms: Sequence[str], y: np.ndarray) -> None:
    """One row per point: its label and every model's distance per norm and attack."""
    labels = list(distances)
    buf = io.StringIO()
    w = csv.writer(buf)
    cols = [(m, norm, k) for m in labels for norm in norms for k in distances[m][norm]]
    w.writerow(["point", "label"] + [f"{m}|{norm}|{k}" for m, norm, k in cols])
    for i in range(y.shape[0]):
        w.writerow([i, int(y[i])] + [f"{float(distances[m][norm][k][i]):.9g}" for m, norm, k in cols])
    write_text(path, buf.getvalue())


def write_report(out_dir: str, doc, table: str, distances, thresholds, y: np.ndarray, title: str) -> List[str]:
    """``curves.json``, ``curves.csv``, ``distances.csv``, ``table.txt`` and ``curves.png`` in ``out_dir``."""
    from rcurves.plotting import plot_step_curves

    os.makedirs(out_dir, exist_ok=True)
    norms = doc["norms"]
    paths = [os.path.join(out_dir, f) for f in ("curves.json", "curves.csv", "distances.csv", "table.txt",
                                                  "curves.png")]
    write_json(paths[0], doc)
    write_curves_csv(paths[1], distances, norms)
    write_distances_csv(paths[2], distances, norms, y)
    write_text(paths[3], table + "\n")
    eps_max = {}
    for norm in norms:
        fin = np.concatenate([np.asarray(distances[m][norm]["distance"]) for m in distances])
        fin = fin[np.isfinite(fin)]
        hi = float(np.quantile(fin, 0.99)) * 1.05 if fin.size else 1.0
        eps_max[norm] = max(hi, 1.2 * max(thresholds[norm]))
    plot_step_curves(
        {m: {norm: distances[m][norm]["distance"] for norm in norms} for m in distances},
        paths[4], thresholds={k: list(thresholds[k]) for k in norms}, eps_max=eps_max, title=title,
    )
    return paths


__all__ = ["DEFAULT_THRESHOLDS", "build_report", "ranking_flips", "ranks", "write_curves_csv", "write_distances_csv",
           "write_report"]
