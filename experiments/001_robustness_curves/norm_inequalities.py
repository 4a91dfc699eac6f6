"""Paper 001, eq. 17-20: the norm inequalities, per point and per curve, on the MNIST CNNs.

001 Section 3: for every x in R^d, ``||x||_inf <= ||x||_2 <= ||x||_1 <=
sqrt(d) ||x||_2 <= d ||x||_inf`` (eq. 17), hence the perturbation balls nest
(eq. 18: ``A^inf_{eps/d} ⊆ A^2_{eps/sqrt d} ⊆ A^1_eps ⊆ A^2_eps ⊆ A^inf_eps``)
and the robust losses are ordered (eq. 19: ``L_inf,eps >= L_2,eps >=
L_1,eps``; eq. 20: ``>= L_2,eps/sqrt d >= L_1,eps/d`` as printed, where eq. 18
gives ``L_inf,eps/d`` for the last term; the printed one also holds, as it
follows from ``L_2,eps/sqrt d >= L_1,eps/sqrt d >= L_1,eps/d``).

Per point, with ``d_p`` the minimal adversarial l_p distance, the links that
involve l_inf and l_2 read

* (19) ``d_inf <= d_2``: the l_2-minimal perturbation's l_inf norm is at most
  its l_2 norm;
* (18/20) ``d_2 <= sqrt(d) d_inf``: the l_inf-minimal perturbation's l_2 norm
  is at most ``sqrt(d)`` times its l_inf norm (d = 784 on MNIST: 28).

Both hold for the true distances of any classifier, also inside the [0, 1]
box. Measured distances are attack upper bounds, so a violation means that one
norm's attack missed an adversarial example the other norm's attack proves to
exist: (19) fails where the l_inf attack is weak, (18/20) where the l_2
attack is. We count them per model on the shared full-MNIST evaluation of
``table1_fig2.py`` (2,000 random test images, the same for every model; l_1
distances are not part of it, so the links with l_1 are not measured here),
and test the curve form (eq. 19 and 20 as inequalities between robustness
curves, at every threshold, exactly on the step functions). The curve form
uses, where it is below the l_2 attacks' own distance, the l_2 norm of the
verified l_inf adversarial (``rcurves.evaluate``'s bound by the other norm's
adversarials, counted by ``shared.with_linf_adversarial_l2``; before that
bound, where the l_2 attacks found nothing, 35 and 184 points of the l_inf 0.3
and 0.4 AT models); the per-point self-check compares each norm's own attacks
(``shared.own_distance``), without that bound;
the row says how many points rest on that stand-in and decides the rule again
without them (each model's curves on its other points).

The links with l_1 (``d_2 <= d_1`` (19), ``d_1 <= sqrt(d) d_2`` (18), ``d_1 <=
d d_inf`` (17), and the printed eq. 20's ``d_2 <= sqrt(d) d_1``) need l_1
distances, which the shared evaluation does not have: they are measured on
:data:`L1_N` of its points, drawn at random (``rcurves.data.sampling.random_subset``),
for the ST and AT-linf-0.3 models (``attacks.minimal_distance`` in l_1 with the
evaluation's default budget; kept under ``<cache>/evaluations/mnist-full-l1``);
not in ``--quick`` runs (another attack compilation).

    python experiments/001_robustness_curves/norm_inequalities.py --out results/experiments/norm_inequalities
"""
from __future__ import annotations

import math
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
from shared import (evaluation_sample, l2_repair_text, own_distance, parse_args, with_linf_adversarial_l2, write_result,
                    zoo_evaluation)

from rcurves.claims.record import claim, fmt
from rcurves.claims.verdicts import Verdict  # noqa: E402

MODELS = ("mnist-full-cnn-st", "mnist-full-cnn-st-shift", "mnist-full-cnn-st-noise", "mnist-full-cnn-st-cutout",
          "mnist-full-cnn-st-mixup", "mnist-full-cnn-at-linf-0.1", "mnist-full-cnn-at-linf-0.2",
          "mnist-full-cnn-at-linf-0.3", "mnist-full-cnn-at-linf-0.4", "mnist-full-cnn-at-l2-1.5")
