"""CROWN bounds of a second convolution's units, computed on their receptive fields.

The bounds of the second hidden layer of a network that starts with two
convolutions (the C.1 CNN of paper 000: 28x28x1 -> 14x14x16 -> 7x7x32) are
the costliest part of CROWN when written densely: every one of its
``H2 * W2 * F2`` units (and their negatives) is pulled back through the first
convolution as a full-size map. But unit ``(i, j, f)`` depends only on a
``k2 x k2 x F1`` window of the first layer, hence on a
``R x R x C0`` window of the input, ``R = s1 (k2 - 1) + k1`` (10 for C.1).
Here the back-substitution runs on those windows (the "patches" form of
Xu et al. 2020, auto_LiRPA): the relaxation slopes of the first layer are cut
into conv2's windows, multiplied by conv2's kernel (one coefficient map per
output channel, shared by all positions), pulled back through conv1 by one
small contraction per kernel offset, and bounded on the input window. The
arithmetic is that of the dense back-substitution in ``bounds.backsub`` (a
test checks the two agree), at about 1/100 of its cost and memory.

'SAME' padding: window positions outside the first layer's grid have zero
slopes and zero bias (conv2 sees zeros there), positions outside the input
have value 0 and no freedom (conv1 sees zeros there).
"""
from __future__ import annotations

from typing import Tuple

import jax.numpy as jnp

from rcurves.nets.layers import Conv, Network, Reshape
from attacks.precision import exact_precision


def _same_padding(size: int, k: int, stride: int) -> Tuple[int, int]:
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2


def applies(net: Network) -> bool:
    """True when block 1 is (reshapes and) one Conv and block 2 is one Conv, both hidden."""
    blocks = net.blocks
    if len(blocks) < 3:
        return False
    b1, b2 = blocks[0], blocks[1]
    return (
        bool(b1) and isinstance(b1[-1], Conv) and all(isinstance(l, Reshape) for l in b1[:-1])
        and len(b2) == 1 and isinstance(b2[0], Conv)
    )


