"""Paper 000, Table 1 and Figure 2: point-wise measures disagree; robustness curves show why.

Ten CNNs of the zoo on full MNIST, the C.1 CNN of 000 trained on the 60,000
training images (ST; ST with shift, noise, cutout or mixup augmentation; l_inf
AT at eps 0.1, 0.2, 0.3, 0.4; l_2 AT at 1.5; recipes in ``rcurves.models.zoo``),
evaluated on the shared held-out sample of ``shared.zoo_evaluation``: 2,000
random test images (``default_rng(seed)``), the same points for every model.
Per point the minimal adversarial distance in l_inf (the default radius
search: 4 targeted APGD lanes x 5 steps x 8 rounds + 54 FMN steps + a 10-pass
Jacobian ranking the targets) and l_2 (the same, and Carlini-Wagner with 10
constants x 100 steps, keeping the smaller verified distance).

Table 1: the robust error of every model at three point-wise thresholds per
norm, fixed before looking at the results (l_inf 0.1, 0.2, 0.3: MNIST's
canonical thresholds; l_2 1.0, 1.5, 2.0), with ranks. The paper's claim is that
the three measures give three *different* orderings. Ours: at each threshold
the exact two-sided McNemar test on the same points for every pair of models
(level 5 % / (3 thresholds x 45 pairs)); two thresholds order the models
differently when some pair is significantly one way at one and significantly
the other way at the other; reproduced when every two of the three thresholds
do (:func:`orderings_verdict`).

Figure 2: the full curves and every exact crossing
(``rcurves.exact_curve_intersections``). A crossing means a ranking change
only when each model is significantly more robust than the other somewhere:
McNemar at every distinct finite distance of either model, Bonferroni over
those thresholds and the 45 pairs (``rcurves.claims.compare.significant_reversal``,
``rcurves.claims.verdicts.ranking_changes``); the paper's "multiple intersections"
needs at least two such changes.

The paper's setting differs: CIFAR-10, five models published by others (ST,
AT, KW, MMR+AT, MMR-UNIV), the full test set; its Figure 2 shows l_inf-trained
models in the l_inf panel and l_2-trained ones in the l_2 panel, ours all ten
in both.

    python experiments/000_global_comparison/table1_fig2.py --out results/experiments/table1_fig2
"""
from __future__ import annotations

import dataclasses
import itertools
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
from shared import evaluation_sample, l2_repair_text, parse_args, with_linf_adversarial_l2, write_result, zoo_evaluation

from rcurves.claims.compare import knot_scan, mcnemar_scan, significant_reversal  # noqa: E402
from rcurves.claims.record import claim, fmt
from rcurves.claims.verdicts import Verdict, ranking_changes, significant_sides  # noqa: E402

MODELS = ("mnist-full-cnn-st", "mnist-full-cnn-st-shift", "mnist-full-cnn-st-noise", "mnist-full-cnn-st-cutout",
          "mnist-full-cnn-st-mixup", "mnist-full-cnn-at-linf-0.1", "mnist-full-cnn-at-linf-0.2",
          "mnist-full-cnn-at-linf-0.3", "mnist-full-cnn-at-linf-0.4", "mnist-full-cnn-at-l2-1.5")
THRESHOLDS = {"linf": (0.1, 0.2, 0.3), "l2": (1.0, 1.5, 2.0)}
ALPHA = 0.05


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


