"""Paper 000, Table 1 and Figure 2: point-wise measures disagree; robustness curves show why.

The paper's five training methods (Section 3.1) as zoo CNNs on full MNIST,
the C.1 CNN of 000 trained on the 60,000 training images (recipes in
``rcurves.models.zoo``; ``_methods.py``): ST; AT (PGD, l_inf 0.1); KW, whose
role (training with a certified robust loss) is played by CROWN-IBP at l_inf
0.1; MMR+AT at l_inf 0.1; MMR-UNIV. As in the paper's Figure 2 the l_inf panel
holds the models trained for l_inf and the l_2 panel those trained for l_2
where the zoo has one (AT l_2 1.5, MMR+AT l_2 0.3; KW stays CROWN-IBP l_inf
0.1, MMR-UNIV and ST are the same). Evaluated on the shared held-out sample
of ``shared.zoo_evaluation``: 2,000 random test images
(``default_rng(seed)``), the same points for every model. Per point the
minimal adversarial distance in l_inf (the default radius search: 4 targeted
APGD lanes x 5 steps x 7 rounds + 74 FMN steps + a 10-pass Jacobian ranking
the targets) and l_2 (the same, and Carlini-Wagner with 10 constants x 100
steps, keeping the smaller verified distance; and the l_2 norm of the
point's verified l_inf adversarial where that is smaller, as
``rcurves.evaluate`` bounds each norm by the other's adversarials:
``shared.with_linf_adversarial_l2`` counts those points; every l_2 row is
also decided without them).

Table 1: the robust error of every model at three point-wise thresholds,
fixed in advance: l_inf 0.05, 0.1, 0.2 for the paper's methods (0.5x, 1x and
2x their training eps 0.1; the paper's 1/255, 4/255, 8/255 are 0.5x, 2x and
4x its models' 2/255, but MNIST models trained at 0.1 are broken on almost
every point by 3x: the zoo's AT-linf-0.1 has robust error 0.92 at 0.2 and
1.00 at 0.3), l_2 1.0, 1.5, 2.0. The paper's claim is that the three measures
give three *different* orderings. Ours: at each threshold the exact
two-sided McNemar test on the same points for every pair of models, Holm over
all (pairs x thresholds) tests; two thresholds order the models differently
when some pair is significantly one way at one and significantly the other
way at the other; reproduced when every two of the three thresholds do;
where two do not, differs only if some pair had the power (0.8, against a 3:1
split of its discordant points one way at one threshold and the other way at
the other) to show such a reversal, else inconclusive
(:func:`orderings_verdict`).

The paper names what changes between its thresholds (Section 3.2): AT the
most robust of the four robust models at 1/255, KW more robust than AT at
4/255, MMR-UNIV more robust than AT and AT the least robust at 8/255. Each is
a row of its own (:data:`SUBCLAIMS`, :func:`subclaims`) at our smallest,
middle and largest threshold: one-sided exact McNemar with power against a
3:1 split, a "most / least robust of four" the conjunction of its three
comparisons, Holm over the four statements. Every row on the paper's
methods states each model's training budget (our recipe's epochs against
the paper's 100) and its clean accuracy on the evaluated points.

Figure 2: the full curves and every exact crossing
(``rcurves.exact_curve_intersections``). A crossing means a ranking change
only when each model is significantly more robust than the other somewhere:
McNemar at every distinct finite distance of either model, Bonferroni over
those thresholds and the pairs (``rcurves.claims.compare.significant_reversal``,
``rcurves.claims.verdicts.ranking_changes``); the paper's "multiple
intersections" needs at least two such changes (fewer: differs where the
test had the power to show two against a 3:1 split, else inconclusive).

The KW-role model is certified: CROWN (``rcurves.certify.certified_radius``,
searched inside ``[0, attack distance]``) gives per point a lower bound of its
distance, the attack an upper bound, so its true curve lies in the band
between its certified and its attack curve. A reversal with KW is decided by
the band when KW's better side is significant with its certified radii as well
(``_methods.band_reversal``): the crossing lies outside the band.

The same rows over the old set of models, ST, ST with shift / noise /
cutout / mixup augmentation, l_inf PGD-AT at 0.1, 0.2, 0.3, 0.4 and l_2
PGD-AT at 1.5 (thresholds l_inf 0.1, 0.2, 0.3, l_2 1.0, 1.5, 2.0), are kept as
"beyond" rows: one family of training methods, which the paper's claim is not
about.

The paper's setting differs: CIFAR-10, models published by others, the full
test set.

    python experiments/000_global_comparison/table1_fig2.py --out results/experiments/table1_fig2
"""
from __future__ import annotations

import itertools
import os
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))      # _methods.py
from shared import evaluation_sample, parse_args, with_linf_adversarial_l2, write_result

import _methods as M  # noqa: E402
from rcurves.claims.compare import knot_scan, mcnemar_scan, significant_reversal  # noqa: E402
from rcurves.claims.record import claim, fmt  # noqa: E402
from rcurves.claims.verdicts import (Verdict, all_of, holm, order_changes, paired_effect,  # noqa: E402
                                     ranking_changes, reversal_power)

