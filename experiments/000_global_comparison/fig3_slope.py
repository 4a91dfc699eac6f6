"""Paper 000, Figure 3: the curve of an adversarially trained model changes slope at its training eps.

The paper's MMR+AT models (MNIST and FMNIST, l_inf eps 0.1) have l_inf curves
that are flat up to about the training eps and rise steeply above it, "which
could be a sign of overfitting to the specific threat models" since "the change
of slope occurs approximately at the chosen perturbation threshold". Ours: the
zoo's MMR+AT CNN on full MNIST (l_inf 0.1, the paper's model kind: the paper
row), and as "beyond" rows the PGD adversarially trained CNNs (l_inf at 0.1,
0.2, 0.3, 0.4, at 0.1 with single-step FGSM-RS; l_2 at 1.5), with the ST CNN
as control, on the shared evaluation of ``table1_fig2.py`` (2,000 random test
images, the same for every model).

The statistic is a change of density of the distances (the slope of the
empirical curve): with a window ``h``, at a centre ``c`` the points with
distance in ``(c - h, c]`` (``k_below``) and in ``(c, c + h]`` (``k_above``);
under "no change of slope at c" the ``k_below + k_above`` points split 50/50,
so the one-sided exact binomial test of ``k_above`` says whether the curve
gets significantly steeper at ``c``. The scan runs over centres from ``h`` to
``3 eps`` in steps of ``h / 4``, Holm over the centres (one family per model).

The window is what the paper's figure supports (:data:`WINDOW`): its
Figure 3 draws the l_inf curves of four data sets on one axis (MNIST and
FMNIST trained at 0.1, GTS at 4/255, CIFAR-10 at 2/255) and its text places
the change of slope only "approximately at the chosen perturbation
threshold", with points "just beyond this threshold". Read off such a
figure, "approximately at eps" is "nearer to eps than to 0 or to 2 eps": within
``eps / 2`` of it. The slopes are measured on windows of that width too
(``h = eps / 2``), so a kink is located to the precision of the claim, no
finer: a narrower window tests a sharper statement than the paper makes
(``h = eps / 6`` placed "at 0.1" in [0.083, 0.117], a precision its
"approximately", read off a shared axis, does not claim).

What "the change of slope is at eps" means is fixed before the run
(:func:`slope_verdict`): a significant increase of the density at some centre
within ``h`` of the training eps; no significant increase elsewhere larger
than :data:`MARGIN` times the largest within ``h`` of eps (increases in points
per unit eps); and the ST control, scanned the same way, no significant
increase at the centre of the model's largest one (else the kink is the
data's, not the training's; the ST model's own steep part, around 0.05-0.07 on
MNIST, lies inside the window of eps 0.1 and says nothing about the model's
kink). Where nothing is significant the verdict is differs only when the
test had power (0.8 against a 3:1 split, ``k_above : k_below``, at the first
Holm level) at some centre within the window, else inconclusive.

Each row states its model's training budget (our recipe's epochs, read from
the zoo entry, against the paper's 100) and its clean accuracy on the
evaluation's points.

    python experiments/000_global_comparison/fig3_slope.py --out results/experiments/fig3_slope
"""
from __future__ import annotations

import math
import os
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))      # _methods.py
from shared import evaluation_sample, l2_repair_text, parse_args, with_linf_adversarial_l2, write_result

import _methods as M  # noqa: E402
from rcurves.claims.record import claim, fmt  # noqa: E402
from rcurves.claims.verdicts import Verdict  # noqa: E402

MODELS = ("mnist-full-cnn-st", M.MMR_AT, "mnist-full-cnn-at-linf-0.1", "mnist-full-cnn-at-linf-0.1-1step",
          "mnist-full-cnn-at-linf-0.2", "mnist-full-cnn-at-linf-0.3", "mnist-full-cnn-at-linf-0.4",
          "mnist-full-cnn-at-l2-1.5")
