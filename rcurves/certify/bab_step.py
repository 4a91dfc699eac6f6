"""The jitted programs of one step of the host-driven search (``bab_host.bab_search``): the ball's shared arrays
(:func:`_search_root`), a batch of parents split and their children bounded (:func:`_search_split`), and a
subdomain's hidden bounds for its exact LP (:func:`_leaf_bounds`). Each is compiled once per architecture,
``_program_cfg(cfg)`` and the shapes of its arguments (the batch, the rows recomputed, the cuts); ``bab_batch``
reads the memory of :func:`_search_split` to size the batch.
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from attacks.losses import margin
from attacks.precision import exact_precision
from rcurves.certify.bab_bounds import _bounder
from rcurves.certify.bab_root import _root
from rcurves.certify.bab_settings import BaBConfig


def _program_cfg(cfg: BaBConfig) -> BaBConfig:
    """``cfg`` without the settings the host applies (batch, budget, capacity, second_cuts): one program for
    any budget (and the batch is the shape of the parents)."""
    return dataclasses.replace(cfg, batch=0, budget=0, capacity=0, second_cuts=0)


@functools.partial(jax.jit, static_argnames=("cfg",))
@exact_precision
def _search_root(net, x, y, eps, *, cfg: BaBConfig):
    """``(prep, root, params)``: the shared arrays of the ball and the root subdomain's starting
    ``(alpha, beta)`` (with ``cfg.refresh`` also the root's hidden bounds; the root has no cuts here:
    ``bab_host.bab_search`` adds them and their logits) (its bound comes from :func:`_search_split`: one program to
    compile, not two)."""
    from rcurves.nets.bounds import prepare

    prep = prepare(net, dataclasses.replace(cfg.bound, method="crown"))
    root = _root(prep, x, y, eps, cfg)
    return prep, root, _bounder(prep, root, x, eps, cfg)[1]()


@functools.partial(jax.jit, static_argnames=("cfg", "fresh"))
@exact_precision
def _search_split(prep, root, x, y, eps, parents, units, params, rows=None, *, cfg: BaBConfig, fresh=True):
    """The ``2 B`` children of ``parents (B, H)`` split on ``units (B,)`` (active ones first; a unit ``-1``
    leaves its parent as it is), each bounded from its parent's ``params``: ``(sgn (2B, H), lb (2B,),
    nxt (2B,), params, primal (2B, D), margin (2B,))``: each child's primal point (the point of the ball
    its bound's worst row is lowest at) and the model's smallest margin ``z_y - max_{j != y} z_j`` there,
    in float32 (negative: a candidate counterexample). ``rows``: see ``bab_bounds._bounder``."""
    bound_one, _, total, _ = _bounder(prep, root, x, eps, cfg, rows)
    cols = jnp.arange(total)[None, :] == units[:, None]
    kids = jnp.concatenate([jnp.where(cols, jnp.int8(-1), parents), jnp.where(cols, jnp.int8(1), parents)])
    warm = jax.tree_util.tree_map(lambda a: jnp.concatenate([a, a]), params)
    lb, nxt, kp, pts = jax.vmap(functools.partial(bound_one, primal=True, fresh=fresh))(kids, warm)
    z = prep.net.logits(pts.reshape((pts.shape[0],) + tuple(prep.net.input_shape)))
    return kids, lb, nxt, kp, pts, -jax.vmap(margin, in_axes=(0, None))(z, y)


@functools.partial(jax.jit, static_argnames=("cfg",))
@exact_precision
def _leaf_bounds(prep, root, x, eps, sgn, rows=None, inherited=None, *, cfg: BaBConfig):
    """The hidden pre-activation bounds ``[(l, u), ...]`` of the subdomain ``sgn (H,)`` (as :func:`_search_split`
    bounds it: the same recomputed rows; ``inherited``: with ``cfg.refresh``, the subdomain's own hidden bounds of
    the layers after the first: the second layer's recomputed and intersected with them, the later ones as they
    are, split units clipped)."""
    return _bounder(prep, root, x, eps, cfg, rows)[3](sgn, inherited, inherited is None)[0]


__all__ = []
