"""Chunked, atomic, resumable per-point runs."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from tests._models import exact_multiclass, multiclass_linear
from tests._rss import random_npy, run_child
from rcurves.pipeline.runner import (
    DistanceConfig,
    RunnerError,
    chunk_path,
    load_result,
    make_distance_fn,
    point_keys,
    run_chunked,
)

KEY = jax.random.PRNGKey(5)


class Killed(Exception):
    pass


def key_fn(calls):
    """A per-point function of the key only (plus x): records the chunks it was called on."""

    def fn(x, y, keys):
        calls.append(np.asarray(x[:, 0]).copy())
        u = jax.vmap(lambda k: jax.random.uniform(k))(keys)
        return {"u": np.asarray(u), "x0": np.asarray(x[:, 0]), "y": np.asarray(y)}

    return fn


def data(n=23, d=3):
    rng = np.random.default_rng(0)
    return rng.random((n, d)).astype(np.float32), rng.integers(0, 3, n)


def full_and_killed_runs(x, y, tmp_path):
    """An uninterrupted run of ``key_fn`` and one killed after 2 of its 5 chunks.

    Returns ``(full results, out_dir of the killed run, calls, key_fn)``; ``calls``
    is cleared, ready to record what a resume recomputes.
    """
    full = run_chunked(key_fn([]), x, y, key=KEY, out_dir=str(tmp_path / "full"), config={"a": 1},
                       chunk_size=5, progress=False)
    out = str(tmp_path / "run")
    calls = []
    inner = key_fn(calls)

    def dies_after_two(x_, y_, k_):
        if len(calls) == 2:
            raise Killed
        return inner(x_, y_, k_)

    with pytest.raises(Killed):
        run_chunked(dies_after_two, x, y, key=KEY, out_dir=out, config={"a": 1}, chunk_size=5, progress=False)
    assert sorted(f for f in os.listdir(out) if f.startswith("chunk_")) == ["chunk_000000.npz", "chunk_000001.npz"]
    calls.clear()
    return full, out, calls, inner


def test_results_do_not_depend_on_the_chunk_size(tmp_path):
    x, y = data()
    res = [run_chunked(key_fn([]), x, y, key=KEY, out_dir=str(tmp_path / f"c{c}"), config={"a": 1},
                       chunk_size=c, progress=False) for c in (1, 5, 23, 64)]
    for r in res[1:]:
        for k in r:
            np.testing.assert_array_equal(r[k], res[0][k])
    np.testing.assert_array_equal(res[0]["x0"], x[:, 0])
    np.testing.assert_array_equal(res[0]["y"], y)
    # point i used fold_in(key, i), like attacks.checks.check_key for a single key
    expect = jax.vmap(lambda k: jax.random.uniform(k))(attacks.checks.check_key(KEY, len(x)))
    np.testing.assert_array_equal(res[0]["u"], np.asarray(expect))


def test_an_interrupted_run_resumes_without_recomputing_and_gives_identical_results(tmp_path):
    x, y = data()
    full, out, calls, inner = full_and_killed_runs(x, y, tmp_path)
    assert not os.path.exists(os.path.join(out, "result.npz"))
    res = run_chunked(inner, x, y, key=KEY, out_dir=out, config={"a": 1}, chunk_size=5, resume=True,
                      progress=False)
    assert len(calls) == 3                                  # chunks 2, 3, 4 only
    np.testing.assert_array_equal(calls[0], x[10:15, 0])
    for k in full:
        np.testing.assert_array_equal(res[k], full[k])
        np.testing.assert_array_equal(load_result(out)[k], full[k])


def test_resume_refuses_a_different_configuration_data_or_chunking(tmp_path):
    x, y = data()
    out = str(tmp_path / "run")
    run_chunked(key_fn([]), x, y, key=KEY, out_dir=out, config={"eps": 1}, chunk_size=5, progress=False)
    with pytest.raises(RunnerError, match="config field 'eps'"):
        run_chunked(key_fn([]), x, y, key=KEY, out_dir=out, config={"eps": 2}, chunk_size=5, resume=True,
                    progress=False)
    x2 = x.copy()
    x2[3, 1] += 0.25
    with pytest.raises(RunnerError, match="data differs"):
        run_chunked(key_fn([]), x2, y, key=KEY, out_dir=out, config={"eps": 1}, chunk_size=5, resume=True,
                    progress=False)
    with pytest.raises(RunnerError, match="chunk_size"):
        run_chunked(key_fn([]), x, y, key=KEY, out_dir=out, config={"eps": 1}, chunk_size=4, resume=True,
                    progress=False)
    with pytest.raises(RunnerError, match="key"):
        run_chunked(key_fn([]), x, y, key=jax.random.PRNGKey(6), out_dir=out, config={"eps": 1}, chunk_size=5,
                    resume=True, progress=False)
    # the refused attempts left the finished run intact
    assert json.load(open(os.path.join(out, "manifest.json")))["config"] == {"eps": 1}
    assert len([f for f in os.listdir(out) if f.startswith("chunk_")]) == 5


def test_restart_policy_and_fresh_runs(tmp_path):
    x, y = data()
    out = str(tmp_path / "run")
    run_chunked(key_fn([]), x, y, key=KEY, out_dir=out, config={"eps": 1}, chunk_size=5, progress=False)
    calls = []
    run_chunked(key_fn(calls), x, y, key=KEY, out_dir=out, config={"eps": 2}, chunk_size=5, resume=True,
                on_mismatch="restart", progress=False)
    assert len(calls) == 5 and json.load(open(os.path.join(out, "manifest.json")))["config"] == {"eps": 2}
    calls.clear()
    run_chunked(key_fn(calls), x, y, key=KEY, out_dir=out, config={"eps": 2}, chunk_size=5, resume=True,
                on_mismatch="restart", progress=False)
    assert calls == []                                      # a matching finished run is reused whole
    run_chunked(key_fn(calls), x, y, key=KEY, out_dir=out, config={"eps": 2}, chunk_size=5, progress=False)
    assert len(calls) == 5                                  # without resume everything is recomputed


def test_a_damaged_chunk_is_recomputed(tmp_path):
    x, y = data()
    out = str(tmp_path / "run")
    full = run_chunked(key_fn([]), x, y, key=KEY, out_dir=out, config={}, chunk_size=5, progress=False)
    with open(chunk_path(out, 2), "wb") as f:
        f.write(b"PK\x03\x04 truncated")
    calls = []
    res = run_chunked(key_fn(calls), x, y, key=KEY, out_dir=out, config={}, chunk_size=5, resume=True,
                      progress=False)
    assert len(calls) == 1
    np.testing.assert_array_equal(res["u"], full["u"])


def test_the_last_chunk_is_padded_to_a_fixed_shape(tmp_path):
    x, y = data(n=12)
    shapes = []

    def fn(xc, yc, kc):
        shapes.append(xc.shape)
        return {"s": np.asarray(jnp.sum(xc, axis=1))}

    res = run_chunked(fn, x, y, key=KEY, out_dir=str(tmp_path), config={}, chunk_size=5, progress=False)
    assert shapes == [(5, 3)] * 3
    np.testing.assert_allclose(res["s"], x.sum(1), rtol=1e-6)


def test_point_keys_are_fold_in_of_the_global_index():
    k = point_keys(KEY, [0, 7, 2])
    assert np.array_equal(np.asarray(k[1]), np.asarray(jax.random.fold_in(KEY, 7)))


def test_distances_of_a_linear_model_bound_the_exact_ones_from_above(tmp_path):
    """Every distance is a verified adversarial: >= the exact distance, and close to it."""
    rng = np.random.default_rng(2)
    W, b = rng.normal(size=(3, 6)), rng.normal(size=3) * 0.1
    f = multiclass_linear(W, b)
    x = rng.random((20, 6)).astype(np.float32) * 0.5 + 0.25
    y = np.asarray(np.argmax(x @ W.T + b, axis=1))
    y[:2] = (y[:2] + 1) % 3                                 # two misclassified points -> 0
    for cfg in (DistanceConfig(norm="linf", search_steps=6, steps=10, bounds=None, eps_max=2.0),
                DistanceConfig(norm="l2", search_steps=6, steps=10, bounds=None, eps_max=4.0, cw=True,
                               cw_binary_search_steps=3, cw_steps=20)):
        res = run_chunked(make_distance_fn(f, cfg), x, y, key=KEY, out_dir=str(tmp_path / cfg.norm),
                          config=cfg.to_dict(), chunk_size=8, progress=False)
        exact = exact_multiclass(W, b, x, y, cfg.norm)
        d = res["distance"]
        assert np.all(d[:2] == 0)
        assert np.all(d >= exact * (1 - 1e-5))
        assert np.median(d[2:] / exact[2:]) < 1.02
        expect = res["pgd"] if not cfg.cw else np.minimum(res["pgd"], res["cw"])
        np.testing.assert_array_equal(d, expect)


def test_points_another_norm_beats_get_the_escalation_searches_and_the_result_is_kept(tmp_path):
    """``escalate_beaten``: where another norm's adversarial (``upper``) beats a point's adaptive distance by
    more than ``rtol``, the adaptive attack runs again there with that bound, and its own re-checked
    adversarial replaces the distance; other points are untouched, and the second run is kept and reused."""
    from rcurves.pipeline.runner import CROSS_FILE, escalate_beaten

    rng = np.random.default_rng(3)
    W, b = rng.normal(size=(3, 6)), rng.normal(size=3) * 0.1
    f = multiclass_linear(W, b)
    x = rng.random((12, 6)).astype(np.float32) * 0.5 + 0.25
    y = np.asarray(np.argmax(x @ W.T + b, axis=1))
    y[0] = (y[0] + 1) % 3                                   # misclassified: distance 0, never touched
    cfg = DistanceConfig(norm="l2", bounds=None, eps_max=4.0)
    assert cfg.adaptive
    out = str(tmp_path / "l2")
    res = run_chunked(make_distance_fn(f, cfg), x, y, key=KEY, out_dir=out, config=cfg.to_dict(), chunk_size=6,
                      progress=False)
    exact = exact_multiclass(W, b, x, y, "l2")
    assert not res["escalated"].any()
    beaten = np.zeros(12, bool)
    beaten[[2, 5, 9, 10]] = True
    # a weak search there (1.5x the distance found), and another norm's adversarial within 1% of the exact one;
    # point 10 was escalated by the first run already: it had the searches and is left alone
    res["pgd"][beaten] *= 1.5
    res["distance"][beaten] *= 1.5
    res["escalated"][10] = 1.0
    upper = np.where(beaten, 1.01 * exact, np.inf)
    upper[0] = 0.0
    before = {k: v.copy() for k, v in res.items()}
    escalate_beaten(f, cfg, x, y, KEY, res, upper, run_dir=out, chunk=4)
    rerun = beaten.copy()
    rerun[10] = False
    d = res["pgd"]
    assert np.all(d[rerun] < before["pgd"][rerun] / 1.4)                    # lowered
    assert np.all(d[rerun] >= exact[rerun] * (1 - 1e-5))                     # never below the exact distance
    np.testing.assert_allclose(d[rerun], exact[rerun], rtol=0.02)            # Lemma 1: the search is exact
    np.testing.assert_array_equal(res["distance"], np.minimum(before["distance"], d))
    assert np.all(res["escalated"][rerun] == 1)
    # charged what the second run spent: its own (fresh) default search and the probe; that search came within
    # rtol of the bound (it is exact here), so the bound did not make it unsure again: no escalation search
    from attacks.adaptive import AdaptiveConfig
    from attacks.minimal import search_config, search_gradients
    spent = search_gradients(search_config("l2", 3), 3) + AdaptiveConfig().probe_gradients("l2", 3)
    np.testing.assert_array_equal(res["gradients"][rerun], before["gradients"][rerun] + spent)
    for k in ("pgd", "distance", "gradients", "escalated"):
        np.testing.assert_array_equal(res[k][~rerun], before[k][~rerun])
    assert os.path.exists(os.path.join(out, CROSS_FILE))

    def boom(x_):
        raise AssertionError("recomputed")

    again = {k: v.copy() for k, v in before.items()}
    escalate_beaten(boom, cfg, x, y, KEY, again, upper, run_dir=out, chunk=4)     # kept: the model is never run
    for k in ("pgd", "distance", "gradients", "escalated"):
        np.testing.assert_array_equal(again[k], res[k])
    # another bound is another question: recomputed
    moved = upper.copy()
    moved[2] *= 0.99
    with pytest.raises(ValueError, match="recomputed"):
        escalate_beaten(boom, cfg, x, y, KEY, {k: v.copy() for k, v in before.items()}, moved, run_dir=out, chunk=4)
    # nothing beaten, or not the adaptive attack: no-ops
    same = {k: v.copy() for k, v in before.items()}
    escalate_beaten(boom, cfg, x, y, KEY, same, np.full(12, np.inf), run_dir=out)
    escalate_beaten(boom, DistanceConfig(norm="l2", adaptive=False, bounds=None, eps_max=4.0), x, y, KEY, same,
                    upper, run_dir=out)
    for k in same:
        np.testing.assert_array_equal(same[k], before[k])


def test_the_second_run_starts_at_a_multiple_of_the_other_norms_bound(tmp_path, monkeypatch):
    """``escalate_beaten`` searches from ``CROSS_RADIUS * upper`` (a ball the other norm's adversarial shows to
    hold an adversarial), capped by the run's ``eps_max``, not from ``eps_max`` itself; padding repeats it."""
    import attacks
    from rcurves.pipeline.runner import CROSS_RADIUS, escalate_beaten

    rng = np.random.default_rng(4)
    W, b = rng.normal(size=(3, 6)), rng.normal(size=3) * 0.1
    f = multiclass_linear(W, b)
    x = rng.random((8, 6)).astype(np.float32) * 0.5 + 0.25
    y = np.asarray(np.argmax(x @ W.T + b, axis=1))
    exact = exact_multiclass(W, b, x, y, "l2")
    cfg = DistanceConfig(norm="l2", bounds=None, eps_max=4.0)
    res = {"pgd": 2.0 * exact, "distance": 2.0 * exact, "gradients": np.zeros(8), "escalated": np.zeros(8)}
    upper = np.full(8, np.inf)
    upper[[1, 4, 6]] = 1.01 * exact[[1, 4, 6]]
    upper[6] = 3.9              # beaten, but its multiple is above the run's eps_max: capped
    res["pgd"][6] = res["distance"][6] = 5.0
    seen = []
    real = attacks.adaptive_distance

    def spy(fn, xs, ys, **kw):
        seen.append(np.asarray(kw["eps_max"], np.float64))
        return real(fn, xs, ys, **kw)

    monkeypatch.setattr(attacks, "adaptive_distance", spy)
    escalate_beaten(f, cfg, x, y, KEY, res, upper, run_dir=None, chunk=4)
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], [CROSS_RADIUS * upper[1], CROSS_RADIUS * upper[4], 4.0, 4.0], rtol=1e-6)
    assert np.all(res["pgd"][[1, 4]] >= exact[[1, 4]] * (1 - 1e-5))              # never below the exact distance
    np.testing.assert_allclose(res["pgd"][[1, 4]], exact[[1, 4]], rtol=0.02)     # and found from the smaller ball
    # a bound of 0 (another norm's run saw the point misclassified) leaves no ball: the run's own radius
    seen.clear()
    res0 = {"pgd": 2.0 * exact, "distance": 2.0 * exact, "gradients": np.zeros(8), "escalated": np.zeros(8)}
    zero = np.full(8, np.inf)
    zero[3] = 0.0
    escalate_beaten(f, cfg, x, y, KEY, res0, zero, run_dir=None, chunk=4)
    np.testing.assert_allclose(seen[0], [4.0] * 4)
    assert res0["pgd"][3] >= exact[3] * (1 - 1e-5)


