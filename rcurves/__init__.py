"""rcurves: global adversarial robustness in JAX.

Per-point minimal adversarial distances, robustness curves, exact theory,
certified bounds, adversarial sparsity and inter-class distances. The package
is in folders that name its kinds of thing:

* :mod:`rcurves.data` -- real data sets, the papers' distributions, fair samples, users' files;
* :mod:`rcurves.models` -- architectures, training, checkpoints, the zoo, :func:`rcurves.models.load`;
* :mod:`rcurves.exact` -- closed forms and exact distances (linear, 1-NN, genuine, inter-class, invariance);
* :mod:`rcurves.sparsity` -- adversarial sparsity: estimators, closed forms, theory;
* :mod:`rcurves.certify` -- certified lower bounds, branch and bound, MILP, the band;
* :mod:`rcurves.pipeline` -- evaluations, chunked resumable runs, devices, reports, sweeps, the demo;
* :mod:`rcurves.claims` -- paired tests, verdict rules, claim records;
* :mod:`rcurves.curves`, :mod:`rcurves.plotting`, :mod:`rcurves.files`, :mod:`rcurves.cli` -- curves,
  figures, atomic files, the command line.

The evaluation pipeline is :func:`rcurves.evaluate` (models x data x norms ->
:class:`Evaluation`); the named, cached models of the demo and the
experiments are in :mod:`rcurves.models.zoo` (also ``rcurves.zoo``).
The names below are re-exported here wherever their module lives.
"""
from rcurves.data import tsipras_p1
from rcurves.data import nakkiran_p2
from rcurves.data import toy_linear_classifiers
from rcurves.data import parabola_points
from rcurves.data import parabola_logits_fn
from rcurves.data import parabola_distance
from rcurves.data import theorem1_construction
from rcurves.data import Theorem1Construction
from rcurves.data import toy_1d
from rcurves.data import toy_1d_classifiers
from rcurves.data import sunset
from rcurves.data import sunset_oracle_logits_fn
from rcurves.data import overly_robust_features
from rcurves.data import overly_robust_classifiers
from rcurves.data import mnist
from rcurves.data import digits
from rcurves.data import load_dataset
from rcurves.data import dataset_fingerprint
from rcurves.exact.interclass import interclass_distances
from rcurves.exact.interclass import interclass_summary
from rcurves.exact.interclass import interclass_table
from rcurves.exact.interclass import deduplicate
from rcurves.exact.interclass import InterclassSummary
from rcurves.exact.linear import dual_exponent
from rcurves.exact.linear import linear_curve_scale
from rcurves.exact.linear import linear_distance
from rcurves.exact.linear import linear_logits_fn
from rcurves.exact.linear import linear_perturbation
from rcurves.exact.linear import lp_norm
from rcurves.exact.linear import multiclass_logits_fn
from rcurves.curves import curve_intersections
from rcurves.curves import curve_points
from rcurves.curves import dkw_band
from rcurves.curves import exact_curve_intersections
from rcurves.curves import margin_curve
from rcurves.curves import robust_accuracy
from rcurves.curves import robust_error
from rcurves.curves import robustness_curve
from rcurves.plotting import plot_curve_grid
from rcurves.plotting import plot_curves
from rcurves.plotting import plot_step_curves
from rcurves.plotting import step_curve
from rcurves.pipeline.distributed import make_mesh
from rcurves.pipeline.distributed import on_mesh
from rcurves.data.streaming import map_points
from rcurves.models import ModelConfig
from rcurves.models import init_params
from rcurves.models import make_logits_fn
from rcurves.models import ModelFn
from rcurves.models.training import TrainConfig
from rcurves.models.training import train
from rcurves.models import zoo
from rcurves.data.sampling import interleaved_order
from rcurves.exact.nearest import NN1Distance
from rcurves.exact.nearest import nn1_distance
from rcurves.exact.nearest import nn1_distance_result
from rcurves.exact.nearest import nn1_neighbors
from rcurves.exact.nearest import nn1_predict
from rcurves.exact.nearest import tie_accuracy
from rcurves.exact.genuine import genuine_adversarial_accuracy_1d
from rcurves.exact.genuine import nn1_classifier_1d
from rcurves.exact.genuine import standard_adversarial_accuracy_1d
from rcurves.exact.genuine import standard_ara_1d
from rcurves.exact.genuine import sunset_genuine_accuracy
from rcurves.exact.genuine import sunset_nn1_predict
from rcurves.claims.agreement import agreement_with_reference
from rcurves.claims.agreement import mcnemar_exact
from rcurves.exact.invariance import knn_oracle
from rcurves.exact.invariance import linf_invariance_examples
from rcurves.claims.compare import paired_order_test
from rcurves.claims.compare import significant_reversal
from rcurves.pipeline.evaluation import AttackSettings
from rcurves.pipeline.evaluation import Evaluation
from rcurves.pipeline.evaluation import evaluate
from rcurves.data.loader import load_data
from rcurves.models.loader import load as load_model
from rcurves.models.checkpoint import CheckpointError
from rcurves.models.checkpoint import load_checkpoint
from rcurves.models.checkpoint import save_checkpoint
from rcurves.pipeline.runner import DistanceConfig
from rcurves.pipeline.runner import RunnerError
from rcurves.pipeline.runner import make_distance_fn
from rcurves.pipeline.runner import run_chunked
from rcurves.sparsity import SparsityCurve
from rcurves.sparsity import SparsityResult
from rcurves.sparsity import adversarial_accuracy
from rcurves.sparsity import expected_l2_sparsity
from rcurves.sparsity import expected_linf_sparsity
from rcurves.sparsity import fraction_measured
from rcurves.sparsity import l2_directions
from rcurves.sparsity import l2_sparsity
from rcurves.sparsity import l2_sparsity_full
from rcurves.sparsity import linear_l2_sparsity
from rcurves.sparsity import linear_linf_sparsity
from rcurves.sparsity import linf_directions
from rcurves.sparsity import linf_sparsity
from rcurves.sparsity import linf_sparsity_bounds
from rcurves.sparsity import linf_sparsity_full
from rcurves.sparsity import residual_sparsity
from rcurves.sparsity import sparsity_curve
from rcurves.sparsity import sparsity_summary