FAMILY = ("mnist-full-cnn-st", "mnist-full-cnn-st-shift", "mnist-full-cnn-st-noise", "mnist-full-cnn-st-cutout",
          "mnist-full-cnn-st-mixup", "mnist-full-cnn-at-linf-0.1", "mnist-full-cnn-at-linf-0.2",
          "mnist-full-cnn-at-linf-0.3", "mnist-full-cnn-at-linf-0.4", "mnist-full-cnn-at-l2-1.5")
MODELS = FAMILY + tuple(m for m in M.LINF_PANEL + M.L2_PANEL if m not in FAMILY)
MODELS = tuple(dict.fromkeys(MODELS))
THRESHOLDS = {"paper": {"linf": (0.05, 0.1, 0.2), "l2": (1.0, 1.5, 2.0)},
              "family": {"linf": (0.1, 0.2, 0.3), "l2": (1.0, 1.5, 2.0)}}
ALPHA = 0.05
#: the alternative every power below is computed against: a 3:1 split of the discordant points, and the power wanted
EFFECT, POWER = 0.75, 0.8
NORM_NAME = {"linf": "l_inf", "l2": "l_2"}
#: 000 Table 1 (CIFAR-10): l_inf robust test error at 1/255, 4/255, 8/255 of the five methods
PAPER_TABLE1 = {"1/255": {"ST": 0.60, "AT": 0.38, "KW": 0.43, "MMR+AT": 0.42, "MMR-UNIV": 0.54},
                "4/255": {"ST": 0.99, "AT": 0.68, "KW": 0.57, "MMR+AT": 0.63, "MMR-UNIV": 0.74},
                "8/255": {"ST": 1.00, "AT": 0.92, "KW": 0.73, "MMR+AT": 0.84, "MMR-UNIV": 0.91}}
ROBUST = ("AT", "KW", "MMR+AT", "MMR-UNIV")
#: the paper's named statements on Table 1 (Section 3.2), each its own row: (short, threshold index (the paper's
#: 1/255, 4/255, 8/255 are our smallest, middle and largest), subject, others, 'most' (the subject more robust
#: than each of the others) or 'least' (less robust than each), the paper's words)
SUBCLAIMS = (("AT most robust of the 4 robust methods at the smallest eps", 0, "AT", ("KW", "MMR+AT", "MMR-UNIV"),
              "most", "among the four robust models, the classifier trained with AT is the most robust (the paper "
                      "goes on: followed by MMR+AT, then KW, MMR-UNIV the least robust; that order of the other three "
                      "is not this row's test)"),
             ("KW more robust than AT at the middle eps", 1, "KW", ("AT",), "most", "KW is more robust than AT"),
             ("MMR-UNIV more robust than AT at the largest eps", 2, "MMR-UNIV", ("AT",), "most",
              "MMR-UNIV is preferable over AT"),
             ("AT least robust of the 4 robust methods at the largest eps", 2, "AT", ("KW", "MMR+AT", "MMR-UNIV"),
              "least", "AT results in the least robust classifier (of the four robust models)"))
#: the roles in the index's short values
ABBREV = {"ST": "ST", "AT": "AT", "KW": "KW", "MMR+AT": "M+AT", "MMR-UNIV": "UNIV"}


def pointwise_tests(dists, thresholds):
    """McNemar counts of every pair of models at the point-wise thresholds.

    ``dists``: ``{label: (n,) distances}`` on the same points. Returns
    ``(pairs [(a, b)], only_a (P, T), only_b (P, T))``: points broken within each
    threshold by ``a`` only / ``b`` only.
    """
    labels = list(dists)
    pairs = list(itertools.combinations(labels, 2))
    oa = np.zeros((len(pairs), len(thresholds)), np.int64)
    ob = np.zeros_like(oa)
    for i, (a, b) in enumerate(pairs):
        oa[i], ob[i], _ = mcnemar_scan(dists[a], dists[b], np.asarray(thresholds, np.float64))
    return pairs, oa, ob


