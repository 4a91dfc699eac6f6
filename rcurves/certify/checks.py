"""Input validation of the verifiers (before anything is traced or compiled)."""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import jax
import numpy as np

from attacks import checks
from rcurves.nets.layers import Network


def check_net(net: Any, name: str = "net") -> Network:
    if not isinstance(net, Network):
        raise ValueError(
            f"{name}: expected an rcurves.certify.Network (build one with certify.mlp or "
            f"certify.from_model), got {type(net).__name__}"
        )
    return net


def check_points(net: Network, x: Any, y: Any, bounds: Any):
    """``(x reshaped to (n, *net.input_shape), y int32 (n,), bounds)``."""
    x = checks.check_array(x, "x", min_ndim=2)
    d = math.prod(net.input_shape)
    if math.prod(x.shape[1:]) != d:
        raise ValueError(
            f"x: expected points of shape {tuple(net.input_shape)} ({d} features), "
            f"got shape {tuple(x.shape)}"
        )
    x = x.reshape((x.shape[0],) + tuple(net.input_shape))
    y = checks.check_labels(y, x.shape[0], "y", net.n_classes)
    bounds = checks.check_bounds(bounds, x)
    return x, y, bounds


def check_upper(upper: Any, n: int, name: str = "upper") -> Optional[jax.Array]:
    """None, or ``(n,)`` non-negative distances (``inf`` allowed, NaN not)."""
    if upper is None:
        return None
    u = checks.check_array(upper, name, ndim=1, finite=False)
    if u.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},) to match x, got {tuple(u.shape)}")
    if checks.is_concrete(u):
        arr = np.asarray(u)
        if np.isnan(arr).any():
            raise ValueError(f"{name}: contains NaN")
        if (arr < 0).any():
            raise ValueError(f"{name}: distances must be >= 0, got min {arr.min()}")
    return u


def diameter(norm: str, bounds: Tuple[float, float], shape) -> float:
    """Largest distance between two points of the box ``bounds^shape`` in ``norm``."""
    d = math.prod(shape)
    w = bounds[1] - bounds[0]
    return {"linf": w, "l2": w * math.sqrt(d), "l1": w * d}[norm]


__all__ = ["check_net", "check_points", "check_upper", "diameter"]
