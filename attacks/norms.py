"""Geometry of the l_inf, l_2 and l_1 threat models, for one point.

Everything here acts on a single perturbation ``delta`` of any shape (the
input's shape); batching is by ``vmap``. A threat model is a ``Geometry``
NamedTuple of pure functions, chosen once from the norm name (no per-norm
subclasses, no string comparisons inside traced code).

References:
  Madry et al. 2018 (PGD); Croce & Hein 2020, "Reliable evaluation of
  adversarial robustness..." (APGD); Duchi et al. 2008, "Efficient projections
  onto the l1-ball" (sort-based exact l1 projection); Tramèr & Boneh 2019
  (sparse l1 steepest ascent).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

_TINY = 1e-12


def like(ref: jax.Array, value, dtype=jnp.float32) -> jax.Array:
    """A scalar ``value`` that inherits ``ref``'s tracing context.

    Loop carries initialised from Python constants are not "varying" under a
    user's ``shard_map``; deriving them from an input (``0 * ref + value``)
    keeps ``lax.scan``/``while_loop`` carry types consistent there. ``ref``
    must be finite (inputs are validated).
    """
    return (jnp.zeros((), dtype) + 0 * jnp.ravel(ref)[0]).astype(dtype) + jnp.asarray(value, dtype)


def linf_norm(v: jax.Array) -> jax.Array:
    return jnp.max(jnp.abs(v))


def l2_norm(v: jax.Array) -> jax.Array:
    return jnp.sqrt(jnp.sum(jnp.square(v)))


def l1_norm(v: jax.Array) -> jax.Array:
    return jnp.sum(jnp.abs(v))


def project_linf(delta: jax.Array, eps: jax.Array) -> jax.Array:
    """Euclidean projection onto {||delta||_inf <= eps}: coordinate clip."""
    return jnp.clip(delta, -eps, eps)


def project_l2(delta: jax.Array, eps: jax.Array) -> jax.Array:
    """Euclidean projection onto {||delta||_2 <= eps}: radial rescale."""
    nrm = l2_norm(delta)
    return delta * jnp.minimum(1.0, eps / jnp.maximum(nrm, _TINY))


def project_l1(delta: jax.Array, eps: jax.Array) -> jax.Array:
    """Exact Euclidean projection onto {||delta||_1 <= eps} (Duchi et al. 2008).

    Soft-thresholds |delta| by the theta that makes the l1 norm eps:
    theta = (sum_{i<=rho} mu_i - eps) / rho with mu sorted descending and
    rho = max{j : mu_j - (sum_{i<=j} mu_i - eps)/j > 0}. O(d log d).
    """
    flat = delta.reshape(-1)
    a = jnp.abs(flat)
    mu = jnp.sort(a)[::-1]
    cs = jnp.cumsum(mu)
    j = jnp.arange(1, mu.shape[0] + 1, dtype=flat.dtype)
    cond = mu - (cs - eps) / j > 0
    rho = jnp.maximum(jnp.sum(cond), 1)
    theta = jnp.maximum((cs[rho - 1] - eps) / rho, 0.0)
    proj = jnp.sign(flat) * jnp.maximum(a - theta, 0.0)
    inside = jnp.sum(a) <= eps
    return jnp.where(inside, flat, proj).reshape(delta.shape)


def step_linf(grad: jax.Array, size: jax.Array) -> jax.Array:
    """Steepest ascent for l_inf: size * sign(grad)."""
    return size * jnp.sign(grad)


def step_l2(grad: jax.Array, size: jax.Array) -> jax.Array:
    """Steepest ascent for l_2: size * grad / ||grad||_2.

    One scalar division and a product per coordinate: a division per
    coordinate costs more than the pass's memory traffic on a CPU (and XLA
    recomputes the step in every pass of a PGD step that reads it).
    """
    return grad * (size / jnp.maximum(l2_norm(grad), _TINY))


def make_step_l1(sparsity: float = 0.99) -> Callable:
    """Sparse l_1 steepest ascent (Tramèr & Boneh 2019, SLIDE).

    Moves only the coordinates whose |grad| is at or above the ``sparsity``
    quantile, each by sign(grad), scaled to l_1 norm ``size``. ``sparsity=1``
    is the exact l_1 steepest-ascent direction (one coordinate).
    """

    def step_l1(grad: jax.Array, size: jax.Array) -> jax.Array:
        a = jnp.abs(grad).reshape(-1)
        k = max(1, int(round((1.0 - sparsity) * a.shape[0])))
        thresh = jax.lax.top_k(a, k)[0][-1]
        mask = (a >= thresh) & (a > 0)
        e = jnp.where(mask, jnp.sign(grad.reshape(-1)), 0.0)
        e = e * (1.0 / jnp.maximum(jnp.sum(jnp.abs(e)), 1.0))
        return (size * e).reshape(grad.shape)

    return step_l1


def random_linf(key, shape, eps):
    return jax.random.uniform(key, shape, minval=-1.0, maxval=1.0) * eps


def random_l2(key, shape, eps):
    """Uniform in the l_2 ball of radius eps (direction x radius^(1/d))."""
    k1, k2 = jax.random.split(key)
    g = jax.random.normal(k1, shape)
    d = g.size
    r = jax.random.uniform(k2) ** (1.0 / d)
    return eps * r * g / jnp.maximum(l2_norm(g), _TINY)


def random_l1(key, shape, eps):
    """Uniform in the l_1 ball: Laplace signs/magnitudes, radius^(1/d)."""
    k1, k2 = jax.random.split(key)
    g = jax.random.laplace(k1, shape)
    d = g.size
    r = jax.random.uniform(k2) ** (1.0 / d)
    return eps * r * g / jnp.maximum(l1_norm(g), _TINY)


class Geometry(NamedTuple):
    """A threat model: its norm, projection, ascent step and random start.

    ``norm(delta) -> ()``, ``project(delta, eps) -> delta``,
    ``step(grad, size) -> delta`` (steepest ascent of size ``size`` in this
    norm), ``random(key, shape, eps) -> delta`` in the ball.
    """

    name: str
    norm: Callable
    project: Callable
    step: Callable
    random: Callable


def geometry(norm: str, l1_sparsity: float = 0.99) -> Geometry:
    """The Geometry for a canonical norm name ('linf', 'l2', 'l1')."""
    if norm == "linf":
        return Geometry("linf", linf_norm, project_linf, step_linf, random_linf)
    if norm == "l2":
        return Geometry("l2", l2_norm, project_l2, step_l2, random_l2)
    if norm == "l1":
        return Geometry("l1", l1_norm, project_l1, make_step_l1(l1_sparsity), random_l1)
    raise ValueError(f"norm: expected 'linf', 'l2' or 'l1', got {norm!r}")


def clip_box(x_adv: jax.Array, bounds: Optional[Tuple[float, float]]) -> jax.Array:
    """Clip to the input domain; identity when ``bounds`` is None.

    For x inside the box, clipping x + delta only shrinks every |delta_i|, so
    it never leaves an l_p ball that delta was in: the result satisfies both
    constraints at once.
    """
    if bounds is None:
        return x_adv
    return jnp.clip(x_adv, bounds[0], bounds[1])


def project_perturbation(geo: Geometry, x, delta, eps, bounds):
    """delta projected onto the eps-ball, then x + delta clipped to the box."""
    return clip_box(x + geo.project(delta, eps), bounds) - x


__all__ = [
    "Geometry",
    "clip_box",
    "geometry",
    "l1_norm",
    "l2_norm",
    "linf_norm",
    "make_step_l1",
    "project_l1",
    "project_l2",
    "project_linf",
    "project_perturbation",
    "random_l1",
    "random_l2",
    "random_linf",
    "step_l2",
    "step_linf",
]
