"""Paper 002, Figure 1 and Theorem 1 on full MNIST: near pairs of different classes, and overlapping balls.

* **Figure 1** shows "confusing near image pairs with different classes of
  MNIST training dataset" at l_2 distances 2.399, 3.100 and 3.131. We compute
  every pair of training images of different classes within l_2 distance
  ``RADIUS`` among full MNIST's 60,000 training images (:func:`interclass_pairs`:
  a float32 matrix-product screen with a margin, then the exact float64
  distance of every candidate) and look the three distances up (to the
  printed 3 decimals). Whether humans find the pairs confusing (the paper's
  point: the exclusive class assumption can fail) is not measured here.
* **Theorem 1**: genuine adversarial accuracy uses each point once (no
  overlaps), so it has no accuracy-robustness tradeoff: the 1-NN classifier of
  the data keeps a_gen = 1 at every eps (Theorem 2). Standard adversarial
  accuracy counts a point for every data point within eps: two training
  images of different classes at distance <= 2 eps share their midpoint, so
  any classifier fails one of them; over a matching of such pairs (disjoint),
  ``a_std(eps) <= 1 - M(eps) / n`` for EVERY classifier (:func:`std_accuracy_bound`,
  M from a greedy maximal matching, a lower bound on the maximum one, so the
  bound is valid). Beyond the paper we measure this on MNIST's training set
  (l_2), and probe with the 10,000 test images: the share lying within eps
  of training images of two or more classes (counted against some class by
  a_std, once by a_gen), in l_2 and l_inf, from the cached 1-NN neighbours
  (``nn1_table3.py``).

    python experiments/002_proper_measure/genuine_mnist.py --out results/experiments/genuine_mnist

``--quick``: the installed 5,000-image MNIST (4,000 training images, its
1,000 test images).
"""
from __future__ import annotations

import pathlib
import sys
from typing import Tuple

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
from shared import cached_neighbors, mnist_dataset, parse_args, save_figure, write_result

from rcurves.claims.record import claim

PAPER_PAIRS = (2.399, 3.100, 3.131)
RADIUS = 5.0                                  # l_2: all inter-class pairs up to 2 x the largest eps below
EPS_L2 = (1.0, 1.2, 1.5, 2.0, 2.5)
EPS_LINF = (0.1, 0.2, 0.3, 0.4)


