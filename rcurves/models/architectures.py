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
import numpy as np

from attacks import checks
from rcurves.nets.conv import conv2d_patches

ARCHS = ("cnn", "mlp", "linear", "resnet")

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
      depth: the ResNet's depth, ``6 n + 2`` (20, 32, 44, 56, ...).
      width: the ResNet's first-stage filters (16 for ResNet-20; its stages
        have ``width``, ``2 width``, ``4 width``).
    """

    arch: str = "cnn"
    input_shape: Tuple[int, ...] = (28, 28)
    n_classes: int = 10
    image_shape: Tuple[int, int, int] | None = None
    hidden: Tuple[int, ...] = (256, 256)
    depth: int = 20
    width: int = 16

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise ValueError(f"arch: expected one of {ARCHS}, got {self.arch!r}")
        shape = tuple(int(s) for s in self.input_shape)
        if not shape or any(s < 1 for s in shape):
            raise ValueError(f"input_shape: expected positive sizes, got {self.input_shape!r}")
        object.__setattr__(self, "input_shape", shape)
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        checks.check_positive_int(self.n_classes, "n_classes", minimum=2)
        if self.arch == "resnet":
            d = checks.check_positive_int(self.depth, "depth", minimum=8)
            if (d - 2) % 6:
                raise ValueError(f"depth: expected 6 n + 2 (20, 32, 44, ...), got {self.depth}")
            checks.check_positive_int(self.width, "width")
        if self.arch in ("cnn", "resnet"):
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
        if self.arch != "resnet":          # fields added later: earlier configurations keep their cache keys
            d.pop("depth")
            d.pop("width")
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


class FrozenBatchNorm(nn.Module):
    """Batch norm in inference mode: ``(x - mean) / sqrt(var + eps) * scale + bias`` per channel.

    ``mean`` and ``var`` are parameters (a trained network's running
    statistics, loaded with its weights; 0 and 1 at initialisation) that
    training never changes (their gradient is stopped); ``scale`` and
    ``bias`` are trained.
    """

    eps: float = 1e-5

    @nn.compact
    def __call__(self, x):
        c = x.shape[-1]
        scale = self.param("scale", nn.initializers.ones_init(), (c,), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros_init(), (c,), jnp.float32)
        mean = jax.lax.stop_gradient(self.param("mean", nn.initializers.zeros_init(), (c,), jnp.float32))
        var = jax.lax.stop_gradient(self.param("var", nn.initializers.ones_init(), (c,), jnp.float32))
        return (x - mean) * (scale * jax.lax.rsqrt(var + self.eps)) + bias


class ResNet(nn.Module):
    """A CIFAR-style ResNet (He et al. 2016, Section 4.2): ``depth = 6 n + 2`` (ResNet-20: n = 3).

    3x3 convolution (``width`` filters), then three stages of ``n`` basic
    blocks (two 3x3 convolutions with batch norm, identity shortcut; a
    strided 1x1 projection with batch norm where the shape changes) with
    ``width``, ``2 width`` and ``4 width`` filters, the last two starting
    with stride 2; global average pooling and a dense layer. Batch norm is in
    inference mode (:class:`FrozenBatchNorm`). Convolutions are ``lax.conv``
    (``flax.linen.Conv``, as a user writes them); the attacks decide whether
    to compute them as patch matrices (``attacks.xla.loop_model``).
    """

    n_classes: int
    image_shape: Tuple[int, int, int]
    depth: int = 20
    width: int = 16

    @nn.compact
    def __call__(self, x):
        n = (self.depth - 2) // 6
        x = x.reshape((x.shape[0],) + tuple(self.image_shape))
        x = nn.relu(FrozenBatchNorm()(nn.Conv(self.width, (3, 3), padding="SAME", use_bias=False)(x)))
        for stage in range(3):
            feats = self.width * 2 ** stage
            for block in range(n):
                stride = 2 if (stage > 0 and block == 0) else 1
                h = nn.Conv(feats, (3, 3), strides=stride, padding="SAME", use_bias=False)(x)
                h = nn.relu(FrozenBatchNorm()(h))
                h = FrozenBatchNorm()(nn.Conv(feats, (3, 3), padding="SAME", use_bias=False)(h))
                if stride != 1 or x.shape[-1] != feats:
                    x = FrozenBatchNorm()(nn.Conv(feats, (1, 1), strides=stride, use_bias=False)(x))
                x = nn.relu(x + h)
        x = jnp.mean(x, axis=(1, 2))
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
    if cfg.arch == "resnet":
        return ResNet(n_classes=cfg.n_classes, image_shape=cfg.image_shape, depth=cfg.depth, width=cfg.width)
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


@jax.tree_util.register_pytree_node_class
class ModelFn:
    """A toolkit model as a *pytree callable*: ``ModelFn(cfg, params)(x) -> logits``.

    ``params`` (its array leaves) are data, ``cfg`` (the architecture) is the
    static part of the tree. Every attack splits it
    (:mod:`attacks.modeltree`): the parameters are traced arguments of the
    compiled program, so all checkpoints of one architecture share one
    program per shape and setting, and nothing is baked into it. Called
    eagerly it runs one jitted ``apply`` per architecture (``compiled``).
    """

    compiled = True   # calling it eagerly already runs one compiled program

    def __init__(self, cfg: ModelConfig, params: Params):
        self.cfg = cfg
        self.params = params

    def __call__(self, x):
        return _jitted_apply(self.cfg)(self.params, x)

    def tree_flatten(self):
        return (self.params,), self.cfg

    @classmethod
    def tree_unflatten(cls, cfg, children):
        return cls(cfg, children[0])

    def __repr__(self) -> str:
        n = sum(int(getattr(a, "size", 0)) for a in jax.tree_util.tree_leaves(self.params))
        return f"ModelFn({self.cfg.arch}, {n:,} parameters)"


def make_logits_fn(cfg: ModelConfig, params: Params) -> Callable[[jax.Array], jax.Array]:
    """``logits_fn(x (n, *input_shape)) -> (n, n_classes)`` of a toolkit model: a :class:`ModelFn`.

    A pytree callable whose parameters are traced arguments of every attack
    program: a second checkpoint of the same architecture reuses the compiled
    attacks (no recompilation), and long sessions over many checkpoints do
    not pile up programs.
    """
    return ModelFn(cfg, jax.tree_util.tree_map(jnp.asarray, params))


def check_params(cfg: ModelConfig, tree: Any) -> None:
    """``ValueError`` unless ``tree`` has exactly the architecture's parameter keys, shapes and float32 dtype."""
    expected = param_shapes(cfg)
    exp_flat = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(expected)}
    try:
        got_flat = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(tree)}
    except Exception:  # noqa: BLE001
        raise ValueError("parameters are not a tree of arrays") from None
    if set(exp_flat) != set(got_flat):
        missing = sorted(set(exp_flat) - set(got_flat))[:3]
        extra = sorted(set(got_flat) - set(exp_flat))[:3]
        raise ValueError(f"parameters do not match a {cfg.arch} model (missing {missing}, unexpected {extra})")
    for k, e in exp_flat.items():
        g = got_flat[k]
        if not isinstance(g, np.ndarray) and not hasattr(g, "shape"):
            raise ValueError(f"parameter {k} is not an array")
        if tuple(g.shape) != tuple(e.shape) or np.dtype(g.dtype) != np.dtype(e.dtype):
            raise ValueError(f"parameter {k} has shape {tuple(g.shape)} {np.dtype(g.dtype)}, "
                             f"the {cfg.arch} model expects {tuple(e.shape)} {np.dtype(e.dtype)}")


def restore(model: "ModelConfig | Dict[str, Any]", params: Params) -> ModelFn:
    """The model of stored parameters: a :class:`ModelFn` of ``model`` (a :class:`ModelConfig` or its
    ``to_dict()`` form, as a checkpoint stores it) after :func:`check_params` (``ValueError`` naming the
    invalid configuration or the mismatched parameter)."""
    if not isinstance(model, ModelConfig):
        try:
            model = ModelConfig.from_dict(model)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"invalid configuration ({e})") from None
    check_params(model, params)
    return make_logits_fn(model, params)


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
    "FrozenBatchNorm",
    "Linear",
    "MLP",
    "ModelConfig",
    "ModelFn",
    "ResNet",
    "accuracy",
    "apply_fn",
    "build_model",
    "check_params",
    "conv2d_patches",
    "init_params",
    "make_logits_fn",
    "param_shapes",
    "restore",
]