ALPHA = 0.05
MARGIN = 2.0    # a significant increase elsewhere this many times the largest one at eps: the change is not at eps
#: the window, as a fraction of the training eps: the slopes' width and the tolerance of "at eps" (module docstring)
WINDOW = 0.5
#: the alternative of the power step: the density above the centre three times the one below, and the power wanted
EFFECT, POWER = 0.75, 0.8


def slope_change(d, eps, h, alpha=ALPHA):
    """Slopes of the empirical curve of ``d`` just below and just above ``eps``, with DKW intervals.

    ``k_below``: points with distance in ``(eps - h, eps]``, ``k_above`` in ``(eps, eps + h]``;
    slopes are ``k / (n h)``; ``binomial_p`` is the one-sided exact test of ``k_above`` against a
    50/50 split (the curve steeper above than below).
    """
    from scipy.stats import binom

    d = np.asarray(d, np.float64)
    n = d.size
    k_below = int(np.sum((d > eps - h) & (d <= eps)))
    k_above = int(np.sum((d > eps) & (d <= eps + h)))
    half = math.sqrt(math.log(2.0 / alpha) / (2.0 * n))
    below, above = k_below / (n * h), k_above / (n * h)
    k = k_below + k_above
    p = 1.0 if k == 0 else float(binom.sf(k_above - 1, k, 0.5))
    return {"eps": eps, "h": h, "k_below": k_below, "k_above": k_above, "slope_below": below, "slope_above": above,
            "ratio": (above / below) if below > 0 else (math.inf if above > 0 else 1.0),
            "slope_interval_halfwidth": 2 * half / h, "binomial_p": p}


def slope_scan(d, h, hi, alpha=ALPHA):
    """The change of density of ``d`` at every centre ``c`` in ``[h, hi]`` (step ``h / 4``).

    Returns ``{'centres' (m,), 'k_below', 'k_above', 'p' (one-sided binomial, steeper above),
    'increase' ((k_above - k_below) / (n h): the jump of the slope), 'level' (alpha / m: the first
    Holm level), 'significant' (m,) bool: Holm over the m centres at family-wise ``alpha``}``.
    """
    from scipy.stats import binom

    d = np.sort(np.asarray(d, np.float64))
    n = d.size
    c = np.arange(h, hi + 1e-12 * hi, h / 4.0)
    cnt = lambda t: np.searchsorted(d, t, side="right")           # noqa: E731  points with d <= t
    kb = cnt(c) - cnt(c - h)
    ka = cnt(c + h) - cnt(c)
    k = ka + kb
    p = np.where(k > 0, binom.sf(ka - 1, k, 0.5), 1.0)
    level = alpha / max(1, c.size)
    return {"centres": c, "h": h, "k_below": kb.astype(np.int64), "k_above": ka.astype(np.int64), "p": p,
            "increase": (ka - kb) / (max(n, 1) * h), "level": level, "alpha": alpha,
            "significant": M.holm(p, alpha) & (ka > kb)}


