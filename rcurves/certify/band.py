"""The band between two robustness curves that provably contains the true one.

An attack's distance ``u_i`` is an upper bound on point ``i``'s minimal
adversarial distance ``d_i`` (an adversarial was found there), a certified
radius ``l_i`` a lower bound (``l_i <= d_i <= u_i``). Since the robustness
curve ``R(eps) = P(d <= eps)`` is monotone in the distances,

    R_u(eps) = P(u <= eps)  <=  R(eps)  <=  P(l <= eps) = R_l(eps)    for every eps,

so the attack's curve is the band's lower edge and the certified curve its
upper edge (paper 000 section 3.1 draws only the lower one). The band's area
``int (R_l - R_u) d eps`` over ``[eps_0, eps_m]`` equals the mean over points
of ``clip(u_i) - clip(l_i)`` (clipped to that range): the average width of
each point's bracket, in units of eps.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from rcurves.curves import _check_distances, _check_thresholds, robustness_curve
from attacks.precision import exact_precision

#: Relative gap under which a point's bracket counts as closed (the issue's 1%).
MEET_RTOL = 0.01


def _pair(upper: Any, lower: Any):
    u = _check_distances(upper, "upper")
    l = _check_distances(lower, "lower")
    if u.shape != l.shape:
        raise ValueError(f"lower: expected shape {tuple(u.shape)} to match upper, got {tuple(l.shape)}")
    ua, la = np.asarray(u, np.float64), np.asarray(l, np.float64)
    bad = la > ua * (1 + 1e-5) + 1e-7
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"lower: a lower bound exceeds its upper bound at point {i} ({la[i]} > {ua[i]}); "
            "an attack's distance and a certified radius of the same point cannot cross"
        )
    return u, l


def robustness_band(upper: Any, lower: Any, eps: Any) -> Tuple[jax.Array, jax.Array]:
    """The two robustness curves that bracket the true one.

    Args:
      upper: ``(n,)`` upper bounds on the distances (an attack's, ``inf`` where
        it found nothing; 0 for misclassified points).
      lower: ``(n,)`` lower bounds (certified radii, or MILP lower bounds).
      eps: thresholds (scalar or ``(m,)``).

    Returns:
      ``(curve_upper, curve_lower)``: ``P(lower <= eps)`` and ``P(upper <= eps)``,
      so that ``curve_lower <= true curve <= curve_upper`` at every ``eps``.

    Raises:
      ValueError: bad distances or thresholds, or ``lower > upper`` somewhere.
    """
    u, l = _pair(upper, lower)
    e = _check_thresholds(eps)
    return robustness_curve(l, e), robustness_curve(u, e)


class BandSummary(NamedTuple):
    """How wide the band is.

    Attributes:
      area: ``int (curve_upper - curve_lower) d eps`` over ``[eps_min, eps_max]``
        (exact for step curves: the mean clipped bracket width).
      met: fraction of points whose bracket is closed within ``MEET_RTOL``
        (``upper - lower <= 0.01 upper``; both 0 for misclassified points).
      median_ratio: median of ``upper / lower`` over points with
        ``0 < upper < inf`` (``inf`` where ``lower = 0``).
      max_gap: largest ``curve_upper - curve_lower`` over ``eps``.
      n: number of points.
    """

    area: float
    met: float
    median_ratio: float
    max_gap: float
    n: int


def band_summary(upper: Any, lower: Any, eps: Any) -> BandSummary:
    """Area, closed fraction and median ratio of the band (see :class:`BandSummary`)."""
    u, l = _pair(upper, lower)
    e = _check_thresholds(eps)
    ua, la = np.asarray(u, np.float64), np.asarray(l, np.float64)
    ea = np.atleast_1d(np.asarray(e, np.float64))
    lo_e, hi_e = float(ea.min()), float(ea.max())
    area = float(np.mean(np.clip(ua, lo_e, hi_e) - np.clip(la, lo_e, hi_e)))
    with np.errstate(invalid="ignore", divide="ignore"):
        met = np.where(np.isinf(ua), np.isinf(la), (ua - la) <= MEET_RTOL * ua)
        keep = (ua > 0) & np.isfinite(ua)
        ratio = np.where(la[keep] > 0, ua[keep] / np.where(la[keep] > 0, la[keep], 1.0), np.inf)
    median = float(np.median(ratio)) if ratio.size else float("nan")
    cu, cl = robustness_curve(l, e), robustness_curve(u, e)
    gap = float(np.max(np.asarray(cu) - np.asarray(cl))) if np.size(cu) else 0.0
    return BandSummary(area, float(np.mean(met)), median, gap, int(ua.size))


class ModelBand(NamedTuple):
    """What ``rcurves curves --certify`` draws for one model.

    ``radius`` (n,) certified radii; ``eps`` (m,) thresholds; ``curve_upper``
    and ``curve_lower`` the band's edges (``curve_lower`` is the attack's
    curve); ``summary`` a :class:`BandSummary`; ``method`` the bound used;
    ``upper`` (n,) the attack's distances the band was made with.
    """

    radius: jax.Array
    eps: jax.Array
    curve_upper: jax.Array
    curve_lower: jax.Array
    summary: BandSummary
    method: str
    upper: jax.Array


@exact_precision
def band_for_model(model_cfg, params, x: Any, y: Any, attack_distance: Any, norm: str, *,
                   method: str = "crown", bounds: Optional[Tuple[float, float]] = (0.0, 1.0),
                   eps: Optional[Any] = None, search_steps: Optional[int] = None) -> ModelBand:
    """Certified radii of a toolkit model and the band they make with an attack's distances.

    Args:
      model_cfg, params: an ``rcurves.models.ModelConfig`` and its parameters
        (linear, mlp or cnn; e.g. ``zoo.load(name).model`` and ``.params``).
      x, y: the points and labels the attack ran on.
      attack_distance: ``(n,)`` the attack's distances on them (upper bounds).
      norm: the attack's norm.
      method: the bound (``certify.METHODS``) or 'bab' (branch and bound).
      eps: thresholds of the curves; default 200 points from 0 to the largest
        finite attack distance.

    Returns:
      :class:`ModelBand`.
    """
    from rcurves.certify.convert import from_model
    from rcurves.certify.radius import certified_radius

    net = from_model(model_cfg, params)
    u = _check_distances(attack_distance, "attack_distance")
    radius = certified_radius(net, x, y, norm=norm, method=method, bounds=bounds, upper=u,
                              search_steps=search_steps)
    radius = jnp.minimum(radius, u)  # never above an adversarial actually found
    if eps is None:
        ua = np.asarray(u)
        top = float(ua[np.isfinite(ua)].max()) if np.isfinite(ua).any() else 1.0
        eps = np.linspace(0.0, top if top > 0 else 1.0, 200, dtype=np.float32)
    e = _check_thresholds(eps)
    cu, cl = robustness_band(u, radius, e)
    return ModelBand(radius, e, cu, cl, band_summary(u, radius, e), method, u)


@exact_precision
def evaluation_bands(ev, models, x: Any, y: Any, *, method: str = "crown",
                     bounds: Optional[Tuple[float, float]] = (0.0, 1.0), norms=None,
                     points: Optional[Any] = None) -> dict:
    """The band of every toolkit model of an evaluation: ``{label: {norm: ModelBand}}``.

    Args:
      ev: an ``rcurves.pipeline.evaluation.Evaluation`` (its attack distances are the
        upper bounds).
      models: ``{label: LoadedModel}`` (``rcurves.models.load``); models without a
        toolkit config (a bare ``logits_fn``) have no network to bound and are
        left out.
      x, y: the evaluation's points ``(n, ...)`` and labels ``(n,)``.
      method: the bound (``certify.METHODS``) or 'bab'.
      norms: the norms to bound (default all of the evaluation's).
      points: optional indices into the points: bound only these (the band is
        then over this subset; its attack curve too, so both edges are over
        the same points).
    """
    idx = np.arange(np.shape(y)[0]) if points is None else np.asarray(points, np.int64)
    xs, ys = np.asarray(x)[idx], np.asarray(y)[idx]
    out = {}
    for label, m in models.items():
        if getattr(m, "model", None) is None:
            continue
        out[label] = {}
        for norm in (norms or ev.norms):
            u = ev.distance(label, norm)[idx]
            out[label][norm] = band_for_model(m.model, m.params, xs, ys, u, norm, method=method, bounds=bounds)
    return out


def save_bands(bands: dict, out_dir: str, title: str, *, points: Optional[Any] = None,
               method: str = "crown", description: str = "") -> list:
    """Write the bands of :func:`evaluation_bands`: ``band.json`` (per model and
    norm the radii, the attack's distances, the summary, both curves on the
    thresholds; ``null`` for inf, as in ``curves.json``), ``band.csv``
    (``model, norm, eps, attack_curve, certified_curve``: the lower and the
    upper edge of the band) and ``band.png``, each written atomically.
    Returns the paths."""
    import csv
    import io
    import os

    from rcurves.plotting import plot_bands
    from rcurves.files import json_float, json_list, write_json, write_text

    os.makedirs(out_dir, exist_ok=True)
    doc = {"method": method, "points": None if points is None else [int(i) for i in points],
           "description": description, "models": {}}
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["model", "norm", "eps", "attack_curve", "certified_curve"])
    for label, per in bands.items():
        doc["models"][label] = {}
        for norm, b in per.items():
            s = b.summary
            doc["models"][label][norm] = {
                "radius": json_list(b.radius), "attack": json_list(b.upper), "eps": json_list(b.eps),
                "attack_curve": json_list(b.curve_lower), "certified_curve": json_list(b.curve_upper),
                "summary": {"area": s.area, "met": s.met, "median_ratio": json_float(s.median_ratio),
                            "max_gap": s.max_gap, "n": s.n}}
            for e, cl, cu in zip(np.asarray(b.eps), np.asarray(b.curve_lower), np.asarray(b.curve_upper)):
                w.writerow([label, norm, f"{float(e):.6g}", f"{float(cl):.6g}", f"{float(cu):.6g}"])
    paths = [os.path.join(out_dir, f) for f in ("band.json", "band.csv", "band.png")]
    write_json(paths[0], doc)
    write_text(paths[1], buf.getvalue())
    plot_bands({k: {n: (np.asarray(b.upper), np.asarray(b.radius)) for n, b in per.items()}
                for k, per in bands.items()}, paths[2], title=title)
    return paths


def band_lines(bands: dict, method: str) -> list:
    """The band's table for a terminal: per model and norm the median ratio, closed share, area."""
    lines = [f"Certified band ({method}): the true curve lies between the attack's curve and the certified one",
             "model             norm  median attack/certified  met within 1%  band area"]
    for label, per in bands.items():
        for norm, b in per.items():
            s = b.summary
            lines.append(f"{label:<17} {norm:<5} {s.median_ratio:>23.3f}  {s.met:>12.1%}  {s.area:>9.4g}")
    return lines


__all__ = ["BandSummary", "MEET_RTOL", "ModelBand", "band_for_model", "band_lines", "band_summary",
           "evaluation_bands", "robustness_band", "save_bands"]