__all__ = [
    "AttackSettings",
    "CheckpointError",
    "DistanceConfig",
    "Evaluation",
    "InterclassSummary",
    "ModelConfig",
    "ModelFn",
    "NN1Distance",
    "RunnerError",
    "SparsityCurve",
    "SparsityResult",
    "Theorem1Construction",
    "TrainConfig",
    "adversarial_accuracy",
    "agreement_with_reference",
    "curve_intersections",
    "curve_points",
    "dataset_fingerprint",
    "deduplicate",
    "digits",
    "dkw_band",
    "dual_exponent",
    "evaluate",
    "exact_curve_intersections",
    "expected_l2_sparsity",
    "expected_linf_sparsity",
    "fraction_measured",
    "genuine_adversarial_accuracy_1d",
    "init_params",
    "interclass_distances",
    "interclass_summary",
    "interclass_table",
    "interleaved_order",
    "knn_oracle",
    "l2_directions",
    "l2_sparsity",
    "l2_sparsity_full",
    "linear_curve_scale",
    "linear_distance",
    "linear_l2_sparsity",
    "linear_linf_sparsity",
    "linear_logits_fn",
    "linear_perturbation",
    "linf_directions",
    "linf_invariance_examples",
    "linf_sparsity",
    "linf_sparsity_bounds",
    "linf_sparsity_full",
    "load_checkpoint",
    "load_data",
    "load_dataset",
    "load_model",
    "lp_norm",
    "make_distance_fn",
    "make_logits_fn",
    "make_mesh",
    "map_points",
    "margin_curve",
    "mcnemar_exact",
    "mnist",
    "multiclass_logits_fn",
    "nakkiran_p2",
    "nn1_classifier_1d",
    "nn1_distance",
    "nn1_distance_result",
    "nn1_neighbors",
    "nn1_predict",
    "on_mesh",
    "overly_robust_classifiers",
    "overly_robust_features",
    "paired_order_test",
    "parabola_distance",
    "parabola_logits_fn",
    "parabola_points",
    "plot_curve_grid",
    "plot_curves",
    "plot_step_curves",
    "residual_sparsity",
    "robust_accuracy",
    "robust_error",
    "robustness_curve",
    "run_chunked",
    "save_checkpoint",
    "significant_reversal",
    "sparsity_curve",
    "sparsity_summary",
    "standard_adversarial_accuracy_1d",
    "standard_ara_1d",
    "step_curve",
    "sunset",
    "sunset_genuine_accuracy",
    "sunset_nn1_predict",
    "sunset_oracle_logits_fn",
    "theorem1_construction",
    "tie_accuracy",
    "toy_1d",
    "toy_1d_classifiers",
    "toy_linear_classifiers",
    "train",
    "tsipras_p1",
    "zoo",
]
