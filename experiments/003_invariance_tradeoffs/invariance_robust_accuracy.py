"""Paper 003, Tables 3-4: robust accuracy w.r.t. the original labels at eps 0.3 and 0.4 (PGD, 100 steps).

The same models and test images as ``invariance_linf.py``: the zoo's full-
MNIST CNNs trained with l_inf PGD-AT at eps 0, 0.1, 0.2, 0.3, 0.4
(``mnist-full-cnn-*``), on the first 1,000 test images of full MNIST in the
served class-interleaved order (a stratified sample; each row states n and
its class counts' range), every model on the same points. Sensitivity-based
robustness in the sense of 003's equation 1: a model counts as correct when
PGD (100 iterations, one random start as in 003 Appendix C; ``attacks.pgd``
with APGD's step sizes) does not change its prediction away from the original
label.

Verdicts: each model's robust accuracy at attack eps 0.3 and 0.4 against 003
Table 4 (and Table 3's undefended 0 % / 0 %) on a relative scale
(``invariance_linf.rate_vs_paper``): ``rcurves.claims.verdicts.rate_near`` with
``rel_tol`` 0.5 (:data:`REL_TOL`: our rate's exact Clopper-Pearson interval
must meet the band [paper / 1.5, paper x 1.5]) on the rarer outcome, the robust
error for the paper's rates above 1/2 (92 % is compared as 8 % error, band
[5.3 %, 12 %]); a printed 0 % (the paper prints whole percents: below 0.5 %)
has no relative band, so it is tested as a rate below 0.5 % x 1.5 = 0.75 %
(``rcurves.claims.verdicts.rate_below``). Why 0.5: our own training recipe and
attack differ from 003's (a factor 1.5 either way covers, e.g., 92 % vs our
90 % robust accuracy, i.e. 8 % vs 10 % error), while the absolute tolerance of
0.10 used before let 0/1000 pass against the paper's 7 % and 1/1000 against
6 %. Both attack eps are required; the two intervals of a row are at 97.5 %
(Bonferroni over the row's two tests: interval rules have no p-value for
Holm's step-down).

Beyond the tables, the mechanism of Section 4: on the invariance examples
the oracle relabels, does a model agree with the oracle less often where PGD
could not break the original point (one-sided Fisher exact test, pooled over
the AT models and both attack eps)? With 003's human labels it is decided in
``human_labels.py`` (on the authors' examples); here it is asked of our own
attack's examples with ``invariance_linf.py``'s 5-NN stand-in oracle, a row of
kind ``beyond`` (as that script's stand-in rows).

    python experiments/003_invariance_tradeoffs/invariance_robust_accuracy.py --out results/experiments/invariance_robust_accuracy

``--quick``: 24 digits, two small MLPs, 10 PGD steps.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
from invariance_linf import (EPS_ATTACK, ZERO_PRINTED, add_options, models_for, rate_vs_paper, stand_in_why,
                             test_points)
from shared import invariance_set, parse_args, predict, write_result

from rcurves.claims.record import claim, fmt

PAPER = {"0.1": {"0.3": 0.00, "0.4": 0.00}, "0.2": {"0.3": 0.06, "0.4": 0.00},
         "0.3": {"0.3": 0.92, "0.4": 0.07}, "0.4": {"0.3": 0.93, "0.4": 0.90}, "0": {"0.3": 0.0, "0.4": 0.0}}
REL_TOL = 0.5                   # a factor 1.5 either way: our models and attack are not 003's (module docstring)


def main(argv=None):
    import jax

    import attacks

    args = parse_args(__doc__, "invariance_robust_accuracy", argv, extra=add_options)
    dataset, xq, yq, pick, sample = test_points(args)
    models = models_for(args)
    steps = 10 if args.quick else 100
    table, robust = {}, {}
    for e_train, m in models.items():
        row = {"clean": float((predict(m, xq) == yq).mean()), "n": int(len(yq))}
        # both radii in one call (one compilation per model): eps per point
        xx, yy = np.concatenate([xq] * len(EPS_ATTACK)), np.concatenate([yq] * len(EPS_ATTACK))
        ee = np.repeat(np.asarray(EPS_ATTACK, np.float32), len(yq))
        x_adv = np.asarray(attacks.pgd(m.logits_fn, xx, yy, ee, norm="linf", steps=steps,
                                       key=jax.random.PRNGKey(args.seed), restarts=1))
        assert np.all(np.abs(x_adv - xx).reshape(len(yy), -1).max(1) <= ee + 1e-7)
        ok = (predict(m, x_adv) == yy).reshape(len(EPS_ATTACK), len(yq))
        for i, eps in enumerate(EPS_ATTACK):
            row[fmt(eps)] = float(ok[i].mean())
            row["k_" + fmt(eps)] = int(ok[i].sum())
        table[fmt(e_train)] = row
        robust[e_train] = ok
        print(f"{m.name}: clean {row['clean']:.3f}, PGD-{steps} eps 0.3 {row['0.3']:.3f}, eps 0.4 {row['0.4']:.3f}")
    cond = _conditional_agreement(args, xq, yq, models, robust)
    claims = _claims(args, table, cond, steps, sample, {fmt(e): m.name for e, m in models.items()})
    write_result(args, {"dataset": dataset, "sample": sample, "test_indices": pick, "steps": steps, "table": table,
                        "paper": PAPER, "rel_tol": REL_TOL, "models": {fmt(e): m.name for e, m in models.items()},
                        "conditional_agreement": cond}, claims)
    return table


def _claims(args, table, cond, steps, sample, names):
    from rcurves.claims.verdicts import all_of, share_lower

    pre = "quick run (24 digits, small MLPs, 10 steps): " if args.quick else ""
    claims = []
    level = 0.05 / len(EPS_ATTACK)                      # Bonferroni over the row's attack eps
    for k, row in table.items():
        paper = PAPER[k]
        v = all_of(*(rate_vs_paper(row["k_" + e], row["n"], paper[e], rel_tol=REL_TOL, alpha=level,
                                   what=f"robust accuracy at eps {e}", what_not=f"robust error at eps {e}")
                     for e in ("0.3", "0.4")))
        label = "undefended" if k == "0" else f"PGD-AT l_inf {k}"
        claims.append(claim(
            "003", f"Tables 3-4 ({label}, PGD-100)",
            f"Robust accuracy w.r.t. the original labels of the {label} model: {paper['0.3']:.0%} at attack eps 0.3, "
            f"{paper['0.4']:.0%} at 0.4 (003 Table 4; Table 3 for the undefended model).",
            pre + f"{names[k]} on {sample}, PGD-{steps} (one random start, APGD steps): {row['0.3']:.1%} / "
                  f"{row['0.4']:.1%} (clean {row['clean']:.1%}); rule: at both eps, the exact Clopper-Pearson "
                  f"interval (at {1 - level:.1%}: Bonferroni over the two eps) within a factor {1 + REL_TOL:g} of the "
                  "paper's rate, compared on the robust error where the paper's accuracy is above 1/2; a printed 0 % "
                  f"as a Wilson interval below {ZERO_PRINTED * (1 + REL_TOL):.2%}", v,
            "" if v.ok else "our own models (C.1 CNN, our PGD-AT recipe on the 60,000 images) and attack, not 003's",
            short=f"Tables 3-4: robust accuracy of the {label} model",
            paper_value=f"{paper['0.3']:.0%} / {paper['0.4']:.0%}",
            ours_value=f"{row['0.3']:.1%} / {row['0.4']:.1%}"))
    pooled = cond["pooled"]
    mech = share_lower(pooled["robust"]["k"], pooled["robust"]["n"], pooled["not_robust"]["k"],
                       pooled["not_robust"]["n"], what="agreement where PGD-robust < where broken")
    claims.append(claim(
        "003", "Section 4 (mechanism) on our examples (5-NN stand-in oracle)",
        "Beyond the paper (the mechanism on its own examples and human labels: human_labels.py): on our attack's "
        "invariance examples, a model robust to eps-bounded perturbations keeps its label, so it disagrees with the "
        "stand-in oracle's changed label.",
        pre + f"{sample}; agreement with the stand-in oracle (invariance_linf.py's 5-NN vote) on the examples it "
        "relabels, pooled over the AT models and both attack eps, split by whether PGD broke the original point at "
        f"that eps: PGD-robust {pooled['robust']['agree']:.3f} ({pooled['robust']['n']} examples) vs broken "
        f"{pooled['not_robust']['agree']:.3f} ({pooled['not_robust']['n']}); rule: one-sided Fisher exact test (the "
        "pooled examples share points across models, so it treats them as independent: approximate)", mech,
        stand_in_why(mech), kind="beyond", short="Mechanism on our examples: PGD-robust points keep the label",
        paper_value="robust < broken",
        ours_value=f"{pooled['robust']['k']}/{pooled['robust']['n']} vs "
                   f"{pooled['not_robust']['k']}/{pooled['not_robust']['n']}"))
    return claims


def _conditional_agreement(args, xq, yq, models, robust):
    """Agreement with the k-NN oracle on accepted invariance examples, split by PGD-robustness of x."""
    any_model = next(iter(models.values()))
    xt, yt = any_model.x_train, any_model.y_train
    shift = 1 if args.quick else 2
    out = {"per_model": {}, "pooled": {"robust": {"k": 0, "n": 0}, "not_robust": {"k": 0, "n": 0}}}
    for i, eps in enumerate(EPS_ATTACK):
        inv = invariance_set(args, xq, yq, xt, yt, eps, shift)        # the cached examples of invariance_linf.py
        lab = inv["knn"]
        acc = (lab >= 0) & (lab != yq)
        for e_train, m in models.items():
            agree = predict(m, inv["x_adv"]) == lab
            rob = robust[e_train][i]
            rec = {}
            for name, sel in (("robust", acc & rob), ("not_robust", acc & ~rob)):
                rec[name] = {"k": int(agree[sel].sum()), "n": int(sel.sum())}
                if e_train > 0:
                    out["pooled"][name]["k"] += rec[name]["k"]
                    out["pooled"][name]["n"] += rec[name]["n"]
            out["per_model"][f"{fmt(e_train)}@{fmt(eps)}"] = rec
    for v in out["pooled"].values():
        v["agree"] = v["k"] / v["n"] if v["n"] else float("nan")
    return out


if __name__ == "__main__":
    main()
