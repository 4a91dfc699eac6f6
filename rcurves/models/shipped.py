"""The zoo's shipped weights: trained here once, committed with their recipe, checked before every load.

``rcurves/models/weights/`` holds one checkpoint folder per zoo entry,
``<name>-<recipe key>/`` (``params.msgpack`` + ``meta.json``, the format of
:mod:`rcurves.models.checkpoint`), and ``manifest.json``::

    {"format": "rcurves-zoo-weights", "version": 1,
     "models": {name: {"folder", "recipe_key", "data_fingerprint", "params_sha256", "meta_sha256"}}}

``meta.json`` carries the recipe (architecture and training configuration),
the training data's fingerprint, the per-epoch history, the held-out accuracy,
the training time and a ``zoo`` block (name, recipe key, the machine and the
JAX version the weights were shipped from). The recipe key is
:func:`rcurves.models.zoo.cache_key`: a hash of the recipe, the data
fingerprint and the zoo's ``CACHE_VERSION``. :func:`load_shipped` returns a
checkpoint only when the manifest lists the entry under the *same* key (a
changed recipe is a new model, trained as before), and refuses, with a
:class:`CheckpointError` naming the file, any file whose sha256 differs from
the manifest's: a corrupt or tampered weight file is never loaded.
:func:`ship` writes a trained checkpoint into the folder (``rcurves zoo
--train NAME --ship``).
"""
from __future__ import annotations

import json
import os
import platform
import shutil
from typing import Any, Dict, Optional, Tuple

from rcurves.files import atomic_write_bytes, atomic_write_json, file_sha256
from rcurves.models.checkpoint import META_FILE, PARAMS_FILE, Checkpoint, CheckpointError, load_checkpoint

WEIGHTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights")
MANIFEST_FILE = "manifest.json"
FORMAT = "rcurves-zoo-weights"
VERSION = 1


def weights_dir(folder: Optional[str] = None) -> str:
    """``folder``, or ``$RCURVES_WEIGHTS``, or the package's own ``rcurves/models/weights``."""
    return folder or os.environ.get("RCURVES_WEIGHTS") or WEIGHTS_DIR


def manifest(folder: Optional[str] = None) -> Dict[str, Dict[str, Any]]:
    """``{name: {'folder', 'recipe_key', 'data_fingerprint', 'params_sha256', 'meta_sha256'}}`` ({} if none)."""
    path = os.path.join(weights_dir(folder), MANIFEST_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path) as f:
            doc = json.load(f)
    except ValueError as e:
        raise CheckpointError(f"shipped weights {path!r}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise CheckpointError(f"shipped weights {path!r}: not a {FORMAT} manifest of version {VERSION}")
    return dict(doc.get("models") or {})


def shipped_path(name: str, recipe_key: str, folder: Optional[str] = None) -> Optional[str]:
    """The folder of ``name``'s shipped weights if the manifest lists them under ``recipe_key``, else None."""
    return _listed(name, recipe_key, folder, manifest(folder))


def _listed(name: str, recipe_key: str, folder: Optional[str], listing: Dict[str, Dict[str, Any]]) -> Optional[str]:
    rec = listing.get(name)
    if rec is None or rec.get("recipe_key") != recipe_key:
        return None
    return os.path.join(weights_dir(folder), rec["folder"])


def find(name: str, recipe_key: str, folder: Optional[str] = None) -> Optional[Tuple[str, Checkpoint]]:
    """``(folder, checkpoint)`` of zoo entry ``name``'s shipped weights if they were trained under ``recipe_key``
    (the manifest read once, both files checked against their sha256); None when none are shipped for it.

    Raises:
      CheckpointError: a listed file is missing or its sha256 differs from the
        manifest (corrupt or tampered: never loaded), or the checkpoint is
        otherwise unreadable.
    """
    listing = manifest(folder)
    path = _listed(name, recipe_key, folder, listing)
    if path is None:
        return None
    rec = listing[name]
    for file, key in ((PARAMS_FILE, "params_sha256"), (META_FILE, "meta_sha256")):
        target = os.path.join(path, file)
        if not os.path.isfile(target):
            raise CheckpointError(f"shipped weights {target!r}: missing (the manifest lists {name!r}); "
                                  "restore it from the repository or load with retrain=True")
        got = file_sha256(target)
        if got != rec[key]:
            raise CheckpointError(f"shipped weights {target!r}: sha256 {got} differs from the manifest's "
                                  f"{rec[key]}; refusing to load a corrupt or altered file (restore it from the "
                                  "repository, or load with retrain=True)")
    return path, load_checkpoint(path)


def load_shipped(name: str, recipe_key: str, folder: Optional[str] = None) -> Optional[Checkpoint]:
    """The shipped checkpoint of zoo entry ``name`` if its recipe key is ``recipe_key``; None otherwise
    (:func:`find` without the folder)."""
    found = find(name, recipe_key, folder)
    return None if found is None else found[1]


def _machine() -> Dict[str, str]:
    """What the weights were produced with: JAX versions and the CPU (retraining is bit-identical on the same)."""
    import jax
    import jaxlib

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "machine": platform.machine(), "cpu": cpu,
            "python": platform.python_version()}


def ship(name: str, recipe_key: str, checkpoint_dir: str, folder: Optional[str] = None) -> str:
    """Copy the trained checkpoint at ``checkpoint_dir`` into the shipped weights as ``name`` (key ``recipe_key``).

    The parameter bytes are copied unchanged; ``meta.json`` gains the ``zoo``
    block; the manifest is rewritten atomically and a previous folder of
    ``name`` (an older recipe) is removed. Returns the new folder.
    """
    ckpt = load_checkpoint(checkpoint_dir)            # verifies the source before anything is written
    root = weights_dir(folder)
    os.makedirs(root, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    sub = f"{safe}-{recipe_key}"
    dest = os.path.join(root, sub)
    with open(os.path.join(checkpoint_dir, PARAMS_FILE), "rb") as f:
        blob = f.read()
    meta = dict(ckpt.meta)
    meta["zoo"] = {"name": name, "recipe_key": recipe_key, "shipped_from": _machine()}
    os.makedirs(dest, exist_ok=True)
    atomic_write_bytes(os.path.join(dest, PARAMS_FILE), blob)
    atomic_write_json(os.path.join(dest, META_FILE), meta)
    models = manifest(folder)
    old = models.get(name, {}).get("folder")
    models[name] = {"folder": sub, "recipe_key": recipe_key, "data_fingerprint": ckpt.data_fingerprint,
                    "params_sha256": file_sha256(os.path.join(dest, PARAMS_FILE)),
                    "meta_sha256": file_sha256(os.path.join(dest, META_FILE))}
    atomic_write_json(os.path.join(root, MANIFEST_FILE),
                      {"format": FORMAT, "version": VERSION, "models": dict(sorted(models.items()))})
    if old and old != sub and os.path.isdir(os.path.join(root, old)):
        shutil.rmtree(os.path.join(root, old))
    return dest


__all__ = ["WEIGHTS_DIR", "find", "load_shipped", "manifest", "ship", "shipped_path", "weights_dir"]