def orderings_verdict(only_a, only_b, thresholds, pairs, alpha=ALPHA, effect=EFFECT, power=POWER):
    """"Each point-wise measure orders the models differently" (000 Table 1), on paired counts.

    ``only_a, only_b``: ``(P, T)`` discordant counts of ``P`` model pairs at ``T``
    thresholds; exact two-sided McNemar for each, Holm over the ``P T`` tests
    (family-wise ``alpha``). Thresholds ``i < j`` order the models differently
    when some pair is significantly more robust one way at ``i`` and the other
    way at ``j``. reproduced: every two thresholds do; differs: some two do
    not, although some pair had at least ``power`` to show a reversal between
    them (the alternative: its discordant points split ``effect : 1 - effect``
    one way at ``i`` and the other way at ``j``; each test at the first Holm
    level ``alpha / (P T)``, which Holm never makes stricter; the power of
    both being significant bounded below by Bonferroni's inequality,
    ``rcurves.claims.verdicts.reversal_power``); inconclusive: no pair had.

    Returns ``(Verdict, {'level' (the first Holm level), 'sides' (P, T), 'separated':
    {(i, j): [pair, ...]}, 'power': {(i, j): (bound, pair)} (the best pair's power bound), 'reversed_pairs':
    [pair, ...]})``.
    """
    oa, ob = np.asarray(only_a), np.asarray(only_b)
    P, T = oa.shape
    level = alpha / max(1, P * T)
    sides = M.holm_sides(oa, ob, alpha) if P else np.zeros((0, T), np.int8)
    k = oa + ob
    separated, powered = {}, {}
    for i, j in itertools.combinations(range(T), 2):
        separated[(i, j)] = [pairs[p] for p in range(P) if sides[p, i] * sides[p, j] == -1]
        powered[(i, j)] = max(((reversal_power(k[p, [i, j]], level=level, effect=effect), pairs[p])
                               for p in range(P)), key=lambda t: t[0], default=(0.0, None))
    reversed_pairs = sorted({p for sep in separated.values() for p in sep})
    missing = [(i, j) for (i, j), sep in separated.items() if not sep]
    could = [ij for ij in missing if powered[ij][0] >= power]
    name = lambda ij: f"{thresholds[ij[0]]:g} / {thresholds[ij[1]]:g}"   # noqa: E731

    def best(ij):
        pw, pr = powered[ij]
        if pr is None:
            return f"{name(ij)}: no pair"
        p = pairs.index(pr)
        return (f"{name(ij)}: {pr[0]} / {pr[1]} ({k[p, ij[0]]} and {k[p, ij[1]]} discordant points), power at least "
                f"{pw:.2f}")

    alt = (f"against a {effect:.3g} : {1 - effect:.3g} split of a pair's discordant points one way at one threshold "
           f"and the other way at the other, both tests at the first Holm level, Bonferroni's bound")
    test = (f"exact two-sided McNemar for each of the {P} pairs at each of the {T} thresholds, {M.holm_text(alpha)} "
            f"over the {P * T} tests (first level {level:.2g}); pairs ordered significantly one way at one threshold "
            f"and the other way at another: {len(reversed_pairs)} distinct; threshold pairs that order the models "
            f"differently: " + ", ".join(f"{name(ij)} ({len(sep)} pairs)" for ij, sep in separated.items())
            + (f"; power to show a reversal where none is significant ({alt}), best pair: "
               + "; ".join(best(ij) for ij in missing) if missing else ""))
    details = {"level": level, "sides": sides, "separated": separated, "power": powered,
               "reversed_pairs": reversed_pairs}
    if not missing:
        return Verdict("reproduced", test), details
    if could:
        shown = "; ".join(best(ij) for ij in could)
        return Verdict("differs", test, f"no pair of models is significantly reversed between "
                                        f"{', '.join(name(ij) for ij in could)}, although the test had power at "
                                        f"least {power:g} to show a reversal there ({shown}; {alt})"), details
    return Verdict("inconclusive", test, f"no pair of models is significantly reversed between "
                                         f"{', '.join(name(ij) for ij in missing)}, and no pair had power {power:g} "
                                         f"to show a reversal there ({'; '.join(best(ij) for ij in missing)}; {alt}): "
                                         f"a larger sample is needed"), details


def _every(verdicts):
    """A conjunction of effect claims decided as an intersection-union test: each at the same level, the worst
    verdict wins (``all_of``), and its p is the largest of theirs (all significant exactly when it is)."""
    v = all_of(*verdicts)
    return v._replace(p=max(float(x.p) for x in verdicts))


def subclaims(dists, thresholds, alpha=ALPHA, effect=EFFECT, power=POWER):
    """The paper's named statements on Table 1 (:data:`SUBCLAIMS`), each decided on its own, Holm over them.

    ``dists``: ``{role: (n,) distances}`` on the same points, with every role of :data:`ROBUST`;
    ``thresholds``: the three point-wise thresholds (the paper's 1/255, 4/255, 8/255). A statement "X more
    robust than Y at eps" is ``rcurves.claims.verdicts.paired_effect`` on the points broken within eps by
    one model only (one-sided exact McNemar; differs when significant the other way, or not significant
    although the test had ``power`` against a split ``effect`` of the discordant points; else
    inconclusive); "X the most (least) robust of the four" is the conjunction over the three others, an
    intersection-union test (:func:`_every`: its p the largest). The statements are decided together by
    ``rcurves.claims.verdicts.holm`` (family-wise ``alpha``).

    Returns one ``{'what', 'eps', 'subject', 'others', 'sense', 'errors' {role: robust error}, 'counts'
    [(better, worse, broken by worse only, broken by better only)], 'verdict'}`` per statement.
    """
    from rcurves.curves import robust_error

    rules, rows = [], []
    for what, j, subject, others, sense, words in SUBCLAIMS:
        e = float(thresholds[j])
        comps = [(subject, o) if sense == "most" else (o, subject) for o in others]
        counts = []
        for better, worse in comps:
            ob_, ow_, _ = mcnemar_scan(dists[better], dists[worse], np.array([e]))
            counts.append((better, worse, int(ow_[0]), int(ob_[0])))
        rules.append(lambda lv, counts=counts, e=e: _every([
            paired_effect(nf, na, alpha=lv, effect=effect, power=power,
                          what=f"{b} more robust than {w} at {e:g}") for b, w, nf, na in counts]))
        rows.append({"what": what, "words": words, "eps": e, "index": j, "subject": subject, "others": others,
                     "sense": sense,
                     "errors": {r: float(robust_error(dists[r], e)) for r in (subject,) + tuple(others)},
                     "counts": counts})
    for r, v in zip(rows, holm(rules, alpha=alpha, family="000 Table 1's named statements")):
        r["verdict"] = v
    return rows


