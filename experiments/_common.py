"""Shared conventions of the experiment scripts (DESIGN.md, "Experiments").

Every script in ``experiments/`` reproduces one item of a paper, takes
``--out DIR`` and ``--quick`` and writes ``DIR/<name>.json`` (with a ``claims``
list) and PNGs. A claim is one statement or number of a paper, our
measurement, and a verdict::

    {"paper": "000", "item": "Figure 3", "claim": "...", "ours": "...",
     "verdict": "reproduced" | "differs" | "not reproducible here", "why": "..."}

``experiments/run_all.py`` runs every script and regenerates
``experiments/README.md`` from the claims.

Use::

    from _common import claim, parse_args, write_result
    args = parse_args(__doc__, name="fig3_slope")        # --out, --quick, --cache, --retrain, --seed
    ...
    write_result(args, {"curves": ...}, [claim("000", "Figure 3", "...", "...", "reproduced")])
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script from anywhere: import the checkout's packages
    sys.path.insert(0, ROOT)

VERDICTS = ("reproduced", "differs", "not reproducible here")
_T0 = time.time()


def claim(paper: str, item: str, statement: str, ours: str, verdict: str, why: str = "") -> Dict[str, str]:
    """One claims entry; ``verdict`` must be one of :data:`VERDICTS`, and a verdict
    other than 'reproduced' needs a ``why``."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict: expected one of {VERDICTS}, got {verdict!r}")
    if verdict != "reproduced" and not why:
        raise ValueError(f"why: a {verdict!r} claim must say why")
    return {"paper": str(paper), "item": str(item), "claim": statement, "ours": ours, "verdict": verdict,
            "why": why}


