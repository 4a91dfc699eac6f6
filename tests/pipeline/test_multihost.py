"""Two simulated hosts (2 processes x 2 CPU devices, jax.distributed over localhost) equal one device.

The test launches this file twice as a script (``_worker``), as processes 0 and 1
of a ``jax.distributed`` job: a 4-device global mesh, two devices per process,
CPU collectives over gloo. Each process runs

  (a) ``on_mesh(attacks.minimal_distance, ..., mesh=make_mesh('all'))`` on 7 points
      (padded to 8: 2 rows per device), and
  (b) ``run_chunked(make_distance_fn(...), ..., devices='all')`` on 11 points in
      chunks of 2 (6 chunks: a full group of 4 and a group of 2 filled with copies;
      the last chunk is padded) into its own out_dir,
  (c) the same run resumed from a copy of that out_dir in which only process 1 lost
      two chunks (both processes must recompute them together: the calls are
      collective), and
  (d) ``run_chunked(per_shard(fn), ..., devices='all')`` (host-side logic per
      device; each process runs its own devices' chunks),

and saves what it got. Both must equal, bit for bit, a 1-process 1-device
``run_chunked`` with the same chunk size and the same fn. For (a) the reference is that run's
``'pgd'`` column too: on_mesh gives each device ceil(7/4) = 2 rows, so every
point is computed in a 2-row batch with its key ``fold_in(key, i)``, exactly as
in a 1-device run in chunks of 2 (a 7-row 1-device call is a different program;
XLA:CPU may round differently for another row count, see ``on_mesh``).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository: rcurves, attacks and tests._models
N_MESH, N_RUN, D, CHUNK = 7, 11, 6, 2
TIMEOUT = 120                      # seconds for both workers together: a hang fails, not blocks CI


def _problem():
    """Model, data and settings shared by the workers and the reference (deterministic)."""
    import jax
    import jax.numpy as jnp
    from tests._models import ball
    from rcurves.pipeline.runner import DistanceConfig

    rng = np.random.default_rng(3)
    x = rng.uniform(0.2, 0.8, size=(N_RUN, D)).astype(np.float32)
    f = ball(np.full(D, 0.5, np.float32), 0.4)
    y = np.array(jnp.argmax(f(x), -1))
    y[5] = 1 - y[5]                # a misclassified point: distance 0
    cfg = DistanceConfig(norm="l2", search_steps=2, steps=3, restarts=1)   # small: compiling dominates
    md_kw = dict(norm=cfg.norm, eps_max=cfg.eps_max, search_steps=cfg.search_steps, steps=cfg.steps,
                 restarts=cfg.restarts, candidates=cfg.candidates, bounds=cfg.bounds)
    return f, x, y, cfg, md_kw, jax.random.PRNGKey(11)


def _worker(pid: int, port: int, out: str) -> None:
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")   # the default in jax 0.10; explicit
    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=pid,
                               initialization_timeout=60)
    import attacks
    import rcurves
    from rcurves.pipeline.distributed import make_mesh, on_mesh, per_shard, to_host
    from rcurves.pipeline.runner import make_distance_fn, run_chunked

    f, x, y, cfg, md_kw, key = _problem()
    meta = {"process_index": jax.process_index(), "process_count": jax.process_count(),
            "devices": len(jax.devices()), "local_devices": len(jax.local_devices())}

    # (a) on_mesh over the 4 global devices
    mesh = make_mesh("all")
    meta["mesh_devices"] = int(mesh.devices.size)
    res = on_mesh(attacks.minimal_distance, f, x[:N_MESH], y[:N_MESH], key=key, mesh=mesh, **md_kw)
    meta["on_mesh_fully_addressable"] = bool(res.distance.is_fully_addressable)
    np.save(os.path.join(out, f"mesh_distance_{pid}.npy"), to_host(res.distance))
    np.save(os.path.join(out, f"mesh_x_adv_{pid}.npy"), to_host(res.x_adv))

    # (b) run_chunked(devices='all'): one chunk per global device per call
    dist = make_distance_fn(f, cfg)
    calls = []

    def fn(xs, ys, ks):
        calls.append({"shape": list(xs.shape), "devices": len(xs.sharding.device_set),
                      "fully_addressable": bool(xs.is_fully_addressable),
                      "local_rows": sorted(int(s.index[0].start) for s in xs.addressable_shards)})
        return dist(xs, ys, ks)

    got = run_chunked(fn, x, y, key=key, out_dir=os.path.join(out, f"run_{pid}"), config={"t": "multihost"},
                      chunk_size=CHUNK, progress=False, devices="all")
    np.savez(os.path.join(out, f"run_returned_{pid}.npz"), **got)
    meta["calls"] = list(calls)

    # (c) resume (a copy of the run) where only process 1 lost chunks 2 and 5 (its host was killed,
    # say): fn's calls are collective, so both processes must recompute them, together, or hang
    run_dir = os.path.join(out, f"resume_{pid}")
    shutil.copytree(os.path.join(out, f"run_{pid}"), run_dir)
    if pid == 1:
        for i in (2, 5):
            os.unlink(os.path.join(run_dir, f"chunk_{i:06d}.npz"))
    calls.clear()
    run_chunked(fn, x, y, key=key, out_dir=run_dir, config={"t": "multihost"}, chunk_size=CHUNK,
                progress=False, resume=True, devices="all")
    meta["resume_calls"] = calls

    # (d) per_shard (host-side logic per device) over both hosts: each runs its own shards
    w = np.linspace(-1, 1, D).astype(np.float32)
    seen = []

    def shard_fn(xs, ys, ks):
        seen.append(int(xs.shape[0]))
        return {"d": rcurves.linear_distance(w, 0.1, xs, 2), "key": np.asarray(ks)}

    run_chunked(per_shard(shard_fn), x, y, key=key, out_dir=os.path.join(out, f"shard_{pid}"),
                config={"t": "per_shard"}, chunk_size=CHUNK, progress=False, devices="all")
    meta["per_shard_rows"] = seen
    with open(os.path.join(out, f"meta_{pid}.json"), "w") as fh:
        json.dump(meta, fh)
    jax.distributed.shutdown()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _launch(out: str):
    port = _free_port()
    env = dict(os.environ)
    env.update(XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    paths = [os.path.join(out, f"log_{i}.txt") for i in range(2)]
    procs = []
    for i, path in enumerate(paths):
        with open(path, "w") as log:            # files, not pipes: a chatty worker cannot block
            procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), str(i), str(port), out],
                                          env=env, stdout=log, stderr=subprocess.STDOUT, cwd=out))
    deadline = time.monotonic() + TIMEOUT
    try:
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
            p.wait()
        tails = [open(path).read()[-3000:] for path in paths]
        pytest.fail(f"2-process jax.distributed run did not finish within {TIMEOUT} s:\n" + "\n---\n".join(tails))
    return procs, [open(path).read() for path in paths]


def test_two_processes_equal_one_device(tmp_path):
    import rcurves
    from rcurves.pipeline.runner import make_distance_fn, run_chunked

    out = str(tmp_path)
    procs, logs = _launch(out)
    for i, (p, log) in enumerate(zip(procs, logs)):
        assert p.returncode == 0, f"process {i} exited with {p.returncode}:\n{log[-4000:]}"

    # the reference: one process, one device, chunks of 2
    f, x, y, cfg, _, key = _problem()
    ref = run_chunked(make_distance_fn(f, cfg), x, y, key=key, out_dir=str(tmp_path / "ref"),
                      config={"t": "multihost"}, chunk_size=CHUNK, progress=False)
    w = np.linspace(-1, 1, D).astype(np.float32)
    shard_ref = run_chunked(lambda xs, ys, ks: {"d": rcurves.linear_distance(w, 0.1, xs, 2), "key": np.asarray(ks)},
                            x, y, key=key, out_dir=str(tmp_path / "shard_ref"), config={"t": "per_shard"},
                            chunk_size=CHUNK, progress=False)
    assert shard_ref["key"].shape == (N_RUN, 2) and len(np.unique(shard_ref["key"], axis=0)) == N_RUN
    d = ref["distance"]
    assert d[5] == 0.0 and np.sum(np.isfinite(d) & (d > 0)) >= 6     # the attack found most distances

    for pid in range(2):
        meta = json.load(open(tmp_path / f"meta_{pid}.json"))
        # really two hosts of a 4-device mesh, the arrays global (not addressable from one process)
        assert meta["process_index"] == pid and meta["process_count"] == 2
        assert meta["devices"] == 4 and meta["local_devices"] == 2 and meta["mesh_devices"] == 4
        assert meta["on_mesh_fully_addressable"] is False
        # run_chunked: 6 chunks -> 2 calls of 4 chunks of 2 rows; this process holds rows of 2 devices
        assert [c["shape"] for c in meta["calls"]] == [[8, D], [8, D]]
        assert all(c["devices"] == 4 and not c["fully_addressable"] for c in meta["calls"])
        assert all(c["local_rows"] == ([0, 2] if pid == 0 else [4, 6]) for c in meta["calls"])

        # (b) run_chunked: bit-identical results (returned and written), files and manifest
        run_dir = tmp_path / f"run_{pid}"
        with np.load(tmp_path / f"run_returned_{pid}.npz") as r, np.load(run_dir / "result.npz") as z:
            assert set(r.files) == set(z.files) == set(ref) == {"distance", "pgd"}
            for k in ref:
                np.testing.assert_array_equal(r[k], ref[k], err_msg=f"process {pid}: {k}")
                np.testing.assert_array_equal(z[k], ref[k], err_msg=f"process {pid}: {k} (file)")
        assert sorted(os.listdir(run_dir)) == sorted(os.listdir(tmp_path / "ref"))
        assert json.load(open(run_dir / "manifest.json")) == json.load(open(tmp_path / "ref" / "manifest.json"))

        # (c) resumed with chunks 2 and 5 missing on process 1 only: one call on both, same bits
        run_dir = tmp_path / f"resume_{pid}"
        assert meta["resume_calls"] == [{"shape": [8, D], "devices": 4, "fully_addressable": False,
                                         "local_rows": [0, 2] if pid == 0 else [4, 6]}]
        assert sorted(os.listdir(run_dir)) == sorted(os.listdir(tmp_path / "ref"))
        with np.load(run_dir / "result.npz") as z:
            for k in ref:
                np.testing.assert_array_equal(z[k], ref[k], err_msg=f"process {pid}, resumed: {k}")

        # (d) per_shard: this process ran its 2 devices' chunks (2 rows each) in each of the 2 calls
        assert meta["per_shard_rows"] == [2, 2, 2, 2]
        with np.load(tmp_path / f"shard_{pid}" / "result.npz") as z:
            np.testing.assert_array_equal(z["d"], shard_ref["d"], err_msg=f"process {pid}: per_shard")
            np.testing.assert_array_equal(z["key"], shard_ref["key"], err_msg=f"process {pid}: per_shard")

        # (a) on_mesh: 2 rows per device, as in the 1-device run in chunks of 2
        md = np.load(tmp_path / f"mesh_distance_{pid}.npy")
        assert md.shape == (N_MESH,)
        np.testing.assert_array_equal(md, ref["pgd"][:N_MESH], err_msg=f"process {pid}: on_mesh")
        x_adv = np.load(tmp_path / f"mesh_x_adv_{pid}.npy")
        assert x_adv.shape == (N_MESH, D)
        # x_adv rows belong to their own points: the re-measured distance is what was reported
        found = np.isfinite(md) & (md > 0)
        np.testing.assert_allclose(np.linalg.norm(x_adv[found] - x[:N_MESH][found], axis=1), md[found],
                                   rtol=1e-5)


if __name__ == "__main__":
    _worker(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
