"""Paper 004, Figures 3 and 6: sparsity and adversarial accuracy as functions of the radius, ST vs AT, on full MNIST
(our stand-in for the paper's CIFAR-10 ResNet-18s).

Curves: ``rcurves.sparsity_curve`` (all radii in one batch; a point keeps its
directions at every radius) on the first 40 points of the class-interleaved
held-out split of full MNIST (a stratified sample, the same points for every
model): l_2 for the ST CNN and the l_2-AT CNN (trained at 1.5), l_inf for the
ST CNN and the l_inf-AT CNNs (trained at 0.1 and 0.3); box [0, 1].
Adversarial accuracy here is the estimator's own plain attack (margin APGD,
100 steps): correct and not broken. In l_2 the box puts a floor under every
sparsity (``sparsity_study``): the curves' claims are read on the excess
over that floor, computed per radius on the same points and directions.

Training radius: per AT model, a stratified sample of 40 of its vulnerable
points at the largest of three radii, just below, at and just above its
training radius (l_2 +- 0.25, l_inf +- 0.02; of the first 1,000 held-out
points; APGD, cross-entropy and margin, 50 steps each), so that the points
vulnerable at each of the three radii are a random part of it; their
sparsity at the three radii. The paper's quantity is the plotted curve: at
each radius, the mean over the points broken there (the residual form); the
training radius is a local maximum when the curve there is above both
neighbours, each difference tested with a bootstrap standard error over the
sample's points (a conjunction: the larger p decides). Our own within-point
comparison (the same points at the three radii) is a row of kind "beyond".
The l_inf rows are the paper's claims too: its Section 6.5 says Appendix D's
Figure 6 (l_inf attacks, l_inf AT) shows "very similar observations", so
each of Figure 3's statements is tested on the l_inf curves with Figure 3's
numbers (App. D's AT model is trained at 8/255; ours at 0.1 and 0.3).
Rows testing one claim on several models or norms are one family, decided at
Holm's levels. Budget: 8 directions x 10 bisection rounds x 20 PGD steps.

Figures: the paper's Figures 3 (l_2) and 6 (l_inf), one panel per model:
sparsity and adversarial accuracy against the radius.

    python experiments/004_adversarial_sparsity/sparsity_vs_eps.py --out results/experiments/sparsity_vs_eps
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

GRID = {"l2": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0], "linf": [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4]}
QUICK_GRID = {"l2": [0.3, 0.6, 1.2], "linf": [0.06, 0.12, 0.25]}
PAIRS = {"l2": [("mnist-full-cnn-st", "ST"), ("mnist-full-cnn-at-l2-1.5", "AT-l2-1.5")],
         "linf": [("mnist-full-cnn-st", "ST"), ("mnist-full-cnn-at-linf-0.1", "AT-linf-0.1"),
                  ("mnist-full-cnn-at-linf-0.3", "AT-linf-0.3")]}
TRAIN_EPS = {"AT-l2-1.5": 1.5, "AT-linf-0.1": 0.1, "AT-linf-0.3": 0.3}
DELTA = {"l2": 0.25, "linf": 0.02}
N_POINTS = 40
ZERO_ACC = 0.02     # "accuracy drops to zero": at most this adversarial accuracy
BOTH_ZERO = 0.05    # "null or close to null for both models"
KEEP = 0.2          # "decreases much more slowly": at least this fraction of its largest excess remains
FACTOR = 5.0        # "over five times higher"
REL_EFFECT = 0.1


def run_curve(m, x, y, keys, eps_list, norm, b):
    """One model's curve on the given points and per-point keys: ``{eps, residual_sparsity, stderr,
    adversarial_accuracy, fraction_measured, measured (E, n), per_point (E, n)}``."""
    from rcurves.sparsity import sparsity_curve

    c = sparsity_curve(m.logits_fn, x, y, eps_list, norm=norm, key=keys, n_directions=b.directions,
                       search_steps=b.search_steps, steps=b.steps, bounds=S.BOUNDS,
                       plain_steps=b.attack_steps * (2 if b.ce else 1), batch_points=b.batch_points)
    return {"eps": np.asarray(c.eps), "residual_sparsity": np.asarray(c.residual_sparsity),
            "stderr": np.asarray(c.stderr), "adversarial_accuracy": np.asarray(c.adversarial_accuracy),
            "fraction_measured": np.asarray(c.fraction_measured), "measured": np.asarray(c.results.measured),
            "per_point": np.asarray(c.results.per_point, np.float64)}


def with_floor(c, floors):
    """Adds the excess over the box floor: ``floors (E, n)`` per radius and point (0 for l_inf)."""
    pp = np.where(c["measured"], c["per_point"] - floors, np.nan)
    c["floor"] = np.array([np.mean(f[m]) if m.any() else np.nan for f, m in zip(floors, c["measured"])])
    c["excess"] = np.array([np.nanmean(p) if np.isfinite(p).any() else np.nan for p in pp])
    c["excess_se"] = np.array([np.nanstd(p, ddof=1) / math.sqrt(np.isfinite(p).sum()) if np.isfinite(p).sum() > 1
                               else np.nan for p in pp])
    c["excess_per_point"] = pp
    return c


def curves(args, study):
    """``{norm: {label: curve}}`` on the first ``N_POINTS`` pool points (``QUICK``: one batch)."""
    b = study.b
    n = b.batch_points if args.quick else N_POINTS
    x, y, keys = study.x[:n], study.y[:n], study.keys[:n]
    grid = QUICK_GRID if args.quick else GRID
    out = {}
    for norm in ("l2", "linf"):
        if args.quick:     # ST in both norms, and the AT stand-in in l_inf (the comparison's code path)
            ms = [S.quick_model("st")] + ([S.quick_model("at")] if norm == "linf" else [])
        else:
            ms = [S.zoo_model(args, nm, lab) for nm, lab in PAIRS[norm]]
        floors = (np.stack([S.box_floor(x, e, keys, b.directions) for e in grid[norm]]) if norm == "l2"
                  else np.zeros((len(grid[norm]), n)))
        for m in ms:
            out.setdefault(norm, {})[m.label] = c = with_floor(run_curve(m, x, y, keys, grid[norm], norm, b), floors)
            print(norm, m.label, " ".join(f"{e:g}:{s:.3g}/{a:.2f}" for e, s, a in
                                          zip(c["eps"], c["residual_sparsity"], c["adversarial_accuracy"])), flush=True)
    return out, n


def training_radius(args, study, norm, m, te):
    """Sparsity of ``m`` at ``te - delta``, ``te``, ``te + delta`` on a stratified sample of its vulnerable pool
    points at ``te + delta`` (the largest radius: the points vulnerable at each radius are a random part of the
    sample): ``(curve, sample text)``."""
    from rcurves.data.sampling import describe

    b = study.b
    d = DELTA[norm]
    eps_list = [round(te - d, 6), te, round(te + d, 6)]
    st = S.Study(args, study.ds, b, args.seed, x=study.x, y=study.y, text=study.text, eps={norm: eps_list[2]})
    vul = st.vulnerable(m, norm)
    idx = st.sample(vul)
    study.seconds["attack"] = study.seconds.get("attack", 0.0) + st.seconds.get("attack", 0.0)
    c = run_curve(m, study.x[idx], study.y[idx], study.keys[idx], eps_list, norm, b)
    floors = (np.stack([S.box_floor(study.x[idx], e, study.keys[idx], b.directions) for e in eps_list])
              if norm == "l2" and idx.size else np.zeros((3, idx.size)))
    c = with_floor(c, floors)
    text = describe(study.y, idx, f"stratified sample of {m.label}'s {int(vul.sum())} vulnerable points at eps "
                                  f"{eps_list[2]:g} (the largest of the three radii) among {study.text}")["text"]
    return c, text


def peak_rule(c, q: str):
    """The paper's local maximum on the plotted curve: the residual sparsity at the training radius (``c['eps'][1]``,
    the mean over the sample's points broken there) above the one just below and the one just above, each by a
    bootstrap over the sample's points (``sparsity_study.shared``): ``rule(level)``, a conjunction (``p``: the
    larger)."""
    pp, e = c["excess_per_point"], c["eps"]
    base = float(c["excess"][1])
    eff = REL_EFFECT * base if np.isfinite(base) and base > 0 else 1.0
    below, above = S.shared(pp[1], pp[0]), S.shared(pp[1], pp[2])

    def rule(level):
        return S.worst(S.residual_greater(below, effect=eff, alpha=level, what=f"{q} at {e[1]:g} > at {e[0]:g}"),
                       S.residual_greater(above, effect=eff, alpha=level, what=f"{q} at {e[1]:g} > at {e[2]:g}"))
    return rule


def within_rule(c, q: str):
    """Ours (beyond the paper): on the points measured at all three radii, sparsity at the training radius above
    its value at both neighbours (paired t tests; a conjunction, ``p`` the larger): ``rule(level)``."""
    from rcurves.claims.verdicts import paired_greater

    pp, e = c["excess_per_point"], c["eps"]
    allm = np.all(np.isfinite(pp), axis=0)
    s_lo, s_te, s_hi = pp[0][allm], pp[1][allm], pp[2][allm]
    base = float(np.mean(s_te)) if s_te.size else math.nan
    eff = REL_EFFECT * base if np.isfinite(base) and base > 0 else 1.0

    def rule(level):
        return S.worst(*[S.with_p(paired_greater(s_te, s, effect=eff, alpha=level,
                                                 what=f"{q} at {e[1]:g} > at {ei:g} (same points)"))
                         for s, ei in ((s_lo, e[0]), (s_hi, e[2]))])
    return rule, int(allm.sum()), (s_lo, s_te, s_hi)


APP_D = (" (App. D: Figure 6 shows 'very similar observations' to Figure 3's, Section 6.5; tested with Figure 3's "
         "numbers)")


def _of(norm: str) -> str:
    """The claim's words for the l_inf rows: Figure 3 states the curve claims for l_2; Section 6.5 says Appendix
    D's Figure 6 (l_inf) shows "very similar observations", so the l_inf rows are the paper's claims too."""
    return APP_D if norm == "linf" else ""


def _curve3(values, norm: str) -> str:
    """Three values of a curve (below, at and above a training radius) for the report's index: rad to 3 decimals,
    dims to units."""
    return "/".join(f"{float(v):.3f}" if norm == "l2" else f"{float(v):.0f}" for v in values)


def make_claims(out, radius, setting, curve_text):
    from rcurves.claims.verdicts import Verdict, greater

    claims = []
    fig_of = {"l2": "Figure 3", "linf": "Figure 6 (App. D)"}
    # (1) ST: accuracy drops to 0, sparsity decreases slowly (one family over the norms)
    st_rows, st_rules = [], []
    for norm in ("l2", "linf"):
        if norm not in out:
            continue
        st = out[norm]["ST"]
        e = np.asarray(st["eps"])
        q = "excess over the box floor" if norm == "l2" else "sparsity"
        unit = S.UNIT[norm]
        ex, se = st["excess"], st["excess_se"]
        zero = np.flatnonzero(st["adversarial_accuracy"] <= ZERO_ACC)
        if zero.size and np.isfinite(ex[zero[0]]) and np.isfinite(ex).any():
            i = zero[0]
            j = int(np.nanargmax(ex))
            last = int(np.flatnonzero(np.isfinite(ex))[-1])
            keep_c = S.shared(st["excess_per_point"][i], st["excess_per_point"][j], factor=KEEP)
            eff = KEEP * float(ex[j]) if ex[j] > 0 else 1.0
            st_rules += [lambda lv, c=keep_c, e_=eff, i=i, j=j, e=e, q=q: S.residual_greater(
                             c, effect=e_, alpha=lv, what=f"{q} at eps {e[i]:g} > {KEEP} x at {e[j]:g} (its largest)"),
                         lambda lv, last=last, ex=ex, se=se, e=e, q=q: greater(
                             ex[last], se[last], 0.0, 0.0, alpha=lv, what=f"{q} at the largest radius {e[last]:g} > 0")]
            ours = (f"ST adversarial accuracy reaches {fmt(st['adversarial_accuracy'][i])} at eps {e[i]:g}; {q} there "
                    f"{fmt(ex[i])} +- {fmt(se[i], 2)} {unit} (largest over the grid {fmt(ex[j])} at {e[j]:g}; at the "
                    f"largest radius {e[last]:g}: {fmt(ex[last])})"
                    + (f"; box floor {fmt(st['floor'][i])} rad at eps {e[i]:g}, raw sparsity "
                       f"{fmt(st['residual_sparsity'][i])}" if norm == "l2" else ""))
            value = f"{ex[i] / ex[j]:.0%} left at eps {e[i]:g}" if ex[j] > 0 else f"{fmt(ex[i])} at eps {e[i]:g}"
            st_rows.append((norm, q, ours, 2, value))
        else:
            st_rows.append((norm, q, f"ST adversarial accuracy never reaches {ZERO_ACC} on the grid", 0,
                            f"accuracy >= {fmt(np.min(st['adversarial_accuracy']), 2)}"))
    st_vs = S.holm(st_rules, f"the ST curves' {len(st_rules)} tests in {len(st_rows)} norms") if st_rules else []
    k = 0
    for norm, q, ours, n_tests, value in st_rows:
        if n_tests:
            v = S.worst(*st_vs[k:k + n_tests])
            k += n_tests
        else:
            v = Verdict("inconclusive", f"ST adversarial accuracy on the grid: min "
                                        f"{fmt(np.min(out[norm]['ST']['adversarial_accuracy']))}",
                        "the grid does not reach the radius where ST is fully broken")
        claims.append(claim(
            "004", f"{fig_of[norm]}: ST", "accuracy drops to zero after a small eps; sparsity decreases much more "
            f"slowly, converging to 0 only asymptotically (tested: at the radius where accuracy reaches 0, at least "
            f"{KEEP} of the largest {q} remains, and it is still above 0 at the largest radius){_of(norm)}",
            f"{setting}; {curve_text}; the plotted curve (at each radius the mean over the points broken there); "
            f"{ours}; Holm over the ST curves' tests in both norms (one family)", v, kind="paper",
            short=f"ST ({norm}): accuracy falls to 0 fast, sparsity decays slowly",
            paper_value=f">= {KEEP:.0%} left at acc 0", ours_value=value))
    # (2) AT vs ST where both accuracies are ~0: over five times (one family over the AT models)
    big, big_rules = [], []
    for norm in ("l2", "linf"):
        if norm not in out:
            continue
        cs, st = out[norm], out[norm]["ST"]
        e = np.asarray(st["eps"])
        q = "excess over the box floor" if norm == "l2" else "sparsity"
        for lab, at in cs.items():
            if lab == "ST":
                continue
            both = np.flatnonzero((st["adversarial_accuracy"] <= BOTH_ZERO) & (at["adversarial_accuracy"] <= BOTH_ZERO))
            if both.size:
                i = both[0]
                con = S.shared(at["excess_per_point"][i], st["excess_per_point"][i], factor=FACTOR)
                base = con.mean_b
                eff = REL_EFFECT * base * FACTOR if base > 0 else 1.0
                big_rules.append(lambda lv, con=con, eff=eff, lab=lab, i=i, e=e, q=q: S.residual_greater(
                    con, effect=eff, alpha=lv, what=f"{lab} vs ST at eps {e[i]:g} ({q}, x{FACTOR:g})"))
                ratio = con.mean_a / base if base else math.nan
                ours = (f"first eps where both adversarial accuracies are <= {BOTH_ZERO}: {e[i]:g}; the plotted curves "
                        f"there: {lab} {fmt(con.mean_a)} (n = {con.n_a}) vs ST {fmt(base)} (n = {con.n_b}) "
                        f"{S.UNIT[norm]} (x{fmt(ratio, 3)})")
                big.append((norm, lab, ours, True, f"x{ratio:.2f} at eps {e[i]:g}"))
            else:
                ours = (f"{lab} adversarial accuracy stays above {BOTH_ZERO} on the grid; ratio of {q} AT / ST over "
                        f"the grid: " + ", ".join(fmt(a / s, 2) for a, s in zip(at["excess"], st["excess"])))
                big.append((norm, lab, ours, False,
                            f"acc {fmt(at['adversarial_accuracy'][-1], 2)} at eps {e[-1]:g}"))
    big_vs = iter(S.holm(big_rules, f"the {len(big_rules)} AT models against ST at large eps") if big_rules else [])
    for norm, lab, ours, tested, value in big:
        at = out[norm][lab]
        v = next(big_vs) if tested else Verdict(
            "inconclusive",
            f"{lab} adversarial accuracy at eps {at['eps'][-1]:g}: {fmt(at['adversarial_accuracy'][-1])}",
            f"{lab} is not broken on (almost) every point anywhere on the grid, so the comparison where both "
            f"accuracies are ~0 cannot be made; a grid to larger radii would")
        claims.append(claim("004", f"{fig_of[norm]}: {lab} vs ST at large eps",
                            "where both accuracies are (close to) 0, the AT model's sparsity is over five times ST's"
                            + _of(norm),
                            f"{setting}; {curve_text}; the plotted curves (each model's mean over the curve points "
                            f"it breaks at that radius), compared by a bootstrap over the points; Holm over the AT "
                            f"models (one family); {ours}", v, kind="paper",
                            short=f"{lab} vs ST ({norm}) where both accuracies are ~0: sparsity x5",
                            paper_value=f"x{FACTOR:g} higher", ours_value=value))
    # (3) the training radius as a local maximum of the plotted curve (one family over the AT models), and ours
    # within points (beyond; one family)
    items = list(radius.items())
    peak_vs = S.holm([peak_rule(c, "excess over the box floor" if n == "l2" else "sparsity")
                      for (n, _), (c, _) in items], f"the {len(items)} AT models' training radii") if items else []
    within = [within_rule(c, "excess over the box floor" if n == "l2" else "sparsity") for (n, _), (c, _) in items]
    within_vs = S.holm([r for r, _, _ in within], f"the {len(items)} AT models' training radii, same points") \
        if items else []
    for ((norm, lab), (c, text)), v, wv, (_, n_all, (s_lo, s_te, s_hi)) in zip(items, peak_vs, within_vs, within):
        e = c["eps"]
        q = "excess over the box floor" if norm == "l2" else "sparsity"
        n_meas = np.isfinite(c["excess_per_point"]).sum(axis=1)
        curve = ", ".join(f"{ei:g}: {fmt(s)} +- {fmt(se_, 2)} (n = {k_})"
                          for ei, s, se_, k_ in zip(e, c["excess"], c["excess_se"], n_meas))
        raw = ", ".join(f"{ei:g}: {fmt(s)}" for ei, s in zip(e, c["residual_sparsity"]))
        claims.append(claim(
            "004", f"{fig_of[norm]}: {lab} at its training radius",
            "the training radius appears as a local maximum of the sparsity curve (AT removes perturbations from "
            "the sphere of its radius but not inside it)" + _of(norm),
            f"{setting}; {text}; the plotted curve, {q} at each radius averaged over the sample's points broken "
            f"there: {curve}" + (f" (raw sparsity {raw} rad)" if norm == "l2" else "")
            + f"; Holm over the {len(items)} AT models (one family)", v, kind="paper",
            short=f"{lab}: its training radius {e[1]:g} is a local maximum of sparsity",
            paper_value="local max at train eps", ours_value=_curve3(c["excess"], norm)))
        mean = lambda x: fmt(np.mean(x)) if x.size else "nan"  # noqa: E731
        claims.append(claim(
            "004", f"{fig_of[norm]}: {lab} at its training radius, same points",
            "(beyond the paper) on the same points, sparsity at the training radius is above its value just below "
            "and just above it (the within-point form of the paper's local maximum)",
            f"{setting}; {text}; {q} on the {n_all} points measured at all three radii: {mean(s_lo)} / "
            f"{mean(s_te)} / {mean(s_hi)} at eps {e[0]:g} / {e[1]:g} / {e[2]:g} (paired); these are the points "
            f"broken already below the training radius, so this is not the plotted curve; Holm over the "
            f"{len(items)} AT models (one family)", wv, kind="beyond",
            short=f"{lab}: sparsity peaks at its training radius {e[1]:g}, same points",
            paper_value="local max (the curve)",
            ours_value=_curve3([np.mean(x) if x.size else math.nan for x in (s_lo, s_te, s_hi)], norm)))
    return claims


def figures(out, radius, args, n_points):
    """The paper's Figures 3 (l_2) and 6 (l_inf): per model, residual sparsity and adversarial accuracy against
    the radius (ST first, then the AT models); the training-radius samples' curves marked on their model's panel."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    from shared import save_figure

    made = []
    for norm, (file, name) in (("l2", ("sparsity_fig3.png", "Figure 3")),
                               ("linf", ("sparsity_fig6.png", "Figure 6 (App. D)"))):
        if norm not in out:
            continue
        cs = out[norm]
        fig, axes = plt.subplots(1, len(cs), figsize=(5 * len(cs), 3.8), squeeze=False)
        marks = []
        for k, (ax, (lab, c)) in enumerate(zip(axes[0], cs.items())):
            ax2 = ax.twinx()
            ax.plot(c["eps"], c["residual_sparsity"], "o-", color="tab:blue", label="sparsity")
            ax.fill_between(c["eps"], c["residual_sparsity"] - 2 * c["stderr"],
                            c["residual_sparsity"] + 2 * c["stderr"], color="tab:blue", alpha=0.15)
            if norm == "l2":
                ax.plot(c["eps"], c["floor"], ":", color="tab:blue", alpha=0.8, label="box floor")
            ax2.plot(c["eps"], c["adversarial_accuracy"], "s--", color="tab:orange", label="adversarial accuracy")
            rad = radius.get((norm, lab))
            if rad is not None:
                rc, _ = rad
                ax.errorbar(rc["eps"], rc["residual_sparsity"], yerr=2 * np.nan_to_num(rc["stderr"]), fmt="x",
                            color="tab:red", capsize=3, label="training-radius sample")
                n_meas = np.asarray(rc["measured"]).shape[1]
                marks.append(f"{lab}: {', '.join(f'{e:g}' for e in rc['eps'])} on a stratified sample of n = "
                             f"{n_meas} of its vulnerable points at {rc['eps'][-1]:g}")
            ax.set_xlabel(f"eps ({norm})")
            ax.set_ylabel(f"{norm} sparsity ({S.UNIT[norm]})")
            ax2.set_ylabel("adversarial accuracy")
            ax2.set_ylim(0, 1)
            ax.set_title(f"({'abcdef'[k]}) {lab}")
            if k == 0:
                ax.legend(loc="upper left", fontsize=7)
                ax2.legend(loc="upper right", fontsize=7)
            elif rad is not None:
                ax.legend(loc="upper left", fontsize=7)
        fig.tight_layout()
        caption = (f"Paper 004 {name} on {'full MNIST' if not args.quick else 'digits (--quick)'}: {norm} "
                   f"residual sparsity (blue; at each radius the mean over the points the estimator breaks there, "
                   f"+- 2 se{'; dotted: the box floor, the least sparsity possible in [0, 1]' if norm == 'l2' else ''}"
                   f") and adversarial accuracy (orange, right axis; the estimator's own margin APGD) against eps, "
                   f"one panel per model ({', '.join(cs)}); the first n = {n_points} points of the class-interleaved "
                   f"held-out split (stratified, the same for every model), {S.budget(args).directions} directions "
                   f"per point" + (f"; red crosses: residual sparsity just below, at and just above the training "
                                   f"radius ({'; '.join(marks)})" if marks else "") + ".")
        made.append(save_figure(fig, args, file, caption))
    return made


