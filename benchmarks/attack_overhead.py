"""Attack overhead: an attack's time over the time of its bare gradient evaluations.

An attack that costs ``G`` gradient evaluations per point can never be faster
than ``G`` batched ``value_and_grad`` calls of the model on the same batch.
This benchmark measures how close the attacks come to that floor:

    ratio = time(attack) / time(G x value_and_grad of the summed logit margin)

The reference is one jitted ``lax.scan`` of ``G`` ``jax.value_and_grad`` calls
on the whole batch, each followed by a trivial update ``x <- x + 1e-6 grad``
(so XLA cannot drop or merge them). ``G`` is the number of iterates the
attack evaluates, its nominal step count. The last iterate of every PGD lane
and of every CW constant is evaluated with a forward pass only (the update its
gradient would give is never evaluated, so the results are those of ``G`` full
steps): the attacks run ``G - rounds`` gradients plus ``rounds`` forward passes
(``rounds`` = 8 x 4 lanes for the default ``minimal_distance``, 10 for CW,
5-15% of ``G``), and
the reference runs ``G`` full gradients.

``G`` per attack:

* ``attacks.minimal_distance`` with its default schedule for the model (for
  ten classes: l_inf 7 rounds of 4 targeted lanes of 5 steps and 74 FMN
  steps, l_2 6 rounds of 4 lanes of 7 steps and 46, plus the Jacobian that
  ranks the targets (10 backward passes, counted as 10), G = 224; ``--search-steps/--steps/--restarts`` override it):
  ``(1 + search_steps) * candidates * restarts * steps + polish_steps``; on top come ``refine_steps + 4`` forward passes with the default
  regula-falsi radius search, ``(1 + search_steps) * refine_steps + 3`` with
  ``radius="bisect"`` (a ray search every round; the ``bisect`` rows);
* ``attacks.carlini_wagner_l2`` with ``abort_early=False``:
  ``binary_search_steps * steps`` exactly. With ``abort_early=True`` the number
  of (batched) gradient evaluations actually run is counted separately with a
  ``jax.debug.callback`` in an untimed run.

All timings come from one process, after a warm-up call (its excess over a
warm call is reported as the compile time), as the median of ``--repeats``
interleaved rounds (every function once per round, so load changes on the
shared machine hit all alike). The headline ``ratio_paired`` is the median over
rounds of the ratio measured within one round. Target: <= 1.15. Besides it and the ratio of
median wall times, the table gives the ratio of the fastest calls and of the
median process CPU times (all threads): on a loaded machine the wall time of a
call mostly measures its share of the CPU, the CPU time the work done.

CW is timed with ``binary_search_steps=10`` (000 Appendix C.2) and 22 steps
per constant, so that ``G = 220`` is about ``minimal_distance``'s default; the
overhead per step does not depend on the number of steps. The abort-early
count uses 10 x 100 steps (``--cw-count-steps``).

The ``smoothed`` and ``noisy`` rows are the adaptive default's escalation
searches (``attacks.adaptive``: the rows' schedule with gradients through
smoothed ReLUs, ``relu_temperature=0.1``, or taken at Gaussian-noisy copies of
the iterates, ``grad_noise=0.2``), against the same floor of plain gradients:
what an escalated point's gradients cost. A noisy step also evaluates the
loss at the iterate itself (its adversarial check), a forward pass beside
each gradient, so its floor is about 4/3 of the plain one; a smoothed
gradient computes a sigmoid per ReLU. ``--no-escalation`` skips them.

The ``flax-cnn`` rows run the same trained CNN written as a user would, with
flax's ``nn.Conv`` (``lax.conv``). XLA:CPU runs ``lax.conv`` inside a loop far
slower than outside one, so for it the floor also includes the ``G``
gradients as ``G`` separate jitted calls (``[separate calls]``; ``--separate``
adds them for the other models) and the faster reference is the floor; the
attacks evaluate such a model with its convolutions as patch matrices
(``attacks.xla.loop_model``).

    python benchmarks/attack_overhead.py            # MLP n=256, CNN and flax CNN n=64
    python benchmarks/attack_overhead.py --cnn-n 256 # the CNN at full size (slow on CPU)
    python benchmarks/attack_overhead.py --quick
"""
from __future__ import annotations

