"""``rcurves train``: train one model (standard, adversarial, TRADES, certified or MMR training) and save it as a
checkpoint folder."""
from __future__ import annotations

from typing import Optional

from rcurves.commands.common import UserError, default_cache, load_data, parse_bounds, say, setup_jax
from rcurves.data.loader import BUILTIN_DATA, Data


def run(args) -> int:
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
            warmup_epochs=args.warmup_epochs, bounds=parse_bounds(args.bounds), seed=args.seed,
            lr_schedule=args.lr_schedule, augment=args.augment, trades_beta=args.trades_beta,
            kappa_final=args.kappa_final, **mmr_kw,
        )
        check_method_arch(model_cfg, train_cfg)
    except ValueError as e:
        raise UserError(str(e)) from None
    setup_jax(args.cache or default_cache())
    metrics = train_checkpoint(args.out, model_cfg, train_cfg, data.x, data.y,
                               test=None if test is None else (test.x, test.y, test.name),
                               progress=not args.no_progress)
    acc = metrics.get("test_accuracy")
    extra = f", test accuracy {acc:.3f}" if acc is not None else ""
    say(f"saved {train_cfg.name} {args.arch} to {args.out} ({metrics['train_seconds']:.0f} s{extra})")
    return 0
