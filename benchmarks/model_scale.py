"""Model scale: compilation, a second checkpoint, attack overhead and memory from a small MLP to ResNets.

For each architecture (random weights: speed and memory do not depend on
what the weights learned), with its parameters as data (a pytree callable,
``rcurves.models.ModelFn``, as the zoo's models are):

* ``params``: parameter count;
* ``first_s``: first call of the default l_inf ``minimal_distance`` on
  ``--n`` points (compilation included);
* ``second_ckpt_s``: first call with a *second checkpoint* of the same
  architecture (new random weights), next to ``warm_s``, a warm call: the
  target is ``second_ckpt_s <= 1.1 warm_s`` (no recompilation; the test
  suite counts compilations, this measures what it saves);
* ``compiles_second``: XLA compilations during that second call (0);
* ``x_floor``: attack time over the time of the same number of batched
  ``value_and_grad`` evaluations with the parameters as arguments
  (``attack_overhead.reference``; 5 interleaved rounds, median of the paired
  ratios). Target <= 1.15;
* ``temp_mb`` at chunk sizes ``--chunks``: XLA's own accounting of the
  attack program's temporary buffers (``compiled.memory_analysis()``),
  exact and independent of the machine's load. It grows with the chunk, not
  with the data set: ``runner.run_chunked`` feeds any ``n`` through programs
  of one chunk size;
* ``mb_per_point`` and ``auto_chunk``: the slope of the search program's
  memory (temporaries + arguments + outputs) per point of a chunk, and the
  chunk ``evaluate(..., chunk_size="auto")`` would choose for a budget of
  ``--budget-mb`` (``rcurves.pipeline.memory.auto_chunk_size``: the largest
  chunk up to 100 whose memory, with its safety factor, fits; ``auto_rewrite``
  False where one point fits only without the conv rewrite, below);
* for the ResNets also with ``RCURVES_CONV_REWRITE=0``: the attacks compute
  ``lax.conv`` as patch matrices inside their loops on XLA:CPU
  (``attacks.xla.loop_model``), which holds ``kh kw`` = 9 times each
  convolution's input; the ``conv`` rows give the time and memory without
  the rewrite, to choose when it pays.

    python benchmarks/model_scale.py                 # all rows (tens of minutes on 2 cores)
    python benchmarks/model_scale.py --quick         # small MLP and ResNet-8, 4 points
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import attacks  # noqa: E402
from attacks.minimal import _minimal_jit, search_gradients  # noqa: E402
from rcurves.models import ModelConfig, init_params, make_logits_fn  # noqa: E402

ARCHS = {
    "mlp 784-256-256": ModelConfig(arch="mlp", input_shape=(28, 28, 1), n_classes=10, hidden=(256, 256)),
    "cnn C.1 (MNIST)": ModelConfig(arch="cnn", input_shape=(28, 28, 1), n_classes=10),
    "resnet-20 w16 (CIFAR)": ModelConfig(arch="resnet", input_shape=(32, 32, 3), n_classes=10, depth=20, width=16),
    "resnet-20 w64 (CIFAR)": ModelConfig(arch="resnet", input_shape=(32, 32, 3), n_classes=10, depth=20, width=64),
    "mlp 784-4096-4096 (20M)": ModelConfig(arch="mlp", input_shape=(28, 28, 1), n_classes=10, hidden=(4096, 4096)),
}
QUICK = {
    "mlp 784-64": ModelConfig(arch="mlp", input_shape=(28, 28, 1), n_classes=10, hidden=(64,)),
    "resnet-8 w4 (CIFAR)": ModelConfig(arch="resnet", input_shape=(32, 32, 3), n_classes=10, depth=8, width=4),
}
TARGET_RATIO = 1.15
TARGET_SECOND = 1.10

_EVENTS = []
jax.monitoring.register_event_duration_secs_listener(
    lambda name, *a, **k: _EVENTS.append(name) if name == "/jax/core/compile/backend_compile_duration" else None)


def _points(cfg, n, seed=0):
    r = np.random.RandomState(seed)
    x = jnp.asarray(r.rand(n, *cfg.input_shape).astype(np.float32))
    return x


def temp_mb(f, x, y, key) -> float:
    """XLA's temporary buffer size (MB) of the default l_inf search program at this batch."""
    captured = {}
    orig = _minimal_jit.__call__

    class Spy:
        def __call__(self, *a, **k):
            captured["lowered"] = _minimal_jit.lower(*a, **k)
            return orig(*a, **k)

    import attacks.minimal as am

    am._minimal_jit, saved = Spy(), am._minimal_jit
    try:
        jax.block_until_ready(attacks.minimal_distance(f, x, y, norm="linf", key=key))
    finally:
        am._minimal_jit = saved
    ma = captured["lowered"].compile().memory_analysis()
    return float(ma.temp_size_in_bytes) / 2 ** 20 if ma is not None else float("nan")


