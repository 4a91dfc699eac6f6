"""Paper 004, Table 2: "broken" preprocessing defences in front of the undefended model, attacked adaptively:
adversarial accuracy and residual sparsity next to the undefended model, on full MNIST (our stand-in for the
paper's CIFAR-10 ResNet-18).

Defences (in front of the full-MNIST ST CNN; forward passes are the real
preprocessing, backward passes an adaptive surrogate, BPDA, Athalye et al.
2018):

* FS: feature squeezing (Xu et al. 2018), bit-depth reduction to 5 bits (their
  CIFAR-10 setting, the paper's FS), backward the identity (straight-through);
* SPS: spatial smoothing, a 2x2 median filter (Xu et al.), backward the median's
  own gradient (a.e. defined: the two middle pixels of each window) -- a
  stronger attack than the paper's straight-through, which is also run
  (``SPS/ST``);
* JPEG: a JPEG-like compression (8x8 block DCT, quality-75 luminance table,
  rounding of the coefficients and of the output pixels), backward through a
  smooth surrogate of the rounding, ``v - sin(2 pi v) / (2 pi)`` (Shin & Song
  2017's approach; their cubic surrogate is weaker here), and the identity;
* FS+SPS: squeezing then the median filter (``FS+SPS/ST``: the paper's
  straight-through through both);
* FS-1bit: binarisation at 0.5, Xu et al.'s MNIST setting (beyond the paper's
  table); straight-through BPDA barely moves it, so it is attacked through a
  sigmoid surrogate of the threshold, ``sigmoid((x - 0.5) / 0.1)`` (of the
  temperatures 0.05, 0.1 and 0.2 the strongest), and the identity.

A point is vulnerable if any of a defence's attacks breaks it (APGD,
cross-entropy and margin losses, 50 steps each; the check is on the real
forward pass); the sparsity estimator attacks through the first (strongest)
surrogate. Points: the pool is the first 400 points of the class-interleaved
held-out split (stratified); sparsity on one stratified sample of 40 pool
points vulnerable for the undefended model and every Table-2 defence (paired;
FS-1bit on its own sample of points vulnerable for it and the undefended
model). Radii: l_2 1.5, l_inf 0.1. Budget: 8 directions x 10 rounds x 20
steps, box [0, 1].

    python experiments/004_adversarial_sparsity/sparsity_broken_defence.py --out results/experiments/sparsity_broken_defence
"""
from __future__ import annotations

import dataclasses
import functools
import math
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
import sparsity_study as S
from shared import parse_args, write_result

from rcurves.claims.record import claim, fmt

N_POOL = 400
JPEG_QUALITY = 75
SIGMOID_T = 0.1
# The paper's Table 2 (CIFAR-10, ResNet-18): test accuracy %, l_2 sparsity (rad), l_inf sparsity (dims).
PAPER = {"none": (88, 0.180, 56.8), "JPEG": (77.1, 0.161, 80.9), "FS": (87.8, 0.178, 60.1), "SPS": (74, 0.147, 77.7),
         "FS+SPS": (74.5, 0.174, 86.6)}
# The smallest sparsity change a comparison is about, as a fraction of the undefended model's value (l_2: of
# its excess over the box floor); the paper's l_inf gains are +37 % (JPEG) and +33 % (SPS).
REL_EFFECT = 0.1


# ---------------------------------------------------------------------------
# the preprocessings (x: (n, H, W, 1) in [0, 1]); forward = the real defence


def squeeze(x, bits: int):
    """Round to ``2^bits`` levels in [0, 1] (Xu et al. 2018's bit-depth reduction)."""
    import jax.numpy as jnp

    levels = 2 ** bits - 1
    return jnp.round(jnp.clip(x, 0.0, 1.0) * levels) / levels


def median2(x):
    """2x2 median filter: per pixel the mean of the two middle values of ``{i, i+1} x {j, j+1}`` (edge
    padded). Piecewise linear: its gradient goes to the two middle pixels of each window."""
    import jax.numpy as jnp

    xp = jnp.pad(x, ((0, 0), (0, 1), (0, 1), (0, 0)), mode="edge")
    w = jnp.stack([xp[:, :-1, :-1], xp[:, 1:, :-1], xp[:, :-1, 1:], xp[:, 1:, 1:]], axis=-1)
    s = jnp.sort(w, axis=-1)
    return 0.5 * (s[..., 1] + s[..., 2])


