"""Chunked, atomic, resumable computation of per-point results.

A long measurement (minimal adversarial distances of thousands of points) is
split into chunks of ``chunk_size`` points. Each finished chunk is written to
``out_dir/chunk_XXXXXX.npz`` through a temporary file, ``fsync`` and
``os.replace``, so a file that exists is complete. ``out_dir/manifest.json``
records what is being computed: the caller's configuration (JSON), the data
fingerprint, ``n``, ``chunk_size`` and the key. A run started with
``resume=True`` skips the chunks already on disk and refuses, with a
:class:`RunnerError`, when the manifest says they were computed for something
else. Without ``resume`` an existing run directory is started afresh.

Randomness does not depend on chunking or on interruptions: point ``i`` (its
global index) gets the key ``fold_in(key, i)`` — the same key
``attacks.checks.check_key`` gives it when one key is passed for a whole batch
— and the attack functions accept one key per point. The last chunk is padded
to ``chunk_size`` (by repeating its last point) so every chunk has the same
shape: one compilation, and per-point results computed with identical array
shapes whether a run was interrupted or not, hence bit-identical.

Several devices: ``run_chunked(..., devices=4)`` (or ``mesh=``, a
``jax.sharding.Mesh`` from :func:`rcurves.pipeline.distributed.make_mesh`) computes
``k`` chunks per call, one per device: the ``k`` padded chunks are
concatenated, placed with a ``NamedSharding`` on the points axis so that
device ``j`` holds exactly chunk ``j``, and ``fn``'s jitted programs run as
one SPMD program on all devices (a short last group is filled with copies of
its last chunk, whose results are dropped). Every device thus runs the
1-device program on the very rows the 1-device run gives it (same keys
``fold_in(key, i)``, same shape), so results are bit-identical to one device.
The shape matters: XLA:CPU may round a reduction differently for a different
number of rows, so sharding one chunk over the devices would not be enough.
Memory per device is bounded by ``chunk_size`` as before. The device count is
not part of the manifest: a run started on 4 devices resumes on 1 (or the other
way round) with identical results. After ``jax.distributed.initialize()`` a
mesh may span hosts (``make_mesh('all')``); every host then runs the same loop
on the same full data and the outputs are all-gathered (each host writes the
same files, so give each host its own ``out_dir`` unless the file system is shared;
on resume the hosts agree on the chunks to compute: those that any host lacks).

:func:`make_distance_fn` builds the usual per-chunk function: the minimal
distance by the radius search of ``attacks.minimal_distance`` (PGD as the
oracle) and, for l_2, also Carlini-Wagner (paper 000, Section 3.1 / Appendix
C.2), keeping per point the smallest *verified* distance of the attacks run.

Data larger than memory: ``x`` may be an ``np.memmap`` (``np.load(path,
mmap_mode='r')``). It is then never read whole: one streaming pass, block by
block, checks it (floating dtype, shape, finite values: a NaN anywhere raises
the ``ValueError`` before anything is compiled or written) and computes the
data fingerprint of the manifest — the same digest as for the array in
memory, so a run started in memory resumes on the memory-mapped file and the
other way round. Each chunk's rows are then read from the map when the chunk
is computed. Both passes release the map's pages as they go
(:mod:`rcurves.data.streaming`), so the process's memory is bounded by the chunk
size, not by the file size; only ``y`` and the per-point results (``O(n)``
numbers) are held whole. The validation pass reads the file once more than
strictly needed; it is done up front because the manifest needs the
fingerprint before the first chunk anyway, and because a bad value found
hours into a run would waste them. An iterator of chunks is not accepted: the
manifest needs ``n`` and the fingerprint before the first chunk, and resuming
needs to read chunk ``i`` again; :func:`rcurves.data.streaming.map_points` takes
iterators (without persistence or resume), or save the chunks to an ``.npy``
and pass its memory map.

A run killed inside an atomic write leaves a temporary file
(``.tmp-XXXXXXXX-chunk_000007.npz``) behind; the next start or resume in the
same ``out_dir`` deletes those of this run's files (older than the call)
unless several JAX processes run (another host may be writing into a shared
``out_dir`` at that moment).
"""
from __future__ import annotations

import collections.abc
import dataclasses
import io
import json
import os
import re
import time
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

import attacks
from attacks import checks
from rcurves.files import atomic_temp_target, atomic_write_bytes, atomic_write_json
from rcurves.pipeline.distributed import resolve_mesh, shard_points, to_host
from rcurves.data.streaming import _release_pages

FORMAT = "rcurves-run"
VERSION = 1
MANIFEST = "manifest.json"
RESULT = "result.npz"

