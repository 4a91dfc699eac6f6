"""Files that are never half-written, and JSON without inf or NaN.

Every result, checkpoint, manifest and report of the toolkit is written
through :func:`atomic_write_bytes`: a temporary file in the target's folder,
flushed and fsync'ed, then moved into place with ``os.replace``, so a crashed
run leaves either the old file or the new one, never a torn one (a killed
process may leave a temp file, which :func:`atomic_temp_target` recognises).

JSON has no ``inf``/``NaN``: :func:`json_float` / :func:`json_list` write them
as ``null`` (a distance ``inf`` is "no adversarial found") and
:func:`from_json_list` reads them back as ``inf``; :func:`jsonable` turns a
tree of numpy/JAX arrays and scalars into plain JSON values the same way.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from typing import Any, List, Optional

import numpy as np

_TEMP_PREFIX = ".tmp-"
# mkstemp(prefix, suffix) names: prefix + 8 characters of tempfile's alphabet + suffix
_TEMP_NAME = re.compile(r"^" + re.escape(_TEMP_PREFIX) + r"[a-z0-9_]{8}-(?P<target>.+)$")


def cache_dir() -> str:
    """The toolkit's cache folder: ``$RCURVES_CACHE`` or ``~/.cache/rcurves``.

    Its one home, below both the data sets (``<cache>/data``) and the models
    (``<cache>/models``), so neither imports the other for it.
    """
    return os.environ.get("RCURVES_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "rcurves")


def file_sha256(path: str) -> str:
    """The hex sha256 of the file at ``path``, read in 1 MiB blocks (weights and wheels are checked with it)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def atomic_temp_target(name: str) -> Optional[str]:
    """The file name an :func:`atomic_write_bytes` temp file named ``name`` was for, else None.

    A process killed in the middle of an atomic write leaves such a temp file
    behind (never the target: that only appears, complete, with the rename).
    """
    m = _TEMP_NAME.match(name)
    return m.group("target") if m else None


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file + fsync + ``os.replace``)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=_TEMP_PREFIX, suffix="-" + os.path.basename(path))
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(d)


def atomic_write_json(path: str, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n").encode())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(d: str) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def json_float(v: float) -> Optional[float]:
    """JSON has no inf/NaN: inf (no adversarial found) and NaN become null."""
    v = float(v)
    return v if math.isfinite(v) else None


def json_list(a) -> List[Optional[float]]:
    return [json_float(v) for v in np.asarray(a, dtype=np.float64).reshape(-1)]


def from_json_list(values) -> np.ndarray:
    """Inverse of :func:`json_list` for distances: null -> inf."""
    return np.array([np.inf if v is None else v for v in values], dtype=np.float64)


def write_text(path: str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: str, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, allow_nan=False) + "\n").encode("utf-8"))


def jsonable(obj: Any) -> Any:
    """numpy/jax arrays and scalars to lists and floats; inf and NaN to None (JSON has neither)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        arr = np.asarray(obj)
        if arr.ndim == 0:
            return jsonable(arr.item())
        return jsonable(arr.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    return obj


__all__ = [
    "atomic_temp_target",
    "atomic_write_bytes",
    "atomic_write_json",
    "file_sha256",
    "from_json_list",
    "json_float",
    "json_list",
    "jsonable",
    "write_json",
    "write_text",
]
