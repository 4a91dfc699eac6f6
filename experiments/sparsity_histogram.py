"""Paper 004, Figure 5 and App. C.3: per-point sparsity of ST and AT models, and what ST's sparsity says about AT.

Per point residual sparsity (``rcurves.sparsity``, box [0, 1]) of the MNIST ST
CNN and the AT CNNs (l_2: AT-l_2-1.5 at eps 1.5; l_inf: AT-l_inf-0.1 at eps
0.1), on the first 200 vulnerable held-out points of each model; their
histograms and their spread over points (App. C.3: ST std 0.144 rad /
52.8 dims on CIFAR-10, larger for AT). Then C.3's observation: on the points
where ST is vulnerable, does ST's per-point sparsity predict whether the AT
model classifies the point robustly? (The paper: a threshold on ST's
sparsity reaches 67 % precision at the equal error rate.) Robust = correct
and not broken by APGD (cross-entropy and margin losses, 100 steps) at eps.

    python experiments/sparsity_histogram.py --out results/experiments/sparsity_histogram
"""
from __future__ import annotations

import dataclasses
import math
import os

import numpy as np

import _sparsity_common as S
from _common import claim, fmt, parse_args, write_result

PAIRS = {"l2": ("mnist-cnn-at-l2-1.5", "AT-l2-1.5"), "linf": ("mnist-cnn-at-linf-0.1", "AT-linf-0.1")}
N_SPARSITY = 200


def equal_error_precision(score, label):
    """Precision of the rule ``score >= t`` for ``label`` at the threshold where the false positive
    rate equals the false negative rate (the equal error rate), and the ROC AUC."""
    score, label = np.asarray(score, float), np.asarray(label, bool)
    if label.all() or (~label).all():
        return math.nan, math.nan, math.nan
    ts = np.unique(score)
    best = None
    for t in ts:
        pred = score >= t
        fpr = (pred & ~label).sum() / (~label).sum()
        fnr = (~pred & label).sum() / label.sum()
        if best is None or abs(fpr - fnr) < best[0]:
            best = (abs(fpr - fnr), t, (pred & label).sum() / max(pred.sum(), 1), fpr)
    from scipy.stats import mannwhitneyu

    auc = mannwhitneyu(score[label], score[~label]).statistic / (label.sum() * (~label).sum())
    return float(best[2]), float(best[1]), float(auc)


def make_claims(rows, c3):
    """Claims from ``rows[(norm, label)]`` (measure() rows; ST first, then the AT model) and ``c3[norm]``."""
    claims = []
    if ("l2-unbounded", "ST") in rows:
        (st_lab, b_st), (at_lab, b_at) = [(k[1], v) for k, v in rows.items() if k[0] == "l2"]
        u_st, u_at = rows[("l2-unbounded", st_lab)], rows[("l2-unbounded", at_lab)]
        floor = np.mean(b_st["box_floor"]) if len(b_st.get("box_floor", [])) else math.nan
        claims.append(claim(
            "004", "Table 1 (l_2) in the box and without it",
            "AT raises l_2 sparsity about threefold (CIFAR-10 ResNet-18: 0.180 -> 0.553 rad)",
            f"on the same points: in [0, 1]^d {st_lab} {fmt(b_st['residual_sparsity'])} vs {at_lab} "
            f"{fmt(b_at['residual_sparsity'])} rad (x{fmt(b_at['residual_sparsity'] / b_st['residual_sparsity'], 2)}); "
            f"without the box {fmt(u_st['residual_sparsity'])} vs {fmt(u_at['residual_sparsity'])} rad "
            f"(x{fmt(u_at['residual_sparsity'] / u_st['residual_sparsity'], 2)}, z = {fmt(S.z_diff(u_st, u_at), 2)}); "
            f"the box alone puts a floor of {fmt(floor)} rad under every l_2 sparsity here (the angle of the point of "
            f"sphere n box nearest each direction)",
            "reproduced" if u_at["residual_sparsity"] > 2 * u_st["residual_sparsity"] else "differs",
            "" if u_at["residual_sparsity"] > 2 * u_st["residual_sparsity"] else
            "even without the box, AT raises l_2 sparsity by much less than threefold on these MNIST models"))
    for norm in sorted({k[0] for k in rows} - {"l2-unbounded"}):
        pair = [(k[1], v) for k, v in rows.items() if k[0] == norm]
        if len(pair) < 2:
            continue
        (st_lab, r_st), (at_lab, r_at) = pair
        s_st, s_at = np.std(r_st["per_point"], ddof=1), np.std(r_at["per_point"], ddof=1)
        unit = "rad" if norm == "l2" else "dims"
        ok = bool(s_at > s_st)
        claims.append(claim(
            "004", f"Fig. 5 / C.3 ({norm})",
            "sparsity varies a lot from point to point (ST std 0.144 rad / 52.8 dims on CIFAR-10), even more for "
            "adversarially trained models",
            f"std over points: {st_lab} {fmt(s_st)} {unit} ({r_st['n_measured']} points, mean "
            f"{fmt(r_st['residual_sparsity'])}), {at_lab} {fmt(s_at)} {unit} ({r_at['n_measured']} points, mean "
            f"{fmt(r_at['residual_sparsity'])}); coefficient of variation {fmt(s_st / r_st['residual_sparsity'], 2)} "
            f"vs {fmt(s_at / r_at['residual_sparsity'], 2)}",
            "reproduced" if ok else "differs", "" if ok else "the AT model's per-point spread is not larger"))
        c = c3[norm]
        ok = bool(np.isfinite(c["auc"]) and c["auc"] > 0.6)
        claims.append(claim(
            "004", f"C.3 ({norm}): ST sparsity predicts AT robustness",
            "a threshold on the ST model's per-point sparsity predicts which points the AT model classifies robustly "
            "(67% precision at the equal error rate)",
            f"on {c['n']} ST-vulnerable points ({fmt(c['at_robust_fraction'])} of them AT-robust): precision "
            f"{fmt(c['precision_at_eer'])} at the equal error rate (threshold {fmt(c['threshold'])} {unit}), ROC AUC "
            f"{fmt(c['auc'])}",
            "reproduced" if ok else "differs",
            "" if ok else "ST's sparsity does not separate the AT-robust points (AUC <= 0.6)"))
    return claims


