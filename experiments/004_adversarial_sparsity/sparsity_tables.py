"""Paper 004, Table 1 and Figure 2: natural accuracy, adversarial accuracy and residual sparsity of standard and
adversarially trained models, on full MNIST (our stand-in for the paper's CIFAR-10 ResNets).

Models (``rcurves.models.zoo``, the C.1 CNN of paper 000 on full MNIST): ST; PGD AT
at l_inf 0.1 (10 steps), its 1-step variant (FGSM from a random start: Table
1 line 3) and its variant trained with random shifts (Table 1: most models
use crop augmentation, line 5 is without); l_2 PGD AT at 1.5. Radii: l_inf
0.1 and l_2 1.5, the AT models' training radii (``sparsity_study``).

Points (``sparsity_study``): the pool is the first 1,000 points of the
class-interleaved held-out split (stratified), the same for every model;
adversarial accuracy is measured on it (APGD, cross-entropy and margin
losses, 50 steps each); a model's residual sparsity on a stratified sample of
40 of its vulnerable points; a comparison between two models on the points
of the rarer-vulnerable model's sample where the other is vulnerable too
(paired: same points, same directions). Budget: 8 directions x 10 bisection
rounds x 20 PGD steps per point, box [0, 1].

    python experiments/004_adversarial_sparsity/sparsity_tables.py --out results/experiments/sparsity_tables
"""
from __future__ import annotations

import math
import os
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
import sparsity_study as S
from shared import parse_args, write_result

from rcurves.claims.record import claim, fmt

MODELS = [("mnist-full-cnn-st", "ST"), ("mnist-full-cnn-at-linf-0.1", "AT-linf-0.1"),
          ("mnist-full-cnn-at-linf-0.1-1step", "AT-linf-0.1-1step"),
          ("mnist-full-cnn-at-linf-0.1-shift", "AT-linf-0.1+shift"), ("mnist-full-cnn-at-l2-1.5", "AT-l2-1.5")]
# The paper's Table 1 (CIFAR-10, ResNet-18 lines 2-5): (clean, adversarial accuracy %, sparsity) per norm.
PAPER = {"l2": {"ST": (88, 0, 0.180), "AT-1step": (90, 62.1, 0.559), "AT": (88.8, 67.3, 0.553),
                "AT-noaug": (82.8, 60.2, 0.532)},
         "linf": {"ST": (88, 0, 56.8), "AT-1step": (90.73, 40.08, 229), "AT": (80.97, 47.19, 277),
                  "AT-noaug": (73.96, 43.02, 273)}}
# The smallest effect a comparison of sparsity is about, as a fraction of the baseline's value (l_2: of its
# excess over the box floor): half the smallest relative gap the paper reads off its Table 1 (10-step vs 1-step
# l_inf: +21 %).
REL_EFFECT = 0.1


def models(args):
    """``[Model, ...]``, ST first."""
    if args.quick:
        return [S.quick_model("st"), S.quick_model("at")]
    return [S.zoo_model(args, n, lab) for n, lab in MODELS]


def trained_for(label: str, norm: str) -> bool:
    """An AT model trained in ``norm`` (the paper's Table 1 evaluates each AT model in the norm it was trained in)."""
    return label.startswith("AT-" + norm + "-")


def top(norm: str, d: int) -> float:
    return math.pi if norm == "l2" else float(d)


def excess(study, norm, idx, vals):
    """Sparsity above the l_2 box floor (l_inf: the value itself) of the pool points ``idx``."""
    return vals - study.floor(norm, idx)


def much_higher(study, at, st, norm, d):
    """The paper's "much higher than the undefended baseline": ``at``'s sparsity above twice ``st``'s on the
    points vulnerable for both (paired; l_2 on the excess over the box floor). Returns (Verdict, text)."""
    from rcurves.claims.verdicts import Verdict, paired_greater

    va, vb, idx = S.paired_values(study, at, st, norm, study.sample(study.vulnerable(at, norm)))
    ea, eb = excess(study, norm, idx, va), excess(study, norm, idx, vb)
    what = f"{at.label} vs ST ({'excess over the box floor' if norm == 'l2' else 'sparsity'})"
    if idx.size < 2:
        return Verdict("inconclusive", f"{what}: {idx.size} paired points", "fewer than 2 points vulnerable for "
                                                                          "both in the pool"), ""
    base = float(eb.mean())
    room = top(norm, d) - float(np.mean(study.floor(norm, idx)))
    one = paired_greater(ea, eb, effect=REL_EFFECT * base, what=what)
    text = (f"{at.label} {fmt(va.mean())} vs ST {fmt(vb.mean())} {S.UNIT[norm]} on the same {idx.size} points "
            f"(x{fmt(ea.mean() / base, 3)}{' above the floor' if norm == 'l2' else ''}; higher at all: "
            f"{one.verdict}, {one.test.split(': ', 1)[1]})")
    if 2 * base > room:
        return Verdict("not reproducible here", f"{what}: 2 x {base:.4g} > {room:.4g}",
                       f"twice ST's {'excess' if norm == 'l2' else 'sparsity'} ({fmt(2 * base)}) exceeds the "
                       f"largest value possible ({fmt(room)}): on MNIST at this radius ST's sparsity is already "
                       f"{fmt(base / room, 2)} of the range (the paper's CIFAR-10 ST: 0.180 of pi, 56.8 of 3072 "
                       f"dims)"), text
    return paired_greater(ea, eb, factor=2.0, effect=REL_EFFECT * base, what=what), text


