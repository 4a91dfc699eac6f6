"""ReLU networks as explicit lists of layers, the form the verifiers, MMR and the ONNX reader share.

Below both :mod:`rcurves.models` (whose linear, MLP and CNN become a :class:`Network` in
:func:`rcurves.models.network.to_network`) and :mod:`rcurves.certify` (which bounds them).

A :class:`Network` is a tuple of layers applied in order to one input of shape
``input_shape``:

* :class:`Dense` ``z -> W z + b`` with ``W (out, in)``;
* :class:`Conv` a 'SAME' convolution, NHWC, kernel ``(kh, kw, C, F)``,
  computed as patches times a matrix by :func:`rcurves.nets.conv.conv2d_patches`
  (the toolkit's CNN computes it the same way, so the two agree to the bit on
  the same inputs);
* :class:`Reshape` (a flatten is ``Reshape(in_shape, (d,))``);
* :class:`ReLU`.

The verifiers see the network as *blocks*: the affine maps between two ReLUs,
``h_k = B_k(a_{k-1})``, ``a_k = relu(h_k)``, ``a_0 = x``, the last block
giving the logits. A block's linear part (its biases left out) is pulled back
with ``jax.linear_transpose``, its bias is ``B_k(0)``; its dense matrix
(``jacobian``) is the starting point of CROWN's back-substitution and of the
MILP's constraints. The network is built from explicit layers, not by
interpreting a traced program, so it does not depend on jaxpr internals.

Every layer is a frozen dataclass registered as a pytree (arrays are leaves,
shapes and strides static), so a network is an argument of jitted functions.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, List, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks.precision import exact_precision
from rcurves.nets.conv import conv2d_patches


def _static(**kw):
    return dataclasses.field(metadata=dict(static=True), **kw)


@dataclasses.dataclass(frozen=True)
class Dense:
    """``z (in,) -> w @ z + b``; ``w (out, in)``, ``b (out,)``."""

    w: jax.Array
    b: jax.Array

    def in_shape(self) -> Tuple[int, ...]:
        return (int(self.w.shape[1]),)

    def out_shape(self, in_shape) -> Tuple[int, ...]:
        return (int(self.w.shape[0]),)

    def linear(self, z):
        return self.w @ z

    def apply(self, z):
        return self.w @ z + self.b

    def abs_linear(self, r):
        return jnp.abs(self.w) @ r

    def batch(self, z):
        return jnp.dot(z, self.w.T) + self.b


def conv_phases(z: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    """The 'SAME' convolution of ``conv2d_patches`` without bias, for one point ``z (H, W, C)``.

    The same patches (offset-major, channel-minor) times the same matrix, but
    the padded input is reshaped to ``(H' / s, s, W' / s, s, C)`` so that each
    kernel offset ``(a, b)`` is a unit-stride slice of phase ``(a % s, b % s)``;
    its ``linear_transpose`` is then a few pads of small arrays instead of
    ``kh * kw`` strided scatters, which keeps the verifiers' programs small.
    """
    h, w, c = z.shape
    kh, kw, _, f = kernel.shape
    s = stride
    ho, pt = -(-h // s), max((-(-h // s) - 1) * s + kh - h, 0) // 2
    wo, pl = -(-w // s), max((-(-w // s) - 1) * s + kw - w, 0) // 2
    nh, nw = s * (ho + -(-kh // s) - 1), s * (wo + -(-kw // s) - 1)
    zp = jnp.pad(z, ((pt, max(0, nh - h - pt)), (pl, max(0, nw - w - pl)), (0, 0)))[:nh, :nw]
    ph = zp.reshape(nh // s, s, nw // s, s, c)
    cols = [ph[a // s:a // s + ho, a % s, b // s:b // s + wo, b % s] for a in range(kh) for b in range(kw)]
    return jnp.concatenate(cols, axis=-1) @ kernel.reshape(kh * kw * c, f)


@dataclasses.dataclass(frozen=True)
class Conv:
    """'SAME' convolution on ``(H, W, C)`` with ``kernel (kh, kw, C, F)``, ``bias (F,)``."""

    kernel: jax.Array
    bias: jax.Array
    stride: int = _static(default=1)

    def out_shape(self, in_shape) -> Tuple[int, ...]:
        h, w, _ = in_shape
        s = self.stride
        return (-(-h // s), -(-w // s), int(self.kernel.shape[-1]))

    def linear(self, z):
        return conv_phases(z, self.kernel, self.stride)

    def apply(self, z):
        return conv2d_patches(z[None], self.kernel, self.bias, self.stride)[0]

    def abs_linear(self, r):
        return conv_phases(r, jnp.abs(self.kernel), self.stride)

    def batch(self, z):
        return conv2d_patches(z, self.kernel, self.bias, self.stride)


@dataclasses.dataclass(frozen=True)
class Reshape:
    """``z -> z.reshape(shape)`` (row-major, as numpy); a flatten when ``shape = (d,)``."""

    shape: Tuple[int, ...] = _static()

    def out_shape(self, in_shape) -> Tuple[int, ...]:
        return tuple(self.shape)

    def linear(self, z):
        return z.reshape(self.shape)

    apply = linear
    abs_linear = linear

    def batch(self, z):
        return z.reshape((z.shape[0],) + tuple(self.shape))


@dataclasses.dataclass(frozen=True)
class ReLU:
    """``z -> max(z, 0)`` elementwise."""

    def out_shape(self, in_shape) -> Tuple[int, ...]:
        return tuple(in_shape)

    def apply(self, z):
        return jnp.maximum(z, 0.0)

    batch = apply


for _cls in (Dense, Conv, Reshape, ReLU):
    jax.tree_util.register_dataclass(_cls)

LINEAR_LAYERS = (Dense, Conv, Reshape)


@dataclasses.dataclass(frozen=True)
class Network:
    """A feed-forward ReLU network: ``layers`` applied in order to ``input_shape``.

    Build it with :func:`mlp`, :func:`from_model` or :func:`network` (which
    checks it). ``blocks`` are the affine maps between ReLUs (see the module
    docstring); ``shapes[k]`` is the shape of ``a_k`` (``shapes[0]`` the input).
    """

    layers: Tuple[Any, ...]
    input_shape: Tuple[int, ...] = _static()

    @property
    def blocks(self) -> Tuple[Tuple[Any, ...], ...]:
        out, cur = [], []
        for layer in self.layers:
            if isinstance(layer, ReLU):
                out.append(tuple(cur))
                cur = []
            else:
                cur.append(layer)
        out.append(tuple(cur))
        return tuple(out)

    @property
    def shapes(self) -> Tuple[Tuple[int, ...], ...]:
        """Shape of the input, then of each block's output (``h_1, ..., logits``)."""
        s = tuple(self.input_shape)
        out = [s]
        for block in self.blocks:
            for layer in block:
                s = layer.out_shape(s)
            out.append(s)
        return tuple(out)

    @property
    def n_classes(self) -> int:
        return int(self.shapes[-1][0])

    @property
    def hidden_sizes(self) -> Tuple[int, ...]:
        """Number of ReLUs in each hidden layer."""
        return tuple(math.prod(s) for s in self.shapes[1:-1])

    @exact_precision
    def logits(self, x: jax.Array) -> jax.Array:
        """Batched forward pass in float32 (products at HIGHEST): ``(n, *input_shape) -> (n, K)``."""
        z = x.reshape((x.shape[0],) + tuple(self.input_shape))
        for layer in self.layers:
            z = layer.batch(z)
        return z