def bench(name, cfg, n, chunks, repeats, key, conv_rewrite=True, budget_mb=1024):
    os.environ["RCURVES_CONV_REWRITE"] = "1" if conv_rewrite else "0"
    p1 = init_params(cfg, jax.random.PRNGKey(1))
    p2 = init_params(cfg, jax.random.PRNGKey(2))
    f1, f2 = make_logits_fn(cfg, p1), make_logits_fn(cfg, p2)
    params = sum(int(a.size) for a in jax.tree_util.tree_leaves(p1))
    x = _points(cfg, n)
    y1 = jnp.argmax(f1(x), 1).astype(jnp.int32)
    y2 = jnp.argmax(f2(x), 1).astype(jnp.int32)
    run = lambda f, y: attacks.minimal_distance(f, x, y, norm="linf", key=key)  # noqa: E731
    t_first, _ = C.timed(lambda: run(f1, y1))
    start = len(_EVENTS)
    t_second, _ = C.timed(lambda: run(f2, y2))
    compiles_second = len(_EVENTS) - start
    t_warm, _ = C.timed(lambda: run(f2, y2))
    from rcurves.models import apply_fn

    G = int(search_gradients(attacks.minimal.search_config("linf", cfg.n_classes), cfg.n_classes))
    vg_floor = _floor(apply_fn(cfg), G)            # the floor, with the parameters as arguments
    timing = C.time_interleaved({"attack": lambda: run(f2, y2), "floor": lambda: vg_floor(p2, x, y2)},
                                repeats=repeats, verbose=False)
    row = {"model": name + ("" if conv_rewrite else " [no conv rewrite]"), "params": params, "n": n,
           "first_s": t_first, "second_ckpt_s": t_second, "warm_s": t_warm, "compiles_second": compiles_second,
           "second_over_warm": t_second / t_warm, "G": G,
           "x_floor": C.paired_ratio(timing["attack"], timing["floor"]),
           "attack_s": timing["attack"].median, "floor_s": timing["floor"].median}
    for c in chunks:
        xc = _points(cfg, c, seed=1)
        yc = jnp.argmax(f2(xc), 1).astype(jnp.int32)
        row[f"temp_mb@{c}"] = temp_mb(f2, xc, yc, key)
    from rcurves.pipeline.memory import auto_chunk_size

    choice = auto_chunk_size(f2, cfg.input_shape, "linf", budget_bytes=int(budget_mb * 2 ** 20))
    row.update(mb_per_point=choice.per_point_bytes / 2 ** 20, auto_chunk=choice.chunk, auto_fits=choice.fits,
               auto_rewrite=choice.rewrite)
    return row


def _floor(apply, G):
    """``(params, x, y) -> x_G``: ``G`` batched value_and_grad calls of the margin sum, parameters as arguments."""

    @jax.jit
    def run(params, x, y):
        vg = jax.value_and_grad(lambda z: C.margin_sum(apply(params, z), y))

        def body(z, _):
            v, g = vg(z)
            return z + 1e-6 * g, v

        return jax.lax.scan(body, x, None, length=G)

    return run


def main(argv=None):
    p = C.parser("model_scale", __doc__, n=32)
    p.add_argument("--chunks", default="8,32", help="chunk sizes of the memory column")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget-mb", type=float, default=1024.0, help="memory budget of the auto_chunk column")
    p.add_argument("--only", default=None, help="comma-separated row names")
    args = p.parse_args(argv)
    archs = QUICK if args.quick else ARCHS
    if args.only:
        archs = {k: v for k, v in archs.items() if k in args.only.split(",")}
    n = args.n or (4 if args.quick else 32)
    chunks = [int(c) for c in args.chunks.split(",")] if not args.quick else [2, 4]
    key = jax.random.PRNGKey(args.seed)
    rows = []
    out = {"benchmark": "model_scale", "machine": C.machine_info(), "config": {"n": n, "chunks": chunks,
                                                                                "repeats": args.repeats,
                                                                                "budget_mb": args.budget_mb}}
    for name, cfg in archs.items():
        variants = (True, False) if cfg.arch == "resnet" else (True,)
        for rewrite in variants:
            print(f"{name}{'' if rewrite else ' [no conv rewrite]'} ...", flush=True)
            rows.append(bench(name, cfg, n, chunks, args.repeats, key, conv_rewrite=rewrite,
                              budget_mb=args.budget_mb))
            out["rows"] = rows
            C.write_json(args.out, out)
            jax.clear_caches()
    os.environ.pop("RCURVES_CONV_REWRITE", None)
    cols = ["model", "params", "first_s", "second_ckpt_s", "warm_s", "second_over_warm", "compiles_second",
            "x_floor"] + [f"temp_mb@{c}" for c in chunks] + ["mb_per_point", "auto_chunk", "auto_rewrite"]
    C.print_table(rows, cols, title=f"default l_inf search on {n} points (random weights)")
    out["targets"] = [{"model": r["model"], "second_within_10%": r["second_over_warm"] <= TARGET_SECOND,
                       "no_recompilation": r["compiles_second"] == 0, "x_floor<=1.15": r["x_floor"] <= TARGET_RATIO}
                      for r in rows]
    out["machine_end"] = C.machine_info()
    C.write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
