"""``rcurves interclass``: each point's distance to the nearest point of another class, per norm (paper 000,
Sec. 3.3)."""
from __future__ import annotations

from rcurves.commands.common import load_data, parse_norms, parse_thresholds, say


def run(args) -> int:
    from rcurves.pipeline import measures

    norms = parse_norms(args.norm)
    thresholds = parse_thresholds(args.thresholds, norms)
    data = load_data(args.data, args.split, n=args.n, seed=args.seed)
    res = measures.interclass_run(data, norms, thresholds, progress=not args.no_progress)
    measures.save_interclass(res, args.out)
    say("\n".join(res.lines()))
    say(f"wrote {args.out}/interclass.json, interclass.csv, interclass.png")
    return 0