ChunkFn = Callable[[jax.Array, jax.Array, jax.Array], Mapping[str, Any]]


class RunnerError(ValueError):
    """A run directory cannot be resumed (different configuration or data) or is unusable."""


@dataclasses.dataclass(frozen=True)
class DistanceConfig:
    """How per-point minimal distances are measured in one norm.

    Attributes:
      norm: 'linf', 'l2' or 'l1'.
      search_steps, steps, restarts, candidates, polish_steps: of
        ``attacks.minimal_distance`` (None: its defaults for the model's
        number of classes, decided at the first chunk).
      gradients: instead of those, a budget of about this many gradient
        evaluations per point, spent in the default schedule's lanes and
        rounds (``attacks.minimal.budget_schedule``).
      ensemble: spend the budget (``gradients``, default 1,000) in
        ``attacks.ensemble``'s default members instead of one search (from
        600 gradients, independent searches and FMN: closer to the truth at
        the tail for the same budget, ``attacks.ensemble.default_attacks``).
      eps_max: largest radius searched (None: the box's diameter).
      cw: also run Carlini-Wagner (l_2 only) and keep the smaller distance.
      cw_binary_search_steps, cw_steps, cw_lr: of ``attacks.carlini_wagner_l2``.
      bounds: input box.
      adaptive: measure with ``attacks.adaptive_distance`` (the default
        search, a cheap probe on every point, and further independent
        searches only on the points judged unsure) instead of one
        fixed-budget search. None (default): adaptive unless a schedule
        (``search_steps``/``steps``/``restarts``/``polish_steps``), a budget
        (``gradients``), ``candidates`` or ``ensemble`` is given, which fix the
        budget; True with any of those is a ``ValueError``; False: the fixed
        default search (``attacks.minimal_distance``). Resolved to a bool when
        constructed.
    """

    norm: str = "linf"
    search_steps: Optional[int] = None
    steps: Optional[int] = None
    restarts: Optional[int] = None
    candidates: int = 1
    polish_steps: Optional[int] = None
    gradients: Optional[int] = None
    ensemble: bool = False
    eps_max: Optional[float] = None
    cw: bool = False
    cw_binary_search_steps: int = 5
    cw_steps: int = 50
    cw_lr: float = 0.1
    bounds: Optional[Tuple[float, float]] = (0.0, 1.0)
    adaptive: Optional[bool] = None

    def __post_init__(self):
        object.__setattr__(self, "norm", checks.check_norm(self.norm))
        if self.adaptive is not None and not isinstance(self.adaptive, bool):
            raise ValueError(f"adaptive: expected None, True or False, got {self.adaptive!r}")
        if self.cw and self.norm != "l2":
            raise ValueError(f"cw: Carlini-Wagner measures l2 distances, not {self.norm}")
        for name in ("steps", "restarts", "gradients", "candidates", "cw_binary_search_steps", "cw_steps"):
            if getattr(self, name) is not None:
                checks.check_positive_int(getattr(self, name), name)
        for name in ("search_steps", "polish_steps"):
            if getattr(self, name) is not None:
                checks.check_positive_int(getattr(self, name), name, minimum=0)
        given = [n for n in ("search_steps", "steps", "restarts", "polish_steps") if getattr(self, n) is not None]
        if self.gradients is not None and given:
            raise ValueError(f"gradients: a budget replaces {', '.join(given)}; give one or the other")
        if self.ensemble:
            if given or self.candidates != 1:
                raise ValueError(f"ensemble: the ensemble's members replace {', '.join(given) or 'candidates'}; "
                                 "give a budget (gradients) instead")
        if self.eps_max is not None:
            object.__setattr__(self, "eps_max", checks.check_positive_float(self.eps_max, "eps_max"))
        object.__setattr__(self, "bounds", checks.check_bounds(self.bounds))
        fixing = given + (["gradients"] if self.gradients is not None else []) \
            + (["candidates"] if self.candidates != 1 else []) + (["ensemble"] if self.ensemble else [])
        if self.adaptive and fixing:
            raise ValueError(f"adaptive: the adaptive attack spends its own budget per point; it cannot be combined "
                             f"with {', '.join(fixing)} (give adaptive=False or drop them)")
        object.__setattr__(self, "adaptive", not fixing if self.adaptive is None else self.adaptive)

    def to_dict(self) -> Dict[str, Any]:
        d = dataclasses.asdict(self)
        d["bounds"] = list(self.bounds) if self.bounds is not None else None
        return d


