"""Paper 000, Appendix A, Example 1 / Figure 6: l_2 curves cross, l_inf curves do not.

Two linear classifiers in the plane that both separate the data perfectly:
blue ``sign(x1)`` (w = (1, 0), an axis-aligned boundary) and orange
``sign(x1 + x2)`` (w = (1, 1)). By Lemma 1 a point's l_p distance to the
boundary ``w.x = 0`` is ``|w.x| / ||w||_q``: for blue the l_inf and l_2
distances are equal, for orange the l_2 distance is sqrt(2) times the l_inf
one (Theorem 2: ``||w||_1 / ||w||_2``). So one data set can have blue more
robust than orange at every l_inf threshold while, in l_2, orange's curve is
stretched past blue's at small thresholds and the curves cross.

Our distribution (the paper draws one but gives no numbers): two clusters per
class, mirrored through the origin, around ``(1.0, 0.8)`` and ``(3.0, -0.1)``
(class 1) and their negatives (class 0), each a Gaussian of standard deviation
0.02 (``--n`` points in all). Blue's l_inf distances are about 1.0 and 3.0,
orange's about 0.9 and 1.45: blue is more robust at every l_inf threshold. In
l_2, orange's become about 1.27 and 2.05: orange is more robust on roughly
[1.0, 1.27), blue from about 2.05 on.

Everything is exact (Lemma 1, ``rcurves.exact_curve_intersections``); the
attack (``attacks.minimal_distance``, unbounded inputs) is run next to it as a
check that it never goes below the exact distance and lands on it.

    python experiments/000_global_comparison/fig6_linear_crossing.py --out results/experiments/fig6_linear_crossing
"""
from __future__ import annotations

import math
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
from shared import parse_args, save_figure, write_result

from rcurves.claims.record import claim, fmt

CENTRES = np.array([[1.0, 0.8], [3.0, -0.1]])
CLASSIFIERS = {"blue: sign(x1)": np.array([1.0, 0.0]), "orange: sign(x1 + x2)": np.array([1.0, 1.0])}
NORMS = {"linf": math.inf, "l2": 2.0}