def test_distance_config_validation():
    with pytest.raises(ValueError, match="cw"):
        DistanceConfig(norm="linf", cw=True)
    with pytest.raises(ValueError, match="norm"):
        DistanceConfig(norm="l3")
    with pytest.raises(ValueError, match="steps"):
        DistanceConfig(steps=0)
    with pytest.raises(ValueError, match="gradients"):
        DistanceConfig(gradients=0)
    with pytest.raises(ValueError, match="gradients: a budget replaces steps"):
        DistanceConfig(gradients=100, steps=5)
    with pytest.raises(ValueError, match="ensemble"):
        DistanceConfig(ensemble=True, restarts=2)


def test_the_adaptive_attack_is_the_default_unless_a_budget_is_fixed():
    """``adaptive=None`` resolves when constructed: adaptive for the default schedule, fixed as soon as a
    schedule, a budget, candidates or the ensemble is given; asking for both is a ValueError naming it."""
    assert DistanceConfig().adaptive is True and DistanceConfig(norm="l2", cw=True).adaptive is True
    for kw in (dict(steps=5), dict(gradients=100), dict(ensemble=True), dict(candidates=2), dict(polish_steps=0)):
        assert DistanceConfig(**kw).adaptive is False, kw
        with pytest.raises(ValueError, match="adaptive: .*cannot be combined"):
            DistanceConfig(adaptive=True, **kw)
    assert DistanceConfig(adaptive=False).adaptive is False
    assert DistanceConfig().to_dict()["adaptive"] is True       # part of a run's manifest: caches follow it
    with pytest.raises(ValueError, match="adaptive"):
        DistanceConfig(adaptive="yes")