def interclass_pairs(x: np.ndarray, y: np.ndarray, radius: float, block: int = 2048,
                     margin: float = 0.05) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``i < j`` with ``y_i != y_j`` and exact l_2 distance ``<= radius``.

    Screens with the float32 expansion ``|a|^2 + |b|^2 - 2 a.b <= radius^2 +
    margin`` (its rounding error on [0, 1] images of 784 pixels is far below
    ``margin``), block by block over the upper triangle, then recomputes every
    candidate's distance in float64 by differences and keeps those within
    ``radius``.

    Args:
      x: ``(n, ...)`` images; y: ``(n,)`` labels; radius: l_2 radius.

    Returns:
      ``(i, j, d)``: int64 indices with ``i < j`` and float64 distances, sorted by ``d``.
    """
    X = np.asarray(x, np.float32).reshape(len(x), -1)
    y = np.asarray(y)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y: expected shape ({X.shape[0]},), got {y.shape}")
    if not radius > 0:
        raise ValueError(f"radius: expected > 0, got {radius!r}")
    sq = (X * X).sum(1)
    thr = radius * radius + margin
    I, J = [], []
    for s in range(0, X.shape[0], block):                  # row blocks against the columns from s on
        d2 = sq[s:s + block, None] + sq[None, s:] - 2.0 * (X[s:s + block] @ X[s:].T)
        ii, jj = np.nonzero(d2 <= thr)
        ii, jj = ii + s, jj + s
        keep = (jj > ii) & (y[ii] != y[jj])
        I.append(ii[keep])
        J.append(jj[keep])
    I, J = np.concatenate(I).astype(np.int64), np.concatenate(J).astype(np.int64)
    Xd = np.asarray(x, np.float64).reshape(len(x), -1)
    d = np.sqrt(((Xd[I] - Xd[J]) ** 2).sum(1)) if I.size else np.zeros(0)
    k = d <= radius
    o = np.argsort(d[k], kind="stable")
    return I[k][o], J[k][o], d[k][o]


def greedy_matching(i: np.ndarray, j: np.ndarray, n: int) -> int:
    """Size of the greedy maximal matching over the edges ``(i, j)`` in the given order (<= the maximum one)."""
    used = np.zeros(n, bool)
    m = 0
    for a, b in zip(i.tolist(), j.tolist()):               # a loop over edges (graph code, not an attack)
        if not used[a] and not used[b]:
            used[a] = used[b] = True
            m += 1
    return m


def std_accuracy_bound(i: np.ndarray, j: np.ndarray, d: np.ndarray, n: int, eps) -> np.ndarray:
    """Upper bound on any classifier's standard adversarial accuracy (closed eps-balls, l_2) on the n points.

    Two points of different classes at distance ``<= 2 eps`` share the midpoint,
    within eps of both, which no classifier labels as both: a matching of such
    pairs (disjoint) forces ``M`` failures. Returns ``1 - M(eps) / n`` per eps.
    """
    return np.array([1.0 - greedy_matching(i[d <= 2 * e], j[d <= 2 * e], n) / n for e in np.atleast_1d(eps)])


def multi_class_within(class_distance: np.ndarray, eps) -> np.ndarray:
    """Share of queries within ``eps`` of training points of two or more classes, per eps.

    Args:
      class_distance: ``(n, K)`` nearest distance per class (``Neighbors.class_distance``).
    """
    cd = np.asarray(class_distance)
    return np.array([float(((cd <= e).sum(1) >= 2).mean()) for e in np.atleast_1d(eps)])


def main(argv=None):
    from rcurves.data import load_dataset
    from rcurves.data.sampling import describe

    args = parse_args(__doc__, "genuine_mnist", argv)
    name = mnist_dataset(args)
    xt, yt = load_dataset(name, "train")
    xq, yq = load_dataset(name, "test")
    if args.quick:
        xq, yq = xq[:200], yq[:200]               # the served order is class-interleaved: a stratified prefix
    n = int(xt.shape[0])
    i, j, d = interclass_pairs(xt, yt, RADIUS)
    found = {}
    for v in PAPER_PAIRS:
        m = np.flatnonzero(np.round(d, 3) == v)
        found[f"{v:.3f}"] = [{"i": int(i[k]), "j": int(j[k]), "labels": [int(yt[i[k]]), int(yt[j[k]])],
                              "distance": float(d[k]), "rank": int(k)} for k in m]
    closest = [{"i": int(i[k]), "j": int(j[k]), "labels": [int(yt[i[k]]), int(yt[j[k]])], "distance": float(d[k])}
               for k in range(min(10, d.size))]
    bound = std_accuracy_bound(i, j, d, n, EPS_L2)
    near = {f"{e:g}": int(np.union1d(i[d <= 2 * e], j[d <= 2 * e]).size) for e in EPS_L2}
    probes = {}
    for p, grid in (("l2", EPS_L2), ("linf", EPS_LINF)):
        nb = cached_neighbors(args, xt, yt, xq, p, f"{name}-test")
        probes[p] = {"eps": list(grid), "multi_class": multi_class_within(nb.class_distance, grid).tolist(),
                     "nearest_tied": float((nb.counts.sum(1) > 1).mean())}
    sample = describe(yq, np.arange(len(yq)), (f"the first {len(yq)} (stratified) test images of {name}" if args.quick
                                               else f"all test images of {name}"))["text"]
    claims = _claims(args, name, n, d, found, closest, bound, near, probes, sample)
    figures = [_plot(xt, found, closest, name, n, args)]
    payload = {"dataset": name, "n_train": n, "radius": RADIUS, "pairs_within_radius": int(d.size),
               "closest": closest, "paper_pairs": found, "eps_l2": EPS_L2, "std_accuracy_bound": bound,
               "points_with_conflict": near, "test_probes": probes}
    write_result(args, payload, claims, figures)
    return payload


def _claims(args, name, n, d, found, closest, bound, near, probes, sample):
    pre = "quick run (the installed 5,000-image MNIST, not the paper's 60,000 training images): " if args.quick else ""
    hit = all(found[f"{v:.3f}"] for v in PAPER_PAIRS)
    d_min = float(d[0]) if d.size else float("inf")
    lines = []
    for v in PAPER_PAIRS:
        f = found[f"{v:.3f}"]
        lines.append(f"{v:.3f}: " + (", ".join(f"{r['labels'][0]} vs {r['labels'][1]} at {r['distance']:.5f} (rank "
                                              f"{r['rank'] + 1})" for r in f) if f else "no pair"))
    fig1 = claim("002", "Figure 1 (near pairs of different classes, l_2)",
                 "MNIST's training set holds pairs of images of different classes at l_2 distances 2.399, 3.100 and "
                 "3.131 (examples of confusing near pairs: the exclusive class assumption can fail).",
                 pre + f"all {d.size} pairs of different classes within l_2 {RADIUS:g} among the {n} training images "
                 f"of {name} (exact float64 distances after a float32 screen): " + "; ".join(lines)
                 + (f"; the closest pair overall is at {d_min:.4f} ({closest[0]['labels'][0]} vs "
                    f"{closest[0]['labels'][1]})" if closest else "; no pair within the radius")
                 + "; rule: each printed distance is a pair's distance rounded to 3 decimals (exact search, no "
                 "sampling)",
                 "reproduced" if hit else "differs",
                 "" if hit else "some printed distance is no pair's distance in this training set",
                 short="MNIST training pairs of different classes at l_2 2.399, 3.100, 3.131",
                 paper_value=", ".join(f"{v:.3f}" for v in PAPER_PAIRS),
                 ours_value=f"{sum(bool(found[f'{v:.3f}']) for v in PAPER_PAIRS)} of {len(PAPER_PAIRS)} found"
                            + (f"; min {d_min:.3f}" if closest else ""))
    human = claim("002", "Figure 1 (humans find the pairs confusing)",
                  "For the top right sample some people assign class 1 or 9 instead of 7: the exclusive class "
                  "assumption can be violated.",
                  "the pairs are shown in genuine_mnist.png; no human labels here", "not reproducible here",
                  "needs human labellers", short="People label a near pair's 7 as 1 or 9",
                  paper_value="some say 1 or 9, not 7", ours_value="no human labels here")
    e_first = next((e for e, b in zip(EPS_L2, bound) if b < 1.0), None)
    tradeoff = bool(e_first is not None)
    pl2, pli = probes["l2"], probes["linf"]
    thm1 = claim("002", "Theorem 1 on MNIST (beyond the paper: overlaps of standard adversarial accuracy)",
                 "Standard adversarial accuracy counts a point for every data point within eps (overlaps), so on data "
                 "with near pairs of different classes no classifier reaches a_std(eps) = 1 once eps >= half their "
                 "distance; genuine adversarial accuracy uses each point once and the 1-NN keeps a_gen = 1 at every "
                 "eps.",
                 pre + f"{n} training images of {name}, l_2: smallest inter-class distance {d_min:.4f}, so overlaps "
                 f"from eps = {d_min / 2:.4f}; upper bound 1 - M/n on every classifier's a_std (M: greedy matching of "
                 "inter-class pairs within 2 eps) " + ", ".join(f"eps {e:g}: {b:.5f} (M = {round((1 - b) * n)}; "
                                                                f"{near[f'{e:g}']} images in such pairs)"
                                                                for e, b in zip(EPS_L2, bound))
                 + f"; the 1-NN: a_gen = 1 at every eps (Theorem 2, exact). Test-image probes ({sample}) within eps of "
                 "training images of >= 2 classes: l_2 " + ", ".join(f"{e:g}: {v:.3f}" for e, v in
                                                                      zip(pl2["eps"], pl2["multi_class"]))
                 + "; l_inf " + ", ".join(f"{e:g}: {v:.3f}" for e, v in zip(pli["eps"], pli["multi_class"]))
                 + f" (l_inf nearest training image tied for {pli['nearest_tied']:.1%}: Voronoi-boundary points, left "
                 "out by a_gen); rule: the bound falls below 1 within the eps grid (exact counts)",
                 "reproduced" if tradeoff else "differs",
                 "" if tradeoff else f"no inter-class pair within 2 x {max(EPS_L2):g}: no forced tradeoff in this "
                                     "range",
                 kind="beyond", short="Near pairs of different classes cap every classifier's a_std below 1",
                 paper_value="a_std < 1 from eps d/2",
                 ours_value=(f"bound {bound[-1]:.4f} at eps {EPS_L2[-1]:g}" if tradeoff
                             else f"bound 1 up to eps {EPS_L2[-1]:g}"))
    return [fig1, human, thm1]


def _plot(xt, found, closest, name, n, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = [(r, f"paper {k}") for k, rs in found.items() for r in rs[:1]]
    pairs += [(r, "closest") for r in closest[:3] if all(r["i"] != q["i"] or r["j"] != q["j"] for q, _ in pairs)]
    pairs = pairs[:6]
    fig, axes = plt.subplots(2, max(1, len(pairs)), figsize=(2.0 * max(1, len(pairs)), 4.2), squeeze=False)
    for c, (r, what) in enumerate(pairs):
        for row, (idx, lab) in enumerate(((r["i"], r["labels"][0]), (r["j"], r["labels"][1]))):
            axes[row, c].imshow(xt[idx, ..., 0], cmap="gray", vmin=0, vmax=1)
            axes[row, c].set_title(f"#{idx}: {lab}" + (f"\n{what} d={r['distance']:.3f}" if row == 0 else ""),
                                   fontsize=7)
    for ax in axes.ravel():
        ax.axis("off")
    fig.tight_layout()
    shown = "; ".join(f"{what}: #{r['i']} ({r['labels'][0]}) and #{r['j']} ({r['labels'][1]}) at "
                      f"{r['distance']:.3f}" for r, what in pairs)
    return save_figure(fig, args, "genuine_mnist.png",
                       f"002 Figure 1 redrawn: near pairs of training images of different classes (each column a "
                       f"pair, index and label above each image) among the {n} training images of {name}, found by "
                       f"an exact search of all inter-class pairs within l_2 {RADIUS:g}: the first pair at each of "
                       f"the paper's distances 2.399, 3.100, 3.131 and the closest pairs overall ({shown})", dpi=110)


if __name__ == "__main__":
    main()