def make_data(n: int, seed: int = 0, std: float = 0.02):
    """``n`` points: class 1 around CENTRES, class 0 around -CENTRES (equal weights)."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, CENTRES.shape[0], size=n)
    y = rng.integers(0, 2, size=n)
    sign = np.where(y == 1, 1.0, -1.0)[:, None]
    x = sign * (CENTRES[c] + std * rng.normal(size=(n, 2)))
    return x.astype(np.float32), y.astype(np.int64)


def main(argv=None):
    import jax

    import attacks
    from rcurves.curves import exact_curve_intersections, robustness_curve
    from rcurves.exact.linear import linear_distance, linear_logits_fn

    args = parse_args(__doc__, "fig6_linear_crossing", argv,
                      extra=lambda ap: ap.add_argument("--n", type=int, default=None, help="points (default 2000; quick 200)"))
    n = args.n or (200 if args.quick else 2000)
    x, y = make_data(n, args.seed)
    exact, attack, acc = {}, {}, {}
    for name, w in CLASSIFIERS.items():
        exact[name], attack[name] = {}, {}
        f = linear_logits_fn(w, 0.0)
        acc[name] = float(np.mean((x @ w > 0) == (y == 1)))
        for norm, p in NORMS.items():
            exact[name][norm] = np.asarray(linear_distance(w, 0.0, x, p, y), np.float64)
            res = attacks.minimal_distance(f, x, y, norm=norm, key=jax.random.PRNGKey(args.seed), eps_max=6.0,
                                           search_steps=4 if args.quick else 8, steps=10, bounds=None)
            attack[name][norm] = np.asarray(res.distance, np.float64)
    blue, orange = list(CLASSIFIERS)
    flips = {norm: exact_curve_intersections(exact[blue][norm], exact[orange][norm]) for norm in NORMS}
    # who is more robust where (exact), on the knots of both curves
    order = {}
    for norm in NORMS:
        knots = np.unique(np.concatenate([[0.0], exact[blue][norm], exact[orange][norm]]))
        rb = np.asarray(robustness_curve(exact[blue][norm], knots), np.float64)
        ro = np.asarray(robustness_curve(exact[orange][norm], knots), np.float64)
        order[norm] = {"blue_better_somewhere": bool(np.any(rb < ro)), "orange_better_somewhere": bool(np.any(ro < rb)),
                       "max_gap": float(np.max(np.abs(rb - ro)))}
    ratio = {name: {norm: attack[name][norm] / exact[name][norm] for norm in NORMS} for name in CLASSIFIERS}
    worst = max(float(np.max(r[norm])) for r in ratio.values() for norm in NORMS)
    lowest = min(float(np.min(r[norm])) for r in ratio.values() for norm in NORMS)
    attack_flips = {norm: exact_curve_intersections(attack[blue][norm], attack[orange][norm]) for norm in NORMS}

    figures = [_plot(exact, args.out, x, y)]
    l2f, lif = flips["l2"], flips["linf"]
    claims = [
        claim("000", "Appendix A, Example 1 / Figure 6",
              "Two linear classifiers that both separate the data perfectly: their l_inf robustness curves do not "
              "intersect (blue is always at least as robust), their l_2 curves do.",
              f"both classifiers 100% accurate ({acc[blue]:.0%}, {acc[orange]:.0%}) on {n} points; exact (Lemma 1) "
              f"l_inf curves: {lif.size} order changes, blue strictly more robust somewhere "
              f"({order['linf']['blue_better_somewhere']}), orange never ({order['linf']['orange_better_somewhere']}); "
              f"l_2 curves: the order flips at eps = {', '.join(fmt(v, 4) for v in l2f)} (orange more robust "
              f"first, blue from {fmt(l2f[-1], 4) if l2f.size else '-'} on)",
              "reproduced" if (lif.size == 0 and l2f.size >= 1 and not order["linf"]["orange_better_somewhere"]
                               and order["l2"]["orange_better_somewhere"] and order["l2"]["blue_better_somewhere"]
                               and acc[blue] == acc[orange] == 1.0) else "differs",
              "" if lif.size == 0 and l2f.size >= 1 else "the constructed distribution did not show the effect",
              short="two linear classifiers: l_inf curves never cross, l_2 curves do",
              paper_value="0 l_inf, >= 1 l_2 cross", ours_value=f"{lif.size} l_inf, {l2f.size} l_2 cross"),
        claim("000", "Example 1 / Figure 6 (attacks vs Lemma 1)",
              "Check of our attacks: on both linear classifiers of Example 1 the attacks' l_2 and l_inf distances "
              "sit on Lemma 1's exact ones (never below), and the attack curves change order where the exact ones do.",
              f"attack distances / exact over both classifiers and norms in [{lowest:.6f}, {worst:.6f}]; the attack "
              f"curves change order at the same places (l_2: {attack_flips['l2'].size} changes, l_inf: "
              f"{attack_flips['linf'].size})",
              "reproduced" if lowest >= 1 - 1e-5 and worst <= 1.01 else "differs",
              "" if lowest >= 1 - 1e-5 and worst <= 1.01 else "attack distances off the exact ones",
              kind="self-check", short="the attacks sit on Lemma 1's exact distances", paper_value="attack = exact",
              ours_value=f"ratio {lowest:.4f}-{worst:.4f}"),
    ]
    payload = {"n": n, "centres": CENTRES, "std": 0.02, "accuracy": acc,
               "intersections_exact": {k: v for k, v in flips.items()},
               "intersections_attack": {k: v for k, v in attack_flips.items()}, "order": order,
               "attack_over_exact": {name: {norm: {"min": float(np.min(r[norm])), "max": float(np.max(r[norm]))}
                                             for norm in NORMS} for name, r in ratio.items()}}
    write_result(args, payload, claims, figures)
    return payload


def _plot(exact, out, x, y):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rcurves.plotting import step_curve

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    ax = axes[0]
    ax.scatter(x[y == 1, 0], x[y == 1, 1], marker="+", c="k", s=12, label="class 1")
    ax.scatter(x[y == 0, 0], x[y == 0, 1], marker="_", c="k", s=12, label="class 0")
    t = np.linspace(-3.5, 3.5, 2)
    for (name, w), color in zip(CLASSIFIERS.items(), ("tab:blue", "tab:orange")):
        if abs(w[1]) > 0:
            ax.plot(t, -w[0] * t / w[1], color=color, label=name)
        else:
            ax.axvline(0.0, color=color, label=name)
    ax.set_xlim(-3.5, 3.5)
    ax.set_ylim(-2.5, 2.5)
    ax.set_aspect("equal")
    ax.set_xlabel("x1")
    ax.set_ylabel("x2")
    ax.set_title("data and the two linear classifiers")
    ax.legend(fontsize=7, loc="lower right")
    for ax, norm in zip(axes[1:], NORMS):
        for (name, d), color in zip(exact.items(), ("tab:blue", "tab:orange")):
            e, r = step_curve(d[norm], 3.5)
            ax.step(e, r, where="post", color=color, label=name)
        ax.set_title("exact " + (r"$\ell_\infty$" if norm == "linf" else r"$\ell_2$") + " robustness curves")
        ax.set_xlabel("eps")
        ax.set_ylabel("robust error")
        ax.legend(loc="lower right")
    fig.tight_layout()
    n = int(x.shape[0])
    caption = (f"000 Figure 6 (Appendix A, Example 1) on our data (the paper gives no numbers): left, the {n} "
               f"points (two Gaussian clusters per class, mirrored through the origin) with the two error-free "
               f"linear classifiers blue sign(x1) and orange sign(x1 + x2); middle and right, their exact l_inf "
               f"and l_2 robustness curves (robust error against perturbation size, Lemma 1 distances) on all "
               f"{n} points: the l_2 curves cross, the l_inf curves do not.")
    return save_figure(fig, out, "fig6_linear_crossing.png", caption)



if __name__ == "__main__":
    main()
