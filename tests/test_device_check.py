"""``benchmarks/device_check.py``: a quick run in this process writes its one JSON with sane numbers."""
import importlib.util
import json
import math
import pathlib
import sys

import jax

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "device_check.py"


def test_quick_run_writes_one_json_with_sane_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", sys.path[:])           # the script puts benchmarks/ on it
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    dc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dc)

    # the pytest summary parser, on the lines of a run with failures (-rfE)
    parsed = dc.parse_pytest("....F.E\nFAILED tests/a.py::test_x[1] - AssertionError: no\n"
                             "ERROR tests/b.py::test_y - RuntimeError\n"
                             "2 failed, 10 passed, 1 skipped, 3 errors in 3.21s\n")
    assert (parsed["passed"], parsed["failed"], parsed["error"], parsed["skipped"]) == (10, 2, 3, 1)
    assert parsed["failed_tests"] == ["tests/a.py::test_x[1]"] and parsed["error_tests"] == ["tests/b.py::test_y"]

    out = dc.main(["--quick", "--skip-tests", "--skip-demo", "--points", "16", "--verify-time-limit", "2",
                   "--out", str(tmp_path)])
    files = [p.name for p in tmp_path.iterdir()]
    assert files == ["device_check.json"]                    # one JSON, no temporary file left
    saved = json.loads((tmp_path / "device_check.json").read_text())
    assert saved["finished"] is True and saved["command"] == out["command"]
    assert saved["sections"].keys() == {"environment", "attack", "verify"}
    assert all(s["status"] == "ok" for s in saved["sections"].values()), saved["sections"]

    assert saved["environment"]["jax"] == jax.__version__
    assert saved["environment"]["devices"] == [str(d) for d in jax.devices()]

    (row,) = saved["attack"]["rows"]
    assert row["norm"] == "linf" and row["points"] == 16 and saved["attack"]["tiled"] is False
    assert isinstance(row["ratio"], float) and math.isfinite(row["ratio"]) and row["ratio"] > 0
    assert row["G"] > 0 and row["points_per_s"] > 0 and row["first_call_s"] >= row["attack_s"] * 0.5

    boxes = saved["verify"]["instances"]
    assert len(boxes) == 1
    assert all(b["status"] in ("verified", "falsified", "unknown") for b in boxes)
    assert all(0 < b["eps"] < 1 for b in boxes)
