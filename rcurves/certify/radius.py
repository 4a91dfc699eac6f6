"""Certified radii: per point the largest ball a bound method proves robust.

``certified_radius`` runs, per point, a fixed number of certification rounds
(``lax.fori_loop``; points ``vmap``ped in chunks by ``lax.map``; one jitted
program) on a bracket ``[lo, hi]``:

* ``hi`` starts at an upper bound on the distance: the attack distance given
  in ``upper``, else the box's diameter in the norm (every point of the
  domain lies within it), else (unbounded inputs) a guess that is multiplied
  by 4 until certification fails;
* each round certifies the ball of radius ``mid`` (``bounds.certify_point``):
  success raises ``lo`` to ``mid``; failure lowers ``hi`` to ``mid`` and
  raises ``lo`` to the radius certified by the failed bound's own affine form
  (``bounds.affine_radius``), which for a linear model is already the exact
  Lemma 1 distance;
* ``mid`` is ``hi / 4`` while nothing is certified, the geometric mean while
  ``hi > 2 lo``, the midpoint after, so the bracket's ratio shrinks quickly
  whatever the scale.

Every ``lo`` is the radius of a ball on which the method proved every margin
``z_y - z_j`` positive, so the result is a lower bound on the minimal
adversarial distance (up to float32 rounding in the bound computation).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks import checks
from rcurves.certify.bounds import (
    METHODS, BoundConfig, Prepared, certify_point, margin_spec, prepare, spec_bound,
)
from rcurves.certify.checks import check_net, check_points, check_upper, diameter
from rcurves.certify.layers import Network, forward

#: Scratch memory (bytes) one chunk of points may use; sets the chunk size.
CHUNK_BYTES = 256 * 2 ** 20


@dataclasses.dataclass(frozen=True)
class RadiusConfig:
    """Static settings of the radius search: the bound and the chunk size
    (the number of rounds is an argument of the program, not a setting, so
    changing it does not recompile)."""

    bound: BoundConfig
    batch: int = 1


def _choose(lo, hi):
    return jnp.where(lo <= 0, hi / 4.0, jnp.where(hi > 2.0 * lo, jnp.sqrt(lo * hi), (lo + hi) / 2.0))


def _search_point(prep: Prepared, x, y, hi0, grow, cap, steps, cfg: RadiusConfig):
    """Certified radius of one point (see the module docstring).

    ``hi0``: first radius tried; ``grow``: 1 when ``hi0`` is an upper bound on
    the distance, 4 when it is only a guess; ``cap``: a radius beyond which
    certification means no adversarial exists in the domain (``inf``: none).
    """
    correct = jnp.argmax(forward(prep.net, x)) == y

    def body(_, st):
        lo, hi, opn = st
        mid = jnp.where(opn, hi, _choose(lo, hi))
        ok, r = certify_point(prep, x, y, mid, cfg.bound)
        new_lo = jnp.where(ok, jnp.maximum(lo, mid), jnp.maximum(lo, r))
        new_hi = jnp.where(ok, jnp.where(opn, mid * grow, hi), mid)
        return new_lo, new_hi, opn & ok

    zero = jnp.zeros((), jnp.float32)
    lo, _, _ = jax.lax.fori_loop(0, steps, body, (zero, hi0, jnp.array(True)))
    lo = jnp.where(lo >= cap, jnp.inf, lo)
    return jnp.where(correct & (hi0 > 0), lo, 0.0)


def _radius_program(net, x, y, hi0, grow, cap, steps, *, cfg: RadiusConfig):
    prep = prepare(net, cfg.bound)
    fn = lambda a: _search_point(prep, *a, steps, cfg)  # noqa: E731
    return jax.lax.map(fn, (x, y, hi0, grow, cap), batch_size=cfg.batch)


_radius_jit = jax.jit(_radius_program, static_argnames=("cfg",))


def chunk_size(net: Network, n: int, method: str) -> int:
    """Points per vmapped chunk so that one chunk's largest back-substitution
    (rows times widths, a few temporaries) fits in :data:`CHUNK_BYTES`."""
    sizes = [math.prod(s) for s in net.shapes]
    floats = 4 * sizes[0]
    for k in range(2, len(sizes)):  # hidden layer k-1's rows, pulled back to the input
        rows = 2 * sizes[k - 1] if k < len(sizes) - 1 else sizes[-1]
        floats = max(floats, rows * max(sizes[: k - 1]) * 3)
    floats = max(floats, sizes[-1] * max(sizes[:-1]) * 3)
    if method == "alpha-crown":
        floats *= 4
    return int(max(1, min(n, 256, CHUNK_BYTES // (4 * floats))))


def certified_radius(
    net: Network,
    x: Any,
    y: Any,
    *,
    norm: str,
    method: str = "crown",
    bounds: Optional[Tuple[float, float]] = (0.0, 1.0),
    upper: Optional[Any] = None,
    search_steps: Optional[int] = None,
    alpha_steps: int = 20,
    alpha_lr: float = 0.1,
) -> jax.Array:
    """Per point, the largest radius the bound ``method`` certifies.

    Args:
      net: a :class:`~rcurves.certify.Network` (``mlp`` / ``from_model``).
      x: ``(n, *net.input_shape)`` (any shape with as many features per point).
      y: ``(n,)`` integer labels.
      norm: 'linf', 'l2' or 'l1'.
      method: 'crown' (default), 'crown-ibp', 'ibp' or 'alpha-crown'
        (optimised slopes; ``alpha_steps`` Adam steps of rate ``alpha_lr``
        per certification, so about ``3 * alpha_steps`` times CROWN's cost).
      bounds: ``(lo, hi)`` input domain, or None for unbounded inputs (then a
        network without hidden layers gives exactly Lemma 1 of paper 000).
      upper: optional ``(n,)`` upper bounds on the distances (e.g. an attack's
        distances): the search runs inside ``[0, upper]``; ``inf`` entries (and
        ``upper=None``) use the box's diameter, or for ``bounds=None`` a
        growing guess.
      search_steps: certification rounds per point (default 16 with ``upper``,
        24 without; each one a full bound computation).

    Returns:
      ``(n,)`` float32 certified radii: ``0`` for misclassified points; ``inf``
      where the whole domain is certified (no adversarial exists in it).
      With a finite ``upper`` the radius never exceeds it.

    Raises:
      ValueError: bad ``net``, shapes, labels, norm, method, bounds (or ``x``
        outside them), ``upper`` or step counts; before any compilation.
    """
    net = check_net(net)
    norm = checks.check_norm(norm)
    method = checks.check_choice(method, METHODS, "method")
    x, y, bounds = check_points(net, x, y, bounds)
    n = x.shape[0]
    upper = check_upper(upper, n)
    if search_steps is None:
        search_steps = 16 if upper is not None else 24
    steps = checks.check_positive_int(search_steps, "search_steps")
    alpha_steps = checks.check_positive_int(alpha_steps, "alpha_steps")
    alpha_lr = checks.check_positive_float(alpha_lr, "alpha_lr")
    u = np.full(n, np.inf, np.float32) if upper is None else np.asarray(upper, np.float32)
    known = np.isfinite(u)
    if bounds is not None:
        diam = np.float32(diameter(norm, bounds, net.input_shape))
        hi0 = np.where(known, u, diam)
        grow = np.ones(n, np.float32)
        cap = np.where(known, np.inf, diam).astype(np.float32)
    else:
        xf = np.abs(np.asarray(x, np.float32).reshape(n, -1))
        scale = {"linf": xf.max(1), "l2": np.sqrt((xf ** 2).sum(1)), "l1": xf.sum(1)}[norm]
        hi0 = np.where(known, u, np.maximum(scale, 1.0))
        grow = np.where(known, 1.0, 4.0).astype(np.float32)
        cap = np.full(n, np.inf, np.float32)
    cfg = RadiusConfig(
        bound=BoundConfig(norm=norm, method=method, domain=bounds, alpha_steps=alpha_steps, alpha_lr=alpha_lr),
        batch=chunk_size(net, n, method),
    )
    return _radius_jit(net, x, y, jnp.asarray(hi0, jnp.float32), jnp.asarray(grow, jnp.float32),
                       jnp.asarray(cap, jnp.float32), jnp.int32(steps), cfg=cfg)


# ---------------------------------------------------------------------------
# bounds on the logits and margins themselves


def _spec_program(net, x, eps, C, *, cfg: BoundConfig, batch: int):
    prep = prepare(net, cfg)
    fn = lambda a: spec_bound(prep, a[0], a[1], a[2], cfg).lb  # noqa: E731
    return jax.lax.map(fn, (x, eps, C), batch_size=batch)


_spec_jit = jax.jit(_spec_program, static_argnames=("cfg", "batch"))


def _bound_inputs(net, x, y, eps, norm, method, bounds):
    net = check_net(net)
    norm = checks.check_norm(norm)
    method = checks.check_choice(method, METHODS, "method")
    if y is None:
        x = checks.check_array(x, "x", min_ndim=2)
        x, _, bounds = check_points(net, x, np.zeros(x.shape[0], np.int32), bounds)
    else:
        x, y, bounds = check_points(net, x, y, bounds)
    eps = checks.check_eps(eps, x.shape[0])
    return net, x, y, eps, BoundConfig(norm=norm, method=method, domain=bounds)


def logit_bounds(net: Network, x: Any, eps: Any, *, norm: str, method: str = "crown",
                 bounds: Optional[Tuple[float, float]] = (0.0, 1.0)):
    """Sound lower and upper bounds of every logit over each point's ball.

    Returns ``(lower (n, K), upper (n, K))`` with ``lower <= net.logits(x') <=
    upper`` for every ``x'`` with ``||x' - x||_norm <= eps`` inside ``bounds``.
    """
    net, x, _, eps, cfg = _bound_inputs(net, x, None, eps, norm, method, bounds)
    n, k = x.shape[0], net.n_classes
    eye = jnp.eye(k, dtype=jnp.float32)
    C = jnp.broadcast_to(jnp.concatenate([eye, -eye]), (n, 2 * k, k))
    lb = _spec_jit(net, x, eps, C, cfg=cfg, batch=chunk_size(net, n, method))
    return lb[:, :k], -lb[:, k:]


def margin_bounds(net: Network, x: Any, y: Any, eps: Any, *, norm: str, method: str = "crown",
                  bounds: Optional[Tuple[float, float]] = (0.0, 1.0)) -> jax.Array:
    """Lower bounds ``(n, K)`` of the margins ``z_y - z_j`` over each point's ball
    (column ``y`` is ``+inf``); all positive means the ball is certified."""
    net, x, y, eps, cfg = _bound_inputs(net, x, y, eps, norm, method, bounds)
    n, k = x.shape[0], net.n_classes
    C = jax.vmap(lambda yi: margin_spec(yi, k))(y)
    lb = _spec_jit(net, x, eps, C, cfg=cfg, batch=chunk_size(net, n, method))
    return jnp.where(jax.nn.one_hot(y, k, dtype=bool), jnp.inf, lb)


__all__ = ["CHUNK_BYTES", "RadiusConfig", "certified_radius", "chunk_size", "logit_bounds", "margin_bounds"]