def dct_matrix(n: int = 8) -> np.ndarray:
    """The orthonormal DCT-II matrix ``C`` (``C @ C.T = I``): JPEG's 8x8 block transform is ``C B C^T``."""
    k, i = np.arange(n)[:, None], np.arange(n)[None, :]
    c = np.sqrt(2.0 / n) * np.cos(np.pi * (2 * i + 1) * k / (2 * n))
    c[0] /= np.sqrt(2.0)
    return c.astype(np.float32)


_Q50 = np.array([[16, 11, 10, 16, 24, 40, 51, 61], [12, 12, 14, 19, 26, 58, 60, 55],
                 [14, 13, 16, 24, 40, 57, 69, 56], [14, 17, 22, 29, 51, 87, 80, 62],
                 [18, 22, 37, 56, 68, 109, 103, 77], [24, 35, 55, 64, 81, 104, 113, 92],
                 [49, 64, 78, 87, 103, 121, 120, 101], [72, 92, 95, 98, 112, 100, 103, 99]], np.float64)


def quant_table(quality: int) -> np.ndarray:
    """The JPEG standard's luminance table (Annex K) scaled to ``quality`` (the IJG formula), entries in [1, 255]."""
    s = 5000.0 / quality if quality < 50 else 200.0 - 2.0 * quality
    return np.clip(np.floor((_Q50 * s + 50) / 100), 1, 255).astype(np.float32)


def straight_round(v, surrogate):
    """``round(v)`` forward, ``d surrogate / dv`` backward."""
    import jax

    s = surrogate(v)
    return s + jax.lax.stop_gradient(_round(v) - s)


def _round(v):
    import jax.numpy as jnp

    return jnp.round(v)


def sine_round(v):
    """A smooth rounding surrogate: ``v - sin(2 pi v) / (2 pi)`` (equal to ``v`` at integers and half-integers,
    slope 0 at integers, 2 at half-integers, 1 on average)."""
    import jax.numpy as jnp

    return v - jnp.sin(2 * jnp.pi * v) / (2 * jnp.pi)


def _straight_clip(v):
    import jax
    import jax.numpy as jnp

    return v + jax.lax.stop_gradient(jnp.clip(v, 0.0, 1.0) - v)


