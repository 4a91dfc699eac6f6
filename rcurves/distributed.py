"""Run any per-point function with its batch axis sharded over devices.

Every attack and estimator in this toolkit treats points independently and
draws a point's randomness from ``fold_in(key, i)`` with ``i`` the point's
*global* index. So sharding the point axis over a ``jax.sharding.Mesh``
changes nothing but where each point is computed: ``on_mesh`` derives the
per-point keys on the host first, pads the batch to a multiple of the device
count (with copies of the first point, whose results are dropped), places the
arrays with a ``NamedSharding`` on the points axis and calls the function,
whose ``jit`` then compiles one SPMD program for all devices.

Several hosts: call ``jax.distributed.initialize()`` first and pass the same
full batch on every host; ``make_mesh()`` then spans ``jax.devices()`` (all
hosts) and the arrays are assembled with ``jax.make_array_from_callback``, so
each host only materialises its own shards on its devices.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from attacks.checks import check_key

AXIS = "points"


def make_mesh(devices: Optional[Sequence[jax.Device] | int] = None) -> Mesh:
    """A 1-D mesh named ``'points'``.

    Args:
      devices: None for every device (all hosts after
        ``jax.distributed.initialize``), an int for the first k local devices,
        or an explicit sequence of devices.
    """
    if devices is None:
        devs = jax.devices()
    elif isinstance(devices, (int, np.integer)):
        avail = jax.local_devices()
        if not 1 <= int(devices) <= len(avail):
            raise ValueError(f"devices: expected 1..{len(avail)} (local devices), got {devices}")
        devs = avail[: int(devices)]
    else:
        devs = list(devices)
        if not devs:
            raise ValueError("devices: expected at least one device")
    return Mesh(np.asarray(devs), (AXIS,))


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


__all__ = ["AXIS", "make_mesh", "on_mesh", "shard_points"]
