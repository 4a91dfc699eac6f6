"""Shared by the paper-004 experiments (adversarial sparsity): data, radii, budgets, fair samples, measurements.

**Setting.** Paper 004 measured CIFAR-10 ResNets; our stand-in is full MNIST
(60,000 / 10,000 images) and the zoo's ``mnist-full-cnn-*`` models (the C.1
CNN of paper 000 trained here: ST, AT, augmentations). Every claim row says
so (:data:`SETTING`). ``--quick`` runs in the test suite on an empty model
cache: small MLPs trained here on scikit-learn's 8x8 digits (memoised, so all
the 004 scripts run in one process share them and their compiled programs:
they are pytree callables of one architecture) and a tiny search budget with
a fixed batch shape; its numbers are not the paper's claims.

**Radii.** Paper 004 evaluates CIFAR-10 at l_2 0.5 and l_inf 8/255, the
training radius of its AT models, where its undefended models have 0 %
adversarial accuracy. On MNIST we use the training radii of the zoo's AT
models, l_inf 0.1 (AT-linf-0.1, its 1-step and augmented variants) and l_2
1.5 (AT-l2-1.5), where the ST CNN is mostly (~80 %) broken; digits (--quick):
l_inf 0.12 and l_2 0.6.

**Points** (the issue "every number from a fair sample"). The pool is the
first ``n_pool`` points of the class-interleaved held-out split
(``rcurves.data.sampling``: any prefix is a stratified sample), the same for every
model. A model's *vulnerable* points are those of the pool it classifies
correctly and APGD breaks at eps (:func:`broken_by_attack`). The paper
reports each model's sparsity over its own vulnerable points, and every row
decides on that quantity: a model's residual sparsity is its mean over a
stratified sample of its vulnerable points (``rcurves.data.sampling.stratified``
with the vulnerable mask; :meth:`Study.residual`), or over the points of a
sample of the pool fixed before any model is measured that it is vulnerable
on. Two residual sparsities are compared by :func:`welch` (separate samples)
or :func:`shared` (one fixed sample: a bootstrap over its points, the points
vulnerable for both counting as pairs), decided by :func:`residual_greater`
and :func:`residual_null`; several tests for one claim are one family
(:func:`holm`). A comparison on the points vulnerable for both models is a
selection on the outcome (where the stronger model breaks, the weaker one
is at its weakest): the rows give it beside the paper's quantity, labelled
as ours. Each pool point has its own key (``fold_in(key, pool index)``), so
a point has the same random directions (and plain-attack start) for every
model and in every call: per-point values measured for one comparison serve
the next (:class:`Study`).

**The l_2 box floor.** In [0, 1]^d the sphere of radius eps around a point
of MNIST (most pixels at 0 or 1) is mostly outside the box: the nearest
point of sphere n box to a random direction is already far from it
(``attacks.cap.min_angle_point``), so every l_2 sparsity lies in
``[floor, pi]`` with a floor of ~0.7 rad at eps 1.5. Ratios and relative
effects in l_2 are therefore taken on the *excess over the floor* (for
CIFAR-10 at eps 0.5 the floor is ~0, so this is the paper's own quantity
there); paired differences need no correction (the floor is a property of
the point, eps and direction, not of the model).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from typing import TYPE_CHECKING, Callable, Dict, NamedTuple, Optional, Sequence

import numpy as np

if TYPE_CHECKING:
    from rcurves.claims.verdicts import Verdict

EPS = {"mnist-full": {"l2": 1.5, "linf": 0.1}, "digits": {"l2": 0.6, "linf": 0.12}}
BOUNDS = (0.0, 1.0)
SETTING = ("full MNIST (10,000 held-out images) and the zoo's mnist-full C.1 CNNs, our stand-in for the paper's "
           "CIFAR-10 ResNets")
QUICK_SETTING = "--quick: 8x8 digits and MLP stand-ins trained in seconds (not the paper's claims)"
UNIT = {"l2": "rad", "linf": "dims"}


@dataclasses.dataclass(frozen=True)
class Budget:
    """How many points and how hard: the pool of ``n_pool`` held-out points (adversarial accuracy, vulnerable
    masks), ``n_sparsity`` points per sparsity sample, the estimator's directions, bisection rounds and PGD
    steps, the vulnerability attack's steps per loss, and the points per jitted call."""

    n_pool: int
    n_sparsity: int
    directions: int
    search_steps: int
    steps: int
    attack_steps: int
    batch_points: int
    ce: bool  # also APGD with the cross-entropy loss (the margin loss always runs)


