"""The docs' measured tables, written from the benchmarks' committed JSON (``benchmarks/measured/``).

A table in a docs page sits between two markers, ``<!-- table:NAME -->`` and
``<!-- /table:NAME -->``; :data:`TABLES` says which JSON file and which
renderer write it. Every table starts with the line that produced its numbers:
the command, the machine and the date (the JSON's ``provenance``, which
``_common.write_json`` records). To publish new numbers, run the benchmark
with ``--out benchmarks/measured/<name>.json`` and then this script; the
test ``tests/test_doc_tables.py`` fails while a page differs from what this
script writes.

    python benchmarks/doc_tables.py            # rewrite the tables in the docs
    python benchmarks/doc_tables.py --check    # exit 1, naming the tables that differ
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from typing import Callable, Dict, List, NamedTuple, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEASURED = os.path.join(ROOT, "benchmarks", "measured")


class Table(NamedTuple):
    """One generated table: the page it lives in, the JSON it is written from, and its renderer
    (``json dict -> markdown lines``, the provenance line excluded)."""

    doc: str
    source: str
    render: Callable[[dict], List[str]]


def _num(v) -> float:
    return float(v) if not isinstance(v, str) else float(v.replace("inf", "Infinity"))


def _f(v, digits: int = 2) -> str:
    if v is None:
        return ""
    v = _num(v)
    return "inf" if math.isinf(v) else f"{v:.{digits}f}"


def _md(header: List[str], rows: List[List[str]]) -> List[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(r) + " |" for r in rows])


def provenance_line(data: dict, source: str) -> str:
    p = data.get("provenance")
    if not p:
        raise ValueError(f"{source}: no 'provenance' (command, machine, date): re-run the benchmark")
    load = [m["loadavg_1_5_15"][0] for m in (data.get("machine"), data.get("machine_end"))
            if m and m.get("loadavg_1_5_15")]
    shared = (f", load average {' to '.join(f'{v:.1f}' for v in load)}" if load else "")
    return (f"Measured by `{p['command']}` on {p['machine']}{shared}, jax {p['jax']}, {p['date']} "
            f"(`benchmarks/measured/{source}`).")


# ---------------------------------------------------------------------------
# attack_overhead.py

_OVERHEAD_MODELS = (("mlp", "MNIST MLP 784-256-256"), ("cnn", "2-conv MNIST CNN (C.1)"),
                    ("flax-cnn", "the same CNN written with flax `nn.Conv`"))


def _overhead_rows(data: dict) -> Dict[tuple, dict]:
    return {(arch, r["attack"]): r for arch, m in data["models"].items() for r in m["rows"]}


def attack_overhead(data: dict) -> List[str]:
    """The default search's time over the time of as many bare batched gradients: the median of the per-round
    wall-time ratios (``ratio_paired``) and, in brackets, the ratio of the median process CPU times."""
    rows = _overhead_rows(data)
    out = []
    for arch, label in _OVERHEAD_MODELS:
        if arch not in data["models"]:
            continue
        n = data["models"][arch]["n"]
        cells = [f"{_f(rows[(arch, a)]['ratio_paired'])} ({_f(rows[(arch, a)]['ratio_cpu'])})"
                 if (arch, a) in rows else "" for a in ("minimal linf", "minimal l2", "cw l2")]
        out.append([f"{label}, {n} points"] + cells)
    return _md(["model", "l_inf: wall (CPU)", "l_2: wall (CPU)", "CW (l_2): wall (CPU)"], out)


def escalation_cost(data: dict) -> List[str]:
    """The adaptive default's escalation searches per gradient, over the default search (median wall times)."""
    rows = _overhead_rows(data)
    header, smoothed, noisy = ["per gradient, over the default search"], ["through smoothed ReLUs"], \
        ["with noisy gradients"]
    for arch, label in _OVERHEAD_MODELS[:2]:
        for norm in ("linf", "l2"):
            base = rows.get((arch, f"minimal {norm}"))
            if base is None or (arch, f"minimal {norm} smoothed") not in rows:
                continue
            header.append(f"{arch.upper()} {'l_inf' if norm == 'linf' else 'l_2'}")
            for line, kind in ((smoothed, "smoothed"), (noisy, "noisy")):
                line.append(_f(rows[(arch, f"minimal {norm} {kind}")]["attack_s"] / base["attack_s"]) + "x")
    return _md(header, [smoothed, noisy])


# ---------------------------------------------------------------------------
# verify_speed.py

_DECIDERS = {"crown": "CROWN", "alpha-crown": "alpha-CROWN", "bab": "bab", "root": "the search's root",
             "pgd": "PGD", "centre": "the centre", "search": "the adaptive search", "ensemble": "the ensemble"}


