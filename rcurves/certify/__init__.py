"""Certified lower bounds and exact distances for ReLU networks.

Attacks give upper bounds on each point's minimal adversarial distance (so
their robustness curve lies on or below the true one, paper 000 section 3.1);
this package gives the other side: ``certified_radius`` (IBP, CROWN-IBP,
CROWN, alpha-CROWN) lower bounds, ``exact_distance`` (MILP) both bounds,
closing them where the network is small, and ``robustness_band`` the two
curves that bracket the true robustness curve.

    from rcurves import certify

    from rcurves.models import zoo
    m = zoo.load("mnist-mlp-at-linf-0.1")
    net = certify.from_model(m.model, m.params)
    r = certify.certified_radius(net, x, y, norm="linf", upper=attack_distances)
    curve_upper, curve_lower = certify.robustness_band(attack_distances, r, eps)
"""
from attacks._lazy import attach

# public name -> 'module' (a submodule) or 'module:attribute'; imported on first use (PEP 562), so a
# program loads only the modules it uses (and a claim's code fingerprint covers only those)
__getattr__, __dir__ = attach(__name__, {
    'Conv': 'rcurves.nets.layers:Conv',
    'Dense': 'rcurves.nets.layers:Dense',
    'Network': 'rcurves.nets.layers:Network',
    'ReLU': 'rcurves.nets.layers:ReLU',
    'Reshape': 'rcurves.nets.layers:Reshape',
    'from_model': 'rcurves.certify.convert:from_model',
    'mlp': 'rcurves.nets.layers:mlp',
    'network': 'rcurves.nets.layers:network',
    'from_onnx': 'rcurves.certify.onnx_layers:from_onnx',
    'METHODS': 'rcurves.nets.bounds:METHODS',
    'certified_radius': 'rcurves.certify.radius:certified_radius',
    'logit_bounds': 'rcurves.certify.radius:logit_bounds',
    'margin_bounds': 'rcurves.certify.radius:margin_bounds',
    'EXACT_RTOL': 'rcurves.certify.milp:EXACT_RTOL',
    'BandSummary': 'rcurves.certify.band:BandSummary',
    'ModelBand': 'rcurves.certify.band:ModelBand',
    'band_for_model': 'rcurves.certify.band:band_for_model',
    'band_lines': 'rcurves.certify.band:band_lines',
    'band_summary': 'rcurves.certify.band:band_summary',
    'evaluation_bands': 'rcurves.certify.band:evaluation_bands',
    'save_bands': 'rcurves.certify.band:save_bands',
    'robustness_band': 'rcurves.certify.band:robustness_band',
    'ExactResult': 'rcurves.certify.milp:ExactResult',
    'exact_distance': 'rcurves.certify.milp:exact_distance',
    'exact_search': 'rcurves.certify.milp:exact_search',
    'RobustnessProperty': 'rcurves.certify.vnnlib:RobustnessProperty',
    'from_nhwc': 'rcurves.certify.vnnlib:from_nhwc',
    'read_vnnlib': 'rcurves.certify.vnnlib:read_vnnlib',
    'to_nhwc': 'rcurves.certify.vnnlib:to_nhwc',
    'write_vnnlib': 'rcurves.certify.vnnlib:write_vnnlib',
    'VerifyResult': 'rcurves.certify.verify:VerifyResult',
    'verify': 'rcurves.certify.verify:verify',
})

__all__ = [
    "BandSummary",
    "Conv",
    "Dense",
    "EXACT_RTOL",
    "ExactResult",
    "METHODS",
    "Network",
    "ModelBand",
    "ReLU",
    "Reshape",
    "RobustnessProperty",
    "VerifyResult",
    "band_for_model",
    "band_lines",
    "band_summary",
    "evaluation_bands",
    "certified_radius",
    "exact_distance",
    "exact_search",
    "from_nhwc",
    "from_model",
    "from_onnx",
    "logit_bounds",
    "margin_bounds",
    "mlp",
    "network",
    "read_vnnlib",
    "robustness_band",
    "save_bands",
    "to_nhwc",
    "verify",
    "write_vnnlib",
]