def table1(dists, thresholds, alpha=ALPHA):
    """Robust errors with ranks at the thresholds, and :func:`orderings_verdict`.
    Returns ``(table {eps: {model: {'robust_error', 'rank'}}}, distinct rankings, Verdict, details, pairs)``."""
    from rcurves.curves import robust_error
    from rcurves.pipeline.report import ranks

    labels = list(dists)
    table = {}
    for e in thresholds:
        errs = [float(robust_error(dists[m], e)) for m in labels]
        table[f"{e:g}"] = {m: {"robust_error": v, "rank": r} for m, v, r in zip(labels, errs, ranks(errs))}
    distinct = len({tuple(table[f"{e:g}"][m]["rank"] for m in labels) for e in thresholds})
    pairs, oa, ob = pointwise_tests(dists, thresholds)
    v, det = orderings_verdict(oa, ob, thresholds, pairs, alpha)
    return table, distinct, v, det, pairs


def figure2(dists, alpha=ALPHA):
    """Every pair's exact crossings and significant reversal, and ``ranking_changes`` (at least 2).
    Returns ``(crossings [{'a', 'b', 'eps', 'reversal'}], Verdict, the number of significant order changes)``."""
    from rcurves.curves import exact_curve_intersections

    labels = list(dists)
    pairs = list(itertools.combinations(labels, 2))
    cross, scans = [], []
    for a, b in pairs:
        da, db = dists[a], dists[b]
        cross.append({"a": a, "b": b, "eps": [float(e) for e in exact_curve_intersections(da, db)],
                      "reversal": significant_reversal(da, db, alpha=alpha, pairs=len(pairs))})
        scans.append(knot_scan(da, db)[1:])
    return (cross, ranking_changes(scans, alpha=alpha, at_least=2, what="model pairs", effect=EFFECT, power=POWER),
            order_changes(scans, alpha=alpha))


def kw_band_table1(dists, cert, kw, thresholds, det, pairs, alpha=ALPHA):
    """KW's robust error interval [attack, certified] at each threshold, and for every pair with KW reversed
    between two thresholds whether KW's better side stays significant with its certified radii
    (McNemar at the first Holm level, i.e. Bonferroni over the table's tests)."""
    from rcurves.curves import robust_error

    lo = {f"{e:g}": float(robust_error(dists[kw], e)) for e in thresholds}
    hi = {f"{e:g}": float(robust_error(cert, e)) for e in thresholds}
    level = det["level"]
    out = []
    for p, (a, b) in enumerate(pairs):
        if kw not in (a, b) or (a, b) not in det["reversed_pairs"]:
            continue
        other = b if a == kw else a
        sign = 1 if a == kw else -1
        kw_better = [j for j in range(len(thresholds)) if det["sides"][p, j] * sign > 0]
        held = []
        for j in kw_better:
            oa, ob, pv = mcnemar_scan(cert, dists[other], np.array([thresholds[j]]))
            held.append({"eps": thresholds[j], "only_kw": int(oa[0]), "only_other": int(ob[0]), "p": float(pv[0]),
                         "holds": bool(pv[0] < level and oa[0] < ob[0])})
        out.append({"other": other, "kw_better": held, "decided": any(h["holds"] for h in held)})
    return {"attack": lo, "certified": hi, "reversals": out}