def test_ensemble_distances_in_a_run(tmp_path):
    """``ensemble=True``: each chunk's distances are ``attacks.ensemble``'s
    with the default members for the budget and the points' own keys; every
    one re-checked and never below the exact distance."""
    from attacks.ensemble import default_attacks
    from rcurves.pipeline.runner import point_keys
    rng = np.random.default_rng(4)
    W, b = rng.normal(size=(5, 6)), rng.normal(size=5) * 0.1
    f = multiclass_linear(W, b)
    x = rng.random((12, 6)).astype(np.float32) * 0.5 + 0.25
    y = np.asarray(np.argmax(x @ W.T + b, axis=1))
    cfg = DistanceConfig(norm="linf", ensemble=True, gradients=600, bounds=None, eps_max=2.0)
    res = run_chunked(make_distance_fn(f, cfg), x, y, key=KEY, out_dir=str(tmp_path / "ens"),
                      config=cfg.to_dict(), chunk_size=6, progress=False)
    direct = attacks.ensemble(f, x, y, norm="linf", key=point_keys(KEY, np.arange(12)), bounds=None, eps_max=2.0,
                              attacks=default_attacks("linf", 600, 5))
    # chunks of 6 against one batch of 12: equal up to XLA's batch-size-dependent float rounding
    np.testing.assert_allclose(res["distance"], np.asarray(direct.distance), rtol=1e-4)
    exact = exact_multiclass(W, b, x, y, "linf")
    assert np.all(res["distance"] >= exact * (1 - 1e-5))
    assert np.median(res["distance"] / exact) < 1.01


