"""Models: architectures, training, checkpoints, the zoo, and the one entry :func:`load`.

The life of a model in one place: :mod:`~rcurves.models.architectures` (what it is),
:mod:`~rcurves.models.training` (how it is trained), :mod:`~rcurves.models.checkpoint` (how it is
stored), :mod:`~rcurves.models.zoo` (the named, cached models) and :mod:`~rcurves.models.loader`
(:func:`load`: any model spec -> :class:`LoadedModel`, what every pipeline takes).
"""
from rcurves.models.architectures import ARCHS as ARCHS
from rcurves.models.architectures import CNN as CNN
from rcurves.models.architectures import Conv2d as Conv2d
from rcurves.models.architectures import FrozenBatchNorm as FrozenBatchNorm
from rcurves.models.architectures import Linear as Linear
from rcurves.models.architectures import MLP as MLP
from rcurves.models.architectures import ModelConfig as ModelConfig
from rcurves.models.architectures import ModelFn as ModelFn
from rcurves.models.architectures import ResNet as ResNet
from rcurves.models.architectures import accuracy as accuracy
from rcurves.models.architectures import apply_fn as apply_fn
from rcurves.models.architectures import build_model as build_model
from rcurves.models.architectures import check_params as check_params
from rcurves.models.architectures import conv2d_patches as conv2d_patches
from rcurves.models.architectures import init_params as init_params
from rcurves.models.architectures import make_logits_fn as make_logits_fn
from rcurves.models.architectures import param_shapes as param_shapes
from rcurves.models.architectures import restore as restore
from rcurves.models.training import METHODS as METHODS
from rcurves.models.training import TrainConfig as TrainConfig
from rcurves.models.training import TrainResult as TrainResult
from rcurves.models.training import TrainState as TrainState
from rcurves.models.training import eps_schedule as eps_schedule
from rcurves.models.training import augment as augment
from rcurves.models.training import augment_batch as augment_batch
from rcurves.models.training import mix_batch as mix_batch
from rcurves.models.training import init_state as init_state
from rcurves.models.training import learning_rate as learning_rate
from rcurves.models.training import make_optimizer as make_optimizer
from rcurves.models.training import make_train_step as make_train_step
from rcurves.models.training import raw_key as raw_key
from rcurves.models.training import train as train
from rcurves.models.checkpoint import Checkpoint as Checkpoint
from rcurves.models.checkpoint import CheckpointError as CheckpointError
from rcurves.models.checkpoint import load_checkpoint as load_checkpoint
from rcurves.models.checkpoint import logits_fn_from_checkpoint as logits_fn_from_checkpoint
from rcurves.models.checkpoint import save_checkpoint as save_checkpoint
from rcurves.models.loader import LoadedModel as LoadedModel
from rcurves.models.loader import check_model_on_data as check_model_on_data
from rcurves.models.loader import clean_accuracy as clean_accuracy
from rcurves.models.loader import from_zoo as from_zoo
from rcurves.models.loader import load as load
