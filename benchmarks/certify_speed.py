"""Certified radii against attack distances: the band around the true curve, and the time per point.

For each zoo model (standard and adversarially trained, digits and MNIST),
on ``--n`` uniformly random held-out points (``_common.sample_points``, seed
``--seed``; the same points for every method), in l_inf and l_2:

* ``attacks.minimal_distance`` (default schedule) gives each point's upper
  bound ``u`` (an adversarial, re-checked);
* ``certify.certified_radius`` with CROWN (and CROWN-IBP, IBP for the MLPs;
  alpha-CROWN with ``--alpha``) inside ``[0, u]`` gives the lower bound ``l``;
  on the MLPs, branch and bound (``method='bab'``: a frontier of subdomains,
  at most ``--budget`` bounded per certification) on the first ``--bab-n``
  of those points (default 100 in l_inf, ``--bab-n-l2`` in l_2), one timed
  call (its compilation included), with CROWN's median ratio on the same
  points beside it (``crown_median_ratio_same_points``) and the median
  radius gain over CROWN; on the CNNs (thousands of hidden units, each
  subdomain a full CROWN pass) on ``--bab-n-cnn`` points in l_inf with
  ``--budget-cnn`` subdomains;
* the band: ``certify.band_summary(u, l, eps)`` over ``eps`` in
  ``[0, max u]``: its area (the mean bracket width, in units of eps), the
  fraction of points whose bracket is closed within 1%, and the median of
  ``u / l`` over correctly classified points (target: <= 2 on the AT models);
  mean and median ``u`` and ``l``, to set beside the published numbers for
  the C.1 CNN on MNIST (Croce, Andriushchenko & Hein 2019, quoted in issue 17:
  CROWN radius 0.039 vs PGD 0.073 normally trained, 0.086 vs 0.163
  PGD-trained);
* time per point of each bound and of the attack, timed interleaved in this
  process (``_common.time_interleaved``, ``--repeats`` rounds): wall and
  process CPU time (all threads), and the ratio to the attack's time in the
  same round. Targets (2 cores): CROWN <= 20 ms per point for the MLP
  784-100-100-10, <= 0.5 s for the C.1 CNN. On a shared machine the wall time
  measures a share of the CPU; the CPU time is the better estimate of the
  time on free cores.

MILP (``certify.exact_search``, HiGHS, ``--milp-time`` seconds per point) on
``--milp-n`` random correctly classified points of the digits MLPs: how
many distances become exact, and how far the lower bound rises above
CROWN's (the band narrowed on those points). A small digits MLP 64-32-32-10
trained here in a few seconds (Adam, 30 epochs) shows the exact curve where
the network is small enough for the MILP.

    python benchmarks/certify_speed.py                  # all models
    python benchmarks/certify_speed.py --quick          # digits models, few points
    python benchmarks/certify_speed.py --models mnist-cnn-st --n 20
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from attacks import minimal_distance  # noqa: E402
from rcurves import certify  # noqa: E402
from rcurves.models import zoo

MODELS = ("digits-mlp-st", "digits-mlp-at-linf-0.1", "mnist-mlp-st", "mnist-mlp-at-linf-0.1",
          "mnist-cnn-st", "mnist-cnn-at-linf-0.1", "mnist-cnn-at-linf-0.3")
MILP_MODELS = ("digits-mlp-st", "digits-mlp-at-linf-0.1")
PUBLISHED = {  # issue 17: C.1 CNN on MNIST, l_inf, CROWN radius vs PGD distance
    "mnist-cnn-st": {"crown": 0.039, "pgd": 0.073, "training": "normal"},
    "mnist-cnn-at-linf-0.1": {"crown": 0.086, "pgd": 0.163, "training": "PGD-trained"},
    "mnist-cnn-at-linf-0.3": {"crown": 0.086, "pgd": 0.163, "training": "PGD-trained"},
}
TARGET_S = {"mnist-mlp-st": 0.020, "mnist-mlp-at-linf-0.1": 0.020, "mnist-cnn-st": 0.5,
            "mnist-cnn-at-linf-0.1": 0.5, "mnist-cnn-at-linf-0.3": 0.5}


def _stats(u, l, correct):
    keep = correct & np.isfinite(u) & (u > 0)
    eps = np.linspace(0.0, float(u[np.isfinite(u)].max()) if np.isfinite(u).any() else 1.0, 401)
    s = certify.band_summary(u, l, eps)
    return {
        "band_area": s.area, "met_1pct": s.met, "median_ratio": s.median_ratio, "max_curve_gap": s.max_gap,
        "mean_attack": float(np.mean(u[keep])), "median_attack": float(np.median(u[keep])),
        "mean_radius": float(np.mean(l[keep])), "median_radius": float(np.median(l[keep])),
        "eps_max": float(eps[-1]),
    }


def bench_bab(name, net, x, y, u, correct, crown, n, budget, norm="linf"):
    """Branch and bound (``method='bab'``) on the first ``n`` points of the sample, one timed call
    (compilation included). The sample (``_common.sample_points``) is sorted by index in the held-out
    split (a seeded shuffle within classes, interleaved), so its first ``n`` points are the sampled
    points that come first in that order: chosen without looking at them, but not stratified (e.g. 10
    of 30 held 0-3 per class); the row's ``points`` gives the class counts."""
    from rcurves.data.sampling import describe

    n = min(n, x.shape[0])
    t0, c0 = time.perf_counter(), time.process_time()
    r = np.asarray(certify.certified_radius(net, x[:n], y[:n], norm=norm, method="bab", budget=budget,
                                            upper=u[:n]))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    row = {"model": name, "norm": norm, "method": f"bab-{budget}", "n": n, "s_per_point": wall / n,
           "cpu_s_per_point": cpu / n,
           "points": describe(np.asarray(y), np.arange(n), f"the first {n} of the random sample, in the "
                              "split's class-interleaved order")["text"],
           "x_attack_time": None, "compile_s": None, "target_s_per_point": None}
    row.update(_stats(u[:n], r, correct[:n]))
    same = _stats(u[:n], crown[:n], correct[:n])
    row["crown_median_ratio_same_points"] = same["median_ratio"]
    row["radius_gain_median"] = float(np.median(r[correct[:n]] / np.maximum(crown[:n][correct[:n]], 1e-12)))
    return row, r