def test_search_schedule_defaults_and_budget():
    from attacks.minimal import budget_schedule
    from rcurves.pipeline.runner import search_schedule

    x = jnp.zeros((3, 6))
    ten = lambda xb: jnp.zeros((xb.shape[0], 10))   # noqa: E731
    two = lambda xb: jnp.zeros((xb.shape[0], 2))    # noqa: E731
    # No budget: everything left to minimal_distance (it decides by the class count).
    assert search_schedule(ten, x, DistanceConfig(norm="l2")) == dict.fromkeys(
        ("search_steps", "steps", "restarts", "polish_steps"))
    # A budget: the default schedule of the model's class count, scaled; the
    # gradient count it spends is within one lane-round of the budget.
    for fn, n_classes in ((ten, 10), (two, 2)):
        kw = search_schedule(fn, x, DistanceConfig(norm="linf", gradients=120))
        assert kw == budget_schedule("linf", 120, n_classes)
        from attacks.minimal import search_config, search_gradients
        spent = search_gradients(search_config("linf", n_classes, **kw), n_classes)   # the ranking included
        assert abs(spent - 120) <= (1 + kw["search_steps"]) * kw["restarts"]
    assert search_schedule(ten, x, DistanceConfig(norm="linf", gradients=120))["restarts"] == 4
    assert search_schedule(two, x, DistanceConfig(norm="linf", gradients=120))["restarts"] == 1
    with pytest.raises(ValueError, match="chunk_size"):
        run_chunked(key_fn([]), *data(), key=KEY, out_dir="/tmp/unused-rcurves", config={}, chunk_size=0)