# Paper: 1,000 vulnerable points x 100 directions x 10 search steps x 20 PGD steps. Here 8 directions: the
# spread over directions is ~0.035 rad per point (sparsity_margin), so 8 directions add ~0.012 rad of noise to a
# point whose value varies by ~0.17 rad over points: the points, not the directions, set the standard errors.
FULL = Budget(n_pool=1000, n_sparsity=40, directions=8, search_steps=10, steps=20, attack_steps=50,
              batch_points=32, ce=True)
# One batch shape for every --quick call, so the 004 scripts share compiled programs.
QUICK = Budget(n_pool=16, n_sparsity=8, directions=4, search_steps=4, steps=5, attack_steps=5,
               batch_points=8, ce=False)


def budget(args) -> Budget:
    return QUICK if args.quick else FULL


def dataset(args) -> str:
    return "digits" if args.quick else "mnist-full"


def setting(args) -> str:
    return QUICK_SETTING if args.quick else SETTING


class Model:
    """A named ``logits_fn``: ``label`` for tables, ``name`` (zoo name), ``note``, and ``key``: a string that
    identifies the function's weights and preprocessing for the on-disk cache of vulnerable masks (None: not
    cached)."""

    def __init__(self, label: str, logits_fn: Callable, note: str, name: str, key: Optional[str] = None,
                 attack_fns: Optional[Sequence[Callable]] = None):
        self.label, self.logits_fn, self.note, self.name, self.key = label, logits_fn, note, name, key
        # the functions whose gradients the vulnerability attack follows (a point is broken if any of them
        # breaks it, checked on ``logits_fn``); default: ``logits_fn`` itself
        self.attack_fns = list(attack_fns) if attack_fns else [logits_fn]


def quick_model(kind: str = "st") -> Model:
    """A ``--quick`` stand-in (memoised): an MLP (hidden 64) trained here on digits for 4 epochs, ST or l_inf
    AT at 0.1 (``kind='at'``), the models the 002/003 quick runs train too. Both are pytree callables of one
    architecture, so they share every compiled search program."""
    from shared import tiny

    # The call forms of the 002/003 experiments (lru_cache keys on them): one training for the whole suite.
    m = tiny("digits", "st", seed=0) if kind == "st" else tiny("digits", "at", 0.1, seed=0)
    return Model("ST" if kind == "st" else "AT-linf-0.1", m.logits_fn, m.note, m.name)


def zoo_model(args, name: str, label: Optional[str] = None) -> Model:
    """A zoo model (trained and cached on first use), labelled by its training ('ST', 'AT-linf-0.1', ...)."""
    from rcurves.models import zoo

    m = zoo.load(name, cache=args.cache, retrain=args.retrain, progress=not args.no_progress)
    return Model(label or m.entry.train.name, m.logits_fn, m.entry.note, m.name, os.path.basename(m.path))


# ---------------------------------------------------------------------------
# the pool and per-point keys


def pool(ds: str, n: int):
    """``(x (n, ...), y (n,), text)``: the first ``n`` points of the class-interleaved held-out split (a
    stratified sample; ``text`` says so with the class counts)."""
    from rcurves.data import load_dataset
    from rcurves.data.sampling import describe

    x, y = load_dataset(ds, "test")
    n = min(n, x.shape[0])
    x, y = np.asarray(x[:n], np.float32), np.asarray(y[:n], np.int32)
    name = "full MNIST" if ds == "mnist-full" else ds
    d = describe(y, np.arange(n), f"the first {n} of the class-interleaved held-out split of {name} (stratified)")
    return x, y, d["text"]


def point_keys(seed: int, n: int) -> np.ndarray:
    """``(n, 2)`` uint32: ``fold_in(PRNGKey(seed), i)`` for pool point ``i`` (the estimators' own per-point form)."""
    import jax

    from attacks.checks import check_key

    return np.asarray(check_key(jax.random.PRNGKey(seed), n))


def _chunked(fn, idx: np.ndarray, size: int):
    """``fn(chunk)`` over chunks of ``idx`` of exactly ``size`` indices (the last padded with its first), concatenated."""
    outs = []
    for s in range(0, len(idx), size):
        c = idx[s:s + size]
        pad = np.concatenate([c, np.full(size - len(c), c[0], c.dtype)])
        outs.append(np.asarray(fn(pad))[: len(c)])
    return np.concatenate(outs) if outs else np.zeros(0)


def predictions(logits_fn, x, size: int = 500) -> np.ndarray:
    return np.concatenate([np.asarray(logits_fn(x[i:i + size])).argmax(-1) for i in range(0, x.shape[0], size)])


