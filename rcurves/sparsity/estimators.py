"""Adversarial sparsity (paper 004): how large a random subset of the threat model
must be to contain an adversarial perturbation.

**Definitions** (paper 004, Sec. 3.2; eqs. 4-7). For a direction drawn at
random, a nested family of subsets of the admissible perturbations grows with
a parameter; the sparsity in that direction is the smallest parameter at
which the subset contains an adversarial perturbation, and the sparsity of a
point is its mean over directions.

* l_2 (angular sparsity): ``u ~ U(S^{d-1})``, subsets are the spherical caps
  ``Sc(u, alpha) = {||delta|| = eps, angle(delta, u) <= alpha}``, parameter
  ``alpha in [0, pi]`` (radians).
* l_inf: a vertex ``u ~ U({-1, +1}^d)`` and a permutation ``sigma``; the
  subset ``Delta^m`` frees the coordinates ``sigma[:m]`` (to ``[-eps, eps]``)
  and fixes the others at ``eps u``; parameter ``m in {0, ..., d}``.

**Estimators** (Sec. 4.3, Algorithm 1). Per point, ``n_directions`` directions
are drawn once and reused; per direction, ``search_steps`` rounds of
bisection over the parameter with the constrained attack as the oracle
(``attacks.cap.cap_lane`` / ``attacks.vertex.vertex_lane``). The value of a
direction is the **smallest parameter at which an adversarial was verified**
(``argmax != y`` re-evaluated at the returned point, which satisfies every
constraint), not the last midpoint; for l_2 it is the actual angle of that
adversarial with ``u`` (at most the tested angle), for l_inf the actual number
of coordinates off the vertex in ``sigma`` order (at most the tested ``m``).
Every direction starts from a verified upper end: the plain attack's
adversarial projected onto the sphere (l_2; its angle with ``u``) or the
plain adversarial itself (l_inf, ``m = d``: every coordinate free); each round
warm-starts every lane from the best adversarial of that direction projected
onto the candidate subset. A direction with no verified adversarial at all
(l_2: the plain adversarial left the model correct once put on the sphere,
and no round found one) gets the upper end of the range (``pi``, ``d``) and
``found = False``.

**Which points count** (Sec. 4.4, "residual" sparsity) is explicit and the
same for both norms: a point is *measured* when it is correctly classified
and ``attacks.pgd(..., loss="margin")`` at ``eps`` returns a point with
``argmax != y``; otherwise its sparsity is ``nan`` and ``reason`` says why
(1: misclassified, 2: robust at eps). :func:`residual_sparsity` is the mean
over measured points and :func:`fraction_measured` the fraction of points
measured; ``mean(reason == 2)`` is the adversarial accuracy.

**Cost** per measured point: ``n_directions * search_steps * candidates *
steps`` gradient evaluations plus one forward pass per lane per round, and
``steps`` (``plain_steps``) for the plain attack. All points x directions x
candidates run in lockstep in one jitted program (points and lanes
``vmap``ped, rounds and steps ``lax.scan``ned). To trade accuracy for time:
fewer directions (the standard error over directions is returned; paper 004
Sec. 6.1 reports std < 0.022 rad over directions, so 100 give +-0.002), fewer
search steps (the l_2 bracket after ``R`` rounds is ``pi / 2^R`` wide; l_inf
needs ``ceil(log2(d + 1))`` rounds to be exact, fewer leave an upper bound),
fewer PGD steps (a weaker oracle biases sparsity upwards). ``candidates > 1``
tests several parameters per round (n-ary search, App. B.2): the bracket
shrinks by ``candidates + 1`` per round at ``candidates`` times the cost.

**API.** :func:`l2_sparsity` / :func:`linf_sparsity` return the ``(n,)``
array of the design (mean over directions, ``nan`` where not measured);
:func:`l2_sparsity_full` / :func:`linf_sparsity_full` return the
:class:`SparsityResult` it comes from (per-direction values, ``found``,
standard errors, ``measured``, ``reason``; ``.mean_angle`` / ``.mean_m``
alias ``.per_point``), and :func:`sparsity_summary` the numbers of a table
row. Measured points are searched in chunks of ``batch_points`` (default:
their count rounded up to a power of two, padded), one compilation per
chunk size; a point's random draws depend only on its key, not on the
chunking.

**Exact answers** for a linear classifier are in
:mod:`rcurves.sparsity.linear` and the theory of App. E in
:mod:`rcurves.sparsity.theory`.

With ``bounds``, the admissible sets are intersected with the input domain
(see ``attacks.cap`` and ``attacks.vertex``): an l_2 cap that the domain
leaves empty contains no adversarial, which raises l_2 sparsity near
saturated pixels.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jax.extend.random import threefry_2x32

from attacks import checks
from attacks.cap import CapConfig, cap_angle, cap_feasible, cap_lane, misclassified, seed_and_end
from attacks.engine import single
from attacks.pgd import pgd
from attacks.vertex import m_effective, ranks, vertex_box, vertex_lane
from attacks.xla import program

MEASURED, MISCLASSIFIED, ROBUST = 0, 1, 2


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------


class SparsityResult(NamedTuple):
    """Per-point adversarial sparsity and why some points are not measured.

    Attributes:
      per_point: ``(n,)`` mean over directions (radians for l_2, a number of
        dimensions for l_inf); ``nan`` where not measured.
      per_direction: ``(n, n_directions)`` value per direction; ``nan`` rows
        where not measured.
      found: ``(n, n_directions)`` bool, the value is backed by a verified
        adversarial (else it is the top of the range, ``pi`` or ``d``).
      stderr: ``(n,)`` standard error of ``per_point`` over directions
        (``std(ddof=1) / sqrt(n_directions)``; nan for one direction).
      measured: ``(n,)`` bool, correctly classified and broken at eps.
      reason: ``(n,)`` int32: 0 measured, 1 misclassified, 2 robust at eps.
    """

    per_point: jax.Array
    per_direction: jax.Array
    found: jax.Array
    stderr: jax.Array
    measured: jax.Array
    reason: jax.Array

    @property
    def mean_angle(self) -> jax.Array:
        """Alias of ``per_point`` (l_2: mean angle in radians)."""
        return self.per_point

    @property
    def mean_m(self) -> jax.Array:
        """Alias of ``per_point`` (l_inf: mean number of free dimensions)."""
        return self.per_point


def residual_sparsity(result: SparsityResult) -> float:
    """Mean sparsity over the measured points (paper 004's tables); nan if none."""
    m = np.asarray(result.measured)
    if not m.any():
        return float("nan")
    return float(np.mean(np.asarray(result.per_point)[m]))


def fraction_measured(result: SparsityResult) -> float:
    """Fraction of points measured (correctly classified and broken at eps)."""
    return float(np.mean(np.asarray(result.measured)))


def adversarial_accuracy(result: SparsityResult) -> float:
    """Fraction of points correctly classified and not broken by the plain attack."""
    return float(np.mean(np.asarray(result.reason) == ROBUST))


def sparsity_summary(result: SparsityResult) -> dict:
    """The numbers of a row of paper 004's tables, reported together.

    Returns:
      ``{"residual_sparsity", "residual_stderr", "fraction_measured",
      "adversarial_accuracy", "clean_accuracy", "n"}``: the mean sparsity over
      measured points and its standard error over those points, the fraction
      measured, the fractions correct-and-robust and correct.
    """
    reason = np.asarray(result.reason)
    meas = np.asarray(result.measured)
    pp = np.asarray(result.per_point)[meas]
    se = float(np.std(pp, ddof=1) / math.sqrt(pp.size)) if pp.size > 1 else float("nan")
    return {"residual_sparsity": residual_sparsity(result), "residual_stderr": se,
            "fraction_measured": fraction_measured(result),
            "adversarial_accuracy": adversarial_accuracy(result),
            "clean_accuracy": float(np.mean(reason != MISCLASSIFIED)), "n": int(reason.size)}


# ---------------------------------------------------------------------------
# directions (deterministic in the per-point key)
# ---------------------------------------------------------------------------


@jax.jit
def _point_keys(keys: jax.Array) -> Tuple[jax.Array, jax.Array]:
    """Per-point key -> (plain-attack key, directions key)."""
    ks = jax.vmap(lambda k: jax.random.split(k, 2))(keys)
    return ks[:, 0], ks[:, 1]


def _random_words(key, n_words: int) -> jax.Array:
    """``n_words`` random uint32 from one key: the Threefry-2x32 hash of a counter.

    This is how ``jax.random.bits`` is built (non-partitionable form); calling
    the hash directly compiles several times faster on CPU.
    """
    return threefry_2x32(key, jnp.arange(n_words, dtype=jnp.uint32))


def _normals(words: jax.Array) -> jax.Array:
    """Standard normals from uint32 words: 23-bit uniforms in (-1, 1), ``sqrt(2) erfinv``."""
    f = jax.lax.bitcast_convert_type((words >> 9) | jnp.uint32(0x3F800000), jnp.float32) - 1.0
    v = jnp.maximum(2.0 * f - 1.0, -1.0 + 2.0 ** -23)
    return jnp.sqrt(2.0) * jax.lax.erf_inv(v)


@functools.partial(jax.jit, static_argnames=("n_directions", "shape"))
def _draw_l2(dkeys, *, n_directions: int, shape):
    """``(n, D, *shape)`` unit vectors ``g / ||g||``, ``g`` standard normal, one key per point."""
    d = int(math.prod(shape))

    def one(k):
        g = _normals(_random_words(k, n_directions * d)).reshape(n_directions, d)
        return (g / jnp.linalg.norm(g, axis=1, keepdims=True)).reshape((n_directions,) + shape)

    return jax.vmap(one)(dkeys)


@functools.partial(jax.jit, static_argnames=("n_directions", "shape"))
def _draw_linf(dkeys, *, n_directions: int, shape):
    """``u (n, D, *shape)`` uniform in {-1, +1} and ``sigma (n, D, d)`` uniform permutations.

    From one stream of random words per point: the sign of ``u_i`` is the top
    bit of a word; ``sigma`` sorts other words (``jax.random.permutation``'s
    own method for ``d < 2^10``: one round of sorting by random 32-bit keys;
    ties, probability ~``d^2 / 2^33``, keep index order).
    """
    d = int(math.prod(shape))

    def one(k):
        w = _random_words(k, 2 * n_directions * d).reshape(2, n_directions, d)
        u = jnp.where((w[0] >> 31) == 1, 1.0, -1.0).astype(jnp.float32)
        sigma = jnp.argsort(w[1], axis=-1, stable=True).astype(jnp.int32)
        return u.reshape((n_directions,) + shape), sigma

    return jax.vmap(one)(dkeys)


def l2_directions(key, n: int, n_directions: int, shape: Sequence[int]) -> jax.Array:
    """The unit directions ``(n, n_directions, *shape)`` that :func:`l2_sparsity` draws with ``key``.

    ``u ~ U(S^{d-1})`` (normalised Gaussians), point ``i`` from the same
    per-point key as the estimator (``fold_in(key, i)`` for a single key).
    """
    keys = checks.check_key(key, n)
    _, kd = _point_keys(keys)
    return _draw_l2(kd, n_directions=int(n_directions), shape=tuple(int(s) for s in shape))


def linf_directions(key, n: int, n_directions: int, shape: Sequence[int]):
    """The vertices and permutations that :func:`linf_sparsity` draws with ``key``.

    Returns:
      ``(u, sigma)``: ``u (n, n_directions, *shape)`` uniform in ``{-1, +1}``
      and ``sigma (n, n_directions, d)`` uniform permutations of ``range(d)``.
    """
    keys = checks.check_key(key, n)
    _, kd = _point_keys(keys)
    return _draw_linf(kd, n_directions=int(n_directions), shape=tuple(int(s) for s in shape))


# ---------------------------------------------------------------------------
# the searches (one jitted program each)
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SparsityConfig:
    """Static configuration of a sparsity search (a jit static argument)."""

    n_directions: int
    search_steps: int
    candidates: int
    lane: CapConfig


class _Bracket(NamedTuple):
    lo: jax.Array     # () largest parameter where the oracle failed (below hi)
    hi: jax.Array     # () smallest parameter with a verified adversarial
    best: jax.Array   # (*shape) that adversarial (input space)
    found: jax.Array  # () bool


def _try(lane, cands, K: int):
    """Run ``lane`` at each candidate: ``vmap`` for K > 1, a plain call for K = 1."""
    if K == 1:
        return jax.tree_util.tree_map(lambda a: a[None], lane(cands[0]))
    return jax.vmap(lane)(cands)


def _update(st: _Bracket, cands, xa, adv, val, K: int, lo_cap) -> _Bracket:
    """One round of the bracket: ``val`` is the parameter actually used by each
    verified adversarial (``+inf``-like where none)."""
    j = 0 if K == 1 else jnp.argmin(val)
    better = (val[j] < st.hi) | (~st.found & adv[j])
    hi = jnp.where(better, val[j], st.hi)
    lo_c = jnp.max(jnp.where(~adv & (cands < hi), cands, st.lo))
    lo = jnp.minimum(jnp.maximum(st.lo, lo_c), lo_cap(hi))
    return _Bracket(lo, hi, jnp.where(better, xa[j], st.best), st.found | better)


def _lanes(x, y, eps, x_plain, n_directions):
    """Repeat per-point arrays once per direction: lane ``i * D + k``."""
    rep = lambda a: jnp.repeat(a, n_directions, axis=0)  # noqa: E731
    return rep(x), rep(y), rep(eps), rep(x_plain)


@program(static_argnames=("logits_fn", "cfg", "bounds"))
def _l2_search(logits_fn, x, y, eps, dirs, x_plain, *, cfg: SparsityConfig, bounds):
    """Per (point, direction) lane: bisection over the cap angle. -> (value, found) (n, D).

    Lanes work on flat points (``attacks.cap``: XLA:CPU vectorises along the
    minor axis); the point of sphere n box nearest to ``u``, which the box
    projection needs and which does not depend on the angle, is computed once
    per direction.
    """
    fn1 = single(logits_fn, x.shape[1:])
    K = cfg.candidates
    frac = jnp.arange(1, K + 1, dtype=jnp.float32) / (K + 1)
    pi = jnp.float32(math.pi)
    n, D = dirs.shape[:2]
    d = int(math.prod(x.shape[1:]))

    def direction(xi, yi, ei, u, xpi):
        # Verified upper end: the plain adversarial put on the sphere (alpha = pi).
        seed, end = seed_and_end(xi, u, xpi, ei, bounds, cfg.lane)
        seed_ok = cap_feasible(seed, xi, u, ei, pi, bounds, cfg.lane.rtol) & misclassified(fn1(seed), yi)
        hi0 = jnp.where(seed_ok, cap_angle(seed - xi, u), pi)

        def round_fn(st: _Bracket, _):
            cands = st.lo + (st.hi - st.lo) * frac
            xa, adv, _ = _try(lambda a: cap_lane(fn1, xi, yi, ei, u, a, st.best, cfg.lane, bounds, end),
                              cands, K)
            ang = jnp.where(adv, jax.vmap(lambda z: cap_angle(z - xi, u))(xa), jnp.inf)
            return _update(st, cands, xa, adv, ang, K, lambda hi: hi), None

        st0 = _Bracket(jnp.zeros(()), hi0, seed, seed_ok)
        st, _ = jax.lax.scan(round_fn, st0, None, length=cfg.search_steps)
        return jnp.where(st.found, st.hi, pi), st.found

    lx, ly, le, lp = _lanes(x.reshape(n, d), y, eps, x_plain.reshape(n, d), D)
    val, found = jax.vmap(direction)(lx, ly, le, dirs.reshape(n * D, d), lp)
    return val.reshape(n, D), found.reshape(n, D)


@program(static_argnames=("logits_fn", "cfg", "bounds"))
def _linf_search(logits_fn, x, y, eps, dirs, x_plain, *, cfg: SparsityConfig, bounds):
    """Per (point, direction) lane: bisection over m. -> (value, found) (n, D)."""
    fn1 = single(logits_fn)
    K = cfg.candidates
    ks = jnp.arange(1, K + 1, dtype=jnp.int32)
    us, sigmas = dirs
    n, D = sigmas.shape[:2]
    d = sigmas.shape[2]

    def direction(xi, yi, ei, u, sigma, xpi):
        rank = ranks(sigma)
        # Verified upper end: the plain adversarial, every coordinate free (m = d).
        a_box, b_box, _ = vertex_box(xi, ei, u, bounds)
        seed = jnp.clip(xpi, a_box, b_box)
        seed_ok = misclassified(fn1(seed), yi)
        hi0 = jnp.where(seed_ok, m_effective(seed, xi, ei, u, rank, bounds), d).astype(jnp.int32)

        def round_fn(st: _Bracket, _):
            cands = jnp.clip(st.lo + ((st.hi - st.lo) * ks) // (K + 1), st.lo + 1, st.hi)
            xa, adv, _ = _try(lambda m: vertex_lane(fn1, xi, yi, ei, u, rank, m, st.best, cfg.lane, bounds),
                              cands, K)
            meff = jax.vmap(lambda z: m_effective(z, xi, ei, u, rank, bounds))(xa)
            return _update(st, cands, xa, adv, jnp.where(adv, meff, d + 1), K, lambda hi: hi - 1), None

        st0 = _Bracket(jnp.asarray(-1, jnp.int32), hi0, seed, seed_ok)
        st, _ = jax.lax.scan(round_fn, st0, None, length=cfg.search_steps)
        return jnp.where(st.found, st.hi, d).astype(jnp.float32), st.found

    lx, ly, le, lp = _lanes(x, y, eps, x_plain, D)
    val, found = jax.vmap(direction)(lx, ly, le, us.reshape((n * D,) + x.shape[1:]),
                                     sigmas.reshape(n * D, d), lp)
    return val.reshape(n, D), found.reshape(n, D)


# ---------------------------------------------------------------------------
# drivers
# ---------------------------------------------------------------------------


def _pad_take(a, idx, size):
    """``a[idx]`` padded to ``size`` rows by repeating the first index (on the host)."""
    pad = np.concatenate([idx, np.full(size - len(idx), idx[0], dtype=idx.dtype)])
    return np.asarray(a)[pad]


def _chunks(n: int, size: int):
    for s in range(0, n, size):
        yield np.arange(s, min(s + size, n))


@program(static_argnames=("logits_fn",))
def _classify(logits_fn, x, x_plain, y):
    """(clean prediction correct, plain adversarial misclassified), ``(n,)`` each (finite logits only)."""
    lc, lp = logits_fn(x), logits_fn(x_plain)
    correct = (jnp.argmax(lc, axis=-1) == y) & jnp.all(jnp.isfinite(lc), axis=-1)
    broken = (jnp.argmax(lp, axis=-1) != y) & jnp.all(jnp.isfinite(lp), axis=-1)
    return correct, broken


def _sparsity_full(norm, search, draw, logits_fn, x, y, eps, *, key, n_directions, search_steps,
                   steps, bounds, candidates, plain_steps, batch_points, rtol, initial_step):
    x, y, bounds, _ = checks.check_model_inputs(logits_fn, x, y, bounds)
    n = x.shape[0]
    d = int(math.prod(x.shape[1:]))
    if norm == "l2" and d < 2:
        raise ValueError(f"x: l_2 sparsity needs inputs of dimension >= 2, got shape {tuple(x.shape)}")
    eps = checks.check_eps(eps, n, "eps")
    keys = checks.check_key(key, n)
    n_directions = checks.check_positive_int(n_directions, "n_directions")
    search_steps = checks.check_positive_int(search_steps, "search_steps")
    steps = checks.check_positive_int(steps, "steps")
    candidates = checks.check_positive_int(candidates, "candidates")
    plain_steps = steps if plain_steps is None else checks.check_positive_int(plain_steps, "plain_steps")
    size = n if batch_points is None else checks.check_positive_int(batch_points, "batch_points")
    lane = CapConfig(steps=steps, rtol=checks.check_positive_float(rtol, "rtol"),
                     initial_step=checks.check_positive_float(initial_step, "initial_step"))
    cfg = SparsityConfig(n_directions, search_steps, candidates, lane)
    kplain, kdir = _point_keys(keys)

    # Stage 1: which points count (plain margin PGD at eps).
    reason = np.empty(n, np.int32)
    x_plain = []
    for idx in _chunks(n, size):
        xc, yc = _pad_take(x, idx, size), _pad_take(y, idx, size)
        xp = pgd(logits_fn, xc, yc, _pad_take(eps, idx, size), norm=norm, steps=plain_steps,
                 key=_pad_take(kplain, idx, size), bounds=bounds, loss="margin")
        correct, broken = (np.asarray(a) for a in _classify(logits_fn, xc, xp, yc))
        k = len(idx)
        reason[idx] = np.where(~correct[:k], MISCLASSIFIED, np.where(broken[:k], MEASURED, ROBUST))
        x_plain.append(np.asarray(xp)[:k])
    x_plain = np.concatenate(x_plain)
    measured = reason == MEASURED

    # Stage 2: the searches, on measured points only.
    per_dir = np.full((n, n_directions), np.nan, np.float32)
    found = np.zeros((n, n_directions), bool)
    todo = np.flatnonzero(measured)
    # Fixed chunk size, or the count rounded up to a power of two (at most
    # log2(n) compilations over many calls, at most 2x padding).
    size2 = size if batch_points is not None else min(n, 1 << max(len(todo) - 1, 0).bit_length())
    for s in range(0, len(todo), size2):
        idx = todo[s:s + size2]
        vals, fnd = search(
            logits_fn, _pad_take(x, idx, size2), _pad_take(y, idx, size2),
            _pad_take(eps, idx, size2),
            draw(_pad_take(kdir, idx, size2), n_directions=n_directions, shape=tuple(x.shape[1:])),
            _pad_take(x_plain, idx, size2), cfg=cfg, bounds=bounds,
        )
        per_dir[idx] = np.asarray(vals)[: len(idx)]
        found[idx] = np.asarray(fnd)[: len(idx)]

    with np.errstate(invalid="ignore", divide="ignore"):
        per_point = per_dir.mean(axis=1)
        if n_directions > 1:
            stderr = per_dir.std(axis=1, ddof=1) / math.sqrt(n_directions)
        else:
            stderr = np.full(n, np.nan, np.float32)
    return SparsityResult(
        jnp.asarray(per_point, jnp.float32), jnp.asarray(per_dir), jnp.asarray(found),
        jnp.asarray(stderr, jnp.float32), jnp.asarray(measured), jnp.asarray(reason),
    )


_OPTIONS_DOC = """
    Args:
      logits_fn: ``(n, *shape) -> (n, K)``.
      x: inputs ``(n, *shape)``; y: labels ``(n,)``.
      eps: radius (l_2 or l_inf), scalar or ``(n,)``.
      key: PRNG key, or one per point ``(n, 2)``; point ``i`` of a batch with
        a single key uses ``fold_in(key, i)`` (directions, plain attack).
      n_directions: directions per point (paper: 100).
      search_steps: bisection rounds per direction (paper: 10).
      steps: PGD steps of each constrained attack (paper: 20), also of the
        plain attack unless ``plain_steps`` is given.
      bounds: ``(lo, hi)`` input domain or None (unbounded R^d).
      candidates: parameters tested per round (1 = bisection).
      plain_steps: steps of the plain attack that decides which points count.
      batch_points: points per jitted call (memory bound); None = all at once.
      rtol: tolerance of the l_2 sphere/cap checks.
      initial_step: first PGD step as a multiple of eps (APGD: 2).
"""


def l2_sparsity_full(logits_fn, x, y, eps, *, key, n_directions: int, search_steps: int,
                     steps: int, bounds=None, candidates: int = 1, plain_steps=None,
                     batch_points=None, rtol: float = 1e-4, initial_step: float = 2.0
                     ) -> SparsityResult:
    """Angular (l_2) adversarial sparsity with diagnostics (paper 004, Algorithm 1).

    Per measured point: ``u ~ U(S^{d-1})`` (``n_directions``, see
    :func:`l2_directions`), bisection over ``alpha in [0, pi]`` with
    ``attacks.cap`` PGD as the oracle; per direction the smallest angle at
    which an adversarial was verified; mean over directions.
    """ + _OPTIONS_DOC + """
    Returns:
      :class:`SparsityResult` (angles in radians).
    """
    return _sparsity_full("l2", _l2_search, _draw_l2, logits_fn, x, y, eps, key=key,
                          n_directions=n_directions, search_steps=search_steps, steps=steps,
                          bounds=bounds, candidates=candidates, plain_steps=plain_steps,
                          batch_points=batch_points, rtol=rtol, initial_step=initial_step)


def linf_sparsity_full(logits_fn, x, y, eps, *, key, n_directions: int, search_steps: int,
                       steps: int, bounds=None, candidates: int = 1, plain_steps=None,
                       batch_points=None, rtol: float = 1e-4, initial_step: float = 2.0
                       ) -> SparsityResult:
    """l_inf adversarial sparsity with diagnostics (paper 004, Sec. 4.3).

    Per measured point: ``(u, sigma)`` with ``u`` uniform on ``{-1, +1}^d``
    and ``sigma`` a uniform permutation (see :func:`linf_directions`);
    bisection over ``m in {0, ..., d}`` with ``attacks.vertex`` PGD as the
    oracle; per direction the smallest ``m`` at which an adversarial was
    verified; mean over directions. Exact bisection needs
    ``search_steps >= ceil(log2(d + 1))``.
    """ + _OPTIONS_DOC + """
    Returns:
      :class:`SparsityResult` (numbers of free dimensions, as floats).
    """
    return _sparsity_full("linf", _linf_search, _draw_linf, logits_fn, x, y, eps, key=key,
                          n_directions=n_directions, search_steps=search_steps, steps=steps,
                          bounds=bounds, candidates=candidates, plain_steps=plain_steps,
                          batch_points=batch_points, rtol=rtol, initial_step=initial_step)


def l2_sparsity(logits_fn, x, y, eps, *, key, n_directions: int, search_steps: int,
                steps: int, bounds=None, **options) -> jax.Array:
    """Angular (l_2) sparsity per point: ``(n,)`` mean angle in radians, nan where not measured.

    ``l2_sparsity_full(...).per_point``; see :func:`l2_sparsity_full` for the
    options and for the standard errors, reasons and per-direction values.
    """
    return l2_sparsity_full(logits_fn, x, y, eps, key=key, n_directions=n_directions,
                            search_steps=search_steps, steps=steps, bounds=bounds,
                            **options).per_point


def linf_sparsity(logits_fn, x, y, eps, *, key, n_directions: int, search_steps: int,
                  steps: int, bounds=None, **options) -> jax.Array:
    """l_inf sparsity per point: ``(n,)`` mean number of free dimensions, nan where not measured.

    ``linf_sparsity_full(...).per_point``; see :func:`linf_sparsity_full`.
    """
    return linf_sparsity_full(logits_fn, x, y, eps, key=key, n_directions=n_directions,
                              search_steps=search_steps, steps=steps, bounds=bounds,
                              **options).per_point


# ---------------------------------------------------------------------------
# sparsity as a function of eps (paper 004, Fig. 3 and 6)
# ---------------------------------------------------------------------------


class SparsityCurve(NamedTuple):
    """Sparsity and adversarial accuracy against the radius.

    Attributes:
      eps: ``(E,)`` radii.
      residual_sparsity: ``(E,)`` mean over measured points (nan if none).
      stderr: ``(E,)`` standard error of that mean over the measured points.
      adversarial_accuracy: ``(E,)`` fraction correct and not broken.
      fraction_measured: ``(E,)``.
      results: :class:`SparsityResult` whose arrays have a leading ``E`` axis.
    """

    eps: np.ndarray
    residual_sparsity: np.ndarray
    stderr: np.ndarray
    adversarial_accuracy: np.ndarray
    fraction_measured: np.ndarray
    results: SparsityResult


def sparsity_curve(logits_fn, x, y, eps_values, *, norm: str, key, n_directions: int,
                   search_steps: int, steps: int, bounds=None, **options) -> SparsityCurve:
    """Sparsity and adversarial accuracy as functions of eps (paper 004, Fig. 3).

    All radii run as one batch (points tiled ``E`` times, one radius each), so
    one compilation serves the whole curve; a point uses the same directions at
    every radius (its key does not depend on the radius), which makes the curve
    smoother than independent draws.

    Args:
      eps_values: ``(E,)`` radii, each >= 0.
      norm: 'l2' or 'linf'.
      other arguments: as :func:`l2_sparsity_full`.
    """
    norm = checks.check_norm(norm)
    if norm not in ("l2", "linf"):
        raise ValueError(f"norm: sparsity is defined for 'l2' and 'linf', got {norm!r}")
    x = checks.check_array(x, "x", min_ndim=2)
    n = x.shape[0]
    try:
        ev = np.asarray(eps_values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"eps_values: expected a non-empty 1-D array of radii >= 0, got {eps_values!r}") from None
    if ev.size == 0 or not np.all(np.isfinite(ev)) or np.any(ev < 0):
        raise ValueError(f"eps_values: expected a non-empty 1-D array of radii >= 0, got {eps_values!r}")
    E = ev.size
    keys = checks.check_key(key, n)
    y = checks.check_labels(y, n, "y")
    xt = np.tile(np.asarray(x), (E,) + (1,) * (x.ndim - 1))
    yt = np.tile(np.asarray(y), E)
    et = np.repeat(ev.astype(np.float32), n)
    kt = np.tile(np.asarray(keys), (E, 1))
    full = l2_sparsity_full if norm == "l2" else linf_sparsity_full
    r = full(logits_fn, xt, yt, et, key=kt, n_directions=n_directions, search_steps=search_steps,
             steps=steps, bounds=bounds, **options)
    res = SparsityResult(*[a.reshape((E, n) + a.shape[1:]) for a in r])
    pp = np.asarray(res.per_point)
    meas = np.asarray(res.measured)
    cnt = meas.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rs = np.where(cnt > 0, np.nansum(np.where(meas, pp, 0.0), axis=1) / cnt, np.nan)
        sd = np.array([np.std(pp[e][meas[e]], ddof=1) / math.sqrt(cnt[e]) if cnt[e] > 1 else np.nan
                       for e in range(E)])
    return SparsityCurve(ev, rs, sd, (np.asarray(res.reason) == ROBUST).mean(axis=1),
                         meas.mean(axis=1), res)


__all__ = [
    "MEASURED",
    "MISCLASSIFIED",
    "ROBUST",
    "SparsityConfig",
    "SparsityCurve",
    "SparsityResult",
    "adversarial_accuracy",
    "fraction_measured",
    "l2_directions",
    "l2_sparsity",
    "l2_sparsity_full",
    "linf_directions",
    "linf_sparsity",
    "linf_sparsity_full",
    "residual_sparsity",
    "sparsity_curve",
    "sparsity_summary",
]
