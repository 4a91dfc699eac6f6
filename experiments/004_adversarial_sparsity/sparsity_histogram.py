"""Paper 004, Figure 5 and App. C.3: per-point sparsity of ST and AT models, and what ST's sparsity says about AT,
on full MNIST (our stand-in for the paper's CIFAR-10 ResNet-18s).

Models: the full-MNIST ST CNN and, per norm, the AT CNN trained at the
evaluation radius (l_2: AT-l2-1.5 at eps 1.5; l_inf: AT-linf-0.1 at 0.1),
box [0, 1]. The pool is the first 1,000 points of the class-interleaved
held-out split (stratified); vulnerable = correct and broken by APGD
(cross-entropy and margin losses, 50 steps each).

* Fig. 5 / C.3, spread over points: each model's per-point sparsity on a
  stratified sample of 60 of its vulnerable points (its residual set; not
  paired, since the claim is about each model's own residual points); the
  ratio of standard deviations AT / ST with a bootstrap interval.
* C.3, ST's sparsity predicts AT robustness: among the pool points where ST
  is vulnerable, those the AT model classifies robustly (positives) and
  those it does not (negatives; rare, so sampled apart: a case-control
  sample of up to 60 of each, stratified by class); the ROC AUC of ST's
  sparsity (one-sided Mann-Whitney), and the precision at the equal error
  rate at the pool's own base rate (the fraction AT-robust among ST-vulnerable
  points, which sets what a precision means).
* Without the box (beyond): the same comparison of ST and AT-l2-1.5 with
  perturbations in all of R^d.

    python experiments/004_adversarial_sparsity/sparsity_histogram.py --out results/experiments/sparsity_histogram
"""
from __future__ import annotations

import math
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
import sparsity_study as S
from shared import parse_args, write_result

from rcurves.claims.record import claim, fmt

PAIRS = {"l2": "mnist-full-cnn-at-l2-1.5", "linf": "mnist-full-cnn-at-linf-0.1"}
N_HIST = 60      # points per residual sample (spread over points)
N_CASE = 60      # points per class of the C.3 case-control sample
N_BOOT = 2000
REL_EFFECT = 0.1
SPREAD_EFFECT = 1.25   # "even larger": the smallest ratio of standard deviations the claim is about
PAPER_STD = {"l2": 0.144, "linf": 52.8}   # App. C.3: the CIFAR-10 ST model's std over 100 inputs (rad, dims)


def equal_error_precision(score, label, base_rate=None):
    """The rule ``score >= t`` for ``label``: ``(precision, threshold, auc)`` at the threshold where the false
    positive rate equals the false negative rate (the equal error rate). ``base_rate``: the positives' share
    in the population the sample stands for (a case-control sample's own share is not it); default: the
    sample's. Precision = TPR pi / (TPR pi + FPR (1 - pi))."""
    score, label = np.asarray(score, float), np.asarray(label, bool)
    if label.all() or (~label).all():
        return math.nan, math.nan, math.nan
    pi = float(label.mean()) if base_rate is None else float(base_rate)
    best = None
    for t in np.unique(score):
        pred = score >= t
        tpr = (pred & label).sum() / label.sum()
        fpr = (pred & ~label).sum() / (~label).sum()
        gap = abs(fpr - (1 - tpr))
        if best is None or gap < best[0]:
            prec = tpr * pi / (tpr * pi + fpr * (1 - pi)) if tpr * pi + fpr * (1 - pi) > 0 else math.nan
            best = (gap, t, prec)
    return float(best[2]), float(best[1]), auc_of(score[label], score[~label])


def auc_of(pos, neg) -> float:
    """The ROC AUC of a score: P(pos > neg) + P(pos = neg) / 2 over all pairs (NaN when a side is empty)."""
    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    if not pos.size or not neg.size:
        return math.nan
    return float(np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])))


