"""A mixed-integer program solved by HiGHS, with a warm start and the dual bound.

``scipy.optimize.milp`` runs HiGHS but takes no starting solution and, when
the time limit is hit before HiGHS found a feasible point, returns no dual
bound either. The exact-distance MILP always has a feasible point at hand
(the attack's adversarial), and its lower bound is the dual bound, so this
module talks to HiGHS's Python bindings directly: the ``highspy`` package
when it is installed, else the same bindings that scipy ships
(``scipy.optimize._highspy._core``, private, so ``scipy.optimize.milp`` is
the last fallback, without warm start).
"""
from __future__ import annotations

import math
import warnings
from typing import NamedTuple, Optional

import numpy as np
import scipy.sparse as sp

try:  # the public bindings
    import highspy as _h
    _HIGHS = _h.Highs
except ImportError:  # pragma: no cover - depends on the environment
    try:
        from scipy.optimize._highspy import _core as _h
        _HIGHS = _h._Highs
    except ImportError:
        _h, _HIGHS = None, None


class Solution(NamedTuple):
    """``status``: 'optimal' | 'time_limit' | 'infeasible' | 'failed';
    ``dual``: lower bound on the optimum (``-inf`` if none); ``value`` and
    ``x``: the best feasible point found (``inf`` / None if none)."""

    status: str
    dual: float
    value: float
    x: Optional[np.ndarray]


def lp_model(c, a: sp.spmatrix, row_lo, row_hi, lb, ub):
    """HiGHS's ``HighsLp`` of ``min c.x`` s.t. ``row_lo <= A x <= row_hi``, ``lb <= x <= ub`` (needs the
    bindings: ``_HIGHS`` not None)."""
    a = sp.csc_matrix(a)
    n, m = a.shape[1], a.shape[0]
    lp = _h.HighsLp()
    lp.num_col_, lp.num_row_ = n, m
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, m
    lp.a_matrix_.format_ = _h.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a.indices.astype(np.int32)
    lp.a_matrix_.value_ = a.data.astype(np.float64)
    lp.col_cost_ = np.asarray(c, np.float64)
    lp.col_lower_, lp.col_upper_ = np.asarray(lb, np.float64), np.asarray(ub, np.float64)
    lp.row_lower_, lp.row_upper_ = np.asarray(row_lo, np.float64), np.asarray(row_hi, np.float64)
    return lp


def solve(c, a: sp.spmatrix, row_lo, row_hi, lb, ub, integrality, *, time_limit: float,
          rel_gap: float = 1e-6, start: Optional[np.ndarray] = None) -> Solution:
    """``min c.x`` s.t. ``row_lo <= A x <= row_hi``, ``lb <= x <= ub``, integer where ``integrality``."""
    if _HIGHS is None:
        return _solve_scipy(c, a, row_lo, row_hi, lb, ub, integrality, time_limit, rel_gap)
    lp = lp_model(c, a, row_lo, row_hi, lb, ub)
    lp.integrality_ = [_h.HighsVarType.kInteger if i else _h.HighsVarType.kContinuous for i in integrality]
    solver = _HIGHS()
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("time_limit", float(time_limit))
    solver.setOptionValue("mip_rel_gap", float(rel_gap))
    solver.setOptionValue("threads", 1)
    solver.passModel(lp)
    if start is not None:
        sol = _h.HighsSolution()
        sol.col_value = np.asarray(start, np.float64)
        sol.value_valid = True
        solver.setSolution(sol)
    solver.run()
    st = solver.getModelStatus()
    info = solver.getInfo()
    value = float(info.objective_function_value)
    has_point = math.isfinite(value) and value < 1e300
    x = np.asarray(solver.getSolution().col_value, np.float64) if has_point else None
    dual = float(info.mip_dual_bound)
    if st == _h.HighsModelStatus.kOptimal:
        status = "optimal"
    elif st == _h.HighsModelStatus.kInfeasible:
        status = "infeasible"
    elif st in (_h.HighsModelStatus.kTimeLimit, _h.HighsModelStatus.kIterationLimit,
                _h.HighsModelStatus.kSolutionLimit):
        status = "time_limit"
    else:
        status = "failed"
    if not math.isfinite(dual) or abs(dual) >= 1e300 or status == "failed":
        dual = -math.inf
    return Solution(status, dual, value if has_point else math.inf, x)


def _solve_scipy(c, a, row_lo, row_hi, lb, ub, integrality, time_limit, rel_gap):
    from scipy.optimize import Bounds, LinearConstraint, milp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = milp(c, integrality=integrality, bounds=Bounds(lb, ub),
                   constraints=LinearConstraint(a, row_lo, row_hi),
                   options=dict(time_limit=float(time_limit), mip_rel_gap=rel_gap, disp=False))
    status = {0: "optimal", 1: "time_limit", 2: "infeasible"}.get(res.status, "failed")
    dual = res.mip_dual_bound if res.mip_dual_bound is not None else -math.inf
    value = res.fun if res.fun is not None else math.inf
    return Solution(status, float(dual), float(value), res.x)


__all__ = ["Solution", "lp_model", "solve"]
