"""rcurves: global adversarial robustness in JAX.

Per-point minimal adversarial distances, robustness curves, exact theory for
linear models, adversarial sparsity and inter-class distances.
"""
from rcurves.datasets import tsipras_p1
from rcurves.datasets import nakkiran_p2
from rcurves.datasets import toy_linear_classifiers
from rcurves.datasets import parabola_points
from rcurves.datasets import parabola_logits_fn
from rcurves.datasets import parabola_distance
from rcurves.datasets import theorem1_construction
from rcurves.datasets import Theorem1Construction
from rcurves.datasets import toy_1d
from rcurves.datasets import toy_1d_classifiers
from rcurves.datasets import sunset
from rcurves.datasets import sunset_oracle_logits_fn
from rcurves.datasets import overly_robust_features
from rcurves.datasets import overly_robust_classifiers
from rcurves.datasets import mnist
from rcurves.datasets import digits
from rcurves.datasets import load_dataset
from rcurves.datasets import dataset_fingerprint
from rcurves.interclass import interclass_distances
from rcurves.interclass import interclass_summary
from rcurves.interclass import interclass_table
from rcurves.interclass import deduplicate
from rcurves.interclass import InterclassSummary
from rcurves.linear import dual_exponent
from rcurves.linear import linear_curve_scale
from rcurves.linear import linear_distance
from rcurves.linear import linear_logits_fn
from rcurves.linear import linear_perturbation
from rcurves.linear import lp_norm
from rcurves.linear import multiclass_logits_fn
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
from rcurves.distributed import make_mesh
from rcurves.distributed import on_mesh
from rcurves.streaming import map_points
