"""Classifiers as flax modules, exposed to the rest of the toolkit as closures.

Three architectures, all mapping a batch ``x (n, *input_shape)`` with inputs in
``[0, 1]`` to logits ``(n, n_classes)``:

* ``'cnn'`` — the network of paper 000, Appendix C.1 (after Croce,
  Andriushchenko & Hein 2019 and Wong & Kolter 2018): conv 16 filters 4x4
  stride 2, ReLU, conv 32 filters 4x4 stride 2, ReLU, dense 100, ReLU, dense
  ``n_classes``. Convolutions use 'SAME' padding, so a 28x28 image becomes
  14x14x16 then 7x7x32 (1568 features) before the dense layers. The
  convolutions are computed as patches times a matrix (``conv2d_patches``),
  which is much faster than ``lax.conv`` inside the attacks' step loops on CPU.
* ``'mlp'`` — flatten, ``hidden`` dense ReLU layers, dense ``n_classes``.
* ``'linear'`` — flatten, one dense layer: ``argmax_k (W x + b)_k``.

A model is described by a frozen, hashable :class:`ModelConfig`; parameters
are a plain pytree of arrays. :func:`make_logits_fn` closes over both and
returns the ``logits_fn(x_batch) -> logits_batch`` every attack takes, so no
framework object crosses the public API.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Dict, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from attacks import checks

ARCHS = ("cnn", "mlp", "linear")

Params = Any  # a pytree (nested dict) of float32 arrays


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Static description of a classifier.

    Attributes:
      arch: 'cnn', 'mlp' or 'linear'.
      input_shape: shape of one input, e.g. ``(28, 28)`` or ``(784,)``; the
        model reshapes its input to ``image_shape`` (cnn) or flattens it.
      n_classes: number of logits (>= 2).
      image_shape: ``(H, W, C)`` seen by the CNN; ``None`` derives it from
        ``input_shape``: ``(H, W)`` -> ``(H, W, 1)``, ``(H, W, C)`` kept, and a
        flat ``(d,)`` with ``d`` a square -> ``(sqrt d, sqrt d, 1)``.
      hidden: widths of the MLP's hidden layers.
    """

    arch: str = "cnn"
    input_shape: Tuple[int, ...] = (28, 28)
    n_classes: int = 10
    image_shape: Tuple[int, int, int] | None = None
    hidden: Tuple[int, ...] = (256, 256)

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise ValueError(f"arch: expected one of {ARCHS}, got {self.arch!r}")
        shape = tuple(int(s) for s in self.input_shape)
        if not shape or any(s < 1 for s in shape):
            raise ValueError(f"input_shape: expected positive sizes, got {self.input_shape!r}")
        object.__setattr__(self, "input_shape", shape)
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        checks.check_positive_int(self.n_classes, "n_classes", minimum=2)
        if self.arch == "cnn":
            img = self.image_shape if self.image_shape is not None else _default_image(shape)
            img = tuple(int(s) for s in img)
            if len(img) != 3 or math.prod(img) != math.prod(shape):
                raise ValueError(
                    f"image_shape: expected (H, W, C) with H*W*C = {math.prod(shape)} "
                    f"(the input size), got {img!r}"
                )
            object.__setattr__(self, "image_shape", img)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict (tuples become lists)."""
        d = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "ModelConfig":
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        names = {f.name for f in dataclasses.fields(cls)}
        extra = set(d) - names
        if extra:
            raise ValueError(f"model config: unknown fields {sorted(extra)}")
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        return cls(**kw)


def _default_image(shape: Tuple[int, ...]) -> Tuple[int, int, int]:
    if len(shape) == 3:
        return shape
    if len(shape) == 2:
        return (shape[0], shape[1], 1)
    if len(shape) == 1:
        side = math.isqrt(shape[0])
        if side * side == shape[0]:
            return (side, side, 1)
    raise ValueError(
        f"image_shape: cannot infer (H, W, C) for input_shape {shape}; pass image_shape"
    )


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


class Conv2d(nn.Module):
    """'SAME' 2-D convolution with ``nn.Conv``'s parameters and initialisers.

    Parameters ``kernel (kh, kw, C, F)`` (LeCun normal) and ``bias (F,)``
    (zeros), as ``flax.linen.Conv``; computed by :func:`conv2d_patches`.
    """

    features: int
    kernel_size: Tuple[int, int]
    stride: int = 1

    @nn.compact
    def __call__(self, x):
        kh, kw = self.kernel_size
        kernel = self.param(
            "kernel", nn.initializers.lecun_normal(), (kh, kw, x.shape[-1], self.features), jnp.float32
        )
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,), jnp.float32)
        return conv2d_patches(x, kernel, bias, self.stride)


class CNN(nn.Module):
    """Paper 000, Appendix C.1: two strided convolutions and two dense layers."""

    n_classes: int
    image_shape: Tuple[int, int, int]

    @nn.compact
    def __call__(self, x):
        x = x.reshape((x.shape[0],) + tuple(self.image_shape))
        x = nn.relu(Conv2d(16, (4, 4), stride=2)(x))
        x = nn.relu(Conv2d(32, (4, 4), stride=2)(x))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(100)(x))
        return nn.Dense(self.n_classes)(x)


class MLP(nn.Module):
    """Fully connected ReLU network on the flattened input."""

    n_classes: int
    hidden: Tuple[int, ...] = (256, 256)

    @nn.compact
    def __call__(self, x):
        x = x.reshape((x.shape[0], -1))
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(self.n_classes)(x)


class Linear(nn.Module):
    """Multi-class linear classifier ``W x + b`` on the flattened input."""

    n_classes: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.n_classes)(x.reshape((x.shape[0], -1)))


def build_model(cfg: ModelConfig) -> nn.Module:
    """The flax module described by ``cfg``."""
    if cfg.arch == "cnn":
        return CNN(n_classes=cfg.n_classes, image_shape=cfg.image_shape)
    if cfg.arch == "mlp":
        return MLP(n_classes=cfg.n_classes, hidden=cfg.hidden)
    return Linear(n_classes=cfg.n_classes)


def init_params(cfg: ModelConfig, key) -> Params:
    """Fresh parameters (flax default initialisers), deterministic in ``key``."""
    return _jitted_init(cfg)(key)


@functools.lru_cache(maxsize=None)
def _jitted_init(cfg: ModelConfig) -> Callable:
    # One compiled initialiser per architecture (XLA:CPU compiles random
    # number generation slowly, so it is worth reusing).
    model = build_model(cfg)
    dummy = jnp.zeros((1,) + cfg.input_shape, jnp.float32)
    return jax.jit(lambda k: model.init(k, dummy)["params"])


@functools.lru_cache(maxsize=None)
def _jitted_apply(cfg: ModelConfig) -> Callable:
    return jax.jit(apply_fn(cfg))


def param_shapes(cfg: ModelConfig) -> Params:
    """Pytree of ``jax.ShapeDtypeStruct`` of the parameters (no computation)."""
    model = build_model(cfg)
    dummy = jax.ShapeDtypeStruct((1,) + cfg.input_shape, jnp.float32)
    return jax.eval_shape(lambda k, x: model.init(k, x)["params"], jax.random.PRNGKey(0), dummy)


def apply_fn(cfg: ModelConfig) -> Callable[[Params, jax.Array], jax.Array]:
    """``apply(params, x_batch) -> logits_batch`` for ``cfg`` (pure; jit-friendly)."""
    model = build_model(cfg)

    def apply(params, x):
        return model.apply({"params": params}, x)

    return apply


def make_logits_fn(cfg: ModelConfig, params: Params) -> Callable[[jax.Array], jax.Array]:
    """The closure ``logits_fn(x (n, *input_shape)) -> (n, n_classes)``.

    The returned object is a fixed Python function, so attacks that take it as
    a static jit argument compile once and reuse the compilation across calls
    (e.g. across chunks of a long run).
    """
    apply = _jitted_apply(cfg)  # params are arguments: one compilation per architecture and shape
    params = jax.tree_util.tree_map(jnp.asarray, params)

    def logits_fn(x):
        return apply(params, x)

    logits_fn.compiled = True  # calling it eagerly already runs one compiled program
    return logits_fn


def accuracy(logits_fn: Callable, x, y, batch_size: int = 1024) -> float:
    """Fraction of ``x`` classified as ``y``, evaluated in batches."""
    x = checks.check_array(x, "x", min_ndim=2)
    y = checks.check_labels(y, x.shape[0], "y")
    f = logits_fn if getattr(logits_fn, "compiled", False) else jax.jit(logits_fn)
    correct = 0
    for s in range(0, x.shape[0], batch_size):
        pred = jnp.argmax(f(x[s:s + batch_size]), axis=-1)
        correct += int(jnp.sum(pred == y[s:s + batch_size]))
    return correct / x.shape[0]


__all__ = [
    "ARCHS",
    "CNN",
    "Conv2d",
    "Linear",
    "MLP",
    "ModelConfig",
    "accuracy",
    "apply_fn",
    "build_model",
    "conv2d_patches",
    "init_params",
    "make_logits_fn",
    "param_shapes",
]