def main(argv=None):
    args = parse_args(__doc__, "table1_fig2", argv)
    ev0, models, names = M.method_evaluation(args, MODELS)
    ev, l2info = with_linf_adversarial_l2(args, ev0, models)
    doc, text = ev.report()
    print(text)
    paths = ev.save(args.out, "MNIST: the paper's five methods and the PGD-AT family (000 Table 1 / Figure 2)")
    # the evaluation's own all-models plot repeats the two panels' figures below (which the report lists): drop it
    png = [p for p in paths if p.endswith(".png")]
    for p in png:
        os.remove(p)
    paths = [p for p in paths if p not in png]
    n = int(ev.data.y.shape[0])
    sample = evaluation_sample(args, ev)
    panels = {("paper", "linf"): [names[m] for m in M.LINF_PANEL if m in names],
              ("paper", "l2"): [names[m] for m in M.L2_PANEL if m in names],
              ("family", "linf"): [names[m] for m in FAMILY if m in names],
              ("family", "l2"): [names[m] for m in FAMILY if m in names]}
    kw = names.get(M.KW)
    cert = {}
    if kw is not None:
        for norm in ("linf", "l2"):
            cert[norm] = M.certified_distances(args, models[kw], ev.data.x, ev.data.y, norm, ev.distance(kw, norm))
    res = {}
    for (group, norm), labels in panels.items():
        thr = THRESHOLDS[group][norm]
        full = {m: ev.distance(m, norm) for m in labels}
        mask, counts = (M.standin_mask(ev, labels) if norm == "l2" else (np.zeros(n, bool), {}))

        def dec_t1(keep, full=full, thr=thr):
            return table1({m: d[keep] for m, d in full.items()}, thr)[2]

        def dec_f2(keep, full=full):
            return figure2({m: d[keep] for m, d in full.items()})[1]

        table, distinct, v1, det, pairs = table1(full, thr)
        cross, v2, n_changes = figure2(full)
        _, v1_wo = M.both_ways(dec_t1, mask)
        _, v2_wo = M.both_ways(dec_f2, mask)
        r = {"models": labels, "norm": norm, "thresholds": thr, "table": table, "distinct_rankings": distinct,
             "table1": (v1, det, pairs), "crossings": cross, "fig2": v2, "fig2_changes": n_changes,
             "standin": {"points": int(mask.sum()), "per_model": counts, "mask": mask,
                         "table1_without": v1_wo, "fig2_without": v2_wo}}
        if kw in labels and norm in cert:
            r["kw_attack"] = full[kw]
            r["kw_table1"] = kw_band_table1(full, cert[norm], kw, thr, det, pairs)
            r["kw_fig2"] = {o: dict(M.band_reversal(full[kw], cert[norm], full[o], pairs=len(pairs)),
                                    position=M.band_position(full[kw], cert[norm], full[o]))
                            for o in labels if o != kw}
        res[(group, norm)] = r

    def budget(labels):
        return M.budget_text(models, ev, labels)

    # the paper's named statements on Table 1, each its own row (the l_inf panel's four robust models)
    label_of = {M.ROLE[zn]: names[zn] for zn in M.LINF_PANEL if zn in names}
    statements = (subclaims({rl: ev.distance(label_of[rl], "linf") for rl in ROBUST}, THRESHOLDS["paper"]["linf"])
                  if all(rl in label_of for rl in ROBUST) else [])
    claims = ([_table1_claim("paper", "linf", res[("paper", "linf")], sample, names, kw, budget)]
              + [_statement_claim(st, sample, label_of, budget) for st in statements]
              + [_table1_claim("paper", "l2", res[("paper", "l2")], sample, names, kw, budget)]
              + [_fig2_claim("paper", norm, res[("paper", norm)], sample, names, kw, cert, budget)
                 for norm in ("linf", "l2")]
              + [_table1_claim("family", norm, res[("family", norm)], sample, names, kw, budget)
                 for norm in ("linf", "l2")]
              + [_fig2_claim("family", norm, res[("family", norm)], sample, names, kw, cert, budget)
                 for norm in ("linf", "l2")])
    role = {lab: M.ROLE[zn] for zn, lab in names.items() if zn in M.ROLE}
    figures = [_plot(ev, res, "paper", kw, cert, args.out, sample, role),
               _plot(ev, res, "family", None, {}, args.out, sample, {})]

    zoo_info = {m: {"zoo": models[m].name, "role": M.ROLE.get(M.zoo_name(models[m])),
                    "test_accuracy": models[m].metrics.get("test_accuracy"),
                    "train_seconds": models[m].metrics.get("train_seconds")} for m in ev.labels}
    payload = {"n": n, "sample": sample, "thresholds": THRESHOLDS, "zoo": zoo_info,
               "table1_statements": [{"what": st["what"], "eps": st["eps"], "errors": st["errors"],
                                      "counts": [list(c) for c in st["counts"]], "verdict": st["verdict"].verdict}
                                     for st in statements],
               "panels": {f"{g}-{nm}": _panel_payload(r) for (g, nm), r in res.items()},
               "certified": ({"model": kw, "method": M.CERTIFY_METHOD, "radius": cert,
                              "median_ratio": {nm: _median_ratio(ev.distance(kw, nm), c) for nm, c in cert.items()}}
                             if kw else None),
               "median_distance": doc["median_distance"], "clean_accuracy": ev.accuracy,
               "cw_smaller_fraction": doc.get("cw_smaller_fraction"), "evaluation_seconds": ev.seconds,
               "l2_bounded_by_linf_adversarials": l2info,
               "files": [os.path.basename(p) for p in paths]}
    write_result(args, payload, claims, figures)
    return payload


def _median_ratio(att, cert):
    """Median attack / certified distance over the points with both finite and positive (nan: none)."""
    ok = np.isfinite(att) & np.isfinite(cert) & (att > 0) & (cert > 0)
    return float(np.median(att[ok] / cert[ok])) if ok.any() else float("nan")


def _panel_payload(r):
    v1, det, pairs = r["table1"]
    thr = r["thresholds"]
    out = {"models": r["models"], "norm": r["norm"], "thresholds": thr, "table": r["table"],
           "distinct_rankings": r["distinct_rankings"],
           "table1_tests": {"level": det["level"], "sides": det["sides"], "pairs": [list(p) for p in pairs],
                            "reversed_pairs": [list(p) for p in det["reversed_pairs"]],
                            "separated": {f"{thr[i]:g}/{thr[j]:g}": [list(p) for p in s]
                                          for (i, j), s in det["separated"].items()}},
           "table1_verdict": v1.verdict, "fig2_verdict": r["fig2"].verdict, "crossings": r["crossings"],
           "standin": {"points": r["standin"]["points"], "per_model": r["standin"]["per_model"],
                       "indices": np.flatnonzero(r["standin"]["mask"]),
                       "table1_without": _v(r["standin"]["table1_without"]),
                       "fig2_without": _v(r["standin"]["fig2_without"])}}
    for k in ("kw_table1", "kw_fig2"):
        if k in r:
            out[k] = r[k]
    return out


