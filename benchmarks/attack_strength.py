"""Attack strength at an equal gradient budget, against exact minimal distances.

Six ways to spend the same number ``G`` of gradient evaluations per point on
``attacks.minimal_distance`` (default ``G = (1 + 10) * 20 = 220``):

* ``fixed-step``: bisection over the radius with fixed-step PGD, step
  ``0.1 * eps`` (``step_size=0.1``), one restart, no ray refinement
  (``refine_steps=0``, ``radius="bisect"``, ``track="norm"``) — the classic
  method; it still keeps the engine's warm start from the best adversarial
  and uses the norm of the adversarial found (not the radius tried) as the
  upper end of the bracket;
* ``default``: the library's defaults, scaled to the budget
  (``attacks.minimal.budget_schedule``): APGD steps, warm starts, one lane per
  round for l_inf and l_2 and two lanes of half the steps for l_1
  (``DEFAULT_SCHEDULE``) on models of two classes; on the 10-class models
  four lanes aimed at four target classes (ranked by linearised distance and
  by logit, ``attacks.ranking``) with the targeted DLR loss, in 7 rounds (l_inf) or 6 (l_2) (``TARGETED_SCHEDULE``); the next radius by regula falsi on the lanes' best
  margins with one final ray search (l_inf, l_2), or by bisection with a ray
  search of 4 forward passes every round (l_1) (``DEFAULT_RADIUS``);
* ``radius=bisect`` / ``radius=falsi``: the default with the other radius
  search;
* ``one lane``: the default with one lane of all the steps (the l_1 default of
  earlier versions);
* ``restarts=2``: the default with two lanes per radius (one warm start, one
  random) and half the steps;
* ``candidates=3``: three radii per round as parallel lanes, fewer rounds
  (``search_steps`` 4, ``steps = G // 15``).

Models with exactly known minimal distances (unbounded inputs, ``bounds=None``;
``eps_max`` = twice the largest exact distance, so every point is breakable):

* binary linear ``sign(w.x + b)``, d = 100: ``|w.x + b| / ||w||_q`` (000 Lemma 1;
  l_inf and l_2 only: by Theorem 2 l_1 is the same problem rescaled);
* 10-class linear, d = 100: ``min_{j != y} ((w_y - w_j).x + b_y - b_j) / ||w_y - w_j||_q``;
* l_2 ball, d = 50 (class 0 inside ``||x - c||_2 < R``): l_2 distance
  ``| R - ||x - c|| |``; l_inf distance: leaving the ball, the root ``t`` of
  ``||(|v| + t)||_2 = R``; entering it, the ``t`` with
  ``||max(|v| - t, 0)||_2 = R`` (monotone; bisection), ``v = x - c``;
* the parabola ``sign(x1^2 - x2)`` of 001 Fig. 2 (``rcurves.parabola_distance``,
  exact for l_1, l_2, l_inf), random points of ``[-2, 2] x [-1, 4]``.

Reported per model, norm and method: median and 90th percentile of
``distance / exact`` (a miss counts as inf), the fraction within 1 % of exact,
the fraction missed (inf although breakable), the smallest ratio and the
number of points with a ratio below 1 - 1e-4 (that would be a wrong claim:
every distance is backed by a re-checked adversarial; float32 rounding at the
boundary allows ratios a hair below 1). Then the trained MNIST MLP (784-256-256-10), where no exact
answer exists: each method's median distance and, per point, how often each
method gives the smallest distance (within 0.01 %), and the median ratio to
the best of the methods.

    python benchmarks/attack_strength.py
    python benchmarks/attack_strength.py --quick
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
from attacks.minimal import DEFAULT_RADIUS, DEFAULT_SCHEDULE, budget_schedule  # noqa: E402
from rcurves.data import parabola_distance, parabola_logits_fn  # noqa: E402

DUAL = {"linf": 1.0, "l2": 2.0, "l1": np.inf}


# ---------------------------------------------------------------------------
# methods at an equal budget


def methods(search_steps: int, steps: int, norm: str = "linf", n_classes: int = 2):
    """``{name: kwargs of minimal_distance}`` for ``norm``, all within ``(1 + search_steps) * steps`` gradients."""
    lanes = DEFAULT_SCHEDULE[norm][0]
    other = "bisect" if DEFAULT_RADIUS[norm] == "falsi" else "falsi"
    G = (1 + search_steps) * steps
    rounds_c = max(2, (search_steps + 1) * 5 // 11)
    # The others without the FMN polish that minimal_distance adds by default
    # on models of four or more classes: each spends exactly its G.
    return {
        "fixed-step": dict(search_steps=search_steps, steps=steps, step_size=0.1, restarts=1, refine_steps=0,
                           radius="bisect", track="norm", polish_steps=0),
        # the library's default (attacks.minimal): for fewer than four classes one lane of
        # ``steps`` for l_inf / l_2, two lanes of ``steps // 2`` for l_1; for more, l_inf / l_2
        # four targeted lanes (TARGETED_SCHEDULE), its steps scaled to the same budget
        "default": budget_schedule(norm, G, n_classes),
        # the other radius search (attacks.minimal.DEFAULT_RADIUS): bisection with a
        # ray search every round where the default is regula falsi, and vice versa
        f"radius={other}": dict(search_steps=search_steps, steps=max(1, steps // lanes), restarts=lanes,
                                radius=other, polish_steps=0),
        "one lane": dict(search_steps=search_steps, steps=steps, restarts=1, loss="margin", polish_steps=0),
        "restarts=2": dict(search_steps=search_steps, steps=max(1, steps // 2), restarts=2, loss="margin", polish_steps=0),
        "candidates=3": dict(search_steps=rounds_c - 1, steps=max(1, G // (3 * rounds_c)), candidates=3,
                             restarts=1, polish_steps=0),
    }


def budget(kw, norm: str = "linf", n_classes: int = 2) -> int:
    """Gradients per point of ``minimal_distance(**kw)`` on a model of
    ``n_classes`` classes (the target ranking's Jacobian included)."""
    from attacks.minimal import search_config, search_gradients
    return search_gradients(search_config(norm, n_classes, **kw), n_classes)


# ---------------------------------------------------------------------------
# models with exact answers


def binary_linear(rng, n, d=100):
    w = rng.standard_normal(d)
    b = 0.5
    x = rng.standard_normal((n, d))
    s = x @ w + b
    y = (s > 0).astype(np.int32)
    wj = jnp.asarray(w, jnp.float32)

    def logits_fn(z):
        t = z.reshape(z.shape[0], -1) @ wj + b
        return jnp.stack([-t / 2, t / 2], axis=-1)

    exact = lambda norm: np.abs(s) / np.linalg.norm(w, DUAL[norm])  # noqa: E731
    # l1 left out: by 000 Theorem 2 it is the same problem up to a scale
    return logits_fn, x, y, exact, ("linf", "l2")


def multiclass_linear(rng, n, d=100, k=10):
    W = rng.standard_normal((k, d))
    b = 0.1 * rng.standard_normal(k)
    x = rng.standard_normal((n, d))
    z = x @ W.T + b
    y = np.argmax(z, axis=1).astype(np.int32)
    Wj, bj = jnp.asarray(W, jnp.float32), jnp.asarray(b, jnp.float32)

    def logits_fn(v):
        return v.reshape(v.shape[0], -1) @ Wj.T + bj

    def exact(norm):
        gap = z[np.arange(n), y][:, None] - z                          # (n, k) >= 0
        dw = W[y][:, None, :] - W[None, :, :]                          # (n, k, d)
        nrm = np.linalg.norm(dw, DUAL[norm], axis=2)
        dist = np.where(np.arange(k)[None, :] == y[:, None], np.inf, gap / np.where(nrm > 0, nrm, 1.0))
        return dist.min(axis=1)

    return logits_fn, x, y, exact, ("linf", "l2", "l1")


def l2_ball(rng, n, d=50):
    R = float(np.sqrt(d))
    g = rng.standard_normal((n, d))
    rad = R * rng.uniform(0.5, 1.5, size=n)
    rad = np.where(np.abs(rad - R) < 0.02 * R, rad + 0.04 * R, rad)    # keep off the sphere
    x = g / np.linalg.norm(g, axis=1, keepdims=True) * rad[:, None]   # centre c = 0
    y = (rad > R).astype(np.int32)                                      # class 1 outside

    def logits_fn(v):
        s = jnp.sqrt(jnp.sum(jnp.square(v.reshape(v.shape[0], -1)), axis=1)) - R
        return jnp.stack([-s, s], axis=-1)

    def exact(norm):
        r = np.linalg.norm(x, axis=1)
        if norm == "l2":
            return np.abs(r - R)
        a = np.abs(x)
        B, Cc = 2 * a.sum(1), (a * a).sum(1) - R ** 2
        leave = (-B + np.sqrt(B * B - 4 * d * Cc)) / (2 * d)
        lo, hi = np.zeros(n), a.max(1)
        for _ in range(100):                                            # bisection, all points at once
            mid = 0.5 * (lo + hi)
            outside = np.linalg.norm(np.maximum(a - mid[:, None], 0.0), axis=1) > R
            lo, hi = np.where(outside, mid, lo), np.where(outside, hi, mid)
        return np.where(r < R, leave, hi)

    return logits_fn, x, y, exact, ("linf", "l2")


def parabola(rng, n):
    m = 4 * n
    x = np.stack([rng.uniform(-2, 2, m), rng.uniform(-1, 4, m)], axis=1)
    keep = parabola_distance(x, 2) > 0.01
    x = x[keep][:n]
    y = (x[:, 0] ** 2 > x[:, 1]).astype(np.int32)
    exact = lambda norm: parabola_distance(x, {"linf": np.inf, "l2": 2, "l1": 1}[norm])  # noqa: E731
    return parabola_logits_fn(), x, y, exact, ("linf", "l2", "l1")


PROBLEMS = {"binary linear d=100": binary_linear, "10-class linear d=100": multiclass_linear,
            "l2 ball d=50": l2_ball, "parabola d=2": parabola}


def ratio_stats(d: np.ndarray, exact: np.ndarray) -> dict:
    r = d / exact
    med, p90 = C.median(r), C.finite_quantile(r, 0.9)
    return {"median_ratio": med, "p90_ratio": p90,
            "median_excess_%": 100 * (med - 1), "p90_excess_%": 100 * (p90 - 1),
            "within_1%": float(np.mean(r <= 1.01)), "missed": float(np.mean(~np.isfinite(d))),
            "min_ratio": float(np.min(r)), "below_exact": int(np.sum(r < 1 - 1e-4))}


def run_exact(args, key, norms_filter):
    rows = []
    rng = np.random.default_rng(args.seed)
    names = list(PROBLEMS) if not args.quick else ["binary linear d=100", "l2 ball d=50"]
    for pname in names:
        logits_fn, x, y, exact_fn, norms = PROBLEMS[pname](rng, args.n_exact)
        xj, yj = jnp.asarray(x, jnp.float32), jnp.asarray(y)
        pred = np.asarray(jnp.argmax(logits_fn(xj), axis=1))
        ok = pred == y                    # float32 may flip a point at the boundary: drop it
        for norm in norms:
            if norm not in norms_filter:
                continue
            ex = exact_fn(norm)
            eps_max = float(2.0 * ex[ok].max())
            K = int(jax.eval_shape(logits_fn, xj[:1]).shape[-1])
            for mname, kw in methods(args.search_steps, args.steps, norm, K).items():
                t0 = time.perf_counter()
                res = attacks.minimal_distance(logits_fn, xj, yj, norm=norm, key=key, eps_max=eps_max,
                                               bounds=None, **kw)
                d = np.asarray(res.distance, np.float64)
                t = time.perf_counter() - t0
                row = {"model": pname, "norm": norm, "method": mname, "G": budget(kw, norm, K),
                       "n": int(ok.sum()), **ratio_stats(d[ok], ex[ok]), "wall_s": t}
                rows.append(row)
                print(f"  {pname:22s} {norm:4s} {mname:12s} median {row['median_ratio']:.4f} "
                      f"p90 {row['p90_ratio']:.4f} within1% {row['within_1%']:.2f} "
                      f"missed {row['missed']:.2f}  ({t:.1f}s)", flush=True)
    return rows


def run_mnist(args, key):
    logits_fn, info = C.mnist_model("mlp")
    x, y = C.mnist_points(logits_fn, args.n_mnist)
    rows, per_point = [], {}
    for norm in ("linf", "l2"):
        dists = {}
        ms = methods(args.search_steps, args.steps, norm, 10)
        for mname, kw in ms.items():
            t0 = time.perf_counter()
            res = attacks.minimal_distance(logits_fn, x, y, norm=norm, key=key, **kw)
            dists[mname] = np.asarray(res.distance, np.float64)
            print(f"  mnist-mlp {norm:4s} {mname:12s} median {C.median(dists[mname]):.4f} "
                  f"({time.perf_counter() - t0:.1f}s)", flush=True)
        D = np.stack(list(dists.values()))                          # (methods, n)
        best = D.min(axis=0)
        for i, mname in enumerate(dists):
            others = np.delete(D, i, axis=0).min(axis=0)
            rows.append({
                "model": "MNIST MLP", "norm": norm, "method": mname, "G": budget(ms[mname], norm, 10),
                "n": x.shape[0], "median_dist": C.median(D[i]),
                "broken": float(np.mean(np.isfinite(D[i]))),
                "is_smallest": float(np.mean(D[i] <= best * (1 + 1e-4))),
                "beats_others_1%": float(np.mean(D[i] < others * 0.99)),
                "median_ratio_to_best": C.median(D[i] / best),
                "p90_ratio_to_best": C.finite_quantile(D[i] / best, 0.9),
                "median_excess_over_best_%": 100 * (C.median(D[i] / best) - 1),
                "p90_excess_over_best_%": 100 * (C.finite_quantile(D[i] / best, 0.9) - 1),
            })
        per_point[norm] = dists
    return rows, per_point, info


def main(argv=None):
    p = C.parser("attack_strength", __doc__, n=256)
    p.add_argument("--n-exact", type=int, default=None, help="points per exact-answer model (default 256)")
    p.add_argument("--search-steps", type=int, default=10)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--norms", default="linf,l2,l1")
    p.add_argument("--no-mnist", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.search_steps, args.steps = 4, 8
        args.norms = "linf,l2"
    args.n_mnist = args.n or (16 if args.quick else 256)
    args.n_exact = args.n_exact or (64 if args.quick else 256)
    meths = {norm: methods(args.search_steps, args.steps, norm) for norm in DEFAULT_SCHEDULE}
    key = jax.random.PRNGKey(args.seed)
    out = {"benchmark": "attack_strength", "machine": C.machine_info(),
           "config": {"methods": meths, "budgets": {k: budget(v) for k, v in meths["linf"].items()},
                      "n_exact": args.n_exact, "n_mnist": args.n_mnist, "quick": args.quick}}
    print(f"budgets (gradient evaluations per point): {out['config']['budgets']}; {C.load_string()}")
    rows = run_exact(args, key, set(args.norms.split(",")))
    out["exact"] = rows
    print()
    C.print_table(rows, ["model", "norm", "method", "G", "n", "median_excess_%", "p90_excess_%", "within_1%",
                         "missed", "min_ratio", "below_exact"],
                  title="distance / exact minimal distance, as excess in % (0 = exact; a miss counts as inf)")
    if not args.no_mnist:
        print()
        mrows, per_point, info = run_mnist(args, key)
        out["mnist"] = {"model": info, "rows": mrows, "distances": per_point}
        print()
        C.print_table(mrows, ["model", "norm", "method", "G", "n", "median_dist", "broken", "is_smallest",
                              "beats_others_1%", "median_excess_over_best_%", "p90_excess_over_best_%"],
                      title="trained MNIST MLP (no exact answer): per-point comparison of the methods")
    out["machine_end"] = C.machine_info()
    print(f"load average 1/5/15 min: start {out['machine']['loadavg_1_5_15']}, "
          f"end {out['machine_end']['loadavg_1_5_15']} ({os.cpu_count()} cores)")
    C.write_json(args.out, out)


if __name__ == "__main__":
    main()
