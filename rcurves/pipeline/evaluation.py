"""The evaluation pipeline: models x data x norms -> distances, curves, robust errors, rank flips.

Three lines from a research script::

    from rcurves.pipeline import evaluation as evaluate
    ev = evaluate.evaluate(["mnist-cnn-st", "mnist-cnn-at-linf-0.3"], "mnist", norms=("linf", "l2"))
    ev.save("results/mine"); print(ev.table())

Models may be zoo names (:mod:`rcurves.models.zoo`, trained and cached on first
use), checkpoint folders, ``module:function`` specs, ``ZooModel``\\ s or bare
``logits_fn``\\ s (a mapping gives them labels). Data may be ``'mnist'`` or
``'digits'`` (their held-out split), a ``.npz`` path or an ``(x, y)`` pair.

Per model and norm, every point's minimal adversarial distance comes from
``attacks.minimal_distance`` (the APGD radius search) and, for l_2, also
Carlini-Wagner, keeping per point the smaller *verified* distance
(:mod:`rcurves.pipeline.runner`); ``inf`` where no attack found an adversarial, ``0``
where the point is misclassified. With ``out_dir`` the runs are chunked and
written atomically under ``out_dir/runs/<model>__<norm>``, so an interrupted
evaluation resumes and a repeated one reuses its results (the manifest holds
the model's identity, the attack settings, a fingerprint of the ``attacks``
package's code and the data's fingerprint; any change recomputes).

:class:`Evaluation` holds the distances and turns them into the robust-error
table of paper 000 Table 1 with ranks, the exact curve intersections
(:func:`rcurves.pipeline.report.ranking_flips`), and files (:meth:`Evaluation.save`).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import tempfile
import time
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from rcurves.data.loader import Data, as_data
from rcurves.models.loader import LoadedModel, check_model_on_data, clean_accuracy, load
from rcurves.files import from_json_list
from rcurves.pipeline.report import DEFAULT_THRESHOLDS, build_report, write_report


@dataclasses.dataclass(frozen=True)
class AttackSettings:
    """Attack budget of an evaluation, per norm (see ``runner.DistanceConfig``).

    ``search_steps``/``steps``/``restarts``/``polish_steps`` None:
    ``attacks.minimal_distance``'s defaults for the model's number of classes
    (for l_inf on 10 classes: 4 targeted lanes x 5 steps x 7 rounds + 74 FMN
    steps + the 10-pass Jacobian that ranks the targets; l_2: x 7 steps x 6
    rounds + 46 + 10; 224 gradients per point). ``gradients``: instead, that
    schedule scaled to about this many gradients per point. ``ensemble``:
    spend that budget (default 1,000) in ``attacks.ensemble``'s default
    members instead (independent searches and FMN from 600 gradients).
    ``cw``: for l_2 also run Carlini-Wagner and keep the smaller verified
    distance per point. ``adaptive``: None (default) measures with
    ``attacks.adaptive_distance`` (the default search, a cheap probe, and more
    independent searches only where a point's distance is in doubt) unless a
    schedule, a budget or ``ensemble`` is given; False: one fixed-budget
    search per point (the earlier default); see ``runner.DistanceConfig``.
    """

    search_steps: Optional[int] = None
    steps: Optional[int] = None
    restarts: Optional[int] = None
    polish_steps: Optional[int] = None
    gradients: Optional[int] = None
    ensemble: bool = False
    cw: bool = True
    cw_binary_search_steps: int = 5
    cw_steps: int = 50
    cw_lr: float = 0.1
    adaptive: Optional[bool] = None

    def distance_config(self, norm: str, bounds, eps_max: Optional[float] = None):
        from rcurves.pipeline.runner import DistanceConfig

        return DistanceConfig(
            norm=norm, search_steps=self.search_steps, steps=self.steps, restarts=self.restarts,
            polish_steps=self.polish_steps, gradients=self.gradients, ensemble=self.ensemble, eps_max=eps_max,
            cw=self.cw and norm == "l2", cw_binary_search_steps=self.cw_binary_search_steps,
            cw_steps=self.cw_steps, cw_lr=self.cw_lr, bounds=bounds, adaptive=self.adaptive,
        )


Distances = Dict[str, Dict[str, Dict[str, np.ndarray]]]  # {model: {norm: {'distance', 'pgd'[, 'cw'][, 'cross']}}}


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Per-point distances of several models on one point set, and what follows from them.

    Attributes:
      data: the point set (``x (n, ...)``, ``y (n,)``).
      distances: ``{model: {norm: {'distance': (n,), 'pgd': (n,)[, 'cw': (n,)][, 'cross': (n,)]}}}``;
        ``'distance'`` is the per-point minimum over the attacks and, with several norms,
        the other norms' verified adversarials measured in this norm (``'cross'``,
        :func:`compute_distances`).
      thresholds: ``{norm: [eps, ...]}`` of the table.
      accuracy: clean accuracy of each model on ``data``.
      models_info: JSON-ready provenance per model.
      settings: JSON-ready attack settings.
      seconds: wall time of the distance computation.
    """

    data: Data
    distances: Distances
    thresholds: Dict[str, Tuple[float, ...]]
    accuracy: Dict[str, float]
    models_info: Dict[str, Dict[str, Any]]
    settings: Dict[str, Any]
    seconds: float = 0.0

    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(self.distances)

    @property
    def norms(self) -> Tuple[str, ...]:
        return tuple(self.thresholds)

    def distance(self, model: str, norm: str) -> np.ndarray:
        """``(n,)`` float64 minimal distances (``inf``: not broken)."""
        return np.asarray(self.distances[model][norm]["distance"], np.float64)

    def robust_error(self, model: str, norm: str, eps) -> np.ndarray:
        """``R(eps) = P(d <= eps)`` at each ``eps`` (paper 000, Definition 1)."""
        from rcurves.curves import robust_error

        return np.asarray(robust_error(self.distance(model, norm), eps), np.float64)

    def flips(self, norm: str) -> list:
        """``[{'a', 'b', 'eps': [...], 'more_robust_first'}]`` for every pair of models."""
        return self.report()[0]["intersections"][norm]

    def report(self) -> Tuple[Dict[str, Any], str]:
        """``(doc, table)``: the JSON document and the printed robust-error table."""
        info = {m: dict(self.models_info.get(m, {}), clean_accuracy=self.accuracy.get(m)) for m in self.labels}
        doc, table = build_report(self.distances, self.thresholds, data=self.data, models_info=info,
                                  settings=self.settings)
        doc["seconds"] = round(self.seconds, 1)
        return doc, table

    def table(self) -> str:
        """The robust error of each model at each threshold with its rank, and where rankings flip."""
        return self.report()[1]

    def save(self, out_dir: str, title: Optional[str] = None) -> list:
        """Write ``curves.json``, ``curves.csv``, ``distances.csv``, ``table.txt``, ``curves.png``; returns the paths."""
        doc, table = self.report()
        return write_report(out_dir, doc, table, self.distances, self.thresholds, self.data.y,
                            title or f"robustness curves on {self.data.name}")

    @classmethod
    def load(cls, path: str) -> "Evaluation":
        """Read a saved evaluation (``curves.json`` or its folder); ``data.x`` is not stored (empty)."""
        import json

        if os.path.isdir(path):
            path = os.path.join(path, "curves.json")
        with open(path) as f:
            doc = json.load(f)
        y = np.asarray(doc["labels"], np.int64)
        data = Data(doc["data"]["name"], np.zeros((y.shape[0], 0), np.float32), y)
        dist: Distances = {}
        for m in doc["distances"]:
            dist[m] = {}
            for norm, d in doc["distances"][m].items():
                dist[m][norm] = {"distance": from_json_list(d)}
                for k, v in doc["attack_distances"][m][norm].items():
                    dist[m][norm][k] = from_json_list(v)
        acc = {m: doc["models"][m].get("clean_accuracy") for m in doc["models"]}
        info = {m: {k: v for k, v in doc["models"][m].items() if k != "clean_accuracy"} for m in doc["models"]}
        return cls(data, dist, {k: tuple(v) for k, v in doc["thresholds"].items()}, acc, info,
                   doc.get("settings", {}), doc.get("seconds", 0.0))


@functools.lru_cache(maxsize=1)
def attacks_fingerprint(root: Optional[str] = None) -> str:
    """sha256 (16 hex digits) of the ``attacks`` package's code: part of every run's
    manifest, so that saved distances are never reused after the attacks' code (and
    with it possibly their defaults) changed. Each module counts by its
    :func:`rcurves.claims.record.code_digest` (its AST without docstrings), so an
    edit to a docstring, a comment or the formatting keeps every saved run.
    ``root``: the package's folder (default: the installed ``attacks``)."""
    import attacks
    from rcurves.claims.record import code_digest

    h = hashlib.sha256()
    root = root or os.path.dirname(os.path.abspath(attacks.__file__))
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            h.update(name.encode())
            with open(os.path.join(root, name), "rb") as f:
                raw = f.read()
            try:
                h.update(code_digest(raw.decode("utf-8")).encode())
            except (SyntaxError, UnicodeDecodeError, ValueError):   # not parseable: its text counts
                h.update(hashlib.sha256(raw).hexdigest().encode())
    return h.hexdigest()[:16]


def _safe_name(label: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
    return keep or "model"


def _models(models) -> Dict[str, LoadedModel]:
    if isinstance(models, Mapping):
        items = [load(m, label) for label, m in models.items()]
    elif isinstance(models, (str, LoadedModel)) or callable(models) or hasattr(models, "logits_fn"):
        items = [load(models)]
    else:
        items = [load(m) for m in models]
    out: Dict[str, LoadedModel] = {}
    for i, m in enumerate(items):
        label = m.label if m.label not in out else f"{m.label}#{i + 1}"
        out[label] = m._replace(label=label)
    if not out:
        raise ValueError("models: expected at least one model")
    return out


def _thresholds(norms: Sequence[str], thresholds: Optional[Mapping[str, Sequence[float]]]) -> Dict[str, Tuple[float, ...]]:
    out = {}
    for norm in norms:
        vals = (thresholds or {}).get(norm, DEFAULT_THRESHOLDS[norm])
        vals = tuple(sorted(float(v) for v in vals))
        if not vals or any(not np.isfinite(v) or v < 0 for v in vals):
            raise ValueError(f"thresholds[{norm!r}]: expected finite values >= 0, got {vals}")
        out[norm] = vals
    return out


def compute_distances(
    models: Mapping[str, LoadedModel],
    data: Data,
    norms: Sequence[str],
    attack: AttackSettings,
    *,
    out_dir: str,
    bounds,
    seed: int = 0,
    chunk_size: Union[int, str] = 100,
    resume: bool = True,
    on_mismatch: str = "restart",
    progress: bool = True,
    eps_max: Optional[Mapping[str, float]] = None,
    devices: int = 1,
) -> Distances:
    """``{label: {norm: {'distance', 'pgd'[, 'cw'][, 'cross']}}}`` via resumable chunked runs in ``out_dir/runs``.

    With several norms, each norm's ``'distance'`` is also bounded by the other
    norms' verified adversarials measured in it (``'cross'``: the smallest
    ``||x_adv - x||_p`` over the adversarials the other norms' attacks found
    and re-checked): an l_inf adversarial bounds d_2 by its l_2 norm and d_1 by
    its l_1 norm, an l_2 adversarial bounds d_inf; free, and never weaker than
    one norm's attacks alone (on gradient-masked models the l_2 attacks can
    miss points the l_inf attack breaks). ``'pgd'`` and ``'cw'`` stay each
    attack's own distances. With the adaptive attack, a point whose
    ``'pgd'`` that bound beats by more than ``rtol`` is unsure and gets the
    escalation searches first (``runner.escalate_beaten``; ``'pgd'`` is then
    the better of them, still the attack's own adversarial).

    ``devices``: local devices, one chunk each per call (bit-identical to 1).
    """
    import jax

    from rcurves.pipeline.runner import CROSS_NORMS, escalate_beaten, make_distance_fn, run_chunked

    out: Distances = {}
    for label, m in models.items():
        out[label] = {}
        configs, run_dirs, fns, chunks = {}, {}, {}, {}
        for norm in norms:
            cfg = configs[norm] = attack.distance_config(norm, bounds, (eps_max or {}).get(norm))
            run_dir = run_dirs[norm] = os.path.join(out_dir, "runs", f"{_safe_name(label)}__{norm}")
            config = {"model": m.identity, "distance": cfg.to_dict(), "attacks_code": attacks_fingerprint(),
                      "outputs": "adversarial norms"}
            chunk, fn = chunk_size, m.logits_fn
            if chunk == "auto":   # the largest chunk (<= 100) whose search program fits half the free memory
                from attacks.xla import plain_convolutions
                from rcurves.pipeline.memory import auto_chunk_size

                choice = auto_chunk_size(m.logits_fn, data.x.shape[1:], norm, bounds=bounds)
                chunk = choice.chunk
                if not choice.rewrite:   # the conv rewrite does not fit: the model's own convolutions (the
                    fn = plain_convolutions(m.logits_fn)   # same function; not part of the run's identity)
            fns[norm], chunks[norm] = fn, min(chunk, data.x.shape[0])
            out[label][norm] = run_chunked(
                make_distance_fn(fn, cfg), data.x, data.y,
                key=jax.random.PRNGKey(seed), out_dir=run_dir, config=config,
                chunk_size=min(chunk, data.x.shape[0]), resume=resume, on_mismatch=on_mismatch,
                progress=progress, desc=f"{label} {norm}", devices=None if devices == 1 else devices,
            )
        adv = {norm: {q: out[label][norm].pop(f"adv_{q}") for q in CROSS_NORMS} for norm in norms}
        for norm in norms:
            others = [adv[q][norm] for q in norms if q != norm]
            if others:
                cross = np.minimum.reduce(others)
                # the adaptive attack's cross-norm rule: points another norm's adversarial beats get more searches
                escalate_beaten(fns[norm], configs[norm], data.x, data.y, jax.random.PRNGKey(seed),
                                out[label][norm], cross, run_dir=run_dirs[norm], chunk=chunks[norm])
                out[label][norm]["cross"] = cross
                out[label][norm]["distance"] = np.minimum(out[label][norm]["distance"], cross)
    return out


def evaluate(
    models: Union[Sequence[Any], Mapping[str, Any], Any],
    data: Any,
    *,
    norms: Sequence[str] = ("linf", "l2"),
    thresholds: Optional[Mapping[str, Sequence[float]]] = None,
    attack: Optional[AttackSettings] = None,
    bounds: Optional[Tuple[float, float]] = (0.0, 1.0),
    eps_max: Optional[Mapping[str, float]] = None,
    n: Optional[int] = None,
    seed: int = 0,
    out_dir: Optional[str] = None,
    resume: bool = True,
    on_mismatch: str = "restart",
    chunk_size: Union[int, str] = 100,
    devices: int = 1,
    progress: bool = True,
) -> Evaluation:
    """Minimal adversarial distances of every model on every point, per norm.

    Args:
      models: one model or several (list, or ``{label: model}``): zoo names,
        checkpoint paths, ``module:function``, ``ZooModel``, ``LoadedModel`` or
        a ``logits_fn``.
      data: ``'mnist'`` / ``'digits'`` (held-out split), a ``.npz`` path,
        ``(x, y)`` or :class:`rcurves.data.Data`.
      norms: any of ``'linf'``, ``'l2'``, ``'l1'``.
      thresholds: ``{norm: [eps, ...]}`` of the table (default
        :data:`rcurves.pipeline.report.DEFAULT_THRESHOLDS`).
      attack: the attack budget (default :class:`AttackSettings`).
      bounds: input box, or None for unbounded inputs (then ``eps_max`` is
        needed for every norm).
      eps_max: ``{norm: largest radius searched}`` (default: the box's diameter).
      n: evaluate a random subset of ``n`` points (``default_rng(seed)``).
      seed: PRNG seed of the attacks (point ``i`` uses ``fold_in(PRNGKey(seed), i)``).
      out_dir: where the chunked runs are kept (``out_dir/runs``) for resume
        and reuse; None computes in a temporary folder.
      resume: reuse finished chunks of matching runs in ``out_dir``.
      on_mismatch: a run in ``out_dir`` made with other settings: ``'restart'``
        it or ``'error'``.
      chunk_size: points per saved chunk, or ``'auto'``: per model and norm the
        largest chunk (at most 100) whose attack program fits half the memory
        available now, from XLA's memory analysis of the compiled search
        (``rcurves.pipeline.memory``; two extra compilations per model and norm).
        Where not even one point fits with the conv-as-patches rewrite of
        XLA:CPU, that model and norm run without it (two more compilations):
        slower, within the memory.
      devices: local devices to spread chunks over.
      progress: tqdm bars.

    Returns:
      :class:`Evaluation`.
    """
    from attacks import checks

    norms = tuple(checks.check_norm(v) for v in ((norms,) if isinstance(norms, str) else norms))
    if not norms:
        raise ValueError("norms: expected at least one of linf, l2, l1")
    thr = _thresholds(norms, thresholds)
    bounds = checks.check_bounds(bounds)
    if bounds is None and any(n_ not in (eps_max or {}) for n_ in norms):
        raise ValueError("eps_max: unbounded inputs (bounds=None) need a search range per norm")
    if chunk_size != "auto":
        checks.check_positive_int(chunk_size, "chunk_size")
    attack = attack or AttackSettings()
    ds = as_data(data, n=n, seed=seed)
    if bounds is not None and ds.x.size and (ds.x.min() < bounds[0] or ds.x.max() > bounds[1]):
        raise ValueError(f"{ds.name}: inputs range over [{ds.x.min():.4g}, {ds.x.max():.4g}], outside "
                         f"bounds {bounds[0]:g},{bounds[1]:g}")
    loaded = _models(models)
    acc = {}
    for label, m in loaded.items():
        check_model_on_data(m, ds)
        acc[label] = clean_accuracy(m.logits_fn, ds.x, ds.y)
    t0 = time.time()
    kw = dict(bounds=bounds, seed=seed, chunk_size=chunk_size, resume=resume, on_mismatch=on_mismatch,
              progress=progress, eps_max=eps_max, devices=devices)
    if out_dir is None:
        with tempfile.TemporaryDirectory(prefix="rcurves-eval-") as tmp:
            dist = compute_distances(loaded, ds, norms, attack, out_dir=tmp, **kw)
    else:
        dist = compute_distances(loaded, ds, norms, attack, out_dir=out_dir, **kw)
    settings = {"attack": dataclasses.asdict(attack), "bounds": list(bounds) if bounds else None,
                "eps_max": dict(eps_max or {}), "seed": seed, "chunk_size": chunk_size, "devices": devices,
                "l2_attacks": "min(PGD radius search, Carlini-Wagner) per point" if attack.cw
                else "PGD radius search"}
    return Evaluation(ds, dist, thr, acc, {k: m.info for k, m in loaded.items()}, settings, time.time() - t0)


__all__ = ["AttackSettings", "Evaluation", "compute_distances", "evaluate"]
