"""Paper 000, Figure 3: the curve of an adversarially trained model changes slope at its training eps.

The paper's MMR+AT models (MNIST and FMNIST, l_inf eps 0.1) have l_inf
curves that are flat up to about the training eps and then rise steeply,
"which could be a sign of overfitting to the specific threat models". We
measure the change of slope on the exact empirical step function: with a
window ``h = eps / 6``, the slope just below the training eps is
``(R(eps) - R(eps - h)) / h`` and just above ``(R(eps + h) - R(eps)) / h``
(the fractions of points whose distance falls in each window, per unit eps).
Uncertainty: DKW's simultaneous 95 % band on the curve (half-width
``sqrt(log(2 / 0.05) / (2 n))``) gives each slope an interval of +-2 x that
half-width / h; and under "no change of slope" the points in the two windows
split 50/50, which an exact binomial test checks. A change of slope is
"reproduced" when the curve is at least twice as steep just above as just
below and the binomial test rejects at 1 %. ST at the same eps is the
control. Distances: the shared held-out evaluation of ``table1_fig2.py``.

    python experiments/fig3_slope.py --out results/experiments/fig3_slope
"""
from __future__ import annotations

import math
import os

import numpy as np

from _common import claim, fmt, parse_args, write_result, zoo_evaluation

MODELS = ("mnist-cnn-st", "mnist-cnn-at-linf-0.1", "mnist-cnn-at-linf-0.2", "mnist-cnn-at-linf-0.3",
          "mnist-cnn-at-l2-1.5")


def slope_change(d, eps, h, alpha=0.05):
    """Slopes of the empirical curve of ``d`` just below and just above ``eps``, with DKW intervals."""
    from scipy.stats import binomtest

    d = np.asarray(d, np.float64)
    n = d.size
    k_below = int(np.sum((d > eps - h) & (d <= eps)))
    k_above = int(np.sum((d > eps) & (d <= eps + h)))
    half = math.sqrt(math.log(2.0 / alpha) / (2.0 * n))
    below, above = k_below / (n * h), k_above / (n * h)
    k = k_below + k_above
    p = 1.0 if k == 0 else float(binomtest(k_above, k, 0.5).pvalue)
    return {"eps": eps, "h": h, "k_below": k_below, "k_above": k_above, "slope_below": below, "slope_above": above,
            "ratio": (above / below) if below > 0 else (math.inf if above > 0 else 1.0),
            "slope_interval_halfwidth": 2 * half / h, "binomial_p": p}


def main(argv=None):
    args = parse_args(__doc__, "fig3_slope", argv)
    ev, models = zoo_evaluation(args, MODELS, norms=("linf", "l2"))
    rows = {}
    st = [m for m in ev.labels if models[m].entry.train.method == "st"][0]
    for m in ev.labels:
        tr = models[m].entry.train
        if tr.method != "at":
            continue
        eps, h = tr.eps, tr.eps / 6
        rows[m] = {"norm": tr.norm, "model": slope_change(ev.distance(m, tr.norm), eps, h),
                   "st_control": slope_change(ev.distance(st, tr.norm), eps, h)}
    figures = [_plot(ev, models, rows, args.out)]
    n = int(ev.data.x.shape[0])
    half = math.sqrt(math.log(2.0 / 0.05) / (2.0 * n))
    claims = []
    for m, r in rows.items():
        s, c = r["model"], r["st_control"]
        # the verdict: at least twice as steep above as below, and the 50/50 split rejected at 1 %
        # (the DKW intervals, simultaneous over all eps, are reported; they are far more conservative)
        sig = s["binomial_p"] < 0.01 and s["ratio"] > 2
        claims.append(claim(
            "000", f"Figure 3 ({m}, {r['norm']})",
            "The l_inf curve of a model adversarially trained at eps (MMR+AT, MNIST/FMNIST, eps 0.1) changes slope "
            "at approximately eps: flat below, steep above.",
            f"{'MNIST' if not args.quick else '--quick stand-in'}, {n} points, window h = {fmt(s['h'], 3)}: slope "
            f"{s['slope_below']:.3g} just below eps = {s['eps']:g} and {s['slope_above']:.3g} just above "
            f"(x{fmt(s['ratio'], 3)}; {s['k_below']} vs {s['k_above']} points, binomial p = {s['binomial_p']:.1e}; "
            f"DKW slope intervals +-{s['slope_interval_halfwidth']:.3g}); ST control at the same eps: "
            f"{c['slope_below']:.3g} -> {c['slope_above']:.3g}",
            "reproduced" if sig else "differs",
            "" if sig else ("the slope changes by less than a factor 2 at the training eps on this model"
                            if s["binomial_p"] < 0.01 else "no significant change of slope at the training eps on "
                            "this model")))
    payload = {"n": n, "dkw_halfwidth": half, "rows": rows}
    write_result(args, payload, claims, figures)
    return payload


def _plot(ev, models, rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rcurves.curves import dkw_band
    from rcurves.plotting import step_curve

    norms = sorted({r["norm"] for r in rows.values()}, key=lambda k: k != "linf")
    fig, axes = plt.subplots(1, len(norms), figsize=(6 * len(norms), 4), squeeze=False)
    n = int(ev.data.x.shape[0])
    for ax, norm in zip(axes[0], norms):
        hi = 2.2 * max(models[m].entry.train.eps for m, r in rows.items() if r["norm"] == norm)
        for m in ev.labels:
            tr = models[m].entry.train
            if not (tr.method == "st" or (m in rows and rows[m]["norm"] == norm)):
                continue
            e, v = step_curve(ev.distance(m, norm), hi)
            line = ax.step(e, v, where="post", label=m)[0]
            lo_b, hi_b = dkw_band(v, n)
            ax.fill_between(e, np.asarray(lo_b), np.asarray(hi_b), step="post", color=line.get_color(), alpha=0.12)
            if m in rows:
                ax.axvline(tr.eps, color=line.get_color(), ls="--", lw=0.8)
        ax.set_xlim(0, hi)
        ax.set_xlabel(f"{norm} eps")
        ax.set_ylabel("robust error")
        ax.set_title(f"{norm} curves, 95% DKW bands; dashed: training eps")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = os.path.join(out, "fig3_slope.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


if __name__ == "__main__":
    main()
