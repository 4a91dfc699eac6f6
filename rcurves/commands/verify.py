"""``rcurves verify``: decide a VNN-LIB robustness property of an ONNX model and print the VNN-COMP word (holds,
violated or unknown) and the time, or the whole result as JSON."""
from __future__ import annotations

import json
import math
import time

from rcurves.commands.common import UserError, default_cache, say, setup_jax


def run(args) -> int:
    t0 = time.perf_counter()
    from rcurves.certify.verify import DEFAULT_BUDGET, verify
    from rcurves.certify.vnnlib import from_nhwc, read_vnnlib
    from rcurves.models.onnx_reader import load_onnx

    if not args.timeout > 0:
        raise UserError(f"--timeout: expected a positive number of seconds, got {args.timeout}")
    setup_jax(default_cache())          # the persistent compilation cache, if RCURVES_JAX_CACHE asks for it
    model = load_onnx(args.model)
    shape = tuple(model.info["input_shape"])
    file_shape = tuple(model.info["file_input_shape"])
    prop = read_vnnlib(args.property, n_inputs=math.prod(shape), n_outputs=model.info["n_classes"])
    nchw = model.logits_fn.graph.nchw      # X_i in the file's order: NCHW images are NHWC here, all else as is
    lo, hi = prop.box_nhwc(file_shape) if nchw else prop.box(shape)      # VNN-LIB order -> toolkit layout
    left = args.timeout - (time.perf_counter() - t0)
    if not left > 0:
        res = None
    else:
        res = verify(model, lo, hi, prop.label, others=prop.others, time_limit=left,
                     budget=DEFAULT_BUDGET if args.budget is None else args.budget, seed=args.seed,
                     batch=args.batch)
    seconds = time.perf_counter() - t0
    word = "unknown" if res is None else res.result_word
    if not args.json:
        say(f"{word} {seconds:.2f}s")
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
    say(json.dumps(out))
    return 0