import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import attacks  # noqa: E402

TARGET = 1.15

#: The escalation searches' settings, read from ``attacks.adaptive`` (its l_2 ones; l_inf's are the same).
SMOOTH_T = attacks.adaptive.ESCALATION_SMOOTH["l2"].temperature
NOISE = attacks.adaptive.ESCALATION_NOISE["l2"]


def reference(logits_fn, G: int, compiler_options=None):
    """Jitted ``(x, y) -> (x_G, values)``: ``G`` batched value_and_grad calls."""

    def run(x, y):
        vg = jax.value_and_grad(lambda z: C.margin_sum(logits_fn(z), y))

        def body(z, _):
            v, g = vg(z)
            return z + 1e-6 * g, v

        return jax.lax.scan(body, x, None, length=G)

    if compiler_options:
        return jax.jit(run, compiler_options=compiler_options)
    return jax.jit(run)


def reference_separate(logits_fn, G: int):
    """``(x, y) -> x_G``: the same ``G`` value_and_grad calls as :func:`reference`,
    each one jitted call from Python (no loop inside XLA)."""

    @jax.jit
    def step(z, y):
        v, g = jax.value_and_grad(lambda q: C.margin_sum(logits_fn(q), y))(z)
        return z + 1e-6 * g, v

    def run(x, y):
        z = x
        for _ in range(G):
            z, _ = step(z, y)
        return z

    return run


def count_cw_evaluations(logits_fn, x, y, *, bss: int, steps: int, refine_steps: int = 4) -> dict:
    """Batched gradient evaluations CW really runs with ``abort_early=True``.

    Counts calls of the per-point model inside the attack with a host
    callback (under ``vmap`` it fires once per point and evaluation, also for
    points whose loop already stopped while others go on, i.e. exactly the
    work done). Subtracts the ray search (``refine_steps`` forwards per point)
    and the two batched forwards of the clean logits and the final re-check.
    Each round's last evaluation is a forward pass only, so this counts
    iterates evaluated: the gradients are that minus one per round.
    """
    n = x.shape[0]
    count = [0]

    def cb(_):
        count[0] += 1

    def counted(z):
        jax.debug.callback(cb, z.reshape(z.shape[0], -1)[:, 0])
        return logits_fn(z)

    res = attacks.carlini_wagner_l2(counted, x, y, key=jax.random.PRNGKey(0),
                                    binary_search_steps=bss, steps=steps, abort_early=True)
    jax.block_until_ready(res)
    evals = (count[0] - 2) / n - refine_steps
    return {"gradient_evaluations_run": evals, "of_max": bss * steps,
            "fraction": evals / (bss * steps),
            "median_distance_abort_early": C.median(np.asarray(res.distance))}