def _v(v):
    return None if v is None else {"verdict": v.verdict, "test": v.test, "why": v.why}


def _roles(labels, names):
    inv = {lab: zn for zn, lab in names.items()}
    return ", ".join(f"{M.ROLE.get(inv.get(m), m)}: {m}" for m in labels)


def paper_orderings_differ():
    """How many pairs of the paper's three thresholds order its five methods differently (its Table 1's numbers;
    ties count as an order of their own)."""
    order = {e: tuple(sorted(row, key=lambda m: (row[m], m))) for e, row in PAPER_TABLE1.items()}
    return sum(order[a] != order[b] for a, b in itertools.combinations(order, 2)), len(order) * (len(order) - 1) // 2


def _table1_claim(group, norm, r, sample, names, kw, budget):
    v1, det, pairs = r["table1"]
    nm = NORM_NAME[norm]
    thr = r["thresholds"]
    labels = r["models"]
    if group == "paper" and norm == "linf":
        item, kind = "Table 1 (l_inf)", "paper"
        statement = ("000 Table 1 (CIFAR-10; ST, AT, KW, MMR+AT, MMR-UNIV; l_inf robust test error at 1/255, 4/255, "
                     "8/255): each of the three point-wise measures results in a different ordering of the models "
                     "(among the robust models AT is the most robust at 1/255, KW is more robust than AT at 4/255, "
                     "and at 8/255 MMR-UNIV is preferable to AT, which is the least robust).")
        models_text = (f"the paper's five methods ({_roles(labels, names)}; KW's role: CROWN-IBP certified training); "
                       f"l_inf robust error at {', '.join(f'{e:g}' for e in thr)} (0.5x, 1x, 2x the training eps 0.1, "
                       f"fixed in advance)")
    elif group == "paper":
        item, kind = "Table 1 (l_2)", "beyond"
        statement = ("Not in the paper (its Table 1 is l_inf only; Figure 2's right panel shows l_2 curves of models "
                     "trained for l_2): do three l_2 point-wise measures, at 1.0, 1.5 and 2.0, order the paper's five "
                     "methods differently as well?")
        models_text = (f"the paper's five methods, trained for l_2 where the zoo has it ({_roles(labels, names)}); l_2 "
                       f"robust error at {', '.join(f'{e:g}' for e in thr)} (fixed in advance)")
    else:
        item, kind = f"Table 1 ({nm}, PGD-AT family)", "beyond"
        statement = (f"Beyond the paper: do three {nm} point-wise measures ({', '.join(f'{e:g}' for e in thr)}) "
                     f"order differently a set of models that is one family of training methods (PGD adversarial "
                     f"training at several eps, with ST and ST with augmentations), not the paper's five methods? "
                     f"The paper's claim is about different methods; this row is not a test of it.")
        models_text = (f"one family: {', '.join(labels)}; {nm} robust error at {', '.join(f'{e:g}' for e in thr)} "
                       f"(fixed in advance)")
    rp = det["reversed_pairs"]

    def pair_text(pair):
        i = pairs.index(pair)
        sides = det["sides"][i]
        a, b = pair
        return f"{a} / {b} (" + ", ".join(f"{thr[j]:g}: {(a if s > 0 else b) if s else '-'}"
                                          for j, s in enumerate(sides)) + ")"

    ranks_text = "; ".join(f"eps {e}: " + ", ".join(f"{m} {v['robust_error']:.3f} [{v['rank']}]"
                                                    for m, v in row.items())
                           for e, row in r["table"].items())
    ours = (f"{sample}; {models_text}: {r['distinct_rankings']} distinct rankings (ties included); {len(rp)} distinct "
            f"pairs significantly reversed between two of the thresholds"
            + (": " + "; ".join(pair_text(p) for p in rp[:6]) + (f" (+{len(rp) - 6})" if len(rp) > 6 else "")
               if rp else ""))
    if "kw_table1" in r:
        b = r["kw_table1"]
        ours += (f"; {kw}'s robust error in its band [attack, certified by {M.CERTIFY_METHOD.upper()} "
                 f"(rcurves.certify.certified_radius)]: "
                 + ", ".join(f"{e}: [{b['attack'][e]:.3f}, {b['certified'][e]:.3f}]" for e in b["attack"]))
        if b["reversals"]:
            ours += ("; reversals with KW decided by the band (KW's better side significant with its certified "
                     "radii too, at the first Holm level): "
                     + "; ".join(f"{kw} / {x['other']}: " + ("yes" if x["decided"] else "no") + " ("
                                 + ", ".join(f"{h['eps']:g}: {h['only_kw']} vs {h['only_other']}, p = {h['p']:.1e}"
                                             for h in x["kw_better"]) + ")" for x in b["reversals"]))
        else:
            ours += "; no reversal with KW to decide by its band"
    if norm == "l2":
        ours += "; " + M.standin_text(r["standin"]["mask"], r["standin"]["per_model"], v1,
                                      r["standin"]["table1_without"])
    ours += f". Robust errors [rank]: {ranks_text}"
    n_sep, n_ij = sum(bool(sep) for sep in det["separated"].values()), len(det["separated"])
    if group == "paper" and norm == "linf":
        short = "each of 3 l_inf eps orders the 5 methods differently"
        paper_value = "{} of {} eps pairs differ".format(*paper_orderings_differ())
    else:
        short = (f"each of 3 l_2 eps orders the 5 methods differently" if group == "paper"
                 else f"each of 3 {nm} eps orders the PGD-AT family differently")
        paper_value = "not in the paper"
    return claim("000", item, statement, ours, v1, budget(labels) if group == "paper" else "", kind=kind,
                 short=short, paper_value=paper_value, ours_value=f"{n_sep} of {n_ij} eps pairs differ")


