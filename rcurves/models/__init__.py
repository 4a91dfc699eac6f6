"""Models: architectures, training, checkpoints, the zoo, and the one entry :func:`load`.

The life of a model in one place: :mod:`~rcurves.models.architectures` (what it is),
:mod:`~rcurves.models.training` (how it is trained), :mod:`~rcurves.models.checkpoint` (how it is
stored), :mod:`~rcurves.models.zoo` (the named, cached models) and :mod:`~rcurves.models.loader`
(:func:`load`: any model spec -> :class:`LoadedModel`, what every pipeline takes).
"""
from attacks._lazy import attach

# public name -> 'module' (a submodule) or 'module:attribute'; imported on first use (PEP 562), so a
# program loads only the modules it uses (and a claim's code fingerprint covers only those)
__getattr__, __dir__ = attach(__name__, {
    'ARCHS': 'rcurves.models.architectures:ARCHS',
    'CNN': 'rcurves.models.architectures:CNN',
    'Conv2d': 'rcurves.models.architectures:Conv2d',
    'FrozenBatchNorm': 'rcurves.models.architectures:FrozenBatchNorm',
    'Linear': 'rcurves.models.architectures:Linear',
    'MLP': 'rcurves.models.architectures:MLP',
    'ModelConfig': 'rcurves.models.architectures:ModelConfig',
    'ModelFn': 'rcurves.models.architectures:ModelFn',
    'ResNet': 'rcurves.models.architectures:ResNet',
    'accuracy': 'rcurves.models.architectures:accuracy',
    'apply_fn': 'rcurves.models.architectures:apply_fn',
    'build_model': 'rcurves.models.architectures:build_model',
    'check_params': 'rcurves.models.architectures:check_params',
    'conv2d_patches': 'rcurves.models.architectures:conv2d_patches',
    'init_params': 'rcurves.models.architectures:init_params',
    'make_logits_fn': 'rcurves.models.architectures:make_logits_fn',
    'param_shapes': 'rcurves.models.architectures:param_shapes',
    'restore': 'rcurves.models.architectures:restore',
    'METHODS': 'rcurves.models.training:METHODS',
    'TrainConfig': 'rcurves.models.training:TrainConfig',
    'TrainResult': 'rcurves.models.training:TrainResult',
    'TrainState': 'rcurves.models.training:TrainState',
    'eps_schedule': 'rcurves.models.training:eps_schedule',
    'augment': 'rcurves.models.training:augment',
    'augment_batch': 'rcurves.models.training:augment_batch',
    'mix_batch': 'rcurves.models.training:mix_batch',
    'init_state': 'rcurves.models.training:init_state',
    'learning_rate': 'rcurves.models.training:learning_rate',
    'make_optimizer': 'rcurves.models.training:make_optimizer',
    'make_train_step': 'rcurves.models.training:make_train_step',
    'raw_key': 'rcurves.models.training:raw_key',
    'train': 'rcurves.models.training:train',
    'Checkpoint': 'rcurves.models.checkpoint:Checkpoint',
    'CheckpointError': 'rcurves.models.checkpoint:CheckpointError',
    'load_checkpoint': 'rcurves.models.checkpoint:load_checkpoint',
    'logits_fn_from_checkpoint': 'rcurves.models.checkpoint:logits_fn_from_checkpoint',
    'save_checkpoint': 'rcurves.models.checkpoint:save_checkpoint',
    'LoadedModel': 'rcurves.models.loaded:LoadedModel',
    'check_model_on_data': 'rcurves.models.loader:check_model_on_data',
    'clean_accuracy': 'rcurves.models.loader:clean_accuracy',
    'from_zoo': 'rcurves.models.loader:from_zoo',
    'load': 'rcurves.models.loader:load',
    'OnnxFn': 'rcurves.models.onnx_reader:OnnxFn',
    'OnnxGraph': 'rcurves.models.onnx_reader:OnnxGraph',
    'load_onnx': 'rcurves.models.onnx_reader:load_onnx',
})

__all__ = sorted(['ARCHS', 'CNN', 'Conv2d', 'FrozenBatchNorm', 'Linear', 'MLP', 'ModelConfig', 'ModelFn', 'ResNet', 'accuracy', 'apply_fn', 'build_model', 'check_params', 'conv2d_patches', 'init_params', 'make_logits_fn', 'param_shapes', 'restore', 'METHODS', 'TrainConfig', 'TrainResult', 'TrainState', 'eps_schedule', 'augment', 'augment_batch', 'mix_batch', 'init_state', 'learning_rate', 'make_optimizer', 'make_train_step', 'raw_key', 'train', 'Checkpoint', 'CheckpointError', 'load_checkpoint', 'logits_fn_from_checkpoint', 'save_checkpoint', 'LoadedModel', 'check_model_on_data', 'clean_accuracy', 'from_zoo', 'load', 'OnnxFn', 'OnnxGraph', 'load_onnx'])