jax.tree_util.register_dataclass(Network)


@exact_precision
def forward(net: Network, x: jax.Array) -> jax.Array:
    """Logits ``(K,)`` of one point ``x (*input_shape)``."""
    z = x
    for layer in net.layers:
        z = layer.apply(z)
    return z


# ---------------------------------------------------------------------------
# blocks: affine maps between ReLUs


@exact_precision
def block_apply(block: Sequence[Any], z: jax.Array) -> jax.Array:
    """``B(z)`` for one point."""
    for layer in block:
        z = layer.apply(z)
    return z


@exact_precision
def block_linear(block: Sequence[Any], z: jax.Array) -> jax.Array:
    """The linear part of ``B`` (biases dropped) for one point."""
    for layer in block:
        z = layer.linear(z)
    return z


@exact_precision
def block_interval(block: Sequence[Any], lo: jax.Array, hi: jax.Array):
    """Interval image of ``[lo, hi]`` under ``B``, layer by layer (IBP).

    Each linear layer maps the centre exactly and the radius by ``|W|``
    (Gowal et al. 2018, eq. 6): sound for any composition, tight for one layer.
    """
    c, r = (hi + lo) / 2.0, (hi - lo) / 2.0
    for layer in block:
        c, r = layer.apply(c), layer.abs_linear(r)
    return c - r, c + r


@exact_precision
def block_transpose(block: Sequence[Any], in_shape) -> Callable[[jax.Array], jax.Array]:
    """``v -> B_lin^T v`` for one cotangent ``v`` of the block's output shape."""
    zeros = jnp.zeros(tuple(in_shape), jnp.float32)
    t = jax.linear_transpose(lambda z: block_linear(block, z), zeros)
    return lambda v: t(v)[0]


@exact_precision
def block_jacobian(block: Sequence[Any], in_shape, out_shape) -> jax.Array:
    """The dense matrix of ``B_lin``, shape ``(prod(out_shape), *in_shape)``.

    Row ``i`` is ``B_lin^T e_i``: the pull-back of each output unit, which is
    what CROWN starts from when it bounds that unit.
    """
    m = math.prod(out_shape)
    eye = jnp.eye(m, dtype=jnp.float32).reshape((m,) + tuple(out_shape))
    return jax.vmap(block_transpose(block, in_shape))(eye)


# ---------------------------------------------------------------------------
# construction and checks