def std_ratio_draws(a, b, seed: int = 0, n_boot: int = N_BOOT):
    """``(ratio, draws)``: std(a) / std(b) (ddof 1) and ``n_boot`` bootstrap draws of it (independent samples,
    each resampled with replacement); ``(nan, empty)`` below 3 values a side."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size < 3 or b.size < 3:
        return math.nan, np.zeros(0)
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, a.size, (n_boot, a.size))
    ib = rng.integers(0, b.size, (n_boot, b.size))
    r = a[ia].std(axis=1, ddof=1) / np.maximum(b[ib].std(axis=1, ddof=1), 1e-12)
    return float(a.std(ddof=1) / b.std(ddof=1)), r


def std_ratio_interval(a, b, seed: int = 0, n_boot: int = N_BOOT, level: float = 0.95):
    """``(ratio, lo, hi)``: std(a) / std(b) (ddof 1) and its percentile bootstrap interval (independent samples,
    each resampled with replacement)."""
    ratio, r = std_ratio_draws(a, b, seed, n_boot)
    if not r.size:
        return math.nan, math.nan, math.nan
    q = (1 - level) / 2
    return ratio, float(np.quantile(r, q)), float(np.quantile(r, 1 - q))


def spread_rule(a, b, what: str):
    """"``a``'s spread over points is larger than ``b``'s" as ``rule(level)``: the percentile bootstrap interval
    of the ratio of standard deviations at ``1 - level`` (``interval_above`` against 1, smallest effect
    ``SPREAD_EFFECT``); ``p``: twice the bootstrap share of ratios at or below 1 (below ``level`` exactly when
    the interval lies above 1)."""
    from rcurves.claims.verdicts import interval_above

    ratio, r = std_ratio_draws(a, b)

    def rule(level):
        if not r.size:
            return interval_above(math.nan, math.nan, null=1.0, effect=SPREAD_EFFECT, what=what)._replace(p=1.0)
        lo, hi = float(np.quantile(r, level / 2)), float(np.quantile(r, 1 - level / 2))
        p = float(min(1.0, 2 * np.mean(r <= 1.0)))
        return interval_above(lo, hi, null=1.0, effect=SPREAD_EFFECT, what=what, level=1 - level)._replace(p=p)
    return rule, ratio


def c3_sample(study, st, at, norm):
    """(positives, negatives, base rate k/n): the C.3 case-control sample of ST-vulnerable pool points, split by
    the AT model's robustness, each a stratified sample of up to ``n_case``."""
    vs = study.vulnerable(st, norm)
    rob = study.robust(at, norm)
    k = study.b.n_sparsity if study.args.quick else N_CASE
    return study.sample(vs & rob, k), study.sample(vs & ~rob, k), (int(np.sum(vs & rob)), int(np.sum(vs)))