def slope_verdict(scan, control, eps, tol, margin=MARGIN, effect=EFFECT, power=POWER):
    """"The curve changes slope at the training eps" (000 Figure 3) from two :func:`slope_scan`\\ s.

    The rule, fixed in advance: reproduced when (1) the model's density increases significantly (Holm
    over the scan's centres) at some centre within ``tol`` of ``eps``, (2) no significant increase at
    a centre farther away is more than ``margin`` times the largest one within ``tol`` (in points per
    unit eps), and (3) the control (ST, same norm, same centres) has no significant increase at the centre
    of that largest one. differs: (1), (2) or (3) fails although a change could be seen (a significant
    increase elsewhere, or power ``power`` against a split ``effect`` of ``k_above : k_below`` at the
    first Holm level at some centre within ``tol``); inconclusive: nothing significant anywhere, and no
    centre within ``tol`` had that power.
    """
    from rcurves.claims.paired_counts import _one_sided_power

    c, sig, inc = scan["centres"], scan["significant"], scan["increase"]
    slack = 1e-9 * max(1.0, abs(eps))
    near = np.abs(c - eps) <= tol + slack
    k = scan["k_below"] + scan["k_above"]

    def at(i, sc=scan):
        return (f"{sc['centres'][i]:.4g} ({sc['k_below'][i]} -> {sc['k_above'][i]} points, one-sided binomial "
                f"p = {sc['p'][i]:.1e})")

    sig_near, sig_far = sig & near, sig & ~near
    i_near = np.flatnonzero(sig_near)[np.argmax(inc[sig_near])] if sig_near.any() else None
    i_far = np.flatnonzero(sig_far)[np.argmax(inc[sig_far])] if sig_far.any() else None
    j = int(np.argmin(np.abs(c - eps)))
    # the control at the centre nearest the model's kink (the same centres when both scans share h and range)
    jc = int(np.argmin(np.abs(control["centres"] - (c[i_near] if i_near is not None else eps))))
    ctrl_at = i_near is not None and bool(control["significant"][jc])
    pw = {int(i): _one_sided_power(int(k[i]), effect, scan["level"]) for i in np.flatnonzero(near)}
    i_pw = max(pw, key=pw.get) if pw else None
    test = (f"rule (fixed in advance): a significant increase of the density within +-{tol:.3g} of {eps:g}, none "
            f"elsewhere more than {margin:g}x the largest within it, none of the ST control at the centre of that "
            f"largest; scan of {c.size} centres, windows of {scan['h']:.3g}, one-sided exact binomial, "
            f"{M.holm_text(scan.get('alpha', ALPHA))} over the centres (first level {scan['level']:.2g}); "
            f"{int(sig.sum())} centres significant, {int(sig_near.sum())} within +-{tol:.3g}; largest within: "
            + (at(i_near) if i_near is not None else "none")
            + "; largest elsewhere: " + (at(i_far) + (f", {inc[i_far] / inc[i_near]:.2g}x the largest within"
                                                       if i_near is not None else "") if i_far is not None else "none")
            + f"; at the training eps: {at(j)}; control at {control['centres'][jc]:.4g}: {at(jc, control)}, "
              f"significant: {ctrl_at}"
            + (f"; power within +-{tol:.3g} against a {effect:.3g} : {1 - effect:.3g} split at the first level: at "
               f"most {pw[i_pw]:.2f} (at {c[i_pw]:.4g}, {int(k[i_pw])} points)" if i_pw is not None else ""))
    if not sig.any():
        if i_pw is not None and pw[i_pw] >= power:
            return Verdict("differs", test, f"the curve never gets significantly steeper, although the test had power "
                                            f"{pw[i_pw]:.2f} against a {effect:.3g} : {1 - effect:.3g} split of the "
                                            f"points around {c[i_pw]:.4g}")
        return Verdict("inconclusive", test, f"the curve never gets significantly steeper, and no centre within "
                                             f"{tol:.3g} of {eps:g} had power {power:g} against a {effect:.3g} : "
                                             f"{1 - effect:.3g} split at the first Holm level {scan['level']:.2g}: "
                                             f"a larger sample is needed")
    if i_near is None:
        return Verdict("differs", test, f"no significant change of slope within {tol:.3g} of the training eps "
                                        f"{eps:g} (the largest is at {c[i_far]:.3g})")
    big = sig_far & (inc > margin * inc[i_near])
    if big.any():
        b = np.flatnonzero(big)[np.argmax(inc[big])]
        return Verdict("differs", test, f"a change of slope {inc[b] / inc[i_near]:.2g}x the one at the training "
                                        f"eps lies at {c[b]:.3g} (rule: at most {margin:g}x)")
    if ctrl_at:
        return Verdict("differs", test, f"the ST control's curve also gets significantly steeper at {c[i_near]:.4g}, "
                                        f"the model's kink: the change is not specific to the training")
    return Verdict("reproduced", test)


def largest_kink(scan):
    """The centre of a :func:`slope_scan`'s largest significant increase of the density, or None."""
    sig = scan["significant"]
    return float(scan["centres"][np.flatnonzero(sig)[np.argmax(scan["increase"][sig])]]) if sig.any() else None


