"""The first layer's cuts (separation) and the second layer's LP bounds with them (``certify.cutting``)."""
import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

from rcurves.certify import cutting
from rcurves.certify import highs


def _mlp(rng, sizes):
    return [(rng.standard_normal((o, i)) / np.sqrt(i), 0.3 * rng.standard_normal(o)) for i, o in zip(sizes, sizes[1:])]


def _first_bounds(w1, b1, lo, hi):
    """Exact interval bounds of ``w1 x + b1`` on the box."""
    c, r = (lo + hi) / 2, (hi - lo) / 2
    return w1 @ c + b1 - np.abs(w1) @ r, w1 @ c + b1 + np.abs(w1) @ r


def _ibp(w, b, l, u):
    """Interval bounds of ``w relu(z) + b`` for ``z`` in ``[l, u]``."""
    lo_a, hi_a = np.maximum(l, 0), np.maximum(u, 0)
    return (np.maximum(w, 0) @ lo_a + np.minimum(w, 0) @ hi_a + b,
            np.maximum(w, 0) @ hi_a + np.minimum(w, 0) @ lo_a + b)


def _box(rng, d, width):
    c = rng.uniform(-1, 1, d)
    return c - width, c + width


def test_separated_cuts_are_violated_where_reported_and_hold_on_the_units_graph():
    """At a point of the triangle relaxation, each unit's separated cut is violated by the reported amount; on
    the graph of the unit over the box (``t`` its on/off state: the MILP's points, 20,000 random and every
    vertex) each holds."""
    rng = np.random.default_rng(0)
    d, m = 5, 12
    w, b = rng.standard_normal((m, d)), 0.3 * rng.standard_normal(m)
    lo, hi = _box(rng, d, 0.8)
    l, u = _first_bounds(w, b, lo, hi)
    keep = (l < 0) & (u > 0)
    w, b, l, u = w[keep], b[keep], l[keep], u[keep]
    lb, ub = cutting.input_ends(w, lo, hi)
    n_cuts = 0
    for _ in range(20):
        x = rng.uniform(lo, hi)
        z = w @ x + b
        s = u / (u - l)
        a = s * (z - l) * rng.uniform(0.7, 1.0, z.size)          # under the triangle's upper side
        a = np.maximum(a, np.maximum(z, 0))
        t = rng.uniform(0, 1, z.size)
        sep = cutting.separate(w, b, lb, ub, x, a, t)
        assert np.all(np.diff(sep.violation) <= 0) and np.all(sep.violation > 0)
        pts = np.r_[rng.uniform(lo, hi, (20000, d)), np.array(list(itertools.product(*zip(lo, hi))))]
        for j, inside, v in zip(sep.units, sep.inside, sep.violation):
            coef, kappa, rhs = cutting.cut_row(w[j], b[j], lb[j], ub[j], inside)
            np.testing.assert_allclose(a[j] - coef @ x - kappa * t[j] - rhs, v, rtol=1e-9, atol=1e-9)
            zz = pts @ w[j] + b[j]
            on = (zz > 0).astype(float)
            assert np.all(np.maximum(zz, 0) - pts @ coef - kappa * on <= rhs + 1e-9)
            n_cuts += 1
    assert n_cuts >= 20


def _triangle_lp(w1, b1, w2k, lo, hi, l1, u1):
    """``min w2k . a`` over the box and each first-layer unit's triangle relaxation (an independent LP)."""
    d, h = w1.shape[1], w1.shape[0]
    rows, rhs = [], []
    for k in range(h):
        if l1[k] < 0 < u1[k]:
            r = np.zeros(d + h); r[d + k] = -1; r[:d] = w1[k]; rows.append(r); rhs.append(-b1[k])       # a >= z
            s = u1[k] / (u1[k] - l1[k])
            r = np.zeros(d + h); r[d + k] = 1; r[:d] = -s * w1[k]; rows.append(r); rhs.append(s * (b1[k] - l1[k]))
    eq = [np.r_[-w1[k], np.eye(h)[k]] for k in range(h) if l1[k] >= 0]
    eq_rhs = [b1[k] for k in range(h) if l1[k] >= 0]
    bnds = list(zip(lo, hi)) + [(max(0, a), max(0, c)) for a, c in zip(l1, u1)]
    res = linprog(np.r_[np.zeros(d), w2k], A_ub=np.array(rows), b_ub=rhs, A_eq=np.array(eq) if eq else None,
                  b_eq=eq_rhs if eq else None, bounds=bnds, method="highs")
    assert res.status == 0
    return res.fun