def orderings_verdict(only_a, only_b, thresholds, pairs, alpha=ALPHA):
    """"Each point-wise measure orders the models differently" (000 Table 1), on paired counts.

    ``only_a, only_b``: ``(P, T)`` discordant counts of ``P`` model pairs at ``T``
    thresholds. Level ``alpha / (T * P)`` (Bonferroni over every test made).
    Thresholds ``i < j`` order the models differently when some pair is
    significantly more robust one way at ``i`` and the other way at ``j``.
    reproduced: every two thresholds do; differs: some two do not, although
    some pair had enough discordant points at both to be significant there;
    inconclusive: no pair could have reached the level at both.

    Returns ``(Verdict, {'level', 'sides' (P, T), 'separated': {(i, j): [pair, ...]},
    'reversed_pairs': [pair, ...]})``.
    """
    oa, ob = np.asarray(only_a), np.asarray(only_b)
    P, T = oa.shape
    level = alpha / max(1, P * T)
    sides = np.stack([significant_sides(oa[p], ob[p], level=level) for p in range(P)]) if P else np.zeros((0, T))
    need = int(np.ceil(np.log2(2.0 / level)))          # 2 * 2^-k < level: k discordant points at least
    reachable = (oa + ob) >= need
    separated, blocked = {}, []
    for i, j in itertools.combinations(range(T), 2):
        sep = [pairs[p] for p in range(P) if sides[p, i] * sides[p, j] == -1]
        separated[(i, j)] = sep
        if not sep and not (reachable[:, i] & reachable[:, j]).any():
            blocked.append((i, j))
    reversed_pairs = sorted({p for sep in separated.values() for p in sep})
    missing = [(i, j) for (i, j), sep in separated.items() if not sep]
    name = lambda ij: f"{thresholds[ij[0]]:g} / {thresholds[ij[1]]:g}"   # noqa: E731
    test = (f"exact two-sided McNemar for each of the {P} pairs at each of the {T} thresholds, level {alpha:g} / "
            f"{P * T} = {level:.2g}; pairs ordered significantly one way at one threshold and the other way at "
            f"another: {len(reversed_pairs)} distinct; threshold pairs that order the models differently: "
            + ", ".join(f"{name(ij)} ({len(sep)} pairs)" for ij, sep in separated.items()))
    details = {"level": level, "sides": sides, "separated": separated, "reversed_pairs": reversed_pairs}
    if not missing:
        return Verdict("reproduced", test), details
    if len(blocked) == len(missing):
        return Verdict("inconclusive", test, f"at {', '.join(name(ij) for ij in missing)} no pair had "
                                             f"{need} discordant points at both thresholds, the fewest that can "
                                             f"reach {level:.2g}: a larger sample is needed"), details
    return Verdict("differs", test, f"no pair of models is significantly reversed between "
                                    f"{', '.join(name(ij) for ij in missing)}: those point-wise measures give the "
                                    f"same ordering up to sampling noise"), details