def _kink_value(kink, eps):
    """The index's value of a row: where the largest significant kink lies, in eps and in multiples of it."""
    if kink is None:
        return "no significant kink"
    long = f"kink at {kink:.2g} ({kink / eps:.2g} eps)"
    return long if len(long) <= 24 else f"kink at {kink / eps:.2g} x eps"


def _trained_at(tr):
    """``(norm, eps)`` a model was adversarially trained at (PGD-AT or MMR+AT), or None."""
    if tr.method == "at" or (tr.method == "mmr" and tr.mmr_at_frac > 0):
        return tr.norm, tr.eps
    return None


def main(argv=None):
    args = parse_args(__doc__, "fig3_slope", argv)
    ev0, models, names = M.method_evaluation(args, MODELS)
    ev, l2info = with_linf_adversarial_l2(args, ev0, models)
    sample = evaluation_sample(args, ev)
    rows = {}
    st = names[M.ST]
    for m in ev.labels:
        tr = models[m].entry.train
        if _trained_at(tr) is None:
            continue
        norm, eps = _trained_at(tr)
        h = WINDOW * eps          # the slopes' window and the tolerance of "at eps": the figure's precision
        dm, dc = ev.distance(m, norm), ev.distance(st, norm)
        scan = slope_scan(dm, h, 3 * eps)
        ctrl = slope_scan(dc, h, 3 * eps)
        mask, counts = M.standin_mask(ev, (m, st)) if norm == "l2" else (np.zeros(dm.shape, bool), {})

        def decide(keep, dm=dm, dc=dc, h=h, eps=eps):
            return slope_verdict(slope_scan(dm[keep], h, 3 * eps), slope_scan(dc[keep], h, 3 * eps), eps, h)

        v, v_wo = M.both_ways(decide, mask)
        rows[m] = {"norm": norm, "eps": eps, "h": h, "tol": h, "margin": MARGIN, "zoo": M.zoo_name(models[m]),
                   "model": slope_change(dm, eps, h), "st_control": slope_change(dc, eps, h),
                   "scan": scan, "st_scan": ctrl, "verdict": v,
                   "standin": {"points": int(mask.sum()), "per_model": counts, "mask": mask, "without": v_wo}}
    figures = [_plot(ev, models, rows, st, args.out, sample)]
    claims = []
    for m, r in rows.items():
        s, eps = r["model"], r["eps"]
        nm = "l_inf" if r["norm"] == "linf" else "l_2"
        window = (f"'approximately at eps' read, as the paper's figure allows, as within eps/2 = {r['tol']:g} of "
                  f"it, the slopes on windows of that width")
        if r["zoo"] == M.MMR_AT:
            statement, kind = ("000 Figure 3: the l_inf robustness curves of MMR+AT models trained at l_inf eps = 0.1 "
                               "(MNIST and FMNIST) change slope approximately at eps = 0.1 (flat below, steep above), "
                               "a possible sign of overfitting to the threat model. The figure draws four data sets' "
                               "curves (thresholds 2/255 to 0.1) on one axis and the text places the change only "
                               f"'approximately at' eps, points 'just beyond' it: {window}."), "paper"
        elif r["norm"] == "linf" and abs(eps - 0.1) < 1e-9:
            statement, kind = (f"Beyond the paper (its models are MMR+AT): does the l_inf curve of a model trained "
                               f"with another recipe at l_inf eps = 0.1 ({m}: {models[m].entry.note or m}) change "
                               f"slope at 0.1 ({window})?", "beyond")
        elif r["norm"] == "linf":
            statement, kind = (f"Beyond the paper (its Figure 3 shows MMR+AT models at eps = 0.1 only): does the "
                               f"l_inf curve of a model adversarially trained (PGD) at l_inf eps = {eps:g} change "
                               f"slope at {eps:g} ({window})?", "beyond")
        else:
            statement, kind = (f"Beyond the paper (its Figure 3 is l_inf only): does the l_2 curve of a model "
                               f"adversarially trained (PGD) at l_2 eps = {eps:g} change slope at {eps:g} "
                               f"({window})?", "beyond")
        ours = (f"{sample}; {m} ({models[m].name}) vs the ST control, {nm} distances"
                + (f" ({l2_repair_text({k: l2info[k] for k in (m, st) if k in l2info})})" if r["norm"] == "l2" else "")
                + f", window h = {fmt(r['h'], 3)}; slope just below / above {eps:g}: {s['slope_below']:.3g} / "
                  f"{s['slope_above']:.3g}")
        if r["norm"] == "l2":
            ours += "; " + M.standin_text(r["standin"]["mask"], r["standin"]["per_model"], r["verdict"],
                                          r["standin"]["without"])
        kink = largest_kink(r["scan"])
        short = (f"MMR+AT curve changes slope at its training eps {eps:g}" if kind == "paper"
                 else f"{m} curve changes slope at its training eps {eps:g}")
        claims.append(claim("000", f"Figure 3 ({m}, {nm})", statement, ours, r["verdict"],
                            M.budget_text(models, ev, [m]), kind=kind, short=short,
                            paper_value=f"kink ~ at eps {eps:g}" if kind == "paper" else "not in the paper",
                            ours_value=_kink_value(kink, eps)))
    payload = {"n": int(ev.data.y.shape[0]), "sample": sample, "margin": MARGIN,
               "rows": {m: dict({k: v for k, v in r.items() if k not in ("verdict", "standin")},
                                standin={"points": r["standin"]["points"], "per_model": r["standin"]["per_model"],
                                         "without": None if r["standin"]["without"] is None
                                         else r["standin"]["without"].verdict})
                        for m, r in rows.items()}}
    write_result(args, payload, claims, figures)
    return payload


