"""The root of one ball's branch and bound: what every subdomain shares, bounded once.

:func:`_root` bounds every hidden pre-activation on the whole ball (CROWN's bounds, or alpha-CROWN's with
``BaBConfig.tighten``: :func:`_tightened`) and every margin (CROWN); a subdomain's hidden bounds are intersected
with the root's, so a tighter root narrows them all.

Only the ``rows`` margins with the lowest root bounds are branched on (by
default all of them, up to 10 classes); the others must be certified at the
root (a root bound holds on every subdomain).
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from rcurves.certify.bab_settings import BaBConfig
from rcurves.nets.bounds import (
    BoundConfig, Prepared, _both, _spec_start, backsub, concretize, hidden_bounds, margin_spec, relax,
)


class Root(NamedTuple):
    """What every subdomain of one ball shares, computed once at the root (``L`` hidden layers, ``R`` rows).

    ``bounds``: CROWN's ``(l, u)`` of each hidden pre-activation on the ball; ``lam0 (R, *h_L)``, ``b0 (R,)``:
    the branched margin rows pulled back to the last hidden activation; ``root_lb (K,)``: CROWN's bound of
    every margin (``inf`` at ``y``); ``rest_min``: the lowest of them over the margins not branched on
    (``inf`` if none); ``rest_ok``: ``rest_min > 0``.
    """

    bounds: list
    lam0: jax.Array
    b0: jax.Array
    root_lb: jax.Array
    rest_min: jax.Array
    rest_ok: jax.Array
    cuts: "Cuts | None" = None          # bab_cuts.Cuts, added by bab_host.bab_search


def _layer_rows(prep: Prepared, j: int, r=None):
    """``(lam (2R, *h_j), bias (2R,))``: hidden layer ``j``'s pre-activations of units ``r`` (all if None) as
    rows over the previous activation, lower rows then negated upper rows (``bounds._both``)."""
    jac, const = prep.jacs[j], prep.consts[j]
    if r is not None:
        jac, const = jac[r], const[r]
    return _both(jac, const)


def _tightened(prep: Prepared, x, eps, bcfg: BoundConfig, bounds, steps: int, lr: float = 0.1):
    """alpha-CROWN's bounds of the hidden pre-activations (Xu et al. 2021, "Fast and complete", section 3.1:
    the intermediate layers' slopes optimised for their own bounds), layer by layer from the second: the
    lower and upper bound of every unit of layer ``k`` is a back-substitution row with its own lower slopes
    of the ReLUs of layers ``1 .. k-1`` (started at CROWN's adaptive choice, at the bounds already tightened
    below ``k``), raised by ``steps`` Adam steps projected to ``[0, 1]``; the best bound of each row over the
    iterates is kept (every iterate is sound) and intersected with CROWN's ``bounds``. Rows of units that
    CROWN already shows stable are not optimised (their relaxation is exact). Layers without a dense
    matrix, and the second layer where ``nets.local`` bounds it, keep CROWN's bounds.

    Measured on boxes of the full-MNIST MLPs that ``verify`` leaves open (50 steps, ``benchmarks/
    verify_speed.py``'s models): on 784-256-256-10 (5 boxes) the second layer's unstable units went from
    91-199 to 90-196, its mean width 1-3% narrower; on 784-256x4-10 the last hidden layer's mean width was
    4-17% narrower, and on 8 boxes at eps 0.02-0.03, after 1,039 subdomains each, branch and bound's lower
    bound was 8-23% higher (e.g. -14.5 -> -12.4, -105 -> -86) for 0-14% more time (alone, 2 cores), with
    no box decided either way. Off by default (``verify`` does not use it): it decided nothing more."""
    out = [bounds[0]]
    for k in range(2, len(bounds) + 1):
        l0, u0 = bounds[k - 1]
        if prep.jacs[k - 1] is None or (k == 2 and prep.local):
            out.append((l0, u0))
            continue
        m = math.prod(l0.shape)
        unstable = jnp.concatenate([(l0 < 0) & (u0 > 0)] * 2, axis=None)
        lam, b = _layer_rows(prep, k - 1)
        base = [jnp.broadcast_to((u > -l).astype(jnp.float32), (2 * m,) + l.shape) for l, u in out]

        def lbs(a, lam=lam, b=b, k=k):
            rel = [relax(l, u, ai) for (l, u), ai in zip(out, a)]
            lm, bb = backsub(prep, rel, lam, b, k - 1)
            return concretize(lm, bb, x, eps, bcfg)[0]

        opt = optax.adam(lr)

        def objective(a, lbs=lbs, unstable=unstable):
            lb = lbs(a)
            return -jnp.sum(jnp.where(unstable, lb, 0.0)), lb

        def step(carry, _, objective=objective):
            a, st, best = carry      # one back-substitution per step: the bound at ``a`` and its gradient
            (_, lb), g = jax.value_and_grad(objective, has_aux=True)(a)
            upd, st = opt.update(g, st, a)
            a = [jnp.clip(ai + ui, 0.0, 1.0) for ai, ui in zip(a, upd)]
            return (a, st, jnp.maximum(best, lb)), None

        start = (base, opt.init(base), jnp.full((2 * m,), -jnp.inf))
        (a, _, best), _ = jax.lax.scan(step, start, None, length=steps)
        best = jnp.maximum(best, lbs(a))                   # the last iterate's bound
        l = jnp.maximum(l0.reshape(-1), best[:m]).reshape(l0.shape)
        u = jnp.minimum(u0.reshape(-1), -best[m:]).reshape(u0.shape)
        out.append((l, u))
    return out


def _root(prep: Prepared, x, y, eps, cfg: BaBConfig) -> Root:
    """CROWN on every margin of the ball (on alpha-CROWN's hidden bounds with ``cfg.tighten``); only the
    ``cfg.rows`` worst are branched on."""
    bcfg = dataclasses.replace(cfg.bound, method="crown")
    k_cls = prep.net.n_classes
    C = margin_spec(y, k_cls)
    other = jnp.arange(k_cls) != y
    bounds, relaxes = hidden_bounds(prep, x, eps, bcfg)
    if cfg.tighten > 0:
        bounds = _tightened(prep, x, eps, bcfg, bounds, cfg.tighten)
        relaxes = [relax(l, u) for l, u in bounds]
    lam_all, b_all = _spec_start(prep, C)
    full, fb = backsub(prep, relaxes, lam_all, b_all, len(relaxes))
    root_lb = jnp.where(other, concretize(full, fb, x, eps, bcfg)[0], jnp.inf)
    n_rows = min(cfg.rows, k_cls - 1)
    order = jnp.argsort(root_lb)
    kept, rest = order[:n_rows], order[n_rows:]
    rest_min = jnp.min(root_lb[rest], initial=jnp.inf)
    return Root(bounds, lam_all[kept], b_all[kept], root_lb, rest_min, rest_min > 0)


__all__ = ["Root"]