def broken_by_attack(logits_fn, x, y, eps: float, norm: str, b: Budget, seed: int, bounds=BOUNDS,
                     idx: Optional[np.ndarray] = None, check_fn: Optional[Callable] = None) -> np.ndarray:
    """``(n,)`` bool over the pool: APGD (``attacks.pgd``, adaptive steps, ``b.attack_steps`` per loss) at
    ``eps`` finds a misclassified point, with the logit-margin loss and, if ``b.ce``, also the cross-entropy
    loss (paper 004's cheaper AutoAttack: APGD-CE and APGD with a margin loss, of which DLR is the scaled
    form). Only the pool points ``idx`` are attacked (default: all; the others are False). Point ``i`` uses
    the key ``fold_in(PRNGKey(seed), i)`` whatever the chunking. ``check_fn`` (default ``logits_fn``) decides
    whether the attack's point is misclassified (a defence attacked through a surrogate gradient is checked
    on its true forward pass)."""
    import jax.numpy as jnp

    from attacks.pgd import pgd

    n = x.shape[0]
    keys = point_keys(seed, n)
    idx = np.arange(n) if idx is None else np.asarray(idx, np.int64)
    broken = np.zeros(n, bool)
    if idx.size == 0:
        return broken
    eps_v = np.full(n, eps, np.float32)
    for loss in ("margin", "ce") if b.ce else ("margin",):
        todo = idx[~broken[idx]]          # a point broken by one loss needs no other
        if todo.size == 0:
            break

        def one(c, loss=loss):
            xa = pgd(logits_fn, x[c], y[c], eps_v[c], norm=norm, steps=b.attack_steps, key=keys[c],
                     bounds=bounds, loss=loss)
            return jnp.argmax((check_fn or logits_fn)(xa), axis=-1) != y[c]
        broken[todo] |= _chunked(one, todo, b.batch_points).astype(bool)
    return broken


# ---------------------------------------------------------------------------
# a study: vulnerable masks and per-point sparsity of several models on one pool


def _vuln_cache_path(args, model: Model, ds: str, norm: str, eps: float, n: int, b: Budget, bounds) -> Optional[str]:
    """The on-disk cache of a vulnerable mask (full runs only), keyed by everything that decides it."""
    if args is None or args.quick or model.key is None:
        return None
    import importlib
    import inspect

    from rcurves.models import zoo

    pgd_module = importlib.import_module("attacks.pgd")     # the module (attacks re-exports the function pgd)
    with open(pgd_module.__file__, "rb") as fh:   # the attack's code and this file's use of it decide the mask
        src = fh.read() + inspect.getsource(broken_by_attack).encode()
    spec = json.dumps([model.key, ds, norm, float(eps), n, b.attack_steps, b.ce, b.batch_points, args.seed,
                       None if bounds is None else list(bounds), hashlib.sha256(src).hexdigest()[:16]])
    h = hashlib.sha256(spec.encode()).hexdigest()[:20]
    d = os.path.join(args.cache or zoo.default_cache(), "evaluations", "sparsity-vulnerable")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, f"{model.label.replace('/', '_')}-{norm}-{h}.npz")


def _sparsity_cache_path(args, model: Model, ds: str, norm: str, eps: float, n: int, b: Budget,
                         bounds) -> Optional[str]:
    """The on-disk cache of a model's per-point sparsity on a pool (full runs only): keyed by the model's
    weights and preprocessing, the pool, eps, the budget, the seed, the box and the estimator's code (every
    file of ``attacks/`` and ``rcurves/sparsity/estimators.py``); a point's value depends on nothing else (its key is
    its pool index)."""
    if args is None or args.quick or model.key is None:
        return None
    import importlib

    from rcurves.models import zoo

    h = hashlib.sha256()
    attacks_dir = os.path.dirname(importlib.import_module("attacks.pgd").__file__)
    files = sorted(os.path.join(attacks_dir, f) for f in os.listdir(attacks_dir) if f.endswith(".py"))
    for f in files + [importlib.import_module("rcurves.sparsity.estimators").__file__]:
        with open(f, "rb") as fh:
            h.update(fh.read())
    spec = json.dumps([model.key, ds, norm, float(eps), n, dataclasses.asdict(b), args.seed,
                       None if bounds is None else list(bounds), h.hexdigest()[:16]])
    key = hashlib.sha256(spec.encode()).hexdigest()[:20]
    d = os.path.join(args.cache or zoo.default_cache(), "evaluations", "sparsity-values")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, f"{model.label.replace('/', '_')}-{norm}-{key}.npz")