def _fmt_pair(errors, subject, other, digits):
    return f"{ABBREV[subject]} {errors[subject]:.{digits}f}; {ABBREV[other]} {errors[other]:.{digits}f}"


def _statement_claim(st, sample, label_of, budget):
    """One of the paper's named statements on Table 1 (:func:`subclaims`), as a row."""
    paper_eps = list(PAPER_TABLE1)[st["index"]]
    paper = PAPER_TABLE1[paper_eps]
    subject, others, sense = st["subject"], st["others"], st["sense"]
    pick = min if sense == "most" else max
    # the other model nearest to refuting the statement: the most robust other for 'most', the least for 'least'
    p_other = pick(others, key=lambda o: paper[o])
    o_other = pick(others, key=lambda o: st["errors"][o])
    where = ["smallest", "middle", "largest"][st["index"]]
    statement = (f"000 Section 3.2 on Table 1 (CIFAR-10, l_inf robust test error): at {paper_eps} (the {where} of its "
                 f"three thresholds) {st['words']}; the table: " + ", ".join(f"{o} {paper[o]:.2f}" for o in
                                                                           (subject,) + tuple(others))
                 + f". Ours: the same statement at {st['eps']:g}, the {where} of our thresholds (0.5x, 1x, 2x the "
                   f"training eps 0.1).")
    ours = (f"{sample}; " + "; ".join(
        f"{b} ({label_of[b]}) vs {w} ({label_of[w]}) at {st['eps']:g}: robust error {st['errors'][b]:.3f} vs "
        f"{st['errors'][w]:.3f}, {nf} points broken by {w} only, {na} by {b} only" for b, w, nf, na in st["counts"]))
    labels = [label_of[rl] for rl in (subject,) + tuple(others)]
    short = st["what"]
    return claim("000", f"Table 1 (l_inf): {short}", statement, ours, st["verdict"], budget(labels), kind="paper",
                 short=short, paper_value=_fmt_pair(paper, subject, p_other, 2),
                 ours_value=_fmt_pair(st["errors"], subject, o_other, 3))


def _fig2_claim(group, norm, r, sample, names, kw, cert, budget):
    nm = NORM_NAME[norm]
    labels = r["models"]
    cs = [c for c in r["crossings"] if c["eps"]]
    sig = [c for c in cs if c["reversal"]["found"]]
    v = r["fig2"]
    if group == "paper":
        item, kind = f"Figure 2 ({nm})", "paper"
        side = "left" if norm == "linf" else "right"
        statement = (f"000 Figure 2, {side} (CIFAR-10; ST, AT, KW, MMR+AT, MMR-UNIV, trained for {nm}): the {nm} "
                     f"robustness curves intersect multiple times, i.e. the ranking of the models changes with the "
                     f"threshold.")
        models_text = f"the paper's five methods ({_roles(labels, names)})"
    else:
        item, kind = f"Figure 2 ({nm}, PGD-AT family)", "beyond"
        statement = (f"Beyond the paper: do the {nm} robustness curves of one family of training methods (PGD "
                     f"adversarial training at several eps, with ST and ST with augmentations) intersect "
                     f"significantly, at least twice? The paper's Figure 2 compares different methods; this row is "
                     f"not a test of it.")
        models_text = f"one family: {', '.join(labels)}"

    def rev_text(c):
        q = c["reversal"]
        return (f"{c['a']} more robust at {fmt(q['a_better']['eps'], 3)} ({q['a_better']['only_a']} vs "
                f"{q['a_better']['only_b']} points broken by one model only, p = {q['a_better']['p']:.1e}), "
                f"{c['b']} at {fmt(q['b_better']['eps'], 3)} ({q['b_better']['only_b']} vs "
                f"{q['b_better']['only_a']}, p = {q['b_better']['p']:.1e})")

    listed = "; ".join(f"{c['a']} / {c['b']} at {', '.join(fmt(e, 3) for e in c['eps'][:3])}"
                       + (f" (+{len(c['eps']) - 3})" if len(c['eps']) > 3 else "") for c in cs[:12])
    ours = (f"{sample}; {models_text}, {len(labels)} in the {nm} panel: {len(cs)} of {len(r['crossings'])} model "
            f"pairs cross ({sum(len(c['eps']) for c in cs)} exact crossings, which count only where significant); "
            f"{len(sig)} pairs significantly reversed"
            + (": " + "; ".join(rev_text(c) for c in sig[:6]) if sig else ""))
    if "kw_fig2" in r:
        kwr = r["kw_fig2"]
        rc = cert[norm]
        with_kw = [o for o, b in kwr.items() if b["attack_found"]]
        decided = [o for o, b in kwr.items() if b["found"]]
        ours += (f"; KW's band ({kw}: certified radii by {M.CERTIFY_METHOD.upper()}, rcurves.certify.certified_radius "
                 f"searched inside [0, attack distance], as the lower bound of each distance; the attack's as the "
                 f"upper) on the same {rc.size} points, median attack / certified distance "
                 f"{fmt(_median_ratio(r['kw_attack'], rc), 3)}; certified robust error at the largest Table 1 "
                 f"threshold {r['thresholds'][-1]:g}: {float(np.mean(rc <= r['thresholds'][-1])):.3f}; of the "
                 f"{len(with_kw)} significant reversals with KW, {len(decided)} lie outside the band (KW's side "
                 f"significant with its certified radii too, the other's with KW's attack distances)"
                 + (": " + "; ".join(f"{kw} / {o} (KW more robust at {fmt(kwr[o]['certified_better']['eps'], 3)} "
                                     f"even certified, p = {kwr[o]['certified_better']['p']:.1e})" for o in decided)
                    if decided else "")
                 + (f"; not decided by the band: {', '.join(o for o in with_kw if o not in decided)}"
                    if len(decided) < len(with_kw) else "")
                 + "; the other curves lie above KW's band (KW more robust for any curve in it) on "
                 + ", ".join(f"{o} {b['position']['above']:.0%}" for o, b in kwr.items())
                 + " of the range")
    if norm == "l2":
        ours += "; " + M.standin_text(r["standin"]["mask"], r["standin"]["per_model"], v, r["standin"]["fig2_without"])
    ours += f". Exact crossings: {listed or 'none'}{' ...' if len(cs) > 12 else ''}"
    short = (f"{nm} curves of the 5 methods cross: the ranking changes (>= 2)" if group == "paper"
             else f"{nm} curves of the PGD-AT family cross significantly (>= 2)")
    return claim("000", item, statement, ours, v, budget(labels) if group == "paper" else "", kind=kind, short=short,
                 paper_value="multiple crossings" if group == "paper" else "not in the paper",
                 ours_value=f"{r['fig2_changes']} significant changes")


