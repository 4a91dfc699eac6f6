"""Families of claims: a conjunction, and rules decided at multiplicity-corrected levels.

* :func:`all_of` -- a conjunction (the worst verdict wins, reasons joined);
* :func:`holm`, :func:`bonferroni` -- a family of rules (callables ``level -> Verdict``) decided at
  Holm-Bonferroni step-down or Bonferroni levels (family-wise error ``alpha``).
"""
from __future__ import annotations

import math
from typing import Any, Callable, List, Optional, Sequence

from rcurves.claims.verdict import _ORDER, Verdict, _alpha

__all__ = ["all_of", "bonferroni", "holm"]


def all_of(*verdicts: Verdict, test_sep: str = "; ") -> Verdict:
    """A conjunction: the worst verdict (differs > inconclusive > reproduced), tests and reasons joined.
    (``p`` is not carried: a conjunction has no single p-value.)"""
    if not verdicts:
        raise ValueError("verdicts: expected at least one")
    worst = max(verdicts, key=lambda v: _ORDER[v.verdict]).verdict
    why = test_sep.join(v.why for v in verdicts if v.why and v.verdict != "reproduced")
    return Verdict(worst, test_sep.join(v.test for v in verdicts), why)


Rule = Callable[[float], Verdict]


def _family(rules: Sequence[Rule], alpha: float):
    """``(alpha, rules)``, checked."""
    a = _alpha(alpha)
    rs = list(rules)
    if not rs:
        raise ValueError("rules: expected at least one rule (a callable level -> Verdict)")
    for i, r in enumerate(rs):
        if not callable(r):
            raise ValueError(f"rules: rule {i} is not callable (expected level -> Verdict), got {r!r}")
    return a, rs


def _with_p(v: Any, i: int) -> Verdict:
    if not isinstance(v, Verdict):
        raise ValueError(f"rules: rule {i} returned {type(v).__name__}, expected a Verdict")
    if v.p is None or not math.isfinite(float(v.p)):
        raise ValueError(f"rules: rule {i} returned a verdict without a p-value (p = {v.p!r}): only rules "
                         f"decided by a p-value can be corrected for multiplicity ({v.test})")
    return v


def _family_text(how: str, m: int, family: str, level: float) -> str:
    return f"; {how} over {m} tests{f' ({family})' if family else ''}: level {level:.2g}"


def holm(rules: Sequence[Rule], *, alpha: float = 0.05, family: str = "") -> List[Verdict]:
    """Decide a family of ``m`` claims with Holm-Bonferroni's step-down (family-wise error ``alpha``).

    ``rules``: callables ``rule(level) -> Verdict``, each an effect rule at
    level ``level`` whose verdict carries ``p`` (e.g. ``lambda lv:
    paired_effect(a, b, alpha=lv)``); a rule without a p-value raises
    ValueError (naming ``rules``). Each is called at ``alpha`` for its p; in
    ascending order of p (rank ``r`` from 0), rule ``r`` is re-decided at
    ``alpha / (m - r)`` while the step-down goes on. The first rule not
    significant at its level stops it: that rule and every later one are
    decided at the level where it stopped, so none of them is significant for
    its claim; each may still be "differs" (significant against the claim, or
    powered) or "inconclusive" by its own ladder at that level. The smallest p
    is thus decided at ``alpha / m`` (as Bonferroni), and the rejections lie
    between Bonferroni's and the unadjusted ones. A null claim's rule may
    join a family, ranked by the p of the change it denies: a lower level
    makes both its "differs" and its power (or equivalence) step stricter,
    so it only becomes inconclusive more often; rules decided by an interval
    without a p-value (``rate_near``, ``rate_matches``) cannot.

    Returns the verdicts in the order of ``rules``, each ``test`` extended by
    the family and the level it was decided at.
    """
    a, rs = _family(rules, alpha)
    first = [_with_p(r(a), i) for i, r in enumerate(rs)]
    m = len(rs)
    order = sorted(range(m), key=lambda i: float(first[i].p))
    out: List[Optional[Verdict]] = [None] * m
    stop: Optional[float] = None
    for r, i in enumerate(order):
        level = a / (m - r) if stop is None else stop
        if stop is None and not float(first[i].p) < level:
            stop = level
        v = first[i] if level == a else _with_p(rs[i](level), i)
        out[i] = v._replace(test=v.test + _family_text("Holm", m, family, level))
    return out  # type: ignore[return-value]


def bonferroni(rules: Sequence[Rule], *, alpha: float = 0.05, family: str = "") -> List[Verdict]:
    """Decide a family of ``m`` claims each at ``alpha / m`` (Bonferroni; family-wise error ``alpha``).

    ``rules`` as in :func:`holm` (callables ``rule(level) -> Verdict`` with
    ``p`` set). Simpler and never more powerful than :func:`holm`. Returns the
    verdicts in the order of ``rules``, each ``test`` extended by the family
    and the level.
    """
    a, rs = _family(rules, alpha)
    m = len(rs)
    out = []
    for i, r in enumerate(rs):
        v = _with_p(r(a / m), i)
        out.append(v._replace(test=v.test + _family_text("Bonferroni", m, family, a / m)))
    return out
