"""Tramèr et al.'s invariance examples on MNIST with their human labels (paper 003, Section 4.2), shipped.

003's authors published the invariance adversarial examples of their human
study and the labels the humans gave them
(https://github.com/ftramer/Excessive-Invariance, MIT licence). The package
ships those files unchanged in ``rcurves/data/files/tramer2020/`` with their
licence, a notice of where each comes from, and ``manifest.json``: the
SHA-256 of every file. Before any file is read its SHA-256 is checked
against the manifest, and the manifest's own against :data:`MANIFEST_SHA256`
(a corrupt or altered copy raises :class:`DataFileError`); arrays are read
with ``np.load(..., allow_pickle=False)``.

The sets (003 Table 1):

==========  =====  ======  ===  ============================================
kind        eps    manual  n    the examples
==========  =====  ======  ===  ============================================
``'linf'``  0.3    False   100  automated, every one at l_inf exactly 0.3
``'linf'``  0.4    False   100  automated, every one at l_inf 103/255 = 0.404
``'linf'``  0.4    True    50   hand-made, every one at l_inf exactly 0.4
``'l0'``    None   False   100  automated l_0 examples (no eps budget)
==========  =====  ======  ===  ============================================

The source images are official MNIST test images (indices into the 10,000
test images in the files' order, i.e. ``rcurves.data.mnist_wheel.raw()['x_test']``;
*not* the class-interleaved order of ``mnist_full('test')``); the automated
sets share 100 random ones, the hand-made set uses the first 25 of them and
test images 0-24. The original labels are MNIST's. The repository ships
neither all source images nor any original label, so ``sources.npz`` (built
here from full MNIST, see the folder's ``NOTICE.md``) holds the 125 source
images and their labels: loading needs no download.

A human label differs from the original label where at least 70 % of the
labellers agreed on another label (003's success criterion); where they kept
the original label or reached no consensus, the released label is the
original one (the released labels reproduce Table 1's 21 %, 37 %, 88 % and
55 % exactly; the study's no-consensus cases are not marked).

Licences: the upstream files are MIT (copyright (c) 2019 ftramer; the folder's
``LICENSE`` goes with them); the images are MNIST digits or edits of them
(MNIST: Y. LeCun and C. Cortes, Creative Commons Attribution-Share Alike 3.0).
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, NamedTuple, Optional, Tuple

import numpy as np

from rcurves.files import file_sha256

__all__ = ["DataFileError", "FILES_DIR", "InvarianceExamples", "MANIFEST_SHA256", "tramer_invariance",
           "verify_files"]

FILES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "files", "tramer2020")
MANIFEST_FILE = "manifest.json"
#: sha256 of the shipped ``manifest.json`` (which holds every other file's): a copy with an altered manifest is
#: refused as well as one with an altered data file
MANIFEST_SHA256 = "0d64eafe8d7a55407185544c97be0dadb3491c800935683f171d7cce201f1bbc"
FORMAT = "rcurves-data-files"
SOURCES_FILE = "sources.npz"

# (kind, eps, manual) -> (examples, human labels, source indices); eps as printed by 003
_SETS: Dict[Tuple[str, Optional[float], bool], Tuple[str, str, str]] = {
    ("linf", 0.3, False): ("invariance_examples/linf/automated_eps03.npy",
                           "invariance_examples/linf/automated_eps03_labels.npy", "invariance_examples/indexs.npy"),
    ("linf", 0.4, False): ("invariance_examples/linf/automated_eps04.npy",
                           "invariance_examples/linf/automated_eps04_labels.npy", "invariance_examples/indexs.npy"),
    ("linf", 0.4, True): ("invariance_examples/linf/manual_eps04.npy",
                          "invariance_examples/linf/manual_eps04_labels.npy",
                          "invariance_examples/linf/manual_indexs.npy"),
    ("l0", None, False): ("invariance_examples/l0/automated.npy", "invariance_examples/l0/automated_labels.npy",
                          "invariance_examples/indexs.npy"),
}
_KINDS = ("linf", "l0")
_EPS = (0.3, 0.4)


class DataFileError(RuntimeError):
    """A shipped data file is missing, altered (SHA-256 differs from the manifest) or not the expected array."""


class InvarianceExamples(NamedTuple):
    """One set of 003's invariance examples with their source images and labels.

    Attributes:
      x: ``(n, 28, 28, 1)`` float32 in [0, 1]: the examples (the file's pixels
        on the 0..255 scale divided by 255, as the authors' notebook loads them).
      source: ``(n, 28, 28, 1)`` float32 in [0, 1]: the official MNIST test
        image each example was made from (``pixel / 255``).
      index: ``(n,)`` int64: the source's index in the official MNIST test set
        (10,000 images in the files' order).
      label: ``(n,)`` int64: the source's MNIST label (the original label).
      human_label: ``(n,)`` int64: the label 003's human study gave the example.
      kind: ``'linf'`` or ``'l0'``.
      eps: the nominal l_inf budget (0.3 or 0.4; None for l_0).
      manual: True for the hand-made examples.
    """
    x: np.ndarray
    source: np.ndarray
    index: np.ndarray
    label: np.ndarray
    human_label: np.ndarray
    kind: str
    eps: Optional[float]
    manual: bool

    @property
    def changed(self) -> np.ndarray:
        """``(n,)`` bool: the humans' label differs from the original (003's successful invariance examples)."""
        return self.human_label != self.label


def _folder(folder: Optional[str]) -> str:
    return FILES_DIR if folder is None else os.fspath(folder)


def _manifest(folder: Optional[str]) -> Dict[str, Any]:
    root = _folder(folder)
    path = os.path.join(root, MANIFEST_FILE)
    if not os.path.isfile(path):
        raise DataFileError(f"{path}: missing; restore rcurves/data/files/tramer2020 from the repository")
    got = file_sha256(path)
    if got != MANIFEST_SHA256:
        raise DataFileError(f"{path}: sha256 {got} differs from the expected {MANIFEST_SHA256}; refusing to read a "
                            "corrupt or altered manifest (restore it from the repository)")
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("files"), dict):
        raise DataFileError(f"{path}: not a {FORMAT} manifest")
    return doc


def _checked(rel: str, folder: Optional[str], doc: Dict[str, Any]) -> str:
    """The path of ``rel`` in the folder after its sha256 matched the manifest's."""
    rec = doc["files"].get(rel)
    path = os.path.join(_folder(folder), rel)
    if rec is None:
        raise DataFileError(f"{path}: not listed in the manifest")
    if not os.path.isfile(path):
        raise DataFileError(f"{path}: missing; restore rcurves/data/files/tramer2020 from the repository")
    got = file_sha256(path)
    if got != rec["sha256"]:
        raise DataFileError(f"{path}: sha256 {got} differs from the manifest's {rec['sha256']}; refusing to read a "
                            "corrupt or altered file (restore it from the repository)")
    return path


def verify_files(folder: Optional[str] = None) -> Dict[str, str]:
    """Check every file the manifest lists (and the manifest); return ``{relative path: sha256}``.

    Raises:
      DataFileError: a file is missing or its sha256 differs.
    """
    doc = _manifest(folder)
    for rel in doc["files"]:
        _checked(rel, folder, doc)
    return {rel: rec["sha256"] for rel, rec in doc["files"].items()}


def _load_npy(rel: str, folder: Optional[str], doc: Dict[str, Any]) -> np.ndarray:
    path = _checked(rel, folder, doc)
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as e:
        raise DataFileError(f"{path}: not a plain numpy array ({e})") from None


def _check_eps(kind: str, eps: Any) -> Optional[float]:
    if kind == "l0":
        if eps is not None:
            raise ValueError(f"eps: the l_0 examples have no eps budget; expected None, got {eps!r}")
        return None
    if eps is None:
        raise ValueError(f"eps: expected one of {_EPS} for kind 'linf', got None")
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise ValueError(f"eps: expected one of {_EPS}, got {eps!r}")
    for e in _EPS:
        if math.isclose(float(eps), e, rel_tol=0.0, abs_tol=1e-6):
            return e
    raise ValueError(f"eps: expected one of {_EPS} for kind 'linf', got {eps!r}")


def tramer_invariance(kind: str = "linf", eps: Optional[float] = None, manual: bool = False, *,
                      folder: Optional[str] = None) -> InvarianceExamples:
    """003's invariance examples with their human labels (Tramèr et al. 2020, Table 1).

    Args:
      kind: ``'linf'`` or ``'l0'``.
      eps: for ``'linf'``: 0.3 or 0.4 (the budget as 003 prints it); for
        ``'l0'``: None.
      manual: the 50 hand-made examples (``'linf'`` at 0.4 only) instead of
        the 100 automated ones.
      folder: the data folder (default: the shipped
        ``rcurves/data/files/tramer2020``); tests point it at a copy.

    Returns:
      :class:`InvarianceExamples`: ``x`` and ``source`` ``(n, 28, 28, 1)``
      float32 in [0, 1], ``index``, ``label``, ``human_label`` ``(n,)`` int64;
      n = 100 (50 hand-made). ``.changed``: where the humans changed the label.

    Distances to the sources: the l_inf sets use their whole budget, the
    automated eps = 0.3 set exactly 0.3 (its file keeps half grey levels),
    the hand-made set exactly 0.4 = 102/255, and the automated eps = 0.4 set
    103/255 = 0.40392 on every example: one grey level *outside* the 0.4 ball.

    Raises:
      ValueError: ``kind``, ``eps`` or ``manual`` not one of the sets above
        (the message names the argument).
      DataFileError: a file is missing or altered (SHA-256 differs from the
        manifest), or holds other arrays than expected.

    Examples:
      >>> d = tramer_invariance("linf", 0.3)
      >>> d.x.shape, d.x.dtype.name, int(d.changed.sum())
      ((100, 28, 28, 1), 'float32', 21)
    """
    if kind not in _KINDS:
        raise ValueError(f"kind: expected one of {_KINDS}, got {kind!r}")
    e = _check_eps(kind, eps)
    if not isinstance(manual, (bool, np.bool_)):
        raise ValueError(f"manual: expected a bool, got {manual!r}")
    key = (kind, e, bool(manual))
    if key not in _SETS:
        raise ValueError(f"manual: the hand-made examples are l_inf at eps 0.4 only (sets: "
                         f"{sorted((k, str(v), m) for k, v, m in _SETS)}), got kind={kind!r}, eps={eps!r}, manual=True")
    doc = _manifest(folder)
    ex_file, lab_file, idx_file = _SETS[key]
    raw = _load_npy(ex_file, folder, doc)
    human = _load_npy(lab_file, folder, doc)
    index = _load_npy(idx_file, folder, doc)
    with np.load(_checked(SOURCES_FILE, folder, doc), allow_pickle=False) as z:
        src_index, src_image, src_label = (np.asarray(z[k]) for k in ("index", "image", "label"))
    n = raw.shape[0]
    where = os.path.join(_folder(folder), ex_file)
    if raw.shape != (n, 28, 28) or human.shape != (n,) or index.shape != (n,):
        raise DataFileError(f"{where}: shapes {raw.shape}, {human.shape}, {index.shape}; expected (n, 28, 28), (n,), "
                            "(n,)")
    if not (np.all(np.isfinite(raw)) and raw.min() >= 0 and raw.max() <= 255):
        raise DataFileError(f"{where}: pixels outside 0..255")
    if not (np.all(human >= 0) and np.all(human <= 9)):
        raise DataFileError(f"{os.path.join(_folder(folder), lab_file)}: labels outside 0..9")
    pos = np.searchsorted(src_index, index)
    if np.any(pos >= src_index.shape[0]) or np.any(src_index[np.minimum(pos, src_index.shape[0] - 1)] != index):
        raise DataFileError(f"{os.path.join(_folder(folder), SOURCES_FILE)}: lacks source images of {idx_file}")
    x = (raw.astype(np.float32) / np.float32(255.0))[..., None]
    source = (src_image[pos].astype(np.float32) / np.float32(255.0))[..., None]
    return InvarianceExamples(x=x, source=source, index=index.astype(np.int64), label=src_label[pos].astype(np.int64),
                              human_label=human.astype(np.int64), kind=kind, eps=e, manual=bool(manual))
