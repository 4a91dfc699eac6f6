"""Shared by the paper-004 experiments (adversarial sparsity): models, radii, budgets, one measurement.

Full runs use the zoo (``rcurves.zoo``; the C.1 CNN of paper 000 on MNIST, the
64-256-256-10 MLP on digits). ``--quick`` runs in the test suite on an empty
model cache: it trains one small MLP on digits here (memoised, so all the 004
scripts run in one process share it and its compiled programs) and uses a tiny
search budget with a fixed batch shape.

Radii. Paper 004 evaluates CIFAR-10 at l_2 0.5 and l_inf 8/255, where its
undefended models have 0 % adversarial accuracy and its AT models 40-80 %;
those radii mean nothing on MNIST. We pick, per data set, radii where the
ST model is mostly broken and the AT models mostly not, from minimal
adversarial distances measured on the held-out split (medians: MNIST ST
l_inf 0.07 / l_2 1.0, AT-l_inf-0.1 0.16 / 1.9, AT-l_2-1.5 0.14 / 2.1;
digits ST 0.10 / 0.54, AT-l_inf-0.1 0.17 / 0.69):

* MNIST: l_inf 0.1 and l_2 1.5, the training radii of the AT-l_inf-0.1 and
  AT-l_2-1.5 models (the paper also evaluates AT models at their training
  radius);
* digits: l_inf 0.12 and l_2 0.6 (above the l_inf AT radius 0.1, where the
  ST MLP is only half broken).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import numpy as np

EPS = {"mnist": {"l2": 1.5, "linf": 0.1}, "digits": {"l2": 0.6, "linf": 0.12}}
BOUNDS = (0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class Budget:
    """How many points and how hard: accuracy on ``n_eval`` test points, sparsity on the
    first ``n_sparsity`` vulnerable ones (correct, broken by the attack at eps)."""

    n_eval: int
    n_sparsity: int
    directions: int
    search_steps: int
    steps: int
    attack_steps: int
    batch_points: int
    ce: bool  # also APGD with the cross-entropy loss (the margin loss always runs)


# Paper: 1,000 vulnerable points x 100 directions x 10 search steps x 20 PGD steps.
FULL = Budget(n_eval=1000, n_sparsity=100, directions=16, search_steps=10, steps=20, attack_steps=100,
              batch_points=64, ce=True)
# One batch shape for every --quick call, so the 004 scripts share compiled programs.
QUICK = Budget(n_eval=16, n_sparsity=8, directions=4, search_steps=4, steps=5, attack_steps=5,
               batch_points=8, ce=False)


def budget(args) -> Budget:
    return QUICK if args.quick else FULL


class Model:
    """A named ``logits_fn`` (label for tables, zoo name or quick stand-in)."""

    def __init__(self, label: str, logits_fn: Callable, note: str, name: str):
        self.label, self.logits_fn, self.note, self.name = label, logits_fn, note, name


def quick_model() -> Model:
    """The ``--quick`` stand-in: an MLP (hidden 64) trained here on digits for 4 epochs (memoised).

    One model only: each further model is another compilation of every search
    program, which the test suite's time budget does not allow; the comparisons
    between models (the claims) are tested on synthetic rows instead.
    """
    from _models_002_003 import tiny

    # The call form of the 002/003 experiments (lru_cache keys on it): one training for the whole suite.
    st = tiny("digits", "st", seed=0)
    return Model("ST", st.logits_fn, st.note, st.name)


def zoo_model(args, entry_or_name, label: str) -> Model:
    from rcurves import zoo

    m = zoo.load(entry_or_name, cache=args.cache, retrain=args.retrain, progress=not args.no_progress)
    return Model(label, m.logits_fn, m.entry.note, m.name)


def test_points(dataset: str, n: int):
    """The first ``n`` points of the held-out split (float32 images in [0, 1], int32 labels)."""
    from rcurves.datasets import load_dataset

    x, y = load_dataset(dataset, "test")
    return np.asarray(x[:n], np.float32), np.asarray(y[:n], np.int32)


def _chunked(fn, n: int, size: int):
    """``fn(idx)`` over index chunks of exactly ``size`` (the last padded with index 0), concatenated."""
    outs = []
    for s in range(0, n, size):
        idx = np.arange(s, min(s + size, n))
        pad = np.concatenate([idx, np.zeros(size - len(idx), np.int64)])
        outs.append(np.asarray(fn(pad))[: len(idx)])
    return np.concatenate(outs)


def broken_by_attack(logits_fn, x, y, eps: float, norm: str, b: Budget, seed: int, bounds=BOUNDS) -> np.ndarray:
    """``(n,)`` bool: APGD (``attacks.pgd``, adaptive steps) at ``eps`` finds a misclassified point,
    with the logit-margin loss and, if ``b.ce``, also the cross-entropy loss (the two losses of
    paper 004's cheaper AutoAttack: APGD-CE and APGD with a margin loss, of which DLR is the scaled
    form). Run in chunks of ``b.batch_points`` (the sparsity's own plain attack has that shape)."""
    import jax
    import jax.numpy as jnp

    from attacks.pgd import pgd

    keys = np.asarray(jax.random.split(jax.random.PRNGKey(seed), x.shape[0]))
    eps_v = np.full(x.shape[0], eps, np.float32)
    broken = np.zeros(x.shape[0], bool)
    for loss in ("margin", "ce") if b.ce else ("margin",):
        def one(idx, loss=loss):
            xa = pgd(logits_fn, x[idx], y[idx], eps_v[idx], norm=norm, steps=b.attack_steps, key=keys[idx],
                     bounds=bounds, loss=loss)
            return jnp.argmax(logits_fn(xa), axis=-1) != y[idx]
        broken |= _chunked(one, x.shape[0], b.batch_points).astype(bool)
    return broken


def predictions(logits_fn, x, size: int = 500) -> np.ndarray:
    return np.concatenate([np.asarray(logits_fn(x[i:i + size])).argmax(-1) for i in range(0, x.shape[0], size)])


def measure(model: Model, x, y, eps: float, norm: str, b: Budget, seed: int, *, vulnerable=None,
            bounds=BOUNDS) -> dict:
    """One row of paper 004's tables for one model, norm and radius.

    Natural accuracy on the ``n`` points; adversarial accuracy (correct and not broken by
    :func:`broken_by_attack`); residual sparsity (``rcurves.sparsity``) on the first
    ``b.n_sparsity`` vulnerable points, whose own plain attack (margin PGD, ``b.attack_steps``
    steps) decides again which of them it measures; the standard error over those points, the
    standard deviation over directions per point, and the per-point values. ``bounds=None``:
    perturbations in all of R^d (the theory's setting), the domain ignored.
    """
    import jax

    from rcurves.sparsity import l2_sparsity_full, linf_sparsity_full, sparsity_summary

    correct = predictions(model.logits_fn, x) == y
    if vulnerable is None:
        vulnerable = correct & broken_by_attack(model.logits_fn, x, y, eps, norm, b, seed, bounds)
    idx = np.flatnonzero(vulnerable)[: b.n_sparsity]
    row = {"model": model.label, "name": model.name, "norm": norm, "eps": eps, "n": int(x.shape[0]),
           "natural_accuracy": float(correct.mean()), "adversarial_accuracy": float((correct & ~vulnerable).mean()),
           "vulnerable_fraction": float(vulnerable.mean()), "n_searched": int(idx.size)}
    if idx.size == 0:
        row.update({"residual_sparsity": math.nan, "residual_stderr": math.nan, "n_measured": 0,
                    "measured_fraction": 0.0, "per_point": np.zeros(0), "index": idx, "direction_std": np.zeros(0),
                    "found_fraction": math.nan, "per_direction": np.zeros((0, b.directions))})
        return row
    full = l2_sparsity_full if norm == "l2" else linf_sparsity_full
    res = full(model.logits_fn, x[idx], y[idx], eps, key=jax.random.PRNGKey(seed + 1), n_directions=b.directions,
               search_steps=b.search_steps, steps=b.steps, bounds=bounds, plain_steps=b.attack_steps,
               batch_points=b.batch_points)
    s = sparsity_summary(res)
    meas = np.asarray(res.measured)
    pd = np.asarray(res.per_direction)[meas]
    row.update({
        "residual_sparsity": s["residual_sparsity"], "residual_stderr": s["residual_stderr"],
        "n_measured": int(meas.sum()), "measured_fraction": float(meas.mean()),
        "per_point": np.asarray(res.per_point)[meas], "index": idx[meas],
        "direction_std": pd.std(axis=1, ddof=1) if b.directions > 1 else np.full(pd.shape[0], np.nan),
        "found_fraction": float(np.asarray(res.found)[meas].mean()) if meas.any() else math.nan,
        "per_direction": pd,
    })
    if norm == "l2" and bounds is not None:
        # the same points in the same positions as in the call above: the same directions
        row["box_floor"] = box_floor(x[idx], eps, jax.random.PRNGKey(seed + 1), b.directions)[meas]
    return row


def box_floor(x, eps: float, key, directions: int) -> np.ndarray:
    """``(n,)`` mean over the estimator's directions of the smallest angle between ``u`` and a point of
    the eps-sphere inside the box (``attacks.cap.min_angle_point``): the l_2 sparsity a point would have
    if every perturbation in the box were adversarial. With the box, sparsity lives in [floor, pi]."""
    import jax
    import jax.numpy as jnp

    from attacks.cap import min_angle_point
    from rcurves.sparsity import l2_directions

    n = x.shape[0]
    u = np.asarray(l2_directions(key, n, directions, x.shape[1:])).reshape(n, directions, -1)
    xf = np.asarray(x, np.float32).reshape(n, -1)

    @jax.jit
    def angles(xf, u):
        one = lambda xi, ui: min_angle_point(ui, jnp.float32(eps), BOUNDS[0] - xi, BOUNDS[1] - xi).angle  # noqa: E731
        return jax.vmap(lambda xi, us: jax.vmap(lambda ui: one(xi, ui))(us))(xf, u)

    return np.asarray(angles(xf, u)).mean(axis=1)


def fmt_row(r: dict) -> str:
    unit = "rad" if r["norm"] == "l2" else "dims"
    return (f"{r['model']} {r['norm']} eps={r['eps']:g}: acc {r['natural_accuracy']:.3f}, adv acc "
            f"{r['adversarial_accuracy']:.3f}, sparsity {r['residual_sparsity']:.3f} +- {r['residual_stderr']:.3f} "
            f"{unit} ({r['n_measured']}/{r['n_searched']} measured)")


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    from scipy.stats import spearmanr

    a, b = np.asarray(a, float), np.asarray(b, float)
    ok = np.isfinite(a) & np.isfinite(b)
    return float(spearmanr(a[ok], b[ok]).statistic) if ok.sum() >= 3 else math.nan


def z_diff(r1: dict, r2: dict) -> float:
    """(sparsity of r2 - sparsity of r1) / combined standard error (independent point sets)."""
    se = math.hypot(r1["residual_stderr"], r2["residual_stderr"])
    return (r2["residual_sparsity"] - r1["residual_sparsity"]) / se if se > 0 else math.nan
