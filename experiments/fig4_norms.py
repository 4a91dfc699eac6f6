"""Paper 000, Figure 4: robustness across norms (l_inf-trained models in l_2 and the reverse).

The same models drawn in both norms: ST, l_inf AT at 0.1 and 0.3 and l_2 AT at
1.5 (zoo CNNs on our MNIST), from the shared held-out evaluation of
``table1_fig2.py``. The paper (CIFAR-10, MMR+AT models) finds that (1) the
model trained for l_inf is more robust than the one trained for l_2 in *both*
norms, (2) the two panels look alike, yet (3) both contain curve
intersections, so the ranking still depends on the threshold. We compare the
l_inf-0.3 and l_2-1.5 models by the fraction of the threshold range where each
has the lower robust error (exact: integrated over the step functions, up to
the largest finite distance of either), and list every crossing.

    python experiments/fig4_norms.py --out results/experiments/fig4_norms
"""
from __future__ import annotations

import os

import numpy as np

from _common import claim, fmt, parse_args, write_result, zoo_evaluation

MODELS = ("mnist-cnn-st", "mnist-cnn-at-linf-0.1", "mnist-cnn-at-linf-0.3", "mnist-cnn-at-l2-1.5")


def dominance(da, db):
    """Fractions of ``[0, E]`` (E = largest finite distance of either) where ``R_a < R_b`` and ``R_b < R_a``,
    and the signed area ``int (R_b - R_a)`` (positive: a more robust), all exact on the step functions."""
    from rcurves.curves import robustness_curve

    fin = np.concatenate([da[np.isfinite(da)], db[np.isfinite(db)]])
    top = float(fin.max()) if fin.size else 1.0
    knots = np.unique(np.concatenate([[0.0], fin, [top]]))
    ra = np.asarray(robustness_curve(da, knots), np.float64)
    rb = np.asarray(robustness_curve(db, knots), np.float64)
    width = np.diff(knots)
    diff = (rb - ra)[:-1]                     # constant on [knots[k], knots[k+1])
    return {"range": top, "a_better": float(width[diff > 0].sum() / top), "b_better": float(width[diff < 0].sum() / top),
            "area_b_minus_a": float(np.sum(diff * width))}


def main(argv=None):
    args = parse_args(__doc__, "fig4_norms", argv)
    ev, models = zoo_evaluation(args, MODELS, norms=("linf", "l2"))
    a, b = "AT-linf-0.3", "AT-l2-1.5"
    dom = {norm: dominance(ev.distance(a, norm), ev.distance(b, norm)) for norm in ("linf", "l2")}
    flips = {norm: [f for f in ev.flips(norm) if f["eps"]] for norm in ("linf", "l2")}
    at_eps = {norm: {m: {f"{e:g}": float(ev.robust_error(m, norm, e)) for e in eps} for m in ev.labels}
              for norm, eps in (("linf", (0.1, 0.3)), ("l2", (1.0, 1.5, 2.0)))}
    figures = [_plot(ev, args.out)]
    both = dom["linf"]["a_better"] > 0.5 and dom["l2"]["a_better"] > 0.5
    claims = [
        claim("000", "Figure 4 / Section 3.2.3 (1)",
              "The model trained against l_inf is more robust than the one trained against l_2 in both norms "
              "(MMR+AT on CIFAR-10).",
              f"{a} vs {b} on {int(ev.data.x.shape[0])} MNIST points: {a} has the lower robust error on "
              f"{dom['linf']['a_better']:.0%} of the l_inf range (up to {fmt(dom['linf']['range'])}) and on "
              f"{dom['l2']['a_better']:.0%} of the l_2 range (up to {fmt(dom['l2']['range'])}); robust errors at l_2 "
              f"1.5: {a} {at_eps['l2'][a]['1.5']:.3f}, {b} {at_eps['l2'][b]['1.5']:.3f}; at l_inf 0.3: {a} "
              f"{at_eps['linf'][a]['0.3']:.3f}, {b} {at_eps['linf'][b]['0.3']:.3f}",
              "reproduced" if both else "differs",
              "" if both else ("on our MNIST CNNs the l_inf-trained model is not the more robust one in "
                               + " and ".join(k for k in ("linf", "l2") if dom[k]["a_better"] <= 0.5)
                               + ": robustness does not transfer across norms as it did for the paper's CIFAR "
                               "models")),
        claim("000", "Figure 4 / Section 3.2.3 (3)",
              "In both norms the curves of the differently trained models intersect: the ranking depends on the "
              "threshold in both.",
              "; ".join(f"{norm}: {len(flips[norm])} crossing pairs ("
                        + ", ".join(f"{f['a']}/{f['b']} at {fmt(f['eps'][0], 3)}" for f in flips[norm][:5]) + ")"
                        for norm in ("linf", "l2")),
              "reproduced" if flips["linf"] and flips["l2"] else "differs",
              "" if flips["linf"] and flips["l2"] else "no crossings in one of the norms"),
    ]
    payload = {"dominance": dom, "robust_error": at_eps, "crossings": flips, "clean_accuracy": ev.accuracy}
    write_result(args, payload, claims, figures)
    return payload


def _plot(ev, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rcurves.plotting import step_curve

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (norm, hi) in zip(axes, (("linf", 0.6), ("l2", 5.0))):
        for m in ev.labels:
            e, v = step_curve(ev.distance(m, norm), hi)
            ax.step(e, v, where="post", label=m)
        ax.set_xlim(0, hi)
        ax.set_xlabel(f"{norm} eps")
        ax.set_ylabel("robust error")
        ax.set_title(f"{norm} robustness curves")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = os.path.join(out, "fig4_norms.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


if __name__ == "__main__":
    main()