def main(argv=None):
    args = parse_args(__doc__, name="sparsity_histogram", argv=argv)
    b = S.budget(args)
    if not args.quick:
        b = dataclasses.replace(b, n_sparsity=N_SPARSITY)
    ds = "digits" if args.quick else "mnist"
    x, y = S.test_points(ds, b.n_eval)
    rows, c3 = {}, {}
    for norm in ("l2", "linf") if not args.quick else ("l2",):
        eps = S.EPS[ds][norm]
        # --quick: the ST stand-in only (its histogram; no AT model, no C.3)
        ms = [S.quick_model()] if args.quick else [S.zoo_model(args, "mnist-cnn-st", "ST"),
                                                   S.zoo_model(args, *PAIRS[norm])]
        vuln = {}
        for m in ms:
            correct = S.predictions(m.logits_fn, x) == y
            vuln[m.label] = correct & S.broken_by_attack(m.logits_fn, x, y, eps, norm, b, args.seed)
            r = S.measure(m, x, y, eps, norm, b, args.seed, vulnerable=vuln[m.label])
            rows[(norm, m.label)] = r
            print(S.fmt_row(r), f"point std {np.std(r['per_point'], ddof=1):.3g}", flush=True)
        if len(ms) < 2:
            continue
        st, at = ms
        if norm == "l2":
            # The same points without the box (perturbations in all of R^d, the theory's setting): how much of
            # the ST/AT contrast the domain [0, 1] takes away. Each point's admissible set only grows, so its
            # sparsity can only fall (up to the attack's imperfection).
            for m in ms:
                r = S.measure(m, x, y, eps, norm, b, args.seed, vulnerable=vuln[m.label], bounds=None)
                rows[(norm + "-unbounded", m.label)] = r
                print("unbounded", S.fmt_row(r), flush=True)
        # C.3: ST's sparsity on a point vs the AT model being robust there
        rst = rows[(norm, st.label)]
        at_robust = (S.predictions(at.logits_fn, x) == y) & ~vuln[at.label]
        idx = rst["index"]
        prec, thr, auc = equal_error_precision(rst["per_point"], at_robust[idx])
        c3[norm] = {"n": int(idx.size), "at_robust_fraction": float(at_robust[idx].mean()) if idx.size else math.nan,
                    "precision_at_eer": prec, "threshold": thr, "auc": auc}
        print(norm, "C.3", c3[norm], flush=True)
    claims = make_claims(rows, c3)

    figures = []
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        norms = sorted({k[0] for k in rows})
        fig, axes = plt.subplots(1, len(norms), figsize=(5.5 * len(norms), 4), squeeze=False)
        for ax, norm in zip(axes[0], norms):
            for (nm, lab), r in rows.items():
                if nm == norm:
                    ax.hist(r["per_point"], bins=20, alpha=0.55, label=f"{lab} ({r['n_measured']} pts)")
            base = norm.split("-")[0]
            ax.set_xlabel("per-point sparsity (" + ("rad" if base == "l2" else "dims") + ")")
            ax.set_ylabel("points")
            ax.set_title(f"{ds} {norm}, eps = {S.EPS[ds][base]:g}")
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(args.out, "sparsity_histogram.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        figures.append(path)
    except ImportError:
        pass
    write_result(args, {"per_point": [{"norm": k[0], "model": k[1], "values": v["per_point"],
                                       "index": v["index"]} for k, v in rows.items()],
                        "c3": c3}, claims, figures)
    return {"rows": rows, "c3": c3, "claims": claims}


if __name__ == "__main__":
    main()