def _plot(ev, res, group, kw, cert, out, sample, role):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rcurves.curves import robustness_curve
    from rcurves.plotting import step_curve

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3))
    n = int(ev.data.y.shape[0])
    for ax, norm in zip(axes, ("linf", "l2")):
        r = res[(group, norm)]
        thr = r["thresholds"]
        fin = np.concatenate([ev.distance(m, norm)[np.isfinite(ev.distance(m, norm))] for m in r["models"]]
                             + [np.zeros(1)])
        hi = max(1.3 * thr[-1], float(np.quantile(fin, 0.99)) * 1.05 if fin.size > 1 else 1.0)
        for m in r["models"]:
            e, v = step_curve(ev.distance(m, norm), hi)
            line = ax.step(e, v, where="post", label=f"{role[m]}: {m}" if m in role else m)[0]
            if m == kw and norm in cert:
                grid = np.linspace(0.0, hi, 1200)
                lo = np.asarray(robustness_curve(ev.distance(m, norm), grid), np.float64)
                up = np.asarray(robustness_curve(cert[norm], grid), np.float64)
                ax.fill_between(grid, lo, up, step="post", color=line.get_color(), alpha=0.2,
                                label=f"{m}: band (attack .. certified {M.CERTIFY_METHOD.upper()})")
        for t in thr:
            ax.axvline(t, color="k", ls="--", lw=0.8)
        ax.set_xlim(0, hi)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(f"{NORM_NAME[norm]} perturbation size eps")
        ax.set_ylabel("robust error")
        ax.set_title(f"{NORM_NAME[norm]} robustness curves" + (" (models trained for l_2)" if group == "paper"
                                                               and norm == "l2" else ""))
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    name = "fig2_curves.png" if group == "paper" else "fig2_family_curves.png"
    fig.savefig(os.path.join(out, name), dpi=120)
    plt.close(fig)
    r1, r2 = res[(group, "linf")], res[(group, "l2")]
    if group == "paper":
        cap = (f"000 Figure 2 on MNIST: l_inf (left) and l_2 (right) robustness curves (robust error against "
               f"perturbation size, exact step curves of the attacks' per-point distances) of the paper's five "
               f"methods as zoo C.1 CNNs: left {', '.join(r1['models'])} (trained for l_inf), right "
               f"{', '.join(r2['models'])} (trained for l_2 where the zoo has one). Shaded: the band of the KW-role "
               f"model {kw or '-'} between its attack curve and its {M.CERTIFY_METHOD.upper()}-certified curve. "
               f"Dashed: Table 1's thresholds ({', '.join(f'{t:g}' for t in r1['thresholds'])}; "
               f"{', '.join(f'{t:g}' for t in r2['thresholds'])}). Points: {sample}; n = {n}.")
    else:
        cap = (f"Beyond the paper: l_inf (left) and l_2 (right) robustness curves of one family of models (PGD "
               f"adversarial training at several eps, ST and ST with augmentations; zoo C.1 CNNs: "
               f"{', '.join(r1['models'])}). Dashed: the family rows' thresholds. Points: {sample}; n = {n}.")
    return name, cap


if __name__ == "__main__":
    main()
