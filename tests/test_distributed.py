"""Sharding the points axis over 4 host devices changes nothing (same keys, same bits)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
import rcurves
from rcurves.distributed import make_mesh, on_mesh, shard_points
from _models import ball, binary_linear

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

    path = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "sharding_example.py"
    spec = importlib.util.spec_from_file_location("sharding_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(["--out", str(tmp_path), "--n", "8"])
    report = json.loads((tmp_path / "sharding.json").read_text())
    assert report["max_abs_diff"] == {"on_mesh": 0.0, "shard_map": 0.0, "pmap": 0.0}