#: every norm a distance is measured in: the ``adv_<norm>`` outputs of :func:`make_distance_fn`
CROSS_NORMS = ("linf", "l2", "l1")


def _adversarial_norms(x, res) -> Dict[str, np.ndarray]:
    """``{'adv_linf', 'adv_l2', 'adv_l1'}``: the norms of ``res.x_adv - x`` (``(n,)`` each; ``inf`` where the
    attack found no adversarial, ``0`` where the point is misclassified)."""
    from attacks.result import flat_norm

    v = (res.x_adv - x).reshape(x.shape[0], -1)
    found = to_host(res.distance) < np.inf
    return {f"adv_{q}": np.where(found, to_host(flat_norm(q, v)), np.inf) for q in CROSS_NORMS}


def make_distance_fn(logits_fn: Callable, cfg: DistanceConfig) -> ChunkFn:
    """Per-chunk ``fn(x, y, keys) -> {'distance', 'pgd'[, 'cw'], 'adv_linf', 'adv_l2', 'adv_l1'[, 'gradients',
    'escalated']}`` (numpy ``(n,)`` each).

    With ``cfg.adaptive`` (the default), ``'pgd'`` is ``attacks.adaptive_distance``'s
    distance and ``'gradients'`` / ``'escalated'`` say per point what it spent
    (gradient evaluations, CW's not counted) and whether it got more searches.
    Its batch rule decides per chunk, so with it a point's result may depend on
    the other points of its chunk (and on ``chunk_size``), unlike the
    contract :func:`run_chunked` states for ``fn``; a resumed run keeps its
    chunk size, so it is reproducible.

    ``keys`` is ``(n, 2)``, one key per point. ``'pgd'`` is the radius-search
    distance, ``'cw'`` the Carlini-Wagner one (when ``cfg.cw``), and
    ``'distance'`` their per-point minimum; each is the re-checked norm of an
    adversarial example (``inf`` when none was found, ``0`` when misclassified).
    ``'adv_<q>'`` is the smallest ``l_q`` norm among those verified adversarials
    (an upper bound of the point's ``l_q`` distance: ``evaluate`` with several
    norms bounds each norm's distance by the other norms' adversarials).

    ``x``, ``y`` and ``keys`` may be sharded over a mesh (as
    ``run_chunked(..., devices=k)`` passes them): the attacks then run sharded.
    """

    def fn(x, y, keys):
        out = {}
        if cfg.adaptive:
            res = attacks.adaptive_distance(logits_fn, x, y, norm=cfg.norm, key=keys, eps_max=cfg.eps_max,
                                            bounds=cfg.bounds)
            out["gradients"] = to_host(res.gradients).astype(np.float64)
            out["escalated"] = to_host(res.escalated).astype(np.float64)
        elif cfg.ensemble:
            res = attacks.ensemble(
                logits_fn, x, y, norm=cfg.norm, key=keys, eps_max=cfg.eps_max, bounds=cfg.bounds,
                attacks=attacks.default_attacks(cfg.norm, cfg.gradients or 1000, _n_classes(logits_fn, x)))
        else:
            res = attacks.minimal_distance(
                logits_fn, x, y, norm=cfg.norm, key=keys, eps_max=cfg.eps_max, candidates=cfg.candidates,
                bounds=cfg.bounds, **search_schedule(logits_fn, x, cfg),
            )
        out["pgd"] = to_host(res.distance)  # all-gathered when the mesh spans hosts
        best = out["pgd"]
        adv = _adversarial_norms(x, res)
        if cfg.cw:
            cw_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
            res_cw = attacks.carlini_wagner_l2(
                logits_fn, x, y, key=cw_keys, binary_search_steps=cfg.cw_binary_search_steps,
                steps=cfg.cw_steps, lr=cfg.cw_lr, bounds=cfg.bounds,
            )
            out["cw"] = to_host(res_cw.distance)
            best = np.minimum(best, out["cw"])
            adv = {k: np.minimum(v, w) for (k, v), w in zip(adv.items(), _adversarial_norms(x, res_cw).values())}
        out["distance"] = best
        out.update(adv)
        return out

    return fn


#: the file of :func:`escalate_beaten`'s results in a norm's run directory
CROSS_FILE = "cross_escalation.npz"


#: ``fold_in`` salt of :func:`escalate_beaten`'s keys: its searches are fresh ones, not the first run's again
CROSS_SALT = 0x63726F73