def bench_model(name, n, methods, repeats, key, bab_n=0, budget=256, norm="linf", seed=0):
    m = zoo.load(name)
    x, y = zoo.test_data(m)
    x, y, sample = C.sample_points(x, y.astype(np.int32), n, seed=seed)
    x, y = jnp.asarray(x), jnp.asarray(y)
    net = certify.from_model(m.model, m.params)
    correct = np.asarray(jnp.argmax(m.logits_fn(x), 1)) == np.asarray(y)
    att = minimal_distance(m.logits_fn, x, y, norm=norm, key=key)
    u = np.asarray(att.distance)
    radii = {}
    fns = {"attack": lambda: minimal_distance(m.logits_fn, x, y, norm=norm, key=key).distance}
    for meth in methods:
        fns[meth] = (lambda meth=meth: certify.certified_radius(net, x, y, norm=norm, method=meth, upper=u))
    print(f"{name} ({norm}): timing {list(fns)} on {n} points", flush=True)
    timing = C.time_interleaved(fns, repeats=repeats)
    rows = []
    for meth in methods:
        radii[meth] = np.asarray(fns[meth]())
        t = timing[meth]
        row = {"model": name, "norm": norm, "method": meth, "n": n, "accuracy": float(correct.mean()),
               "s_per_point": t.median / n, "cpu_s_per_point": t.cpu_median / n,
               "x_attack_time": C.paired_ratio(t, timing["attack"]), "compile_s": t.compile,
               "target_s_per_point": TARGET_S.get(name) if meth == "crown" and norm == "linf" else None}
        row.update(_stats(u, radii[meth], correct))
        rows.append(row)
    if bab_n:
        row, r = bench_bab(name, net, x, y, u, correct, radii["crown"], bab_n, budget, norm)
        rows.append(row)
        radii[row["method"]] = r
    ta = timing["attack"]
    attack_row = {"model": name, "norm": norm, "method": "attack", "n": n, "s_per_point": ta.median / n,
                  "cpu_s_per_point": ta.cpu_median / n, "compile_s": ta.compile}
    return rows, attack_row, {"sample": sample, "attack": u.tolist(), **{k: v.tolist() for k, v in radii.items()},
                              "correct": correct.tolist(), "timing": {k: v.to_dict() for k, v in timing.items()}}


