"""Run every experiment and regenerate ``experiments/README.md`` from their claims.

Each script in ``experiments/<paper>/`` (one folder per paper, e.g.
``000_global_comparison/``; not the helper ``sparsity_study.py``) reproduces
items of that paper and writes
``<out>/<name>/<name>.json`` with a ``claims`` list (DESIGN.md,
"Experiments"). This driver runs them one after the other in fresh
processes, times them, and writes the claims table: item, claim, ours,
verdict, why, the command and the run time on this machine.

    python experiments/run_all.py                  # full runs (trains the zoo on first use), README
    python experiments/run_all.py --quick          # quick runs; table in results/experiments-quick/README.md
    python experiments/run_all.py --only fig6_linear_crossing parabola_fig2
    python experiments/run_all.py --report         # run nothing: rebuild README.md from the JSONs (--readme-only)

A script that fails is reported in the table (and the exit status is 1); the
others still run.

Machines here start without caches, and a full run of every script (the
full-MNIST zoo, thousands of attacked points) takes longer than one sitting.
So each full run's claims (with its code fingerprint and run time, not its
per-point payload) are also kept in ``experiments/claims/<name>.json``, which
is committed: the README is built from the newest run of each script, from
``--out`` when it has one, else from ``experiments/claims``, and a row whose
code has changed since its run is shown as stale and not counted; the report
lists, per stale script, the modules whose code changed. A result's code is
the modules its script loaded (the packages import lazily), each by the digest
of its code without docstrings (:func:`rcurves.claims.record.code_fingerprint`),
so an edit re-runs only the scripts that use what it touches.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXCLUDE = {"sparsity_study"}   # a helper of the 004 scripts, not an experiment
CLAIMS = os.path.join(HERE, "claims")
KEEP = ("experiment", "quick", "seconds", "claims", "figures", "code")
PAPERS = {
    "000": "How to compare adversarial robustness of classifiers from a global perspective",
    "001": "Adversarial Robustness Curves",
    "002": "Proper Measure for Adversarial Robustness",
    "003": "Fundamental Tradeoffs between Invariance and Sensitivity",
    "004": "How Many Perturbations Break This Model?",
}


def script_paths():
    """``{name: path}`` of every experiment script, in the papers' order (``experiments/<paper>/<name>.py``)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(HERE, "[0-9][0-9][0-9]_*", "*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        if not name.startswith("_") and name not in EXCLUDE:
            out[name] = path
    return out


def scripts():
    return list(script_paths())