def main(argv=None):
    from rcurves.pipeline.report import ranks

    args = parse_args(__doc__, "table1_fig2", argv)
    ev, models = zoo_evaluation(args, MODELS, norms=("linf", "l2"))
    ev, l2info = with_linf_adversarial_l2(args, ev, models)
    ev = dataclasses.replace(ev, thresholds={k: tuple(v) for k, v in THRESHOLDS.items()})
    labels = list(ev.labels)
    npairs = len(labels) * (len(labels) - 1) // 2
    sample = evaluation_sample(args, ev)
    table, orderings, t1 = {}, {}, {}
    for norm, thr in THRESHOLDS.items():
        table[norm] = {}
        for e in thr:
            errs = [float(ev.robust_error(m, norm, e)) for m in labels]
            table[norm][f"{e:g}"] = {m: {"robust_error": v, "rank": r} for m, v, r in zip(labels, errs, ranks(errs))}
        orderings[norm] = len({tuple(table[norm][f"{e:g}"][m]["rank"] for m in labels) for e in thr})
        pairs, oa, ob = pointwise_tests({m: ev.distance(m, norm) for m in labels}, thr)
        t1[norm] = orderings_verdict(oa, ob, thr, pairs)
    crossings, scans = {}, {}
    for norm in THRESHOLDS:
        crossings[norm], scans[norm] = [], []
        for flip in ev.flips(norm):
            da, db = ev.distance(flip["a"], norm), ev.distance(flip["b"], norm)
            crossings[norm].append(dict(flip, reversal=significant_reversal(da, db, alpha=ALPHA, pairs=npairs)))
            _, sa, sb = knot_scan(da, db)
            scans[norm].append((sa, sb))
    doc, text = ev.report()
    print(text)
    paths = ev.save(args.out, "MNIST: ST vs adversarial training (000 Table 1 / Figure 2)")
    n = int(ev.data.y.shape[0])
    setting = f"{sample}; models {', '.join(labels)}"
    setting_norm = {"linf": setting, "l2": f"{setting}; {l2_repair_text(l2info)}"}

    def ranks_text(norm):
        return "; ".join(f"eps {e}: " + ", ".join(f"{m} {v['robust_error']:.3f} [{v['rank']}]" for m, v in row.items())
                         for e, row in table[norm].items())

    def pair_text(norm, pair):
        a, b = pair
        i = [k for k, p in enumerate(itertools.combinations(labels, 2)) if p == pair][0]
        sides = t1[norm][1]["sides"][i]
        thr = THRESHOLDS[norm]
        more = [(a if s > 0 else b) for s in sides]
        return f"{a} / {b} (" + ", ".join(f"{thr[j]:g}: {more[j] if s else '-'}" for j, s in enumerate(sides)) + ")"

    claims = []
    statements = {
        "linf": ("000 Table 1 (CIFAR-10; ST, AT, KW, MMR+AT, MMR-UNIV; l_inf robust test error at 1/255, 4/255, "
                 "8/255): each of the three point-wise measures results in a different ordering of the models "
                 "(among the robust models AT is the most robust at 1/255, KW is more robust than AT at 4/255, "
                 "and at 8/255 MMR-UNIV is preferable to AT, which is the least robust).", "paper"),
        "l2": ("Not in the paper (its Table 1 is l_inf only; Figure 2's right panel shows l_2 curves): do three "
               "l_2 point-wise measures, at 1.0, 1.5 and 2.0, order the models differently as well?", "beyond"),
    }
    for norm, name in (("linf", "l_inf"), ("l2", "l_2")):
        verdict, det = t1[norm]
        rp = det["reversed_pairs"]
        claims.append(claim(
            "000", f"Table 1 ({name})", statements[norm][0],
            f"{setting_norm[norm]}; {name} robust error at {', '.join(f'{e:g}' for e in THRESHOLDS[norm])} (fixed in advance): "
            f"{orderings[norm]} distinct rankings (ties included); {len(rp)} distinct pairs significantly reversed "
            f"between two of the thresholds" + (": " + "; ".join(pair_text(norm, p) for p in rp[:6])
                                                 + (f" (+{len(rp) - 6})" if len(rp) > 6 else "") if rp else "")
            + f". Robust errors [rank]: {ranks_text(norm)}",
            verdict, kind=statements[norm][1]))

    fig2_statement = {
        "linf": ("000 Figure 2, left (CIFAR-10, models trained for l_inf): the l_inf robustness curves intersect "
                 "multiple times, i.e. the ranking of the models changes with the threshold.", "paper"),
        "l2": ("000 Figure 2, right (CIFAR-10, models trained for l_2): the l_2 robustness curves intersect "
               "multiple times, i.e. the ranking of the models changes with the threshold.", "paper"),
    }
    for norm, name in (("linf", "l_inf"), ("l2", "l_2")):
        cs = [c for c in crossings[norm] if c["eps"]]
        sig = [c for c in cs if c["reversal"]["found"]]
        verdict = ranking_changes(scans[norm], alpha=ALPHA, at_least=2, what="model pairs")
        listed = "; ".join(f"{c['a']} / {c['b']} at {', '.join(fmt(e, 3) for e in c['eps'][:3])}"
                           + (f" (+{len(c['eps']) - 3})" if len(c['eps']) > 3 else "") for c in cs[:12])

        def rev_text(c):
            r = c["reversal"]
            return (f"{c['a']} more robust at {fmt(r['a_better']['eps'], 3)} ({r['a_better']['only_a']} vs "
                    f"{r['a_better']['only_b']} points broken by one model only, p = {r['a_better']['p']:.1e}), "
                    f"{c['b']} at {fmt(r['b_better']['eps'], 3)} ({r['b_better']['only_b']} vs "
                    f"{r['b_better']['only_a']}, p = {r['b_better']['p']:.1e})")

        claims.append(claim(
            "000", f"Figure 2 ({name})", fig2_statement[norm][0],
            f"{setting_norm[norm]}, all {len(labels)} in the {name} panel: {len(cs)} of {len(crossings[norm])} model pairs cross "
            f"({sum(len(c['eps']) for c in cs)} exact crossings, which count only where significant); "
            f"{len(sig)} pairs significantly reversed" + (": " + "; ".join(rev_text(c) for c in sig[:6]) if sig else "")
            + f". Exact crossings: {listed or 'none'}{' ...' if len(cs) > 12 else ''}",
            verdict, kind=fig2_statement[norm][1]))
    zoo_info = {m: {"zoo": models[m].name, "test_accuracy": models[m].metrics.get("test_accuracy"),
                    "train_seconds": models[m].metrics.get("train_seconds")} for m in labels}
    re_train_eps = {}
    for m in labels:
        tr = models[m].entry.train
        if tr.method == "at":
            re_train_eps[m] = {"norm": tr.norm, "eps": tr.eps, "robust_error": float(ev.robust_error(m, tr.norm, tr.eps))}
    payload = {"n": n, "sample": sample, "thresholds": THRESHOLDS, "table": table, "distinct_rankings": orderings,
               "table1_tests": {norm: {"level": d["level"], "sides": d["sides"],
                                       "pairs": [list(p) for p in itertools.combinations(labels, 2)],
                                       "reversed_pairs": [list(p) for p in d["reversed_pairs"]],
                                       "separated": {f"{THRESHOLDS[norm][i]:g}/{THRESHOLDS[norm][j]:g}": [list(p) for p in s]
                                                     for (i, j), s in d["separated"].items()}}
                                for norm, (_, d) in t1.items()},
               "crossings": crossings, "zoo": zoo_info, "robust_error_at_training_eps": re_train_eps,
               "median_distance": doc["median_distance"], "clean_accuracy": ev.accuracy,
               "cw_smaller_fraction": doc.get("cw_smaller_fraction"), "evaluation_seconds": ev.seconds,
               "l2_bounded_by_linf_adversarials": l2info}
    write_result(args, payload, claims, [p for p in paths if p.endswith(".png")])
    return payload


if __name__ == "__main__":
    main()
