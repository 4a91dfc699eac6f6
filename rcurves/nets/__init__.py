"""ReLU networks as explicit layers, and their bounds: the layer below :mod:`rcurves.models` and :mod:`rcurves.certify`.

* :mod:`~rcurves.nets.layers` -- ``Dense``, ``Conv``, ``Reshape``, ``ReLU``, a :class:`Network`, its forward
  pass and its blocks (the affine maps between ReLUs);
* :mod:`~rcurves.nets.conv` -- the toolkit's 'SAME' convolution as patches times a matrix (the model zoo's
  CNN and the ``Conv`` layer compute it alike);
* :mod:`~rcurves.nets.bounds` -- IBP, CROWN-IBP, CROWN and alpha-CROWN bounds of a network over an l_p
  ball (what ``certify`` certifies with and certified training trains on);
* :mod:`~rcurves.nets.local` -- CROWN's second layer of a two-conv network by local windows.

Imports run one way: ``models`` (architectures, training, MMR) and ``certify`` (radii, branch and bound,
MILP, verify) import this package; it imports neither.
"""
from attacks._lazy import attach

__getattr__, __dir__ = attach(__name__, {
    'Conv': 'rcurves.nets.layers:Conv',
    'Dense': 'rcurves.nets.layers:Dense',
    'Network': 'rcurves.nets.layers:Network',
    'ReLU': 'rcurves.nets.layers:ReLU',
    'Reshape': 'rcurves.nets.layers:Reshape',
    'forward': 'rcurves.nets.layers:forward',
    'mlp': 'rcurves.nets.layers:mlp',
    'network': 'rcurves.nets.layers:network',
    'conv2d_patches': 'rcurves.nets.conv:conv2d_patches',
    'METHODS': 'rcurves.nets.bounds:METHODS',
})

__all__ = ["Conv", "Dense", "METHODS", "Network", "ReLU", "Reshape", "conv2d_patches", "forward", "mlp", "network"]
