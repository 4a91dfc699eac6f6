"""Exact answers where theory has them: distances and accuracies computed, not attacked.

* :mod:`~rcurves.exact.linear` -- Lemma 1, Eq. 3, Theorem 2 of paper 000 (linear models);
* :mod:`~rcurves.exact.nearest` -- the 1-NN classifier's exact minimal distances (paper 002);
* :mod:`~rcurves.exact.genuine` -- standard vs genuine adversarial accuracy (paper 002);
* :mod:`~rcurves.exact.interclass` -- distances to the nearest other-class point (000 Table 2);
* :mod:`~rcurves.exact.invariance` -- invariance adversarial examples (paper 003).
"""
from rcurves.exact.linear import dual_exponent as dual_exponent
from rcurves.exact.linear import linear_curve_scale as linear_curve_scale
from rcurves.exact.linear import linear_distance as linear_distance
from rcurves.exact.linear import linear_logits_fn as linear_logits_fn
from rcurves.exact.linear import linear_perturbation as linear_perturbation
from rcurves.exact.linear import lp_norm as lp_norm
from rcurves.exact.linear import multiclass_logits_fn as multiclass_logits_fn
from rcurves.exact.nearest import NN1Distance as NN1Distance
from rcurves.exact.nearest import Neighbors as Neighbors
from rcurves.exact.nearest import TieAccuracy as TieAccuracy
from rcurves.exact.nearest import nn1_distance as nn1_distance
from rcurves.exact.nearest import nn1_distance_result as nn1_distance_result
from rcurves.exact.nearest import nn1_neighbors as nn1_neighbors
from rcurves.exact.nearest import nn1_predict as nn1_predict
from rcurves.exact.nearest import tie_accuracy as tie_accuracy
from rcurves.exact.genuine import GenuineDetail as GenuineDetail
from rcurves.exact.genuine import IntervalData as IntervalData
from rcurves.exact.genuine import Piecewise1D as Piecewise1D
from rcurves.exact.genuine import SunsetQuadrature as SunsetQuadrature
from rcurves.exact.genuine import clean_accuracy_1d as clean_accuracy_1d
from rcurves.exact.genuine import genuine_adversarial_accuracy_1d as genuine_adversarial_accuracy_1d
from rcurves.exact.genuine import interval_data as interval_data
from rcurves.exact.genuine import nn1_classifier_1d as nn1_classifier_1d
from rcurves.exact.genuine import piecewise as piecewise
from rcurves.exact.genuine import piecewise_predict as piecewise_predict
from rcurves.exact.genuine import standard_adversarial_accuracy_1d as standard_adversarial_accuracy_1d
from rcurves.exact.genuine import standard_ara_1d as standard_ara_1d
from rcurves.exact.genuine import sunset_genuine_accuracy as sunset_genuine_accuracy
from rcurves.exact.genuine import sunset_nn1_predict as sunset_nn1_predict
from rcurves.exact.genuine import sunset_quadrature as sunset_quadrature
from rcurves.exact.genuine import sunset_set_distances as sunset_set_distances
from rcurves.exact.genuine import toy_1d_data as toy_1d_data
from rcurves.exact.genuine import toy_1d_piecewise as toy_1d_piecewise
from rcurves.exact.interclass import InterclassSummary as InterclassSummary
from rcurves.exact.interclass import deduplicate as deduplicate
from rcurves.exact.interclass import interclass_distances as interclass_distances
from rcurves.exact.interclass import interclass_summary as interclass_summary
from rcurves.exact.interclass import interclass_table as interclass_table
from rcurves.exact.invariance import InvarianceExamples as InvarianceExamples
from rcurves.exact.invariance import OracleVote as OracleVote
from rcurves.exact.invariance import knn_oracle as knn_oracle
from rcurves.exact.invariance import linf_invariance_examples as linf_invariance_examples
from rcurves.exact.invariance import shift_images as shift_images
from rcurves.exact.invariance import shifts as shifts