def jpeg(x, quality: int = JPEG_QUALITY, rnd=_round, clip=None):
    """JPEG-like compression of grey images: pixels to [-128, 127], 8x8 blocks (edge padded to a multiple of
    8), DCT-II, quantisation by :func:`quant_table`, rounding ``rnd``, dequantisation, inverse DCT, rounding
    to integer grey levels, clip to [0, 1]. ``rnd`` and ``clip`` default to the real operations; a
    differentiable approximation passes surrogates (the forward pass is unchanged)."""
    import jax.numpy as jnp

    n, h, w = x.shape[0], x.shape[1], x.shape[2]
    hp, wp = -(-h // 8) * 8, -(-w // 8) * 8
    c, q = jnp.asarray(dct_matrix()), jnp.asarray(quant_table(quality))
    p = jnp.pad(x[..., 0] * 255.0 - 128.0, ((0, 0), (0, hp - h), (0, wp - w)), mode="edge")
    b = p.reshape(n, hp // 8, 8, wp // 8, 8).transpose(0, 1, 3, 2, 4)
    d = jnp.einsum("ij,nabjk,lk->nabil", c, b, c)
    r = jnp.einsum("ji,nabjk,kl->nabil", c, rnd(d / q) * q, c)
    img = r.transpose(0, 1, 3, 2, 4).reshape(n, hp, wp)[:, :h, :w]
    out = rnd(img + 128.0) / 255.0
    return (jnp.clip(out, 0.0, 1.0) if clip is None else clip(out))[..., None]


def _st(x, pre):
    """Straight-through: forward ``pre(x)``, backward the identity."""
    import jax

    return x + jax.lax.stop_gradient(pre(x) - x)


def _sigmoid_binarize(x):
    """Forward: binarisation at 0.5; backward: the derivative of ``sigmoid((x - 0.5) / SIGMOID_T)``."""
    import jax

    s = jax.nn.sigmoid((x - 0.5) / SIGMOID_T)
    return s + jax.lax.stop_gradient(squeeze(x, 1) - s)


# name -> preprocessing with its backward; the forward of every one is its defence's real preprocessing
VARIANTS = {
    "fs5-st": lambda x: _st(x, lambda v: squeeze(v, 5)),
    "fs5-naive": lambda x: squeeze(x, 5),
    "fs1-sigmoid": _sigmoid_binarize,
    "fs1-st": lambda x: _st(x, lambda v: squeeze(v, 1)),
    "sps-exact": median2,
    "sps-st": lambda x: _st(x, median2),
    "jpeg-sine": lambda x: jpeg(x, rnd=lambda v: straight_round(v, sine_round), clip=_straight_clip),
    "jpeg-st": lambda x: _st(x, jpeg),
    "fssps-exact": lambda x: median2(_st(x, lambda v: squeeze(v, 5))),
    "fssps-st": lambda x: _st(x, lambda v: median2(squeeze(v, 5))),
}
# defence label -> (variants: the first drives the sparsity estimator, all decide vulnerability; description)
DEFENCES = {
    "FS": (("fs5-st",), "5-bit squeezing, straight-through"),
    "SPS": (("sps-exact", "sps-st"), "2x2 median filter, its own gradient (and straight-through)"),
    "SPS/ST": (("sps-st",), "2x2 median filter, straight-through only (the paper's attack)"),
    "JPEG": (("jpeg-sine", "jpeg-st"), f"JPEG-like quality {JPEG_QUALITY}, sine-rounding surrogate (and "
                                       "straight-through)"),
    "FS+SPS": (("fssps-exact", "fssps-st"), "5-bit squeezing then the median filter, straight-through squeezing "
                                            "and the median's gradient (and straight-through)"),
    "FS+SPS/ST": (("fssps-st",), "5-bit squeezing then the median filter, straight-through only (the paper's)"),
    "FS-1bit": (("fs1-sigmoid", "fs1-st"), f"binarisation, sigmoid surrogate T = {SIGMOID_T} (and straight-through)"),
    "FS-1bit/ST": (("fs1-st",), "binarisation, straight-through only"),
    "FS/naive": (("fs5-naive",), "5-bit squeezing attacked with its own (zero) gradient"),
}
TABLE2 = ("FS", "SPS", "SPS/ST", "JPEG", "FS+SPS", "FS+SPS/ST")


def _apply(variant: str, base, x):
    return base(VARIANTS[variant](x))


@functools.lru_cache(maxsize=None)
def _applier(variant: str):
    """One function object per variant (the static part of the pytree callable: compiled programs are reused)."""
    return functools.partial(_apply, variant)


def defended(base, variant: str):
    """``base(preprocess(x))`` as a pytree callable (``base``'s weights stay traced arguments)."""
    import jax

    return jax.tree_util.Partial(_applier(variant), base)


def defence_model(base: S.Model, label: str) -> S.Model:
    variants, note = DEFENCES[label]
    fns = [defended(base.logits_fn, v) for v in variants]
    key = None if base.key is None else f"{base.key}+{'+'.join(variants)}"
    return S.Model(label, fns[0], note, base.name, key=key, attack_fns=fns)


def gradient_facts(base, x, y):
    """Exact facts of the surrogates on a few points: the naive squeezing gradient is 0; straight-through
    squeezing gives the base model's gradient at the squeezed input; every variant has its defence's forward
    pass; the JPEG transform without rounding returns its input; the median of a constant image is the image.
    One jitted program (``base`` a pytree argument)."""
    import jax

    out = _facts(base, jax.numpy.asarray(x), jax.numpy.asarray(y))
    return {k: float(v) for k, v in out.items()}


def _facts_impl(base, xj, yj):
    import jax
    import jax.numpy as jnp

    from attacks.losses import margin

    def g(f, v):
        return jax.grad(lambda u: jnp.sum(jax.vmap(margin)(f(u), yj)))(v)

    naive = lambda u: base(VARIANTS["fs5-naive"](u))      # noqa: E731
    st = lambda u: base(VARIANTS["fs5-st"](u))            # noqa: E731
    ref = {"fs5": squeeze(xj, 5), "fs1": squeeze(xj, 1), "sps": median2(xj), "jpeg": jpeg(xj),
           "fssps": median2(squeeze(xj, 5))}
    fwd = jnp.max(jnp.stack([jnp.max(jnp.abs(VARIANTS[v](xj) - ref[v.split("-")[0]])) for v in VARIANTS]))
    return {"naive_grad_max_abs": jnp.max(jnp.abs(g(naive, xj))),
            "st_vs_base_at_squeezed_max_abs": jnp.max(jnp.abs(g(st, xj) - g(base, squeeze(xj, 5)))),
            "variants_forward_max_abs": fwd,
            "jpeg_no_rounding_max_abs": jnp.max(jnp.abs(jpeg(xj, rnd=lambda v: v) - xj)),
            "median_constant_max_abs": jnp.max(jnp.abs(median2(jnp.full_like(xj, 0.3)) - 0.3))}


def _facts(base, xj, yj):
    import jax

    global _FACTS_JIT
    if _FACTS_JIT is None:
        _FACTS_JIT = jax.jit(_facts_impl)
    return _FACTS_JIT(base, xj, yj)


_FACTS_JIT = None


# ---------------------------------------------------------------------------
# the claims


def no_gain(study, d, none, norm):
    """The paper's "broken": the defended model is no more robust than the undefended one (CIFAR-10: both at
    0 %). Two-sided exact McNemar with power (``null_effect``); significantly LESS robust also counts as broken."""
    from rcurves.claims.verdicts import Verdict, null_effect

    rd, rn = study.robust(d, norm), study.robust(none, norm)
    a, b = int(np.sum(rd & ~rn)), int(np.sum(rn & ~rd))
    v = null_effect(a, b)
    if v.verdict == "differs" and a < b:
        return Verdict("reproduced", v.test + " (the defended model is the less robust)")
    return v


def sparsity_pair(study, a, b, norm, idx):
    """Per-point values of ``a`` and ``b`` on the sample ``idx`` (both measured), l_2 as excess over the floor,
    with the base value for effect sizes."""
    va, vb, pidx = S.paired_values(study, a, b, norm, idx)
    fl = study.floor(norm, pidx)
    return va - fl, vb - fl, va, vb, pidx


def make_claims(study, ms, samples, facts, norms, setting):
    from rcurves.claims.verdicts import (
        Verdict,
        all_of,
        paired_effect,
        paired_greater,
        paired_null,
    )

    claims = []
    lab = {m.label: m for m in ms}
    none = lab["none"]
    sample_txt = "; ".join(f"{n}: {t}" for n, (_, t) in samples.items())

    def text(a, b, n, ea, eb, va, vb):
        return (f"{a} {fmt(np.mean(va))} vs {b} {fmt(np.mean(vb))} {S.UNIT[n]} on {va.size} paired points"
                if va.size else f"{a} vs {b}: no paired points")

    for n in norms:
        nn = "l_2" if n == "l2" else "l_inf"
        idx = samples[n][0]
        present = [d for d in TABLE2 if d in lab]
        # (1) broken: no robustness gain over the undefended model under the adaptive attack
        if present:
            vs = [no_gain(study, lab[d], none, n) for d in present if "/" not in d]
            parts = [S.mcnemar_text(study.robust(lab[d], n), study.robust(none, n), d, "none") for d in present]
            claims.append(claim(
                "004", f"Table 2 ({nn}): the defences are broken",
                "with a strong adaptive attack the preprocessing defences give no robustness (CIFAR-10: 0% adversarial "
                "accuracy for every defence, as for the undefended model)",
                f"{setting}; pool: {study.text}; " + "; ".join(parts), all_of(*vs) if vs else
                Verdict("inconclusive", "no defence", "no defence run")))
        ev = {}
        for d in present:
            ea, eb, va, vb, _ = sparsity_pair(study, lab[d], none, n, idx)
            ev[d] = (ea, eb, va, vb)
        base = float(np.mean(ev[present[0]][1])) if present and ev[present[0]][1].size else math.nan
        eff = REL_EFFECT * base if np.isfinite(base) and base > 0 else 1.0
        if n == "l2" and present:
            vs = [paired_null(ev[d][0], ev[d][1], effect=eff, side="greater", what=f"{d} vs none")
                  for d in present if "/" not in d]
            claims.append(claim(
                "004", "Table 2 (l_2): no defence raises sparsity",
                "on l_2 none of the preprocessing defences significantly improves sparsity (CIFAR-10: none 0.180, "
                "JPEG 0.161, FS 0.178, SPS 0.147, FS+SPS 0.174 rad)",
                f"{setting}; paired: {sample_txt}; excess over the box floor; tested: no defence raises it by "
                f"{REL_EFFECT:.0%} of the undefended model's value or more (non-superiority); " + "; ".join(text(d, "none", n, *ev[d]) for d in present),
                all_of(*vs)))
        if n == "linf":
            for d, gain in (("JPEG", 20.9), ("SPS", 18.7)):
                if d not in ev:
                    continue
                claims.append(claim(
                    "004", f"Table 2 (l_inf): {d} raises sparsity",
                    f"on l_inf {d} raises sparsity (CIFAR-10: +{gain} dims over none, {PAPER[d][2]} vs "
                    f"{PAPER['none'][2]}): it removes some perturbations",
                    f"{setting}; paired: {sample_txt}; {text(d, 'none', n, *ev[d])} ({DEFENCES[d][1]})"
                    + (f"; attacked straight-through only (the paper's attack): {text(d + '/ST', 'none', n, *ev[d + '/ST'])}"
                       if d + "/ST" in ev else ""),
                    paired_greater(ev[d][0], ev[d][1], effect=eff, what=f"{d} > none")))
            if "FS" in ev:
                claims.append(claim(
                    "004", "Table 2 (l_inf): FS does not raise sparsity",
                    "feature squeezing does not increase l_inf sparsity (CIFAR-10: 60.1 vs 56.8 dims)",
                    f"{setting}; paired: {sample_txt}; {text('FS', 'none', n, *ev['FS'])}; tested: FS does not "
                    f"raise it by {REL_EFFECT:.0%} of the undefended model's value or more (non-superiority; the "
                    f"paper's own FS gain is +5.8%)",
                    paired_null(ev["FS"][0], ev["FS"][1], effect=eff, side="greater", what="FS vs none")))
            if "FS+SPS" in lab and "SPS" in lab:
                ea, eb, va, vb, _ = sparsity_pair(study, lab["FS+SPS"], lab["SPS"], n, idx)
                claims.append(claim(
                    "004", "Table 2 (l_inf): FS+SPS above SPS",
                    "feature squeezing boosts spatial smoothing: FS+SPS has higher l_inf sparsity than SPS alone "
                    "(CIFAR-10: 86.6 vs 77.7 dims)",
                    f"{setting}; paired: {sample_txt}; {text('FS+SPS', 'SPS', n, ea, eb, va, vb)}",
                    paired_greater(ea, eb, effect=eff, what="FS+SPS > SPS")))
        # the paper's straight-through attack on the median against its own gradient (beyond)
        for d in ("SPS", "FS+SPS"):
            if d in lab and d + "/ST" in lab:
                rs, re = study.robust(lab[d + "/ST"], n), study.robust(lab[d], n)
                acc = paired_effect(int(np.sum(rs & ~re)), int(np.sum(re & ~rs)),
                                    what=f"straight-through {d} leaves more points robust")
                ea, eb, va, vb, _ = sparsity_pair(study, lab[d + "/ST"], lab[d], n, idx)
                sp = paired_greater(ea, eb, effect=eff, what=f"sparsity with straight-through > with the "
                                                            f"median's gradient ({d})")
                claims.append(claim(
                    "004", f"Table 2 ({nn}): {d} attacked straight-through",
                    "(beyond the paper) the paper's straight-through BPDA is a weaker attack on the median filter "
                    "than the filter's own gradient, and the weaker oracle inflates the defence's sparsity",
                    f"{setting}; {S.mcnemar_text(rs, re, d + '/ST', d)}; paired: {sample_txt}; "
                    f"{text(d + '/ST', d, n, ea, eb, va, vb)}", all_of(acc, sp), kind="beyond"))
        # binarisation (Xu et al.'s MNIST setting): the adaptive attack, then its sparsity
        if "FS-1bit" in lab and "FS-1bit/ST" in lab:
            r_sig, r_st = study.robust(lab["FS-1bit"], n), study.robust(lab["FS-1bit/ST"], n)
            only_st = int(np.sum(r_sig & ~r_st))
            only_sig = int(np.sum(r_st & ~r_sig))
            claims.append(claim(
                "004", f"Table 2 ({nn}, 1-bit squeezing): adaptive attack",
                "straight-through BPDA is a weak attack on binarisation; an adaptive attack through a smooth surrogate "
                "of the threshold breaks more points (before blaming the defence)",
                f"{setting}; pool: {study.text}; adversarial accuracy with straight-through BPDA "
                f"{r_st.mean():.3f}, with the sigmoid surrogate (T = {SIGMOID_T}) and straight-through together "
                f"{r_sig.mean():.3f}, undefended {study.robust(none, n).mean():.3f}; points broken only with the "
                f"surrogate {only_sig}",
                paired_effect(only_sig, only_st, what="the surrogate attack breaks more points"), kind="self-check"))
        if "FS-1bit" in lab:
            idx1, t1 = samples[n + "-fs1"]
            ea, eb, va, vb, _ = sparsity_pair(study, lab["FS-1bit"], none, n, idx1)
            claims.append(claim(
                "004", f"Table 2 ({nn}, 1-bit squeezing): sparsity",
                "(beyond the paper) binarisation, Xu et al.'s MNIST setting, removes the perturbations that move no "
                "pixel across 0.5, so the points it leaves vulnerable have higher sparsity than without it",
                f"{setting}; paired: {t1}; {text('FS-1bit', 'none', n, ea, eb, va, vb)} (the estimator attacks "
                f"through the sigmoid surrogate)",
                paired_greater(ea, eb, effect=eff, what="FS-1bit > none"), kind="beyond"))
        # obfuscation: the squeezer's own (zero) gradient against straight-through
        if "FS/naive" in lab and "FS" in lab:
            rn_, rs_ = study.robust(lab["FS/naive"], n), study.robust(lab["FS"], n)
            claims.append(claim(
                "004", f"Table 2 ({nn}): squeezing obfuscates gradients",
                "a preprocessing defence looks robust to gradient attacks that do not go around it; straight-through "
                "BPDA breaks it (the paper's reason for BPDA)",
                f"{setting}; {S.mcnemar_text(rn_, rs_, 'FS with its own gradient', 'FS with straight-through')}; "
                f"the naive gradient is exactly 0 (max |grad| {fmt(facts['naive_grad_max_abs'])}), the "
                f"straight-through gradient is the model's at the squeezed input (max difference "
                f"{fmt(facts['st_vs_base_at_squeezed_max_abs'])})",
                paired_effect(int(np.sum(rn_ & ~rs_)), int(np.sum(rs_ & ~rn_)),
                              what="the naive attack leaves more points robust"), kind="self-check"))
    return claims


def main(argv=None):
    args = parse_args(__doc__, name="sparsity_broken_defence", argv=argv)
    b = S.budget(args)
    if not args.quick:
        b = dataclasses.replace(b, n_pool=N_POOL)
    study = S.Study(args, S.dataset(args), b, args.seed)
    base = S.quick_model("st") if args.quick else S.zoo_model(args, "mnist-full-cnn-st", "ST")
    none = S.Model("none", base.logits_fn, base.note, base.name, key=base.key)
    # --quick: l_2, the undefended model and binarisation (its surrogate) only: the code path, not the claims
    labels = ("FS-1bit", "FS-1bit/ST") if args.quick else tuple(DEFENCES)
    norms = ("l2",) if args.quick else ("l2", "linf")
    ms = [none] + [defence_model(base, lab) for lab in labels]
    facts = gradient_facts(base.logits_fn, study.x[: b.batch_points], study.y[: b.batch_points])
    samples = {}
    for n in norms:
        table = [m for m in ms if m.label == "none" or m.label in TABLE2]
        if len(table) > 1:
            samples[n] = S.common_sample(study, table, n)
        else:
            samples[n] = (np.zeros(0, np.int64), "no Table-2 defence run")
        fs1 = next((m for m in ms if m.label == "FS-1bit"), None)
        if fs1 is not None:
            samples[n + "-fs1"] = S.common_sample(study, [none, fs1], n)
        for m in ms:
            study.vulnerable(m, n)
            print(n, m.label, "adv acc", round(float(study.robust(m, n).mean()), 4), flush=True)
    claims = make_claims(study, ms, {k: v for k, v in samples.items()}, facts, norms, S.setting(args))
    rows = []
    for n in norms:
        for m in ms:
            if not study.searched(m, n).any():
                continue
            v = study.values(m, n)[study.searched(m, n)]
            rows.append({"defence": m.label, "attack": m.note, "norm": n, "eps": study.eps[n],
                         "natural_accuracy": float(study.correct(m).mean()),
                         "adversarial_accuracy": float(study.robust(m, n).mean()),
                         "n_searched": int(study.searched(m, n).sum()), "n_measured": int(np.isfinite(v).sum())}
                        | S.mean_se(v))
    write_result(args, {"facts": facts, "budget": b.__dict__, "pool": study.text,
                        "samples": {k: {"index": v[0], "text": v[1]} for k, v in samples.items()},
                        "table": rows, "seconds_by_stage": study.seconds}, claims)
    return {"rows": rows, "facts": facts, "claims": claims, "study": study, "models": ms, "samples": samples}


if __name__ == "__main__":
    main()
