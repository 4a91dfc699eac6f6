"""Fixed-radius PGD (Madry et al. 2018) with restarts and APGD step sizes.

``pgd`` maximises a loss inside the l_p ball of radius ``eps`` (one radius per
point allowed) and returns, per point, the highest-loss iterate over all
restarts. Restarts are parallel lanes (``vmap``, or a ``lax.map`` when
their batch outgrows the caches: ``attacks.xla.lanes_in_loop``), steps a
``lax.scan``: one
jitted program costing ``restarts * steps`` model evaluations per point
(``restarts * (steps - 1)`` gradients: a lane's last iterate needs only its
logits).
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import jax
import jax.numpy as jnp

from attacks import checks
from attacks.engine import EngineConfig, flat, run_lane, single
from attacks.norms import geometry
from attacks.xla import lanes_in_loop, program


@program(static_argnames=("logits_fn", "cfg", "bounds", "restarts", "random_start"))
def _pgd_jit(logits_fn, x, y, eps, keys, step_size, *, cfg, bounds, restarts, random_start):
    fn1 = single(logits_fn, x.shape[1:])
    geo = geometry(cfg.norm, cfg.l1_sparsity)
    loop = lanes_in_loop(fn1, flat(x)[0], x.shape[0], restarts)

    def point(xi, yi, ei, ki, si):
        rkeys = jax.random.split(ki, restarts)

        def lane(rk):
            d0 = geo.random(rk, xi.shape, ei) if random_start else jnp.zeros_like(xi)
            return run_lane(fn1, xi, yi, ei, d0, si, cfg, bounds)

        res = jax.lax.map(lane, rkeys) if loop else jax.vmap(lane)(rkeys)
        # Prefer a lane that found an adversarial (highest loss among those), else highest loss.
        found = jnp.isfinite(res.adv_norm)
        score = jnp.where(found, res.f_max + 1e30, res.f_max)
        best = jnp.argmax(score)
        return res.point_max[best]

    return jax.vmap(point)(flat(x), y, eps, keys, step_size).reshape(x.shape)


def pgd(
    logits_fn: Callable,
    x,
    y,
    eps,
    *,
    norm: str,
    steps: int,
    key,
    step_size=None,
    bounds: Optional[Tuple[float, float]] = (0.0, 1.0),
    restarts: int = 1,
    loss: str = "ce",
    random_start: bool = True,
    l1_sparsity: float = 0.99,
    return_success: bool = False,
):
    """Projected gradient ascent inside the l_p ball of radius ``eps``.

    Args:
      logits_fn: ``(n, *shape) -> (n, K)``.
      x: clean inputs ``(n, *shape)``, inside ``bounds``.
      y: labels ``(n,)`` in ``[0, K)``.
      eps: radius, a scalar or ``(n,)``, in the units of ``norm``.
      norm: 'linf', 'l2' or 'l1'.
      steps: iterates evaluated per restart (``steps - 1`` gradient steps).
      key: a PRNG key (or one per point, ``(n, 2)``) for the random starts.
      step_size: absolute step (scalar or ``(n,)``) for Madry's fixed-step PGD;
        ``None`` uses APGD's adaptive schedule (initial step ``2 eps``, momentum,
        step halving at checkpoints; Croce & Hein 2020).
      bounds: ``(lo, hi)`` input domain, or None for unbounded R^d.
      restarts: independent random starts (parallel lanes); the result is the
        best over them.
      loss: 'ce' (cross-entropy, Madry) or 'margin' (logit margin, CW f6).
      random_start: start uniformly in the ball (else at ``x``).
      l1_sparsity: for norm 'l1', the |grad| quantile above which coordinates move.
      return_success: also return whether each ``x_adv`` is misclassified.

    Returns:
      ``x_adv (n, *shape)``: per point the highest-loss iterate of the restart
      that reached a misclassification if any did, else of the highest-loss
      restart. ``||x_adv - x|| <= eps`` and ``x_adv`` is inside ``bounds``.
      With ``return_success``, ``(x_adv, success)``: ``success (n,)`` bool,
      re-checked on ``x_adv`` itself (its logits finite and their argmax not
      ``y``; one more forward pass).
    """
    x, y, bounds, _ = checks.check_model_inputs(logits_fn, x, y, bounds)
    n = x.shape[0]
    norm = checks.check_norm(norm)
    steps = checks.check_positive_int(steps, "steps")
    restarts = checks.check_positive_int(restarts, "restarts")
    eps = checks.check_eps(eps, n, "eps")
    keys = checks.check_key(key, n)
    loss = checks.check_choice(loss, ("ce", "margin"), "loss")
    if step_size is None:
        schedule, step = "apgd", 2.0 * eps
    else:
        schedule, step = "fixed", checks.check_eps(step_size, n, "step_size")
    cfg = EngineConfig(norm=norm, steps=steps, loss=loss, schedule=schedule, l1_sparsity=float(l1_sparsity))
    x_adv = _pgd_jit(
        logits_fn, x, y, eps, keys, step, cfg=cfg, bounds=bounds, restarts=restarts,
        random_start=bool(random_start),
    )
    if not return_success:
        return x_adv
    logits = logits_fn(x_adv)
    success = jnp.all(jnp.isfinite(logits), axis=-1) & (jnp.argmax(logits, axis=-1) != y)
    return x_adv, success


__all__ = ["pgd"]