def rank_correlation(x, y, what: str):
    """``rcurves.claims.verdicts.correlation`` (Spearman, exact permutation p), inconclusive below 3 finite pairs or
    with a constant side (no ranking to test)."""
    from rcurves.claims.verdicts import Verdict, correlation

    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return Verdict("inconclusive", f"{what}: {int(ok.sum())} models", "fewer than 3 models with distinct values: "
                                                                          "no rank correlation to test")
    return correlation(x[ok], y[ok], what=what)


def table_claims(study, ms, rows, norms, d, setting):
    """The claims, from the study (per-point values, measured lazily) and the residual rows."""
    from scipy.stats import norm as normal

    from rcurves.claims.verdicts import (
        Verdict,
        all_of,
        interval_above,
        paired_effect,
        paired_greater,
        paired_null,
    )

    claims = []
    st = ms[0]
    by = {(r["model"], r["norm"]): r for r in rows}
    lab = {m.label: m for m in ms}
    for norm in norms:
        nn = "l_2" if norm == "l2" else "l_inf"
        paper = PAPER[norm]
        # (1) strongly trained AT models all reach much higher sparsity than ST
        ats = [m for m in ms[1:] if trained_for(m.label, norm)]
        if ats:
            vs, texts = zip(*[much_higher(study, m, st, norm, d) for m in ats])
            claims.append(claim(
                "004", f"Table 1 ({nn}): AT raises sparsity much higher",
                f"adversarially trained models reach much higher residual sparsity than the undefended one "
                f"(CIFAR-10 ResNets: > {'0.5' if norm == 'l2' else '200'} vs "
                f"{paper['ST'][2]} {S.UNIT[norm]}; tested as at least twice, on the same points)",
                f"{setting}; paired points: the stratified sample of each AT model's vulnerable points (of "
                f"{study.text}) where ST is vulnerable too; " + "; ".join(texts),
                all_of(*vs)))
        # (2) sparsity follows adversarial accuracy; defended models above 40 % much higher than the baseline
        rs = [by[(m.label, norm)] for m in ms]
        corr = rank_correlation([r["adversarial_accuracy"] for r in rs], [r["residual_sparsity"] for r in rs],
                                what=f"adversarial accuracy vs residual sparsity over {len(rs)} models")
        defended = [m for m in ms[1:] if by[(m.label, norm)]["adversarial_accuracy"] > 0.4]
        parts = [much_higher(study, m, st, norm, d) for m in defended]
        desc = ", ".join(f"{r['model']} {fmt(r['adversarial_accuracy'])} / {fmt(r['residual_sparsity'])}" for r in rs)
        claims.append(claim(
            "004", f"Table 1 / Fig. 2 ({nn}): sparsity follows accuracy",
            "sparsity is overall consistent with adversarial accuracy: defended models whose adversarial accuracy is "
            "above 40% have much higher sparsity than the undefended baseline",
            f"{setting}; adversarial accuracy (on {study.text}) / residual sparsity (stratified samples of each "
            f"model's vulnerable points): {desc}; much higher (x2, paired) for the {len(defended)} models above 40%: "
            + ("; ".join(t for _, t in parts) or "none"),
            all_of(corr, *[v for v, _ in parts]) if parts else corr))
    # (3) Figure 2: among robust l_inf models, higher accuracy with lower residual sparsity (residual sets differ
    # by design: the claim is about each model's own residual points)
    if "linf" in norms:
        robust = sorted([m for m in ms[1:] if trained_for(m.label, "linf")],
                        key=lambda m: by[(m.label, "linf")]["adversarial_accuracy"])
        pairs = [(a, b) for i, a in enumerate(robust) for b in robust[i + 1:]]
        if pairs:
            level = 1 - 2 * 0.05 / len(pairs)   # one-sided 0.05, Bonferroni over the pairs
            vs, parts = [], []
            for lo_acc, hi_acc in pairs:
                ra, rb = by[(lo_acc.label, "linf")], by[(hi_acc.label, "linf")]
                mc = paired_effect(int(np.sum(study.robust(hi_acc, "linf") & ~study.robust(lo_acc, "linf"))),
                                   int(np.sum(study.robust(lo_acc, "linf") & ~study.robust(hi_acc, "linf"))),
                                   what=f"{hi_acc.label} more accurate than {lo_acc.label}")
                diff = ra["residual_sparsity"] - rb["residual_sparsity"]
                se = math.hypot(ra["residual_stderr"], rb["residual_stderr"])
                z = float(normal.ppf(1 - (1 - level) / 2))
                v = interval_above(diff - z * se, diff + z * se, null=0.0,
                                   effect=REL_EFFECT * ra["residual_sparsity"],
                                   what=f"sparsity {lo_acc.label} - {hi_acc.label}", level=level)
                if mc.verdict != "reproduced":
                    v = Verdict("inconclusive", v.test, f"the accuracy order {hi_acc.label} > {lo_acc.label} is not "
                                                        f"significant ({mc.test})")
                vs.append(v)
                parts.append(f"{hi_acc.label} (adv acc {fmt(rb['adversarial_accuracy'])}, sparsity "
                             f"{fmt(rb['residual_sparsity'])} +- {fmt(rb['residual_stderr'], 2)}, n = "
                             f"{rb['n_measured']}) vs {lo_acc.label} ({fmt(ra['adversarial_accuracy'])}, "
                             f"{fmt(ra['residual_sparsity'])} +- {fmt(ra['residual_stderr'], 2)}, n = "
                             f"{ra['n_measured']}): {v.verdict}")
            if any(v.verdict == "reproduced" for v in vs):
                verdict = Verdict("reproduced", "; ".join(v.test for v in vs))
            elif all(v.verdict == "inconclusive" for v in vs):
                verdict = Verdict("inconclusive", "; ".join(v.test for v in vs), "; ".join(v.why for v in vs))
            else:
                verdict = Verdict("differs", "; ".join(v.test for v in vs),
                                  "no pair of robust models where the more accurate one has significantly lower "
                                  "residual sparsity, although some pair could have shown it")
            claims.append(claim(
                "004", "Fig. 2 (l_inf, robust models)",
                "among robust models the one with higher adversarial accuracy often has LOWER residual l_inf sparsity "
                "(improvements remove the residual perturbations of the easiest points)",
                f"{setting}; the l_inf-trained AT models (recipes differ as in the paper's lines 3-5); each model's "
                f"residual sparsity on its own stratified sample of vulnerable points (not paired: the claim is about "
                f"each model's residual set); per pair: " + "; ".join(parts), verdict))
    # (4) Table 1 lines 3-4: 1-step vs 10-step AT; lines 4-5: with vs without augmentation (l_inf models)
    pairs = [("AT-linf-0.1", "AT-linf-0.1-1step", "1-step vs 10-step AT", "AT", "AT-1step"),
             ("AT-linf-0.1+shift", "AT-linf-0.1", "AT with vs without augmentation", "AT", "AT-noaug")]
    for a_lab, b_lab, what, pa, pb in pairs:
        if a_lab not in lab or b_lab not in lab or "linf" not in norms:
            continue
        a, b = lab[a_lab], lab[b_lab]
        ra, rb = by[(a_lab, "linf")], by[(b_lab, "linf")]
        rob_a, rob_b = study.robust(a, "linf"), study.robust(b, "linf")
        acc = paired_effect(int(np.sum(rob_a & ~rob_b)), int(np.sum(rob_b & ~rob_a)),
                            what=f"{a_lab} more robust than {b_lab}")
        # paired sparsity on the sample of the rarer-vulnerable model where the other is vulnerable too
        rarer = a if study.vulnerable(a, "linf").sum() <= study.vulnerable(b, "linf").sum() else b
        va, vb, idx = S.paired_values(study, a, b, "linf", study.sample(study.vulnerable(rarer, "linf")))
        base = float(np.mean(vb)) if vb.size else math.nan
        p_a, p_b = PAPER["linf"][pa], PAPER["linf"][pb]
        ours = (f"{setting}; {S.mcnemar_text(rob_a, rob_b, a_lab, b_lab)}; residual sparsity {a_lab} "
                f"{fmt(ra['residual_sparsity'])} +- {fmt(ra['residual_stderr'], 2)} vs {b_lab} "
                f"{fmt(rb['residual_sparsity'])} +- {fmt(rb['residual_stderr'], 2)} dims (own samples); paired on the "
                f"{idx.size} points of {rarer.label}'s stratified vulnerable sample where both are vulnerable: "
                f"{fmt(np.mean(va) if va.size else math.nan)} vs {fmt(base)}")
        if pb == "AT-1step":   # the paper: 10-step higher in both accuracy and sparsity (+48 dims, +21 %)
            sp = (paired_greater(va, vb, effect=REL_EFFECT * base, what=f"sparsity {a_lab} > {b_lab}")
                  if va.size >= 2 else paired_greater(va, vb, effect=1.0))
            claims.append(claim(
                "004", f"Table 1 (l_inf): {what}",
                f"10-step PGD AT gives higher adversarial accuracy and higher residual l_inf sparsity than 1-step AT "
                f"(CIFAR-10 ResNet-18: {p_a[1]}% / {p_a[2]} vs {p_b[1]}% / {p_b[2]} dims)", ours,
                all_of(acc, sp)))
        else:                  # the paper: augmentation raises accuracy (+4.2 points), sparsity about equal (+4 dims)
            sp = (paired_null(va, vb, effect=REL_EFFECT * base, side="two-sided",
                              what=f"sparsity {a_lab} vs {b_lab}") if va.size >= 2
                  else paired_null(va, vb, effect=1.0))
            claims.append(claim(
                "004", f"Table 1 (l_inf): {what}",
                f"AT with (crop) augmentation has higher adversarial accuracy than without, and about the same "
                f"residual sparsity (CIFAR-10 ResNet-18: {p_a[1]}% / {p_a[2]} vs {p_b[1]}% / {p_b[2]} dims; "
                f"tested: no difference of {REL_EFFECT:.0%} of the sparsity without augmentation)", ours,
                all_of(acc, sp)))
    return claims