# ---------------------------------------------------------------------------
# SIGKILL at seeded-random points (a separate process each time), then resume

_KILL_CHILD = r"""
import os, sys, time
sys.path.insert(0, sys.argv[4])
import numpy as np
import jax, jax.numpy as jnp
from rcurves.pipeline import runner
from tests._models import multiclass_linear

out_dir, mode, arg = sys.argv[1], sys.argv[2], int(sys.argv[3])
say = lambda msg: print(msg, flush=True)
rng = np.random.default_rng(3)
W, b = rng.normal(size=(3, 5)), rng.normal(size=3) * 0.1
x = rng.random((62, 5)).astype(np.float32)
y = np.argmax(x @ W.T + b, axis=1)
y[::7] = (y[::7] + 1) % 3                                   # some misclassified points (distance 0)
cfg = runner.DistanceConfig(norm="linf", search_steps=2, steps=3, bounds=None, eps_max=2.0)
fn = runner.make_distance_fn(multiclass_linear(W, b), cfg)
key = jax.random.PRNGKey(11)
fn(jnp.asarray(x[:4]), jnp.asarray(y[:4]), runner.point_keys(key, range(4)))  # compile before 'ready'

writes = [0]
real_write, real_fsync = runner.atomic_write_bytes, os.fsync
pause_in_fsync = [False]

def fsync(fd):                                  # inside atomic_write_bytes: temp file written, not renamed
    real_fsync(fd)
    if pause_in_fsync[0] and ".tmp-" in os.readlink(f"/proc/self/fd/{fd}"):
        say("pause")
        time.sleep(120)

def write(path, data):
    chunk = os.path.basename(path).startswith("chunk_")
    if chunk and mode == "write" and writes[0] == arg:
        pause_in_fsync[0] = True
    real_write(path, data)
    if chunk:
        writes[0] += 1
        say("done " + os.path.basename(path))
        if mode == "chunks" and writes[0] == arg:
            say("pause")
            time.sleep(120)

os.fsync = fsync
runner.atomic_write_bytes = write
say("ready")
runner.run_chunked(fn, x, y, key=key, out_dir=out_dir, config=cfg.to_dict(), chunk_size=4,
                   resume=True, progress=False)
say("finished")
"""


def _launch(out_dir, mode, arg, wall, env, timeout=90):
    """Run the child until it finishes (returns 0) or is SIGKILLed at its kill point (returns -9).

    ``mode`` 'chunks': killed after ``arg`` newly written chunks; 'write': killed
    inside the write of new chunk number ``arg`` (temp file complete, not yet
    renamed); 'wall': killed ``wall`` seconds after it is ready, wherever it is;
    'none': left to finish.
    """
    import queue
    import signal
    import subprocess
    import sys
    import threading
    import time

    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository: tests._models
    proc = subprocess.Popen([sys.executable, "-c", _KILL_CHILD, out_dir, mode, str(arg), here],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l.strip()) for l in proc.stdout] + [lines.put(None)],
                     daemon=True).start()
    deadline, kill_at = time.time() + timeout, None
    try:
        while True:
            try:
                line = lines.get(timeout=0.01)
            except queue.Empty:
                line = ""
            if line is None:
                break                                           # stdout closed: the child exited
            if line == "ready" and mode == "wall":
                kill_at = time.time() + wall
            if line == "pause" or (kill_at is not None and time.time() >= kill_at):
                proc.send_signal(signal.SIGKILL)
                break
            assert time.time() < deadline, "child hung"
    finally:
        rc = proc.wait(timeout=30)
    if rc not in (0, -signal.SIGKILL):
        raise AssertionError(proc.stderr.read())
    return rc