def bench_milp(name, logits_fn, net, x, y, n, time_limit, key, budget=256, seed=0):
    from rcurves.data.sampling import random_subset

    correct = np.asarray(jnp.argmax(logits_fn(jnp.asarray(x)), 1)) == y
    ok = np.flatnonzero(correct)
    idx = ok[random_subset(ok.size, min(n, ok.size), seed=seed)]
    xs, ys = jnp.asarray(x[idx]), jnp.asarray(y[idx].astype(np.int32))
    att = minimal_distance(logits_fn, xs, ys, norm="linf", key=key)
    u = np.asarray(att.distance)
    crown = np.asarray(certify.certified_radius(net, xs, ys, norm="linf", upper=u))
    t0 = time.perf_counter()
    res = certify.exact_search(net, xs, ys, norm="linf", upper=u, x_adv=att.x_adv, time_limit=time_limit)
    wall = time.perf_counter() - t0
    eps = np.linspace(0.0, float(u.max()), 401)
    before = certify.band_summary(u, crown, eps)
    after = certify.band_summary(res.upper, np.maximum(res.lower, crown), eps)
    t1 = time.perf_counter()
    bab = np.asarray(certify.certified_radius(net, xs, ys, norm="linf", method="bab", budget=budget, upper=u))
    bab_s = (time.perf_counter() - t1) / len(idx)
    ex = res.exact
    gain = (res.lower - crown) / np.maximum(crown, 1e-12)
    row = {"model": name, "n": len(idx), "time_limit_s": time_limit, "exact": float(res.exact.mean()),
           "lower_gain_median": float(np.median(gain)), "lower_gain_max": float(gain.max()),
           "narrowed": float(np.mean(res.lower > crown * (1 + 1e-4))),
           "upper_gain_median": float(np.median((u - res.upper) / u)),
           "area_before": before.area, "area_after": after.area,
           "median_ratio_before": before.median_ratio, "median_ratio_after": after.median_ratio,
           "binaries_median": float(np.median(res.binaries)), "s_per_point": float(np.mean(res.seconds)),
           "crown_over_exact_median": float(np.median(crown[ex] / res.lower[ex])) if ex.any() else None,
           "bab_over_exact_median": float(np.median(bab[ex] / res.lower[ex])) if ex.any() else None,
           "bab_above_milp_lower": float(np.mean(bab > res.lower * (1 + 1e-4))),
           "bab_at_most_upper": bool(np.all(bab <= res.upper)), "bab_s_per_point": bab_s,
           "wall_s": wall}
    detail = {"attack": u.tolist(), "crown": crown.tolist(), "bab": bab.tolist(), "lower": res.lower.tolist(),
              "upper": res.upper.tolist(), "exact": res.exact.tolist(), "status": res.status.tolist(),
              "seconds": res.seconds.tolist(), "binaries": res.binaries.tolist()}
    return row, detail


def small_digits_mlp(seed):
    """A digits MLP 64-32-32-10 trained here (Adam, 30 epochs): small enough for exact MILP."""
    from rcurves.models import ModelConfig, make_logits_fn
    from rcurves.models.training import TrainConfig, train
    from rcurves.data import digits

    cfg = ModelConfig(arch="mlp", input_shape=(8, 8, 1), n_classes=10, hidden=(32, 32))
    xtr, ytr = digits("train")
    res = train(cfg, TrainConfig(method="st", epochs=30, seed=seed), xtr, ytr, progress=False)
    xte, yte = digits("test")
    return make_logits_fn(cfg, res.params), certify.from_model(cfg, res.params), xte, yte


