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
from rcurves.certify.layers import Conv
from rcurves.certify.layers import Dense
from rcurves.certify.layers import Network
from rcurves.certify.layers import ReLU
from rcurves.certify.layers import Reshape
from rcurves.certify.layers import from_model
from rcurves.certify.layers import mlp
from rcurves.certify.layers import network
from rcurves.certify.bounds import METHODS
from rcurves.certify.radius import certified_radius
from rcurves.certify.radius import logit_bounds
from rcurves.certify.radius import margin_bounds
from rcurves.certify.milp import EXACT_RTOL
from rcurves.certify.band import BandSummary
from rcurves.certify.band import ModelBand
from rcurves.certify.band import band_for_model
from rcurves.certify.band import band_lines
from rcurves.certify.band import band_summary
from rcurves.certify.band import evaluation_bands
from rcurves.certify.band import save_bands
from rcurves.certify.band import robustness_band
from rcurves.certify.milp import ExactResult
from rcurves.certify.milp import exact_distance
from rcurves.certify.milp import exact_search

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
    "band_for_model",
    "band_lines",
    "band_summary",
    "evaluation_bands",
    "certified_radius",
    "exact_distance",
    "exact_search",
    "from_model",
    "logit_bounds",
    "margin_bounds",
    "mlp",
    "network",
    "robustness_band",
    "save_bands",
]