class Study:
    """Vulnerable masks and per-point sparsity of models on one pool, measured lazily and kept.

    ``correct(m)``, ``vulnerable(m, norm)``: ``(n,)`` bool over the pool.
    ``measure(m, norm, idx)``: sparsity on the pool points ``idx`` where ``m``
    is vulnerable (points already measured are not searched again);
    ``values(m, norm)``: ``(n,)`` per-point sparsity, NaN where not measured
    (not asked for, not vulnerable, or not broken by the estimator's own plain
    attack). ``floor(norm, idx)``: the l_2 box floor of those points (model-free).
    ``bounds=None``: perturbations in all of R^d (the theory's setting).
    """

    def __init__(self, args, ds: str, b: Budget, seed: int, x=None, y=None, text: str = "", bounds=BOUNDS,
                 eps: Optional[Dict[str, float]] = None):
        if x is None:
            x, y, text = pool(ds, b.n_pool)
        self.args, self.ds, self.b, self.seed, self.bounds = args, ds, b, seed, bounds
        self.x, self.y, self.text = x, y, text
        self.n = x.shape[0]
        self.eps = dict(EPS[ds] if eps is None else eps)
        self.keys = point_keys(seed + 1, self.n)
        self._correct: Dict[str, np.ndarray] = {}
        self._vuln: Dict[tuple, np.ndarray] = {}
        self._vals: Dict[tuple, np.ndarray] = {}
        self._done: Dict[tuple, np.ndarray] = {}
        self._pdir: Dict[tuple, np.ndarray] = {}
        self._floor: Dict[str, np.ndarray] = {}
        self.seconds: Dict[str, float] = {}

    def _tic(self, what: str, t0: float):
        import time

        self.seconds[what] = self.seconds.get(what, 0.0) + time.time() - t0

    def correct(self, m: Model) -> np.ndarray:
        if m.label not in self._correct:
            self._correct[m.label] = predictions(m.logits_fn, self.x) == self.y
        return self._correct[m.label]

    def vulnerable(self, m: Model, norm: str) -> np.ndarray:
        """Correct and broken by :func:`broken_by_attack` at ``self.eps[norm]`` (cached on disk in full runs)."""
        import time

        k = (m.label, norm)
        if k in self._vuln:
            return self._vuln[k]
        t0 = time.time()
        correct = self.correct(m)
        path = _vuln_cache_path(self.args, m, self.ds, norm, self.eps[norm], self.n, self.b, self.bounds)
        if path and os.path.exists(path):
            v = np.load(path)["vulnerable"]
        else:
            v = np.zeros(self.n, bool)
            for fn in m.attack_fns:      # a point is vulnerable if any of the model's attack gradients breaks it
                todo = np.flatnonzero(correct & ~v)
                v |= broken_by_attack(fn, self.x, self.y, self.eps[norm], norm, self.b, self.seed, self.bounds,
                                      idx=todo, check_fn=m.logits_fn)
            if path:
                tmp = path + ".tmp.npz"
                np.savez(tmp, vulnerable=v)
                os.replace(tmp, path)
        self._vuln[k] = v
        self._tic("attack", t0)
        return v

    def robust(self, m: Model, norm: str) -> np.ndarray:
        return self.correct(m) & ~self.vulnerable(m, norm)

    def measure(self, m: Model, norm: str, idx) -> None:
        """Sparsity of ``m`` on the pool points ``idx`` where it is vulnerable and not yet searched."""
        import time

        import jax  # noqa: F401  (the estimators need it loaded)

        from rcurves.sparsity import l2_sparsity_full, linf_sparsity_full

        k = (m.label, norm)
        path = _sparsity_cache_path(self.args, m, self.ds, norm, self.eps[norm], self.n, self.b, self.bounds)
        if k not in self._vals:
            self._vals[k] = np.full(self.n, np.nan)
            self._done[k] = np.zeros(self.n, bool)
            self._pdir[k] = np.full((self.n, self.b.directions), np.nan)
            if path and os.path.exists(path):      # per-point values of earlier runs (same code, model, budget)
                with np.load(path) as f:
                    self._vals[k], self._done[k], self._pdir[k] = f["values"], f["done"], f["per_direction"]
        idx = np.asarray(idx, np.int64)
        todo = idx[self.vulnerable(m, norm)[idx] & ~self._done[k][idx]]
        if todo.size == 0:
            return
        t0 = time.time()
        full = l2_sparsity_full if norm == "l2" else linf_sparsity_full
        res = full(m.logits_fn, self.x[todo], self.y[todo], self.eps[norm], key=self.keys[todo],
                   n_directions=self.b.directions, search_steps=self.b.search_steps, steps=self.b.steps,
                   bounds=self.bounds, plain_steps=self.b.attack_steps * (2 if self.b.ce else 1),
                   batch_points=self.b.batch_points)
        meas = np.asarray(res.measured)
        self._vals[k][todo] = np.where(meas, np.asarray(res.per_point, np.float64), np.nan)
        self._pdir[k][todo] = np.asarray(res.per_direction, np.float64)
        self._done[k][todo] = True
        if path:
            tmp = path + ".tmp.npz"
            np.savez(tmp, values=self._vals[k], done=self._done[k], per_direction=self._pdir[k])
            os.replace(tmp, path)
        self._tic("sparsity", t0)

    def values(self, m: Model, norm: str) -> np.ndarray:
        return self._vals.get((m.label, norm), np.full(self.n, np.nan))

    def per_direction(self, m: Model, norm: str) -> np.ndarray:
        return self._pdir.get((m.label, norm), np.full((self.n, self.b.directions), np.nan))

    def searched(self, m: Model, norm: str) -> np.ndarray:
        return self._done.get((m.label, norm), np.zeros(self.n, bool))

    def floor(self, norm: str, idx) -> np.ndarray:
        """``(len(idx),)`` l_2 box floor of the pool points ``idx`` at eps (0 for l_inf or without the box)."""
        idx = np.asarray(idx, np.int64)
        if norm != "l2" or self.bounds is None:
            return np.zeros(idx.size)
        if "l2" not in self._floor:
            self._floor["l2"] = np.full(self.n, np.nan)
        f = self._floor["l2"]
        todo = idx[np.isnan(f[idx])]
        if todo.size:
            f[todo] = box_floor(self.x[todo], self.eps["l2"], self.keys[todo], self.b.directions)
        return f[idx]

    def sample(self, mask: np.ndarray, k: Optional[int] = None, seed: Optional[int] = None) -> np.ndarray:
        """A stratified sample (``rcurves.data.sampling.stratified``) of ``min(k, count)`` pool points where ``mask``
        holds, sorted; empty when none."""
        from rcurves.data.sampling import stratified

        k = self.b.n_sparsity if k is None else k
        c = int(np.sum(mask))
        if c == 0 or k <= 0:
            return np.zeros(0, np.int64)
        return stratified(self.y, min(k, c), self.seed if seed is None else seed, mask=np.asarray(mask, bool))

    def residual(self, m: Model, norm: str, k: Optional[int] = None) -> Dict:
        """The paper's row for ``m``: accuracies on the pool, and residual sparsity on a stratified sample of
        its vulnerable points (measured here if not yet): mean, standard error over points, n."""
        v = self.vulnerable(m, norm)
        idx = self.sample(v, k)
        self.measure(m, norm, idx)
        vals = self.values(m, norm)[idx]
        ok = np.isfinite(vals)
        row = {"model": m.label, "name": m.name, "norm": norm, "eps": self.eps[norm], "n_pool": self.n,
               "natural_accuracy": float(self.correct(m).mean()),
               "adversarial_accuracy": float(self.robust(m, norm).mean()),
               "vulnerable_fraction": float(v.mean()), "n_vulnerable": int(v.sum()), "n_searched": int(idx.size),
               "n_measured": int(ok.sum()), "index": idx[ok], "per_point": vals[ok]}
        row.update(mean_se(vals[ok]))
        if norm == "l2":
            fl = self.floor(norm, idx[ok])
            row["box_floor"] = fl
            row["excess"] = mean_se(vals[ok] - fl)
        return row