def main(argv=None):
    p = C.parser("certify_speed", __doc__, n=100)
    p.add_argument("--cnn-n", type=int, default=None, help="points for the CNNs (default 30; --quick 4)")
    p.add_argument("--models", nargs="*", default=None, help=f"zoo models (default: {' '.join(MODELS)})")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--alpha", action="store_true", help="also time alpha-CROWN (about 60x CROWN's cost)")
    p.add_argument("--milp-n", type=int, default=None, help="points per MILP model (default 10; --quick 3)")
    p.add_argument("--milp-time", type=float, default=30.0, help="HiGHS seconds per point (all stages)")
    p.add_argument("--no-milp", action="store_true")
    p.add_argument("--bab-n", type=int, default=None,
                   help="points for branch and bound on the MLPs (default 100; --quick 5; 0: none)")
    p.add_argument("--budget", type=int, default=256, help="branch and bound: subdomains per certification")
    p.add_argument("--bab-n-l2", type=int, default=None, help="branch-and-bound points in l_2 (default 30; --quick 3)")
    p.add_argument("--bab-n-cnn", type=int, default=None,
                   help="branch-and-bound points on the CNNs, l_inf only (default 10; --quick 0)")
    p.add_argument("--budget-cnn", type=int, default=64, help="branch and bound on the CNNs: subdomains per certification")
    p.add_argument("--norms", nargs="+", default=["linf", "l2"], choices=["linf", "l2"])
    args = p.parse_args(argv)
    n = args.n or (10 if args.quick else 100)
    cnn_n = args.cnn_n or (4 if args.quick else 30)
    milp_n = args.milp_n or (3 if args.quick else 10)
    bab_n = (5 if args.quick else 100) if args.bab_n is None else args.bab_n
    bab_n_l2 = (3 if args.quick else 30) if args.bab_n_l2 is None else args.bab_n_l2
    bab_n_cnn = (0 if args.quick else 10) if args.bab_n_cnn is None else args.bab_n_cnn
    models = args.models or (MODELS[:2] if args.quick else MODELS)
    key = jax.random.PRNGKey(args.seed)
    out = {"benchmark": "certify_speed", "machine": C.machine_info(), "args": vars(args), "models": {},
           "published": PUBLISHED}
    rows, attack_rows = [], []
    for name in models:
        if not zoo.is_cached(name):
            print(f"{name}: not cached, skipped (train it with zoo.load first)", flush=True)
            out["models"][name] = {"skipped": "not cached"}
            continue
        cnn = "cnn" in name
        methods = ["crown", "crown-ibp"] + ([] if cnn else ["ibp"]) + (["alpha-crown"] if args.alpha else [])
        for norm in args.norms:
            r, a, detail = bench_model(name, cnn_n if cnn else n, methods, args.repeats, key,
                                       bab_n=(bab_n_cnn if norm == "linf" else 0) if cnn else
                                       (bab_n if norm == "linf" else bab_n_l2),
                                       budget=args.budget_cnn if cnn else args.budget, norm=norm, seed=args.seed)
            rows += r
            attack_rows.append(a)
            out["models"].setdefault(name, {})[norm] = {"rows": r, "attack": a, "points": detail}
    out["rows"], out["attack_rows"] = rows, attack_rows
    C.print_table(rows, ["model", "norm", "method", "n", "s_per_point", "cpu_s_per_point", "target_s_per_point",
                         "x_attack_time", "median_ratio", "crown_median_ratio_same_points", "radius_gain_median",
                         "met_1pct", "band_area", "mean_radius", "mean_attack"],
                  title=f"certified radius vs attack, {C.load_string()}")
    C.print_table(attack_rows, ["model", "norm", "n", "s_per_point", "cpu_s_per_point", "compile_s"], title="attack")
    pub = []
    for name, ref in PUBLISHED.items():
        crown = next((r for r in rows if r["model"] == name and r["method"] == "crown" and r["norm"] == "linf"),
                     None)
        if crown:
            pub.append({"model": name, "published_crown": ref["crown"], "published_pgd": ref["pgd"],
                        "ours_crown_mean": crown["mean_radius"], "ours_attack_mean": crown["mean_attack"],
                        "ours_crown_median": crown["median_radius"], "ours_attack_median": crown["median_attack"]})
    if pub:
        C.print_table(pub, list(pub[0]), title="C.1 CNN on MNIST: published (quoted in issue 17) vs ours")
    out["published_comparison"] = pub
    if not args.no_milp:
        milp_rows = []
        for name in [m for m in MILP_MODELS if m in models or args.quick]:
            if not zoo.is_cached(name):
                continue
            m = zoo.load(name)
            x, y = zoo.test_data(m)
            net = certify.from_model(m.model, m.params)
            row, detail = bench_milp(name, m.logits_fn, net, x, y, milp_n, args.milp_time, key, args.budget, args.seed)
            milp_rows.append(row)
            out["models"].setdefault(name, {})["milp"] = detail
        logits_fn, net, x, y = small_digits_mlp(args.seed)
        row, detail = bench_milp("digits-mlp-64-32-32 (trained here)", logits_fn, net, x, y, milp_n,
                                 args.milp_time, key, args.budget, args.seed)
        milp_rows.append(row)
        out["small_mlp_milp"] = detail
        out["milp_rows"] = milp_rows
        C.print_table(milp_rows, ["model", "n", "time_limit_s", "exact", "narrowed", "lower_gain_median",
                                  "median_ratio_before", "median_ratio_after", "area_before", "area_after",
                                  "binaries_median", "s_per_point", "crown_over_exact_median",
                                  "bab_over_exact_median", "bab_above_milp_lower", "bab_at_most_upper",
                                  "bab_s_per_point"],
                      title="MILP (HiGHS) on the digits MLPs: exact distances and the narrowed band")
    out["machine_end"] = C.machine_info()
    C.write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
