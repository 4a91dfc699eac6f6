"""Adversarial sparsity (paper 004): estimators, closed forms for linear models, theory.

* :mod:`~rcurves.sparsity.estimators` -- l_2 angular and l_inf sparsity of any model (Algorithm 1);
* :mod:`~rcurves.sparsity.linear` -- exact values for a binary linear classifier;
* :mod:`~rcurves.sparsity.theory` -- k random adversarial perturbations (App. E, eqs. 8-10).
"""
from attacks._lazy import attach

# public name -> 'module' (a submodule) or 'module:attribute'; imported on first use (PEP 562), so a
# program loads only the modules it uses (and a claim's code fingerprint covers only those)
__getattr__, __dir__ = attach(__name__, {
    'MEASURED': 'rcurves.sparsity.estimators:MEASURED',
    'MISCLASSIFIED': 'rcurves.sparsity.estimators:MISCLASSIFIED',
    'ROBUST': 'rcurves.sparsity.estimators:ROBUST',
    'SparsityConfig': 'rcurves.sparsity.estimators:SparsityConfig',
    'SparsityCurve': 'rcurves.sparsity.estimators:SparsityCurve',
    'SparsityResult': 'rcurves.sparsity.estimators:SparsityResult',
    'adversarial_accuracy': 'rcurves.sparsity.estimators:adversarial_accuracy',
    'fraction_measured': 'rcurves.sparsity.estimators:fraction_measured',
    'l2_directions': 'rcurves.sparsity.estimators:l2_directions',
    'l2_sparsity': 'rcurves.sparsity.estimators:l2_sparsity',
    'l2_sparsity_full': 'rcurves.sparsity.estimators:l2_sparsity_full',
    'linf_directions': 'rcurves.sparsity.estimators:linf_directions',
    'linf_sparsity': 'rcurves.sparsity.estimators:linf_sparsity',
    'linf_sparsity_full': 'rcurves.sparsity.estimators:linf_sparsity_full',
    'residual_sparsity': 'rcurves.sparsity.estimators:residual_sparsity',
    'sparsity_curve': 'rcurves.sparsity.estimators:sparsity_curve',
    'sparsity_summary': 'rcurves.sparsity.estimators:sparsity_summary',
    'linear_l2_sparsity': 'rcurves.sparsity.linear:linear_l2_sparsity',
    'linear_linf_sparsity': 'rcurves.sparsity.linear:linear_linf_sparsity',
    'expected_l2_sparsity': 'rcurves.sparsity.theory:expected_l2_sparsity',
    'expected_linf_sparsity': 'rcurves.sparsity.theory:expected_linf_sparsity',
    'linf_sparsity_bounds': 'rcurves.sparsity.theory:linf_sparsity_bounds',
})

__all__ = sorted(['MEASURED', 'MISCLASSIFIED', 'ROBUST', 'SparsityConfig', 'SparsityCurve', 'SparsityResult', 'adversarial_accuracy', 'fraction_measured', 'l2_directions', 'l2_sparsity', 'l2_sparsity_full', 'linf_directions', 'linf_sparsity', 'linf_sparsity_full', 'residual_sparsity', 'sparsity_curve', 'sparsity_summary', 'linear_l2_sparsity', 'linear_linf_sparsity', 'expected_l2_sparsity', 'expected_linf_sparsity', 'linf_sparsity_bounds'])
