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


#: the longest a line of the index may be (characters): it is read on a laptop screen
INDEX_WIDTH = 200
_SHORT = 70          # the claim's words in the index, when the claim gives no ``short``


def _clip(text, n):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _paper_folder(paper):
    """``'000'`` -> ``'000_global_comparison'``: the folder of the paper's scripts (its evidence page's home)."""
    found = sorted(glob.glob(os.path.join(HERE, f"{paper}_*")))
    return os.path.basename(found[0]) if found else paper


def _wrapped(lines, width=118):
    """``lines`` with every long line of prose (not a table row, heading, image or anchor) wrapped at ``width``
    (a bullet's continuation indented), so that the page's source reads on a laptop screen too."""
    import textwrap

    out = []
    for line in lines:
        if len(line) <= width or line.startswith(("|", "#", "!", "<")):
            out.append(line)
            continue
        indent = "  " if line.startswith("- ") else ""
        out += textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
    return out


def _anchor(name, i):
    return f"{name}-{i + 1}".replace("_", "-")


def _gather(out, quick, times, claims_dir):
    """Every script's newest result: ``[(name, doc or None, seconds, changed modules, figures shown, missing)]``."""
    got = []
    for name in scripts():
        path = find_result(out, name, quick, claims_dir)
        if path is None:
            got.append((name, None, None, [], [], ("no run", [], None)))
            continue
        with open(path) as f:
            doc = json.load(f)
        secs = times.get(name, doc.get("seconds"))
        fig_dir = os.path.join(out, name) if quick else os.path.join(claims_dir, "figures", name)
        shown, missing = [], []
        for fig in _figures(doc):
            fpath = os.path.join(fig_dir, fig["file"])
            (shown if os.path.isfile(fpath) else missing).append((fig, fpath))
        why = None
        if missing or not shown:
            why = ("none recorded", [], None) if not missing else ("", [f["file"] for f, _ in missing], fig_dir)
        got.append((name, doc, secs if isinstance(secs, (int, float)) else None, _stale(doc), shown, why))
    return got


