"""Exact answers where theory has them: distances and accuracies computed, not attacked.

* :mod:`~rcurves.exact.linear` -- Lemma 1, Eq. 3, Theorem 2 of paper 000 (linear models);
* :mod:`~rcurves.exact.nearest` -- the 1-NN classifier's exact minimal distances (paper 002);
* :mod:`~rcurves.exact.genuine` -- standard vs genuine adversarial accuracy (paper 002);
* :mod:`~rcurves.exact.interclass` -- distances to the nearest other-class point (000 Table 2);
* :mod:`~rcurves.exact.invariance` -- invariance adversarial examples (paper 003).
"""
from attacks._lazy import attach

# public name -> 'module' (a submodule) or 'module:attribute'; imported on first use (PEP 562), so a
# program loads only the modules it uses (and a claim's code fingerprint covers only those)
__getattr__, __dir__ = attach(__name__, {
    'dual_exponent': 'rcurves.exact.linear:dual_exponent',
    'linear_curve_scale': 'rcurves.exact.linear:linear_curve_scale',
    'linear_distance': 'rcurves.exact.linear:linear_distance',
    'linear_logits_fn': 'rcurves.exact.linear:linear_logits_fn',
    'linear_perturbation': 'rcurves.exact.linear:linear_perturbation',
    'lp_norm': 'rcurves.exact.linear:lp_norm',
    'multiclass_logits_fn': 'rcurves.exact.linear:multiclass_logits_fn',
    'NN1Distance': 'rcurves.exact.nearest:NN1Distance',
    'Neighbors': 'rcurves.exact.nearest:Neighbors',
    'TieAccuracy': 'rcurves.exact.nearest:TieAccuracy',
    'nn1_distance': 'rcurves.exact.nearest:nn1_distance',
    'nn1_distance_result': 'rcurves.exact.nearest:nn1_distance_result',
    'nn1_neighbors': 'rcurves.exact.nearest:nn1_neighbors',
    'nn1_predict': 'rcurves.exact.nearest:nn1_predict',
    'tie_accuracy': 'rcurves.exact.nearest:tie_accuracy',
    'GenuineDetail': 'rcurves.exact.genuine:GenuineDetail',
    'IntervalData': 'rcurves.exact.genuine:IntervalData',
    'Piecewise1D': 'rcurves.exact.genuine:Piecewise1D',
    'SunsetQuadrature': 'rcurves.exact.genuine:SunsetQuadrature',
    'clean_accuracy_1d': 'rcurves.exact.genuine:clean_accuracy_1d',
    'genuine_adversarial_accuracy_1d': 'rcurves.exact.genuine:genuine_adversarial_accuracy_1d',
    'interval_data': 'rcurves.exact.genuine:interval_data',
    'nn1_classifier_1d': 'rcurves.exact.genuine:nn1_classifier_1d',
    'piecewise': 'rcurves.exact.genuine:piecewise',
    'piecewise_predict': 'rcurves.exact.genuine:piecewise_predict',
    'standard_adversarial_accuracy_1d': 'rcurves.exact.genuine:standard_adversarial_accuracy_1d',
    'standard_ara_1d': 'rcurves.exact.genuine:standard_ara_1d',
    'sunset_genuine_accuracy': 'rcurves.exact.genuine:sunset_genuine_accuracy',
    'sunset_nn1_predict': 'rcurves.exact.genuine:sunset_nn1_predict',
    'sunset_quadrature': 'rcurves.exact.genuine:sunset_quadrature',
    'sunset_set_distances': 'rcurves.exact.genuine:sunset_set_distances',
    'toy_1d_data': 'rcurves.exact.genuine:toy_1d_data',
    'toy_1d_piecewise': 'rcurves.exact.genuine:toy_1d_piecewise',
    'InterclassSummary': 'rcurves.exact.interclass:InterclassSummary',
    'deduplicate': 'rcurves.exact.interclass:deduplicate',
    'interclass_distances': 'rcurves.exact.interclass:interclass_distances',
    'interclass_summary': 'rcurves.exact.interclass:interclass_summary',
    'interclass_table': 'rcurves.exact.interclass:interclass_table',
    'InvarianceExamples': 'rcurves.exact.invariance:InvarianceExamples',
    'OracleVote': 'rcurves.exact.invariance:OracleVote',
    'knn_oracle': 'rcurves.exact.invariance:knn_oracle',
    'linf_invariance_examples': 'rcurves.exact.invariance:linf_invariance_examples',
    'shift_images': 'rcurves.exact.invariance:shift_images',
    'shifts': 'rcurves.exact.invariance:shifts',
})

__all__ = sorted(['dual_exponent', 'linear_curve_scale', 'linear_distance', 'linear_logits_fn', 'linear_perturbation', 'lp_norm', 'multiclass_logits_fn', 'NN1Distance', 'Neighbors', 'TieAccuracy', 'nn1_distance', 'nn1_distance_result', 'nn1_neighbors', 'nn1_predict', 'tie_accuracy', 'GenuineDetail', 'IntervalData', 'Piecewise1D', 'SunsetQuadrature', 'clean_accuracy_1d', 'genuine_adversarial_accuracy_1d', 'interval_data', 'nn1_classifier_1d', 'piecewise', 'piecewise_predict', 'standard_adversarial_accuracy_1d', 'standard_ara_1d', 'sunset_genuine_accuracy', 'sunset_nn1_predict', 'sunset_quadrature', 'sunset_set_distances', 'toy_1d_data', 'toy_1d_piecewise', 'InterclassSummary', 'deduplicate', 'interclass_distances', 'interclass_summary', 'interclass_table', 'InvarianceExamples', 'OracleVote', 'knn_oracle', 'linf_invariance_examples', 'shift_images', 'shifts'])
