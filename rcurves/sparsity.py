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

**Exact answers** for a linear classifier (:func:`linear_l2_sparsity`,
:func:`linear_linf_sparsity`) and the theory of App. E
(:func:`expected_l2_sparsity`, :func:`expected_linf_sparsity`,
:func:`linf_sparsity_bounds`) are here too.

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


# ---------------------------------------------------------------------------
# exact answers for a binary linear classifier
# ---------------------------------------------------------------------------


def _linear_inputs(w, b, x, eps, u, y):
    """Validated ``(w (d,), b (), x (n, d), eps (n,), u (n, D, d), y (n,) or -1s)``."""
    w = checks.check_array(w, "w", min_ndim=1).reshape(-1)
    x = checks.check_array(x, "x", min_ndim=2)
    n, d = x.shape[0], int(math.prod(x.shape[1:]))
    shape = tuple(x.shape[1:])
    if w.shape[0] != d:
        raise ValueError(f"w: expected {d} weights to match x of shape {tuple(x.shape)}, got {w.shape[0]}")
    if checks.is_concrete(w) and not np.any(np.asarray(w) != 0):
        raise ValueError("w: expected a non-zero normal vector (w = 0 has no boundary)")
    b = checks.check_array(np.asarray(b, np.float32).reshape(()), "b", ndim=0)
    eps = checks.check_eps(eps, n, "eps")
    u = checks.check_array(u, "u", min_ndim=2)
    if u.ndim == x.ndim and tuple(u.shape[1:]) == shape:
        u = jnp.broadcast_to(u.reshape(1, u.shape[0], d), (n, u.shape[0], d))
    elif u.ndim == x.ndim + 1 and u.shape[0] == n and tuple(u.shape[2:]) == shape:
        u = u.reshape(n, u.shape[1], d)
    else:
        raise ValueError(f"u: expected shape (D, *{shape}) or ({n}, D, *{shape}), got {tuple(u.shape)}")
    if checks.is_concrete(u) and bool(jnp.any(jnp.sum(jnp.square(u), axis=-1) == 0)):
        raise ValueError("u: every direction must be non-zero")
    y = jnp.full((n,), -1, jnp.int32) if y is None else checks.check_labels(y, n, "y", 2)
    return w, b, x.reshape(n, d), eps, u, y


@jax.jit
def _linear_l2_core(w, b, x, eps, u, y):
    s = x @ w + b
    wn = jnp.sqrt(jnp.sum(w * w))
    v = jnp.where(s > 0, -1.0, 1.0)[:, None] * (w / wn)[None, :]      # (n, d)
    uh = u / jnp.linalg.norm(u, axis=-1, keepdims=True)
    c = jnp.einsum("nkd,nd->nk", uh, v)
    sn = jnp.linalg.norm(uh - c[..., None] * v[:, None, :], axis=-1)
    phi = jnp.arctan2(sn, c)
    reach = eps * wn
    ok = (y < 0) | ((s > 0).astype(jnp.int32) == y)
    broken = jnp.where(s > 0, s <= reach, -s < reach) & ok
    beta = jnp.arccos(jnp.clip(jnp.abs(s) / jnp.maximum(reach, 1e-30), 0.0, 1.0))
    out = jnp.maximum(0.0, phi - beta[:, None])
    return jnp.where(broken[:, None], out, jnp.nan)


@jax.jit
def _linear_linf_core(w, b, x, eps, u, sigma, y):
    s = x @ w + b
    cls = (s > 0).astype(jnp.int32)
    wp = w[sigma]                                                     # (n, D, d) in sigma order
    up = jnp.take_along_axis(u, sigma, axis=-1)
    e = eps[:, None, None]
    fixed = e * wp * up
    zero = jnp.zeros(fixed.shape[:-1] + (1,))
    tail = jnp.concatenate([jnp.cumsum(fixed[..., ::-1], axis=-1)[..., ::-1], zero], axis=-1)
    head = jnp.concatenate([zero, jnp.cumsum(e * jnp.abs(wp), axis=-1)], axis=-1)
    sgn = jnp.where(cls == 1, -1.0, 1.0)[:, None, None]
    sm = s[:, None, None] + tail + sgn * head                         # (n, D, d + 1): m = 0..d
    cross = jnp.where(cls[:, None, None] == 1, sm <= 0, sm > 0)
    ok = (y < 0) | (cls == y)
    m = jnp.argmax(cross, axis=-1).astype(jnp.float32)
    return jnp.where(jnp.any(cross, axis=-1) & ok[:, None], m, jnp.nan)