#: :func:`escalate_beaten`'s first radius, a multiple of the other norms'
#: bound ``upper``: a ball that holds an adversarial (the other norm's
#: adversarial is in it), with room for the search's lanes to move. Measured
#: on the 17 points of the full-MNIST l_inf 0.4 AT CNN (2,000-point
#: evaluation, 20-wide l_inf polish) where the l_2 adversarial was more than
#: 3% closer in l_inf than the l_inf search: starting at the box's diameter
#: (the first run's radius) the second run got a mean l_inf distance of
#: 0.259, 8 points still above ``upper``, 2 above the l_2 attacks' d_2 (001
#: eq. 19 broken), 590 gradients per point; at 1.25 ``upper`` 0.225, 6, 0,
#: 255 gradients (1.5: 0.232, 6, 0, 344; 2: 0.241, 6, 0, 370). The search
#: still finds its own adversarial: only the radius comes from the bound.
CROSS_RADIUS = 1.25


def escalate_beaten(logits_fn: Callable, cfg: DistanceConfig, x, y, key, result: Dict[str, np.ndarray],
                    upper: np.ndarray, run_dir: Optional[str] = None, chunk: int = 100) -> Dict[str, np.ndarray]:
    """The adaptive attack's cross-norm rule, after a norm's chunked run: points another norm's adversarial beats.

    ``upper`` ``(n,)`` is the smallest norm (in ``cfg.norm``) of the other
    norms' verified adversarials (``evaluate``'s ``'cross'``; ``inf`` where
    none). A correctly classified point that the first run did not escalate
    and whose adaptive distance ``'pgd'`` exceeds ``(1 + rtol) * upper``
    (``attacks.adaptive.AdaptiveConfig.rtol``) is unsure:
    ``attacks.adaptive_distance`` runs again on those points with ``upper``
    and fresh keys (``fold_in(fold_in(key, i), CROSS_SALT)``: its searches
    are not the first run's again), so each gets an independent default
    search, the probe and the escalation searches; their own adversarials,
    re-checked, replace ``'pgd'`` (and ``'distance'``) where closer. Its
    first radius (``eps_max``) is ``CROSS_RADIUS * upper`` (at most the
    run's ``eps_max``, or the box's diameter): a ball the other norm's
    adversarial shows to hold an adversarial, rather than the diameter,
    from which the first run's lanes found a farther one (on a masked
    model they keep to it).
    ``upper`` itself is not copied in (``evaluate`` takes that minimum
    afterwards, as ``'cross'``). Points the first run escalated already had
    the searches and are left alone. The points run in pieces of ``chunk``
    (the run's chunk size), each padded with copies of its last point: the
    run's program shapes and memory.

    Returns ``result`` updated in place (``'pgd'``, ``'distance'``, and the
    points' ``'gradients'`` (plus everything the second run spent) and
    ``'escalated'``). A no-op unless ``cfg.adaptive``. With ``run_dir``, the
    second run's results are kept in ``run_dir/CROSS_FILE`` keyed by the
    points, their bounds, ``chunk`` and the run's manifest, and reused.
    """
    import hashlib

    from attacks.adaptive import AdaptiveConfig

    if not cfg.adaptive:
        return result
    own = result["pgd"]
    upper = np.asarray(upper, np.float64)
    done = result["escalated"] > 0 if "escalated" in result else np.zeros(own.shape, bool)
    idx = np.flatnonzero((own > 0) & ~done & (upper * (1.0 + AdaptiveConfig().rtol) < own))
    if idx.size == 0:
        return result
    h = hashlib.sha256(idx.astype(np.int64).tobytes() + upper[idx].tobytes() + str(int(chunk)).encode()
                       + f"first radius {CROSS_RADIUS!r}".encode())
    if run_dir is not None and os.path.exists(os.path.join(run_dir, MANIFEST)):
        with open(os.path.join(run_dir, MANIFEST), "rb") as f:
            h.update(f.read())
    tag = h.hexdigest()
    path = None if run_dir is None else os.path.join(run_dir, CROSS_FILE)
    new = None
    if path is not None and os.path.exists(path):
        try:
            with np.load(path) as z:
                if str(z["tag"]) == tag:
                    new = {k: z[k] for k in ("distance", "gradients", "escalated")}
        except Exception:  # noqa: BLE001 - a damaged file is recomputed
            new = None
    if new is None:
        salted = jax.vmap(lambda k: jax.random.fold_in(k, CROSS_SALT))
        cap = cfg.eps_max
        if cap is None and cfg.bounds is not None:
            cap = attacks.minimal.default_eps_max(cfg.norm, cfg.bounds, x.shape[1:])
        # a bound of 0 (the other norm's run saw the point misclassified: a tie a chunking can flip) gives no
        # ball to start from: search from the run's own first radius
        first = CROSS_RADIUS * upper if cap is None else np.where(upper > 0, np.minimum(CROSS_RADIUS * upper, cap), cap)
        parts = []
        for start in range(0, idx.size, chunk):
            piece = idx[start:start + chunk]
            padded = np.concatenate([piece, np.full(chunk - piece.size, piece[-1])])
            res = attacks.adaptive_distance(
                logits_fn, np.asarray(x[padded]), np.asarray(y)[padded], norm=cfg.norm,
                key=salted(point_keys(_raw_key(key), padded)), eps_max=first[padded].astype(np.float32),
                bounds=cfg.bounds, upper=upper[padded])
            parts.append({"distance": to_host(res.distance)[:piece.size].astype(np.float64),
                          "gradients": to_host(res.gradients)[:piece.size].astype(np.float64),
                          "escalated": to_host(res.escalated)[:piece.size].astype(np.float64)})
        new = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        if path is not None:
            atomic_write_bytes(path, _npz_bytes({**new, "tag": np.asarray(tag)}))
    d = new["distance"]
    result["pgd"][idx] = np.minimum(own[idx], d)
    result["distance"][idx] = np.minimum(result["distance"][idx], d)
    if "gradients" in result:
        result["gradients"][idx] += new["gradients"]
        result["escalated"][idx] = 1.0     # in doubt, and it got a second, independent adaptive run
    return result


