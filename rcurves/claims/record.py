"""A reproduction's record: its claims, the fingerprint of the code that made them, its JSON.

A claim is one statement or number of a paper, our measurement, and a
verdict (DESIGN.md, "Experiments")::

    {"paper": "000", "item": "Figure 3", "claim": "...", "ours": "...",
     "verdict": "reproduced" | "differs" | "inconclusive" | "not reproducible here",
     "why": "...", "kind": "paper" | "self-check" | "beyond",
     "short": "...", "paper_value": "...", "ours_value": "..."}

``short``, ``paper_value`` and ``ours_value`` are the claim's line in the
report's index: the claim in a few words (at most :data:`SHORT_MAX`
characters), the paper's number and ours (each at most :data:`VALUE_MAX`),
e.g. ``"AT beats ST at eps 0.1"``, ``"21%"``, ``"19.6% [17.2, 22.2]"``; the
long texts (``claim``, ``ours``, ``why``) are the evidence.

A verdict is decided by a rule of :mod:`rcurves.claims.verdicts` (or an exact
check) that can fail; ``ours`` states the statistic, its p-value or interval,
``n`` and how the points were drawn. ``kind``: ``paper`` for a statement or
number of the paper, ``self-check`` for a check of our own tools (attack vs
exact distance, costs), ``beyond`` for a question the paper does not ask.
:func:`write_result` writes a run's JSON with :func:`code_fingerprint`: per
module of this checkout the process loaded, the digest of its code (its AST
without docstrings), so that a report can tell a result whose code has changed
since (stale) from a current one, and name the modules that changed.
"""
from __future__ import annotations

import hashlib
import math
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from rcurves.claims.verdict import KINDS, VERDICTS, Verdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
CLAIM_KEYS = {"paper", "item", "claim", "ours", "verdict", "why", "kind"}
#: the index's optional fields (:func:`claim`'s ``short``, ``paper_value``, ``ours_value``)
INDEX_KEYS = {"short", "paper_value", "ours_value"}
SHORT_MAX, VALUE_MAX = 70, 24
_T0 = time.time()


def claim(paper: str, item: str, statement: str, ours: str, verdict, why: str = "",
          kind: str = "paper", *, short: Optional[str] = None, paper_value: Optional[str] = None,
          ours_value: Optional[str] = None) -> Dict[str, str]:
    """One claims entry. ``verdict`` is one of :data:`VERDICTS` or a
    :class:`rcurves.claims.verdicts.Verdict` (its test is appended to ``ours``, its
    reason to ``why``); a verdict other than 'reproduced' needs a ``why``;
    ``kind`` is one of :data:`KINDS`. ``short``, ``paper_value``, ``ours_value``:
    the claim's line in the report's index (at most :data:`SHORT_MAX` and
    :data:`VALUE_MAX` characters; omitted when None)."""
    for arg, v, n in (("short", short, SHORT_MAX), ("paper_value", paper_value, VALUE_MAX),
                      ("ours_value", ours_value, VALUE_MAX)):
        if v is not None and (not isinstance(v, str) or not v.strip() or len(v) > n):
            raise ValueError(f"{arg}: expected a non-empty string of at most {n} characters, got {v!r}")
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
    out = {"paper": str(paper), "item": str(item), "claim": statement, "ours": ours, "verdict": verdict,
           "why": why, "kind": kind}
    for k, v in (("short", short), ("paper_value", paper_value), ("ours_value", ours_value)):
        if v is not None:
            out[k] = v
    return out


def fmt(v: float, digits: int = 3) -> str:
    """A number for a claim's text: ``inf`` stays ``inf``."""
    v = float(v)
    return "inf" if math.isinf(v) else f"{v:.{digits}g}"


FINGERPRINT_SCHEME = "ast-v1"


def code_digest(source: str) -> str:
    """sha256 of a module's *code*: its AST with docstrings removed, unparsed.

    Comments, formatting and docstrings do not count (an edit to any of them
    leaves the digest unchanged); every change to what the code does changes it.
    The unparsed form is stable within one Python minor version.
    """
    import ast

    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.unparse(tree).encode()).hexdigest()


def _file_digest(path: str) -> Optional[str]:
    """:func:`code_digest` of the file at ``path`` (None if it is gone; text digest if it no longer parses)."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return code_digest(raw.decode("utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return "text:" + hashlib.sha256(raw).hexdigest()


def _is_name_table(rel: str) -> bool:
    """A package's ``__init__.py``: only a table of lazily imported public names (:mod:`attacks._lazy`).

    Adding a public name computes nothing, so these are left out of fingerprints
    (``tests/claims/test_record.py`` checks that every such file is only a table).
    """
    return os.path.basename(rel) == "__init__.py" and rel.split(os.sep)[0] in ("rcurves", "attacks")


def loaded_files(root: str = ROOT) -> List[str]:
    """The checkout's source files the process has loaded (relative to ``root``; tests, virtual
    environments and the packages' name tables excluded), plus the ``__main__`` script."""
    found = set()
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and f.endswith(".py") and os.path.abspath(f).startswith(root + os.sep):
            found.add(os.path.relpath(os.path.abspath(f), root))
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if main and os.path.abspath(main).startswith(root + os.sep):
        found.add(os.path.relpath(os.path.abspath(main), root))
    return sorted(rel for rel in found
                  if not rel.startswith(("tests" + os.sep, ".venv", "venv")) and not _is_name_table(rel))


