"""Chunked application over arrays, memory maps and iterators equals the one-shot answer."""
import jax
import numpy as np
import pytest

import attacks
import rcurves
from rcurves.streaming import iter_chunks, map_points
from _models import ball

KEY = jax.random.PRNGKey(0)


def test_linear_distance_over_a_memmap_equals_in_memory(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, size=(1000, 20)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    mm = np.load(tmp_path / "x.npy", mmap_mode="r")
    w = rng.normal(size=20).astype(np.float32)
    full = np.asarray(rcurves.linear_distance(w, 0.1, x, 2))
    streamed = map_points(lambda xc: rcurves.linear_distance(w, 0.1, xc, 2), mm, chunk_size=128)
    # XLA may pick a different reduction order for another row count: equal to float32 rounding
    np.testing.assert_allclose(streamed, full, rtol=1e-5, atol=1e-6)
    assert streamed.shape == (1000,)


def test_attack_results_do_not_depend_on_chunk_size():
    rng = np.random.default_rng(1)
    x = rng.uniform(0.2, 0.8, size=(11, 6)).astype(np.float32)
    f = ball(np.full(6, 0.5, np.float32), 0.3)
    y = np.asarray(f(x).argmax(-1))
    kw = dict(norm="l2", search_steps=2, steps=4, eps_max=1.0)
    run = lambda xc, yc, key: attacks.minimal_distance(f, xc, yc, key=key, **kw)
    a = map_points(run, x, y, chunk_size=4, key=KEY)
    b = map_points(run, x, y, chunk_size=11, key=KEY)
    np.testing.assert_array_equal(a.distance, b.distance)
    whole = attacks.minimal_distance(f, x, y, key=KEY, **kw)
    np.testing.assert_array_equal(a.distance, np.asarray(whole.distance))
    assert a.distance.shape == (11,) and a.x_adv.shape == x.shape


def test_iterator_of_chunks_and_callback():
    x = np.arange(10, dtype=np.float32)[:, None]
    seen = []
    out = map_points(lambda xc: xc[:, 0] * 2, iter([(x[:3], None), (x[3:], None)]), chunk_size=4,
                     on_chunk=lambda s, r: seen.append((s, len(r))))
    np.testing.assert_array_equal(out, np.arange(10) * 2)
    assert seen == [(0, 3), (3, 4), (7, 3)]
    starts = [s for s, _, _ in iter_chunks(x, chunk_size=3)]
    assert starts == [0, 3, 6, 9]


def test_bad_arguments():
    with pytest.raises(ValueError, match="^chunk_size"):
        map_points(lambda a: a, np.zeros((3, 1)), chunk_size=0)
    with pytest.raises(ValueError, match="^key"):
        map_points(lambda a, key: a, np.zeros((3, 1)), key=np.zeros(3, np.uint32))
    with pytest.raises(ValueError, match="^y"):
        list(iter_chunks(np.zeros((3, 1)), np.zeros(2), chunk_size=2))
