"""``rcurves sparsity``: adversarial sparsity (paper 004) of one model on a data set at one radius, per point,
as a chunked, resumable res."""
from __future__ import annotations

from typing import Optional

from rcurves.commands.common import (UserError, default_cache, load_data, load_model, parse_bounds, parse_norms,
                                     say, setup_jax)
from rcurves.models.loader import check_model_on_data


def _runner_devices(n: int) -> Optional[int]:
    """``run_chunked``'s ``devices``: None (the plain 1-device path) for 1."""
    return None if n == 1 else n


def run(args) -> int:
    from rcurves.pipeline import measures

    norm = parse_norms(args.norm)
    if len(norm) != 1 or norm[0] not in ("l2", "linf"):
        raise UserError("--norm: adversarial sparsity is defined for exactly one of l2, linf")
    if args.eps <= 0:
        raise UserError(f"--eps: expected a positive radius, got {args.eps}")
    if args.chunk_size == "auto":
        raise UserError("--chunk-size: 'auto' is for curves; give the sparsity run a number of points")
    data = load_data(args.data, args.split, n=args.n, seed=args.seed)
    model = load_model(args.model, args.label)
    check_model_on_data(model, data)
    bounds = parse_bounds(args.bounds)
    setup_jax(args.cache or default_cache())
    res = measures.sparsity_run(model, data, norm[0], args.eps, directions=args.directions,
                                search_steps=args.search_steps, steps=args.steps, bounds=bounds, seed=args.seed,
                                out_dir=args.out, chunk_size=args.chunk_size, resume=args.resume,
                                devices=_runner_devices(args.devices), progress=not args.no_progress)
    paths = measures.save_sparsity(res, args.out)
    say(res.line())
    say(f"wrote {paths[0]}")
    return 0
