"""The model zoo, measured: held-out accuracy and robust error at each model's training eps.

For every entry of ``rcurves.models.zoo`` (trained on first use): clean accuracy on
the held-out split, and the robust error ``R(eps)`` at the training eps in the
training norm (l_inf 0.1 for the ST models on MNIST, 0.05 on digits, as a
reference), from the default attack (``attacks.adaptive_distance``: the
224-gradient default search, escalated where a point's distance is in doubt;
for l_2 also CW, 10 x 100, keeping the smaller verified distance)
on the **whole** held-out split for the models with targets and the 5k and
digits sets (full MNIST's 10,000 test images, the 5k set's 1,000, digits'
359), and on a random sample of 2,000 of full MNIST's test images for the
other full-MNIST models (``--n-other``; the table says how many). Prints the markdown table the top-level README
quotes and checks the zoo's targets: on full MNIST (issue 26) ST >= 98.8 %
clean, the l_inf 0.3 AT model >= 98 % clean with robust error at 0.3 <= 0.12;
on the 5k set ST >= 96.5 % clean, the l_inf 0.3 AT model >= 95 % clean with
robust error at 0.3 <= 0.35. These are targets of this project, not claims of
a paper, so the claims list is empty.

Each model's measured numbers are recorded beside its shipped weights, in
``rcurves/models/weights/measured.json`` (with the recipe key they were
measured under), and ``--tables`` regenerates the zoo tables of README.md and
docs/zoo.md from what the weights record (held-out accuracy, epochs,
training time: ``meta.json``) and from those measurements, without running
anything; a number measured under an older recipe is not shown.

    python experiments/zoo_table.py --out results/experiments/zoo_table
    python experiments/zoo_table.py --models mnist-full-cnn-st,mnist-full-cnn-at-linf-0.3
    python experiments/zoo_table.py --tables          # README.md and docs/zoo.md from the recorded numbers
"""
from __future__ import annotations

import json
import os
import re

import numpy as np

from shared import parse_args, write_result, zoo_attack

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: what a measured row's distances come from (``evaluation.AttackSettings``' default: the adaptive search)
ATTACK_LABEL = ("attacks.adaptive_distance (the 224-gradient default search, more searches where a distance is in "
                "doubt); l2 also CW 10 x 100")
MARKERS = {  # file: [(marker, which rows)]
    "README.md": [("zoo-table", "mnist-full")],
    os.path.join("docs", "zoo.md"): [("zoo-table-full", "mnist-full"), ("zoo-table-5k", "small")],
}

TARGETS = {  # name: (clean accuracy >=, (eps, robust error <=) or None)
    "mnist-full-cnn-st": (0.988, None),
    "mnist-full-cnn-at-linf-0.3": (0.98, (0.3, 0.12)),
    "mnist-cnn-st": (0.965, None),
    "mnist-cnn-at-linf-0.3": (0.95, (0.3, 0.35)),
}


def reference(e):
    """(norm, eps) at which an entry's robust error is reported."""
    tr = e.train
    if tr.eps > 0:   # AT, TRADES, certified training, MMR + AT: the training threat model
        return tr.norm, tr.eps
    return "linf", 0.05 if e.dataset == "digits" else 0.1


def measured_path() -> str:
    from rcurves.models import shipped

    return os.path.join(shipped.weights_dir(), "measured.json")


def load_measured() -> dict:
    path = measured_path()
    return json.load(open(path)) if os.path.isfile(path) else {}


def record_measured(name: str, row: dict) -> None:
    """Keep one model's measured row beside its shipped weights (atomic; other models' rows kept)."""
    from rcurves.files import atomic_write_json

    got = load_measured()
    got[name] = row
    atomic_write_json(measured_path(), dict(sorted(got.items())))


def table_rows(which: str):
    """Markdown rows of the shipped models of ``which`` ('mnist-full' or 'small': the 5k set and digits)."""
    from rcurves.models import shipped, zoo

    listed, measured = shipped.manifest(), load_measured()
    lines = ["| model | training | held-out accuracy | robust error (norm, eps) | median distance | test points "
             "| training time |", "|---|---|---|---|---|---|---|"]
    for name, e in zoo.ENTRIES.items():
        if (e.dataset == "mnist-full") != (which == "mnist-full"):
            continue
        rec = listed.get(name)
        if rec is None or zoo.cache_key(e, rec["data_fingerprint"]) != rec["recipe_key"]:
            lines.append(f"| `{name}` | {e.train.name}, {e.train.epochs} epochs | not shipped | | | | |")
            continue
        meta = json.load(open(os.path.join(shipped.weights_dir(), rec["folder"], "meta.json")))
        m = meta["metrics"]
        r = measured.get(name)
        if r is not None and r.get("recipe_key") == rec["recipe_key"]:
            robust = f"{r['robust_error']:.3f} ({r['norm']}, {r['eps']:g})"
            med, pts = f"{r['median_distance']:.4g}", f"{r['n_test']:,}" + ("" if r.get("whole_split") else " random")
        else:
            robust, med, pts = "not measured", "", ""
        data = "" if which == "mnist-full" else f" ({e.dataset})"
        lines.append(f"| `{name}`{data} | {e.train.name}, {e.train.epochs} epochs | {m['test_accuracy']:.4f} | "
                     f"{robust} | {med} | {pts} | {m.get('train_seconds', float('nan')):.0f} s |")
    return lines


