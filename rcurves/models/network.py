"""The toolkit's linear, MLP and C.1 CNN as a :class:`rcurves.nets.Network` (the layers the verifiers,
MMR and certified training read). ``rcurves.certify.from_model`` is the public entry point (it also takes a
``LoadedModel`` or an ONNX file)."""
from __future__ import annotations

import math
from typing import Any, List

from rcurves.models.architectures import ModelConfig
from rcurves.nets.layers import Conv, Dense, Network, ReLU, Reshape, check_weight, network


#: Architectures of ``rcurves.models`` that :func:`to_network` converts.
CERTIFIABLE_ARCHS = ("linear", "mlp", "cnn")


def to_network(model_cfg: ModelConfig, params: Any) -> Network:
    """The toolkit's linear, MLP or C.1 CNN (``rcurves.models``) as a :class:`Network`.

    ``params`` is the flax parameter tree of ``model_cfg`` (as in
    ``zoo.load(...).params``); Dense kernels ``(in, out)`` become ``W (out, in)``.
    The network computes what ``make_logits_fn(model_cfg, params)`` computes.

    ``params`` may be traced (inside ``jit`` / ``grad``): the network's arrays
    are then the tracers themselves, so every bound of ``nets.bounds`` is
    differentiable in the parameters (certified training,
    ``rcurves.models.training``, builds its network this way in each step).

    Raises:
      ValueError: ``model_cfg.arch`` not one of :data:`CERTIFIABLE_ARCHS`
        (the ResNet's batch norm and skip connections are not layers of a
        :class:`Network`), or parameters missing or of the wrong shape.
    """
    if not isinstance(model_cfg, ModelConfig):
        raise ValueError(f"model_cfg: expected an rcurves.models.ModelConfig, got {type(model_cfg).__name__}")
    if model_cfg.arch not in CERTIFIABLE_ARCHS:
        raise ValueError(f"model_cfg: arch {model_cfg.arch!r} cannot be written as a ReLU Network; "
                         f"the verifiers handle {CERTIFIABLE_ARCHS}")
    if not isinstance(params, dict):
        raise ValueError("params: expected the flax parameter dict of the model")

    def get(name, leaf, ndim):
        try:
            a = params[name][leaf]
        except (KeyError, TypeError):
            raise ValueError(f"params: missing {name}/{leaf} for arch {model_cfg.arch!r}") from None
        return check_weight(a, f"params[{name!r}][{leaf!r}]", ndim)

    def dense(i):
        return Dense(get(f"Dense_{i}", "kernel", 2).T, get(f"Dense_{i}", "bias", 1))

    d = math.prod(model_cfg.input_shape)
    layers: List[Any] = []
    if model_cfg.arch == "cnn":
        shape = tuple(model_cfg.image_shape)
        layers.append(Reshape(shape))
        for i in range(2):
            conv = Conv(get(f"Conv2d_{i}", "kernel", 4), get(f"Conv2d_{i}", "bias", 1), 2)
            shape = conv.out_shape(shape)
            layers += [conv, ReLU()]
        layers += [Reshape((math.prod(shape),)), dense(0), ReLU(), dense(1)]
    else:
        layers.append(Reshape((d,)))
        n_dense = len(model_cfg.hidden) + 1 if model_cfg.arch == "mlp" else 1
        for i in range(n_dense):
            if i:
                layers.append(ReLU())
            layers.append(dense(i))
    return network(layers, model_cfg.input_shape)


__all__ = ["CERTIFIABLE_ARCHS", "to_network"]
