"""Chunked application over arrays, memory maps and iterators equals the one-shot answer."""

import jax
import numpy as np
import pytest

import attacks
import rcurves
from rcurves.data.streaming import iter_chunks, map_points
from tests._models import ball
from tests._rss import random_npy, run_child

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
    # One feature: XLA:CPU may round a reduction over features differently
    # for different batch sizes (an FMA in the vectorised loop, none in its
    # scalar remainder), which would move a point at the boundary by an ulp.
    # With d = 1 every operation is elementwise, so the bits must agree; two
    # restarts make the per-point keys matter.
    rng = np.random.default_rng(1)
    x = rng.uniform(0.25, 0.75, size=(11, 1)).astype(np.float32)
    f = ball(np.full(1, 0.5, np.float32), 0.3)
    y = np.asarray(f(x).argmax(-1))
    kw = dict(norm="l2", search_steps=2, steps=4, eps_max=1.0, restarts=2)
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


# ---------------------------------------------------------------------------
# memory maps: bounded peak memory, whatever the file size

_RSS_CHILD = r"""
import json, sys
import numpy as np
import rcurves
from rcurves.data.streaming import map_points

path, how = sys.argv[1], sys.argv[2]
x = np.load(path, mmap_mode="r")
w = np.linspace(-1, 1, x.shape[1]).astype(np.float32)
rcurves.exact.linear._STREAM_BYTES = 1024 * 784 * 4   # 1024-row chunks, like map_points below
if how == "map_points":
    run = lambda a: map_points(lambda xc: rcurves.linear_distance(w, 0.1, xc, 2), a, chunk_size=1024)
else:                                  # linear_distance itself on the memory map
    run = lambda a: rcurves.linear_distance(w, 0.1, a, 2)
first = np.asarray(run(x[:1024]))      # compile and allocate for one chunk, then measure the rest
before = hwm_mb()
d = np.asarray(run(x))
print(json.dumps({"growth_mb": hwm_mb() - before, "n": int(d.shape[0]),
                  "first_equal": bool(np.array_equal(d[:1024], first))}))
"""


@pytest.mark.parametrize("how", ["map_points", "linear_distance"])
def test_streaming_a_memory_map_keeps_peak_memory_bounded_by_the_chunk(tmp_path, how):
    """The pages of a memory map that were read count in RSS until released: reading a
    100 MB file in 3 MB chunks must not raise the peak by anything close to the file size
    (before the pages were released, it grew by ~100 MB here)."""
    rows = 32768
    path = random_npy(str(tmp_path / "x.npy"), rows)  # 100 MB of float32 MNIST-sized rows
    out = run_child(_RSS_CHILD, path, how)
    assert out["n"] == rows and out["first_equal"]
    assert out["growth_mb"] < 30, out             # file: 100 MB; one chunk: 3.2 MB


@pytest.mark.accelerator("tf32")
def test_linear_distance_of_a_memory_map_equals_the_in_memory_answer(tmp_path, monkeypatch):
    monkeypatch.setattr(rcurves.exact.linear, "_STREAM_BYTES", 1000 * 12 * 4)   # 3 chunks, the last padded
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, size=(2500, 12)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    mm = np.load(tmp_path / "x.npy", mmap_mode="r")
    W, b = rng.normal(size=(3, 12)).astype(np.float32), rng.normal(size=3).astype(np.float32)
    y = np.argmax(x @ W.T + b, axis=1)
    y[::5] = (y[::5] + 1) % 3
    w = W[0]
    for args, kw in (((w, 0.1), {}), ((w, 0.1), {"y": (x @ w + 0.1 > 0).astype(np.int32)}), ((W, b), {"y": y})):
        for p in (1, 2, np.inf):
            streamed = np.asarray(rcurves.linear_distance(*args, mm, p, **kw))
            full = np.asarray(rcurves.linear_distance(*args, x, p, **kw))
            np.testing.assert_allclose(streamed, full, rtol=1e-6, atol=0)
    bad = np.load(tmp_path / "x.npy", mmap_mode="r+")
    bad[1700, 3] = np.nan                          # in the second chunk of the stream
    bad.flush()
    with pytest.raises(ValueError, match=r"^x"):
        rcurves.linear_distance(w, 0.1, np.load(tmp_path / "x.npy", mmap_mode="r"), 2)
    with pytest.raises(ValueError, match=r"^y"):
        rcurves.linear_distance(W, b, mm, 2)      # multi-class needs labels
    with pytest.raises(ValueError, match=r"^x"):
        rcurves.linear_distance(np.ones(5, np.float32), 0.0, mm, 2)


def test_pages_of_a_copy_on_write_map_are_kept(tmp_path):
    """madvise(DONTNEED) would discard a private map's in-memory changes: those maps are
    left alone, so the chunks see the caller's edits."""
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    np.save(tmp_path / "x.npy", x)
    cow = np.load(tmp_path / "x.npy", mmap_mode="c")
    cow[:] = -1.0                                 # private edit, not in the file
    out = map_points(lambda a: a[:, 0], cow, chunk_size=3)
    np.testing.assert_array_equal(out, np.full(10, -1.0))
    np.testing.assert_array_equal(np.asarray(cow), np.full((10, 4), -1.0))
    shared = np.load(tmp_path / "x.npy", mmap_mode="r")
    np.testing.assert_array_equal(map_points(lambda a: a[:, 0], shared, chunk_size=3), x[:, 0])
    np.testing.assert_array_equal(np.asarray(shared), x)   # pages released, data re-read intact