def verify_table(data: dict) -> List[str]:
    """Per eps: verified / falsified / unknown at the time limit, the median and largest time, how each was
    decided (``VerifyResult.detail``)."""
    out = []
    for r in data["rows"]:
        how = {}
        for key, n in r["details"].items():
            status, _, detail = key.partition(":")
            if status == "unknown":
                continue
            word = _DECIDERS.get(detail, detail)
            how[word] = how.get(word, 0) + n
        decided = ", ".join(f"{k} {v}" for k, v in sorted(how.items(), key=lambda kv: (-kv[1], kv[0])))
        out.append([f"{r['eps']:g}", str(r["verified"]), str(r["falsified"]), str(r["unknown"]),
                    f"{_f(r['median_s'])} / {_f(r['max_s'], 1)} s", decided])
    return _md(["eps", "verified", "falsified", f"unknown ({data['time_limit']:g} s)", "median / largest time",
                "decided by"], out)


def verify_unknowns(data: dict) -> List[str]:
    """Every property left unknown: the subdomains branch and bound bounded, the lower bound it proved on the
    margin (negative: not verified) and the smallest margin an attack found (positive: not falsified)."""
    out = []
    for p in data["points"]:
        if p["status"] != "unknown":
            continue
        lo, up = p.get("margin_lower"), p.get("margin_upper")
        out.append([f"{p['eps']:g}", str(p["point"]), f"{p['subdomains']:,}", _f(lo, 3), _f(up, 3),
                    p.get("detail", "")])
    return _md(["eps", "point", "subdomains bounded", "margin lower bound", "smallest margin found", "stopped"],
               out)


def bab_batch_sweep(data: dict) -> List[str]:
    """Branch and bound's subdomains per second (median over the boxes, and per CPU second) against its batch,
    with the bytes XLA's memory analysis gives the compiled step."""
    out = []
    for r in data["rows"]:
        if "per_s_median" not in r:
            out.append([str(r["batch"]), "", "", "", f"{r['step_bytes_full'] / 2 ** 20:.1f}",
                        r.get("stopped", "")])
            continue
        out.append([str(r["batch"]), f"{r['per_s_median']:,.0f}",
                    f"{r['per_s_min']:,.0f}-{r['per_s_max']:,.0f}", f"{r['per_cpu_s_median']:,.0f}",
                    f"{r['step_bytes_full'] / 2 ** 20:.1f}", r.get("stopped", "")])
    return _md(["batch", "subdomains/s (median)", "range over boxes", "per CPU second", "step MiB", "stopped"],
               out)


# ---------------------------------------------------------------------------
# attack_quality.py


def _pct(row) -> str:
    """A row's 90th-percentile excess over the best known distance, with the points it left unbroken."""
    cell = f"{_num(row['p90_excess_%']):.2f}%"
    unbroken = 1.0 - float(row["broken"])
    return cell + (f" ({100 * unbroken:.0f}% unbroken)" if unbroken > 0 else "")


def _share(percent: float) -> str:
    return f"{percent:.0f}%" if percent == 0 or percent >= 10 else f"{percent:.1f}%"


#: how ``attack_quality.py`` names the target it sets on the models in its ``MASKED`` (gradient-masked near the
#: data): the rows marked "(masked)" are those the run itself held to that target.
_MASKED_TARGET = "adaptive: 90th pct within 3%"


def attack_quality(data: dict) -> List[str]:
    """Per model and norm, the 90th percentile of ``distance / best known - 1`` over the correctly classified
    points: the fixed default search, the adaptive default (its gradients per point over the fixed one's, and the
    share of points it escalated), the ensemble at the run's largest budget and, with ``--reference``, the
    independent reference ensemble (whose distances are part of the best known)."""
    by = {(r["model"], r["norm"], r["attack"], str(r["G"])): r for r in data["rows"]}
    G, R = max(data["config"]["budgets"]), data["config"].get("reference") or 0
    masked = {(t["model"], t["norm"]) for t in data.get("targets", ()) if t["what"].startswith(_MASKED_TARGET)}
    out = []
    for m in data["models"]:
        for norm in m["norms"]:
            key = (m["name"], norm)
            fixed, adaptive = by.get(key + ("minimal (default)", "default")), by.get(key + ("adaptive", "default"))
            ens = by.get(key + ("ensemble", str(G)))
            ref = by.get(key + ("reference ensemble", str(R))) if R else None
            label = f"`{m['name']}`, {'l_inf' if norm == 'linf' else 'l_2'}" + (" (masked)" if key in masked else "")
            out.append([label, str(m["n"]), _pct(fixed) if fixed else "", _pct(adaptive) if adaptive else "",
                        f"{adaptive['grad/pt'] / adaptive['default_grad/pt']:.2f}x" if adaptive else "",
                        _share(adaptive["escalated_%"]) if adaptive else "", _pct(ens) if ens else ""]
                       + ([_pct(ref) if ref else ""] if R else []))
    return _md(["model, norm", "points", "fixed default", "adaptive", "gradients vs fixed", "escalated",
                f"ensemble, {G:,} gradients"] + ([f"reference ensemble, {R:,}"] if R else []), out)