def main(argv=None):
    from rcurves.data.sampling import describe

    args = parse_args(__doc__, name="sparsity_vs_eps", argv=argv)
    b = S.budget(args)
    study = S.Study(args, S.dataset(args), b, args.seed)
    out, n = curves(args, study)
    curve_text = describe(study.y[:n], np.arange(n), f"curves on the first {n} points of the class-interleaved "
                                                     f"held-out split (stratified)")["text"]
    radius = {}
    specs = [("linf", S.quick_model("at"), 0.1)] if args.quick else \
        [(norm, S.zoo_model(args, nm, lab), TRAIN_EPS[lab]) for norm, ps in PAIRS.items() for nm, lab in ps
         if lab in TRAIN_EPS]
    for norm, m, te in specs:
        radius[(norm, m.label)] = training_radius(args, study, norm, m, te)
        c = radius[(norm, m.label)][0]
        print(norm, m.label, "training radius", " ".join(f"{e:g}:{s:.3g}" for e, s in zip(c["eps"], c["excess"])),
              flush=True)
    claims = make_claims(out, radius, S.setting(args), curve_text)
    figs = figures(out, radius, args, n)
    drop = ("measured", "per_point", "excess_per_point")
    payload = {norm: {lab: {k: v for k, v in c.items() if k not in drop} for lab, c in cs.items()}
               for norm, cs in out.items()}
    rad = {f"{norm} {lab}": {"sample": t} | {k: v for k, v in c.items() if k not in drop}
           for (norm, lab), (c, t) in radius.items()}
    write_result(args, {"curves": payload, "training_radius": rad, "budget": b.__dict__,
                        "seconds_by_stage": study.seconds}, claims, figs)
    return {"curves": out, "radius": radius, "claims": claims}


if __name__ == "__main__":
    main()