def mean_se(v) -> Dict[str, float]:
    """``{'residual_sparsity', 'residual_stderr'}``: mean and standard error (ddof 1) of the finite values."""
    v = np.asarray(v, np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"residual_sparsity": math.nan, "residual_stderr": math.nan}
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan
    return {"residual_sparsity": float(v.mean()), "residual_stderr": se}


def box_floor(x, eps: float, keys, directions: int) -> np.ndarray:
    """``(n,)`` mean over the estimator's directions of the smallest angle between ``u`` and a point of the
    eps-sphere inside the box (``attacks.cap.min_angle_point``): the l_2 sparsity a point would have if every
    perturbation in the box were adversarial. With the box, sparsity lives in [floor, pi]. ``keys``: the
    per-point keys given to the estimator (the same directions)."""
    import jax
    import jax.numpy as jnp

    from attacks.cap import min_angle_point
    from rcurves.sparsity import l2_directions

    n = x.shape[0]
    u = np.asarray(l2_directions(jnp.asarray(keys), n, directions, x.shape[1:])).reshape(n, directions, -1)
    xf = np.asarray(x, np.float32).reshape(n, -1)

    @jax.jit
    def angles(xf, u):
        one = lambda xi, ui: min_angle_point(ui, jnp.float32(eps), BOUNDS[0] - xi, BOUNDS[1] - xi).angle  # noqa: E731
        return jax.vmap(lambda xi, us: jax.vmap(lambda ui: one(xi, ui))(us))(xf, u)

    return np.asarray(angles(xf, u)).mean(axis=1)


