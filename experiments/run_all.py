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
is committed: the README is built from the newest run of each script, the
one in ``--out`` (for the full report, a full one) unless its code has changed
since and the kept one's has not, else the kept one; a row whose code has
changed since its run is shown as stale and not counted; the report
lists, per stale script, the modules whose code changed. A kept run's
figures (the PNGs its JSON lists under ``figures``, each ``{"file", "caption"}``)
are kept beside its claims in ``experiments/claims/figures/<name>/``, each
under 200 KB (:func:`store_figure`), and shown after each paper's table;
``--report`` first keeps every full run in ``--out`` whose code is current
(runs done outside this driver too), and never a quick one. The report's
header counts the scripts and adds up their recorded run times. A result's code is
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
_CHECKOUT = ROOT   # on sys.path for rcurves (ROOT may be redirected, e.g. by tests, for the code fingerprints)
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


FIGURE_LIMIT = 200_000   # bytes: a kept figure larger than this is stored downscaled (store_figure)


def _kept_dir(claims_dir=None):
    """``claims_dir``, else the module's ``CLAIMS`` (looked up at call time, so tests can redirect it)."""
    return claims_dir or CLAIMS


def _load(path):
    with open(path) as f:
        return json.load(f)


def _figures(doc):
    """``doc``'s figures as ``[{'file', 'caption'}]`` (the older list of names included)."""
    if _CHECKOUT not in sys.path:
        sys.path.insert(0, _CHECKOUT)
    from rcurves.claims.record import figure_entries

    return figure_entries(doc)


def _kept(doc):
    """The part of a run's JSON that is kept in ``experiments/claims`` (figures in the ``{file, caption}`` form)."""
    kept = {k: doc[k] for k in KEEP if k in doc}
    if "figures" in kept:
        kept["figures"] = _figures(kept)
    return kept


def _resample(img, h, w):
    """``img`` (H, W, C) averaged down to (h, w): each output pixel the area-weighted mean of the pixels it covers."""
    import numpy as np

    def weights(n_in, n_out):
        edges = np.linspace(0.0, n_in, n_out + 1)
        j = np.arange(n_in)
        overlap = np.minimum(edges[1:, None], j + 1) - np.maximum(edges[:-1, None], j)
        return np.clip(overlap, 0.0, None) / (n_in / n_out)

    out = np.tensordot(weights(img.shape[0], h), img.astype(np.float64), axes=(1, 0))    # (h, W, C)
    out = np.tensordot(out, weights(img.shape[1], w), axes=(1, 1))                       # (h, C, w)
    return out.transpose(0, 2, 1)


def store_figure(src, dst, limit=FIGURE_LIMIT):
    """Copy the PNG ``src`` to ``dst``; one larger than ``limit`` bytes is stored downscaled to fit.

    The downscaled image is the area-weighted mean of the original's pixels
    (same aspect ratio up to rounding of the pixel counts), each side scaled
    by ``s`` with ``s`` starting from ``sqrt(limit / size)`` and shrinking by
    10% until the PNG fits; written by ``matplotlib.image.imsave`` without the
    version stamp, so the same input gives the same file. Returns its size.
    """
    import io
    import shutil

    os.makedirs(os.path.dirname(dst), exist_ok=True)
    size = os.path.getsize(src)
    if size <= limit:
        shutil.copyfile(src, dst + ".tmp")
        os.replace(dst + ".tmp", dst)
        return size
    import matplotlib.image as mpimg
    import numpy as np

    img = np.asarray(mpimg.imread(src, format="png"), dtype=np.float64)      # a PNG reads as floats in [0, 1]
    if img.ndim == 2:
        img = img[:, :, None]
    if img.shape[2] in (1, 2):                                        # grey (and alpha): to RGB (and alpha)
        img = np.concatenate([np.repeat(img[:, :, :1], 3, axis=2), img[:, :, 1:]], axis=2)
    if img.shape[2] == 4 and np.all(img[:, :, 3] == 1.0):
        img = img[:, :, :3]
    height, width = img.shape[:2]
    scale = min(0.95, (limit / size) ** 0.5)
    while True:
        h, w = max(1, round(height * scale)), max(1, round(width * scale))
        small = np.clip(_resample(img, h, w), 0.0, 1.0)
        buf = io.BytesIO()
        mpimg.imsave(buf, np.floor(small * 255.0 + 0.5).astype(np.uint8), format="png",
                     metadata={"Software": None}, pil_kwargs={"optimize": True})
        data = buf.getvalue()
        if len(data) <= limit or h * w <= 1:
            break
        scale *= 0.9
    with open(dst + ".tmp", "wb") as f:
        f.write(data)
    os.replace(dst + ".tmp", dst)
    return len(data)