def write_tables(root: str = ROOT) -> list:
    """Replace the zoo tables between their markers in README.md and docs/zoo.md; returns the files written."""
    from rcurves.files import write_text

    written = []
    for rel, marks in MARKERS.items():
        path = os.path.join(root, rel)
        text = open(path).read()
        for marker, which in marks:
            pat = re.compile(rf"(<!-- {marker}:start -->\n).*?(<!-- {marker}:end -->)", re.S)
            if not pat.search(text):
                raise ValueError(f"{rel}: no <!-- {marker}:start --> ... <!-- {marker}:end --> markers")
            body = "\n".join(table_rows(which)) + "\n"
            text = pat.sub(lambda mt: mt.group(1) + body + mt.group(2), text)
        write_text(path, text)
        written.append(path)
    return written


def main(argv=None):
    from rcurves.pipeline import evaluation
    from rcurves.models import zoo

    def extra(ap):
        ap.add_argument("--models", default=None, help="comma-separated entries (default: all)")
        ap.add_argument("--n-other", type=int, default=2000,
                        help="random test points of the full-MNIST models without targets (default 2000)")
        ap.add_argument("--tables", action="store_true",
                        help="measure nothing: write the zoo tables of README.md and docs/zoo.md from the shipped "
                             "models' recorded numbers")

    args = parse_args(__doc__, "zoo_table", argv, extra=extra)
    if args.tables:
        for path in write_tables():
            print(f"wrote {path}")
        return {}
    names = zoo.names() if not args.models else [s.strip() for s in args.models.split(",") if s.strip()]
    if args.quick:
        names = ["digits-mlp-st"]
    rows = {}
    cache = args.cache or zoo.default_cache()
    attack = zoo_attack(args.quick)
    for name in names:
        e = zoo.entry(name)
        if args.quick:
            from shared import tiny_entry
            e = tiny_entry(name)
        m = zoo.load(e, cache=cache, retrain=args.retrain, progress=not args.no_progress)
        norm, eps = reference(e)
        n = None if (e.dataset != "mnist-full" or name in TARGETS) else args.n_other
        ev = evaluation.evaluate({name: m}, e.dataset, norms=(norm,), thresholds={norm: (eps,)}, attack=attack,
                               n=32 if args.quick else n, seed=args.seed,
                               out_dir=os.path.join(cache, "evaluations", "zoo-table" + ("-quick" if args.quick else "")),
                               progress=not args.no_progress)
        d = ev.distance(name, norm)
        rows[name] = {"dataset": e.dataset, "arch": e.model.arch, "training": e.train.name, "n_test": int(d.shape[0]),
                      "test_accuracy": m.metrics["test_accuracy"], "train_seconds": m.metrics.get("train_seconds"),
                      "norm": norm, "eps": eps, "robust_error": float(ev.robust_error(name, norm, eps)),
                      "median_distance": float(np.median(d)), "note": e.note}
        if not args.quick and m.source == "shipped":
            record_measured(name, {"recipe_key": zoo.recipe_key(e), "norm": norm, "eps": eps,
                                   "robust_error": rows[name]["robust_error"],
                                   "median_distance": rows[name]["median_distance"], "n_test": rows[name]["n_test"],
                                   "whole_split": n is None, "seed": args.seed,
                                   "attack": ATTACK_LABEL})
        print(f"{name}: {rows[name]['test_accuracy']:.4f} clean, R({eps:g}, {norm}) = "
              f"{rows[name]['robust_error']:.4f} on {d.shape[0]} points", flush=True)
    lines = ["| model | data | arch | training | held-out accuracy | robust error (norm, eps) | median distance | "
             "test points | training time |", "|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| `{name}` | {r['dataset']} | {r['arch']} | {r['training']} | {r['test_accuracy']:.4f} | "
                     f"{r['robust_error']:.3f} ({r['norm']}, {r['eps']:g}) | {r['median_distance']:.4g} | "
                     f"{r['n_test']:,} | {r['train_seconds']:.0f} s |")
    table = "\n".join(lines)
    print(table)
    targets = {}
    for name, (acc, robust) in TARGETS.items():
        if name not in rows:
            continue
        r = rows[name]
        targets[f"{name} clean >= {acc}"] = {"value": r["test_accuracy"], "met": r["test_accuracy"] >= acc}
        if robust is not None:
            targets[f"{name} robust error at {robust[0]:g} <= {robust[1]}"] = {
                "value": r["robust_error"], "met": r["robust_error"] <= robust[1]}
    for k, v in targets.items():
        print(f"target {k}: {v['value']:.4f} {'met' if v['met'] else 'MISSED'}")
    write_result(args, {"rows": rows, "markdown": table, "targets": targets}, [])
    return rows


if __name__ == "__main__":
    main()
