"""``certify.from_model``: a toolkit model, a loaded model or an ONNX file as a :class:`rcurves.nets.Network`."""
from __future__ import annotations

from typing import Any

from rcurves.models.architectures import ModelConfig
from rcurves.models.network import CERTIFIABLE_ARCHS, to_network
from rcurves.nets.layers import Network


def _model_and_params(model: Any):
    """``(ModelConfig, params)`` of a loaded toolkit model, or ``(model, None)`` for an ONNX one."""
    import os

    from rcurves.models.loaded import LoadedModel

    if isinstance(model, LoadedModel):
        if model.model is not None:
            return model.model, model.params
        if type(model.logits_fn).__name__ == "OnnxFn":
            return model, None
        raise ValueError(f"model_cfg: {model.label!r} is a bare logits_fn; the verifiers need its layers "
                         "(a zoo, checkpoint or ONNX model, or certify.network(layers, input_shape))")
    if isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".onnx"):
        return model, None
    if type(model).__name__ in ("OnnxFn", "ModelProto"):
        return model, None
    raise ValueError(f"model_cfg: expected an rcurves.models.ModelConfig (with params), a LoadedModel or an "
                     f".onnx path, got {type(model).__name__}")



def from_model(model_cfg: Any, params: Any = None) -> Network:
    """The toolkit's linear, MLP or C.1 CNN (``rcurves.models``) as a :class:`Network`.

    ``model_cfg`` is a :class:`~rcurves.models.ModelConfig` with ``params``, its flax parameter tree
    (:func:`rcurves.models.network.to_network`: Dense kernels ``(in, out)`` become ``W (out, in)``; the
    network computes what ``make_logits_fn(model_cfg, params)`` computes; ``params`` may be traced). It may
    also be a :class:`~rcurves.models.LoadedModel` (``rcurves.models.load(...)``: a zoo or checkpoint model's
    own ``model`` and ``params`` are used, ``params`` omitted), or an ONNX model: a path ending in ``.onnx``,
    its ``LoadedModel`` or ``OnnxFn``, which go to :func:`rcurves.certify.onnx_layers.from_onnx`.

    Raises:
      ValueError: an architecture not in :data:`CERTIFIABLE_ARCHS`, parameters missing or of the wrong
        shape, or a model the verifiers cannot read (a bare ``logits_fn``).
    """
    if params is None and not isinstance(model_cfg, ModelConfig):
        model_cfg, params = _model_and_params(model_cfg)
        if params is None:                       # an ONNX model
            from rcurves.certify.onnx_layers import from_onnx

            return from_onnx(model_cfg)
    return to_network(model_cfg, params)


__all__ = ["CERTIFIABLE_ARCHS", "from_model"]
