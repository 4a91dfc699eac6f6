"""A reproduction's record: its claims, the fingerprint of the code that made them, its JSON.

A claim is one statement or number of a paper, our measurement, and a
verdict (DESIGN.md, "Experiments")::

    {"paper": "000", "item": "Figure 3", "claim": "...", "ours": "...",
     "verdict": "reproduced" | "differs" | "inconclusive" | "not reproducible here",
     "why": "...", "kind": "paper" | "self-check" | "beyond"}

A verdict is decided by a rule of :mod:`rcurves.claims.verdicts` (or an exact
check) that can fail; ``ours`` states the statistic, its p-value or interval,
``n`` and how the points were drawn. ``kind``: ``paper`` for a statement or
number of the paper, ``self-check`` for a check of our own tools (attack vs
exact distance, costs), ``beyond`` for a question the paper does not ask.
:func:`write_result` writes a run's JSON with :func:`code_fingerprint`: the
sha256 of every module of this checkout the process loaded, so that a report
can tell a result whose code has changed since (stale) from a current one.
"""
from __future__ import annotations

import hashlib
import math
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from rcurves.claims.verdicts import KINDS, VERDICTS, Verdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
CLAIM_KEYS = {"paper", "item", "claim", "ours", "verdict", "why", "kind"}
_T0 = time.time()


def claim(paper: str, item: str, statement: str, ours: str, verdict, why: str = "",
          kind: str = "paper") -> Dict[str, str]:
    """One claims entry. ``verdict`` is one of :data:`VERDICTS` or a
    :class:`rcurves.claims.verdicts.Verdict` (its test is appended to ``ours``, its
    reason to ``why``); a verdict other than 'reproduced' needs a ``why``;
    ``kind`` is one of :data:`KINDS`."""
    if isinstance(verdict, Verdict):
        ours = f"{ours}; {verdict.test}" if ours else verdict.test
        why = "; ".join(w for w in (verdict.why, why) if w)
        verdict = verdict.verdict
    if verdict not in VERDICTS:
        raise ValueError(f"verdict: expected one of {VERDICTS}, got {verdict!r}")
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
    if verdict != "reproduced" and not why:
        raise ValueError(f"why: a {verdict!r} claim must say why")
    return {"paper": str(paper), "item": str(item), "claim": statement, "ours": ours, "verdict": verdict,
            "why": why, "kind": kind}


def fmt(v: float, digits: int = 3) -> str:
    """A number for a claim's text: ``inf`` stays ``inf``."""
    v = float(v)
    return "inf" if math.isinf(v) else f"{v:.{digits}g}"


def code_fingerprint(files: Optional[Sequence[str]] = None, root: str = ROOT) -> Dict[str, Any]:
    """sha256 over the source of every module of the checkout ``root`` loaded in the process (or ``files``).

    Returns ``{'digest', 'files'}`` (paths relative to ``root``; tests and
    virtual environments excluded): what the results depend on, so that a
    report can tell whether they are stale.
    """
    if files is None:
        found = set()
        for mod in list(sys.modules.values()):
            f = getattr(mod, "__file__", None)
            if f and f.endswith(".py") and os.path.abspath(f).startswith(root + os.sep):
                rel = os.path.relpath(os.path.abspath(f), root)
                if not rel.startswith(("tests" + os.sep, ".venv", "venv")):
                    found.add(rel)
        main = getattr(sys.modules.get("__main__"), "__file__", None)
        if main and os.path.abspath(main).startswith(root + os.sep):
            found.add(os.path.relpath(os.path.abspath(main), root))
        files = sorted(found)
    h = hashlib.sha256()
    for rel in sorted(files):
        path = os.path.join(root, rel)
        h.update(rel.encode() + b"\0")
        if os.path.isfile(path):
            with open(path, "rb") as f:
                h.update(f.read())
        h.update(b"\0")
    return {"digest": h.hexdigest(), "files": sorted(files)}


def is_stale(doc: Dict[str, Any], root: str = ROOT) -> bool:
    """True when the code a result was produced by (its recorded fingerprint) has changed since."""
    code = doc.get("code")
    if not code:
        return True                      # written before fingerprints: cannot be shown as current
    return code_fingerprint(code["files"], root)["digest"] != code["digest"]


def write_result(name: str, out: str, quick: bool, payload: Dict[str, Any], claims: List[Dict[str, str]],
                 figures: Sequence[str] = ()) -> str:
    """Write ``<out>/<name>.json`` atomically: payload, claims, figures, quick flag, run time and code fingerprint."""
    from rcurves.files import atomic_write_json, jsonable

    for c in claims:
        if set(c) != CLAIM_KEYS:
            raise ValueError(f"claims: malformed entry {c!r} (use rcurves.claims.record.claim)")
    doc = {"experiment": name, "quick": bool(quick), "seconds": round(time.time() - _T0, 1),
           "claims": claims, "figures": [os.path.basename(f) for f in figures], "code": code_fingerprint()}
    doc.update(jsonable(payload))
    path = os.path.join(out, f"{name}.json")
    atomic_write_json(path, doc)
    for c in claims:
        print(f"[{c['verdict']}] {c['paper']} {c['item']}: {c['ours']}")
    print(f"wrote {path}")
    return path


__all__ = ["CLAIM_KEYS", "claim", "code_fingerprint", "fmt", "is_stale", "write_result"]
