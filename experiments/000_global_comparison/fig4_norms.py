"""Paper 000, Figure 4: robustness across norms (the same models in the l_inf and the l_2 plot).

The paper (CIFAR-10) draws the same models in both norms and finds that
(1) MMR+AT trained against l_inf is more robust than MMR+AT trained against
l_2 in *both* norms, (2) MMR+AT l_inf is even more robust than MMR-UNIV (made
for all l_p norms) in both norms, and "overall, the plots are visually
similar", yet (3) both plots contain curve intersections, so the ranking
still depends on the threshold. Ours: the paper's methods as zoo CNNs on
full MNIST (``_methods.py``: ST, AT l_inf 0.1, AT l_2 1.5, KW's role played by
CROWN-IBP l_inf 0.1, MMR+AT l_inf 0.1 and l_2 0.3, MMR-UNIV), and the PGD-AT
l_inf 0.3 model for the old "beyond" row, on the shared held-out evaluation of
``table1_fig2.py`` (2,000 random test images, the same for every model; l_2
distances bounded by verified l_inf adversarials where the l_2 attacks found
none, and every l_2 verdict decided again without those points).

(1) and (2): "a more robust than b in both norms" at every threshold where the
order can change (every distinct finite distance of either model), exact
two-sided McNemar on the same points (``rcurves.claims.verdicts.dominates`` per
norm, Bonferroni over its thresholds), the norms of a row (and for (2) both
MMR+AT models against MMR-UNIV) decided as one family by
``rcurves.claims.verdicts.holm`` (:func:`transfer_family`): reproduced only if
``a`` is significantly more robust somewhere in each norm and significantly
less robust nowhere.
(2, plots alike): per pair of models and norm, the area between the two
curves (a paired t-test on the clipped distances), Holm over the pairs and
both norms; the plots are alike when no pair is ordered significantly one way
in l_inf and the other way in l_2 and at least half the pairs are ordered
significantly, the same way, in both (``_methods.panels_alike``). (3) counts
significant ranking changes among the paper's methods in each norm: a pair
counts only if each model is significantly more robust than the other
somewhere (``rcurves.claims.verdicts.ranking_changes``, Bonferroni over each
pair's thresholds and the pairs; an exact crossing inside the noise does not
count); the paper's "multiple intersections" needs two in each norm. The
fraction of the range where each model is ahead (:func:`dominance`) is
reported, not tested. Every row states its models' training budgets (our
recipes' epochs against the paper's 100) and their clean accuracy on the
evaluated points.

    python experiments/000_global_comparison/fig4_norms.py --out results/experiments/fig4_norms
"""
from __future__ import annotations

import itertools
import os
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))      # _methods.py
from shared import evaluation_sample, l2_repair_text, parse_args, with_linf_adversarial_l2, write_result

import _methods as M  # noqa: E402
from rcurves.claims.compare import knot_scan  # noqa: E402
from rcurves.claims.record import claim, fmt  # noqa: E402
from rcurves.claims.verdicts import all_of, dominates, holm, order_changes, ranking_changes  # noqa: E402

PAPER_MODELS = (M.ST, M.AT, M.AT_L2, M.KW, M.MMR_AT, M.MMR_AT_L2, M.MMR_UNIV)
MODELS = PAPER_MODELS + ("mnist-full-cnn-at-linf-0.3",)
ALPHA = 0.05
NORMS = ("linf", "l2")


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


