"""Exact minimal adversarial distances of small ReLU networks by mixed-integer programming.

For one point ``(x, y)`` and a radius ``R``, the minimal l_inf or l_1
distance *within the ball of radius R* is the optimum of (Tjeng, Xiao &
Tedrake 2019, big-M constants from interval bounds)::

    min  t            (l_inf: |x'_i - x_i| <= t;  l_1: t = sum_i s_i, |x'_i - x_i| <= s_i)
    s.t. x' in [max(x - R, lo), min(x + R, hi)]
         h_k = W_k a_{k-1} + c_k,   a_0 = x'                     (dense W_k of each block)
         a_k = h_k                     where l_k >= 0 (stable active)
         a_k = 0                       where u_k <= 0 (stable inactive)
         a_k >= 0, a_k >= h_k, a_k <= u_k d_k, a_k <= h_k - l_k (1 - d_k), d_k in {0, 1}   (else)
         z_j - z_y >= -M_j (1 - b_j),  sum_j b_j >= 1,  b_j in {0, 1}   (some class j != y wins)

``l_k, u_k`` are CROWN bounds (intersected with IBP) on the ball of radius
``R``, widened by a relative 1e-5 against float32 rounding; classes whose
margin CROWN already certifies on that ball are left out; ``M_j`` is minus
an interval lower bound of ``z_j - z_y``. HiGHS (``certify.highs``, the
solver behind ``scipy.optimize.milp``) solves it, warm-started from the best
adversarial known when it lies in the ball (every variable computed from it).

Its LP relaxation is weak: the relaxed ReLUs of the whole ball are available
at ``t = 0`` already, so the root bound is usually 0 and only branching
proves anything. The search is therefore staged, on a bracket
``[lower, upper]`` that starts at CROWN's certified radius and the attack's
distance (``upper``, or the box's diameter):

1. the MILP on the whole ball ``R = upper`` (small networks are solved here:
   the optimum is the minimal distance);
2. then MILPs on balls just above ``lower``, ``R = lower (1 + s)``: an
   infeasible one proves ``lower = R`` (and doubles ``s``), an optimal one
   ends the search (the minimiser lies in the ball), an undecided one
   divides ``s`` by 4; a feasible point found on the way lowers ``upper``.
   Smaller balls have fewer unstable ReLUs (binaries), so these are the MILPs
   HiGHS can decide on networks where stage 1 is out of reach.

Each stage gets at most a quarter of the point's ``time_limit``. Every
point the solver returns is re-checked with the real network in float32: it
is pushed outward along its ray (by ``NUDGES``, up to 1%) until it is
misclassified by a margin above float noise (``attacks.losses.
confidently_adversarial``), so that a boundary point the solver's tolerances
or float32 rounding leave on either side is replaced by one that any
evaluation of the network agrees on; ``upper`` is the smallest such
distance. A distance is called *exact* where ``upper - lower <= rtol *
upper`` (``rtol`` 1e-3 by default: the confidently misclassified point lies
beyond the boundary by the float-noise margin, which near a boundary between
two large, nearly equal logits costs up to a few 1e-4 of the distance;
HiGHS's own relative gap is set to 1e-6). Lower bounds are those of the
solver's tolerances (1e-6 feasibility) and of float32 bound propagation.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, List, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from attacks import checks
from attacks.losses import confidently_adversarial
from rcurves.certify import highs
from rcurves.nets.bounds import BoundConfig, bounds_and_spec, margin_spec, prepare
from rcurves.certify.checks import check_net, check_points, check_upper, diameter
from rcurves.nets.layers import Network, block_jacobian
from rcurves.certify.radius import chunk_size
from attacks.precision import exact_precision

EXACT_RTOL = 1e-3
#: Radii tried along the ray x + s (x* - x) when re-checking the solver's point.
NUDGES = tuple(1.0 + t for t in (0.0, 1e-6, 3e-6, 1e-5, 2e-5, 4e-5, 7e-5, 1e-4, 1.5e-4, 2e-4, 3e-4, 5e-4,
                                 7e-4, 1e-3, 3e-3, 1e-2))
_WIDEN = 1e-5
_MIP_GAP = 1e-6


class ExactResult(NamedTuple):
    """Per-point result of :func:`exact_search`.

    Attributes:
      lower: ``(n,)`` lower bounds on the minimal distance: the largest ball
        proven free of adversarials (by CROWN, by an infeasible MILP, or by an
        optimal one: the optimum).
      upper: ``(n,)`` distances of re-checked adversarials (``inf`` if none).
      x_adv: ``(n, *shape)`` the adversarial attaining ``upper`` (``x`` where none).
      exact: ``(n,)`` bool, ``upper - lower <= rtol * upper``.
      status: ``(n,)`` strings, the last stage's outcome: 'optimal',
        'time_limit', 'infeasible' (no adversarial in that ball), 'certified'
        (CROWN proved that ball), 'crown' (no MILP was needed: CROWN's radius
        met the attack's distance), 'misclassified' or 'failed'.
      seconds: ``(n,)`` wall-clock time spent on each point's MILPs.
      binaries: ``(n,)`` unstable ReLUs (binary variables) of the last MILP.
    """

    lower: np.ndarray
    upper: np.ndarray
    x_adv: np.ndarray
    exact: np.ndarray
    status: np.ndarray
    seconds: np.ndarray
    binaries: np.ndarray


# ---------------------------------------------------------------------------
# bounds on the region, in one jitted program


def _region_program(net, x, y, eps, *, cfg: BoundConfig, batch: int):
    prep = prepare(net, cfg)
    k = net.n_classes

    def one(a):
        xi, yi, ei = a
        hb, sb = bounds_and_spec(prep, xi, ei, margin_spec(yi, k), cfg)
        return [(l.reshape(-1), u.reshape(-1)) for l, u in hb], sb.lb

    return jax.lax.map(one, (x, y, eps), batch_size=batch)


_region_jit = jax.jit(_region_program, static_argnames=("cfg", "batch"))


@jax.jit
@exact_precision
def _dense_blocks(net: Network):
    shapes = net.shapes
    mats, consts = [], []
    for k, block in enumerate(net.blocks):
        mats.append(block_jacobian(block, shapes[k], shapes[k + 1]).reshape(-1, int(np.prod(shapes[k]))))
        out = jnp.zeros(shapes[k], jnp.float32)
        for layer in block:
            out = layer.apply(out)
        consts.append(out.reshape(-1))
    return mats, consts


# ---------------------------------------------------------------------------
# the MILP of one point


@dataclasses.dataclass
class _Model:
    c: np.ndarray
    integrality: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    rows: List[sp.spmatrix]
    row_lb: List[np.ndarray]
    row_ub: List[np.ndarray]
    n_binary: int
    off_a: List[int]      # first column of a_k
    off_d: List[int]      # first column of d_k
    off_b: int            # first column of b
    cand: List[int]       # classes j that may win


def _build(mats, consts, hidden, margin_lb, x, y, radius, box, norm) -> Optional[_Model]:
    """Variables: x' (d), t or s (1 or d), a_k per hidden layer, d_k per hidden layer, b (K)."""
    d = x.size
    k_classes = consts[-1].size
    sizes = [c.size for c in consts[:-1]]
    n_norm = 1 if norm == "linf" else d
    off_a, off = [], d + n_norm
    for m in sizes:
        off_a.append(off)
        off += m
    off_d = []
    for m in sizes:
        off_d.append(off)
        off += m
    off_b, n_var = off, off + k_classes
    lb, ub = np.zeros(n_var), np.zeros(n_var)
    integ = np.zeros(n_var, np.int8)
    lb[:d], ub[:d] = box
    ub[d:d + n_norm] = radius
    rows, rlo, rhi = [], [], []

    def add(mat, lo, hi):
        mat = sp.csr_matrix(mat) if not sp.issparse(mat) else mat.tocsr()
        rows.append(mat)
        rlo.append(np.broadcast_to(np.asarray(lo, np.float64), (mat.shape[0],)))
        rhi.append(np.broadcast_to(np.asarray(hi, np.float64), (mat.shape[0],)))

    eye_d = sp.identity(d, format="csr")
    if norm == "linf":
        ones = sp.csr_matrix(np.ones((d, 1)))
        blk = sp.hstack([eye_d, -ones])
        add(_place(blk, 0, n_var), -np.inf, x)          # x' - t <= x
        add(_place(sp.hstack([eye_d, ones]), 0, n_var), x, np.inf)  # x' + t >= x
    else:
        add(_place(sp.hstack([eye_d, -eye_d]), 0, n_var), -np.inf, x)
        add(_place(sp.hstack([eye_d, eye_d]), 0, n_var), x, np.inf)
        add(_place(sp.csr_matrix(np.ones((1, d))), d, n_var), -np.inf, [radius])
    n_binary = 0
    prev_off, prev_lo, prev_hi = 0, box[0], box[1]
    for k, m in enumerate(sizes):
        l, u = hidden[k]
        l = l - _WIDEN * (1.0 + np.abs(l))
        u = u + _WIDEN * (1.0 + np.abs(u))
        w, c = mats[k], consts[k]
        act, ina = l >= 0, u <= 0
        uns = ~(act | ina)
        a0, d0 = off_a[k], off_d[k]
        ub[a0:a0 + m] = np.maximum(u, 0.0)
        ub[a0:a0 + m][ina] = 0.0
        ub[d0:d0 + m] = uns.astype(np.float64)
        integ[d0:d0 + m] = 1
        n_binary += int(uns.sum())
        wprev = sp.csr_matrix(w)
        for sel, kind in ((act, "eq"), (uns, "uns")):
            idx = np.flatnonzero(sel)
            if idx.size == 0:
                continue
            ws = -wprev[idx]
            ea = sp.csr_matrix((np.ones(idx.size), (np.arange(idx.size), a0 + idx)), shape=(idx.size, n_var))
            base = ea + _place(ws, prev_off, n_var)
            if kind == "eq":
                add(base, c[idx], c[idx])                       # a = h
                continue
            add(base, c[idx], np.inf)                            # a >= h
            ed = sp.csr_matrix((-l[idx], (np.arange(idx.size), d0 + idx)), shape=(idx.size, n_var))
            add(base + ed, -np.inf, c[idx] - l[idx])             # a <= h - l (1 - d)
            eu = sp.csr_matrix((np.concatenate([np.ones(idx.size), -u[idx]]),
                                (np.tile(np.arange(idx.size), 2), np.concatenate([a0 + idx, d0 + idx]))),
                               shape=(idx.size, n_var))
            add(eu, -np.inf, 0.0)                                # a <= u d
        prev_off, prev_lo, prev_hi = a0, np.maximum(l, 0.0), np.maximum(u, 0.0)
    # some class j != y reaches z_y
    w, c = mats[-1], consts[-1]
    cand = [j for j in range(k_classes) if j != y and not margin_lb[j] > 0]
    if not cand:
        return None
    for j in cand:
        g = (w[j] - w[y]).astype(np.float64)
        g0 = float(c[j] - c[y])
        g_low = float(np.sum(np.where(g > 0, g * prev_lo, g * prev_hi))) + g0
        big_m = max(0.0, -g_low) * (1 + 1e-6) + 1e-6
        if len(cand) == 1:
            add(_place(sp.csr_matrix(g[None]), prev_off, n_var), [-g0], np.inf)
            continue
        row = _place(sp.csr_matrix(g[None]), prev_off, n_var).tolil()
        row[0, off_b + j] = -big_m
        add(row, [-big_m - g0], np.inf)
        ub[off_b + j] = 1.0
        integ[off_b + j] = 1
    if len(cand) > 1:
        ones = np.zeros((1, n_var))
        ones[0, [off_b + j for j in cand]] = 1.0
        add(ones, [1.0], np.inf)
        n_binary += len(cand)
    cost = np.zeros(n_var)
    cost[d:d + n_norm] = 1.0
    return _Model(cost, integ, lb, ub, rows, rlo, rhi, n_binary, off_a, off_d, off_b, cand)


def _place(block, col0: int, n_var: int) -> sp.csr_matrix:
    """``block`` (rows, w) as columns ``col0 .. col0 + w`` of an ``n_var``-wide matrix."""
    block = sp.csr_matrix(block)
    r, w = block.shape
    left = sp.csr_matrix((r, col0))
    right = sp.csr_matrix((r, n_var - col0 - w))
    return sp.hstack([left, block, right], format="csr")


def _start(model: _Model, mats, consts, x: np.ndarray, xa: np.ndarray, y: int, norm: str) -> Optional[np.ndarray]:
    """The MILP's variables at a known adversarial ``xa`` (flat), as HiGHS's first incumbent."""
    d = x.size
    v = np.zeros(model.c.size)
    v[:d] = xa
    dev = np.abs(xa - x)
    if norm == "linf":
        v[d] = dev.max()
    else:
        v[d:2 * d] = dev
    a = xa
    for k, (o_a, o_d) in enumerate(zip(model.off_a, model.off_d)):
        h = mats[k] @ a + consts[k]
        a = np.maximum(h, 0.0)
        v[o_a:o_a + a.size] = a
        v[o_d:o_d + a.size] = (h > 0) * model.ub[o_d:o_d + a.size]
    z = mats[-1] @ a + consts[-1]
    wins = [j for j in model.cand if z[j] >= z[y]]
    if not wins:
        return None
    j = max(wins, key=lambda j: z[j])
    v[model.off_b + j] = 1.0
    return np.clip(v, model.lb, model.ub)


def _solve(model: _Model, time_limit: float, start: Optional[np.ndarray] = None) -> highs.Solution:
    a = sp.vstack(model.rows, format="csr")
    return highs.solve(model.c, a, np.concatenate(model.row_lb), np.concatenate(model.row_ub), model.lb,
                       model.ub, model.integrality, time_limit=time_limit, rel_gap=_MIP_GAP, start=start)


# ---------------------------------------------------------------------------
# public API


def _norm_of(v: np.ndarray, norm: str) -> np.ndarray:
    v = np.abs(v.reshape(v.shape[0], -1).astype(np.float32))
    return v.max(1) if norm == "linf" else v.sum(1, dtype=np.float32)


def _round_down(v: float) -> np.float32:
    f = np.float32(v)
    return np.nextafter(f, np.float32(-np.inf)) if f > v else f


@exact_precision
def exact_search(
    net: Network,
    x: Any,
    y: Any,
    *,
    norm: str,
    time_limit: float = 60.0,
    bounds: Optional[Tuple[float, float]] = (0.0, 1.0),
    upper: Optional[Any] = None,
    x_adv: Optional[Any] = None,
    key: Optional[Any] = None,
    rtol: float = EXACT_RTOL,
    max_stages: int = 20,
) -> ExactResult:
    """Exact l_inf / l_1 distances by MILP, with everything the solver found.

    Args:
      net: a small :class:`~rcurves.certify.Network` (every unstable ReLU is a
        binary variable: tens are solved in milliseconds, a few hundred only
        on small balls).
      x, y: ``(n, *net.input_shape)`` points and ``(n,)`` labels.
      norm: 'linf' or 'l1'.
      time_limit: seconds per point for HiGHS (all stages together).
      bounds: input domain ``(lo, hi)`` or None.
      upper: optional ``(n,)`` known upper bounds (an attack's distances): the
        MILPs search balls within that radius. ``None`` runs
        ``attacks.minimal_distance`` first (``key``, default ``PRNGKey(0)``).
        Needed when ``bounds`` is None.
      x_adv: optional adversarials at distance ``upper`` (re-checked here).
      rtol: relative gap under which a distance is called exact.
      max_stages: most MILPs per point (see the module docstring).

    Returns:
      :class:`ExactResult`.
    """
    net = check_net(net)
    norm = checks.check_norm(norm)
    if norm not in ("linf", "l1"):
        raise ValueError(f"norm: the MILP handles 'linf' and 'l1' (l_2 would need a quadratic objective), got {norm!r}")
    x, y, bounds = check_points(net, x, y, bounds)
    n = x.shape[0]
    time_limit = checks.check_positive_float(time_limit, "time_limit")
    rtol = checks.check_positive_float(rtol, "rtol", allow_zero=True)
    max_stages = checks.check_positive_int(max_stages, "max_stages")
    upper = check_upper(upper, n)
    if x_adv is not None:
        if upper is None:
            raise ValueError("x_adv: pass the distances of these adversarials as upper")
        x_adv = checks.check_array(x_adv, "x_adv", min_ndim=2)
        if x_adv.size != x.size:
            raise ValueError(f"x_adv: expected shape {tuple(x.shape)}, got {tuple(x_adv.shape)}")
        x_adv = x_adv.reshape(x.shape)
    if upper is None:
        if bounds is None:
            raise ValueError("upper: required when bounds is None (the MILP needs a bounded region)")
        from attacks import minimal_distance
        res = minimal_distance(net.logits, x, y, norm=norm, key=jax.random.PRNGKey(0) if key is None else key,
                               bounds=bounds)
        upper, x_adv = res.distance, res.x_adv
    u = np.asarray(upper, np.float64)
    if bounds is None and not np.all(np.isfinite(u)):
        raise ValueError("upper: must be finite when bounds is None (the MILP needs a bounded region)")
    diam = diameter(norm, bounds, net.input_shape) if bounds is not None else np.inf

    mats, consts = _dense_blocks(net)
    mats = [np.asarray(m, np.float64) for m in mats]
    consts = [np.asarray(c, np.float64) for c in consts]
    xs = np.asarray(x, np.float32)
    ys = np.asarray(y)
    clean_wrong = _recheck(net, xs, ys, None)  # misclassified before any perturbation
    best = np.full(n, np.inf, np.float32)
    best_x = xs.copy()
    if x_adv is not None:  # the attack's points, re-checked
        xa = np.asarray(x_adv, np.float32)
        ok = _recheck(net, xa, ys, bounds) & np.isfinite(u)
        best = np.where(ok, _norm_of(xa - xs, norm), best)
        best_x = np.where(ok.reshape((-1,) + (1,) * (xs.ndim - 1)), xa, best_x)
    cap = np.where(np.isfinite(u), np.minimum(u, diam), diam)  # no adversarial needed beyond it
    # The bracket starts from CROWN's certified radius (a proof too) and the best adversarial.
    from rcurves.certify.radius import certified_radius
    lower = np.asarray(certified_radius(net, x, y, norm=norm, bounds=bounds,
                                        upper=np.where(np.isfinite(cap), cap, np.inf).astype(np.float32)),
                       np.float64)
    cfg = BoundConfig(norm=norm, method="crown", domain=bounds)
    batch = chunk_size(net, n, "crown")
    status = np.where(clean_wrong, "misclassified", "crown").astype(object)
    seconds = np.zeros(n)
    binaries = np.zeros(n, np.int64)
    step = np.full(n, 0.05)
    best[clean_wrong], best_x[clean_wrong] = 0.0, xs[clean_wrong]
    lower[clean_wrong] = 0.0
    done = clean_wrong | (lower >= np.minimum(best, cap) * (1 - rtol))
    for stage in range(max_stages):
        todo = ~done & (seconds < time_limit)
        if not todo.any():
            break
        hi = np.minimum(best, cap)
        eps = np.minimum(np.where(lower > 0, lower * (1 + step), hi / 4), (lower + hi) / 2)
        if stage == 0:  # the whole ball first: small networks are solved outright
            eps = hi
        eps = np.where(np.isfinite(eps), eps, 1.0).astype(np.float32)
        hidden, margin_lb = _region_jit(net, x, y, jnp.asarray(eps), cfg=cfg, batch=batch)
        hidden = [(np.asarray(l, np.float64), np.asarray(h, np.float64)) for l, h in hidden]
        margin_lb = np.asarray(margin_lb)
        for i in np.flatnonzero(todo):
            t0 = time.perf_counter()
            xi = xs[i].reshape(-1).astype(np.float64)
            r = float(eps[i])
            box = (xi - r, xi + r)
            if bounds is not None:
                box = (np.clip(box[0], *bounds), np.clip(box[1], *bounds))
            model = _build(mats, consts, [(l[i], h[i]) for l, h in hidden], margin_lb[i], xi, int(ys[i]),
                           r, box, norm)
            if model is None:  # bound propagation proves the ball
                status[i], lower[i] = "certified", max(lower[i], r)
                step[i] *= 2
            else:
                binaries[i] = model.n_binary
                start = None
                if best[i] <= r:
                    start = _start(model, mats, consts, xi, best_x[i].reshape(-1).astype(np.float64),
                                   int(ys[i]), norm)
                left = time_limit - seconds[i]
                res = _solve(model, max(min(left, time_limit / 4), 1e-3), start)
                status[i] = res.status
                if res.status == "infeasible":  # no adversarial within r: a longer step next
                    lower[i] = max(lower[i], r)
                    step[i] *= 2
                elif res.status == "optimal":  # the minimiser lies in the ball: the minimal distance
                    lower[i] = max(lower[i], min(res.dual, res.value))
                elif res.x is None:  # undecided at r: a shorter step next
                    step[i] /= 4
                if res.x is not None:
                    cand = res.x[: xi.size].reshape(xs.shape[1:]).astype(np.float32)
                    pt, dist = _nudge(net, xs[i], cand, int(ys[i]), bounds, norm)
                    if dist < best[i]:
                        best[i], best_x[i] = dist, pt
            seconds[i] += time.perf_counter() - t0
            if lower[i] >= min(best[i], cap[i]) * (1 - rtol):
                done[i] = True
    lower = np.where(lower >= diam, np.inf, lower)
    lower = np.array([_round_down(v) if np.isfinite(v) else np.float32(v) for v in lower], np.float32)
    lower = np.minimum(lower, best)
    both_inf = np.isinf(lower) & np.isinf(best)
    with np.errstate(invalid="ignore"):
        exact = both_inf | (np.isfinite(best) & ((best - lower) <= rtol * best + 1e-7))
    return ExactResult(lower, best, best_x, exact, status.astype(str), seconds, binaries)


@functools.partial(jax.jit, static_argnames=("confident",))
@exact_precision
def _misclassified(net: Network, xa: jax.Array, y: jax.Array, *, confident: bool) -> jax.Array:
    z = net.logits(xa)
    if confident:
        return jax.vmap(confidently_adversarial)(z, y)
    return jnp.argmax(z, axis=1) != y


def _recheck(net: Network, xa: np.ndarray, y: np.ndarray, bounds, confident: bool = False) -> np.ndarray:
    """Misclassified by ``net`` in float32 and inside the box; with ``confident``,
    by a margin above float noise (``attacks.losses.confidently_adversarial``),
    so that any other evaluation (another batch size, another kernel) agrees."""
    ok = np.array(_misclassified(net, jnp.asarray(xa, jnp.float32), jnp.asarray(y, jnp.int32),
                                 confident=confident))
    if bounds is not None:
        flat = xa.reshape(xa.shape[0], -1)
        ok &= np.all((flat >= bounds[0]) & (flat <= bounds[1]), axis=1)
    return ok


def _nudge(net, x0, cand, y, bounds, norm):
    """The first point of ``x0 + s (cand - x0)``, ``s`` in :data:`NUDGES`, that the
    network misclassifies (float32, inside the box); ``(point, distance)`` or ``(x0, inf)``."""
    s = np.asarray(NUDGES, np.float32).reshape((-1,) + (1,) * x0.ndim)
    pts = x0[None] + s * (cand - x0)[None]
    if bounds is not None:
        pts = np.clip(pts, *bounds).astype(np.float32)
    ok = _recheck(net, pts, np.full(len(NUDGES), y), bounds, confident=True)
    if not ok.any():
        return x0, np.float32(np.inf)
    i = int(np.argmax(ok))
    return pts[i], _norm_of(pts[i:i + 1] - x0[None], norm)[0]


@exact_precision
def exact_distance(
    net: Network,
    x: Any,
    y: Any,
    *,
    norm: str,
    time_limit: float = 60.0,
    bounds: Optional[Tuple[float, float]] = (0.0, 1.0),
    upper: Optional[Any] = None,
    x_adv: Optional[Any] = None,
    key: Optional[Any] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """``(lower (n,), upper (n,))`` on each point's minimal l_inf or l_1 distance, by MILP.

    The two are equal (within ``EXACT_RTOL``) where the solver closed the gap
    in ``time_limit`` seconds per point; ``upper`` is always the distance of
    an adversarial re-checked with ``net.logits`` in float32. See
    :func:`exact_search` for the arguments and the attaining points.
    """
    res = exact_search(net, x, y, norm=norm, time_limit=time_limit, bounds=bounds, upper=upper,
                       x_adv=x_adv, key=key)
    return res.lower, res.upper


__all__ = ["EXACT_RTOL", "ExactResult", "exact_distance", "exact_search"]