def bench_model(arch: str, n: int, args, key) -> dict:
    if arch == "flax-cnn":      # the same trained CNN, written with flax's nn.Conv (lax.conv)
        _, info, params = C.mnist_model("cnn", with_params=True)
        logits_fn = C.flax_conv_cnn(params)
        info = {**info, "arch": "flax-cnn", "note": "the 'cnn' parameters in a flax nn.Conv model"}
    else:
        logits_fn, info = C.mnist_model(arch)
    x, y = C.mnist_points(logits_fn, n)
    s, st, r = args.search_steps, args.steps, args.restarts
    K = int(jax.eval_shape(logits_fn, x[:1]).shape[-1])
    # The default schedule of minimal_distance for this model (the targeted
    # one for l_inf and l_2 on ten classes), unless given on the command line.
    cfg = attacks.minimal.search_config("linf", K, search_steps=s, steps=st, restarts=r)
    G_min = attacks.minimal.search_gradients(cfg, K)
    G_cw = args.cw_bss * args.cw_steps

    def md(norm, radius, **kw):
        return lambda: attacks.minimal_distance(
            logits_fn, x, y, norm=norm, key=key, search_steps=s, steps=st, restarts=r, radius=radius, **kw)

    cw = lambda: attacks.carlini_wagner_l2(  # noqa: E731
        logits_fn, x, y, key=key, binary_search_steps=args.cw_bss, steps=args.cw_steps,
        abort_early=False)
    # The floor is the faster of the reference compiled with XLA's defaults
    # and with the attacks' own compile options (attacks.xla).
    opts = attacks.xla.compiler_options()
    variants = {"": None} if opts is None else {"": None, " [attack options]": opts}
    refs = {(G, tag): reference(logits_fn, G, o) for G in sorted({G_min, G_cw}) for tag, o in variants.items()}
    if args.separate or arch == "flax-cnn":
        # the floor of a model whose gradient runs slower inside an XLA loop
        # than in separate calls (lax.conv on XLA:CPU): G jitted calls
        variants = {**variants, " [separate calls]": None}
        for G in sorted({G_min, G_cw}):
            refs[(G, " [separate calls]")] = reference_separate(logits_fn, G)
    fns = {
        "minimal linf": md("linf", None),
        "minimal linf bisect": md("linf", "bisect"),
        "minimal l2": md("l2", None),
        "minimal l2 bisect": md("l2", "bisect"),
        "cw l2": cw,
    }
    if not args.no_escalation:
        # the default search's schedule with the settings of the adaptive default's escalation searches
        # (attacks.adaptive, whose members also differ in target ranks and first radii): gradients through
        # smoothed ReLUs, or at noisy copies of the iterates (each step then also evaluates the loss at the
        # iterate itself: a forward pass beside the gradient, by design; no 1.15 target for those rows)
        for norm in ("linf", "l2"):
            fns[f"minimal {norm} smoothed"] = md(norm, None, relu_temperature=SMOOTH_T)
            fns[f"minimal {norm} noisy"] = md(norm, None, grad_noise=NOISE)
    for (G, tag), ref in refs.items():
        fns[f"ref G={G}{tag}"] = functools.partial(ref, x, y)
    print(f"[{arch}] n={n}, G(minimal)={G_min}, G(cw)={G_cw}; {C.load_string()}", flush=True)
    T = C.time_interleaved(fns, repeats=args.repeats)
    rows = []
    for name in fns:
        if name.startswith("ref"):
            continue
        G = G_cw if name.startswith("cw") else G_min
        ref = min((T[f"ref G={G}{tag}"] for tag in variants), key=lambda t: t.median)
        r = T[name].median / ref.median
        paired = C.paired_ratio(T[name], *(T[f"ref G={G}{tag}"] for tag in variants))
        rows.append({
            "ratio_paired": paired,
            "reference_variant": min(variants, key=lambda tag: T[f"ref G={G}{tag}"].median) or "xla defaults",
            "model": arch, "attack": name, "n": n, "G": G,
            "attack_s": T[name].median, "reference_s": ref.median, "ratio": r,
            "ratio_min": T[name].best / ref.best, "ratio_cpu": T[name].cpu_median / ref.cpu_median,
            "target<=1.15": None if name.endswith((" smoothed", " noisy")) else paired <= TARGET, "compile_s": T[name].compile,
            "ref_compile_s": ref.compile, "attack_timing": T[name].to_dict(),
            "reference_timing": ref.to_dict(),
        })
    print(f"[{arch}] counting CW's evaluations with abort_early=True "
          f"({args.cw_bss} x {args.cw_count_steps} steps) ...", flush=True)
    counted = count_cw_evaluations(logits_fn, x, y, bss=args.cw_bss, steps=args.cw_count_steps)
    return {"model": info, "n": n, "rows": rows, "cw_abort_early": counted,
            "compiler_options": opts,
            "references": {name: T[name].to_dict() for name in fns if name.startswith("ref")},
            "load_after": C.load_string()}


