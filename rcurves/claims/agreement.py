"""Which of two models agrees more with a reference classifier, and McNemar's exact test.

002 Tables 1-2: on the test points where a standard model (ST) and an
adversarially trained model (AT) predict differently, the proportion of those
points on which each agrees with the 1-NN classifier, and a two-sided
McNemar test of the difference (002 cites McNemar 1947; significance 0.01).

With paired outcomes ``a_i = [pred_a(x_i) = ref(x_i)]`` and ``b_i = [pred_b(x_i)
= ref(x_i)]``, McNemar's exact test uses only the discordant pairs:
``n01 = #{a_i = 0, b_i = 1}``, ``n10 = #{a_i = 1, b_i = 0}``; under the null
``n10 ~ Binomial(n01 + n10, 1/2)`` and the two-sided p-value is
``min(1, 2 P(X <= min(n01, n10)))``. Where ``pred_a != pred_b`` both cannot agree
with the reference, so on that set the proportions are ``n10 / m`` and
``n01 / m`` (m its size) and the test is the same whether it is run on all
points or on the disagreements only.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

import numpy as np
import scipy.stats


def mcnemar_exact(n01: int, n10: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts.

    ``min(1, 2 * BinomCDF(min(n01, n10); n01 + n10, 1/2))``; 1.0 when there are
    no discordant pairs. Equal to ``scipy.stats.binomtest(n10, n01 + n10,
    0.5).pvalue`` (two-sided; the binomial is symmetric at 1/2).
    """
    for v, name in ((n01, "n01"), (n10, "n10")):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name}: expected a count >= 0, got {v!r}")
    n = int(n01) + int(n10)
    if n == 0:
        return 1.0
    k = min(int(n01), int(n10))
    return float(min(1.0, 2.0 * scipy.stats.binom.cdf(k, n, 0.5)))


class Agreement(NamedTuple):
    """002 Table 1/2 entry for one (model A, model B, reference) triple.

    ``n``: points compared (after ``mask``); ``differ``: points where A and B
    predict differently; ``prop_a``, ``prop_b``: on those, the fraction where A
    (B) agrees with the reference (NaN if ``differ == 0``); ``n10`` (A agrees, B
    not), ``n01`` (B agrees, A not): McNemar's discordant counts; ``pvalue``:
    :func:`mcnemar_exact`.
    """

    n: int
    differ: int
    prop_a: float
    prop_b: float
    n10: int
    n01: int
    pvalue: float


def agreement_with_reference(pred_a: Any, pred_b: Any, pred_ref: Any, mask: Optional[Any] = None) -> Agreement:
    """How often models A and B agree with a reference where they disagree with each other.

    Args:
      pred_a, pred_b, pred_ref: ``(n,)`` integer predictions (e.g. ST, AT, 1-NN).
      mask: optional ``(n,)`` bool, the points to use (e.g. no 1-NN tie).

    Returns:
      :class:`Agreement`.
    """
    a, b, r = (np.asarray(v) for v in (pred_a, pred_b, pred_ref))
    if a.ndim != 1 or a.shape != b.shape or a.shape != r.shape:
        raise ValueError(f"pred_a, pred_b, pred_ref: expected equal 1-D shapes, got {a.shape}, {b.shape}, {r.shape}")
    m = np.ones(a.shape, bool) if mask is None else np.asarray(mask)
    if m.shape != a.shape or m.dtype != np.bool_:
        raise ValueError(f"mask: expected a boolean array of shape {a.shape}")
    a, b, r = a[m], b[m], r[m]
    ok_a, ok_b = a == r, b == r
    differ = a != b
    n10 = int((ok_a & ~ok_b).sum())
    n01 = int((~ok_a & ok_b).sum())
    k = int(differ.sum())
    prop_a = float(ok_a[differ].mean()) if k else float("nan")
    prop_b = float(ok_b[differ].mean()) if k else float("nan")
    return Agreement(int(m.sum()), k, prop_a, prop_b, n10, n01, mcnemar_exact(n01, n10))


__all__ = [
    "Agreement",
    "agreement_with_reference",
    "mcnemar_exact",
]