# ---------------------------------------------------------------------------
# certify_speed.py


def certify_band(data: dict) -> List[str]:
    """Per model, the median attack / certified ratio of the band (correctly classified points) in l_inf and,
    in brackets, l_2: CROWN on every point (its median wall time per point over interleaved rounds), branch and
    bound on its subset, with its median radius gain over CROWN on that subset and its time per point (one call,
    compilation included: wall, and process CPU)."""
    by = {}
    for r in data["rows"]:
        by[(r["model"], r["norm"], "bab" if r["method"].startswith("bab-") else r["method"])] = r

    def pair(model, method, key, fmt):
        linf, l2 = (fmt(by[(model, n, method)][key]) if (model, n, method) in by else None for n in ("linf", "l2"))
        return (linf or "") if l2 is None else f"{linf or '-'} ({l2})"

    out = []
    for model in data["models"]:
        if (model, "linf", "crown") not in by:
            continue
        bab = by.get((model, "linf", "bab"))
        points = "/".join(str(by[(model, n, "crown")]["n"]) for n in ("linf", "l2") if (model, n, "crown") in by)
        bab_points = "/".join(str(by[(model, n, "bab")]["n"]) for n in ("linf", "l2") if (model, n, "bab") in by)
        out.append([f"`{model}`", points, bab_points or "-",
                    pair(model, "crown", "s_per_point", lambda v: f"{1000 * v:.1f} ms"),
                    pair(model, "crown", "median_ratio", _f),
                    pair(model, "bab", "median_ratio", _f),
                    pair(model, "bab", "radius_gain_median", lambda v: f"{100 * (v - 1):.0f}%"),
                    pair(model, "bab", "s_per_point", lambda v: f"{v:.2f} s"),
                    pair(model, "bab", "cpu_s_per_point", lambda v: f"{v:.2f} s"),
                    str(bab["method"].split("-")[1]) if bab else ""])
    return _md(["model", "points l_inf/l_2", "bab points", "CROWN per point", "CROWN: attack / certified",
                "branch and bound",
                "bab over CROWN (radius)", "bab wall per point", "bab CPU per point", "budget"], out)


def certify_milp(data: dict) -> List[str]:
    """HiGHS's MILP (``certify.exact_search``) on random correctly classified points of the digits MLPs: the
    share made exact within the time limit, and CROWN's and branch and bound's radii over the exact distance."""
    out = []
    for r in data.get("milp_rows", []):
        out.append([r["model"], str(r["n"]), f"{r['time_limit_s']:g} s", f"{100 * r['exact']:.0f}%",
                    _f(r["crown_over_exact_median"], 4), _f(r["bab_over_exact_median"], 4),
                    f"{100 * r['bab_above_milp_lower']:.0f}%", "yes" if r["bab_at_most_upper"] else "**no**",
                    f"{r['bab_s_per_point']:.2f} s"])
    return _md(["model", "points", "MILP limit", "exact", "CROWN / exact (median)", "bab / exact (median)",
                "bab above the MILP's lower bound", "bab <= MILP upper bound", "bab per point"], out)


# ---------------------------------------------------------------------------
# model_scale.py


def model_scale(data: dict) -> List[str]:
    """Per architecture (random weights), the default l_inf search: its first call, a second checkpoint of the
    same architecture against a warm call, the compilations of that second call, the search's time over as many
    bare gradients, and XLA's temporary buffers at two chunk sizes."""
    chunks = data["config"]["chunks"]
    out = []
    for r in data["rows"]:
        out.append([r["model"], f"{r['params']:,}", str(r["n"]), f"{r['first_s']:.1f} s",
                    f"{r['second_ckpt_s']:.2f} / {r['warm_s']:.2f} s ({r['second_over_warm']:.2f})",
                    str(r["compiles_second"]), _f(r["x_floor"]),
                    " / ".join(f"{r[f'temp_mb@{c}']:.0f}" for c in chunks)])
    return _md(["model", "params", "points", "first call", "2nd checkpoint / warm call", "compilations (2nd)",
                "attack / floor", "temp MB at chunk " + " / ".join(map(str, chunks))], out)


# ---------------------------------------------------------------------------
# training_methods.py