def main(argv=None):
    p = C.parser("attack_overhead", __doc__, n=256)
    p.add_argument("--cnn-n", type=int, default=None, help="points for the CNN (default 64, to keep the run short)")
    p.add_argument("--models", default="mlp,cnn,flax-cnn",
                   help="comma list of mlp, cnn, flax-cnn (the cnn written with flax nn.Conv)")
    p.add_argument("--separate", action="store_true",
                   help="also time the G gradients as separate jitted calls for mlp and cnn (always for flax-cnn)")
    p.add_argument("--repeats", type=int, default=9,
                   help="interleaved timing rounds (a call varies by +-5%% from round to round on a 2-core VM)")
    p.add_argument("--search-steps", type=int, default=None, help="default: minimal_distance's")
    p.add_argument("--steps", type=int, default=None, help="default: minimal_distance's")
    p.add_argument("--restarts", type=int, default=None, help="default: minimal_distance's")
    p.add_argument("--no-escalation", action="store_true",
                   help="skip the rows of the adaptive default's escalation searches (smoothed / noisy)")
    p.add_argument("--cw-bss", type=int, default=10, help="CW binary_search_steps (000 App. C.2: 10)")
    p.add_argument("--cw-steps", type=int, default=22,
                   help="CW Adam steps per constant in the timed runs (10 x 22 = 220 = G of minimal_distance)")
    p.add_argument("--cw-count-steps", type=int, default=100,
                   help="CW steps per constant of the untimed abort_early=True count")
    args = p.parse_args(argv)
    if args.quick:
        n = args.n or 32
        cnn_n = args.cnn_n or 8
        args.search_steps, args.steps, args.cw_bss, args.cw_steps, args.cw_count_steps = 3, 10, 2, 20, 20
        args.restarts = args.restarts or 1
        args.repeats = min(args.repeats, 2)
    else:
        n = args.n or 256
        cnn_n = args.cnn_n or 64
    key = jax.random.PRNGKey(args.seed)
    out = {"benchmark": "attack_overhead", "target_ratio": TARGET, "machine": C.machine_info(),
           "config": {"search_steps": args.search_steps, "steps": args.steps, "restarts": args.restarts,
                      "cw_binary_search_steps": args.cw_bss, "cw_steps": args.cw_steps,
                      "cw_count_steps": args.cw_count_steps,
                      "repeats": args.repeats, "quick": args.quick, "escalation_rows": not args.no_escalation},
           "models": {}}
    rows = []
    for arch in args.models.split(","):
        arch = arch.strip()
        res = bench_model(arch, n if arch == "mlp" else cnn_n, args, key)
        out["models"][arch] = res
        rows += res["rows"]
    out["machine_end"] = C.machine_info()
    print()
    C.print_table(rows, ["model", "attack", "n", "G", "attack_s", "reference_s", "ratio_paired", "ratio", "ratio_min",
                         "ratio_cpu", "target<=1.15", "compile_s", "ref_compile_s"],
                  title=f"Attack time / time of G batched value_and_grad calls: ratio_paired = median over rounds "
                        f"of the ratio within a round (headline), ratio = of median wall "
                        f"(of {args.repeats}), ratio_min = fastest call, ratio_cpu = median process CPU time")
    for arch, res in out["models"].items():
        c = res["cw_abort_early"]
        print(f"{arch}: CW abort_early=True ran {c['gradient_evaluations_run']:.0f} of "
              f"{c['of_max']} batched gradient evaluations ({100 * c['fraction']:.0f}%); "
              f"median distance {c['median_distance_abort_early']:.4f}")
    print(f"start: {out['machine']['loadavg_1_5_15']}, end: {out['machine_end']['loadavg_1_5_15']} "
          f"(load average 1/5/15 min, {os.cpu_count()} cores)")
    C.write_json(args.out, out)


if __name__ == "__main__":
    main()
