"""Paper 000, Figure 4: robustness across norms (l_inf-trained models in l_2 and the reverse).

The same models drawn in both norms: ST, l_inf AT at 0.1 and 0.3 and l_2 AT at
1.5 (zoo CNNs on full MNIST), on the shared held-out evaluation of
``table1_fig2.py`` (2,000 random test images, the same for every model). The
paper (CIFAR-10, MMR+AT models) finds that (1) the model trained for l_inf is
more robust than the one trained for l_2 in *both* norms, (2) the two panels
look alike, yet (3) both contain curve intersections, so the ranking still
depends on the threshold.

(1) compares AT-linf-0.3 with AT-l2-1.5 at every threshold where their order can
change (every distinct finite distance of either), by the exact two-sided
McNemar test on the same points, Bonferroni over the thresholds of both norms
(``rcurves.claims.verdicts.dominates``): reproduced only if the l_inf model is
significantly more robust somewhere in each norm and significantly less robust
nowhere. (3) counts significant ranking changes among the four models in each
norm: a pair counts only if each model is significantly more robust than the
other somewhere (``rcurves.claims.verdicts.ranking_changes``, Bonferroni over each
pair's thresholds and the 6 pairs; an exact crossing inside the noise does not
count); the paper's "multiple intersections" needs two in each norm. The
fraction of the range where each model is ahead (:func:`dominance`) is
reported, not tested.

    python experiments/000_global_comparison/fig4_norms.py --out results/experiments/fig4_norms
"""
from __future__ import annotations

import os
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
from shared import evaluation_sample, l2_repair_text, parse_args, with_linf_adversarial_l2, write_result, zoo_evaluation

from rcurves.claims.compare import knot_scan
from rcurves.claims.record import claim, fmt
from rcurves.claims.verdicts import all_of, dominates, ranking_changes  # noqa: E402

MODELS = ("mnist-full-cnn-st", "mnist-full-cnn-at-linf-0.1", "mnist-full-cnn-at-linf-0.3", "mnist-full-cnn-at-l2-1.5")
ALPHA = 0.05


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


def transfer_verdict(scans, names, alpha=ALPHA):
    """000 Figure 4 (1): ``a`` more robust than ``b`` in every norm of ``scans``.

    ``scans``: ``{norm: (eps (m,), only_a (m,), only_b (m,))}``; per norm
    :func:`rcurves.claims.verdicts.dominates` at level ``alpha / (total thresholds over the norms)``; the
    conjunction (worst verdict wins).
    """
    total = sum(len(e) for e, _, _ in scans.values())
    return all_of(*[dominates(oa, ob, alpha=alpha, tests=total, eps=e, names=names,
                              what=f"{names[0]} more robust than {names[1]} in {norm}")
                    for norm, (e, oa, ob) in scans.items()])


def main(argv=None):
    import itertools

    args = parse_args(__doc__, "fig4_norms", argv)
    ev, models = zoo_evaluation(args, MODELS, norms=("linf", "l2"))
    ev, l2info = with_linf_adversarial_l2(args, ev, models)
    sample = f"{evaluation_sample(args, ev)}; {l2_repair_text(l2info)}"
    a, b = "AT-linf-0.3", "AT-l2-1.5"
    dom = {norm: dominance(ev.distance(a, norm), ev.distance(b, norm)) for norm in ("linf", "l2")}
    flips = {norm: [f for f in ev.flips(norm) if f["eps"]] for norm in ("linf", "l2")}
    at_eps = {norm: {m: {f"{e:g}": float(ev.robust_error(m, norm, e)) for e in eps} for m in ev.labels}
              for norm, eps in (("linf", (0.1, 0.3)), ("l2", (1.0, 1.5, 2.0)))}
    scans = {norm: knot_scan(ev.distance(a, norm), ev.distance(b, norm)) for norm in ("linf", "l2")}
    v1 = transfer_verdict(scans, (a, b))
    pairs = list(itertools.combinations(ev.labels, 2))
    pair_scans = {norm: [knot_scan(ev.distance(p, norm), ev.distance(q, norm))[1:] for p, q in pairs]
                  for norm in ("linf", "l2")}
    v3 = {norm: ranking_changes(pair_scans[norm], alpha=ALPHA, at_least=2, what=f"{norm} model pairs")
          for norm in ("linf", "l2")}
    figures = [_plot(ev, args.out)]
    claims = [
        claim("000", "Figure 4 / Section 3.2.3 (1)",
              "000 Figure 4 (CIFAR-10): MMR+AT trained against l_inf is more robust than MMR+AT trained against "
              "l_2 both in the l_inf and in the l_2 robustness curves.",
              f"{sample}; {a} vs {b}: lower robust error on {dom['linf']['a_better']:.0%} of the l_inf range (up "
              f"to {fmt(dom['linf']['range'])}) and {dom['l2']['a_better']:.0%} of the l_2 range (up to "
              f"{fmt(dom['l2']['range'])}); robust error at l_2 1.5: {at_eps['l2'][a]['1.5']:.3f} vs "
              f"{at_eps['l2'][b]['1.5']:.3f}, at l_2 2.0: {at_eps['l2'][a]['2']:.3f} vs {at_eps['l2'][b]['2']:.3f}, "
              f"at l_inf 0.3: {at_eps['linf'][a]['0.3']:.3f} vs {at_eps['linf'][b]['0.3']:.3f}",
              v1),
        claim("000", "Figure 4 / Section 3.2.3 (3)",
              "000 Figure 4 (CIFAR-10): both the l_inf and the l_2 plot contain multiple robustness curve "
              "intersections, so the ranking of the methods remains sensitive to the threshold in both norms.",
              f"{sample}; models {', '.join(ev.labels)}; exact crossings (counted only where significant): "
              + "; ".join(f"{norm}: {len(flips[norm])} crossing pairs ("
                          + ", ".join(f"{f['a']}/{f['b']} at {fmt(f['eps'][0], 3)}" for f in flips[norm][:5]) + ")"
                          for norm in ("linf", "l2")),
              all_of(v3["linf"], v3["l2"])),
    ]
    payload = {"sample": sample, "l2_bounded_by_linf_adversarials": l2info, "dominance": dom, "robust_error": at_eps, "crossings": flips,
               "clean_accuracy": ev.accuracy,
               "transfer_thresholds": {norm: int(len(e)) for norm, (e, _, _) in scans.items()}}
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