RTOL = 1e-5     # float32 distances: a violation must exceed this relative margin
L1_MODELS = ("ST", "AT-linf-0.3")
L1_N = 500      # points of the shared evaluation with l_1 distances (quick: 16)


def point_violations(d_inf, d_2, dim, rtol=RTOL):
    """Per-point violations of ``d_inf <= d_2`` (eq. 19) and ``d_2 <= sqrt(dim) d_inf`` (eq. 18/20).

    ``d_inf``, ``d_2``: ``(n,)`` minimal distances of the same points (``inf``: no adversarial
    found, 0: misclassified). A violation must exceed the relative margin ``rtol``; ``inf`` on the
    larger side of a finite bound is a violation. Returns ``{'eq19': {...}, 'eq20': {...}}``, each
    ``{'count', 'points' (indices), 'worst' (largest lhs / rhs among the violations, inf when a side
    is inf), 'ratio_min', 'ratio_median', 'ratio_max'}`` (ratios over points with both finite and
    positive: d_2 / d_inf for eq. 19, d_2 / (sqrt(dim) d_inf) for eq. 20).
    """
    a, b = np.asarray(d_inf, np.float64), np.asarray(d_2, np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"d_2: expected the shape of d_inf ({a.shape}), got {b.shape}")
    s = math.sqrt(dim)
    out = {}
    for name, lhs, rhs in (("eq19", a, b), ("eq20", b, s * a)):
        bad = lhs > rhs * (1 + rtol)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(bad, lhs / rhs, np.nan)
        ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
        r = (b[ok] / a[ok]) / (1.0 if name == "eq19" else s)
        out[name] = {"count": int(bad.sum()), "points": np.flatnonzero(bad),
                     "worst": float(np.nanmax(q)) if bad.any() else None,
                     "ratio_min": float(r.min()) if r.size else None,
                     "ratio_median": float(np.median(r)) if r.size else None,
                     "ratio_max": float(r.max()) if r.size else None}
    return out


def l1_violations(d_inf, d_2, d_1, dim, rtol=RTOL):
    """Per-point violations of the links of eq. 17-20 that involve l_1 (``(n,)`` distances, same points).

    Returns ``{name: count}`` for ``d2<=d1`` (eq. 19), ``d1<=sqrt(d)d2`` (eq. 18), ``d1<=d dinf`` (eq. 17)
    and ``d2<=sqrt(d)d1`` (eq. 20 as printed), with ``inf`` on the larger side of a finite bound a
    violation.
    """
    a, b, c = (np.asarray(v, np.float64) for v in (d_inf, d_2, d_1))
    if not a.shape == b.shape == c.shape:
        raise ValueError(f"d_1: expected the shape of d_inf ({a.shape}), got {b.shape}, {c.shape}")
    s = math.sqrt(dim)
    links = {"d2<=d1": (b, c), "d1<=sqrt(d)d2": (c, s * b), "d1<=d dinf": (c, dim * a), "d2<=sqrt(d)d1": (b, s * c)}
    return {k: int(np.sum(lhs > rhs * (1 + rtol))) for k, (lhs, rhs) in links.items()}


def curve_violations(d_inf, d_2, dim, rtol=RTOL):
    """Eq. 19 and 20 as curves: ``R_inf(e) >= R_2(e)`` and ``R_2(e / sqrt dim) >= R_inf(e / dim)`` for all e.

    With equally many points these hold at every threshold iff the sorted distances are ordered
    (``sort(d_inf)[k] <= sort(d_2)[k]``, ``sort(d_2)[k] <= sqrt(dim) sort(d_inf)[k]`` for every rank
    k). Returns ``{'eq19': count of ranks violated, 'eq20': ...}``.
    """
    a, b = np.sort(np.asarray(d_inf, np.float64)), np.sort(np.asarray(d_2, np.float64))
    s = math.sqrt(dim)
    return {"eq19": int(np.sum(a > b * (1 + rtol))), "eq20": int(np.sum(b > s * a * (1 + rtol)))}