def check_weight(a: Any, name: str, ndim: int) -> jax.Array:
    if a is None or not hasattr(a, "shape"):
        try:
            a = np.asarray(a)
        except Exception:  # noqa: BLE001
            raise ValueError(f"{name}: expected an array, got {type(a).__name__}") from None
    if not np.issubdtype(np.dtype(a.dtype), np.floating):
        raise ValueError(f"{name}: expected a floating array, got dtype {a.dtype}")
    if a.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {tuple(a.shape)}")
    if isinstance(a, jax.core.Tracer):
        # Traced weights (certified training builds the network inside its jitted,
        # differentiated step): shapes are checked, values cannot be, and the
        # array stays a tracer so that bounds are differentiable in it.
        if math.prod(a.shape) == 0:
            raise ValueError(f"{name}: expected a non-empty array, got shape {tuple(a.shape)}")
        return a.astype(jnp.float32)
    arr = np.asarray(a)
    if arr.size == 0:
        raise ValueError(f"{name}: expected a non-empty array, got shape {tuple(a.shape)}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or inf values")
    return jnp.asarray(arr, jnp.float32)


def network(layers: Sequence[Any], input_shape: Sequence[int]) -> Network:
    """A checked :class:`Network`: shapes chain, no two ReLUs in a row, logits last.

    Raises:
      ValueError: naming the layer whose shapes do not fit.
    """
    try:
        shape = tuple(int(s) for s in input_shape)
    except (TypeError, ValueError):
        raise ValueError(f"input_shape: expected a tuple of positive ints, got {input_shape!r}") from None
    if not shape or any(s < 1 for s in shape):
        raise ValueError(f"input_shape: expected positive sizes, got {input_shape!r}")
    layers = tuple(layers)
    if not layers:
        raise ValueError("layers: expected at least one layer")
    s, prev_relu = shape, True
    for i, layer in enumerate(layers):
        name = f"layers[{i}] ({type(layer).__name__})"
        if isinstance(layer, ReLU):
            if prev_relu:
                raise ValueError(f"{name}: a ReLU must follow an affine layer")
            prev_relu = True
            continue
        if not isinstance(layer, LINEAR_LAYERS):
            raise ValueError(f"{name}: expected Dense, Conv, Reshape or ReLU")
        prev_relu = False
        if isinstance(layer, Dense):
            if s != (layer.w.shape[1],) or layer.b.shape != (layer.w.shape[0],):
                raise ValueError(f"{name}: W {tuple(layer.w.shape)}, b {tuple(layer.b.shape)} "
                                 f"do not fit an input of shape {s}")
        elif isinstance(layer, Conv):
            k = layer.kernel
            if len(s) != 3 or k.ndim != 4 or k.shape[2] != s[2] or layer.bias.shape != (k.shape[3],):
                raise ValueError(f"{name}: kernel {tuple(k.shape)}, bias {tuple(layer.bias.shape)} "
                                 f"do not fit an input of shape {s} (H, W, C)")
            if not isinstance(layer.stride, int) or layer.stride < 1:
                raise ValueError(f"{name}: stride must be a positive int, got {layer.stride!r}")
        elif math.prod(layer.shape) != math.prod(s):
            raise ValueError(f"{name}: cannot reshape {s} to {tuple(layer.shape)}")
        s = layer.out_shape(s)
    if isinstance(layers[-1], ReLU) or len(s) != 1 or s[0] < 2:
        raise ValueError(f"layers: the last layer must give logits of shape (K >= 2,), got {s}")
    return Network(layers, shape)


def mlp(weights: Sequence[Tuple[Any, Any]]) -> Network:
    """A fully connected ReLU network from ``[(W1, b1), (W2, b2), ...]``.

    ``W_k`` is ``(out, in)`` (``z -> W z + b``), a ReLU follows every layer but
    the last. The input is the flat vector ``(in_1,)``; the verifiers accept
    points of any shape with that many features and flatten them.
    """
    if not isinstance(weights, (list, tuple)) or not weights:
        raise ValueError("weights: expected a non-empty list of (W, b) pairs")
    layers: List[Any] = []
    for i, pair in enumerate(weights):
        try:
            w, b = pair
        except (TypeError, ValueError):
            raise ValueError(f"weights[{i}]: expected a pair (W, b)") from None
        w = check_weight(w, f"weights[{i}][0] (W)", 2)
        b = check_weight(b, f"weights[{i}][1] (b)", 1)
        if b.shape != (w.shape[0],):
            raise ValueError(f"weights[{i}][1] (b): expected shape ({w.shape[0]},) for W of shape "
                             f"{tuple(w.shape)}, got {tuple(b.shape)}")
        if i and w.shape[1] != layers[-1].w.shape[0]:
            raise ValueError(f"weights[{i}][0] (W): expected {layers[-1].w.shape[0]} columns (the outputs "
                             f"of weights[{i - 1}]), got shape {tuple(w.shape)}")
        if i:
            layers.append(ReLU())
        layers.append(Dense(w, b))
    return network(layers, (int(layers[0].w.shape[1]),))


__all__ = [
    "Conv", "Dense", "Network", "ReLU", "Reshape", "block_apply", "block_interval",
    "block_jacobian", "block_linear", "block_transpose", "check_weight", "forward", "mlp", "network",
]
