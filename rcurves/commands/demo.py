"""``rcurves demo``: the zoo's ST and adversarially trained CNNs on MNIST, their curves, plot and table (paper 000,
Table 1), and the certified band of one of them."""
from __future__ import annotations

import os

from rcurves.commands.common import UserError, default_cache, say, setup_jax


def run(args) -> int:
    from rcurves.pipeline import demo

    preset = "tiny" if args.tiny else ("quick" if args.quick else "default")
    try:
        s = demo.settings(preset, n_test=args.n, cw=False if args.no_cw else None)
    except ValueError as e:
        raise UserError(f"--{e}") from None
    cache = args.cache or default_cache()
    setup_jax(cache)
    say(f"rcurves demo ({preset}): {len(s.entries())} zoo models on MNIST, curves on {s.n_test} random held-out "
        f"test points; cache {cache}")
    res = demo.run_demo(s, args.out, seed=args.seed, cache=cache, retrain=args.retrain, recompute=args.recompute,
                        devices=args.devices, band=not args.no_band, progress=not args.no_progress, preset=preset,
                        say=say)
    say("")
    say(res.evaluation.table())
    say(f"wrote {os.path.join(args.out, 'curves.json')}, curves.csv, distances.csv, curves.png, table.txt "
        f"({res.evaluation.seconds:.0f} s)")
    if res.band is not None:
        say("")
        say("\n".join(res.band.lines) + f"\n  on {res.band.description}")
        say(f"wrote {os.path.join(args.out, 'band.json')}, band.csv, band.png ({res.band.seconds:.0f} s)")
    return 0
