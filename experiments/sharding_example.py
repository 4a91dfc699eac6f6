"""Three ways to spread minimal-distance computation over devices, same answers.

1. ``rcurves.on_mesh``: the toolkit pads the batch, shards the points axis
   over a ``Mesh`` and lets ``jit`` compile one SPMD program.
2. A user's own ``jax.shard_map`` around ``attacks.minimal_distance``.
3. A user's own ``jax.pmap`` (one shard of points per device).

All three pass per-point keys ``fold_in(key, i)`` (``i`` the global index), so
they equal the single-device call. Run on a CPU with simulated devices::

    XLA_FLAGS=--xla_force_host_platform_device_count=4 \
        python experiments/sharding_example.py --out results/sharding

Writes ``sharding.json`` with the max difference of each route from the
single-device result.
"""
from __future__ import annotations

import argparse
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

import attacks
import rcurves


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/sharding")
    ap.add_argument("--n", type=int, default=64)
    args = ap.parse_args(argv)

    ndev = len(jax.devices())
    n = args.n - args.n % ndev  # pmap / shard_map need equal shards (on_mesh pads for you)
    rng = np.random.default_rng(0)
    d = 32
    w = rng.normal(size=(10, d)).astype(np.float32)
    logits_fn = lambda x: x.reshape(x.shape[0], -1) @ w.T  # noqa: E731 - a 10-class linear model
    x = rng.uniform(0, 1, size=(n, d)).astype(np.float32)
    y = np.asarray(jnp.argmax(logits_fn(x), -1))
    key = jax.random.PRNGKey(0)
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(n))
    kw = dict(norm="linf", search_steps=6, steps=10)

    single = np.asarray(attacks.minimal_distance(logits_fn, x, y, key=keys, **kw).distance)

    via_mesh = np.asarray(rcurves.on_mesh(attacks.minimal_distance, logits_fn, x, y, key=key, **kw).distance)

    mesh = Mesh(np.asarray(jax.devices()), ("p",))
    smap = jax.jit(jax.shard_map(
        lambda xx, yy, kk: attacks.minimal_distance(logits_fn, xx, yy, key=kk, **kw).distance,
        mesh=mesh, in_specs=(P("p"), P("p"), P("p")), out_specs=P("p")))
    via_shard_map = np.asarray(smap(x, y, keys))

    pm = jax.pmap(lambda xx, yy, kk: attacks.minimal_distance(logits_fn, xx, yy, key=kk, **kw).distance)
    split = lambda a: np.asarray(a).reshape((ndev, -1) + np.asarray(a).shape[1:])  # noqa: E731
    via_pmap = np.asarray(pm(split(x), split(y), split(keys))).reshape(-1)

    report = {
        "devices": ndev, "n": n,
        "max_abs_diff": {
            "on_mesh": float(np.max(np.abs(via_mesh - single))),
            "shard_map": float(np.max(np.abs(via_shard_map - single))),
            "pmap": float(np.max(np.abs(via_pmap - single))),
        },
        "median_distance": float(np.median(single)),
    }
    print(json.dumps(report, indent=2))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sharding.json"), "w") as fh:
        json.dump(report, fh, indent=2)


if __name__ == "__main__":
    main()