def parse_args(doc: Optional[str], name: str, argv: Optional[Sequence[str]] = None,
               extra=None) -> argparse.Namespace:
    """The common options; ``extra(parser)`` may add the script's own. ``args.name``
    is the JSON's base name."""
    first = (doc or name).strip().splitlines()[0]
    ap = argparse.ArgumentParser(description=first)
    ap.add_argument("--out", default=os.path.join("results", "experiments", name), help="output folder")
    ap.add_argument("--quick", action="store_true", help="small and fast (the test suite runs this)")
    ap.add_argument("--cache", default=None, help="model cache folder (default $RCURVES_CACHE or ~/.cache/rcurves)")
    ap.add_argument("--retrain", action="store_true", help="retrain the zoo models this script uses")
    ap.add_argument("--seed", type=int, default=0, help="PRNG seed (default 0)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    if extra is not None:
        extra(ap)
    args = ap.parse_args(argv)
    args.name = name
    os.makedirs(args.out, exist_ok=True)
    return args


def jsonable(obj: Any) -> Any:
    """numpy/jax arrays and scalars to lists and floats; inf and NaN to None (JSON has neither)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        arr = np.asarray(obj)
        if arr.ndim == 0:
            return jsonable(arr.item())
        return jsonable(arr.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    return obj


def write_result(args: argparse.Namespace, payload: Dict[str, Any], claims: List[Dict[str, str]],
                 figures: Sequence[str] = ()) -> str:
    """Write ``<out>/<name>.json`` atomically: payload, claims, figures, quick flag and run time."""
    from rcurves.checkpoint import atomic_write_json

    for c in claims:
        if set(c) != {"paper", "item", "claim", "ours", "verdict", "why"}:
            raise ValueError(f"claims: malformed entry {c!r} (use _common.claim)")
    doc = {"experiment": args.name, "quick": bool(args.quick), "seconds": round(time.time() - _T0, 1),
           "claims": claims, "figures": [os.path.basename(f) for f in figures]}
    doc.update(jsonable(payload))
    path = os.path.join(args.out, f"{args.name}.json")
    atomic_write_json(path, doc)
    for c in claims:
        print(f"[{c['verdict']}] {c['paper']} {c['item']}: {c['ours']}")
    print(f"wrote {path}")
    return path


def fmt(v: float, digits: int = 3) -> str:
    """A number for a claim's text: ``inf`` stays ``inf``."""
    v = float(v)
    return "inf" if math.isinf(v) else f"{v:.{digits}g}"


# ---------------------------------------------------------------------------
# the zoo models of the MNIST experiments, and their tiny stand-ins for --quick


def tiny_entry(name: str, hidden=(32,), epochs: int = 2, n_train: int = 512):
    """A zoo entry's recipe on a small MLP and a few hundred images: the stand-in
    ``--quick`` uses, so that it runs on a fresh machine in seconds (the numbers it
    gives are not the paper's claims, only the code path and the exact facts)."""
    import dataclasses

    from rcurves import zoo
    from rcurves.models import ModelConfig

    e = zoo.entry(name)
    mlp = ModelConfig(arch="mlp", input_shape=e.model.input_shape, n_classes=e.model.n_classes, hidden=hidden)
    t = dataclasses.replace(e.train, epochs=epochs, batch_size=64, attack_steps=3,
                            warmup_epochs=min(e.train.warmup_epochs, 1.0))
    return dataclasses.replace(e, name="quick-" + name, model=mlp, train=t, n_train=n_train,
                               note="--quick stand-in: " + e.note)


QUICK_MODELS = ("mnist-cnn-st", "mnist-cnn-at-linf-0.3", "mnist-cnn-at-l2-1.5")


def zoo_models(args, names: Sequence[str]):
    """``{label: ZooModel}`` of zoo entries (tiny stand-ins with ``--quick``), labelled by their
    training ('ST', 'AT-linf-0.3', ...)."""
    from rcurves import zoo

    out = {}
    for name in names:
        if args.quick and name not in QUICK_MODELS:
            continue   # --quick: a subset (every model is another compilation of each attack)
        e = tiny_entry(name) if args.quick else zoo.entry(name)
        m = zoo.load(e, cache=args.cache, retrain=args.retrain, progress=not args.no_progress)
        out[e.train.name] = m
    return out


def zoo_attack(quick: bool):
    """The attack budget of the zoo evaluations (see :func:`zoo_evaluation`)."""
    from rcurves import evaluate

    if quick:
        return evaluate.AttackSettings(gradients=40, cw=False)
    return evaluate.AttackSettings(cw=True, cw_binary_search_steps=10, cw_steps=100, cw_lr=0.05)


def zoo_evaluation(args, names: Sequence[str], norms: Sequence[str] = ("linf", "l2"), n: Optional[int] = None,
                   attack=None, dataset: str = "mnist"):
    """The held-out evaluation of zoo models, shared by the experiments that need it.

    Runs are kept under ``<cache>/evaluations/<dataset>[-quick]`` and resumed, so
    Table 1, Figures 2-4 and 7 compute each (model, norm) once. ``--quick``: 32
    points and a 40-gradient attack budget on the tiny stand-ins. Default
    attack: ``minimal_distance``'s default schedule (4 targeted APGD lanes x
    5 steps x 8 radius rounds + 54 FMN steps for l_inf, x 7 steps x 6 rounds
    + 46 for l_2, + a 10-pass Jacobian ranking the targets: 224 gradients per
    point) and,
    for l_2, also CW (10 constants x 100 steps), keeping per point the smaller
    verified distance.
    """
    from rcurves import evaluate, zoo

    if attack is None:
        attack = zoo_attack(args.quick)
    models = zoo_models(args, names)
    cache = args.cache or zoo.default_cache()
    out_dir = os.path.join(cache, "evaluations", dataset + ("-quick" if args.quick else ""))
    return evaluate.evaluate({k: m for k, m in models.items()}, dataset, norms=norms,
                             n=32 if (args.quick and n is None) else n, attack=attack, seed=args.seed,
                             out_dir=out_dir, progress=not args.no_progress), models