def search_schedule(logits_fn: Callable, x, cfg: DistanceConfig) -> Dict[str, Optional[int]]:
    """``minimal_distance``'s ``search_steps``, ``steps``, ``restarts`` and
    ``polish_steps`` for ``cfg`` (None where its defaults apply); with
    ``cfg.gradients``, the default schedule scaled to that budget for the
    number of classes ``logits_fn`` returns on ``x``."""
    if cfg.gradients is None:
        return {"search_steps": cfg.search_steps, "steps": cfg.steps, "restarts": cfg.restarts,
                "polish_steps": cfg.polish_steps}
    return attacks.minimal.budget_schedule(cfg.norm, cfg.gradients, _n_classes(logits_fn, x))


def _n_classes(logits_fn: Callable, x) -> int:
    return int(jax.eval_shape(logits_fn, jax.ShapeDtypeStruct((1,) + tuple(x.shape[1:]), x.dtype)).shape[-1])


def point_keys(key, indices) -> jax.Array:
    """``(m, 2)`` keys ``fold_in(key, i)`` for the global point indices ``i``."""
    idx = jnp.asarray(np.asarray(indices, dtype=np.uint32))
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(idx)


def _raw_key(key) -> jax.Array:
    if key is None or not hasattr(key, "dtype"):
        raise ValueError(f"key: expected a jax.random key, got {type(key).__name__}")
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    if key.dtype != jnp.uint32 or tuple(key.shape) != (2,):
        raise ValueError(f"key: expected one jax.random key (shape (2,)), got shape {tuple(key.shape)}")
    return jnp.asarray(key)


def chunk_path(out_dir: str, i: int) -> str:
    return os.path.join(out_dir, f"chunk_{i:06d}.npz")