def _totals(counts):
    """``(eq. 19, eq. 18/20)`` violations summed over the models of ``{model: {'eq19': k, 'eq20': k}}``."""
    return tuple(sum(c[k] for c in counts.values()) for k in ("eq19", "eq20"))


def inequality_verdict(counts, what):
    """reproduced when no model has a violation (``counts``: ``{model: {'eq19': k, 'eq20': k}}``), else differs."""
    total = {k: sum(c[k] for c in counts.values()) for k in ("eq19", "eq20")}
    test = (f"{what}: violations of eq. 19 (d_inf <= d_2) {total['eq19']}, of eq. 18/20 (d_2 <= sqrt(d) d_inf) "
            f"{total['eq20']}, over {len(counts)} models (rule: none, relative margin {RTOL:g})")
    if total["eq19"] == 0 and total["eq20"] == 0:
        return Verdict("reproduced", test)
    bad = [m for m, c in counts.items() if c["eq19"] or c["eq20"]]
    return Verdict("differs", test, f"violated on {', '.join(bad)}: the measured distances are attack upper bounds "
                                    f"and the inequalities are theorems, so each violation is an attack that missed "
                                    f"an adversarial example the other norm's attack proves to exist")


def main(argv=None):
    args = parse_args(__doc__, "norm_inequalities", argv)
    ev, models = zoo_evaluation(args, MODELS, norms=("linf", "l2"))
    sample = evaluation_sample(args, ev)
    dim = int(np.prod(ev.data.x.shape[1:])) if ev.data.x.size else 784
    ev_b, l2info = with_linf_adversarial_l2(args, ev, models)
    per_point, per_point_b, per_curve, per_curve_raw, per_curve_drop, standin = {}, {}, {}, {}, {}, {}
    for m in ev.labels:
        # the attacks against each other: each norm's own attacks, without evaluate's cross-norm bound
        per_point[m] = point_violations(own_distance(ev, m, "linf"), own_distance(ev, m, "l2"), dim)
        per_point_b[m] = point_violations(ev_b.distance(m, "linf"), ev_b.distance(m, "l2"), dim)
        per_curve[m] = curve_violations(ev_b.distance(m, "linf"), ev_b.distance(m, "l2"), dim)
        per_curve_raw[m] = curve_violations(own_distance(ev, m, "linf"), own_distance(ev, m, "l2"), dim)
        # without the stand-in: each model's curves on its points whose l_2 distance is an l_2 attack's
        keep = ~standin_points(ev_b, m)
        standin[m] = int((~keep).sum())
        per_curve_drop[m] = curve_violations(ev_b.distance(m, "linf")[keep], ev_b.distance(m, "l2")[keep], dim)
    v_curve = inequality_verdict(per_curve, "ranks violated")
    v_curve_drop = inequality_verdict(per_curve_drop, "ranks violated without the stand-in points")
    n = int(ev.data.y.shape[0])
    l1 = None if args.quick else _l1_links(args, ev, models, dim)

    def f3(v):
        return "-" if v is None else fmt(v, 3)

    def detail(m):
        p = per_point[m]
        return (f"{m}: {p['eq19']['count']} / {p['eq20']['count']}"
                + (f" (worst d_inf / d_2 = {fmt(p['eq19']['worst'], 4)})" if p["eq19"]["count"] else "")
                + (f" (worst d_2 / (sqrt(d) d_inf) = {fmt(p['eq20']['worst'], 4)})" if p["eq20"]["count"] else "")
                + f", d_2 / d_inf in [{f3(p['eq19']['ratio_min'])}, {f3(p['eq19']['ratio_max'])}] "
                  f"(median {f3(p['eq19']['ratio_median'])})")

    claims = [
        claim("001", "Section 3, eq. 19-20 (curves)",
              "001 eq. 17-20: for any classifier the robust losses are ordered, L_inf,eps >= L_2,eps (eq. 19) and "
              "L_2,eps/sqrt(d) >= L_inf,eps/d (eq. 18; eq. 20 as printed ends in L_1,eps/d): the l_inf robustness "
              "curve bounds the l_2 curve from above, and the l_2 curve at eps / sqrt(d) bounds the l_inf curve at "
              "eps / d.",
              f"{sample}; {l2_repair_text(l2info)}; d = {dim}; the empirical l_inf and l_2 curves of "
              f"{len(ev.labels)} models compared at every threshold (exact: sorted distances rank by rank); ranks "
              f"violated per model (eq. 19 / eq. 20): "
              + ", ".join(f"{m} {c['eq19']}/{c['eq20']}" for m, c in per_curve.items())
              + " (with the l_2 attacks' distances alone, inf where they found nothing: "
              + (", ".join(f"{m} {c['eq19']}/{c['eq20']}" for m, c in per_curve_raw.items() if c != per_curve[m])
                 or "the same") + "); " + standin_sentence(standin, n, v_curve, v_curve_drop, per_curve_drop),
              v_curve, short="the l_inf curve bounds the l_2 curve, and eq. 20's bound holds",
              paper_value="no violation (theorem)",
              ours_value="{} / {} ranks violated".format(*_totals(per_curve))),
        claim("001", "Section 3, eq. 19-20 (per point; attacks vs each other)",
              "Check of our attacks by the norm inequalities: per point the minimal distances satisfy d_inf <= d_2 "
              "<= sqrt(d) d_inf, so a point where our l_inf and l_2 distances do not is one where one norm's attack "
              "missed an adversarial example.",
              f"{sample}; {n} points x {len(ev.labels)} models; l_2 distances of the l_2 attacks (APGD, CW) alone; "
              f"violations per model (eq. 19 / eq. 18-20): "
              + "; ".join(detail(m) for m in ev.labels)
              + ". Where the l_2 attacks found nothing the l_inf adversarial's l_2 norm bounds the distance: "
              + ("; ".join(f"{m}: {r['repaired']} points, median {fmt(r['median_bound'], 3)}"
                           for m, r in l2info.items() if r["repaired"]) or "no such points")
              + "; violations left after that bound: "
              + ", ".join(f"{m} {v['eq19']['count']}/{v['eq20']['count']}" for m, v in per_point_b.items()),
              inequality_verdict({m: {k: v[k]["count"] for k in ("eq19", "eq20")} for m, v in per_point.items()},
                                 "points violating"),
              kind="self-check", short="per point our l_inf and l_2 attacks obey d_inf <= d_2 <= sqrt(d) d_inf",
              paper_value="no violation (theorem)",
              ours_value="{} / {} points violate".format(*_totals(
                  {m: {k: v[k]["count"] for k in ("eq19", "eq20")} for m, v in per_point.items()}))),
    ]
    if l1 is not None:
        claims.append(claim(
            "001", "Section 3, eq. 17-20 (links with l_1, per point)",
            "001 eq. 17-20 for the links with l_1: per point d_2 <= d_1 (eq. 19), d_1 <= sqrt(d) d_2 (eq. 18), "
            "d_1 <= d d_inf (eq. 17), and d_2 <= sqrt(d) d_1 (eq. 20 as printed); measured distances violating "
            "them show an attack that missed an adversarial example.",
            f"{l1['sample']} ({sample}); models {', '.join(l1['counts'])}; l_1 distances from "
            f"attacks.minimal_distance (the evaluation's default budget); violations per model: "
            + "; ".join(f"{m}: " + ", ".join(f"{k} {v}" for k, v in c.items()) for m, c in l1["counts"].items())
            + "; median d_1 / d_2 " + ", ".join(f"{m} {fmt(v, 3)}" for m, v in l1["median_d1_over_d2"].items()),
            _l1_verdict(l1["counts"]), kind="self-check",
            short="per point our l_1 attack obeys the links of eq. 17-20", paper_value="no violation (theorem)",
            ours_value=f"{sum(sum(c.values()) for c in l1['counts'].values())} violations"))
    payload = {"sample": sample, "n": n, "dim": dim, "rtol": RTOL, "per_point": per_point, "per_curve": per_curve,
               "per_curve_l2_attacks_only": per_curve_raw, "l2_bounded_by_linf_adversarials": l2info,
               "standin_points": standin, "per_curve_without_standin": per_curve_drop,
               "curves_verdict_without_standin": v_curve_drop.verdict,
               "per_point_after_bound": {m: {k: v[k]["count"] for k in ("eq19", "eq20")} for m, v in per_point_b.items()},
               "l1": l1}
    write_result(args, payload, claims)
    return payload