def windows(a: jnp.ndarray, top: int, left: int, size: Tuple[int, int], stride: int,
            out: Tuple[int, int]) -> jnp.ndarray:
    """``w[i, j, u, v] = a_pad[stride i + u, stride j + v]`` for ``a (H, W, C)``
    padded with zeros by ``top``/``left`` (and enough at the bottom/right).

    Written with offsets split as ``u = stride q + r``: the padded array is
    reshaped to ``(rows / stride, stride, ...)`` and only ``ceil(size /
    stride)`` unit-stride slices per axis are taken (a few ops, not one per
    window offset). Returns ``(out[0], out[1], size[0], size[1], C)``.
    """
    h, w, c = a.shape
    s = stride
    qh, qw = -(-size[0] // s), -(-size[1] // s)
    nh, nw = s * (out[0] + qh - 1), s * (out[1] + qw - 1)
    ap = jnp.pad(a, ((top, max(0, nh - h - top)), (left, max(0, nw - w - left)), (0, 0)))[:nh, :nw]
    ph = ap.reshape(nh // s, s, nw // s, s, c)
    parts = jnp.stack([jnp.stack([ph[q:q + out[0], :, p:p + out[1]] for p in range(qw)]) for q in range(qh)])
    # (qh, qw, out0, s, out1, s, c) -> (out0, out1, qh, s, qw, s, c)
    win = parts.transpose(2, 4, 0, 3, 1, 5, 6).reshape(out[0], out[1], qh * s, qw * s, c)
    return win[:, :, :size[0], :size[1]]


def _pull_back_conv1(lam: jnp.ndarray, kernel: jnp.ndarray, stride: int) -> jnp.ndarray:
    """Coefficients on conv1's input window from coefficients on its outputs.

    ``lam (..., k2h, k2w, F1, F2)`` over a ``k2h x k2w`` window of conv1's
    outputs; returns ``(..., F2, R_h, R_w, C0)`` with ``R = stride (k2 - 1) + k1``:
    ``out[s a + x, s b + y, c] += lam[a, b, g] kernel[x, y, c, g]``. One
    contraction over ``g``, then the kernel offsets ``x = s q + r`` are laid
    out by ``ceil(k1 / s)^2`` shifted adds.
    """
    k2h, k2w = lam.shape[-4], lam.shape[-3]
    k1h, k1w, c0, _ = kernel.shape
    s = stride
    part = jnp.einsum("...abgf,xycg->...fabxyc", lam, kernel)          # (..., F2, k2h, k2w, k1h, k1w, c0)
    qh, qw = -(-k1h // s), -(-k1w // s)
    part = jnp.pad(part, [(0, 0)] * (part.ndim - 3) + [(0, qh * s - k1h), (0, qw * s - k1w), (0, 0)])
    lead = part.shape[:-5]
    part = part.reshape(lead + (k2h, k2w, qh, s, qw, s, c0))
    out = jnp.zeros(lead + (k2h + qh - 1, s, k2w + qw - 1, s, c0), part.dtype)
    for q in range(qh):
        for p in range(qw):
            piece = part[..., :, :, q, :, p, :, :]                     # (..., k2h, k2w, s, s, c0)
            piece = jnp.moveaxis(piece, -4, -3)                        # (..., k2h, s, k2w, s, c0)
            out = out.at[..., q:q + k2h, :, p:p + k2w, :, :].add(piece)
    rh, rw = s * (k2h - 1) + k1h, s * (k2w - 1) + k1w
    out = out.reshape(lead + ((k2h + qh - 1) * s, (k2w + qw - 1) * s, c0))
    return out[..., :rh, :rw, :]


@exact_precision
def second_layer_lower(net: Network, relax1, box_lo, box_hi, x, eps, norm: str):
    """Lower bounds of ``h_2`` and ``-h_2`` on the input set, shape ``(2, H2, W2, F2)``.

    Args:
      relax1: the first hidden layer's :class:`~rcurves.nets.bounds.Relax`.
      box_lo, box_hi, x: the input box and the point, shaped as conv1's input.
      eps: the radius; norm: 'linf', 'l2' or 'l1' (dual norm bound for l_2, l_1).
    """
    conv1, conv2 = net.blocks[0][-1], net.blocks[1][0]
    h0, w0, c0 = x.shape
    k1h, k1w, _, f1 = conv1.kernel.shape
    k2h, k2w, _, f2 = conv2.kernel.shape
    s1, s2 = conv1.stride, conv2.stride
    h1, p1t = _same_padding(h0, k1h, s1)
    w1, p1l = _same_padding(w0, k1w, s1)
    h2, p2t = _same_padding(h1, k2h, s2)
    w2, p2l = _same_padding(w1, k2w, s2)

    def win1(a):  # conv2's windows of a first-layer map: (h2, w2, k2h, k2w, f1)
        return windows(a, p2t, p2l, (k2h, k2w), s2, (h2, w2))

    sl, su, tu = win1(relax1.sl), win1(relax1.su), win1(relax1.tu)
    c1 = win1(jnp.broadcast_to(conv1.bias, (h1, w1, f1)))
    k2 = jnp.stack([conv2.kernel, -conv2.kernel])                  # (2, k2h, k2w, f1, f2)
    k2 = k2[:, None, None]                                          # (2, 1, 1, k2h, k2w, f1, f2)
    pos, neg = jnp.maximum(k2, 0.0), jnp.minimum(k2, 0.0)
    lam = pos * sl[None, ..., None] + neg * su[None, ..., None]      # (2, h2, w2, k2h, k2w, f1, f2)
    bias = jnp.sum(neg * tu[None, ..., None], axis=(3, 4, 5))
    bias = bias + jnp.sum(lam * c1[None, ..., None], axis=(3, 4, 5))
    bias = bias + jnp.stack([conv2.bias, -conv2.bias])[:, None, None, :]  # (2, h2, w2, f2)

    rh, rw = s1 * (k2h - 1) + k1h, s1 * (k2w - 1) + k1w
    lx = _pull_back_conv1(lam, conv1.kernel, s1)                   # (2, h2, w2, f2, rh, rw, c0)

    def winx(a):  # the input window of each conv2 unit: (h2, w2, rh, rw, c0) -> broadcastable
        w = windows(a, p1t + s1 * p2t, p1l + s1 * p2l, (rh, rw), s1 * s2, (h2, w2))
        return w[None, :, :, None]

    lx = lx * winx(jnp.ones_like(x))      # no freedom outside the image
    lo, hi, xc = winx(box_lo), winx(box_hi), winx(x)
    axes = (4, 5, 6)
    box = jnp.sum(jnp.maximum(lx, 0.0) * lo + jnp.minimum(lx, 0.0) * hi, axis=axes) + bias
    if norm == "linf":
        return box
    c = jnp.sum(lx * xc, axis=axes) + bias
    if norm == "l2":
        sq = jnp.sum(lx * lx, axis=axes)
        nq = jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0)
    else:
        nq = jnp.max(jnp.abs(lx), axis=axes)
    return jnp.maximum(box, c - eps * nq)


__all__ = ["applies", "second_layer_lower", "windows"]