def transfer_family(scans, alpha=ALPHA, family=""):
    """000 Figure 4 (1), (2): for each pair ``(a, b)``, "``a`` is more robust than ``b`` in every norm", as one family.

    ``scans``: ``{(a, b): {norm: (eps (m,), only_a (m,), only_b (m,))}}`` (``knot_scan``: every threshold where
    the order can change). One rule per pair and norm, ``rcurves.claims.verdicts.dominates`` (exact two-sided
    McNemar at every threshold, Bonferroni over the norm's thresholds: reproduced when ``a`` is significantly
    more robust somewhere and significantly less robust nowhere), the rules decided together by
    ``rcurves.claims.verdicts.holm`` (family-wise ``alpha``); a pair's verdict is the conjunction over its norms
    (the worst wins). Returns ``{(a, b): Verdict}``.
    """
    rules, keys = [], []
    for (a, b), per_norm in scans.items():
        for norm, (e, oa, ob) in per_norm.items():
            rules.append(lambda lv, e=e, oa=oa, ob=ob, a=a, b=b, norm=norm: dominates(
                oa, ob, alpha=lv, eps=e, names=(a, b), what=f"{a} more robust than {b} in {norm}"))
            keys.append((a, b))
    vs = holm(rules, alpha=alpha, family=family or "pairs x norms")
    return {pair: all_of(*[v for k, v in zip(keys, vs) if k == pair]) for pair in scans}


def transfer_verdict(scans, names, alpha=ALPHA):
    """:func:`transfer_family` of one pair: ``a`` more robust than ``b`` in every norm of ``scans``
    (``{norm: (eps, only_a, only_b)}``), Holm over the norms. Returns the Verdict."""
    return transfer_family({tuple(names): scans}, alpha=alpha, family="the norms")[tuple(names)]


