"""A decided claim (:class:`Verdict`), the verdicts it can take, and the one ladder every effect rule ends in.

A :class:`Verdict` carries the verdict, the test (its statistic, p-value or
interval and ``n``), why, and ``p``: the p-value that decided it, on the scale
of the ``alpha`` the rule was given (``None`` where an interval decides):

* **reproduced** -- the paper's effect shows, in its direction (and, where the
  paper gives a number, within the stated tolerance);
* **differs** -- the sample could have shown the effect and shows its
  absence or its opposite;
* **inconclusive** -- the sample could not have shown the paper's effect either
  way (the test had too little power against the stated effect, or the
  interval is too wide); the verdict says what ``n`` would do.

Every effect claim ("A is more robust than B") is decided by one ladder,
:func:`_ladder`: significant for the claim -> reproduced; significant against
it -> differs; not significant although the test could have shown the stated
effect (power against it, or the most extreme sample reaching the level) ->
differs; otherwise inconclusive, with the sample that would be needed. Null
claims ("no significant difference") are treated symmetrically: a null claim
passes only where the test had the power to reject it
(:func:`~rcurves.claims.paired_counts.null_effect`,
:func:`~rcurves.claims.paired_values.paired_null`), so a small sample cannot
reproduce it by saying nothing.

Also the checks of arguments the rules share (:func:`_alpha`, :func:`_count`,
:func:`_share`, :func:`_power_target`) and :func:`_first_powered`, the
smallest sample that reaches a power.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Union

import numpy as np

__all__ = ["KINDS", "VERDICTS", "Verdict"]


VERDICTS = ("reproduced", "differs", "inconclusive", "not reproducible here")
KINDS = ("paper", "self-check", "beyond")
_ORDER = {"reproduced": 0, "inconclusive": 1, "differs": 2, "not reproducible here": 3}


class Verdict(NamedTuple):
    """A decided claim: the verdict, what was tested (test, statistic, p or interval, n), why, and the
    p-value that decided it (``p``, for the claim's direction, on the scale of the rule's ``alpha``;
    ``None`` where no p-value decides, e.g. an interval rule)."""

    verdict: str
    test: str
    why: str = ""
    p: Optional[float] = None

    @property
    def ok(self) -> bool:
        return self.verdict == "reproduced"


def _pct(level: float) -> str:
    """A confidence level as a percentage without rounding it away (0.975 -> '97.5%', 0.95 -> '95%')."""
    return f"{100 * float(level):.4g}%"


def _alpha(alpha: float) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"alpha: expected a level in (0, 1), got {alpha!r}")
    return a


def _count(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise ValueError(f"{name}: expected a count >= 0, got {v!r}")
    return int(v)


def _share(effect: float, name: str = "effect", of: str = "the claim side's share of discordant points") -> float:
    q = float(effect)
    if not 0.5 < q < 1.0:
        raise ValueError(f"{name}: expected {of} in (0.5, 1), got {effect!r}")
    return q


def _power_target(power: float) -> float:
    pw = float(power)
    if not 0.0 < pw < 1.0:
        raise ValueError(f"power: expected a probability in (0, 1), got {power!r}")
    return pw


def _ladder(test: str, *, what: str, level: Optional[float] = None, p_for: Optional[float] = None,
            p_against: Optional[float] = None, sig_for: Optional[bool] = None, sig_against: Optional[bool] = None,
            could: bool = False, against: str = "", null: str = "", need: Union[str, Callable[[], str]] = "",
            against_first: bool = False, p: Optional[float] = None) -> Verdict:
    """The one decision of an effect claim; every effect rule here ends in it.

    1. significant for the claim (``sig_for``, default ``p_for < level``) -> **reproduced**;
    2. significant against it (``sig_against``, default ``p_against < level``) -> **differs**, ``against``
       saying why (default: "significant the other way");
    3. neither, but the test could have shown the stated effect (``could``: its power against the effect
       reached the target, or the most extreme sample reaches the level) -> **differs**, ``null`` saying why;
    4. otherwise -> **inconclusive**, ``need`` saying what sample would settle it (a callable is evaluated
       only here, so rules can defer an expensive sample-size search).

    ``against_first``: check 2 before 1, for claims that also say "nowhere the other way"
    (:func:`dominates`). The verdict's ``p`` is ``p`` if given, else ``p_for``.
    """
    sf = bool(sig_for) if sig_for is not None else (p_for is not None and p_for < level)
    sa = bool(sig_against) if sig_against is not None else (p_against is not None and p_against < level)
    rep = p_for if p is None else p
    if sf and not (against_first and sa):
        return Verdict("reproduced", test, "", rep)
    if sa:
        tail = f", p = {p_against:.2g}" if p_against is not None else ""
        return Verdict("differs", test, against or f"significant the other way ({what} reversed{tail})", rep)
    if could:
        return Verdict("differs", test, null or f"no significant effect in {what}, although the test could have "
                                                f"shown it", rep)
    return Verdict("inconclusive", test, need() if callable(need) else need, rep)


def _first_powered(power_at: Callable[[int], float], power: float, start: int, limit: int = 100000) -> Optional[int]:
    """The smallest ``m >= start`` (below ``limit``) with ``power_at(m) >= power``, or None."""
    return next((m for m in range(max(1, start), limit) if power_at(m) >= power), None)