def keep_claims(out, name, claims_dir=None):
    """Keep a full run's claims (not its per-point payload) in ``claims_dir/<name>.json``, atomically, and
    its figures in ``claims_dir/figures/<name>/`` (each at most :data:`FIGURE_LIMIT` bytes, see
    :func:`store_figure`; files of an earlier run that this one did not draw are removed). A quick run
    is never kept (returns None)."""
    claims_dir = _kept_dir(claims_dir)
    path = os.path.join(out, name, f"{name}.json")
    doc = _load(path)
    if doc.get("quick"):
        return None
    kept = _kept(doc)
    fig_dir = os.path.join(claims_dir, "figures", name)
    files = [f["file"] for f in kept.get("figures", [])]
    present = [f for f in files if os.path.isfile(os.path.join(out, name, f))]
    if os.path.isdir(fig_dir):
        for old in os.listdir(fig_dir):
            if old not in present:
                os.remove(os.path.join(fig_dir, old))
    for f in present:
        store_figure(os.path.join(out, name, f), os.path.join(fig_dir, f))
    if os.path.isdir(fig_dir) and not os.listdir(fig_dir):
        os.rmdir(fig_dir)
    os.makedirs(claims_dir, exist_ok=True)
    target = os.path.join(claims_dir, f"{name}.json")
    with open(target + ".tmp", "w") as f:
        json.dump(kept, f, indent=1)
        f.write("\n")
    os.replace(target + ".tmp", target)
    return target


def sync_kept(out, names, claims_dir=None):
    """Keep (:func:`keep_claims`) every full run in ``out`` whose code is current and that is not kept yet
    (its claims or figures missing or different in ``claims_dir``): runs done outside ``run_all`` too.
    Returns the names kept."""
    claims_dir = _kept_dir(claims_dir)
    done = []
    for name in names:
        path = os.path.join(out, name, f"{name}.json")
        if not os.path.exists(path):
            continue
        doc = _load(path)
        if doc.get("quick") or _stale(doc):
            continue
        target = os.path.join(claims_dir, f"{name}.json")
        if os.path.exists(target) and _kept(_load(target)) == _kept(doc):
            fig_dir = os.path.join(claims_dir, "figures", name)
            wanted = {f["file"] for f in _figures(doc) if os.path.isfile(os.path.join(out, name, f["file"]))}
            have = set(os.listdir(fig_dir)) if os.path.isdir(fig_dir) else set()
            if wanted == have:
                continue
        keep_claims(out, name, claims_dir)
        done.append(name)
    return done


def find_result(out, name, quick, claims_dir=None):
    """The JSON of ``name``'s newest run: ``out`` first, then (full runs only) the kept one in ``claims_dir``.

    For the full report a quick run in ``out`` does not count, a run whose
    code is current is preferred to a stale one, and among equals the kept one
    (``sync_kept`` has already kept every current full run of ``out``), so the
    report does not depend on uncommitted results.
    """
    paths = [os.path.join(out, name, f"{name}.json")]
    if not quick:
        paths.append(os.path.join(_kept_dir(claims_dir), f"{name}.json"))
    found = []
    for path in paths:
        if os.path.exists(path):
            doc = _load(path)
            if not quick and doc.get("quick"):
                continue
            found.append((bool(_stale(doc)), 0 if path != paths[0] else 1, path))
    return min(found)[2] if found else None     # current first; the kept JSON among equals


def _cell(text):
    return " ".join(str(text).split()).replace("|", "\\|")


def _stale(doc):
    """The modules whose code changed since the JSON was produced (empty: current)."""
    if _CHECKOUT not in sys.path:
        sys.path.insert(0, _CHECKOUT)
    from rcurves.claims.record import changed_files

    return changed_files(doc, ROOT)


def _duration(seconds):
    """``18183`` -> ``'5 h 3 min'``."""
    minutes = int(round(seconds / 60.0))
    if minutes < 1:
        return f"{seconds:.0f} s"
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def _alt(text):
    return " ".join(str(text).split()).replace("[", "\\[").replace("]", "\\]")


