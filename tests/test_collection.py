"""The README's test command collects the same tests however it is started (issue: a fresh clone's `pytest`
failed at collection while `python -m pytest` passed, because tests/attacks shadowed the attacks package)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_test_folder_is_a_package():
    """A test folder without __init__.py named like a package (tests/attacks) becomes a namespace package that
    shadows the real one when the repository root is not on sys.path (the `pytest` entry point)."""
    for folder, dirs, files in os.walk(os.path.join(ROOT, "tests")):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
        if any(f.endswith(".py") for f in files):
            assert "__init__.py" in files, os.path.relpath(folder, ROOT)


def _collect(cmd, cwd):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run(cmd + ["--collect-only", "-q", "-p", "no:cacheprovider"], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return sorted(line.split("::")[0].replace("\\", "/").split("tests/")[-1]
                  for line in res.stdout.splitlines() if "::" in line)


def test_pytest_and_python_m_pytest_collect_the_same_from_the_root_and_a_subfolder():
    pytest_exe = os.path.join(os.path.dirname(sys.executable), "pytest")
    entry = [pytest_exe] if os.path.exists(pytest_exe) else [sys.executable, "-c",
                                                              "import sys, pytest; sys.exit(pytest.main())"]
    folder = os.path.join(ROOT, "tests", "certify")
    from_root = _collect(entry + ["tests/certify"], ROOT)
    assert len(from_root) >= 10 and any(p.startswith("certify/test_bab.py") for p in from_root)
    assert _collect([sys.executable, "-m", "pytest", "tests/certify"], ROOT) == from_root
    assert _collect(entry, folder) == from_root
