"""Paper 000, Figure 3: the curve of an adversarially trained model changes slope at its training eps.

The paper's MMR+AT models (MNIST and FMNIST, l_inf eps 0.1) have l_inf curves
that are flat up to about the training eps and rise steeply above it, "which
could be a sign of overfitting to the specific threat models" since "the change
of slope occurs approximately at the chosen perturbation threshold". Ours: the
zoo's adversarially trained CNNs on full MNIST (l_inf at 0.1, 0.2, 0.3, 0.4 with
PGD, and at 0.1 with single-step FGSM-RS; l_2 at 1.5) and the ST CNN as
control, on the shared evaluation of
``table1_fig2.py`` (2,000 random test images, the same for every model).

The statistic is a change of density of the distances (the slope of the
empirical curve): with a window ``h = eps / 6``, at a centre ``c`` the points
with distance in ``(c - h, c]`` (``k_below``) and in ``(c, c + h]``
(``k_above``); under "no change of slope at c" the ``k_below + k_above``
points split 50/50, so the one-sided exact binomial test of ``k_above`` says
whether the curve gets significantly steeper at ``c``. The scan runs over
centres from ``h`` to ``3 eps`` in steps of ``h / 4`` (Bonferroni over the
centres). The claim is that the change is *at* the training eps, so the rule
(:func:`slope_verdict`) is: the largest significant increase of density (in
points per unit eps) lies within ``h`` of the training eps, and the ST control
has no significant increase within ``h`` of it (else the kink is not the
training's). inconclusive where no centre could reach the level.

    python experiments/000_global_comparison/fig3_slope.py --out results/experiments/fig3_slope
"""
from __future__ import annotations

import math
import os
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
from shared import evaluation_sample, l2_repair_text, parse_args, with_linf_adversarial_l2, write_result, zoo_evaluation

from rcurves.claims.record import claim, fmt
from rcurves.claims.verdicts import Verdict  # noqa: E402

MODELS = ("mnist-full-cnn-st", "mnist-full-cnn-at-linf-0.1", "mnist-full-cnn-at-linf-0.1-1step",
          "mnist-full-cnn-at-linf-0.2", "mnist-full-cnn-at-linf-0.3", "mnist-full-cnn-at-linf-0.4",
          "mnist-full-cnn-at-l2-1.5")
ALPHA = 0.05


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
    'increase' ((k_above - k_below) / (n h): the jump of the slope), 'level' (alpha / m),
    'significant' (m,) bool}``.
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
    return {"centres": c, "k_below": kb.astype(np.int64), "k_above": ka.astype(np.int64), "p": p,
            "increase": (ka - kb) / (n * h), "level": level, "significant": (p < level) & (ka > kb)}


def slope_verdict(scan, control, eps, tol):
    """"The curve changes slope at the training eps" (000 Figure 3) from two :func:`slope_scan`\\ s.

    reproduced: the model's largest significant increase of density lies within ``tol`` of ``eps``,
    and the control (ST, same norm, same centres) has no significant increase within ``tol`` of
    ``eps``; differs: the model has no significant increase although the test could have shown one,
    its largest lies elsewhere, or the control changes slope there too; inconclusive: no centre had
    enough points to reach the level (``2^-k`` at best).
    """
    c, sig = scan["centres"], scan["significant"]
    near = np.abs(c - eps) <= tol + 1e-12
    k = scan["k_below"] + scan["k_above"]
    ctrl_near = control["significant"] & (np.abs(control["centres"] - eps) <= tol + 1e-12)
    if sig.any():
        i = np.flatnonzero(sig)[np.argmax(scan["increase"][sig])]
        loc = (f"largest significant increase of density at {c[i]:.4g} ({scan['k_below'][i]} -> "
               f"{scan['k_above'][i]} points, one-sided binomial p = {scan['p'][i]:.1e})")
    else:
        i, loc = None, "no significant increase of density anywhere"
    j = int(np.argmin(np.abs(c - eps)))
    at = (f"at the training eps {eps:g}: {scan['k_below'][j]} -> {scan['k_above'][j]} points, p = "
          f"{scan['p'][j]:.1e}")
    jc = int(np.argmin(np.abs(control["centres"] - eps)))
    ctrl = (f"control at {eps:g}: {control['k_below'][jc]} -> {control['k_above'][jc]}, p = {control['p'][jc]:.1e}"
            f"; control significant within +-{tol:.3g}: {int(ctrl_near.sum())} centres")
    test = (f"scan of {c.size} centres, one-sided exact binomial at {scan['level']:.2g} (5% Bonferroni); {loc}; "
            f"{at}; {ctrl}")
    if i is None:
        if 0.5 ** int(k.max(initial=0)) >= scan["level"]:
            return Verdict("inconclusive", test, f"at most {int(k.max(initial=0))} points in a pair of windows: "
                                                 f"the test cannot reach {scan['level']:.2g}; a larger sample is "
                                                 f"needed")
        return Verdict("differs", test, "the curve never gets significantly steeper")
    if not near[i]:
        return Verdict("differs", test, f"the largest change of slope is at {c[i]:.3g}, not within {tol:.3g} of "
                                        f"the training eps {eps:g}")
    if ctrl_near.any():
        return Verdict("differs", test, f"the ST control's curve also gets significantly steeper within {tol:.3g} "
                                        f"of {eps:g}: the change is not specific to the training")
    return Verdict("reproduced", test)