def standin_points(ev_b, m) -> np.ndarray:
    """``(n,)`` bool: the points whose l_2 distance for model ``m`` is the l_2 norm of a verified l_inf
    adversarial (``shared.with_linf_adversarial_l2``: smaller than the l_2 attacks' own distance)."""
    la = ev_b.distances[m]["l2"].get("linf_adv")
    n = int(ev_b.data.y.shape[0])
    return np.zeros(n, bool) if la is None else np.isfinite(np.asarray(la, np.float64))


def standin_sentence(standin, n, v_with, v_without, counts_without) -> str:
    """How many points of the curves row rest on the l_2 stand-in, and the row decided without them."""
    hit = {m: k for m, k in standin.items() if k}
    if not hit:
        return "no l_2 distance rests on an l_inf adversarial's l_2 norm"
    return (f"{sum(hit.values())} (model, point) pairs of the {n} x {len(standin)} rest on the l_2 norm of a verified "
            f"l_inf adversarial where the l_2 attacks found none (" + ", ".join(f"{m} {k}" for m, k in hit.items())
            + f"); decided again without them (each model's curves on its other points): ranks violated "
            + ", ".join(f"{m} {counts_without[m]['eq19']}/{counts_without[m]['eq20']}" for m in hit)
            + f", {v_without.verdict}" + (f" ({v_without.why})" if v_without.why else "")
            + ("; the row's verdict holds without them" if v_without.verdict == v_with.verdict
               else f"; the row's verdict ({v_with.verdict}) does not hold without them"))