def linear_l2_sparsity(w, b, x, eps, u, y=None) -> jax.Array:
    """Exact angular sparsity of ``[w.x + b > 0]`` in each direction ``u``.

    Derivation. Let ``s = w.x + b``. A point predicted 1 (``s > 0``) is broken
    by ``delta`` iff ``s + w.delta <= 0``; on the sphere ``||delta|| = eps``,
    ``w.delta = eps ||w|| cos angle(delta, w) = -eps ||w|| cos angle(delta, -w)``,
    so the adversarial set is the cap around ``v = -w/||w||``

        Adv = { angle(delta, v) <= beta },  cos(beta) = s / (eps ||w||),

    non-empty iff ``s <= eps ||w||``. A point predicted 0 (``s <= 0``) is
    broken iff ``w.delta > -s = |s|``: the (open) cap around ``v = +w/||w||``
    with ``cos(beta) = |s| / (eps ||w||)``, non-empty iff ``|s| < eps ||w||``.
    Two caps ``Sc(u, alpha)`` and ``Sc(v, beta)`` meet iff
    ``angle(u, v) <= alpha + beta`` (the great circle through ``u`` and ``v``
    carries the nearest points), so the smallest ``alpha`` is

        AS(u) = max(0, angle(u, v) - beta).

    Args:
      w: ``(d,)`` (or the shape of one input); b: scalar.
      x: ``(n, *shape)``.
      eps: l_2 radius, scalar or ``(n,)``.
      u: directions ``(D, *shape)`` (shared) or ``(n, D, *shape)``; any
        non-zero vectors.
      y: optional labels; misclassified points get nan (as the estimator).

    Returns:
      ``(n, D)`` angles in radians; nan where the point is robust at ``eps``
      (or misclassified).
    """
    return _linear_l2_core(*_linear_inputs(w, b, x, eps, u, y))


def linear_linf_sparsity(w, b, x, eps, u, sigma, y=None) -> jax.Array:
    """Exact l_inf sparsity of ``[w.x + b > 0]`` for each vertex ``u`` and permutation ``sigma``.

    With ``sigma[:m]`` free in ``[-eps, eps]`` and the rest at ``eps u``, the
    score ``s + w.delta`` is extremal at ``delta_i = -eps sign(w_i)`` on free
    coordinates (for a point predicted 1; ``+eps sign(w_i)`` for class 0):

        s(m) = s + eps sum_{k >= m} w_{sigma k} u_{sigma k} -+ eps sum_{k < m} |w_{sigma k}|,

    monotone in ``m``; the sparsity is the smallest ``m`` in ``{0, ..., d}``
    with ``s(m) <= 0`` (class 1) or ``s(m) > 0`` (class 0).

    Args:
      w, b, x, eps, y: as :func:`linear_l2_sparsity` (eps in l_inf).
      u: vertices ``(D, *shape)`` or ``(n, D, *shape)``, entries +-1.
      sigma: permutations ``(D, d)`` or ``(n, D, d)`` of the flat indices.

    Returns:
      ``(n, D)`` float; nan where even ``m = d`` does not cross (robust) or the
      point is misclassified.
    """
    w, b, x, eps, u, y = _linear_inputs(w, b, x, eps, u, y)
    n, n_dir, d = u.shape
    if checks.is_concrete(u) and not bool(jnp.all(jnp.abs(u) == 1.0)):
        raise ValueError("u: expected vertices with entries in {-1, +1}")
    sg = np.asarray(sigma) if checks.is_concrete(sigma) else sigma
    if not np.issubdtype(np.dtype(sg.dtype), np.integer):
        raise ValueError(f"sigma: expected integer flat indices, got dtype {sg.dtype}")
    want = (n, n_dir, d)
    if tuple(sg.shape) == (n_dir, d):
        sg = np.broadcast_to(sg, want) if isinstance(sg, np.ndarray) else jnp.broadcast_to(sg, want)
    elif tuple(sg.shape) != want:
        raise ValueError(f"sigma: expected shape ({n_dir}, {d}) or {want}, got {tuple(sg.shape)}")
    if isinstance(sg, np.ndarray) and not np.array_equal(np.sort(sg, axis=-1),
                                                         np.broadcast_to(np.arange(d), want)):
        raise ValueError(f"sigma: every row must be a permutation of range({d})")
    return _linear_linf_core(w, b, x, eps, u, jnp.asarray(sg, jnp.int32), y)


# ---------------------------------------------------------------------------
# theory: k uniformly random adversarial perturbations (paper 004, App. E)
# ---------------------------------------------------------------------------


def _check_nk(n, k):
    n = checks.check_positive_int(n, "n")
    k = checks.check_positive_int(k, "k")
    return n, k


