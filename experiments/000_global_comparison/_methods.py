"""Paper 000's five training methods on full MNIST, and the tests the 000 scripts share about them.

000 Section 3.1 compares five training methods: ST, AT (Madry et al.), KW
(Wong & Kolter's robust loss: certified training), MMR+AT (Croce et al.
2019) and MMR-UNIV (Croce & Hein 2020). The zoo has each of them on the
C.1 CNN and full MNIST (:data:`LINF_PANEL`, :data:`L2_PANEL`; KW's role is
played by CROWN-IBP certified training); :func:`method_models` and
:func:`method_evaluation` load them (tiny MLP stand-ins of every method for
``--quick``) and evaluate them on the shared held-out points of
``shared.zoo_evaluation`` (the same cache, so every script computes each
(model, norm) once).

Also here, used by ``table1_fig2.py``, ``fig3_slope.py`` and ``fig4_norms.py``:

* :func:`holm`: Holm's step-down over a family of p-values (family-wise level
  ``alpha``; uniformly more powerful than Bonferroni at the same guarantee);
* :func:`holm_sides`: the sides of many McNemar tests, Holm over all of them;
* :func:`panels_alike`: "the l_inf and the l_2 plots are similar": no pair of
  models ordered significantly one way in one norm and the other way in the
  other (paired t-tests on the area between the curves, Holm);
* :func:`certified_distances`, :func:`band_reversal`, :func:`band_position`:
  CROWN certified radii of the KW-role model on the evaluation's points (a
  lower bound of each distance; the attack's is the upper bound, so the true
  curve lies between the certified and the attack curve), and whether a
  reversal with another model holds for every curve inside that band;
* :func:`budget_text`: each model's training budget, its recipe's epochs
  against the paper's :data:`PAPER_EPOCHS`, and its clean accuracy on the
  evaluated points, for the rows on the paper's methods;
* :func:`standin_mask`, :func:`standin_text`: the points whose l_2 distance is
  the l_2 norm of an l_inf adversarial (``shared.with_linf_adversarial_l2``),
  so that each l_2 verdict can be decided with and without them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
import pathlib
import sys
from typing import Callable, Dict, Optional, Sequence

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
import shared  # noqa: E402

from rcurves.claims.record import fmt  # noqa: E402
from rcurves.claims.verdicts import Verdict  # noqa: E402

ST = "mnist-full-cnn-st"
AT = "mnist-full-cnn-at-linf-0.1"
AT_L2 = "mnist-full-cnn-at-l2-1.5"
KW = "mnist-full-cnn-crown-ibp-linf-0.1"
MMR_AT = "mnist-full-cnn-mmr-at-linf-0.1"
MMR_AT_L2 = "mnist-full-cnn-mmr-at-l2-0.3"
MMR_UNIV = "mnist-full-cnn-mmr-univ"

#: 000 Section 3.1's methods in the l_inf panel (models trained for l_inf, as the paper's Figure 2, left)
LINF_PANEL = (ST, AT, KW, MMR_AT, MMR_UNIV)
#: ... and in the l_2 panel (trained for l_2 where the zoo has it; KW: CROWN-IBP l_inf, no l_2 certified model)
L2_PANEL = (ST, AT_L2, KW, MMR_AT_L2, MMR_UNIV)
#: the method each zoo entry stands for
ROLE = {ST: "ST", AT: "AT", AT_L2: "AT", KW: "KW", MMR_AT: "MMR+AT", MMR_AT_L2: "MMR+AT", MMR_UNIV: "MMR-UNIV"}
#: entries with a tiny stand-in in ``--quick`` runs (shared's quick subset and one of each method)
QUICK = frozenset(shared.QUICK_MODELS) | {AT, KW, MMR_AT, MMR_AT_L2, MMR_UNIV}
ALPHA = 0.05
CERTIFY_METHOD = "crown"
#: 000 Appendix C: "All models are trained with Adam Optimizer ... for 100 epochs, with batch size 128"
PAPER_EPOCHS = 100


# ---------------------------------------------------------------------------
# models and their evaluation


def quick_entry(name: str):
    """``shared.tiny_entry(name)``; for MMR the regulariser's sampled units cut to 16 of the stand-in's 32 and one
    epoch (its step costs several of the others')."""
    e = shared.tiny_entry(name)
    if e.train.method in ("mmr", "mmr-univ"):
        e = dataclasses.replace(e, train=dataclasses.replace(e.train, mmr_units=min(e.train.mmr_units, 16), epochs=1,
                                                             warmup_epochs=min(e.train.warmup_epochs, 0.5)))
    return e


def method_models(args, names: Sequence[str]):
    """``{label: ZooModel}`` as ``shared.zoo_models``, with ``--quick`` stand-ins of every entry in :data:`QUICK`
    (the others are left out of quick runs)."""
    from rcurves.models import zoo

    out = {}
    for name in names:
        if args.quick and name not in QUICK:
            continue
        e = quick_entry(name) if args.quick else zoo.entry(name)
        m = zoo.load(e, cache=args.cache, retrain=args.retrain, progress=not args.no_progress)
        out[e.train.name] = m
    return out


def zoo_name(model) -> str:
    """The zoo entry a loaded model (or its quick stand-in) is."""
    n = model.entry.name
    return n[len("quick-"):] if n.startswith("quick-") else n


def method_evaluation(args, names: Sequence[str], norms=("linf", "l2")):
    """``shared.zoo_evaluation`` over :func:`method_models`: the same points, attack budget and cache
    (``<cache>/evaluations/<dataset>[-quick]``). Returns ``(ev, models, labels)`` with
    ``labels[zoo name] = label``."""
    from rcurves.models import zoo
    from rcurves.pipeline import evaluation

    models = method_models(args, names)
    dataset = shared.mnist_dataset(args)
    cache = args.cache or zoo.default_cache()
    out_dir = os.path.join(cache, "evaluations", dataset + ("-quick" if args.quick else ""))
    ev = evaluation.evaluate(dict(models), dataset, norms=norms, n=32 if args.quick else shared.N_EVAL,
                             attack=shared.zoo_attack(args.quick), seed=args.seed, out_dir=out_dir,
                             progress=not args.no_progress)
    return ev, models, {zoo_name(m): k for k, m in models.items()}


def epochs(model) -> int:
    """The epochs of a loaded model's training recipe (``entry.train.epochs``: the zoo's, or the quick stand-in's)."""
    return int(model.entry.train.epochs)


def budget_text(models, ev, labels: Sequence[str]) -> str:
    """The training budget of each of ``labels`` beside the paper's (:data:`PAPER_EPOCHS`), read from its recipe,
    and its clean accuracy on the evaluation's points (``ev.accuracy``), for a row's ``why``."""
    return ("training budget (epochs of our recipe against the paper's models' " + str(PAPER_EPOCHS) + ") and clean "
            "accuracy on these points: " + "; ".join(
                f"{m}: {epochs(models[m])} of {PAPER_EPOCHS} epochs, {ev.accuracy[m]:.1%} clean" for m in labels))


def subset(ev, labels: Sequence[str]):
    """The evaluation restricted to ``labels`` (same points)."""
    return dataclasses.replace(ev, distances={m: ev.distances[m] for m in labels},
                               accuracy={m: ev.accuracy.get(m) for m in labels},
                               models_info={m: ev.models_info.get(m, {}) for m in labels})


# ---------------------------------------------------------------------------
# families of tests


def holm(p, alpha: float = ALPHA) -> np.ndarray:
    """Holm's step-down: which of the p-values ``p`` (any shape) are rejected at family-wise level ``alpha``.

    Sorted increasingly, the ``i``-th smallest (from 0) is rejected while every one before it was and
    ``p_(i) < alpha / (m - i)``. Returns a bool array of ``p``'s shape.
    """
    p = np.asarray(p, np.float64)
    flat = p.ravel()
    m = flat.size
    rej = np.zeros(m, bool)
    if m:
        order = np.argsort(flat, kind="stable")
        ok = flat[order] < alpha / (m - np.arange(m))
        k = m if ok.all() else int(np.argmin(ok))
        rej[order[:k]] = True
    return rej.reshape(p.shape)


def mcnemar_p(only_a, only_b) -> np.ndarray:
    """Exact two-sided McNemar p-values of discordant counts (any shape; 1 where there are none)."""
    from scipy.stats import binom

    oa, ob = np.asarray(only_a, np.int64), np.asarray(only_b, np.int64)
    k = oa + ob
    p = np.minimum(1.0, 2.0 * np.minimum(binom.cdf(oa, k, 0.5), binom.sf(oa - 1, k, 0.5)))
    return np.where(k == 0, 1.0, p)


def holm_sides(only_a, only_b, alpha: float = ALPHA) -> np.ndarray:
    """Per test: +1 where ``a`` is significantly more robust (fewer points broken by ``a`` only), -1 where
    ``b`` is, 0 elsewhere; two-sided exact McNemar, Holm over every test of the arrays (one family)."""
    oa, ob = np.asarray(only_a, np.int64), np.asarray(only_b, np.int64)
    rej = holm(mcnemar_p(oa, ob), alpha)
    return np.where(rej, np.sign(ob - oa), 0).astype(np.int8)


def area_scan(dists: Dict[str, np.ndarray], top: Optional[float] = None):
    """Per pair of models: the area between their curves on ``[0, top]`` and its paired two-sided t-test.

    ``int_0^top (R_b - R_a) d eps = mean(min(d_a, top)) - mean(min(d_b, top))`` (exact on the step curves):
    positive where ``a``'s curve lies lower on average (more robust). ``top`` defaults to the largest
    finite distance of any model. Returns ``(pairs, area (P,), p (P,), top)``.
    """
    from scipy.stats import ttest_rel

    labels = list(dists)
    fin = np.concatenate([d[np.isfinite(d)] for d in dists.values()] + [np.zeros(1)])
    top = float(fin.max()) if top is None else float(top)
    top = top if top > 0 else 1.0
    clip = {m: np.minimum(np.asarray(d, np.float64), top) for m, d in dists.items()}
    pairs = list(itertools.combinations(labels, 2))
    area, p = np.zeros(len(pairs)), np.ones(len(pairs))
    for i, (a, b) in enumerate(pairs):
        diff = clip[a] - clip[b]
        area[i] = float(diff.mean()) if diff.size else 0.0
        if diff.size > 1 and np.ptp(diff) > 0:
            p[i] = float(ttest_rel(clip[a], clip[b]).pvalue)
        elif diff.size > 1 and diff[0] != 0:
            p[i] = 0.0                                    # every point moves the same nonzero amount
    return pairs, area, p, top


def panels_alike(dists, alpha: float = ALPHA, min_share: float = 0.5):
    """"The l_inf and the l_2 plots are visually similar" (000 Figure 4), on paired points.

    ``dists``: ``{norm: {label: (n,) distances}}``, two norms, the same models and points. Per norm and
    pair of models, :func:`area_scan`'s paired t-test of the area between the two curves (up to the
    norm's largest finite distance: which model's curve lies lower); Holm over the ``2 P`` tests. A pair
    is reversed when it is significantly ordered one way in one norm and the other way in the other.
    reproduced: no pair reversed, and at least ``min_share`` of the pairs significantly ordered (the
    same way) in both norms; differs: some pair reversed; inconclusive: no pair reversed but fewer than
    ``min_share`` resolved in both norms (the sample cannot tell whether the plots order the models alike).

    Returns ``(Verdict, {'pairs', 'sides' (P, 2), 'area' (P, 2), 'p' (P, 2), 'top', 'reversed', 'agree'})``.
    """
    norms = list(dists)
    if len(norms) != 2:
        raise ValueError(f"dists: expected two norms, got {norms}")
    res = {k: area_scan(dists[k]) for k in norms}
    pairs = res[norms[0]][0]
    area = np.stack([res[k][1] for k in norms], 1)
    p = np.stack([res[k][2] for k in norms], 1)
    side = np.where(holm(p, alpha), np.sign(area), 0).astype(np.int8)
    rev = [pairs[i] for i in range(len(pairs)) if side[i, 0] * side[i, 1] == -1]
    agree = [pairs[i] for i in range(len(pairs)) if side[i, 0] * side[i, 1] == 1]
    P = len(pairs)
    test = (f"per pair of the {len(dists[norms[0]])} models and norm, the area between the two curves (up to "
            + ", ".join(f"{k} {fmt(res[k][3], 3)}" for k in norms)
            + f"), paired two-sided t-test, Holm over the {2 * P} tests ({alpha:g}); pairs ordered the same way "
              f"in both norms: {len(agree)} of {P}; reversed between the norms: {len(rev)}"
            + (" (" + "; ".join(f"{a} / {b}" for a, b in rev[:6]) + ")" if rev else ""))
    det = {"pairs": [list(q) for q in pairs], "sides": side, "area": area, "p": p,
           "top": {k: res[k][3] for k in norms}, "reversed": [list(q) for q in rev], "agree": [list(q) for q in agree]}
    if rev:
        return Verdict("differs", test, f"{len(rev)} pairs of models are ordered oppositely in the two plots"), det
    if len(agree) < min_share * P:
        return Verdict("inconclusive", test, f"only {len(agree)} of {P} pairs are ordered significantly in both "
                                             f"norms (rule: at least {min_share:.0%}): the sample cannot tell "
                                             f"whether the plots order the models alike"), det
    return Verdict("reproduced", test), det


# ---------------------------------------------------------------------------
# the certified band of the KW-role model


def _certify_digest() -> str:
    import rcurves.certify.radius as radius

    h = hashlib.sha256()
    for f in sorted(pathlib.Path(radius.__file__).parent.glob("*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def certified_distances(args, model, x, y, norm: str, upper, method: str = CERTIFY_METHOD,
                        chunk: int = 250) -> np.ndarray:
    """Certified radii (``rcurves.certify.certified_radius``, ``method``) of a zoo model on the points.

    The search runs inside ``[0, upper]`` (the attack's distances); the radius is capped by them. Kept
    under ``<cache>/evaluations/<dataset>[-quick]/certified/``, keyed by the checkpoint, the certify
    code, the points, the bounds and the method; computed ``chunk`` points at a time and resumed.
    Returns ``(n,)`` float64 lower bounds of the distances (0 for misclassified points).
    """
    import io

    from rcurves import certify
    from rcurves.files import atomic_write_bytes
    from rcurves.models import zoo

    x = np.asarray(x, np.float32)
    up = np.asarray(upper, np.float64)
    cache = args.cache or zoo.default_cache()
    folder = os.path.join(cache, "evaluations", shared.mnist_dataset(args) + ("-quick" if args.quick else ""),
                          "certified")
    os.makedirs(folder, exist_ok=True)
    h = hashlib.sha256((model.path + _certify_digest() + method + norm).encode() + x.tobytes() + up.tobytes())
    path = os.path.join(folder, f"{model.entry.name}-{norm}-{method}-{h.hexdigest()[:16]}.npz")
    parts = []
    if os.path.exists(path):
        with np.load(path) as z:
            parts = [z["radius"]]
    done = int(parts[0].size) if parts else 0
    net = certify.from_model(model.model, model.params)
    n = x.shape[0]
    while done < n:
        sl = slice(done, min(n, done + chunk))
        r = np.asarray(certify.certified_radius(net, x[sl], np.asarray(y)[sl], norm=norm, method=method,
                                                upper=np.asarray(up[sl], np.float32)), np.float64)
        parts.append(np.minimum(r, up[sl]))
        done = sl.stop
        buf = io.BytesIO()
        np.savez(buf, radius=np.concatenate(parts))
        atomic_write_bytes(path, buf.getvalue())
        parts = [np.concatenate(parts)]
        if not args.no_progress:
            print(f"certified radii ({method}, {norm}) of {model.entry.name}: {done}/{n}", flush=True)
    return np.concatenate(parts) if parts else np.zeros(0)


def _curves(ds: Sequence[np.ndarray]):
    """Exact step curves of several distance arrays on their common knots: ``(knots, widths, [R_i])``;
    ``R_i[k]`` is the robust error on ``[knots[k], knots[k + 1])``."""
    from rcurves.curves import robustness_curve

    fin = np.concatenate([d[np.isfinite(d)] for d in ds] + [np.zeros(1)])
    top = float(fin.max()) if fin.size else 1.0
    knots = np.unique(np.concatenate([[0.0], fin, [top]]))
    curves = [np.asarray(robustness_curve(d, knots), np.float64) for d in ds]
    return knots, np.diff(knots), top, curves


def band_position(d_att, d_cert, d_other) -> dict:
    """Where another model's curve lies against a model's band (exact, on the step curves).

    The band of a model is ``R_attack <= R_true <= R_certified``. Returns the fractions of ``[0, E]``
    (E: the largest finite distance of the three) where ``R_other > R_certified`` (the model is more
    robust than the other's attack curve for any curve inside its band), where ``R_other <
    R_attack`` (below the band) and inside it.
    """
    knots, width, top, (ra, rc, ro) = _curves([np.asarray(d, np.float64) for d in (d_att, d_cert, d_other)])
    above, below = (ro > rc)[:-1], (ro < ra)[:-1]
    tot = top if top > 0 else 1.0
    return {"range": top, "above": float(width[above].sum() / tot), "below": float(width[below].sum() / tot),
            "inside": float(width[~above & ~below].sum() / tot)}


def band_reversal(d_att, d_cert, d_other, alpha: float = ALPHA, pairs: int = 1) -> dict:
    """Does a significant reversal between a certified model and another hold for every curve in its band?

    The certified model's better side is tested with its certified radii (its band's upper edge, the
    most pessimistic curve it can have), the other's better side with the certified model's attack
    distances (the band's lower edge): ``rcurves.claims.compare.significant_reversal`` each, Bonferroni
    over its thresholds and ``pairs``. ``found``: both sides significant, so the crossing lies outside
    the band (it is no artefact of a weak attack on the certified model). The other model's curve is
    its attack's, as everywhere.
    """
    from rcurves.claims.compare import significant_reversal

    cert = significant_reversal(d_cert, d_other, alpha=alpha, pairs=pairs)
    att = significant_reversal(d_att, d_other, alpha=alpha, pairs=pairs)

    def sig(r, side):
        s = r[side]
        return s if (s is not None and r["m"] and s["p"] < alpha / (r["m"] * max(1, pairs))) else None

    mine, theirs = sig(cert, "a_better"), sig(att, "b_better")
    return {"found": bool(mine and theirs), "attack_found": bool(att["found"]), "certified_better": mine,
            "other_better": theirs}


# ---------------------------------------------------------------------------
# the l_2 stand-in: l_2 norms of l_inf adversarials where the l_2 attacks found nothing


def standin_mask(ev_b, labels: Sequence[str]):
    """``(mask (n,), counts {label: k})``: the points whose l_2 distance, for some of ``labels``, is the
    l_2 norm of a verified l_inf adversarial (``shared.with_linf_adversarial_l2``), not an l_2 attack's."""
    n = int(ev_b.data.y.shape[0])
    mask, counts = np.zeros(n, bool), {}
    for m in labels:
        la = ev_b.distances[m].get("l2", {}).get("linf_adv")
        if la is None:
            continue
        own = np.isfinite(np.asarray(la, np.float64))
        if own.any():
            counts[m] = int(own.sum())
            mask |= own
    return mask, counts


def both_ways(decide: Callable[[np.ndarray], Verdict], mask: np.ndarray):
    """``(with, without)``: ``decide(keep)`` on every point, and on the points outside ``mask`` (None when
    ``mask`` is empty: nothing rests on the stand-in)."""
    keep = np.ones(mask.shape, bool)
    return decide(keep), (decide(~mask) if mask.any() else None)


def standin_text(mask, counts, with_: Verdict, without: Optional[Verdict]) -> str:
    """One sentence for a row: how many of its points rest on the l_2 stand-in, and the verdict without them
    beside the row's (``with_``, decided on every point)."""
    n = int(mask.size)
    if not mask.any():
        return "no l_2 distance of this row rests on an l_inf adversarial's l_2 norm"
    k = int(mask.sum())
    return (f"{k} of the {n} points rest, for some model of the row, on the l_2 norm of a verified l_inf "
            f"adversarial where the l_2 attacks found none (" + ", ".join(f"{m} {c}" for m, c in counts.items())
            + f"); decided again without those points (the same rule on the other {n - k}): "
            f"{without.verdict}" + (f" ({without.why})" if without.why else "")
            + ("; the row's verdict holds without them" if without.verdict == with_.verdict
               else f"; the row's verdict ({with_.verdict}) does not hold without them"))


def holm_text(alpha: float = ALPHA) -> str:
    return f"Holm step-down, family-wise {alpha:g}"


__all__ = ["ALPHA", "AT", "AT_L2", "KW", "L2_PANEL", "LINF_PANEL", "MMR_AT", "MMR_AT_L2", "MMR_UNIV", "PAPER_EPOCHS",
           "QUICK", "ROLE", "ST", "area_scan", "band_position", "band_reversal", "both_ways", "budget_text",
           "certified_distances", "epochs", "holm", "holm_sides", "mcnemar_p", "method_evaluation", "method_models",
           "panels_alike", "quick_entry", "standin_mask", "standin_text", "subset", "zoo_name"]
