"""``rcurves zoo``: list the model zoo (data, architecture, training, held-out accuracy, where the weights are);
``--train`` trains or loads entries, ``--ship`` writes their weights into the shipped folder."""
from __future__ import annotations

import json

from rcurves.commands.common import UserError, default_cache, say, setup_jax


def run(args) -> int:
    from rcurves.models import zoo

    cache = args.cache or default_cache()
    wanted = list(zoo.ENTRIES) if (args.train and "all" in args.train) else list(args.train or [])
    for name in wanted:
        zoo.entry(name)  # unknown names fail before anything trains
    if wanted:
        setup_jax(cache)
    if args.ship and not wanted:
        raise UserError("--ship: name the entries with --train NAME ... (or --train all)")
    for name in wanted:
        m = zoo.load(name, cache=cache, retrain=args.retrain, progress=not args.no_progress)
        say(f"{name}: {m.source}, test accuracy "
            f"{m.metrics['test_accuracy']:.4f} ({m.metrics.get('train_seconds', 0):.0f} s of training)")
        if args.ship:
            say(f"  shipped: {zoo.shipped.ship(name, zoo.recipe_key(name), m.path) if m.source != 'shipped' else m.path}")
    say(f"{'model':<34} {'data':<10} {'arch':<7} {'training':<22} {'test acc':>8}  weights")
    for name, e in zoo.ENTRIES.items():
        try:
            a = zoo.cached_accuracy(e, cache)
            acc = "" if a is None else f"{a:.4f}"
            where = "shipped" if zoo.is_shipped(e) else ("cached" if acc else "not trained")
        except zoo.CheckpointError as err:  # a broken cache entry is retrained by load; a shipped one refused
            acc, where = "broken", str(err)
        say(f"{name:<34} {e.dataset:<10} {e.model.arch:<7} {e.train.name:<22} {acc:>8}  {where}")
    if args.verbose:
        for name, e in zoo.ENTRIES.items():
            say(f"\n{name}: {e.note}\n  {json.dumps(e.train.to_dict())}")
    return 0