def figure(rows, norms, eps, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    fig, axes = plt.subplots(1, len(norms), figsize=(5 * len(norms), 4), squeeze=False)
    for ax, norm in zip(axes[0], norms):
        for r in rows:
            if r["norm"] != norm:
                continue
            c = "tab:blue" if r["model"] == "ST" else ("tab:red" if trained_for(r["model"], norm) else "tab:orange")
            ax.errorbar(r["adversarial_accuracy"], r["residual_sparsity"], yerr=2 * r["residual_stderr"], fmt="o",
                        color=c)
            ax.annotate(r["model"], (r["adversarial_accuracy"], r["residual_sparsity"]), fontsize=7)
        ax.set_xlabel(f"adversarial accuracy (eps = {eps[norm]:g})")
        ax.set_ylabel(f"residual sparsity ({S.UNIT[norm]})")
        ax.set_title(f"{norm}: red = trained in this norm (+- 2 se)")
    fig.tight_layout()
    path = os.path.join(out, "sparsity_fig2.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def main(argv=None):
    args = parse_args(__doc__, name="sparsity_tables", argv=argv)
    b = S.budget(args)
    ds = S.dataset(args)
    study = S.Study(args, ds, b, args.seed)
    ms = models(args)
    norms = ("l2", "linf")
    rows = []
    for norm in norms:
        for m in ms:
            r = study.residual(m, norm)
            rows.append(r)
            print(S.fmt_row(r), flush=True)
    d = int(np.prod(study.x.shape[1:]))
    claims = table_claims(study, ms, rows, norms, d, S.setting(args))
    figures = figure(rows, norms, study.eps, args.out)
    keep = ("model", "name", "norm", "eps", "n_pool", "natural_accuracy", "adversarial_accuracy", "vulnerable_fraction",
            "n_vulnerable", "n_searched", "n_measured", "residual_sparsity", "residual_stderr")
    table = [{k: r[k] for k in keep} | ({"excess_over_box_floor": r["excess"]} if "excess" in r else {})
             for r in rows]
    per_point = [{"model": m.label, "norm": norm, "index": np.flatnonzero(study.searched(m, norm)),
                  "values": study.values(m, norm)[study.searched(m, norm)]} for m in ms for norm in norms]
    write_result(args, {"budget": b.__dict__, "eps": study.eps, "pool": study.text, "table": table,
                        "per_point": per_point, "seconds_by_stage": study.seconds}, claims, figures)
    return {"rows": rows, "claims": claims, "study": study, "models": ms}


if __name__ == "__main__":
    main()
