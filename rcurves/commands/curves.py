"""``rcurves curves``: per-point minimal adversarial distances and robustness curves of zoo models, checkpoints or
module:function models on a data set; with ``--certify`` also certified radii and the band between them."""
from __future__ import annotations

import math
from typing import Dict, Optional, Sequence

from rcurves.commands.common import (UserError, default_cache, load_data, load_model, parse_bounds, parse_norms,
                                     parse_thresholds, say, setup_jax)
from rcurves.models.loader import LoadedModel, check_model_on_data
from rcurves.pipeline.evaluation import AttackSettings, evaluate


def _parse_eps_max(items: Optional[Sequence[str]], norms: Sequence[str], bounds) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for item in items or ():
        if "=" not in item:
            raise UserError(f"--eps-max {item!r}: expected NORM=VALUE, e.g. l2=5")
        name, val = item.split("=", 1)
        norm = parse_norms(name)[0]
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


def run(args) -> int:
    norms = parse_norms(args.norm)
    thresholds = parse_thresholds(args.thresholds, norms)
    bounds = parse_bounds(args.bounds)
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
    cache = args.cache or default_cache()
    setup_jax(cache)
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
        say(f"  {label:<16} clean accuracy on {data.name} ({data.x.shape[0]} points): {ev.accuracy[label]:.3f}")
    ev.save(args.out, f"robustness curves on {data.name}")
    say(ev.table())
    say(f"wrote {args.out}/curves.json, curves.csv, distances.csv, curves.png, table.txt")
    if args.certify:
        _certify_bands(ev, models, data, bounds, args)
    return 0


def _certify_bands(ev, models, data, bounds, args) -> None:
    """``curves --certify``: certified radii (lower bounds) next to the attack distances, the band, a plot."""
    from rcurves import certify

    for label, m in models.items():
        if m.model is None:
            say(f"  {label}: --certify needs a toolkit model (zoo name or checkpoint), not a logits_fn; skipped")
    bands = certify.evaluation_bands(ev, models, data.x, data.y, method=args.certify, bounds=bounds)
    if bands:
        certify.save_bands(bands, args.out, f"attack vs certified ({args.certify}), {data.name}",
                           method=args.certify, description=f"all {data.x.shape[0]} points of {data.name}")
        say("\n".join(certify.band_lines(bands, args.certify)))
        say(f"wrote {args.out}/band.json, band.csv, band.png")
