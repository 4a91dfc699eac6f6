"""The rcurves command: demo end to end, curves/train/interclass, resume after a kill, error paths."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests._models import exact_multiclass
from rcurves.cli import main
from rcurves.data import load_data
from rcurves.pipeline.report import build_report, ranking_flips

VENV_BIN = os.path.dirname(sys.executable)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Compiled programs and models go to a temporary cache, not ~/.cache."""
    monkeypatch.setenv("RCURVES_CACHE", str(tmp_path_factory.getbasetemp() / "rcurves-cache"))


def _strict_json(path):
    """Parse rejecting NaN/Infinity (not JSON)."""
    def bad(tok):
        raise ValueError(f"non-JSON constant {tok}")
    with open(path) as f:
        return json.loads(f.read(), parse_constant=bad)


def _one_line_error(capsys, rc):
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and err[0].startswith("rcurves"), err
    assert "Traceback" not in err[0]
    return err[0]


# ---------------------------------------------------------------------------
# demo


def test_demo_tiny_end_to_end_and_warm_rerun(tmp_path, capsys):
    out, cache = str(tmp_path / "demo"), str(tmp_path / "cache")
    args = ["demo", "--tiny", "--out", out, "--cache", cache, "--no-progress"]
    assert main(args) == 0
    # JAX's persistent compilation cache stays off unless asked for
    # (RCURVES_JAX_CACHE): writing attack executables to it segfaulted on CI.
    import jax

    assert jax.config.jax_compilation_cache_dir is None
    printed = capsys.readouterr().out
    doc = _strict_json(os.path.join(out, "curves.json"))
    labels = ["ST", "AT-linf-0.1", "AT-linf-0.3", "AT-l2-1.5"]
    assert list(doc["models"]) == labels and doc["norms"] == ["linf", "l2"]
    n = doc["data"]["n"]
    assert n == 24 and len(doc["labels"]) == n
    from rcurves.curves import robust_error

    for m in labels:
        for norm in ("linf", "l2"):
            d = np.array([np.inf if v is None else v for v in doc["distances"][m][norm]])
            assert d.shape == (n,) and np.all(d >= 0)
            for e, v in doc["robust_error"][m][norm].items():
                assert v == pytest.approx(float(robust_error(d, float(e))))
            assert m in printed
    with open(os.path.join(out, "curves.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # the band: CROWN radii of AT-linf-0.3, never above the attack's distance on the same points
    band = _strict_json(os.path.join(out, "band.json"))
    per = band["models"]["AT-linf-0.3"]["linf"]
    cert = np.array([np.inf if v is None else v for v in per["radius"]])
    att = np.array([np.inf if v is None else v for v in doc["distances"]["AT-linf-0.3"]["linf"]])
    assert band["points"] == list(range(n)) and np.all(cert <= att * (1 + 1e-5) + 1e-7)
    assert np.all(np.array(per["certified_curve"]) >= np.array(per["attack_curve"]))
    assert "Certified band (crown)" in printed
    import matplotlib.image

    img = matplotlib.image.imread(os.path.join(out, "curves.png"))
    assert img.ndim == 3 and img.shape[1] > img.shape[0] > 100      # two panels side by side
    header = open(os.path.join(out, "curves.csv")).readline().strip().split(",")
    assert header == ["norm", "eps"] + labels
    for e in ("0.05", "0.3", "0.5", "2"):
        assert f" {e} " in printed
    assert "Where the ranking flips" in printed
    # warm: models come from the cache and the finished runs are reused, same numbers
    assert main(args) == 0
    printed2 = capsys.readouterr().out
    assert printed2.count("cached") == 4 and "trained " not in printed2
    assert _strict_json(os.path.join(out, "curves.json"))["distances"] == doc["distances"]


# ---------------------------------------------------------------------------
# train + curves, killed and resumed


@pytest.fixture(scope="module")
def linear_ckpt(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ckpt") / "lin")
    rc = main(["train", "--data", "digits", "--arch", "linear", "--epochs", "3", "--batch-size", "64",
               "--out", path, "--no-progress", "--lr", "0.01"])
    assert rc == 0
    return path


def test_train_writes_a_loadable_checkpoint(linear_ckpt):
    from rcurves.models.checkpoint import load_checkpoint
    from rcurves.data import dataset_fingerprint, digits

    ck = load_checkpoint(linear_ckpt)
    assert ck.model.arch == "linear" and ck.train.method == "st" and ck.train.epochs == 3
    assert ck.data_fingerprint == dataset_fingerprint(*digits("train"))
    assert ck.metrics["test_accuracy"] > 0.8


def test_train_resnet_from_the_command_line(tmp_path, capsys):
    from rcurves.models.checkpoint import load_checkpoint

    path = str(tmp_path / "resnet")
    assert main(["train", "--data", "digits", "--arch", "resnet", "--depth", "8", "--width", "2", "--epochs", "1",
                 "--n-train", "128", "--out", path, "--no-progress"]) == 0
    ck = load_checkpoint(path)
    assert (ck.model.arch, ck.model.depth, ck.model.width, ck.model.image_shape) == ("resnet", 8, 2, (8, 8, 1))
    x = np.zeros((2, 8, 8, 1), np.float32)
    assert np.asarray(ck.logits_fn(x)).shape == (2, 10)
    capsys.readouterr()
    rc = main(["train", "--data", "digits", "--arch", "resnet", "--depth", "9", "--out", str(tmp_path / "bad"),
               "--no-progress"])
    assert "depth: expected 6 n + 2" in _one_line_error(capsys, rc)


CURVES = ["curves", "--data", "digits", "--norm", "linf", "--n", "40", "--chunk-size", "4",
          "--search-steps", "2", "--steps", "4", "--no-progress"]


@pytest.mark.highest
def test_killed_curves_run_resumes_to_identical_results(linear_ckpt, tmp_path):
    killed, clean = str(tmp_path / "killed"), str(tmp_path / "clean")
    run_dir = os.path.join(killed, "runs", "ST__linf")
    env = dict(os.environ, _RCURVES_CHUNK_DELAY="0.4")
    proc = subprocess.Popen([sys.executable, "-m", "rcurves"] + CURVES + ["--model", linear_ckpt, "--out", killed],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    try:
        while not os.path.exists(os.path.join(run_dir, "chunk_000002.npz")):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.time() < deadline
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = sorted(f for f in os.listdir(run_dir) if f.startswith("chunk_"))
    assert 3 <= len(done) < 10 and not os.path.exists(os.path.join(run_dir, "result.npz"))
    mtimes = {f: os.stat(os.path.join(run_dir, f)).st_mtime_ns for f in done}
    assert main(CURVES + ["--model", linear_ckpt, "--out", killed, "--resume"]) == 0
    assert {f: os.stat(os.path.join(run_dir, f)).st_mtime_ns for f in done} == mtimes   # not recomputed
    assert main(CURVES + ["--model", linear_ckpt, "--out", clean]) == 0
    a, b = _strict_json(os.path.join(killed, "curves.json")), _strict_json(os.path.join(clean, "curves.json"))
    assert a["distances"] == b["distances"] and a["robust_error"] == b["robust_error"]
    assert len(a["distances"]["ST"]["linf"]) == 40


# ---------------------------------------------------------------------------
# a user's module:function model and .npz data, against exact theory


def test_curves_of_a_user_linear_model_match_exact_distances(tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(0)
    W, b = rng.normal(size=(3, 5)) * 4, rng.normal(size=3) * 0.1
    (tmp_path / "usermodel.py").write_text(
        "import jax.numpy as jnp\n"
        f"W = jnp.asarray({W.tolist()}, jnp.float32)\n"
        f"B = jnp.asarray({b.tolist()}, jnp.float32)\n"
        "def make():\n"
        "    return lambda x: x.reshape(x.shape[0], -1) @ W.T + B\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    x = (0.4 + 0.2 * rng.random((30, 5))).astype(np.float32)
    y = np.argmax(x @ W.T + b, axis=1)
    np.savez(tmp_path / "pts.npz", x=x, y=y)
    out = str(tmp_path / "out")
    rc = main(["curves", "--model", "usermodel:make", "--label", "lin", "--data", str(tmp_path / "pts.npz"),
               "--norm", "linf,l2", "--out", out, "--search-steps", "8", "--steps", "10", "--no-cw",
               "--no-progress", "--thresholds", "linf=0.01,0.02", "l2=0.02",
               "--bounds", "none", "--eps-max", "linf=1", "l2=2"])
    assert rc == 0
    doc = _strict_json(os.path.join(out, "curves.json"))
    assert doc["thresholds"] == {"linf": [0.01, 0.02], "l2": [0.02]}
    for norm in ("linf", "l2"):
        d = np.array(doc["distances"]["lin"][norm], dtype=np.float64)
        exact = exact_multiclass(W, b, x, y, norm)          # Lemma 1 per pair of classes, unbounded
        assert np.all(d >= exact * (1 - 1e-5))
        assert np.median(d / exact) < 1.02
    assert "lin" in capsys.readouterr().out


def test_sparsity_command_measures_exactly_the_vulnerable_points(tmp_path, monkeypatch):
    """Binary linear model, no box: a point is vulnerable at eps iff |w.x + b| / ||w||_2 <= eps (Lemma 1)."""
    rng = np.random.default_rng(3)
    w = rng.normal(size=5)
    (tmp_path / "binmodel.py").write_text(
        "import jax.numpy as jnp\n"
        f"W = jnp.asarray({w.tolist()}, jnp.float32)\n"
        "def make():\n"
        "    def f(x):\n"
        "        s = x.reshape(x.shape[0], -1) @ W\n"
        "        return jnp.stack([-s / 2, s / 2], axis=-1)\n"
        "    return f\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    # exact distances 0.2 .. 1.8, away from eps = 1
    dist = np.array([0.2, 0.4, 0.6, 0.8, 1.2, 1.4, 1.6, 1.8] * 2)
    side = np.repeat([1.0, -1.0], 8)
    u = rng.normal(size=(16, 5))
    u -= np.outer(u @ w, w) / (w @ w)                          # orthogonal to w
    x = (u + (side * dist)[:, None] * w / np.linalg.norm(w)).astype(np.float32)
    y = (side > 0).astype(np.int64)
    np.savez(tmp_path / "pts.npz", x=x, y=y)
    out = tmp_path / "sp"
    assert main(["sparsity", "--model", "binmodel:make", "--data", str(tmp_path / "pts.npz"), "--norm", "l2",
                 "--eps", "1.0", "--n", "16", "--directions", "2", "--search-steps", "3", "--steps", "5",
                 "--bounds", "none", "--chunk-size", "8", "--out", str(out), "--no-progress"]) == 0
    doc = _strict_json(out / "sparsity.json")
    measured = np.array([v is not None for v in doc["sparsity"]])
    np.testing.assert_array_equal(measured, dist <= 1.0)
    assert doc["n_vulnerable"] == 8
    assert all(0 <= v <= np.pi for v in doc["sparsity"] if v is not None)
    # --devices 4: each device runs the estimator on one chunk; same bits as 1 device
    assert main(["sparsity", "--model", "binmodel:make", "--data", str(tmp_path / "pts.npz"), "--norm", "l2",
                 "--eps", "1.0", "--n", "16", "--directions", "2", "--search-steps", "3", "--steps", "5",
                 "--bounds", "none", "--chunk-size", "8", "--out", str(tmp_path / "sp4"), "--no-progress",
                 "--devices", "4"]) == 0
    assert _strict_json(tmp_path / "sp4" / "sparsity.json")["sparsity"] == doc["sparsity"]


def test_curves_on_4_devices_equals_1_and_resumes_on_another_count(tmp_path, monkeypatch):
    import jax

    if len(jax.local_devices()) < 4:
        pytest.skip("needs 4 devices (XLA_FLAGS)")
    rng = np.random.default_rng(4)
    W = rng.normal(size=(3, 6)) * 4
    (tmp_path / "devmodel.py").write_text(
        "import jax.numpy as jnp\n"
        f"W = jnp.asarray({W.tolist()}, jnp.float32)\n"
        "def make():\n"
        "    return lambda x: x.reshape(x.shape[0], -1) @ W.T\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    x = rng.random((11, 6)).astype(np.float32)               # 11 points, chunks of 3: padding everywhere
    np.savez(tmp_path / "pts.npz", x=x, y=np.argmax(x @ W.T, axis=1))
    base = ["curves", "--model", "devmodel:make", "--data", str(tmp_path / "pts.npz"), "--norm", "linf",
            "--search-steps", "2", "--steps", "3", "--chunk-size", "3", "--no-progress"]
    assert main(base + ["--out", str(tmp_path / "one")]) == 0
    assert main(base + ["--out", str(tmp_path / "four"), "--devices", "4"]) == 0
    one, four = (_strict_json(tmp_path / o / "curves.json") for o in ("one", "four"))
    assert len(one["distances"]["make"]["linf"]) == 11
    assert four["distances"] == one["distances"] and four["attack_distances"] == one["attack_distances"]
    assert (one["settings"]["devices"], four["settings"]["devices"]) == (1, 4)
    # a finished 4-device run is reused whole by a 1-device --resume (devices are not in the manifest)
    run_dir = tmp_path / "four" / "runs" / "make__linf"
    mtimes = {f: (run_dir / f).stat().st_mtime_ns for f in os.listdir(run_dir) if f.startswith("chunk_")}
    assert len(mtimes) == 4
    assert main(base + ["--out", str(tmp_path / "four"), "--resume"]) == 0
    assert {f: (run_dir / f).stat().st_mtime_ns for f in mtimes} == mtimes
    assert _strict_json(tmp_path / "four" / "curves.json")["distances"] == one["distances"]


@pytest.mark.parametrize("cmd", ["curves", "sparsity", "demo"])
@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", "99"])
def test_bad_devices_are_one_line_usage_errors(cmd, value, capsys, tmp_path):
    argv = {"curves": ["curves", "--model", "x", "--data", "digits"],
            "sparsity": ["sparsity", "--model", "x", "--data", "digits", "--eps", "1"],
            "demo": ["demo"]}[cmd] + ["--out", str(tmp_path / "o"), "--devices", value]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "argument --devices" in err[0] and value in err[0], err
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.parametrize("extra, flag", [(["--gradients", "100", "--steps", "5"], "--gradients: a budget replaces steps"),
                                         (["--gradients", "0"], "--gradients: expected an integer >= 1"),
                                         (["--polish-steps", "-1"], "--polish-steps: expected an integer >= 0"),
                                         (["--cw-steps", "0"], "--cw-steps: expected an integer >= 1")])
def test_bad_attack_budget_is_a_one_line_error_before_any_loading(extra, flag, capsys, tmp_path):
    # "--model x" does not exist: an error about the budget proves it was checked first.
    rc = main(["curves", "--model", "x", "--data", "digits", "--out", str(tmp_path / "o")] + extra)
    assert flag in _one_line_error(capsys, rc)
    assert not os.path.exists(tmp_path / "o")


def test_interclass_command_matches_brute_force(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.random((25, 4)).astype(np.float32)
    y = rng.integers(0, 3, 25)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    assert main(["interclass", "--data", str(tmp_path / "d.npz"), "--norm", "l2,linf",
                 "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    doc = _strict_json(tmp_path / "o" / "interclass.json")
    diff = x[:, None, :].astype(np.float64) - x[None, :, :]
    other = y[:, None] != y[None, :]
    for norm, ord_ in (("l2", 2), ("linf", np.inf)):
        dist = np.linalg.norm(diff, ord=ord_, axis=-1)
        brute = np.where(other, dist, np.inf).min(axis=1)
        np.testing.assert_allclose(doc["distances"][norm], brute, rtol=1e-5)
    assert (tmp_path / "o" / "interclass.png").read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------
# the report


def test_ranking_flips_exact():
    a = np.array([0.1, 0.1, 0.5, 0.5])
    b = np.array([0.2, 0.2, 0.3, 0.3])
    eps, first = ranking_flips(a, b)
    # R_a > R_b on [0.1, 0.2) (b more robust), equal on [0.2, 0.3), R_a < R_b on [0.3, 0.5)
    assert eps.tolist() == [pytest.approx(0.3)] and first == 1
    eps, first = ranking_flips(np.array([0.1, 0.2]), np.array([0.3, 0.4]))
    assert eps.size == 0 and first == 1
    assert ranking_flips(a, a)[1] == 0


def test_report_ranks_models_per_threshold_and_names_the_flip():
    from rcurves.data import Data

    # model A: robust error 0 up to 0.1, then everything at 0.15; model B: 1/2 at 0.05, the rest at 0.4
    dist = {"A": {"linf": {"distance": np.array([0.15, 0.15, 0.15, 0.15])}},
            "B": {"linf": {"distance": np.array([0.05, 0.05, 0.4, 0.4])}}}
    data = Data("toy", np.zeros((4, 2), np.float32), np.zeros(4, np.int64))
    doc, table = build_report(dist, {"linf": [0.1, 0.2]}, data=data, models_info={}, settings={})
    assert doc["robust_error"]["A"]["linf"] == {"0.1": 0.0, "0.2": 1.0}
    assert doc["robust_error"]["B"]["linf"] == {"0.1": 0.5, "0.2": 0.5}
    rows = [l for l in table.splitlines() if l.startswith("linf ")]
    assert "0.000 [1]" in rows[0] and "0.500 [2]" in rows[0]
    assert "1.000 [2]" in rows[1] and "0.500 [1]" in rows[1]
    assert doc["intersections"]["linf"] == [{"a": "A", "b": "B", "eps": [pytest.approx(0.15)],
                                             "more_robust_first": "A", "significant": False}]
    assert "A more robust for eps < 0.15, B from eps = 0.15 on [noise]" in table   # 4 points: not significant


def test_load_data_subsets_are_random_not_class_sorted():
    d = load_data("mnist", "test", n=200, seed=0)
    assert d.x.shape == (200, 28, 28, 1) and len(np.unique(d.y)) == 10


# ---------------------------------------------------------------------------
# errors: one line, exit status 2, no traceback


@pytest.mark.parametrize("argv,needle", [
    (["curves", "--model", "x", "--data", "imagenet", "--out", "o"], "unknown data set 'imagenet'"),
    (["curves", "--model", "/no/such/ckpt", "--data", "digits", "--out", "o"], "no such directory"),
    (["curves", "--model", "x", "--data", "digits", "--norm", "l3", "--out", "o"], "bad norm 'l3'"),
    (["curves", "--model", "nosuchmodule_xyz:f", "--data", "digits", "--out", "o"], "cannot import module"),
    (["curves", "--model", "os:getcwd", "--data", "digits", "--out", "o"], "must return a logits_fn"),
    (["curves", "--model", "x", "--data", "digits", "--out", "o", "--thresholds", "linf"], "NORM=V1"),
    (["train", "--data", "digits", "--out", "o", "--epochs", "0"], "epochs"),
    (["train", "--data", "digits", "--out", "o", "--method", "at", "--eps", "-1"], "eps"),
    (["sparsity", "--model", "x", "--data", "digits", "--eps", "1", "--norm", "l1", "--out", "o"], "l2, linf"),
    (["interclass", "--data", "nope.npz", "--out", "o"], "not found"),
    (["demo", "--n", "0"], "positive"),
    (["curves", "--model", "x", "--data", "digits", "--out", "o", "--bounds", "none"], "--eps-max"),
])
def test_user_errors_are_one_line(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _one_line_error(capsys, main(argv))
    assert needle in line


def test_foreign_checkpoint_and_bad_npz(tmp_path, capsys):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "meta.json").write_text('{"format": "something-else"}')
    line = _one_line_error(capsys, main(["curves", "--model", str(tmp_path / "ck"), "--data", "digits",
                                         "--out", str(tmp_path / "o")]))
    assert "not an rcurves checkpoint" in line
    np.savez(tmp_path / "bad.npz", inputs=np.zeros((3, 2)))
    line = _one_line_error(capsys, main(["interclass", "--data", str(tmp_path / "bad.npz"),
                                         "--out", str(tmp_path / "o")]))
    assert "'x' and 'y'" in line


def test_resume_with_other_settings_is_refused(linear_ckpt, tmp_path, capsys):
    out = str(tmp_path / "o")
    base = ["curves", "--model", linear_ckpt, "--data", "digits", "--norm", "linf", "--n", "8", "--steps", "2",
            "--no-progress", "--out", out]
    assert main(base + ["--search-steps", "1"]) == 0
    capsys.readouterr()
    line = _one_line_error(capsys, main(base + ["--search-steps", "2", "--resume"]))
    assert "cannot resume" in line and "search_steps" in line


def test_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["curves", "--data", "digits"])                # --model and --out missing
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "required" in err[0]
    with pytest.raises(SystemExit) as e:
        main(["frobnicate"])
    assert e.value.code == 2


def test_chunk_size_is_a_positive_number_or_auto(capsys):
    for bad in ("0", "many"):
        with pytest.raises(SystemExit) as e:
            main(["curves", "--model", "m", "--data", "digits", "--out", "o", "--chunk-size", bad])
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--chunk-size" in err[0] and "auto" in err[0]


@pytest.mark.parametrize("cmd,option", [("demo", "--quick"), ("curves", "--resume"), ("train", "--method"),
                                        ("curves", "--devices"), ("sparsity", "--devices"), ("demo", "--devices"),
                                        ("sparsity", "--directions"), ("interclass", "--norm")])
def test_help_of_every_subcommand(cmd, option, capsys):
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0
    assert option in capsys.readouterr().out


def test_console_script_exits_nonzero_without_traceback(tmp_path):
    exe = os.path.join(VENV_BIN, "rcurves")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "rcurves"]
    r = subprocess.run(cmd + ["curves", "--model", str(tmp_path / "missing"), "--data", "digits",
                              "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"rcurves: error: checkpoint {str(tmp_path / 'missing')!r}: "
                                             "no such directory"]


def test_curves_certify_draws_a_band_that_closes_on_a_linear_model(linear_ckpt, tmp_path, capsys):
    out = str(tmp_path / "band")
    rc = main(["curves", "--model", linear_ckpt, "--data", "digits", "--n", "30", "--out", out, "--norm", "linf",
               "--no-cw", "--search-steps", "6", "--steps", "10", "--certify", "--no-progress"])
    assert rc == 0
    doc = _strict_json(os.path.join(out, "band.json"))
    (label, per), = doc["models"].items()
    # both edges of the band in the CSV: the certified curve never below the attack's
    import csv

    rows = list(csv.DictReader(open(os.path.join(out, "band.csv"))))
    assert rows and {r["model"] for r in rows} == {label}
    assert all(float(r["certified_curve"]) >= float(r["attack_curve"]) for r in rows)
    curves = _strict_json(os.path.join(out, "curves.json"))
    att = np.array([np.inf if v is None else v for v in curves["distances"][label]["linf"]])
    cert = np.array([np.inf if v is None else v for v in per["linf"]["radius"]])
    assert np.all(cert <= att * (1 + 1e-5) + 1e-7)           # a lower bound never above a found adversarial
    # a linear model in the box: the bound is exact, so the band closes (attack within 1% of the truth)
    pos = att > 0
    assert np.median(att[pos] / cert[pos]) < 1.01
    assert os.path.getsize(os.path.join(out, "band.png")) > 1000
    assert "Certified band (crown)" in capsys.readouterr().out