def _l1_verdict(counts):
    total = sum(sum(c.values()) for c in counts.values())
    test = f"{total} violations over {len(counts)} models (rule: none, relative margin {RTOL:g})"
    if total == 0:
        return Verdict("reproduced", test)
    return Verdict("differs", test, "a measured l_1 (or l_2) distance breaks a link of eq. 17-20: that norm's attack "
                                    "missed an adversarial example the other norm's attack proves to exist")


def _l1_links(args, ev, models, dim):
    """l_1 distances of :data:`L1_MODELS` on :data:`L1_N` random points of the evaluation, and the links."""
    import os

    from shared import zoo_attack

    from rcurves.data import Data
    from rcurves.data.sampling import random_subset
    from rcurves.models import zoo
    from rcurves.pipeline import evaluation

    n = int(ev.data.y.shape[0])
    m = min(L1_N, n)
    idx = random_subset(n, m, seed=args.seed)
    sub = Data(f"{ev.data.name}[{m} of {n}]", ev.data.x[idx], ev.data.y[idx])
    labels = [k for k in L1_MODELS if k in ev.labels]
    cache = args.cache or zoo.default_cache()
    out_dir = os.path.join(cache, "evaluations", ("mnist-l1-quick" if args.quick else "mnist-full-l1"))
    ev1 = evaluation.evaluate({k: models[k] for k in labels}, sub, norms=("l1",), attack=zoo_attack(args.quick),
                            seed=args.seed, out_dir=out_dir, progress=not args.no_progress)
    counts, ratio = {}, {}
    for k in labels:
        d1 = ev1.distance(k, "l1")
        di, d2 = ev.distance(k, "linf")[idx], ev.distance(k, "l2")[idx]
        counts[k] = l1_violations(di, d2, d1, dim)
        ok = np.isfinite(d1) & np.isfinite(d2) & (d2 > 0)
        ratio[k] = float(np.median(d1[ok] / d2[ok])) if ok.any() else None
    return {"sample": f"{m} random points (random_subset, seed {args.seed}) of the evaluation's {n}",
            "indices": idx, "counts": counts, "median_d1_over_d2": ratio, "seconds": ev1.seconds}


if __name__ == "__main__":
    main()