def make_claims(rows, c3, unbounded, setting, pool_text):
    """Claims from ``rows[(norm, label)]`` (residual rows; ST first), ``c3[norm]`` and ``unbounded`` (or None). The
    spread rows of both norms are one family, and the C.3 rows of both norms another (Holm)."""
    from rcurves.claims.verdicts import auc_greater

    claims = []
    norms = [n for n in ("l2", "linf") if len([k for k in rows if k[0] == n]) >= 2]
    spread = {}
    for norm in norms:
        labs = [k[1] for k in rows if k[0] == norm]
        r_st, r_at = rows[(norm, labs[0])], rows[(norm, labs[1])]
        spread[norm] = (labs, r_st, r_at) + spread_rule(r_at["per_point"], r_st["per_point"],
                                                        f"std {labs[1]} / std {labs[0]}")
    sv = dict(zip(norms, S.holm([spread[n][3] for n in norms], f"the spread in {len(norms)} norms"))) if norms else {}
    c3n = [n for n in norms if c3.get(n)]
    cv = dict(zip(c3n, S.holm([lambda lv, c=c3[n]: auc_greater(c["pos"], c["neg"], alpha=lv,
                                                               what="ST's sparsity, AT-robust vs not") for n in c3n],
                              f"C.3 in {len(c3n)} norms"))) if c3n else {}
    for norm in norms:
        labs, r_st, r_at, _, ratio = spread[norm]
        s_st, s_at = np.std(r_st["per_point"], ddof=1), np.std(r_at["per_point"], ddof=1)
        unit = S.UNIT[norm]
        claims.append(claim(
            "004", f"Fig. 5 / C.3 ({norm}): spread over points",
            "sparsity varies a lot from point to point (CIFAR-10 ST: std 0.144 rad / 52.8 dims over 100 inputs), even "
            "more for adversarially trained models",
            f"{setting}; each model on a stratified sample of its own vulnerable points (its residual set, not "
            f"paired: the claim is about each model's residual points) of {pool_text}: {labs[0]} std "
            f"{fmt(s_st)} {unit} (n = {r_st['n_measured']}, mean {fmt(r_st['residual_sparsity'])}), {labs[1]} std "
            f"{fmt(s_at)} {unit} (n = {r_at['n_measured']}, mean {fmt(r_at['residual_sparsity'])}); ratio "
            f"{fmt(ratio, 3)} (bootstrap, {N_BOOT} resamples); Holm over the {len(norms)} norms (one family)",
            sv[norm], short=f"Sparsity varies over points, more for AT ({norm})",
            paper_value=f"std {PAPER_STD[norm]:g} {unit}; AT more",
            ours_value=f"std {fmt(s_st)}; AT x{ratio:.2f}"))
        c = c3.get(norm)
        if c:
            claims.append(claim(
                "004", f"C.3 ({norm}): ST sparsity predicts AT robustness",
                "a threshold on the ST model's per-point sparsity predicts which points the AT model classifies "
                "robustly (67% precision at the equal error rate)",
                f"{setting}; case-control sample of the ST-vulnerable points of {pool_text}: {c['pos'].size} "
                f"AT-robust and {c['neg'].size} not (stratified each); base rate among ST-vulnerable pool points: "
                f"AT-robust {S.wilson_text(c['base_k'], c['base_n'])} (the rate a precision must beat); precision at "
                f"the equal error rate at that base rate {fmt(c['precision'])} (threshold {fmt(c['threshold'])} "
                f"{unit}), at a 50% base rate {fmt(c['precision_balanced'])}; mean ST sparsity AT-robust "
                f"{fmt(np.mean(c['pos'])) if c['pos'].size else 'nan'} vs not "
                f"{fmt(np.mean(c['neg'])) if c['neg'].size else 'nan'}; Holm over the {len(c3n)} norms (one "
                f"family)", cv[norm], short=f"ST's sparsity predicts which points AT keeps robust ({norm})",
                paper_value="67% precision at EER",
                ours_value=f"{c['precision']:.0%} precision, AUC {auc_of(c['pos'], c['neg']):.2f}"))
    if unbounded:
        ea, eb = unbounded["at"], unbounded["st"]
        con = S.welch(ea, eb, factor=2.0)
        v = S.residual_greater(con, effect=REL_EFFECT * float(np.mean(eb)) if eb.size else 1.0,
                               what="AT-l2-1.5 vs ST without the box (x2, own points)")
        pa, pb = unbounded.get("paired_at", np.zeros(0)), unbounded.get("paired_st", np.zeros(0))
        paired = (f"ours, paired on the {pa.size} points of AT-l2-1.5's sample where ST is vulnerable too (a subset "
                  f"chosen by AT's vulnerability): AT {fmt(np.mean(pa))} vs ST {fmt(np.mean(pb))} rad"
                  if pa.size else "ours, paired: no points")
        claims.append(claim(
            "004", "Table 1 (l_2) without the box",
            "(beyond the paper) AT raises l_2 sparsity about threefold (CIFAR-10 ResNet-18: 0.180 -> 0.553 rad) also "
            "on MNIST once the box [0, 1] no longer puts its floor under every value",
            f"{setting}; perturbations in all of R^d; each model on its own stratified vulnerable sample (of "
            f"{pool_text}; the paper's quantity, Welch): AT {fmt(np.mean(ea)) if ea.size else 'nan'} (n = {ea.size}) "
            f"vs ST {fmt(np.mean(eb)) if eb.size else 'nan'} (n = {eb.size}) rad "
            f"(x{fmt(np.mean(ea) / np.mean(eb), 3) if eb.size and ea.size else 'nan'}); in the box the same points: "
            f"AT {fmt(unbounded['box_at'])} vs ST {fmt(unbounded['box_st'])} rad; {paired}",
            v, kind="beyond", short="AT raises l_2 sparsity about threefold without the box [0, 1]",
            paper_value="0.180 -> 0.553 rad",
            ours_value=f"{np.mean(eb) if eb.size else math.nan:.3f} -> {np.mean(ea) if ea.size else math.nan:.3f} "
                       f"rad"))
    return claims