def main(argv=None):
    args = parse_args(__doc__, "fig4_norms", argv)
    ev0, models, names = M.method_evaluation(args, MODELS)
    ev, l2info = with_linf_adversarial_l2(args, ev0, models)
    sample = evaluation_sample(args, ev)
    n = int(ev.data.y.shape[0])
    paper = [names[m] for m in PAPER_MODELS if m in names]
    dist = {norm: {m: ev.distance(m, norm) for m in ev.labels} for norm in NORMS}

    def scans_of(a, b, keep):
        return {norm: knot_scan(dist[norm][a][keep], dist[norm][b][keep]) for norm in NORMS}

    # the families, each its two norms: a paper row's test is never tightened by a beyond row's
    families = {"(1)": {"(1)": (M.MMR_AT, M.MMR_AT_L2)},
                "(1), PGD-AT": {"(1), PGD-AT": ("mnist-full-cnn-at-linf-0.3", M.AT_L2)},
                "(2)": {"(2)": (M.MMR_AT, M.MMR_UNIV)},
                "(2), MMR+AT l_2": {"(2), MMR+AT l_2": (M.MMR_AT_L2, M.MMR_UNIV)}}
    rows = {}
    for fam, members in families.items():
        members = {k: (names[za], names[zb]) for k, (za, zb) in members.items() if za in names and zb in names}
        if not members:
            continue
        in_fam = sorted({m for pair in members.values() for m in pair})
        mask, counts = M.standin_mask(ev, in_fam)
        what = "pairs x norms"

        def decide_all(keep, members=members, what=what):
            return transfer_family({pair: scans_of(*pair, keep) for pair in members.values()}, family=what)

        full = decide_all(np.ones(n, bool))
        wo = decide_all(~mask) if mask.any() else None
        for key, (a, b) in members.items():
            rows[key] = {"a": a, "b": b, "verdict": full[(a, b)], "without": None if wo is None else wo[(a, b)],
                         "mask": mask, "counts": counts, "family": in_fam,
                         "dominance": {norm: dominance(dist[norm][a], dist[norm][b]) for norm in NORMS},
                         "robust_error": {norm: {m: {f"{e:g}": float(ev.robust_error(m, norm, e)) for e in eps}
                                                 for m in (a, b)}
                                          for norm, eps in (("linf", (0.1, 0.3)), ("l2", (1.0, 1.5, 2.0)))}}

    mask_p, counts_p = M.standin_mask(ev, paper)

    def alike(keep):
        return M.panels_alike({norm: {m: dist[norm][m][keep] for m in paper} for norm in NORMS})[0]

    v_alike, v_alike_wo = M.both_ways(alike, mask_p)
    alike_det = M.panels_alike({norm: {m: dist[norm][m] for m in paper} for norm in NORMS})[1]

    def scans3(keep, norm):
        return [knot_scan(dist[norm][p][keep], dist[norm][q][keep])[1:] for p, q in itertools.combinations(paper, 2)]

    def crossings(keep):
        return all_of(*[ranking_changes(scans3(keep, norm), alpha=ALPHA, at_least=2, what=f"{norm} model pairs")
                        for norm in NORMS])

    v3, v3_wo = M.both_ways(crossings, mask_p)
    changes3 = {norm: order_changes(scans3(np.ones(n, bool), norm), alpha=ALPHA) for norm in NORMS}
    sub = M.subset(ev, paper)
    flips = {norm: [f for f in sub.flips(norm) if f["eps"]] for norm in NORMS}

    figures = [_plot(ev, paper + [m for m in ev.labels if m not in paper], args.out, sample)]
    claims = []
    role = {lab: M.ROLE.get(zn, zn) for zn, lab in names.items()}
    shorts = {"(1)": ("MMR+AT l_inf more robust than MMR+AT l_2 in both norms", "better in both norms"),
              "(1), PGD-AT": ("AT l_inf 0.3 more robust than AT l_2 1.5 in both norms", "not in the paper"),
              "(2)": ("MMR+AT l_inf more robust than MMR-UNIV in both norms", "better in both norms"),
              "(2), MMR+AT l_2": ("MMR+AT l_2 more robust than MMR-UNIV in both norms", "not in the paper")}
    texts = {
        "(1)": ("000 Figure 4 (CIFAR-10): MMR+AT trained against l_inf is more robust than MMR+AT trained against "
                "l_2 both in the l_inf and in the l_2 robustness curves.", "paper"),
        "(1), PGD-AT": ("Beyond the paper (its models are MMR+AT): is the PGD-AT model trained against l_inf (0.3) "
                        "more robust than the one trained against l_2 (1.5) both in the l_inf and in the l_2 "
                        "robustness curves?", "beyond"),
        "(2)": ("000 Figure 4 (CIFAR-10): MMR+AT with the l_inf threat model even leads to better l_inf and l_2 "
                "robustness curves than MMR-UNIV, which is designed to improve robustness for all l_p norms.",
                "paper"),
        "(2), MMR+AT l_2": ("Beyond the paper (it compares MMR-UNIV with MMR+AT l_inf only): is MMR+AT trained "
                            "against l_2 more robust than MMR-UNIV in both norms?", "beyond"),
    }
    for key, r in rows.items():
        a, b = r["a"], r["b"]
        d = r["dominance"]
        re = r["robust_error"]
        ours = (f"{sample}; {a} vs {b}: lower robust error on {d['linf']['a_better']:.0%} of the l_inf range (up "
                f"to {fmt(d['linf']['range'])}) and {d['l2']['a_better']:.0%} of the l_2 range (up to "
                f"{fmt(d['l2']['range'])}); robust error at l_inf 0.1: {re['linf'][a]['0.1']:.3f} vs "
                f"{re['linf'][b]['0.1']:.3f}, at l_inf 0.3: {re['linf'][a]['0.3']:.3f} vs {re['linf'][b]['0.3']:.3f}, "
                f"at l_2 1.5: {re['l2'][a]['1.5']:.3f} vs {re['l2'][b]['1.5']:.3f}, at l_2 2.0: "
                f"{re['l2'][a]['2']:.3f} vs {re['l2'][b]['2']:.3f}; "
                f"{l2_repair_text({k: l2info[k] for k in (a, b) if k in l2info})}; "
                + M.standin_text(r["mask"], r["counts"], r["verdict"], r["without"]))
        claims.append(claim("000", f"Figure 4 / Section 3.2.3 {key}", texts[key][0], ours, r["verdict"],
                            M.budget_text(models, ev, [a, b]), kind=texts[key][1], short=shorts[key][0],
                            paper_value=shorts[key][1],
                            ours_value=f"ahead {d['linf']['a_better']:.0%}, {d['l2']['a_better']:.0%} of eps"))
    claims.append(claim(
        "000", "Figure 4 / Section 3.2.3 (2), plots alike",
        "000 Figure 4 (CIFAR-10): overall, the l_inf and the l_2 plots (the same models in both) are visually similar.",
        f"{sample}; the paper's methods ({', '.join(f'{role.get(m, m)}: {m}' for m in paper)}); the plots are read "
        f"as alike when they order the models alike: no pair ordered significantly one way in l_inf and the other "
        f"way in l_2, and at least half the pairs ordered significantly, the same way, in both; areas between the "
        f"curves of the reversed pairs: "
        + ("; ".join(f"{p[0]} / {p[1]}: l_inf {alike_det['area'][i, 0]:+.3g}, l_2 {alike_det['area'][i, 1]:+.3g}"
                     for i, p in enumerate(alike_det["pairs"]) if p in alike_det["reversed"]) or "none")
        + f"; {l2_repair_text({k: l2info[k] for k in paper if k in l2info})}; "
        + M.standin_text(mask_p, counts_p, v_alike, v_alike_wo),
        v_alike, M.budget_text(models, ev, paper), short="the l_inf and l_2 plots are alike (order the models alike)",
        paper_value="visually similar",
        ours_value=f"{len(alike_det['reversed'])} of {len(alike_det['pairs'])} pairs reversed"))
    claims.append(claim(
        "000", "Figure 4 / Section 3.2.3 (3)",
        "000 Figure 4 (CIFAR-10): both the l_inf and the l_2 plot contain multiple robustness curve intersections, "
        "so the ranking of the methods remains sensitive to the threshold in both norms.",
        f"{sample}; the paper's methods ({', '.join(f'{role.get(m, m)}: {m}' for m in paper)}); exact crossings "
        f"(counted only where significant): "
        + "; ".join(f"{norm}: {len(flips[norm])} crossing pairs ("
                    + ", ".join(f"{f['a']}/{f['b']} at {fmt(f['eps'][0], 3)}" for f in flips[norm][:5]) + ")"
                    for norm in NORMS)
        + f"; {l2_repair_text({k: l2info[k] for k in paper if k in l2info})}; "
        + M.standin_text(mask_p, counts_p, v3, v3_wo),
        v3, M.budget_text(models, ev, paper), short="both plots: multiple crossings, the ranking changes (>= 2 each)",
        paper_value="multiple crossings",
        ours_value=f"{changes3['linf']} l_inf, {changes3['l2']} l_2 changes"))
    payload = {"sample": sample, "n": n, "models": list(ev.labels), "paper_models": paper,
               "l2_bounded_by_linf_adversarials": l2info,
               "transfer": {k: {"a": r["a"], "b": r["b"], "verdict": r["verdict"].verdict,
                                "without_standin": None if r["without"] is None else r["without"].verdict,
                                "standin_points": int(r["mask"].sum()), "dominance": r["dominance"],
                                "robust_error": r["robust_error"]} for k, r in rows.items()},
               "dominance": rows["(1)"]["dominance"] if "(1)" in rows else None,
               "plots_alike": {k: v for k, v in alike_det.items()},
               "crossings": flips, "clean_accuracy": ev.accuracy}
    write_result(args, payload, claims, figures)
    return payload


def _plot(ev, labels, out, sample):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rcurves.plotting import step_curve

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (norm, hi) in zip(axes, (("linf", 0.6), ("l2", 5.0))):
        for i, m in enumerate(labels):
            e, v = step_curve(ev.distance(m, norm), hi)
            ax.step(e, v, where="post", label=m, color=colors[i % len(colors)])   # the same colour in both plots
        ax.set_xlim(0, hi)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(f"{'l_inf' if norm == 'linf' else 'l_2'} perturbation size eps")
        ax.set_ylabel("robust error")
        ax.set_title(f"{'l_inf' if norm == 'linf' else 'l_2'} robustness curves")
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    name = "fig4_norms.png"
    fig.savefig(os.path.join(out, name), dpi=120)
    plt.close(fig)
    n = int(ev.data.y.shape[0])
    cap = (f"000 Figure 4 on MNIST: l_inf (left) and l_2 (right) robustness curves (robust error against perturbation "
           f"size, exact step curves of the attacks' per-point distances) of the same zoo C.1 CNNs in both plots, "
           f"one colour per model: {', '.join(labels)}. Points: {sample}; n = {n}.")
    return name, cap


if __name__ == "__main__":
    main()