def main(argv=None):
    args = parse_args(__doc__, "fig3_slope", argv)
    ev, models = zoo_evaluation(args, MODELS, norms=("linf", "l2"))
    ev, l2info = with_linf_adversarial_l2(args, ev, models)
    sample = evaluation_sample(args, ev)
    rows = {}
    st = [m for m in ev.labels if models[m].entry.train.method == "st"][0]
    for m in ev.labels:
        tr = models[m].entry.train
        if tr.method != "at":
            continue
        eps, h = tr.eps, tr.eps / 6
        scan = slope_scan(ev.distance(m, tr.norm), h, 3 * eps)
        ctrl = slope_scan(ev.distance(st, tr.norm), h, 3 * eps)
        rows[m] = {"norm": tr.norm, "eps": eps, "h": h, "tol": h,
                   "model": slope_change(ev.distance(m, tr.norm), eps, h),
                   "st_control": slope_change(ev.distance(st, tr.norm), eps, h),
                   "scan": scan, "st_scan": ctrl, "verdict": slope_verdict(scan, ctrl, eps, h)}
    figures = [_plot(ev, models, rows, args.out)]
    claims = []
    for m, r in rows.items():
        s, eps = r["model"], r["eps"]
        nm = "l_inf" if r["norm"] == "linf" else "l_2"
        if m == "AT-linf-0.1":
            statement, kind = ("000 Figure 3: the l_inf robustness curves of models adversarially trained at l_inf "
                               "eps = 0.1 (MMR+AT on MNIST and FMNIST) change slope approximately at eps = 0.1 "
                               "(flat below, steep above), a possible sign of overfitting to the threat model."), "paper"
        elif r["norm"] == "linf" and abs(eps - 0.1) < 1e-9:
            statement, kind = (f"Beyond the paper (its models are MMR+AT): does the l_inf curve of a model trained "
                               f"with another recipe at l_inf eps = 0.1 ({m}: {models[m].entry.note or m}) change "
                               f"slope at 0.1?", "beyond")
        elif r["norm"] == "linf":
            statement, kind = (f"Beyond the paper (its Figure 3 shows eps = 0.1 models only): does the l_inf curve "
                               f"of a model adversarially trained at l_inf eps = {eps:g} change slope at {eps:g}?",
                               "beyond")
        else:
            statement, kind = (f"Beyond the paper (its Figure 3 is l_inf only): does the l_2 curve of a model "
                               f"adversarially trained at l_2 eps = {eps:g} change slope at {eps:g}?", "beyond")
        claims.append(claim(
            "000", f"Figure 3 ({m}, {nm})", statement,
            f"{sample}; {m} ({models[m].name}) vs the ST control, {nm} distances"
            + (f" ({l2_repair_text({k: l2info[k] for k in (m, st) if k in l2info})})" if r["norm"] == "l2" else "")
            + f", window h = {fmt(r['h'], 3)}; "
            f"slope just below / above {eps:g}: {s['slope_below']:.3g} / {s['slope_above']:.3g}",
            r["verdict"], kind=kind))
    payload = {"n": int(ev.data.y.shape[0]), "sample": sample,
               "rows": {m: {k: v for k, v in r.items() if k != "verdict"} for m, r in rows.items()}}
    write_result(args, payload, claims, figures)
    return payload


def _plot(ev, models, rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rcurves.curves import dkw_band
    from rcurves.plotting import step_curve

    norms = sorted({r["norm"] for r in rows.values()}, key=lambda k: k != "linf")
    fig, axes = plt.subplots(1, len(norms), figsize=(6 * len(norms), 4), squeeze=False)
    n = int(ev.data.y.shape[0])
    for ax, norm in zip(axes[0], norms):
        hi = 2.2 * max(models[m].entry.train.eps for m, r in rows.items() if r["norm"] == norm)
        for m in ev.labels:
            tr = models[m].entry.train
            if not (tr.method == "st" or (m in rows and rows[m]["norm"] == norm)):
                continue
            e, v = step_curve(ev.distance(m, norm), hi)
            line = ax.step(e, v, where="post", label=m)[0]
            lo_b, hi_b = dkw_band(v, n)
            ax.fill_between(e, np.asarray(lo_b), np.asarray(hi_b), step="post", color=line.get_color(), alpha=0.12)
            if m in rows:
                ax.axvline(tr.eps, color=line.get_color(), ls="--", lw=0.8)
        ax.set_xlim(0, hi)
        ax.set_xlabel(f"{norm} eps")
        ax.set_ylabel("robust error")
        ax.set_title(f"{norm} curves, 95% DKW bands; dashed: training eps")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = os.path.join(out, "fig3_slope.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


if __name__ == "__main__":
    main()