def expected_l2_sparsity(n: int, k: int, *, as_printed: bool = False) -> float:
    """Eq. 8: expected angular sparsity when Adv is ``k`` uniform points of ``S^{n-1}``.

    ``E[AS] = int_0^pi (1 - g(alpha))^k d alpha`` (Prop. E.1), with ``g`` the
    fraction of the sphere in a cap of angle ``alpha``:
    ``g = t_alpha / 2`` for ``alpha <= pi/2`` and ``1 - t_{pi - alpha} / 2``
    above, ``t_alpha = I_{sin^2 alpha}((n-1)/2, 1/2)`` (Li 2011), so

        E[AS] = int_0^{pi/2} (1 - t_alpha/2)^k + (t_alpha/2)^k d alpha.

    Erratum: eq. 8 as printed (and eq. 26) uses ``g = t_alpha``, i.e. it
    forgets that the cap at ``alpha = pi/2`` is half the sphere (``I_1 = 1``
    gives ``g(pi/2) = 1``). Both forms agree for ``k = 1`` (``pi/2``) and,
    by accident, for ``n = 2`` (``pi / (k + 1)``, ``t`` linear in
    ``alpha``), but not otherwise: for ``n = 3`` (``t = 1 - cos(alpha)``)
    and ``k = 2`` the printed form gives ``pi - 2 = 1.142`` and the corrected
    one ``3 pi / 8 = 1.178``, the Monte Carlo value of the definition.
    ``as_printed=True`` evaluates the printed formula.

    Args:
      n: dimension (>= 2). k: number of adversarial perturbations (>= 1).

    Returns:
      the expectation in radians (float).
    """
    from scipy import integrate, special

    n, k = _check_nk(n, k)
    if n < 2:
        raise ValueError(f"n: expected a dimension >= 2, got {n}")
    half = 1.0 if as_printed else 0.5

    def integrand(a):
        t = half * special.betainc((n - 1) / 2.0, 0.5, math.sin(a) ** 2)
        return (1.0 - t) ** k + t ** k

    # The integrand changes fastest where t ~ 1/k; give quad breakpoints.
    pts = sorted({min(max(p, 1e-9), math.pi / 2 - 1e-9) for p in np.linspace(0, math.pi / 2, 9)[1:-1]})
    val, _ = integrate.quad(integrand, 0.0, math.pi / 2, points=pts, limit=400,
                            epsabs=1e-11, epsrel=1e-10)
    return float(val)


def expected_linf_sparsity(n: int, k: int) -> float:
    """Eq. 9: ``E[AS] = sum_{m=0}^{n} (1 - 2^{-m})^k`` for ``k`` uniform vertices of ``{-1,1}^n``.

    ``P(AS > m) = (1 - 2^{m-n})^k`` (``Delta^m`` holds ``2^m`` of the ``2^n``
    vertices) and ``E[AS] = sum_{m=0}^{n-1} P(AS > m)``, which is eq. 9 (its
    ``m = 0`` term is 0).
    """
    n, k = _check_nk(n, k)
    m = np.arange(1, n + 1, dtype=np.float64)
    return float(np.sum(np.exp(k * np.log1p(-np.exp2(-m)))))


def linf_sparsity_bounds(n: int, k: int) -> Tuple[float, float]:
    """Eq. 10: ``(n - log2 k) / 4 <= E[AS] <= n - log2 k + e / (e - 1)``.

    Valid for ``1 <= k <= 2^n`` (at most as many perturbations as vertices;
    the proof splits the sum of eq. 9 at ``floor(log2 k) <= n``). For larger
    ``k`` the upper bound can be negative while ``E[AS] > 0``, so it raises.
    """
    n, k = _check_nk(n, k)
    if n < 63 and k > 2 ** n:
        raise ValueError(f"k: eq. 10 holds for 1 <= k <= 2^n = {2 ** n}, got {k}")
    lk = math.log2(k)
    return (n - lk) / 4.0, n - lk + math.e / (math.e - 1.0)


__all__ = [
    "MEASURED",
    "MISCLASSIFIED",
    "ROBUST",
    "SparsityCurve",
    "SparsityResult",
    "adversarial_accuracy",
    "expected_l2_sparsity",
    "expected_linf_sparsity",
    "fraction_measured",
    "l2_directions",
    "l2_sparsity",
    "l2_sparsity_full",
    "linear_l2_sparsity",
    "linear_linf_sparsity",
    "linf_directions",
    "linf_sparsity",
    "linf_sparsity_bounds",
    "linf_sparsity_full",
    "residual_sparsity",
    "sparsity_curve",
    "sparsity_summary",
]
