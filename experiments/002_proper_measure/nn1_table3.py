"""Paper 002, Table 3: test accuracy of the 1-NN classifier on training data, with tie ranges.

Full MNIST (the paper's data: the 60,000 training images as the 1-NN's
memory, all 10,000 test images as queries) and, beyond the paper,
scikit-learn's 8x8 digits (1,438 / 359), each in l_2 and l_inf
(``rcurves.exact.nearest.nn1_neighbors``; the MNIST neighbours are cached and
shared with ``nn1_agreement.py``). l_inf distances of 8-bit images tie often
(they are multiples of 1/255), so 002 reports the accuracy as a range: "we
calculated values ignoring these samples and using the class with the largest
number of nearest neighbors". The paper's numbers fit this reading (see
:func:`paper_range`): a test image is *tied* when more than one training
image is at the nearest distance (of any class); the range is [untied and
right, untied and right + tied], and in parentheses the majority class of
the tied images, a range again where the vote itself ties (counted wrong /
right when the true class is among the winners). We also give the
class-aware range (``rcurves.exact.nearest.tie_accuracy``: tied = several classes
at the nearest distance; right only where the true class is among them).

The same data and a deterministic classifier: there is no sampling error, so
the rule is :func:`rcurves.claims.verdicts.value_matches` with a tolerance of 0.001
(10 of the 10,000 test images) for float handling of near-equal distances.

    python experiments/002_proper_measure/nn1_table3.py --out results/experiments/nn1_table3

``--quick``: digits in full; the installed 5,000-image MNIST (4,000 / 1,000)
on its first 100 test images (a stratified prefix) instead of full MNIST.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
from shared import cached_neighbors, mnist_dataset, parse_args, write_result

from rcurves.claims.record import claim

PAPER = {"l2": 0.9677, "linf": (0.6142, 0.9662), "linf_majority": (0.8416, 0.8635)}
TOL = 0.001                      # 10 of 10,000 test images: float handling of near-equal distances


def paper_range(counts: np.ndarray, y: np.ndarray) -> dict:
    """002 Table 3's l_inf range from per-class counts of the nearest training images.

    Args:
      counts: ``(n, K)`` training images at the nearest distance per class.
      y: ``(n,)`` true labels.

    Returns:
      ``{'lower'``: one nearest image and of the right class; ``'upper'``: lower
      + every tied query (more than one nearest image, any classes);
      ``'majority_lower'``, ``'majority_upper'``: the majority class of the
      nearest images is right (vote ties counted wrong / right when the true
      class is among the winners); ``'ties'``: share of tied queries``}``.
    """
    c = np.asarray(counts)
    y = np.asarray(y)
    rows = np.arange(y.size)
    tied = c.sum(1) > 1
    lower = float((~tied & (c.argmax(1) == y)).mean())
    winners = c == c.max(1, keepdims=True)
    vote_tie = winners.sum(1) > 1
    return {"lower": lower, "upper": lower + float(tied.mean()),
            "majority_lower": float((winners[rows, y] & ~vote_tie).mean()),
            "majority_upper": float(winners[rows, y].mean()), "ties": float(tied.mean())}


def main(argv=None):
    from rcurves.data import load_dataset
    from rcurves.data.sampling import describe
    from rcurves.exact.nearest import tie_accuracy

    args = parse_args(__doc__, "nn1_table3", argv)
    mnist = mnist_dataset(args)
    table = {}
    for name in (mnist, "digits"):
        xt, yt = load_dataset(name, "train")
        xq, yq = load_dataset(name, "test")
        how = f"all test images of {name}"
        if args.quick and name == "mnist":
            xq, yq = xq[:100], yq[:100]            # the served order is class-interleaved: a stratified prefix
            how = f"the first 100 (stratified) test images of {name}"
        key = "mnist" if name == mnist else name
        table[key] = {"dataset": name, "train": int(xt.shape[0]), "test": int(xq.shape[0]),
                      "sample": describe(yq, np.arange(len(yq)), how)["text"]}
        for p in ("l2", "linf"):
            nb, sec = cached_neighbors(args, xt, yt, xq, p, f"{name}-test", return_seconds=True)
            table[key][p + "_seconds"] = sec
            table[key][p] = tie_accuracy(nb, yq)._asdict()
            table[key][p + "_paper_convention"] = paper_range(nb.counts, yq)
    claims = _claims(args, table)
    write_result(args, {"table": table, "paper": PAPER, "tolerance": TOL}, claims)
    return table


def _claims(args, table):
    from rcurves.claims.verdicts import all_of, value_matches

    m = table["mnist"]
    m2, mi, mc = m["l2"], m["linf_paper_convention"], m["linf"]
    d2, di = table["digits"]["l2"], table["digits"]["linf_paper_convention"]
    rng = lambda t: (f"[{t['lower']:.4f}, {t['upper']:.4f}] ([{t['majority_lower']:.4f}, "
                     f"{t['majority_upper']:.4f}])")
    pre = ("quick run (the installed 5,000-image MNIST, not the paper's 60,000 / 10,000): " if args.quick else "")
    setting = (f"1-NN of the {m['train']} training images of {m['dataset']} on {m['sample']} (all "
               f"{m['train']} x {m['test']} distances, exact: {m['l2_seconds']:.0f} s in l_2, "
               f"{m['linf_seconds']:.0f} s in l_inf on the shared 2-core machine, cached)")
    l2 = value_matches(m2["lower"], PAPER["l2"], tol=TOL, what="l_2 1-NN accuracy")
    linf = all_of(value_matches(mi["lower"], PAPER["linf"][0], tol=TOL, what="lower end"),
                  value_matches(mi["upper"], PAPER["linf"][1], tol=TOL, what="upper end"),
                  value_matches(mi["majority_lower"], PAPER["linf_majority"][0], tol=TOL, what="majority lower"),
                  value_matches(mi["majority_upper"], PAPER["linf_majority"][1], tol=TOL, what="majority upper"))
    diffs = [abs(a - b) for a, b in ((mi["lower"], PAPER["linf"][0]), (mi["upper"], PAPER["linf"][1]),
                                     (mi["majority_lower"], PAPER["linf_majority"][0]),
                                     (mi["majority_upper"], PAPER["linf_majority"][1]))]
    wide = mi["upper"] - mi["lower"] > 0.1 and m2["upper"] == m2["lower"]
    below = mi["majority_upper"] < m2["lower"]
    n_q = m["test"]
    claims = [
        claim("002", "Table 3 (MNIST, l_2)",
              f"1-NN test accuracy on MNIST, l_2: {PAPER['l2']} (60k training images).",
              pre + f"{setting}: {m2['lower']:.4f} (no l_2 ties)", l2,
              "" if l2.ok else f"{abs(m2['lower'] - PAPER['l2']) * n_q:.0f} test images apart on the same data; the "
              "l_2 1-NN has no ties and no sampling error, so the paper's number comes from a different computation "
              "(pre-processing or data version)",
              short="1-NN test accuracy on MNIST, l_2", paper_value=f"{PAPER['l2']:.4f}",
              ours_value=f"{m2['lower']:.4f}"),
        claim("002", "Table 3 (MNIST, l_inf range)",
              f"1-NN test accuracy on MNIST, l_inf: a range [{PAPER['linf'][0]}, {PAPER['linf'][1]}] because of "
              f"ties ([{PAPER['linf_majority'][0]}, {PAPER['linf_majority'][1]}] by majority vote).",
              pre + f"{setting}, ties = more than one nearest training image (the reading the paper's numbers fit): "
              f"{rng(mi)}, ties at {mi['ties']:.1%} of the test images; class-aware (ties = several classes at the "
              f"nearest distance, right only where the true class is among them): {rng(mc)}, ties at {mc['ties']:.1%}",
              linf,
              "" if linf.ok else "on the same data and with exact l_inf distances (multiples of 1/255), the ends "
              f"differ by {', '.join(f'{d * n_q:.0f}' for d in diffs)} test images: the paper's tie handling is not "
              "stated exactly (our reading: see the script's docstring)",
              short="1-NN test accuracy on MNIST, l_inf: a range because of ties",
              paper_value=f"[{PAPER['linf'][0]:.4f}, {PAPER['linf'][1]:.4f}]",
              ours_value=f"[{mi['lower']:.4f}, {mi['upper']:.4f}]"),
        claim("002", "Table 3 (MNIST, l_inf below l_2)",
              "l_inf distances tie often, so the l_inf 1-NN's accuracy is a wide range, and even its majority vote "
              "scores below the l_2 1-NN (different metrics give different accuracies).",
              pre + f"{setting}: l_inf range width {mi['upper'] - mi['lower']:.4f} ({mi['ties']:.1%} tied); majority "
              f"vote at most {mi['majority_upper']:.4f} vs l_2 {m2['lower']:.4f}; rule: width > 0.1 and majority "
              "upper end < l_2 (exact counts, no sampling)",
              "reproduced" if wide and below else "differs",
              "" if wide and below else ("no wide l_inf range" if not wide else "the l_inf majority vote is not below "
                                                                               "l_2"),
              short="l_inf 1-NN: a wide tie range, its majority vote below the l_2 1-NN",
              paper_value=f"maj {PAPER['linf_majority'][1]:.4f} < l2 {PAPER['l2']:.4f}",
              ours_value=f"maj {mi['majority_upper']:.4f} {'<' if below else '>='} l2 {m2['lower']:.4f}"),
        claim("002", "Table 3 (digits, beyond the paper)",
              "Different distance metrics give different 1-NN accuracies.",
              f"scikit-learn digits, all {table['digits']['test']} test images, 1-NN of its "
              f"{table['digits']['train']} training images (8x8, 17 grey levels): l_2 {d2['lower']:.4f}; l_inf "
              f"{rng(di)} (ties = more than one nearest image), ties at {di['ties']:.1%}; rule: the l_2 accuracy lies "
              "outside the l_inf range",
              "reproduced" if not di["lower"] <= d2["lower"] <= di["upper"] else "differs",
              "" if not di["lower"] <= d2["lower"] <= di["upper"] else
              "the l_2 accuracy lies within the l_inf tie range: the metrics cannot be told apart here",
              kind="beyond", short="Different metrics give different 1-NN accuracies (digits)",
              paper_value="metrics differ (MNIST)",
              ours_value=f"l2 {d2['lower']:.3f}; linf {di['lower']:.2f}-{di['upper']:.2f}"),
    ]
    return claims


if __name__ == "__main__":
    main()