def _npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def _load_chunk(path: str, start: int, stop: int) -> Optional[Dict[str, np.ndarray]]:
    """A finished chunk's arrays, or None if the file is unreadable or not this chunk."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception:  # noqa: BLE001 - an unreadable chunk is recomputed
        return None
    idx = arrays.pop("_index", None)
    if idx is None or not np.array_equal(idx, np.arange(start, stop)):
        return None
    if any(a.shape[:1] != (stop - start,) for a in arrays.values()):
        return None
    return arrays


def _manifest(config: Mapping[str, Any], fingerprint: str, n: int, chunk_size: int, key) -> Dict[str, Any]:
    try:
        json.dumps(config, sort_keys=True)
    except (TypeError, ValueError) as e:
        raise ValueError(f"config: expected a JSON-serialisable mapping ({e})") from None
    return {
        "format": FORMAT,
        "version": VERSION,
        "config": json.loads(json.dumps(config, sort_keys=True)),
        "data_fingerprint": fingerprint,
        "n": int(n),
        "chunk_size": int(chunk_size),
        "key": [int(v) for v in np.asarray(key)],
    }


def _diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> Optional[str]:
    for field in ("format", "version", "data_fingerprint", "n", "chunk_size", "key"):
        if old.get(field) != new.get(field):
            what = "data" if field == "data_fingerprint" else field
            return f"{what} differs ({old.get(field)!r} there, {new.get(field)!r} now)"
    oc, nc = old.get("config") or {}, new.get("config") or {}
    for k in sorted(set(oc) | set(nc)):
        if oc.get(k) != nc.get(k):
            return f"config field {k!r} differs ({oc.get(k)!r} there, {nc.get(k)!r} now)"
    return None


_SCAN_BYTES = 4 << 20  # block size of the validation + fingerprint pass over a memory map
_RUN_FILE = re.compile(r"^(chunk_\d{6}\.npz|" + re.escape(MANIFEST) + "|" + re.escape(RESULT) + ")$")


class _MappedRows:
    """A memory-mapped ``x`` seen as float32 rows: ``rows[idx]`` reads only the rows in ``idx``.

    Each contiguous run of the requested rows is converted into a fresh float32
    buffer straight from the map, whose pages are then released
    (:func:`rcurves.data.streaming._release_pages`), so reading chunk after chunk
    keeps memory bounded by the chunk size.
    """

    dtype = np.dtype(np.float32)

    def __init__(self, mm: np.memmap):
        self._mm = mm
        self.shape = tuple(mm.shape)
        self.ndim = mm.ndim

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, idx) -> np.ndarray:
        idx = np.asarray(idx)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise TypeError("rows are read by a 1-D integer index array")
        uniq = np.unique(idx)
        out = np.empty((uniq.size,) + self.shape[1:], np.float32)
        pos = 0
        for run in np.split(uniq, np.flatnonzero(np.diff(uniq) != 1) + 1):
            a, b = int(run[0]), int(run[-1]) + 1
            part = self._mm[a:b]
            out[pos:pos + b - a] = part        # float32 conversion, as checks.check_array does
            _release_pages(part)
            pos += b - a
        return out[np.searchsorted(uniq, idx)]


def _check_mapped_x(x: np.memmap) -> None:
    """``checks.check_array(x, 'x', min_ndim=1)`` without reading the data (values: :func:`_scan_mapped`)."""
    dt = np.dtype(x.dtype)
    if not np.issubdtype(dt, np.floating):
        if np.issubdtype(dt, np.integer) or dt == np.bool_:
            raise ValueError(
                f"x: expected a floating array (float16/32/64), got dtype {dt}; scale integer images to floats first"
            )
        raise ValueError(f"x: expected a real floating array, got dtype {dt}")
    if x.ndim < 1:
        raise ValueError(f"x: expected at least 1 dimensions, got shape {tuple(x.shape)}")
    if x.size == 0:
        raise ValueError(f"x: expected a non-empty array, got shape {tuple(x.shape)}")


def _scan_mapped(x: np.memmap, y: np.ndarray) -> str:
    """One streaming pass over a memory-mapped ``x``: finite values, and the fingerprint.

    The fingerprint is ``dataset_fingerprint(x as float32, y)``, what the
    in-memory path computes, hashed block by block; the blocks' pages are
    released as they are read (:func:`rcurves.data.streaming._iter_views`).
    """
    from rcurves.data.builtin import _fingerprint
    from rcurves.data.streaming import _iter_views

    rows = max(1, _SCAN_BYTES // max(1, x[:1].nbytes))

    def blocks():
        for start, part in _iter_views(x, rows):  # read in place, no copy for float32
            ok = np.isfinite(part)
            if not ok.all():
                bad = "NaN" if np.isnan(part).any() else "inf"
                first = start + int(np.flatnonzero(~ok.reshape(len(part), -1).all(axis=1))[0])
                raise ValueError(f"x: contains {bad} values (first in row {first})")
            del ok
            yield np.asarray(part).astype(np.float32, copy=False)

    return _fingerprint([("x", x.shape, np.float32, blocks()), ("y", y.shape, y.dtype, (y,))])


def _remove_stale_temps(out_dir: str, before_ns: int) -> None:
    """Delete temp files of killed atomic writes of this run's files in ``out_dir`` (not below it).

    Only names :func:`rcurves.models.checkpoint.atomic_temp_target` recognises, for a
    chunk, the manifest or the result, last modified before ``before_ns`` (the
    start of this call: a killed process's files are older). Skipped when
    several JAX processes run: another host may be mid-write in a shared ``out_dir``.
    """
    if jax.process_count() > 1:
        return
    for name in os.listdir(out_dir):
        target = atomic_temp_target(name)
        if target is None or not _RUN_FILE.match(target):
            continue
        path = os.path.join(out_dir, name)
        try:
            if os.path.isfile(path) and not os.path.islink(path) and os.stat(path).st_mtime_ns < before_ns:
                os.unlink(path)
        except FileNotFoundError:
            pass


def run_chunked(
    fn: ChunkFn,
    x,
    y,
    *,
    key,
    out_dir: str,
    config: Mapping[str, Any],
    chunk_size: int = 256,
    resume: bool = False,
    on_mismatch: str = "error",
    progress: bool = True,
    desc: str = "points",
    mesh=None,
    devices=None,
) -> Dict[str, np.ndarray]:
    """Apply ``fn`` to ``(x, y)`` chunk by chunk, persisting each chunk atomically.

    Args:
      fn: ``fn(x_chunk, y_chunk, keys_chunk) -> {name: (m,) array}``; point
        ``i`` must depend only on ``x[i], y[i], keys[i]``.
      x: ``(n, *shape)`` inputs: an array, or an ``np.memmap``
        (``np.load(path, mmap_mode='r')``), read chunk by chunk with memory
        bounded by ``chunk_size`` (module docstring). Not an iterator of
        chunks (use :func:`rcurves.data.streaming.map_points` for those).
      y: ``(n,)`` labels (held in memory).
      key: one PRNG key; point ``i`` receives ``fold_in(key, i)``.
      out_dir: the run directory (created if needed).
      config: JSON-serialisable description of the computation (model
        identity, attack settings); a resumed run must match it exactly.
      chunk_size: points per chunk (fixed for the life of a run directory).
      resume: reuse finished chunks of a matching run in ``out_dir``.
      on_mismatch: with ``resume``, what to do when ``out_dir`` holds a run of
        something else: ``'error'`` (raise :class:`RunnerError`) or
        ``'restart'`` (discard it and start afresh; for caches).
      progress: tqdm bar in points/s.
      desc: the bar's label.
      mesh: a 1-D ``jax.sharding.Mesh`` with axis ``'points'``
        (:func:`rcurves.pipeline.distributed.make_mesh`): ``fn`` gets one chunk per
        device per call, sharded over the mesh. Results are bit-identical to
        one device when ``fn`` treats points independently; a ``fn`` that mixes
        the points of a batch on the host (e.g. the sparsity estimators) should
        be wrapped in :func:`rcurves.pipeline.distributed.per_shard`.
      devices: instead of ``mesh``: a number of local devices or ``'all'``.
        Neither (the default): the chunk is left on the default device.
        Not part of the manifest: a run may resume on another device count.

    Returns:
      ``{name: (n,) numpy array}``, the concatenated outputs; also written to
      ``out_dir/result.npz``.

    Raises:
      ValueError: bad arguments, naming the argument (NaN or inf in ``x``,
        also in a memory map, is found before anything is computed).
      RunnerError: ``resume`` and the run in ``out_dir`` was made with a
        different configuration, data, ``n``, ``chunk_size`` or key.
    """
    from rcurves.data.builtin import dataset_fingerprint

    if on_mismatch not in ("error", "restart"):
        raise ValueError(f"on_mismatch: expected 'error' or 'restart', got {on_mismatch!r}")
    started_ns = time.time_ns()
    mesh = resolve_mesh(mesh, devices)
    if isinstance(x, collections.abc.Iterator):
        raise ValueError(
            f"x: expected an array or a memory map (np.load(path, mmap_mode='r')), got an iterator "
            f"({type(x).__name__}); run_chunked records n and a data fingerprint before the first chunk "
            "and re-reads chunks on resume: use rcurves.data.streaming.map_points for iterators, or save "
            "the chunks to an .npy file and pass its memory map"
        )
    mapped = isinstance(x, np.memmap)
    if mapped:  # never read whole (module docstring)
        _check_mapped_x(x)
    else:
        x = np.asarray(checks.check_array(x, "x", min_ndim=1))
    y = np.asarray(checks.check_labels(y, x.shape[0], "y"))
    chunk_size = checks.check_positive_int(chunk_size, "chunk_size")
    key = _raw_key(key)
    n = x.shape[0]
    if mapped:
        fingerprint = _scan_mapped(x, y)
        x = _MappedRows(x)
    else:
        fingerprint = dataset_fingerprint(x, y)
    manifest = _manifest(config, fingerprint, n, chunk_size, key)
    os.makedirs(out_dir, exist_ok=True)
    mpath = os.path.join(out_dir, MANIFEST)
    n_chunks = -(-n // chunk_size)

    why = None
    if os.path.exists(mpath) and resume:
        try:
            with open(mpath) as f:
                old = json.load(f)
            why = _diff(old, manifest)
        except (OSError, ValueError) as e:
            why = f"unreadable manifest ({e})"
        if why is not None and on_mismatch == "error":
            raise RunnerError(
                f"cannot resume {out_dir}: it holds results for a different run ({why}); "
                "use another output directory or run without --resume"
            )
    _remove_stale_temps(out_dir, started_ns)
    if not (os.path.exists(mpath) and resume) or why is not None:
        resume = False
        _clear_run(out_dir)
        atomic_write_json(mpath, manifest)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n, desc=desc, unit="pt", leave=False, dynamic_ncols=True)
    parts: Dict[int, Dict[str, np.ndarray]] = {}
    delay = float(os.environ.get("_RCURVES_CHUNK_DELAY", "0") or 0)  # test hook: slow chunks down
    k = 1 if mesh is None else int(mesh.devices.size)
    pending: list = []

    def compute(group):
        # One call for up to k chunks, each padded to chunk_size (copies of its last
        # point) and the group filled with copies of its last chunk: device j gets
        # exactly chunk j, so every device runs the 1-device program on the same rows.
        spans = [(i * chunk_size, min(n, (i + 1) * chunk_size)) for i in group]
        rows = [np.concatenate([np.arange(a, b), np.full(chunk_size - (b - a), b - 1)]) for a, b in spans]
        pad = np.concatenate(rows + [rows[-1]] * (k - len(rows)))
        if mesh is None:
            out = fn(jnp.asarray(x[pad]), jnp.asarray(y[pad]), point_keys(key, pad))
        else:
            (xs, ys, ks), _ = shard_points([x[pad], y[pad], np.asarray(point_keys(key, pad))], mesh)
            out = fn(xs, ys, ks)
        host = {name: to_host(v) for name, v in out.items()}
        for name, v in host.items():
            if v.shape[:1] != pad.shape:
                raise RunnerError(f"fn: output {name!r} has shape {v.shape}, expected ({pad.size}, ...)")
        for j, (i, (a, b)) in enumerate(zip(group, spans)):
            arrays = {name: v[j * chunk_size: j * chunk_size + b - a] for name, v in host.items()}
            atomic_write_bytes(chunk_path(out_dir, i), _npz_bytes({**arrays, "_index": np.arange(a, b)}))
            if delay:
                time.sleep(delay)
            parts[i] = arrays
            if bar is not None:
                bar.update(b - a)

    def load(i):
        start, stop = i * chunk_size, min(n, (i + 1) * chunk_size)
        path = chunk_path(out_dir, i)
        return _load_chunk(path, start, stop) if resume and os.path.exists(path) else None

    agreed = None
    if jax.process_count() > 1:
        # Several hosts: every call of fn is collective, so all hosts must compute the same
        # chunks. A host's out_dir may hold chunks another's lacks (a host killed between
        # writes): recompute every chunk that some host lacks (the results are the same).
        from jax.experimental import multihost_utils

        mine = {i: load(i) for i in range(n_chunks)}
        have = np.array([mine[i] is not None for i in range(n_chunks)], np.int32)
        every = np.asarray(multihost_utils.process_allgather(have)).reshape(-1, n_chunks).min(axis=0)
        agreed = {i: (mine[i] if every[i] else None) for i in range(n_chunks)}

    for i in range(n_chunks):
        start, stop = i * chunk_size, min(n, (i + 1) * chunk_size)
        arrays = load(i) if agreed is None else agreed[i]
        if arrays is not None:
            parts[i] = arrays
            if bar is not None:
                bar.update(stop - start)
            continue
        pending.append(i)
        if len(pending) == k:
            compute(pending)
            pending = []
    if pending:
        compute(pending)
    if bar is not None:
        bar.close()
    ordered = [parts[i] for i in range(n_chunks)]
    names = ordered[0].keys() if ordered else ()
    result = {name: np.concatenate([p[name] for p in ordered]) for name in names}
    atomic_write_bytes(os.path.join(out_dir, RESULT), _npz_bytes(result))
    return result


def load_result(out_dir: str) -> Dict[str, np.ndarray]:
    """The arrays of a finished run (``out_dir/result.npz``)."""
    path = os.path.join(out_dir, RESULT)
    if not os.path.exists(path):
        raise RunnerError(f"{out_dir}: no finished result ({RESULT} missing)")
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _clear_run(out_dir: str) -> None:
    for name in os.listdir(out_dir):
        if (name.startswith("chunk_") and name.endswith(".npz")) or name in (MANIFEST, RESULT):
            os.unlink(os.path.join(out_dir, name))


__all__ = [
    "DistanceConfig",
    "RunnerError",
    "chunk_path",
    "load_result",
    "make_distance_fn",
    "CROSS_NORMS",
    "point_keys",
    "run_chunked",
]