def _chunk_files(out_dir):
    return sorted(f for f in os.listdir(out_dir) if f.startswith("chunk_") and f.endswith(".npz"))


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_sigkill_at_random_points_then_resume_equals_an_uninterrupted_run(tmp_path, seed):
    """Kill a real process (SIGKILL) at seeded-random points: after a random number of
    finished chunks, inside a chunk's atomic write, and at random wall times; resume until
    done. The result is bit-identical to an uninterrupted run, every point index appears in
    exactly one chunk, finished chunks are never rewritten, the manifest stays intact and
    leftover temporary files are never taken for chunks."""
    import time

    n, chunk, n_chunks = 62, 4, 16
    env = dict(os.environ, _RCURVES_CHUNK_DELAY="0.03",
               JAX_COMPILATION_CACHE_DIR=str(tmp_path.parent / "jax-cache-sigkill"),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    clean = str(tmp_path / "clean")
    assert _launch(clean, "none", 0, None, env) == 0
    reference = load_result(clean)
    assert reference["distance"].shape == (n,) and np.isfinite(reference["distance"]).all()
    manifest = json.load(open(os.path.join(clean, "manifest.json")))

    rng = np.random.default_rng(seed)
    plan = [("chunks", int(rng.integers(1, 4)), None), ("write", int(rng.integers(0, 3)), None),
            ("wall", 0, float(rng.uniform(0.0, 0.25))), ("wall", 0, float(rng.uniform(0.0, 0.25)))]
    plan = [plan[i] for i in rng.permutation(len(plan))] + [("none", 0, None)]
    out = str(tmp_path / "killed")
    kills, seen = 0, {}
    for mode, arg, wall in plan:
        t0 = time.time_ns()
        rc = _launch(out, mode, arg, wall, env)
        if rc == 0:
            break
        kills += 1
        done = _chunk_files(out)
        # finished chunks survive, untouched; each is complete and holds its own indices
        assert set(seen) <= set(done)
        for f in done:
            i = int(f[6:12])
            st = os.stat(os.path.join(out, f))
            if f in seen:
                assert st.st_mtime_ns == seen[f], f"{f} was rewritten after it was finished"
            else:
                assert st.st_mtime_ns >= t0 - 10**9
            seen[f] = st.st_mtime_ns
            with np.load(os.path.join(out, f)) as z:
                np.testing.assert_array_equal(z["_index"], np.arange(i * chunk, min(n, (i + 1) * chunk)))
                for k in reference:
                    np.testing.assert_array_equal(z[k], reference[k][i * chunk:(i + 1) * chunk])
        assert json.load(open(os.path.join(out, "manifest.json"))) == manifest
        assert not os.path.exists(os.path.join(out, "result.npz"))
        if mode == "write":
            # killed between writing the temp file and renaming it: the temp file is left
            # behind, its chunk is not there, and it is not taken for one
            temps = [f for f in os.listdir(out) if f.startswith(".tmp-")
                     and os.stat(os.path.join(out, f)).st_mtime_ns >= t0]
            assert len(temps) == 1 and "-chunk_" in temps[0], temps
            assert temps[0].split("-", 2)[-1] not in done
    assert rc == 0 and kills >= 3, (kills, plan)
    res = load_result(out)
    assert set(res) == set(reference)
    for k in reference:
        np.testing.assert_array_equal(res[k], reference[k])
    files = _chunk_files(out)
    assert files == [f"chunk_{i:06d}.npz" for i in range(n_chunks)]
    index = np.concatenate([np.load(os.path.join(out, f))["_index"] for f in files])
    np.testing.assert_array_equal(np.sort(index), np.arange(n))   # every point exactly once
    assert index.size == n
    for f, mtime in seen.items():                                 # chunks finished before a kill
        assert os.stat(os.path.join(out, f)).st_mtime_ns == mtime  # were never recomputed
    assert json.load(open(os.path.join(out, "manifest.json"))) == manifest
    # temp files of the writes killed mid-way were removed when the run resumed
    assert not [f for f in os.listdir(out) if f.startswith(".tmp-")]


# ---------------------------------------------------------------------------
# memory maps: streamed validation and fingerprint, resumable across in-memory/mapped


def _save(tmp_path, a, name="x.npy"):
    path = str(tmp_path / name)
    np.save(path, a)
    return np.load(path, mmap_mode="r")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_run_started_in_memory_resumes_on_the_memory_mapped_data(tmp_path, monkeypatch, dtype):
    """Same manifest (fingerprint of the float32 data), same results; only missing chunks run.
    Blocks of the validation pass and of dataset_fingerprint are made tiny, so the digest is
    assembled from many blocks."""
    import rcurves.data.builtin as ds
    import rcurves.pipeline.runner as rn

    monkeypatch.setattr(rn, "_SCAN_BYTES", 40)
    monkeypatch.setattr(ds, "_FINGERPRINT_BLOCK_BYTES", 40)
    x, y = data()
    x = x.astype(dtype) + np.asarray(1e-9, dtype)            # float64: digits float32 rounds away
    mm = _save(tmp_path, x)
    assert isinstance(mm, np.memmap)
    assert ds.dataset_fingerprint(mm, y) == ds.dataset_fingerprint(x, y)
    full, out, calls, inner = full_and_killed_runs(x, y, tmp_path)
    res = run_chunked(inner, mm, y, key=KEY, out_dir=out, config={"a": 1}, chunk_size=5, resume=True,
                      progress=False)
    assert len(calls) == 3                                    # chunks 2, 3, 4 only: the manifest matched
    np.testing.assert_array_equal(calls[0], x[10:15, 0].astype(np.float32))
    assert json.load(open(os.path.join(out, "manifest.json"))) == \
        json.load(open(os.path.join(str(tmp_path / "full"), "manifest.json")))
    for k in full:
        np.testing.assert_array_equal(res[k], full[k])
    # and the other way round: a mapped run resumes in memory, recomputing nothing
    calls.clear()
    again = run_chunked(inner, x, y, key=KEY, out_dir=out, config={"a": 1}, chunk_size=5, resume=True,
                        progress=False)
    assert calls == [] and all(np.array_equal(again[k], full[k]) for k in full)
    # different mapped data is refused
    other = _save(tmp_path, x[::-1].copy(), "other.npy")
    with pytest.raises(RunnerError, match="data differs"):
        run_chunked(inner, other, y, key=KEY, out_dir=out, config={"a": 1}, chunk_size=5, resume=True,
                    progress=False)


def test_a_memory_map_on_several_devices_with_scattered_missing_chunks(tmp_path):
    """devices=4 reads groups of non-adjacent chunks (1 and 3 missing) from the map: the rows
    each chunk gets, and the results, are those of the in-memory run on one device."""
    x, y = data(n=31)
    mm = _save(tmp_path, x)
    full = run_chunked(key_fn([]), x, y, key=KEY, out_dir=str(tmp_path / "full"), config={},
                       chunk_size=4, progress=False)
    out = str(tmp_path / "run")
    run_chunked(key_fn([]), mm, y, key=KEY, out_dir=out, config={}, chunk_size=4, progress=False, devices=4)
    for i in (1, 3, 7):
        os.unlink(chunk_path(out, i))
    calls = []
    res = run_chunked(key_fn(calls), mm, y, key=KEY, out_dir=out, config={}, chunk_size=4, resume=True,
                      progress=False, devices=4)
    assert len(calls) == 1                                  # one call for the three missing chunks
    last = np.concatenate([x[28:31, 0], x[30:31, 0]])     # the last chunk, padded with its last row
    rows = np.concatenate([x[4:8, 0], x[12:16, 0], last, last])  # the group filled with its last chunk
    np.testing.assert_array_equal(calls[0], rows)
    for k in full:
        np.testing.assert_array_equal(res[k], full[k])


def test_bad_values_in_a_memory_map_are_refused_before_anything_runs(tmp_path, monkeypatch):
    import rcurves.pipeline.runner as rn

    monkeypatch.setattr(rn, "_SCAN_BYTES", 4 * 3 * 4)        # 4-row blocks: the NaN is in a late one
    x, y = data(n=40)
    for value, what in ((np.nan, "NaN"), (np.inf, "inf")):
        bad = x.copy()
        bad[37, 2] = value
        mm = _save(tmp_path, bad, f"bad-{what}.npy")
        calls, out = [], str(tmp_path / f"run-{what}")
        with pytest.raises(ValueError, match=rf"^x: contains {what} values \(first in row 37\)"):
            run_chunked(key_fn(calls), mm, y, key=KEY, out_dir=out, config={}, chunk_size=8, progress=False)
        assert calls == [] and not os.path.exists(out)      # nothing computed, nothing written
    with pytest.raises(ValueError, match="^x: expected a floating array"):
        run_chunked(key_fn([]), _save(tmp_path, (x * 255).astype(np.uint8), "u8.npy"), y, key=KEY,
                    out_dir=str(tmp_path / "u8"), config={}, progress=False)
    with pytest.raises(ValueError, match="^x: expected a non-empty array"):
        run_chunked(key_fn([]), _save(tmp_path, x[:0], "empty.npy"), y[:0], key=KEY,
                    out_dir=str(tmp_path / "empty"), config={}, progress=False)
    with pytest.raises(ValueError, match=r"^y: expected shape \(40,\)"):
        run_chunked(key_fn([]), _save(tmp_path, x, "ok.npy"), y[:-1], key=KEY,
                    out_dir=str(tmp_path / "y"), config={}, progress=False)


def test_an_iterator_of_chunks_is_refused_with_a_pointer_to_map_points(tmp_path):
    x, y = data()
    with pytest.raises(ValueError, match=r"^x: expected an array or a memory map.*map_points"):
        run_chunked(key_fn([]), iter([(x[:10], y[:10]), (x[10:], y[10:])]), y, key=KEY,
                    out_dir=str(tmp_path / "it"), config={}, progress=False)
    assert not os.path.exists(str(tmp_path / "it"))


_RUNNER_RSS_CHILD = r"""
import json, sys
import numpy as np
import jax
from rcurves.pipeline.runner import run_chunked

path, out_dir = sys.argv[1], sys.argv[2]
x = np.load(path, mmap_mode="r")
y = np.zeros(x.shape[0], np.int32)
fn = lambda xc, yc, keys: {"s": np.asarray(xc[:, :4].sum(axis=1))}
small = run_chunked(fn, x[:1024], y[:1024], key=jax.random.PRNGKey(0), out_dir=out_dir + "-warm",
                    config={}, chunk_size=1024, progress=False)   # compile and allocate for one chunk
before = hwm_mb()
res = run_chunked(fn, x, y, key=jax.random.PRNGKey(0), out_dir=out_dir, config={}, chunk_size=1024,
                  progress=False)
print(json.dumps({"growth_mb": hwm_mb() - before, "n": int(res["s"].shape[0]),
                  "first_equal": bool(np.array_equal(res["s"][:1024], small["s"])),
                  "last_ok": bool(np.allclose(res["s"][-1], np.asarray(x[-1, :4]).sum(), rtol=1e-5))}))
"""


def test_run_chunked_on_a_memory_map_keeps_peak_memory_bounded_by_the_chunk(tmp_path):
    """100 MB memory-mapped x, 3 MB chunks: the validation + fingerprint pass and the chunk
    reads release the map's pages, so the peak grows by far less than the file (reading the
    whole map, as np.asarray(x) did, grew it by >= 100 MB)."""
    rows = 32768
    path = random_npy(str(tmp_path / "x.npy"), rows)          # 100 MB
    out = run_child(_RUNNER_RSS_CHILD, path, str(tmp_path / "run"))
    assert out["n"] == rows and out["first_equal"] and out["last_ok"], out
    assert out["growth_mb"] < 30, out                        # file: 100 MB; one chunk: 3.2 MB


# ---------------------------------------------------------------------------
# temp files left by a killed atomic write


def test_stale_temp_files_of_killed_writes_are_removed_on_start_and_resume(tmp_path):
    x, y = data()
    out = tmp_path / "run"
    run_chunked(key_fn([]), x, y, key=KEY, out_dir=str(out), config={}, chunk_size=5, progress=False)
    (out / "sub").mkdir()
    stale = [".tmp-abcd1234-chunk_000001.npz", ".tmp-zz_9zz9z-manifest.json", ".tmp-0000aaaa-result.npz"]
    kept = [".tmp-abcd1234-notes.txt",            # not one of this run's files
            ".tmp-abc-chunk_000001.npz",          # not an atomic-write name
            "tmp-abcd1234-chunk_000001.npz", "notes.txt", "sub/.tmp-abcd1234-chunk_000000.npz"]
    for name in stale + kept:
        (out / name).write_bytes(b"partial")
    live = out / ".tmp-live0001-chunk_000002.npz"  # modified after the call started: being written
    live.write_bytes(b"partial")
    import time
    os.utime(live, ns=(time.time_ns() + 60 * 10**9,) * 2)
    calls = []
    res = run_chunked(key_fn(calls), x, y, key=KEY, out_dir=str(out), config={}, chunk_size=5, resume=True,
                      progress=False)
    assert calls == [] and res["x0"].shape == (23,)
    for name in stale:
        assert not (out / name).exists(), name
    for name in kept:
        assert (out / name).read_bytes() == b"partial", name
    assert live.exists()
    # a fresh start (no resume) cleans too
    (out / stale[0]).write_bytes(b"partial")
    os.utime(out / stale[0], ns=(time.time_ns() - 10**9,) * 2)
    run_chunked(key_fn([]), x, y, key=KEY, out_dir=str(out), config={}, chunk_size=5, progress=False)
    assert not (out / stale[0]).exists()
    assert (out / kept[0]).exists()