def paired_values(study: Study, a: Model, b: Model, norm: str, idx) -> tuple:
    """``(va, vb, idx)``: per-point sparsity of ``a`` and ``b`` on the pool points ``idx`` where both were
    measured (each measured here where vulnerable, if not yet)."""
    idx = np.asarray(idx, np.int64)
    study.measure(a, norm, idx)
    study.measure(b, norm, idx)
    va, vb = study.values(a, norm)[idx], study.values(b, norm)[idx]
    ok = np.isfinite(va) & np.isfinite(vb)
    return va[ok], vb[ok], idx[ok]


# ---------------------------------------------------------------------------
# comparing residual sparsities: each model on its own vulnerable points (the paper's quantity)


class Contrast(NamedTuple):
    """``d = mean_a - factor * mean_b`` of two residual sparsities, with its standard error ``se`` (``df``: the
    degrees of freedom of the t reference, ``inf`` for the normal one); ``n_a``, ``n_b``: the points each mean
    is over; ``n_units``: the units the standard error shrinks with (``sqrt``); ``how``: how it was taken."""

    d: float
    se: float
    df: float
    mean_a: float
    mean_b: float
    n_a: int
    n_b: int
    n_units: int
    how: str
    factor: float = 1.0


def _finite(v) -> np.ndarray:
    v = np.asarray(v, np.float64).reshape(-1)
    return v[np.isfinite(v)]


def welch(a, b, factor: float = 1.0) -> Contrast:
    """Two separately drawn samples, each model's values on its own points (e.g. a stratified sample of its
    vulnerable points): ``mean(a) - factor * mean(b)`` with Welch's standard error and Welch-Satterthwaite
    degrees of freedom. Two samples drawn from overlapping vulnerable sets may share points, whose values go
    together: the independent-samples error then overstates the difference's (the test is conservative)."""
    a, b, f = _finite(a), _finite(b), float(factor)
    na, nb = a.size, b.size
    ma = float(a.mean()) if na else math.nan
    mb = float(b.mean()) if nb else math.nan
    if na < 2 or nb < 2:
        return Contrast(ma - f * mb, math.nan, math.nan, ma, mb, na, nb, na + nb, "Welch (fewer than 2 points)", f)
    va, vb = a.var(ddof=1) / na, f * f * b.var(ddof=1) / nb
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1)) if va + vb > 0 else math.inf
    return Contrast(ma - f * mb, se, df, ma, mb, na, nb, na + nb, "Welch, the two samples taken as independent", f)


def shared(va, vb, factor: float = 1.0, n_boot: int = 2000, seed: int = 0) -> Contrast:
    """One sample of points fixed before any model is measured (e.g. the first pool points), each model's
    residual sparsity the mean over the points it is vulnerable on (``va``, ``vb``: ``(n,)`` values on the
    sample, NaN where the model is not vulnerable or not measured). ``mean(va) - factor * mean(vb)`` with a
    bootstrap standard error over the sample's points (resampled with both values together, so the points
    measured for both count as pairs and the rest as unpaired; normal reference)."""
    xa, xb, f = np.asarray(va, np.float64).reshape(-1), np.asarray(vb, np.float64).reshape(-1), float(factor)
    if xa.shape != xb.shape:
        raise ValueError(f"vb: expected the sample of va (shape {xa.shape}), got {xb.shape}")
    n = xa.size
    fa, fb = np.isfinite(xa), np.isfinite(xb)
    na, nb, both = int(fa.sum()), int(fb.sum()), int((fa & fb).sum())
    ma = float(xa[fa].mean()) if na else math.nan
    mb = float(xb[fb].mean()) if nb else math.nan
    how = (f"bootstrap over the {n} points of the sample ({n_boot} resamples; the {both} points measured for "
           f"both count as pairs)")
    if na < 2 or nb < 2:
        return Contrast(ma - f * mb, math.nan, math.inf, ma, mb, na, nb, n, how, f)
    idx = np.random.default_rng(seed).integers(0, n, (n_boot, n))

    def means(x, fin):
        c = fin[idx].sum(axis=1)
        s = np.where(fin, x, 0.0)[idx].sum(axis=1)
        return np.where(c > 0, s / np.maximum(c, 1), np.nan)

    d = means(xa, fa) - f * means(xb, fb)
    d = d[np.isfinite(d)]
    se = float(d.std(ddof=1)) if d.size > 1 else math.nan
    return Contrast(ma - f * mb, se, math.inf, ma, mb, na, nb, n, how, f)


def _t_ref(df: float):
    from scipy.stats import norm, t

    return norm if not math.isfinite(df) else t(df)


def contrast_text(c: Contrast, what: str) -> str:
    f = "" if c.factor == 1 else f"{c.factor:g} x "
    return (f"{what}: {c.mean_a:.4g} (n = {c.n_a}) vs {f}{c.mean_b:.4g} (n = {c.n_b}), difference {c.d:.4g} +- "
            f"{c.se:.2g} (se; {c.how})")


