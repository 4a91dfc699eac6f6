"""Run any per-point function with its batch axis sharded over devices.

Every attack and estimator in this toolkit treats points independently and
draws a point's randomness from ``fold_in(key, i)`` with ``i`` the point's
*global* index. So sharding the point axis over a ``jax.sharding.Mesh``
changes nothing but where each point is computed: ``on_mesh`` derives the
per-point keys on the host first, pads the batch to a multiple of the device
count (with copies of the first point, whose results are dropped), places the
arrays with a ``NamedSharding`` on the points axis and calls the function,
whose ``jit`` then compiles one SPMD program for all devices. Bit for bit,
the results equal a 1-device run when each device computes as many rows as
that run did (XLA:CPU may round reductions differently for another row
count): ``rcurves.pipeline.runner.run_chunked(..., devices=k)`` arranges exactly that,
one chunk per device; :func:`per_shard` runs host-side logic per device.

Several hosts: call ``jax.distributed.initialize()`` first and pass the same
full batch on every host; ``make_mesh()`` then spans ``jax.devices()`` (all
hosts) and the arrays are assembled with ``jax.make_array_from_callback``, so
each host only materialises its own shards on its devices.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from attacks.checks import check_key

AXIS = "points"


def make_mesh(devices: Optional[Sequence[jax.Device] | int | str] = None) -> Mesh:
    """A 1-D mesh named ``'points'``.

    Args:
      devices: None or ``'all'`` for every device (all hosts after
        ``jax.distributed.initialize``), an int for the first k local devices,
        or an explicit sequence of devices.

    Raises:
      ValueError: naming ``devices``, for a count outside ``1..len(jax.local_devices())``
        or anything that is not a count, ``'all'`` or devices.
    """
    if devices is None or (isinstance(devices, str) and devices == "all"):
        devs = jax.devices()
    elif isinstance(devices, (int, np.integer)) and not isinstance(devices, (bool, np.bool_)):
        avail = jax.local_devices()
        if not 1 <= int(devices) <= len(avail):
            raise ValueError(f"devices: expected 1..{len(avail)} (local devices), got {devices}")
        devs = avail[: int(devices)]
    elif isinstance(devices, (str, bytes, bool, float, np.bool_, np.floating)) or not hasattr(devices, "__iter__"):
        raise ValueError(f"devices: expected a number of local devices, 'all' or a sequence of devices, "
                         f"got {devices!r}")
    else:
        devs = list(devices)
        if not devs:
            raise ValueError("devices: expected at least one device")
        if not all(isinstance(d, jax.Device) for d in devs):
            raise ValueError(f"devices: expected jax devices, got {[type(d).__name__ for d in devs]}")
    return Mesh(np.asarray(devs), (AXIS,))


def resolve_mesh(mesh: Optional[Mesh] = None, devices=None) -> Optional[Mesh]:
    """The mesh of a ``mesh=`` / ``devices=`` pair of options; None when both are None.

    Validates eagerly (before anything is compiled): ``devices`` as in
    :func:`make_mesh`, ``mesh`` must be a 1-D ``Mesh`` with the axis ``'points'``.
    """
    if mesh is not None and devices is not None:
        raise ValueError("devices: give either mesh or devices, not both")
    if mesh is None:
        return None if devices is None else make_mesh(devices)
    if not isinstance(mesh, Mesh) or tuple(mesh.axis_names) != (AXIS,):
        raise ValueError(f"mesh: expected a 1-D jax.sharding.Mesh with axis {AXIS!r} (see make_mesh), "
                         f"got {mesh!r}")
    return mesh


def to_host(a) -> np.ndarray:
    """A numpy copy of ``a``; arrays with shards on other hosts are all-gathered first."""
    if isinstance(a, jax.Array) and not a.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(a, tiled=True))
    return np.asarray(a)


def _pad(a: np.ndarray, total: int) -> np.ndarray:
    n = a.shape[0]
    if total == n:
        return a
    filler = np.broadcast_to(a[:1], (total - n,) + a.shape[1:])
    return np.concatenate([a, filler], axis=0)


def shard_points(arrays: Sequence[Any], mesh: Mesh):
    """Pad each array's axis 0 to a multiple of the mesh size and shard it.

    Returns ``(sharded_arrays, n)`` where ``n`` is the unpadded length.
    """
    n = int(np.shape(arrays[0])[0])
    size = mesh.devices.size
    total = -(-n // size) * size
    sharding = NamedSharding(mesh, P(AXIS))
    out = []
    for a in arrays:
        host = _pad(np.asarray(a), total)
        out.append(jax.make_array_from_callback(host.shape, sharding, lambda idx, h=host: h[idx]))
    return out, n


def on_mesh(
    fn: Callable,
    logits_fn: Optional[Callable],
    x,
    y=None,
    *,
    key=None,
    mesh: Optional[Mesh] = None,
    devices=None,
    per_point: Sequence[str] = (),
    **kwargs,
):
    """Call ``fn`` with the points axis sharded over ``mesh``.

    ``fn`` is called as ``fn(logits_fn, x, y, key=keys, **kwargs)`` (or
    ``fn(x, y, key=..., **kwargs)`` when ``logits_fn`` is None; ``y`` and
    ``key`` are omitted when None). ``keys`` are the per-point keys
    ``fold_in(key, i)`` for global index ``i``, computed before padding, so
    the result equals the single-device call. Keyword arguments named in
    ``per_point`` (e.g. ``eps`` given per point) are padded and sharded too.
    Every array leaf of the result whose leading axis is the padded batch is
    cut back to ``n``.

    Each device computes ``ceil(n / k)`` rows, the 1-device call ``n``: the
    per-point arithmetic is the same, but XLA:CPU may round a reduction
    differently for another number of rows, so bit-identity with the 1-device
    call is not guaranteed for every shape. :func:`rcurves.pipeline.runner.run_chunked`
    with ``devices=`` gives each device exactly the chunk the 1-device run
    computes, and is bit-identical.

    Example::

        res = on_mesh(attacks.minimal_distance, logits_fn, x, y, key=key,
                      devices=4, norm="linf", eps_max=1.0, search_steps=10, steps=20)
    """
    if mesh is None:
        mesh = make_mesh(devices)
    n = int(np.shape(x)[0])
    arrays = [x]
    if y is not None:
        arrays.append(y)
    if key is not None:
        arrays.append(np.asarray(check_key(key, n)))
    extra = [k for k in per_point if k in kwargs and np.ndim(kwargs[k]) > 0]
    arrays += [kwargs[k] for k in extra]
    sharded, n = shard_points(arrays, mesh)
    it = iter(sharded)
    xs = next(it)
    ys = next(it) if y is not None else None
    ks = next(it) if key is not None else None
    for k in extra:
        kwargs[k] = next(it)
    args = ([] if logits_fn is None else [logits_fn]) + [xs] + ([] if ys is None else [ys])
    if ks is not None:
        kwargs["key"] = ks
    out = fn(*args, **kwargs)
    total = xs.shape[0]

    def cut(a):
        if hasattr(a, "shape") and a.ndim >= 1 and a.shape[0] == total:
            return a[:n]
        return a

    return jax.tree_util.tree_map(cut, out)


def per_shard(fn: Callable) -> Callable:
    """Run a chunk function on each device's shard separately, concurrently.

    ``per_shard(fn)(*arrays)``: the arrays are sharded on their points axis
    (as :func:`rcurves.pipeline.runner.run_chunked` passes them with ``devices=``);
    ``fn(*shard_arrays)`` is called once per device, in a thread whose
    ``jax.default_device`` is that device, on that device's rows only, and the
    outputs (a dict or pytree of arrays with a leading points axis) are
    concatenated on the host in shard order. For functions that mix the points
    of a batch on the host (the sparsity estimators pick the points to search
    and batch them by count), so that each device must see exactly the batch a
    1-device run would: then results are bit-identical. Arrays without a
    multi-device sharding: ``fn`` is called once, unchanged.

    Several hosts (a mesh from ``make_mesh('all')`` after
    ``jax.distributed.initialize``): each host runs ``fn`` on the shards of its
    own devices only, and the outputs are returned as global jax arrays
    sharded like the input (each output must keep the shard's rows), which
    :func:`to_host` (as ``run_chunked`` does) all-gathers.
    """
    import concurrent.futures

    def wrapped(*arrays):
        sh = getattr(arrays[0], "sharding", None)
        if not isinstance(arrays[0], jax.Array) or sh is None or len(sh.device_set) < 2:
            return fn(*arrays)
        order = lambda a: sorted(a.addressable_shards, key=lambda s: s.index[0].start or 0)  # noqa: E731
        shards = [order(a) for a in arrays]

        def run(j):
            dev = shards[0][j].device
            with jax.default_device(dev):
                out = fn(*[s[j].data for s in shards])
                return jax.tree_util.tree_map(np.asarray, out)

        with concurrent.futures.ThreadPoolExecutor(len(shards[0])) as pool:
            outs = list(pool.map(run, range(len(shards[0]))))
        if arrays[0].is_fully_addressable:
            return jax.tree_util.tree_map(lambda *a: np.concatenate(a, axis=0), *outs)
        if not isinstance(sh, NamedSharding):
            raise ValueError(f"per_shard: several hosts need a NamedSharding on the points axis, got {sh!r}")
        out_sharding = NamedSharding(sh.mesh, P(sh.spec[0] if len(sh.spec) else None))
        rows = [s.data.shape[0] for s in shards[0]]

        def assemble(*parts):  # this host's shards of one output -> the global array
            if [p.shape[0] for p in parts] != rows:
                raise ValueError(f"per_shard: fn must return one row per point of its shard "
                                 f"({rows} rows), got {[p.shape for p in parts]}")
            placed = [jax.device_put(p, s.device) for p, s in zip(parts, shards[0])]
            shape = (arrays[0].shape[0],) + parts[0].shape[1:]
            return jax.make_array_from_single_device_arrays(shape, out_sharding, placed)

        return jax.tree_util.tree_map(assemble, *outs)

    return wrapped


__all__ = ["AXIS", "make_mesh", "on_mesh", "per_shard", "resolve_mesh", "shard_points", "to_host"]
