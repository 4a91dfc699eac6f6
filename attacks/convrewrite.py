"""A user's convolutions as patch matrices, for attack loops on XLA:CPU.

XLA:CPU runs ``lax.conv_general_dilated`` inside a ``while`` loop (every
attack's ``lax.scan`` over steps) far slower than the same convolution
outside one, while strided slices and a matrix product run at full speed in
both. The toolkit's own CNN is written with patches for that reason
(``rcurves.models.conv2d_patches``); a user's flax model with ``nn.Conv`` is
not. :func:`patches_model` rewrites any model: it traces ``logits_fn`` to a
jaxpr (once per input shape) and evaluates it with every plain convolution
(no dilation, one feature group, any strides, padding and layout) replaced by
its patch form; every other operation is bound as it was. Nested ``jit``
calls are inlined, so convolutions inside them are rewritten too; other
higher-order primitives (custom derivatives, ``remat``) are kept as they are.

The rewritten model computes the same function; its float rounding differs
from ``lax.conv`` in the order of the products' sums (about 1e-6 relative).
"""
from __future__ import annotations

from typing import Callable

import jax.numpy as jnp
from jax import lax

from attacks.interpret import CALLS as _CALLS, rewritten

_CONV = "conv_general_dilated"


def conv_as_patches(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                    feature_group_count, batch_group_count, precision=None, preferred_element_type=None, **_):
    """``lax.conv_general_dilated`` as strided slices of the padded input times the kernel."""
    dn = dimension_numbers
    if not isinstance(dn, lax.ConvDimensionNumbers):
        dn = lax.conv_dimension_numbers(lhs.shape, rhs.shape, dn)
    lhs_spec, rhs_spec, out_spec = dn.lhs_spec, dn.rhs_spec, dn.out_spec
    # to (N, spatial..., C) and (spatial..., I, O)
    x = jnp.transpose(lhs, (lhs_spec[0],) + tuple(lhs_spec[2:]) + (lhs_spec[1],))
    k = jnp.transpose(rhs, tuple(rhs_spec[2:]) + (rhs_spec[1], rhs_spec[0]))
    nsp = x.ndim - 2
    x = jnp.pad(x, ((0, 0),) + tuple((int(lo), int(hi)) for lo, hi in padding) + ((0, 0),))
    ksz = k.shape[:nsp]
    out_sz = [(x.shape[1 + i] - ksz[i]) // window_strides[i] + 1 for i in range(nsp)]
    cols = []
    for taps in _product([range(s) for s in ksz]):
        idx = (slice(None),) + tuple(
            slice(t, t + (o - 1) * s + 1, s) for t, o, s in zip(taps, out_sz, window_strides)) + (slice(None),)
        cols.append(x[idx])
    patches = jnp.concatenate(cols, axis=-1)                 # (N, out..., prod(ksz) * C)
    kmat = k.reshape((-1, k.shape[-1]))                        # (prod(ksz) * C, O), tap-major like cols
    out = jnp.matmul(patches, kmat, precision=precision, preferred_element_type=preferred_element_type)
    # back to the requested output layout: out is (N, spatial..., O)
    perm = [0] * out.ndim
    perm[out_spec[0]] = 0
    perm[out_spec[1]] = out.ndim - 1
    for i, d in enumerate(out_spec[2:]):
        perm[d] = 1 + i
    return jnp.transpose(out, perm)


def _product(ranges):
    if not ranges:
        yield ()
        return
    for i in ranges[0]:
        for rest in _product(ranges[1:]):
            yield (i,) + rest


def rewritable(params) -> bool:
    """Whether a convolution's parameters allow the patch form."""
    return (params["feature_group_count"] == 1 and params["batch_group_count"] == 1
            and all(d == 1 for d in params["lhs_dilation"]) and all(d == 1 for d in params["rhs_dilation"]))


def _patches(eqn, invals):
    """``interpret.Rule``: a rewritable convolution as patches."""
    if eqn.primitive.name == _CONV and rewritable(eqn.params):
        return [conv_as_patches(*invals, **eqn.params)]
    return None


def has_conv(closed) -> bool:
    """Whether a closed jaxpr (or a nested call in it) has a rewritable convolution."""
    for eqn in closed.jaxpr.eqns:
        if eqn.primitive.name == _CONV and rewritable(eqn.params):
            return True
        inner = eqn.params.get("jaxpr")
        if eqn.primitive.name in _CALLS and inner is not None and has_conv(inner):
            return True
    return False


def patches_model(logits_fn: Callable) -> Callable:
    """``logits_fn`` with its convolutions computed as patch matrices (same signature)."""
    return rewritten(logits_fn, _patches)


__all__ = ["conv_as_patches", "has_conv", "patches_model", "rewritable"]
