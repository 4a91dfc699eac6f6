"""Paper 004, Section 6.1: the estimator's margin of error over directions.

Per point, the sparsity estimate is a mean over random directions; its
precision is the standard deviation over directions ``sigma`` and the 95 %
margin ``1.96 sigma / sqrt(D)``. The paper: on CIFAR-10, with 100 directions,
sigma < 0.022 rad for every one of 1,000 points, hence "a +-0.002 margin".
Here: the MNIST ST and AT-l_2-1.5 CNNs at l_2 eps 1.5 (and ST at l_inf 0.1),
the first 40 vulnerable held-out points, 100 directions x 10 search steps x
20 PGD steps (the paper's budget), box [0, 1]. Also: the margin that the 16
directions of ``sparsity_tables`` give, and how it compares with the spread
over points (which sets the standard error of a residual sparsity).

    python experiments/sparsity_margin.py --out results/experiments/sparsity_margin
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

import _sparsity_common as S
from _common import claim, fmt, parse_args, write_result

MODELS = [("mnist-cnn-st", "ST", "l2"), ("mnist-cnn-at-l2-1.5", "AT-l2-1.5", "l2"), ("mnist-cnn-st", "ST", "linf")]
Z95 = 1.959964


def make_claims(rows, directions):
    """Claims from measure() rows with ``margin95`` and ``margin95_16`` added."""
    claims = []
    for r in rows:
        sd = r["direction_std"]
        unit = "rad" if r["norm"] == "l2" else "dims"
        point_sd = float(np.std(r["per_point"], ddof=1))
        if r["norm"] == "l2":
            ok = bool(np.max(sd) < 0.022)
            claims.append(claim(
                "004", f"Sec. 6.1 ({r['model']}, l_2): std over directions",
                "the standard deviation of l_2 sparsity over 100 directions is below 0.022 rad for every point "
                "(1,000 points, CIFAR-10)",
                f"{r['n_measured']} points, {directions} directions each: std median {fmt(np.median(sd))}, "
                f"90th percentile {fmt(np.quantile(sd, 0.9))}, max {fmt(np.max(sd))} rad; "
                f"{int(np.sum(sd < 0.022))} of {sd.size} points below 0.022",
                "reproduced" if ok else "differs",
                "" if ok else "sparsity varies much more across directions on these models than the paper reports "
                              "for its CIFAR-10 ResNets (different data, models, radius and input box)"))
        if r["norm"] != "l2":
            continue   # the paper's margin is for l_2; l_inf's is in the JSON
        mar = r["margin95"]
        claims.append(claim(
            "004", f"Sec. 6.1 ({r['model']}, {r['norm']}): 95% margin",
            "z sigma / sqrt(n) gives a +-0.002 rad margin with 100 directions (with sigma < 0.022; note that "
            "1.96 x 0.022 / sqrt(100) = 0.0043, so the paper's +-0.002 is itself off by a factor of two)",
            f"margin with {directions} directions: median {fmt(np.median(mar))}, max {fmt(np.max(mar))} {unit} per "
            f"point; with 16 directions (sparsity_tables): median {fmt(np.median(r['margin95_16']))} {unit}; the "
            f"spread over points is {fmt(point_sd)} {unit}, so a residual sparsity over N points has standard error "
            f"~{fmt(point_sd, 2)}/sqrt(N): the directions' share of it is "
            f"{fmt(np.sqrt(np.mean(sd ** 2) / 16) / point_sd, 2)} of the points' at 16 directions",
            "reproduced" if np.max(mar) <= 0.0045 else "differs",
            "" if np.max(mar) <= 0.0045 else
            "larger standard deviations over directions give a wider margin than the paper's"))

    return claims


def main(argv=None):
    args = parse_args(__doc__, name="sparsity_margin", argv=argv)
    b = S.budget(args)
    if not args.quick:
        b = dataclasses.replace(b, directions=100, n_sparsity=40, n_eval=400)
    ds = "digits" if args.quick else "mnist"
    x, y = S.test_points(ds, b.n_eval)
    specs = [(None, "ST", "l2")] if args.quick else MODELS
    rows = []
    for name, label, norm in specs:
        m = S.quick_model() if args.quick else S.zoo_model(args, name, label)
        r = S.measure(m, x, y, S.EPS[ds][norm], norm, b, args.seed)
        sd = r["direction_std"]
        r["margin95"] = Z95 * sd / math.sqrt(b.directions)
        r["margin95_16"] = Z95 * sd / 4.0
        rows.append(r)
        print(S.fmt_row(r), f"direction std median {np.median(sd):.3g} max {np.max(sd):.3g}", flush=True)

    claims = make_claims(rows, b.directions)

    figures = []
    try:
        import os

        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(rows), figsize=(4.5 * len(rows), 3.6), squeeze=False)
        for ax, r in zip(axes[0], rows):
            ax.hist(r["direction_std"], bins=20)
            if r["norm"] == "l2":
                ax.axvline(0.022, color="k", ls="--", label="paper's bound 0.022")
                ax.legend(fontsize=7)
            ax.set_xlabel("std over directions (" + ("rad" if r["norm"] == "l2" else "dims") + ")")
            ax.set_ylabel("points")
            ax.set_title(f"{r['model']} {r['norm']} eps={r['eps']:g}, {b.directions} dirs")
        fig.tight_layout()
        path = os.path.join(args.out, "sparsity_margin.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        figures.append(path)
    except ImportError:
        pass
    write_result(args, {"budget": b.__dict__, "rows": [
        {k: r[k] for k in ("model", "norm", "eps", "n_measured", "residual_sparsity", "residual_stderr",
                           "direction_std", "margin95", "margin95_16", "per_point")} for r in rows]}, claims, figures)
    return {"rows": rows, "claims": claims}


if __name__ == "__main__":
    main()