def report(out, quick, times, claims_dir=None, readme_dir=None):
    """The report's pages, ``{path: text}``: the index (``readme_dir/README.md``) and one evidence page per paper
    (``readme_dir/<paper folder>/README.md``), from the newest run of each script (:func:`find_result`).

    The index has, per paper, one line per claim: the claim in a few words (its ``short``, else its item), the
    paper's number and ours (``paper_value``, ``ours_value``, where the claim gives them), the verdict and a link
    to the claim's evidence; the claims beyond the paper and the self-checks are counted there and listed on the
    evidence pages. An evidence
    page has, per script, its command, run time and figures, and per claim the statement, what we measured (the
    statistic, its test, sample, power and family) and why the verdict. ``times`` (``{name: seconds}``)
    overrides the run times the JSONs record. A full report embeds the figures kept in
    ``claims_dir/figures/<name>/``, a quick one those in ``out/<name>/``; ``readme_dir`` (default: this folder
    for a full report, ``out`` for a quick one) is where the index is written.
    """
    claims_dir = _kept_dir(claims_dir)
    readme_dir = readme_dir or (out if quick else HERE)
    got = _gather(out, quick, times, claims_dir)
    paths = script_paths()
    failed = [g[0] for g in got if g[1] is None]
    stale = {g[0]: g[3] for g in got if g[1] is not None and g[3]}
    secs_of = {g[0]: g[2] for g in got if g[2] is not None}
    rows = [(c.get("paper", "?"), name, i, c, bool(changed), doc.get("quick", False))
            for name, doc, _, changed, _, _ in got if doc is not None for i, c in enumerate(doc.get("claims", []))]
    counts = {}
    for _, _, _, c, st, _ in rows:
        if not st:
            kind = counts.setdefault(c.get("kind", "paper"), {})
            kind[c["verdict"]] = kind.get(c["verdict"], 0) + 1

    def tally(kind):
        return ", ".join(f"{v} {k}" for k, v in sorted(counts.get(kind, {}).items())) or "none"

    n_scripts, total = len(got), sum(secs_of.values())
    figured = sum(1 for g in got if g[4])
    lines = [
        "# Experiments: the papers' claims, checked",
        "",
        "Generated by `python experiments/run_all.py" + (" --quick" if quick else "") + "` from the `claims` of "
        "each script's JSON (do not edit by hand). One line per claim of a paper: the claim, the paper's number, "
        "ours, and the verdict of a rule that can fail (`rcurves/claims/`; each rule is fed a failing case in "
        "`tests/claims/`). The link leads to the claim's evidence: its test, sample, power and family, the reason "
        "for the verdict, and the script's figures.",
        "",
        "**reproduced**: the effect shows, in the paper's direction and, where it gives one, size. **differs**: "
        "the sample could have shown it and does not, or shows the opposite. **inconclusive**: the sample could "
        "not have shown it either way. **not reproducible here**: with the reason.",
        "",
        "MNIST is the full set (60,000 / 10,000; `load_dataset('mnist-full')`); the models are our own, trained "
        "here on a CPU (`rcurves zoo`); there is no CIFAR-10 (paper 004's CIFAR-10 experiments run on full "
        "MNIST). Test points are random or stratified samples; whether models share their points is said in each "
        "claim's evidence.",
        "",
        f"**{n_scripts} scripts** (`experiments/<paper>/*.py`), " + ("all with a run" if not failed else
                                                                    f"{n_scripts - len(failed)} with a run")
        + f", run times adding up to {total:,.0f} s ({_duration(total)}); figures for {figured} of them. "
        f"Paper claims: {tally('paper')}. Beyond the papers: {tally('beyond')}. "
        f"Self-checks of our tools: {tally('self-check')}."
        + (f" Without results: {', '.join(failed)}." if failed else "")
        + (f" **Stale** (code changed since the run; not counted): {', '.join(f'`{n}`' for n in stale)}; "
           "the evidence pages name the changed modules; re-run with `python experiments/run_all.py --only NAME`."
           if stale else ""),
        "",
    ]
    if quick:
        lines += ["**These are `--quick` runs** (tiny stand-in models, few points): they exercise the code and "
                  "the exact checks; their verdicts are not the papers' reproductions.", ""]
    pages = {}
    for paper in sorted({r[0] for r in rows}):
        folder = _paper_folder(paper)
        mine = [r for r in rows if r[0] == paper]
        lines += [f"## {paper}: {PAPERS.get(paper, '')} ([evidence]({folder}/README.md))", ""]
        sel = [r for r in mine if r[3].get("kind", "paper") == "paper"]
        if sel:
            lines += ["| claim | paper | ours | verdict | evidence |", "|---|---|---|---|---|"]
            for _, name, i, c, st, _ in sel:
                verdict = f"**{c['verdict']}**" + (" (stale)" if st else "")
                link = f"[{name} {i + 1}]({folder}/README.md#{_anchor(name, i)})"
                fixed = len(verdict) + len(link) + 20
                room = max(20, INDEX_WIDTH - fixed)
                paper_v = _cell(_clip(c.get("paper_value", ""), 24))
                ours_v = _cell(_clip(c.get("ours_value", ""), 24))
                short = _cell(_clip(c.get("short") or c["item"], min(_SHORT, room - len(paper_v) - len(ours_v))))
                lines.append(f"| {short} | {paper_v} | {ours_v} | {verdict} | {link} |")
            lines.append("")
        for kind, title in (("beyond", "Claims beyond the paper"), ("self-check", "Self-checks of our tools")):
            more = [r for r in mine if r[3].get("kind") == kind]
            if more:
                current = _count(r[3]["verdict"] for r in more if not r[4])
                lines += [f"{title}: {len(more)}, listed in the evidence ("
                          + (", ".join(f"{v} {k}" for k, v in sorted(current.items())) or "none") + " current).", ""]
        pages[os.path.join(readme_dir, folder, "README.md")] = _evidence(
            paper, folder, [g for g in got if g[1] is not None and any(r[1] == g[0] for r in mine)],
            paths, quick, os.path.join(readme_dir, folder))
    lines += ["Run times are each script's wall-clock time on this project's 2-core CPU machine as its JSON "
              "records it (from start-up to writing the JSON), including training any zoo model not yet cached and "
              "compiling the attacks.", ""]
    pages = {os.path.join(readme_dir, "README.md"): "\n".join(_wrapped(lines)), **pages}
    return pages