def _exact_min(w1, b1, w2k, lo, hi, l1, u1):
    """``min w2k . relu(w1 x + b1)`` over the box: the MILP (big-M with the exact first-layer bounds)."""
    d, h = w1.shape[1], w1.shape[0]
    un = np.flatnonzero((l1 < 0) & (u1 > 0))
    nv = d + h + un.size
    rows, r_lo, r_hi = [], [], []
    for k in range(h):
        a = np.zeros(nv); a[d + k] = 1; a[:d] = -w1[k]
        if l1[k] >= 0:
            rows.append(a); r_lo.append(b1[k]); r_hi.append(b1[k])
        elif u1[k] > 0:
            t = d + h + np.searchsorted(un, k)
            rows.append(a.copy()); r_lo.append(b1[k]); r_hi.append(np.inf)
            a2 = a.copy(); a2[t] = -l1[k]; rows.append(a2); r_lo.append(-np.inf); r_hi.append(b1[k] - l1[k])
            a3 = np.zeros(nv); a3[d + k] = 1; a3[t] = -u1[k]; rows.append(a3); r_lo.append(-np.inf); r_hi.append(0.0)
    col_lo = np.r_[lo, np.maximum(l1, 0), np.zeros(un.size)]
    col_hi = np.r_[hi, np.maximum(u1, 0), np.ones(un.size)]
    sol = highs.solve(np.r_[np.zeros(d), w2k, np.zeros(un.size)], np.array(rows), r_lo, r_hi, col_lo, col_hi,
                      [0] * (d + h) + [1] * un.size, time_limit=60.0)
    assert sol.status == "optimal"
    return sol.value


@pytest.mark.parametrize("seed", [0, 1])
def test_second_layer_bounds_hold_tighten_and_match_the_triangle_lp_without_cuts(seed):
    """On a random 6-24-16 MLP and a box: without cuts each bound is the triangle LP's optimum (the weak-duality
    bound of HiGHS's multipliers is exact, 1e-6); with cuts every bound is at least as tight, never beyond
    the exact MILP's extreme, and holds at 20,000 random points and every vertex; some get tighter."""
    rng = np.random.default_rng(seed)
    (w1, b1), (w2, b2) = _mlp(rng, (6, 24, 16))
    lo, hi = _box(rng, 6, 0.7)
    l1, u1 = _first_bounds(w1, b1, lo, hi)
    l2, u2 = _ibp(w2, b2, l1, u1)
    plain = cutting.second_layer_bounds([(w1, b1), (w2, b2)], [(l1, u1), (l2, u2)], lo, hi, rounds=0)
    cut = cutting.second_layer_bounds([(w1, b1), (w2, b2)], [(l1, u1), (l2, u2)], lo, hi, rounds=3, top=4)
    todo = np.flatnonzero((l2 < 0) & (u2 > 0))
    assert todo.size >= 4 and plain.bounds == cut.bounds == 2 * todo.size and cut.cuts > 0
    for k in todo:
        assert plain.lower[k] == pytest.approx(_triangle_lp(w1, b1, w2[k], lo, hi, l1, u1) + b2[k], abs=1e-6)
        assert plain.upper[k] == pytest.approx(-_triangle_lp(w1, b1, -w2[k], lo, hi, l1, u1) + b2[k], abs=1e-6)
        assert cut.lower[k] <= _exact_min(w1, b1, w2[k], lo, hi, l1, u1) + b2[k] + 1e-6
        assert cut.upper[k] >= -_exact_min(w1, b1, -w2[k], lo, hi, l1, u1) + b2[k] - 1e-6
    assert np.all(cut.lower >= plain.lower - 1e-7) and np.all(cut.upper <= plain.upper + 1e-7)
    assert np.all(plain.lower >= l2) and np.all(plain.upper <= u2)
    assert np.sum(cut.upper - cut.lower) < np.sum(plain.upper - plain.lower) - 1e-3
    pts = np.r_[rng.uniform(lo, hi, (20000, 6)), np.array(list(itertools.product(*zip(lo, hi))))]
    z2 = np.maximum(pts @ w1.T + b1, 0) @ w2.T + b2
    assert np.all(z2 >= cut.lower - 1e-9) and np.all(z2 <= cut.upper + 1e-9)


def test_second_layer_bounds_stop_at_the_time_limit_and_skip_stable_layers():
    rng = np.random.default_rng(3)
    (w1, b1), (w2, b2) = _mlp(rng, (6, 24, 16))
    lo, hi = _box(rng, 6, 0.7)
    l1, u1 = _first_bounds(w1, b1, lo, hi)
    l2, u2 = _ibp(w2, b2, l1, u1)
    res = cutting.second_layer_bounds([(w1, b1), (w2, b2)], [(l1, u1), (l2, u2)], lo, hi, time_limit=0.0)
    assert res.bounds == 0 and np.array_equal(res.lower, l2) and np.array_equal(res.upper, u2)
    assert cutting.second_layer_bounds([(w1, b1), (w2, b2)], [(l1, u1), (np.abs(l2), np.abs(u2) + 1)],
                                       lo, hi) is None            # no unstable second-layer unit
