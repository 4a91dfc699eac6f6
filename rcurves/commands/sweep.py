"""``rcurves sweep``: robustness over training: robust error, clean accuracy and median distance of every
checkpoint of a zoo model's training (or of given checkpoint folders)."""
from __future__ import annotations

import os

from rcurves.commands.common import UserError, default_cache, say, setup_jax
from rcurves.pipeline.report import DEFAULT_THRESHOLDS


def run(args) -> int:
    from rcurves.pipeline import sweep as sweep_mod

    if args.n is not None and args.n < 1:
        raise UserError("--n: expected a positive number of points")
    thresholds = tuple(args.thresholds or DEFAULT_THRESHOLDS[args.norm])
    if any(not (t >= 0) for t in thresholds):
        raise UserError("--thresholds: expected numbers >= 0")
    cache = args.cache or default_cache()
    if args.model is not None:
        from rcurves.models import zoo

        if args.every is None or args.every < 1:
            raise UserError("--every: with --model, expected a positive number of epochs")
        try:
            zoo.entry(args.model)
        except ValueError as e:
            raise UserError(str(e)) from None
        setup_jax(cache)
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
        setup_jax(cache)
        sw = sweep_mod.evaluate_checkpoints(models, args.data, norm=args.norm, thresholds=thresholds, n=args.n,
                                            seed=args.seed, progress=not args.no_progress,
                                            name=os.path.basename(os.path.normpath(args.checkpoints[-1])))
    paths = sweep_mod.save(sw, args.out)
    say(sweep_mod.table(sw))
    say("wrote " + ", ".join(paths))
    return 0