def code_fingerprint(files: Optional[Sequence[str]] = None, root: str = ROOT) -> Dict[str, Any]:
    """The code a result depends on: each module the process loaded (or ``files``) with its :func:`code_digest`.

    Returns ``{'scheme': 'ast-v1', 'files': {path: digest}, 'digest': sha256 over them}``
    (paths relative to ``root``). With lazy package imports a script loads only
    the modules it uses, so only an edit to the code of one of those stales
    its results; docstrings, comments and formatting never do.
    """
    rels = loaded_files(root) if files is None else sorted(files)
    digests = {rel: _file_digest(os.path.join(root, rel)) for rel in rels}
    h = hashlib.sha256()
    for rel, d in digests.items():
        h.update(f"{rel}\0{d}\0".encode())
    return {"scheme": FINGERPRINT_SCHEME, "files": digests, "digest": h.hexdigest()}


def _text_digest(files: Sequence[str], root: str) -> str:
    """The first scheme's digest: sha256 over the files' full text (results written before ``ast-v1``)."""
    h = hashlib.sha256()
    for rel in sorted(files):
        path = os.path.join(root, rel)
        h.update(rel.encode() + b"\0")
        if os.path.isfile(path):
            with open(path, "rb") as f:
                h.update(f.read())
        h.update(b"\0")
    return h.hexdigest()


def changed_files(doc: Dict[str, Any], root: str = ROOT) -> List[str]:
    """The files whose code changed since the result ``doc`` was written (empty: current).

    A result written before fingerprints is ``['(no fingerprint)']``; one of the
    first, whole-text scheme lists all its files when any of their text changed.
    """
    code = doc.get("code")
    if not code:
        return ["(no fingerprint)"]
    if code.get("scheme") != FINGERPRINT_SCHEME:
        return [] if _text_digest(code["files"], root) == code["digest"] else sorted(code["files"])
    return [rel for rel, d in sorted(code["files"].items()) if _file_digest(os.path.join(root, rel)) != d]


def is_stale(doc: Dict[str, Any], root: str = ROOT) -> bool:
    """True when the code a result was produced by (its recorded fingerprint) has changed since."""
    return bool(changed_files(doc, root))


def figure_entries(figures: Any) -> List[Dict[str, str]]:
    """A run's figures as ``[{'file': name, 'caption': text}]``, from any form they are given or stored in.

    ``figures`` is a result's JSON (a dict with ``'figures'``) or a list whose
    items are each a file name or path (``str`` or path-like; caption ``''``),
    a ``(file, caption)`` pair, or a ``{'file': ..., 'caption': ...}`` dict (the
    JSON form). Only the file's base name is kept: a figure lives in its run's
    ``--out`` folder. Committed JSONs written before captions hold plain names;
    they read the same way.
    """
    if isinstance(figures, dict):
        figures = figures.get("figures") or ()
    out = []
    for item in figures:
        if isinstance(item, dict) and "file" in item:
            file, caption = item["file"], item.get("caption", "")
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            file, caption = item
        elif isinstance(item, (str, os.PathLike)):
            file, caption = item, ""
        else:
            raise ValueError(f"figures: expected a file name or a (file, caption) pair, got {item!r}")
        file = os.path.basename(os.fspath(file))
        if not file or not isinstance(caption, str):
            raise ValueError(f"figures: expected a file name and a str caption, got {item!r}")
        out.append({"file": file, "caption": " ".join(caption.split())})
    return out


def write_result(name: str, out: str, quick: bool, payload: Dict[str, Any], claims: List[Dict[str, str]],
                 figures: Sequence[Union[str, Tuple[str, str]]] = ()) -> str:
    """Write ``<out>/<name>.json`` atomically: payload, claims, figures, quick flag, run time and code fingerprint.

    ``figures``: the PNGs the run drew into ``out``, each a file name (or path) or a
    ``(file name, caption)`` pair; the caption says what is drawn, the sample and
    n. Recorded as ``[{'file': base name, 'caption': caption or ''}]``
    (:func:`figure_entries` reads both this and the older list of names).
    """
    from rcurves.files import atomic_write_json, jsonable

    for c in claims:
        if not CLAIM_KEYS <= set(c) <= CLAIM_KEYS | INDEX_KEYS:
            raise ValueError(f"claims: malformed entry {c!r} (use rcurves.claims.record.claim)")
    figs = figure_entries(list(figures))
    doc = {"experiment": name, "quick": bool(quick), "seconds": round(time.time() - _T0, 1),
           "claims": claims, "figures": figs, "code": code_fingerprint()}
    doc.update(jsonable(payload))
    path = os.path.join(out, f"{name}.json")
    atomic_write_json(path, doc)
    for c in claims:
        print(f"[{c['verdict']}] {c['paper']} {c['item']}: {c['ours']}")
    for f in figs:
        if not os.path.isfile(os.path.join(out, f["file"])):
            print(f"warning: figure {f['file']} is not in {out}")
    print(f"wrote {path}")
    return path


__all__ = ["CLAIM_KEYS", "FINGERPRINT_SCHEME", "INDEX_KEYS", "SHORT_MAX", "VALUE_MAX", "changed_files", "claim", "code_digest", "code_fingerprint",
           "figure_entries", "fmt", "is_stale", "loaded_files", "write_result"]