def _count(items):
    out = {}
    for v in items:
        out[v] = out.get(v, 0) + 1
    return out


def _no_figure(why, page_dir):
    """Why a script shows no figure: ``why`` is ``(text, missing files, their folder)``; the folder is given
    relative to ``page_dir``, where the text is shown."""
    text, missing, fig_dir = why
    if not missing:
        return text
    where = os.path.relpath(fig_dir, page_dir).replace(os.sep, "/")
    return ", ".join(f"`{f}`" for f in missing) + f" recorded, not in `{where}/`"


def _evidence(paper, folder, got, paths, quick, page_dir):
    """One paper's evidence page: per script, its command, run time, stale modules and figures; per claim, the
    statement, what we measured and why the verdict (anchored ``<name>-<k>``, as the index links)."""
    lines = [f"# {paper}: {PAPERS.get(paper, '')}: the evidence", "",
             "[Back to the report](../README.md). Generated by `python experiments/run_all.py"
             + (" --quick" if quick else "") + "` (do not edit by hand).", ""]
    for name, doc, secs, changed, shown, no_fig in got:
        cmd = f"`python {os.path.relpath(paths[name], ROOT)}" + (" --quick" if doc.get("quick") else "") + "`"
        t = f", {secs:.0f} s" if secs is not None else ""
        lines += [f"## `{name}`", "", f"{cmd}{t}." + (
            " **Stale**: code changed since this run in " + ", ".join(f"`{c}`" for c in changed[:8])
            + (f" and {len(changed) - 8} more" if len(changed) > 8 else "") + "." if changed else ""), ""]
        if no_fig:
            lines += [f"Figures: {_no_figure(no_fig, page_dir)}.", ""]
        for fig, fpath in shown:
            link = os.path.relpath(fpath, page_dir).replace(os.sep, "/")
            lines += [f"![{_alt(fig['file'])}]({link})", "",
                      f"`{fig['file']}`: " + (_cell(fig["caption"]) or "(no caption)"), ""]
        for i, c in enumerate(doc.get("claims", [])):
            if c.get("paper", paper) != paper:
                continue
            kind = c.get("kind", "paper")
            lines += [f'<a id="{_anchor(name, i)}"></a>', "",
                      f"### {name} {i + 1}: {' '.join(str(c['item']).split())}", "",
                      f"- **Claim** ({kind}): {' '.join(str(c['claim']).split())}"]
            if c.get("paper_value") or c.get("ours_value"):
                lines.append(f"- **Numbers**: the paper {c.get('paper_value', '-')}; ours {c.get('ours_value', '-')}")
            lines += [f"- **Verdict**: **{c['verdict']}**" + (" (stale)" if changed else ""),
                      f"- **Measured**: {' '.join(str(c['ours']).split())}"]
            if c.get("why"):
                lines.append(f"- **Why**: {' '.join(str(c['why']).split())}")
            lines.append("")
    return "\n".join(_wrapped(lines))


def readme(out, quick, times, claims_dir=None, readme_dir=None):
    """The report's index page (:func:`report`'s first page)."""
    return next(iter(report(out, quick, times, claims_dir, readme_dir).values()))


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
    pages = report(out, args.quick, times if args.quick else {}, readme_dir=os.path.dirname(os.path.abspath(target)))
    pages[os.path.abspath(target)] = pages.pop(next(iter(pages)))
    for path, text in pages.items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
        print(f"wrote {os.path.relpath(path, ROOT)}")
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
