"""Sharding the points axis over 4 host devices changes nothing (same keys, same bits)."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
import rcurves
from rcurves.pipeline.distributed import make_mesh, on_mesh, shard_points
from tests._models import ball, binary_linear

KEY = jax.random.PRNGKey(0)
needs4 = pytest.mark.skipif(len(jax.devices()) < 4, reason="needs 4 devices (XLA_FLAGS)")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n, d = 10, 12                       # 10 is not a multiple of 4: padding is exercised
    x = rng.uniform(0.2, 0.8, size=(n, d)).astype(np.float32)
    c = np.full(d, 0.5, np.float32)
    f = ball(c, 0.5)
    y = np.asarray(jnp.argmax(f(x), -1))
    return f, x, y


@needs4
def test_minimal_distance_on_4_devices_equals_1(data):
    f, x, y = data
    kw = dict(norm="l2", search_steps=3, steps=6, restarts=2, eps_max=2.0)
    one = attacks.minimal_distance(f, x, y, key=KEY, **kw)
    four = on_mesh(attacks.minimal_distance, f, x, y, key=KEY, devices=4, **kw)
    np.testing.assert_array_equal(np.asarray(four.distance), np.asarray(one.distance))
    np.testing.assert_array_equal(np.asarray(four.x_adv), np.asarray(one.x_adv))
    assert four.distance.shape == (len(x),)


@needs4
def test_cw_and_pgd_on_4_devices_equal_1(data):
    f, x, y = data
    kw = dict(binary_search_steps=2, steps=10, lr=0.05)
    one = attacks.carlini_wagner_l2(f, x, y, key=KEY, **kw)
    four = on_mesh(attacks.carlini_wagner_l2, f, x, y, key=KEY, devices=4, **kw)
    np.testing.assert_array_equal(np.asarray(four.distance), np.asarray(one.distance))
    eps = np.linspace(0.01, 0.1, len(x)).astype(np.float32)
    p1 = attacks.pgd(f, x, y, eps, norm="linf", steps=4, key=KEY)
    p4 = on_mesh(attacks.pgd, f, x, y, key=KEY, devices=4, per_point=("eps",), eps=eps,
                 norm="linf", steps=4)
    np.testing.assert_array_equal(np.asarray(p4), np.asarray(p1))


@needs4
def test_linear_distance_on_4_devices(data):
    _, x, _ = data
    w = np.linspace(-1, 1, x.shape[1]).astype(np.float32)
    one = rcurves.linear_distance(w, 0.1, x, 2)
    four = on_mesh(lambda xx, p: rcurves.linear_distance(w, 0.1, xx, p), None, x, devices=4, p=2)
    np.testing.assert_array_equal(np.asarray(four), np.asarray(one))


@needs4
def test_shard_points_pads_and_places():
    mesh = make_mesh(4)
    (a,), n = shard_points([np.arange(6, dtype=np.float32)], mesh)
    assert n == 6 and a.shape == (8,)
    assert len(a.sharding.device_set) == 4
    np.testing.assert_array_equal(np.asarray(a)[:6], np.arange(6))


def test_make_mesh_rejects_bad_device_counts():
    with pytest.raises(ValueError, match="^devices"):
        make_mesh(0)
    with pytest.raises(ValueError, match="^devices"):
        make_mesh(len(jax.local_devices()) + 1)


@needs4
def test_sharding_example_routes_agree(tmp_path):
    """experiments/sharding_example.py: on_mesh, a user's shard_map and a user's pmap all equal one device."""
    import importlib.util
    import json
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "sharding_example.py"
    spec = importlib.util.spec_from_file_location("sharding_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(["--out", str(tmp_path), "--n", "8"])
    report = json.loads((tmp_path / "sharding.json").read_text())
    assert report["max_abs_diff"] == {"on_mesh": 0.0, "shard_map": 0.0, "pmap": 0.0}


# ---------------------------------------------------------------------------
# run_chunked(devices=4): one chunk per device, bit-identical to one device

from rcurves.pipeline.distributed import per_shard  # noqa: E402
from rcurves.pipeline.runner import DistanceConfig, make_distance_fn, run_chunked  # noqa: E402
from tests._models import multiclass_linear  # noqa: E402

_RNG = np.random.default_rng(7)
_D = 6                                   # a row length at which XLA:CPU rounds differently per row count
_F = multiclass_linear(_RNG.normal(size=(3, _D)), _RNG.normal(size=3) * 0.1)
_X = _RNG.uniform(0.2, 0.8, size=(10, _D)).astype(np.float32)
_Y = np.array(jnp.argmax(_F(_X), -1))
_Y[::4] = (_Y[::4] + 1) % 3              # some misclassified points
_SIGMA = np.stack([_RNG.permutation(_D) for _ in range(10)]).astype(np.int32)
class _Killed(Exception):
    pass


CHUNK = 4                                # 10 points: chunks of 4, 4, 2 -> the last chunk is padded and the
                                         # group of 4 devices gets a filler chunk


def _runner_fns():
    seen = []

    def rec(x):
        seen.append(len(x.sharding.device_set) if hasattr(x, "sharding") else 1)
        return x

    dist = make_distance_fn(_F, DistanceConfig(norm="l2", search_steps=1, steps=2, cw=True,
                                               cw_binary_search_steps=1, cw_steps=2, bounds=(0.0, 1.0)))
    fns = {
        "minimal_distance+cw": lambda x, y, k: dist(rec(x), y, k),
        "pgd": lambda x, y, k: {"x": np.asarray(attacks.pgd(_F, rec(x), y, 0.1, norm="linf", steps=2, key=k))},
        "ddn": lambda x, y, k: attacks.ddn(_F, rec(x), y, key=k, steps=3)._asdict(),
        "fmn": lambda x, y, k: attacks.fmn(_F, rec(x), y, norm="l1", key=k, steps=3)._asdict(),
        "cap_pgd": lambda x, y, k: {"x": attacks.cap_pgd(_F, rec(x), y, 0.3, 1.0 - x, 1.0, steps=2, key=k)},
        "vertex_pgd": lambda x, y, k: {"x": attacks.vertex_pgd(_F, rec(x), y, 0.1, jnp.ones(_D), _SIGMA[0], 3,
                                                               steps=2, key=k)},
        "l2_sparsity": per_shard(lambda x, y, k: rcurves.l2_sparsity_full(
            _F, rec(x), y, 0.3, key=k, n_directions=2, search_steps=2, steps=2)._asdict()),
        "linf_sparsity": per_shard(lambda x, y, k: rcurves.linf_sparsity_full(
            _F, rec(x), y, 0.1, key=k, n_directions=2, search_steps=2, steps=2)._asdict()),
        "linear_distance": lambda x, y, k: {"d": rcurves.linear_distance(np.ones(_D, np.float32), -2.0,
                                                                         rec(x), 2)},
    }
    return fns, seen


@needs4
@pytest.mark.parametrize("name", ["minimal_distance+cw", "pgd", "ddn", "fmn", "cap_pgd", "vertex_pgd",
                                  "l2_sparsity", "linf_sparsity", "linear_distance"])
def test_every_runner_in_run_chunked_on_4_devices_equals_1_bit_for_bit(name, tmp_path):
    fns, seen = _runner_fns()
    one = run_chunked(fns[name], _X, _Y, key=KEY, out_dir=str(tmp_path / "one"), config={},
                      chunk_size=CHUNK, progress=False)
    assert seen == [1, 1, 1]                                 # three chunks, one call each
    seen.clear()
    four = run_chunked(fns[name], _X, _Y, key=KEY, out_dir=str(tmp_path / "four"), config={},
                       chunk_size=CHUNK, progress=False, devices=4)
    # one call: 4 devices, or per_shard's 4 single-device calls (one chunk each)
    assert seen == ([4] if "sparsity" not in name else [1, 1, 1, 1])
    assert set(four) == set(one) and one
    for k in one:
        assert four[k].shape[:1] == (len(_X),)               # padding cut off
        np.testing.assert_array_equal(four[k], one[k], err_msg=f"{name}: {k}")
    if "x" in one:                                           # x_adv rows belong to their own points
        assert not np.array_equal(one["x"][-1], one["x"][-2])


@needs4
def test_run_chunked_resumes_across_device_counts(tmp_path):
    """Started on 4 devices and killed: resumes on 1; started on 1 and killed: resumes on 4. Same bits."""
    fns, _ = _runner_fns()
    fn = fns["minimal_distance+cw"]
    ref = run_chunked(fn, _X, _Y, key=KEY, out_dir=str(tmp_path / "ref"), config={"a": 1}, chunk_size=2,
                      progress=False)
    for first, then in ((4, None), (None, 4)):
        out = str(tmp_path / f"run{first}")
        calls = []

        def dies_on_second_call(x, y, k):
            calls.append(x.shape[0])
            if len(calls) == 2:
                raise _Killed
            return fn(x, y, k)

        with pytest.raises(_Killed):
            run_chunked(dies_on_second_call, _X, _Y, key=KEY, out_dir=out, config={"a": 1}, chunk_size=2,
                        progress=False, devices=first)
        done = sorted(f for f in os.listdir(out) if f.startswith("chunk_"))
        assert len(done) == (4 if first == 4 else 1)        # a call computes one chunk per device
        calls.clear()
        res = run_chunked(dies_on_second_call, _X, _Y, key=KEY, out_dir=out, config={"a": 1}, chunk_size=2,
                          resume=True, progress=False, devices=then)
        # resumed: only the missing chunks (5 chunks of 2 points in all)
        assert calls == ([2] if then is None else [8])
        for k in ref:
            np.testing.assert_array_equal(res[k], ref[k])
        assert json.load(open(os.path.join(out, "manifest.json"))) == \
            json.load(open(tmp_path / "ref" / "manifest.json"))  # the device count is not recorded


@pytest.mark.parametrize("bad", [0, -1, 10**6, 2.5, "two", True, [1, 2]])
def test_run_chunked_rejects_bad_devices_before_doing_anything(bad, tmp_path):
    calls = []
    with pytest.raises(ValueError, match="^devices"):
        run_chunked(lambda *a: calls.append(1), _X, _Y, key=KEY, out_dir=str(tmp_path / "o"), config={},
                    devices=bad, progress=False)
    with pytest.raises(ValueError, match="^devices"):
        run_chunked(lambda *a: calls.append(1), _X, _Y, key=KEY, out_dir=str(tmp_path / "o"), config={},
                    devices=1, mesh=make_mesh(1), progress=False)
    with pytest.raises(ValueError, match="^mesh"):
        run_chunked(lambda *a: calls.append(1), _X, _Y, key=KEY, out_dir=str(tmp_path / "o"), config={},
                    mesh="cpu", progress=False)
    assert calls == [] and not os.path.exists(tmp_path / "o")
