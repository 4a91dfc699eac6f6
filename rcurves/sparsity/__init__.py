"""Adversarial sparsity (paper 004): estimators, closed forms for linear models, theory.

* :mod:`~rcurves.sparsity.estimators` -- l_2 angular and l_inf sparsity of any model (Algorithm 1);
* :mod:`~rcurves.sparsity.linear` -- exact values for a binary linear classifier;
* :mod:`~rcurves.sparsity.theory` -- k random adversarial perturbations (App. E, eqs. 8-10).
"""
from rcurves.sparsity.estimators import MEASURED as MEASURED
from rcurves.sparsity.estimators import MISCLASSIFIED as MISCLASSIFIED
from rcurves.sparsity.estimators import ROBUST as ROBUST
from rcurves.sparsity.estimators import SparsityConfig as SparsityConfig
from rcurves.sparsity.estimators import SparsityCurve as SparsityCurve
from rcurves.sparsity.estimators import SparsityResult as SparsityResult
from rcurves.sparsity.estimators import adversarial_accuracy as adversarial_accuracy
from rcurves.sparsity.estimators import fraction_measured as fraction_measured
from rcurves.sparsity.estimators import l2_directions as l2_directions
from rcurves.sparsity.estimators import l2_sparsity as l2_sparsity
from rcurves.sparsity.estimators import l2_sparsity_full as l2_sparsity_full
from rcurves.sparsity.estimators import linf_directions as linf_directions
from rcurves.sparsity.estimators import linf_sparsity as linf_sparsity
from rcurves.sparsity.estimators import linf_sparsity_full as linf_sparsity_full
from rcurves.sparsity.estimators import residual_sparsity as residual_sparsity
from rcurves.sparsity.estimators import sparsity_curve as sparsity_curve
from rcurves.sparsity.estimators import sparsity_summary as sparsity_summary
from rcurves.sparsity.linear import linear_l2_sparsity as linear_l2_sparsity
from rcurves.sparsity.linear import linear_linf_sparsity as linear_linf_sparsity
from rcurves.sparsity.theory import expected_l2_sparsity as expected_l2_sparsity
from rcurves.sparsity.theory import expected_linf_sparsity as expected_linf_sparsity
from rcurves.sparsity.theory import linf_sparsity_bounds as linf_sparsity_bounds