def main(argv=None):
    args = parse_args(__doc__, name="sparsity_histogram", argv=argv)
    b = S.budget(args)
    study = S.Study(args, S.dataset(args), b, args.seed)
    k_hist = b.n_sparsity if args.quick else N_HIST
    st = S.quick_model("st") if args.quick else S.zoo_model(args, "mnist-full-cnn-st", "ST")
    rows, c3, unbounded = {}, {}, None
    norms = ("l2",) if args.quick else ("l2", "linf")
    for norm in norms:
        at = S.quick_model("at") if args.quick else S.zoo_model(args, PAIRS[norm])
        for m in (st, at):
            rows[(norm, m.label)] = study.residual(m, norm, k_hist)
            r = rows[(norm, m.label)]
            print(S.fmt_row(r), f"point std {np.std(r['per_point'], ddof=1):.3g}", flush=True)
        pos, neg, (bk, bn) = c3_sample(study, st, at, norm)
        study.measure(st, norm, np.concatenate([pos, neg]))
        vals = study.values(st, norm)
        vp, vn = vals[pos], vals[neg]
        vp, vn = vp[np.isfinite(vp)], vn[np.isfinite(vn)]
        score = np.concatenate([vp, vn])
        label = np.r_[np.ones(vp.size, bool), np.zeros(vn.size, bool)]
        prec, thr, auc = equal_error_precision(score, label, base_rate=bk / max(bn, 1))
        prec_bal, _, _ = equal_error_precision(score, label, base_rate=0.5)
        c3[norm] = {"pos": vp, "neg": vn, "pos_index": pos, "neg_index": neg, "base_k": bk, "base_n": bn,
                    "precision": prec, "precision_balanced": prec_bal, "threshold": thr, "auc": auc}
        print(norm, "C.3", {k: v for k, v in c3[norm].items() if not isinstance(v, np.ndarray)}, flush=True)
        if norm == "l2" and not args.quick:
            # each model's own sample without the box (every box-vulnerable point is vulnerable without it)
            su = S.Study(args, study.ds, b, args.seed, x=study.x, y=study.y, text=study.text, bounds=None)
            su._correct, su._vuln = dict(study._correct), {k: v for k, v in study._vuln.items()}
            own = {m.label: rows[(norm, m.label)]["index"] for m in (st, at)}
            for m in (st, at):
                su.measure(m, norm, own[m.label])
            ua, ub = su.values(at, norm)[own[at.label]], su.values(st, norm)[own[st.label]]
            pa, pb, _ = S.paired_values(su, at, st, norm, own[at.label])
            unbounded = {"at": ua[np.isfinite(ua)], "st": ub[np.isfinite(ub)],
                         "box_at": rows[(norm, at.label)]["residual_sparsity"],
                         "box_st": rows[(norm, st.label)]["residual_sparsity"], "paired_at": pa, "paired_st": pb}
            study.seconds["sparsity"] = study.seconds.get("sparsity", 0.0) + su.seconds.get("sparsity", 0.0)
    claims = make_claims(rows, c3, unbounded, S.setting(args), study.text)

    figures = []
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from shared import save_figure

        fig, axes = plt.subplots(1, len(norms), figsize=(5.5 * len(norms), 4), squeeze=False)
        for ax, norm in zip(axes[0], norms):
            for (nm, lab), r in rows.items():
                if nm == norm:
                    ax.hist(r["per_point"], bins=20, alpha=0.55, label=f"{lab} ({r['n_measured']} pts)")
            ax.set_xlabel(f"per-point {norm} sparsity ({S.UNIT[norm]})")
            ax.set_ylabel("points")
            ax.set_title(f"{norm}, eps = {study.eps[norm]:g}")
            ax.legend(fontsize=8)
        fig.tight_layout()
        caption = (f"Paper 004 Figure 5 on {'full MNIST' if not args.quick else 'digits (--quick)'}: histograms of "
                   f"per-point sparsity of the standardly trained model and the adversarially trained one, per norm ("
                   + "; ".join(f"{nm}: {lab} n = {r['n_measured']}" for (nm, lab), r in rows.items())
                   + f"); each model on a stratified sample of its own vulnerable points of {study.text}, "
                     f"{b.directions} directions per point; l_2 at eps {study.eps['l2']:g}"
                   + (f", l_inf at {study.eps['linf']:g}" if "linf" in norms else "") + ", box [0, 1].")
        figures.append(save_figure(fig, args, "sparsity_histogram.png", caption))
    except ImportError:
        pass
    write_result(args, {"pool": study.text, "budget": b.__dict__,
                        "per_point": [{"norm": k[0], "model": k[1], "values": v["per_point"], "index": v["index"]}
                                      for k, v in rows.items()],
                        "c3": c3, "unbounded": unbounded, "seconds_by_stage": study.seconds}, claims, figures)
    return {"rows": rows, "c3": c3, "claims": claims, "study": study}


if __name__ == "__main__":
    main()