def run_one(name, out, quick, extra_env=None):
    cmd = [sys.executable, script_paths()[name], "--out", os.path.join(out, name), "--no-progress"]
    if quick:
        cmd.append("--quick")
    t0 = time.time()
    env = dict(os.environ, **(extra_env or {}))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.time() - t0
    log = os.path.join(out, name, "run.log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w") as f:
        f.write(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    return proc.returncode, seconds


def keep_claims(out, name, claims_dir=CLAIMS):
    """Copy a full run's claims (not its per-point payload) to ``claims_dir/<name>.json``, atomically."""
    path = os.path.join(out, name, f"{name}.json")
    with open(path) as f:
        doc = json.load(f)
    if doc.get("quick"):
        return None
    os.makedirs(claims_dir, exist_ok=True)
    target = os.path.join(claims_dir, f"{name}.json")
    with open(target + ".tmp", "w") as f:
        json.dump({k: doc[k] for k in KEEP if k in doc}, f, indent=1)
        f.write("\n")
    os.replace(target + ".tmp", target)
    return target


def find_result(out, name, quick, claims_dir=CLAIMS):
    """The JSON of ``name``'s newest run: ``out`` first, then (full runs only) ``claims_dir``."""
    for path in [os.path.join(out, name, f"{name}.json")] + ([] if quick else [os.path.join(claims_dir, f"{name}.json")]):
        if os.path.exists(path):
            return path
    return None


def _cell(text):
    return " ".join(str(text).split()).replace("|", "\\|")


def _stale(doc):
    """The modules whose code changed since the JSON was produced (empty: current)."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from rcurves.claims.record import changed_files

    return changed_files(doc, ROOT)


def readme(out, quick, times, claims_dir=CLAIMS):
    rows, failed, stale = [], [], {}
    for name in scripts():
        path = find_result(out, name, quick, claims_dir)
        if path is None:
            failed.append(name)
            continue
        with open(path) as f:
            doc = json.load(f)
        secs = times.get(name, doc.get("seconds"))
        changed = _stale(doc)
        is_stale = bool(changed)
        if is_stale:
            stale[name] = changed
        for c in doc.get("claims", []):
            rows.append((c["paper"], name, c, secs, doc.get("quick", False), is_stale))
    counts = {}
    for _, _, c, _, _, st in rows:
        if st:
            continue
        kind = c.get("kind", "paper")
        counts.setdefault(kind, {})
        counts[kind][c["verdict"]] = counts[kind].get(c["verdict"], 0) + 1

    def tally(kind):
        got = counts.get(kind, {})
        return ", ".join(f"{v} {k}" for k, v in sorted(got.items())) or "none"

    lines = [
        "# Experiments: the papers' claims, checked",
        "",
        "Generated by `python experiments/run_all.py" + (" --quick" if quick else "") + "` from the `claims` of each "
        "script's JSON (do not edit by hand). Each row is one statement or number of a paper, what we measured "
        "(the statistic, its test, p-value or interval, n and how the points were drawn) and a verdict decided by "
        "a rule that can fail (`rcurves/claims/verdicts.py`; each rule is fed a failing case in `tests/claims/test_verdicts.py`): "
        "**reproduced** (the effect shows, in the paper's direction and, where it gives one, size), **differs** "
        "(the sample could have shown it and does not, or shows the opposite), **inconclusive** (the sample could "
        "not have shown it either way; the row says what n would), **not reproducible here** (with the reason). "
        "Where a paper used MNIST, our MNIST is the full set (60,000 / 10,000; `load_dataset('mnist-full')`); "
        "the models are our own, trained here on a CPU (`rcurves zoo`), and there is no CIFAR-10: paper 004's "
        "CIFAR-10 experiments run on full MNIST instead. Every sample of test points is a stratified or random "
        "one (the splits are served class-interleaved) and models compared are measured on the same points.",
        "",
        f"Paper claims: {tally('paper')}. Checks of our own tools (self-check): {tally('self-check')}. "
        f"Beyond the papers: {tally('beyond')}." + (
            f" Scripts without results: {', '.join(failed)}." if failed else "") + (
            f" Stale (code changed since the run; not counted): {len(stale)} of {len(scripts())} scripts, "
            "listed below." if stale else ""),
        "",
    ]
    if stale:
        lines += ["**Stale scripts** (each with the modules whose code changed since its run; re-run them with "
                  "`python experiments/run_all.py --only NAME ...`):", ""]
        for name, changed in stale.items():
            if changed and (found := find_result(out, name, quick, claims_dir)):
                with open(found) as f:
                    code = json.load(f).get("code") or {}
                if code and "scheme" not in code:
                    lines.append(f"- `{name}`: recorded with the first fingerprint (the whole text of the "
                                 f"{len(changed)} modules its process loaded, every package eagerly): any edit "
                                 "to any of them stales it; a re-run records per-module code digests")
                    continue
            shown = ", ".join(f"`{c}`" for c in changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
            lines.append(f"- `{name}`: {shown}")
        lines.append("")
    if quick:
        lines += ["**These are `--quick` runs** (tiny stand-in models, few points): they exercise the code and "
                  "the exact checks; their verdicts are not the papers' reproductions.", ""]
    paths = script_paths()
    for paper in sorted({r[0] for r in rows}):
        lines += [f"## {paper}: {PAPERS.get(paper, '')}", "",
                  "| item | claim | ours | verdict | why | kind | command | run time |",
                  "|---|---|---|---|---|---|---|---|"]
        for p, name, c, secs, q, st in rows:
            if p != paper:
                continue
            cmd = f"`python {os.path.relpath(paths[name], ROOT)}" + (" --quick" if q else "") + "`"
            t = f"{secs:.0f} s" if isinstance(secs, (int, float)) else ""
            verdict = f"**{c['verdict']}**" + (" (stale: code changed since this run)" if st else "")
            lines.append(f"| {_cell(c['item'])} | {_cell(c['claim'])} | {_cell(c['ours'])} | {verdict} | "
                         f"{_cell(c['why'])} | {c.get('kind', 'paper')} | {cmd} | {t} |")
        lines.append("")
    lines += ["Run times are wall-clock on this project's 2-core CPU machine, including training any zoo model not yet "
              "cached and compiling the attacks.", ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="run every script with --quick")
    ap.add_argument("--out", default=None, help="results folder (default results/experiments[-quick])")
    ap.add_argument("--only", nargs="+", default=None, metavar="NAME", help="run only these scripts")
    ap.add_argument("--report", "--readme-only", dest="readme_only", action="store_true",
                    help="run nothing: rebuild the README from the results (--out, else experiments/claims), "
                         "listing stale rows")
    ap.add_argument("--readme", default=None,
                    help="where to write the table (default experiments/README.md; with --quick <out>/README.md)")
    args = ap.parse_args(argv)
    out = args.out or os.path.join(ROOT, "results", "experiments-quick" if args.quick else "experiments")
    names = scripts()
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            ap.error(f"--only: unknown experiments {unknown}; known: {names}")
        names = [n for n in names if n in args.only]
    times, status = {}, 0
    timing_path = os.path.join(out, "run_times.json")
    if os.path.exists(timing_path):
        with open(timing_path) as f:
            times.update(json.load(f))
    if not args.readme_only:
        for name in names:
            print(f"{name} ...", flush=True)
            rc, secs = run_one(name, out, args.quick)
            times[name] = secs
            if rc == 0 and not args.quick:
                keep_claims(out, name)
            print(f"  {'ok' if rc == 0 else f'FAILED (exit {rc}, see {out}/{name}/run.log)'} in {secs:.0f} s",
                  flush=True)
            status |= rc != 0
            os.makedirs(out, exist_ok=True)
            with open(timing_path, "w") as f:
                json.dump(times, f, indent=1)
    target = args.readme or (os.path.join(out, "README.md") if args.quick else os.path.join(HERE, "README.md"))
    text = readme(out, args.quick, times)
    with open(target + ".tmp", "w") as f:
        f.write(text)
    os.replace(target + ".tmp", target)
    print(f"wrote {target}")
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