def readme(out, quick, times, claims_dir=None, readme_dir=None):
    """The report's text, from the newest run of each script (:func:`find_result`).

    ``times`` (``{name: seconds}``) overrides the run times the JSONs record. A
    full report embeds the figures kept in ``claims_dir/figures/<name>/``, a
    quick one those in ``out/<name>/``; links are relative to ``readme_dir``
    (default: this folder for a full report, ``out`` for a quick one), where the
    report is written.
    """
    claims_dir = _kept_dir(claims_dir)
    readme_dir = readme_dir or (out if quick else HERE)
    rows, failed, stale, figures, no_figure, secs_of = [], [], {}, {}, {}, {}
    for name in scripts():
        path = find_result(out, name, quick, claims_dir)
        if path is None:
            failed.append(name)
            no_figure[name] = "no run"
            continue
        with open(path) as f:
            doc = json.load(f)
        secs = times.get(name, doc.get("seconds"))
        if isinstance(secs, (int, float)):
            secs_of[name] = secs
        changed = _stale(doc)
        is_stale = bool(changed)
        if is_stale:
            stale[name] = changed
        for c in doc.get("claims", []):
            rows.append((c["paper"], name, c, secs, doc.get("quick", False), is_stale))
        fig_dir = os.path.join(out, name) if quick else os.path.join(claims_dir, "figures", name)
        shown, missing = [], []
        for fig in _figures(doc):
            path = os.path.join(fig_dir, fig["file"])
            (shown if os.path.isfile(path) else missing).append((fig, path))
        if shown:
            figures[name] = (shown, is_stale)
        if missing or not shown:
            where = os.path.relpath(fig_dir, readme_dir).replace(os.sep, "/")
            no_figure[name] = ("none recorded" if not missing else
                               ", ".join(f"`{f['file']}`" for f, _ in missing) + f" recorded, not in `{where}/`")
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

    n_scripts = len(scripts())
    total = sum(secs_of.values())
    with_run = n_scripts - len(failed)
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
        "one (the splits are served class-interleaved) and models compared are measured on the same points. "
        "Each paper's table is followed by the figures its scripts drew.",
        "",
        f"**{n_scripts} scripts** (`experiments/<paper>/*.py`), "
        + ("all with a run" if not failed else f"{with_run} with a run") +
        f"; their recorded run times add up to {total:,.0f} s ({_duration(total)}), stale runs included. "
        f"Figures: shown for {len(figures)} of {n_scripts} scripts" + (
            "; the others are listed at the end." if no_figure else "."),
        "",
        f"Paper claims: {tally('paper')}. Checks of our own tools (self-check): {tally('self-check')}. "
        f"Beyond the papers: {tally('beyond')}." + (
            f" Scripts without results: {', '.join(failed)}." if failed else "") + (
            f" Stale (code changed since the run; not counted): {len(stale)} of {n_scripts} scripts, "
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
        names = []
        for p, name, c, secs, q, st in rows:
            if p != paper:
                continue
            if name not in names:
                names.append(name)
            cmd = f"`python {os.path.relpath(paths[name], ROOT)}" + (" --quick" if q else "") + "`"
            t = f"{secs:.0f} s" if isinstance(secs, (int, float)) else ""
            verdict = f"**{c['verdict']}**" + (" (stale: code changed since this run)" if st else "")
            lines.append(f"| {_cell(c['item'])} | {_cell(c['claim'])} | {_cell(c['ours'])} | {verdict} | "
                         f"{_cell(c['why'])} | {c.get('kind', 'paper')} | {cmd} | {t} |")
        lines.append("")
        drawn = [n for n in names if n in figures]
        if drawn:
            lines += [f"### Figures of {paper}", ""]
        for name in drawn:
            shown, st = figures[name]
            lines += [f"#### `{name}`" + (" (stale: code changed since this run)" if st else ""), ""]
            for fig, path in shown:
                link = os.path.relpath(path, readme_dir).replace(os.sep, "/")
                lines += [f"![{_alt(fig['caption'] or fig['file'])}]({link})", "",
                          f"`{fig['file']}`: " + (_cell(fig["caption"]) or "(no caption)"), ""]
    if no_figure:
        lines += ["## Scripts without a figure", ""]
        lines += [f"- `{name}`: {why}" for name, why in no_figure.items()]
        lines.append("")
    lines += ["Run times are each script's wall-clock time on this project's 2-core CPU machine as its JSON "
              "records it (`seconds`: from start-up to writing the JSON), including training any zoo model not yet "
              "cached and compiling the attacks.", ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="run every script with --quick")
    ap.add_argument("--out", default=None, help="results folder (default results/experiments[-quick])")
    ap.add_argument("--only", nargs="+", default=None, metavar="NAME", help="run only these scripts")
    ap.add_argument("--report", "--readme-only", dest="readme_only", action="store_true",
                    help="run nothing: rebuild the README from the results (--out, else experiments/claims), "
                         "listing stale rows; full runs in --out whose code is current are kept first")
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
    if not args.quick:
        for name in sync_kept(out, scripts()):
            print(f"kept {name} (a full run in {out} whose code is current) in {os.path.relpath(CLAIMS, ROOT)}")
    target = args.readme or (os.path.join(out, "README.md") if args.quick else os.path.join(HERE, "README.md"))
    # the full report is a function of the kept JSONs alone (their own run times), so --report on a
    # checkout rebuilds the committed file; a quick report shows the times measured here
    text = readme(out, args.quick, times if args.quick else {}, readme_dir=os.path.dirname(os.path.abspath(target)))
    with open(target + ".tmp", "w") as f:
        f.write(text)
    os.replace(target + ".tmp", target)
    print(f"wrote {target}")
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
