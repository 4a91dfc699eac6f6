"""The toolkit's 2-D convolution ('SAME', NHWC): patch extraction and one matrix product.

Shared by the model zoo's CNN (:mod:`rcurves.models.architectures`) and the verifiers' :class:`Conv`
layer (:mod:`rcurves.nets.layers`), so the two agree to the bit on the same inputs.
"""
from __future__ import annotations

from typing import Tuple

import jax
import jax.numpy as jnp


def _same_padding(size: int, k: int, stride: int) -> Tuple[int, int, int]:
    """Output size and (lo, hi) padding of a 'SAME' convolution (lax's convention)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


def conv2d_patches(x: jax.Array, kernel: jax.Array, bias: jax.Array, stride: int) -> jax.Array:
    """2-D convolution, 'SAME' padding, as patch extraction plus one matrix product.

    Computes exactly ``lax.conv_general_dilated(x, kernel, (stride, stride),
    'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC')) + bias`` (up to float
    rounding): the ``kh * kw`` strided slices of the padded input are stacked
    along the channel axis (offset-major, channel-minor, the row-major order
    of ``kernel.reshape(kh * kw * C, F)``) and multiplied by the kernel.

    Why not ``lax.conv``: on XLA:CPU a convolution inside a ``while`` loop (the
    ``lax.scan`` over attack steps) runs several times slower than the same
    convolution outside one, while slices and a dot do not; every attack on a
    CNN loops over steps.

    Args:
      x: ``(n, H, W, C)``.
      kernel: ``(kh, kw, C, F)``.
      bias: ``(F,)``.
      stride: the same in both spatial dimensions.

    Returns:
      ``(n, ceil(H / stride), ceil(W / stride), F)``.
    """
    n, h, w, c = x.shape
    kh, kw, _, f = kernel.shape
    ho, ph_lo, ph_hi = _same_padding(h, kh, stride)
    wo, pw_lo, pw_hi = _same_padding(w, kw, stride)
    xp = jnp.pad(x, ((0, 0), (ph_lo, ph_hi), (pw_lo, pw_hi), (0, 0)))
    cols = [
        xp[:, i:i + (ho - 1) * stride + 1:stride, j:j + (wo - 1) * stride + 1:stride, :]
        for i in range(kh)
        for j in range(kw)
    ]  # kh * kw static slices: the kernel's taps, not a loop over data
    patches = jnp.concatenate(cols, axis=-1)
    return patches @ kernel.reshape(kh * kw * c, f) + bias


__all__ = ["conv2d_patches"]
