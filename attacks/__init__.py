"""attacks: adversarial attacks as pure, jitted JAX functions.

Depends on nothing of ``rcurves``. Every public function takes a
``logits_fn(x_batch) -> logits_batch``, arrays ``x (n, *input_shape)`` and
``y (n,)``, an explicit ``key``, and is one jitted program.
"""
from attacks._lazy import attach

# public name -> 'module' (a submodule) or 'module:attribute'; imported on first use (PEP 562), so a
# program loads only the modules it uses (and a claim's code fingerprint covers only those)
__getattr__, __dir__ = attach(__name__, {
    'checks': 'attacks.checks',
    'xla': 'attacks.xla',
    'cross_entropy': 'attacks.losses:cross_entropy',
    'margin': 'attacks.losses:margin',
    'minimal_distance': 'attacks.minimal:minimal_distance',
    'pgd': 'attacks.pgd:pgd',
    'MinimalResult': 'attacks.result:MinimalResult',
    'verify': 'attacks.result:verify',
    'carlini_wagner_l2': 'attacks.cw:carlini_wagner_l2',
    'ddn': 'attacks.ddn:ddn',
    'fmn': 'attacks.fmn:fmn',
    'ConstrainedResult': 'attacks.cap:ConstrainedResult',
    'cap_pgd': 'attacks.cap:cap_pgd',
    'cap_pgd_result': 'attacks.cap:cap_pgd_result',
    'project_cap': 'attacks.cap:project_cap',
    'vertex_pgd': 'attacks.vertex:vertex_pgd',
    'vertex_pgd_result': 'attacks.vertex:vertex_pgd_result',
    'APGDT': 'attacks.ensemble:APGDT',
    'CW': 'attacks.ensemble:CW',
    'DDN': 'attacks.ensemble:DDN',
    'FMN': 'attacks.ensemble:FMN',
    'EnsembleResult': 'attacks.ensemble:EnsembleResult',
    'Search': 'attacks.ensemble:Search',
    'default_attacks': 'attacks.ensemble:default_attacks',
    'ensemble': 'attacks.ensemble:ensemble',
    'AdaptiveConfig': 'attacks.adaptive:AdaptiveConfig',
    'AdaptiveResult': 'attacks.adaptive:AdaptiveResult',
    'adaptive_distance': 'attacks.adaptive:adaptive_distance',
    'smooth_relu_model': 'attacks.surrogate:smooth_relu_model',
    'exact_precision': 'attacks.precision:exact_precision',
    'precision': 'attacks.precision',
})

__all__ = sorted(['checks', 'xla', 'cross_entropy', 'margin', 'minimal_distance', 'pgd', 'MinimalResult', 'verify', 'carlini_wagner_l2', 'ddn', 'fmn', 'ConstrainedResult', 'cap_pgd', 'cap_pgd_result', 'project_cap', 'vertex_pgd', 'vertex_pgd_result', 'APGDT', 'CW', 'DDN', 'FMN', 'EnsembleResult', 'Search', 'default_attacks', 'ensemble', 'AdaptiveConfig', 'AdaptiveResult', 'adaptive_distance', 'smooth_relu_model', 'exact_precision', 'precision'])