def _rate(value: float, interval) -> str:
    """A proportion in percent with its 95% Wilson interval."""
    lo, hi = interval
    return f"{100 * value:.2f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def zoo_band(data: dict) -> List[str]:
    """Per trained model at its threat model: clean error on the whole test split; certified error (CROWN or IBP,
    in brackets CROWN alone) and the attack's robust error on the same uniformly random points, each with its 95%
    Wilson interval; the points certified although the attack broke them within eps (a soundness count: must be
    0); the median attack / certified ratio of the band with CROWN and with branch and bound, and the latter's
    wall time per point (compilation included)."""
    out = []
    for r in data["rows"]:
        bab = (f"{_f(r['band_bab'])} ({r['n_bab']}; {r['bab_seconds_per_point']:.0f} s per point)"
               if "band_bab" in r else "-")
        out.append([f"`{r['model']}`", f"{'l_inf' if r['norm'] == 'linf' else 'l_2'} {r['eps']:g}",
                    f"{100 * r['clean_error']:.2f}% ({r['n_clean']:,})",
                    _rate(r["certified_error"], r["certified_error_wilson"])
                    + f" ({100 * r['certified_error_crown']:.2f}%)",
                    _rate(r["attack_error"], r["attack_error_wilson"]) + f" ({r['n_attack']:,})",
                    str(r["certified_but_broken"]),
                    f"{_f(r['band_crown'])} ({r['n_band']})", bab, r["published"]])
    return _md(["model", "norm, eps", "clean error (points)", "certified error, 95% Wilson (CROWN alone)",
                "attack robust error, 95% Wilson (points)", "certified but broken",
                "band: attack / certified, CROWN (points)", "branch and bound (points)", "published"], out)


#: every generated table: NAME -> (page, JSON file under benchmarks/measured/, renderer)
TABLES: Dict[str, Table] = {
    "attack-overhead": Table("docs/attacks.md", "attack_overhead.json", attack_overhead),
    "escalation-cost": Table("docs/attacks.md", "attack_overhead.json", escalation_cost),
    "bab-batch-sweep": Table("docs/certify.md", "verify_batch_sweep.json", bab_batch_sweep),
    "verify": Table("docs/certify.md", "verify_speed.json", verify_table),
    "verify-unknowns": Table("docs/certify.md", "verify_speed.json", verify_unknowns),
    "verify-4layer": Table("docs/certify.md", "verify_speed_4layer.json", verify_table),
    "verify-4layer-unknowns": Table("docs/certify.md", "verify_speed_4layer.json", verify_unknowns),
    "attack-quality": Table("docs/attacks.md", "attack_quality.json", attack_quality),
    "attack-quality-mlp": Table("docs/attacks.md", "attack_quality_mlp.json", attack_quality),
    "certify-band": Table("docs/certify.md", "certify_speed.json", certify_band),
    "certify-milp": Table("docs/certify.md", "certify_speed.json", certify_milp),
    "model-scale": Table("docs/attacks.md", "model_scale.json", model_scale),
    "model-scale-w64": Table("docs/attacks.md", "model_scale_w64.json", model_scale),
    "zoo-band": Table("docs/zoo.md", "training_methods.json", zoo_band),
}


def render(name: str) -> str:
    """The block of table ``name`` (between its markers): the provenance line, a blank line, the table."""
    t = TABLES[name]
    with open(os.path.join(MEASURED, t.source)) as f:
        data = json.load(f)
    return "\n".join([provenance_line(data, t.source), ""] + t.render(data))


def _pattern(name: str):
    return re.compile(rf"(<!-- table:{re.escape(name)} -->\n)(.*?)(<!-- /table:{re.escape(name)} -->)", re.S)


def current(name: str, text: str) -> Optional[str]:
    """The block of table ``name`` as ``text`` (a page) holds it; None without its markers."""
    m = _pattern(name).search(text)
    return None if m is None else m.group(2).rstrip("\n")


def write(names=None, check: bool = False) -> List[str]:
    """Rewrite (or, with ``check``, only compare) the tables; returns the names that differed."""
    differ = []
    for name in names or TABLES:
        path = os.path.join(ROOT, TABLES[name].doc)
        with open(path) as f:
            text = f.read()
        have, want = current(name, text), render(name)
        if have is None:
            raise ValueError(f"{TABLES[name].doc}: no markers <!-- table:{name} --> ... <!-- /table:{name} -->")
        if have != want:
            differ.append(name)
            if not check:
                text = _pattern(name).sub(lambda m: m.group(1) + want + "\n" + m.group(3), text)
                with open(path, "w") as f:
                    f.write(text)
    return differ


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="compare only; exit 1 if a table differs")
    p.add_argument("names", nargs="*", help=f"tables (default all: {', '.join(TABLES)})")
    args = p.parse_args(argv)
    differ = write(args.names, check=args.check)
    for name in differ:
        print(f"{'differs' if args.check else 'rewrote'}: {name} ({TABLES[name].doc})")
    return 1 if (args.check and differ) else 0


if __name__ == "__main__":
    sys.exit(main())
