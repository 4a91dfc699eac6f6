"""rcurves: global adversarial robustness in JAX.

Per-point minimal adversarial distances, robustness curves, exact theory for
linear models, adversarial sparsity and inter-class distances.
"""