def _t_of(c: Contrast, effect: float, what: str):
    """``(effect, reference distribution, t)`` of a contrast, or the inconclusive Verdict when a sample has
    fewer than 2 measured points (``effect`` > 0 checked first)."""
    from rcurves.claims.verdicts import Verdict

    e = float(effect)
    if not (math.isfinite(e) and e > 0):
        raise ValueError(f"effect: expected a difference > 0, got {effect!r}")
    if not (math.isfinite(c.se) and math.isfinite(c.d)):
        return Verdict("inconclusive", f"{what}: {c.n_a} vs {c.n_b} points",
                       f"a sample has fewer than 2 measured points ({c.n_a}, {c.n_b}): no test possible", 1.0)
    tt = c.d / c.se if c.se > 0 else math.copysign(math.inf, c.d) if c.d else 0.0
    return e, _t_ref(c.df), tt


def residual_greater(c: Contrast, *, effect: float, alpha: float = 0.05, power: float = 0.8,
                     what: str = "a > b") -> "Verdict":
    """Effect claim on two residual sparsities: ``c.d > 0`` (``mean_a > factor * mean_b``), one-sided t (Welch)
    or z (bootstrap) test at ``alpha``. reproduced: significant; differs: significant the other way, or not
    significant although the test had ``power`` against an excess of ``effect`` (the smallest the claim is
    about; the caller states it); inconclusive: it had not (or a sample has fewer than 2 points), with the
    sample it would need. ``p``: the one-sided p for the claim (1 when there is no test)."""
    from scipy.stats import norm

    from rcurves.claims.verdict import _ladder   # the one effect ladder of the verdict rules

    t = _t_of(c, effect, what)
    if hasattr(t, "verdict"):   # no test possible: the inconclusive Verdict
        return t
    e, ref, tt = t
    p, p_other = float(ref.sf(tt)), float(ref.cdf(tt))
    za, zp = float(norm.ppf(1 - alpha)), float(norm.ppf(power))
    pw = 1.0 if c.se == 0 else float(norm.cdf(e / c.se - za))
    test = (f"{contrast_text(c, what)}, one-sided {'z' if not math.isfinite(c.df) else f't (df {c.df:.0f})'} = "
            f"{tt:.2f}, p = {p:.2g}; power {pw:.2f} against an excess of {e:.3g}")
    return _ladder(test, what=what, level=alpha, p_for=p, p_against=p_other, could=pw >= power,
                   against=f"significantly the other way ({what} fails, p = {p_other:.2g})",
                   null=f"not significant, although the test had power {pw:.2f} to detect an excess of {e:.3g}",
                   need=lambda: f"power {pw:.2f} < {power:g} to detect an excess of {e:.3g}: about "
                                f"{_scaled(c, ((za + zp) * c.se / e) ** 2)} would be needed")


def residual_null(c: Contrast, *, effect: float, alpha: float = 0.05, side: str = "two-sided",
                  what: str = "a vs b") -> "Verdict":
    """Null claim on two residual sparsities, failing whenever the change it denies is significant.

    ``side='two-sided'`` ("no change"): differs if ``c.d`` is significantly different from 0 either way
    (two-sided test at ``alpha``); reproduced if not, and the ``1 - 2 alpha`` interval lies inside
    ``(-effect, effect)`` (equivalence, two one-sided tests); inconclusive otherwise. ``side='greater'``
    ("does not raise"): differs if ``c.d`` is significantly above 0 (one-sided); reproduced if not, and the
    one-sided upper bound is below ``effect`` (non-superiority); inconclusive otherwise. ``effect``: the
    smallest change the claim rules out; the caller states it. ``p``: the p of the change the claim denies
    (two-sided or one-sided up), whose smallness refutes it."""
    from rcurves.claims.verdicts import Verdict

    if side not in ("two-sided", "greater"):
        raise ValueError(f"side: expected 'two-sided' or 'greater', got {side!r}")
    t = _t_of(c, effect, what)
    if hasattr(t, "verdict"):   # no test possible: the inconclusive Verdict
        return t
    e, ref, tt = t
    tc = float(ref.ppf(1 - alpha))
    lo, hi = c.d - tc * c.se, c.d + tc * c.se
    if side == "two-sided":
        p = float(min(1.0, 2 * ref.sf(abs(tt))))
        test = (f"{contrast_text(c, what)}; two-sided p = {p:.2g}; {1 - 2 * alpha:.0%} interval [{lo:.4g}, "
                f"{hi:.4g}] vs the margin +-{e:.3g} (equivalence)")
        sig, ok, gap = p < alpha, -e < lo and hi < e, e - abs(c.d)
        against = f"the change is significant ({c.d:+.4g}, two-sided p = {p:.2g})"
    else:
        p = float(ref.sf(tt))
        test = (f"{contrast_text(c, what)}; one-sided p of a rise = {p:.2g}; {1 - alpha:.0%} upper bound "
                f"{hi:.4g} vs the margin {e:.3g} (non-superiority)")
        sig, ok, gap = p < alpha, hi < e, e - max(c.d, 0.0)
        against = f"the rise is significant ({c.d:+.4g}, one-sided p = {p:.2g})"
    if sig:
        return Verdict("differs", test, against, p)
    if ok:
        return Verdict("reproduced", test, "", p)
    if gap <= 0:
        return Verdict("inconclusive", test, f"the change ({c.d:+.4g}) is not inside the margin {e:.3g} and not "
                                             f"significant: more points would tell", p)
    return Verdict("inconclusive", test, f"the interval holds the margin {e:.3g}: at the observed change about "
                                         f"{_scaled(c, (tc * c.se / gap) ** 2)} would settle it", p)


