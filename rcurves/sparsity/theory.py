"""The theory of adversarial sparsity for k uniformly random adversarial perturbations (paper 004, App. E, eqs. 8-10)."""
from __future__ import annotations

import math
from typing import Tuple

import numpy as np

from attacks import checks



def _check_nk(n, k):
    n = checks.check_positive_int(n, "n")
    k = checks.check_positive_int(k, "k")
    return n, k


def expected_l2_sparsity(n: int, k: int, *, as_printed: bool = False) -> float:
    """Eq. 8: expected angular sparsity when Adv is ``k`` uniform points of ``S^{n-1}``.

    ``E[AS] = int_0^pi (1 - g(alpha))^k d alpha`` (Prop. E.1), with ``g`` the
    fraction of the sphere in a cap of angle ``alpha``:
    ``g = t_alpha / 2`` for ``alpha <= pi/2`` and ``1 - t_{pi - alpha} / 2``
    above, ``t_alpha = I_{sin^2 alpha}((n-1)/2, 1/2)`` (Li 2011), so

        E[AS] = int_0^{pi/2} (1 - t_alpha/2)^k + (t_alpha/2)^k d alpha.

    Erratum: eq. 8 as printed (and eq. 26) uses ``g = t_alpha``, i.e. it
    forgets that the cap at ``alpha = pi/2`` is half the sphere (``I_1 = 1``
    gives ``g(pi/2) = 1``). Both forms agree for ``k = 1`` (``pi/2``) and,
    by accident, for ``n = 2`` (``pi / (k + 1)``, ``t`` linear in
    ``alpha``), but not otherwise: for ``n = 3`` (``t = 1 - cos(alpha)``)
    and ``k = 2`` the printed form gives ``pi - 2 = 1.142`` and the corrected
    one ``3 pi / 8 = 1.178``, the Monte Carlo value of the definition.
    ``as_printed=True`` evaluates the printed formula.

    Args:
      n: dimension (>= 2). k: number of adversarial perturbations (>= 1).

    Returns:
      the expectation in radians (float).
    """
    from scipy import integrate, special

    n, k = _check_nk(n, k)
    if n < 2:
        raise ValueError(f"n: expected a dimension >= 2, got {n}")
    half = 1.0 if as_printed else 0.5

    def integrand(a):
        t = half * special.betainc((n - 1) / 2.0, 0.5, math.sin(a) ** 2)
        return (1.0 - t) ** k + t ** k

    # The integrand changes fastest where t ~ 1/k; give quad breakpoints.
    pts = sorted({min(max(p, 1e-9), math.pi / 2 - 1e-9) for p in np.linspace(0, math.pi / 2, 9)[1:-1]})
    val, _ = integrate.quad(integrand, 0.0, math.pi / 2, points=pts, limit=400,
                            epsabs=1e-11, epsrel=1e-10)
    return float(val)


def expected_linf_sparsity(n: int, k: int) -> float:
    """Eq. 9: ``E[AS] = sum_{m=0}^{n} (1 - 2^{-m})^k`` for ``k`` uniform vertices of ``{-1,1}^n``.

    ``P(AS > m) = (1 - 2^{m-n})^k`` (``Delta^m`` holds ``2^m`` of the ``2^n``
    vertices) and ``E[AS] = sum_{m=0}^{n-1} P(AS > m)``, which is eq. 9 (its
    ``m = 0`` term is 0).
    """
    n, k = _check_nk(n, k)
    m = np.arange(1, n + 1, dtype=np.float64)
    return float(np.sum(np.exp(k * np.log1p(-np.exp2(-m)))))


def linf_sparsity_bounds(n: int, k: int) -> Tuple[float, float]:
    """Eq. 10: ``(n - log2 k) / 4 <= E[AS] <= n - log2 k + e / (e - 1)``.

    Valid for ``1 <= k <= 2^n`` (at most as many perturbations as vertices;
    the proof splits the sum of eq. 9 at ``floor(log2 k) <= n``). For larger
    ``k`` the upper bound can be negative while ``E[AS] > 0``, so it raises.
    """
    n, k = _check_nk(n, k)
    if n < 63 and k > 2 ** n:
        raise ValueError(f"k: eq. 10 holds for 1 <= k <= 2^n = {2 ** n}, got {k}")
    lk = math.log2(k)
    return (n - lk) / 4.0, n - lk + math.e / (math.e - 1.0)