def _plot(ev, models, rows, st, out, sample):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rcurves.curves import dkw_band
    from rcurves.plotting import step_curve

    norms = sorted({r["norm"] for r in rows.values()}, key=lambda k: k != "linf")
    fig, axes = plt.subplots(1, len(norms), figsize=(6 * len(norms), 4), squeeze=False)
    n = int(ev.data.y.shape[0])
    drawn = {}
    for ax, norm in zip(axes[0], norms):
        hi = 2.2 * max(r["eps"] for r in rows.values() if r["norm"] == norm)
        for m in [st] + [m for m, r in rows.items() if r["norm"] == norm]:
            e, v = step_curve(ev.distance(m, norm), hi)
            paper = m in rows and rows[m]["zoo"] == M.MMR_AT
            line = ax.step(e, v, where="post", label=m + (" (the paper's model kind)" if paper else ""),
                           lw=2.2 if paper else 1.0)[0]
            lo_b, hi_b = dkw_band(v, n)
            ax.fill_between(e, np.asarray(lo_b), np.asarray(hi_b), step="post", color=line.get_color(), alpha=0.12)
            if m in rows:
                ax.axvline(rows[m]["eps"], color=line.get_color(), ls="--", lw=0.8)
            drawn.setdefault(norm, []).append(m)
        ax.set_xlim(0, hi)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(f"{'l_inf' if norm == 'linf' else 'l_2'} perturbation size eps")
        ax.set_ylabel("robust error")
        ax.set_title(f"{'l_inf' if norm == 'linf' else 'l_2'} robustness curves; dashed: training eps")
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    name = "fig3_slope.png"
    fig.savefig(os.path.join(out, name), dpi=120)
    plt.close(fig)
    cap = ("000 Figure 3 on MNIST: robustness curves (robust error against perturbation size, exact step curves of "
           "the attacks' per-point distances, shaded 95% DKW bands) of adversarially trained zoo C.1 CNNs, dashed at "
           "each model's training eps; "
           + "; ".join(f"{'l_inf' if k == 'linf' else 'l_2'} panel: {', '.join(v)}" for k, v in drawn.items())
           + f". The paper's model kind is MMR+AT at l_inf 0.1 (bold); the PGD-AT models and ST (control) are beyond "
             f"it. Points: {sample}; n = {n}.")
    return name, cap


if __name__ == "__main__":
    main()