def _scaled(c: Contrast, k: float) -> str:
    """The sample ``k`` times as large, in words."""
    k = max(k, 1.0)
    if c.how.startswith("Welch"):
        return f"{math.ceil(k * c.n_a)} and {math.ceil(k * c.n_b)} points"
    return f"{math.ceil(k * c.n_units)} points in the sample"


def with_p(v, p: float = 1.0):
    """``v`` with ``p`` set where its rule set none (a verdict with no test, e.g. too few points), so a family
    correction can rank it (last)."""
    if v.p is not None and math.isfinite(float(v.p)):
        return v
    if v.verdict == "reproduced":
        raise ValueError(f"with_p: a reproduced verdict without a p-value cannot join a Holm family ({v.test})")
    return v._replace(p=p)


def holm(rules: Sequence[Callable], family: str, alpha: float = 0.05) -> list:
    """``rcurves.claims.verdicts.holm`` over ``rules`` (callables ``level -> Verdict``), a rule without a
    p-value ranked last (``with_p``). One family per claim: every model, radius or norm its rows test."""
    from rcurves.claims.verdicts import holm as _holm

    return _holm([lambda lv, r=r: with_p(r(lv)) for r in rules], alpha=alpha, family=family)


def worst(*vs):
    """A conjunction of verdicts, ranked as ``verdicts.all_of``: not reproducible here, else differs, else
    inconclusive, else reproduced (tests and reasons joined, a reason given by several parts once; ``p``: the
    largest)."""
    from rcurves.claims.verdicts import Verdict

    order = ("not reproducible here", "differs", "inconclusive", "reproduced")
    w = next(o for o in order if any(v.verdict == o for v in vs))
    ps = [float(v.p) for v in vs if v.p is not None]
    why = "; ".join(dict.fromkeys(v.why for v in vs if v.why and v.verdict != "reproduced"))
    return Verdict(w, "; ".join(v.test for v in vs), why, max(ps) if ps else None)


def own_values(row: dict) -> np.ndarray:
    """A residual row's per-point values on its own sample: l_2 above the box floor, l_inf as measured."""
    pp = np.asarray(row["per_point"], np.float64)
    return pp - np.asarray(row["box_floor"], np.float64) if row["norm"] == "l2" and "box_floor" in row else pp


def fmt_row(r: dict) -> str:
    return (f"{r['model']} {r['norm']} eps={r['eps']:g}: acc {r['natural_accuracy']:.3f}, adv acc "
            f"{r['adversarial_accuracy']:.3f}, sparsity {r['residual_sparsity']:.3f} +- {r['residual_stderr']:.3f} "
            f"{UNIT[r['norm']]} ({r['n_measured']}/{r['n_searched']} measured of {r['n_vulnerable']} vulnerable)")


def wilson_text(k: int, n: int) -> str:
    from rcurves.claims.verdicts import wilson

    lo, hi = wilson(int(k), int(n))
    return f"{k}/{n} = {k / max(n, 1):.3f} [95% {lo:.3f}, {hi:.3f}]"


def mcnemar_text(rob_a: np.ndarray, rob_b: np.ndarray, la: str, lb: str) -> str:
    """Paired adversarial accuracies of two models on the pool, with the exact two-sided McNemar p."""
    from rcurves.claims.verdicts import binom_two_sided

    only_a, only_b = int(np.sum(rob_a & ~rob_b)), int(np.sum(rob_b & ~rob_a))
    return (f"adversarial accuracy {la} {rob_a.mean():.3f} vs {lb} {rob_b.mean():.3f} on the same {rob_a.size} "
            f"pool points (robust for one only: {only_a} vs {only_b}, McNemar p = "
            f"{binom_two_sided(only_a, only_a + only_b):.2g})")
