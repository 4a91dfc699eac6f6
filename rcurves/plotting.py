"""Plots of robustness curves (PNG via matplotlib's Agg canvas, no LaTeX).

Figures are built with ``matplotlib.figure.Figure`` and an Agg canvas
directly, so no pyplot global state or GUI backend is involved; every
function returns the ``Figure`` (tests and callers can inspect its axes and
lines) and writes a PNG when ``path`` is given.

Layout: one panel per key of the inner mapping (usually a norm), one line per
key of the outer mapping (usually a model), as in Figures 2-3 of paper 000;
dashed black vertical lines mark point-wise thresholds (the threat models of
Table 1 of paper 000). Optional DKW bands (:func:`rcurves.curves.dkw_band`)
are drawn as shaded areas.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rcurves.curves import curve_points, dkw_band

Curve = Tuple[Any, Any]  # (eps (m,), values (m,))
_NORM_LABEL = {"linf": r"$\ell_\infty$", "l2": r"$\ell_2$", "l1": r"$\ell_1$"}
Grid = Mapping[str, Mapping[str, Mapping[str, Curve]]]  # row -> panel -> line -> curve


def _panel_order(curves: Mapping[str, Mapping[str, Any]]) -> list:
    """Inner keys in order of first appearance."""
    order: list = []
    for per_panel in curves.values():
        for key in per_panel:
            if key not in order:
                order.append(key)
    return order


def _band_n(n_points: Union[None, int, Mapping[str, int]], label: str) -> Optional[int]:
    if n_points is None:
        return None
    if isinstance(n_points, Mapping):
        return n_points.get(label)
    return int(n_points)


def _check_curve(eps: Any, values: Any, where: str) -> Tuple[np.ndarray, np.ndarray]:
    e = np.asarray(eps, dtype=np.float64).reshape(-1)
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if e.shape != v.shape:
        raise ValueError(f"curves: {where}: eps has shape {e.shape} but values {v.shape}")
    return e, v


def plot_curve_grid(
    grid: Grid,
    path: Optional[str] = None,
    *,
    thresholds: Optional[Mapping[str, Sequence[float]]] = None,
    n_points: Union[None, int, Mapping[str, int]] = None,
    alpha: float = 0.05,
    step: bool = False,
    title: Optional[str] = None,
    xlabel: str = "perturbation size eps",
    ylabel: str = "robust error",
    xscale: str = "linear",
    panel_size: Tuple[float, float] = (4.0, 3.0),
) -> Figure:
    """Curves on a grid of panels: ``grid[row][panel][line] = (eps, values)``.

    Args:
      grid: rows (e.g. settings), each mapping panel titles (e.g. norms or
        "robustness"/"margin") to lines ``{label: (eps, values)}``.
      path: PNG file to write (parent directories are created), or None.
      thresholds: ``{panel: [eps, ...]}``: dashed vertical lines in every row.
      n_points: sample size per line label (or one int for all) to draw DKW
        bands at level ``alpha``; None draws no bands.
      alpha: DKW miscoverage level.
      step: draw with ``drawstyle='steps-post'`` (exact step functions given
        their knots) instead of straight segments.
      title: figure title.
      xlabel, ylabel: axis labels.
      xscale: ``'linear'`` or ``'log'`` (for curves whose norms differ in scale
        by factors like sqrt(d); non-positive eps are then not drawn).
      panel_size: inches per panel.

    Returns:
      The ``Figure`` (``len(fig.axes)`` = rows x panels).
    """
    if not grid:
        raise ValueError("grid: expected at least one row of curves")
    if xscale not in ("linear", "log"):
        raise ValueError(f"xscale: expected 'linear' or 'log', got {xscale!r}")
    rows = list(grid)
    panels = _panel_order({r: grid[r] for r in rows})
    fig = Figure(figsize=(panel_size[0] * len(panels), panel_size[1] * len(rows)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(rows), len(panels), squeeze=False)
    colors: Dict[str, Any] = {}
    cycle = [c["color"] for c in matplotlib.rcParams["axes.prop_cycle"]]
    for i, row in enumerate(rows):
        for j, panel in enumerate(panels):
            ax = axes[i][j]
            lines = grid[row].get(panel, {})
            for label, (eps, values) in lines.items():
                e, v = _check_curve(eps, values, f"{row}/{panel}/{label}")
                color = colors.setdefault(label, cycle[len(colors) % len(cycle)])
                ax.plot(e, v, label=label, color=color, drawstyle="steps-post" if step else "default")
                n = _band_n(n_points, label)
                if n is not None:
                    lo, hi = dkw_band(v.astype(np.float32), n, alpha)
                    ax.fill_between(e, np.asarray(lo), np.asarray(hi), color=color, alpha=0.2,
                                    linewidth=0, step="post" if step else None)
            for t in (thresholds or {}).get(panel, ()):
                ax.axvline(float(t), color="black", linestyle="--", linewidth=0.8)
            ax.set_xscale(xscale)
            ax.set_ylim(-0.02, 1.02)
            ax.set_title(panel if len(rows) == 1 else f"{row}: {panel}")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            if lines:
                ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    if path is not None:
        _save(fig, path)
    return fig


def plot_curves(
    curves: Mapping[str, Mapping[str, Curve]],
    path: Optional[str] = None,
    *,
    thresholds: Optional[Mapping[str, Sequence[float]]] = None,
    n_points: Union[None, int, Mapping[str, int]] = None,
    alpha: float = 0.05,
    title: Optional[str] = None,
    step: bool = False,
) -> Figure:
    """Robustness curves of several models, one panel per norm.

    Args:
      curves: ``{model: {norm: (eps, values)}}``.
      path: PNG file to write, or None.
      thresholds: ``{norm: [eps, ...]}`` dashed vertical lines (point-wise measures).
      n_points: points per model (or one int) for DKW bands; None for no bands.
      alpha: DKW miscoverage level.
      title: figure title.
      step: draw as step functions (``steps-post``).

    Returns:
      The ``Figure``: one axis per norm, one line per model plus one per threshold.

    Examples:
      >>> import numpy as np
      >>> eps = np.linspace(0, 1, 5)
      >>> fig = plot_curves({"A": {"l2": (eps, eps), "linf": (eps, eps ** 2)}})
      >>> len(fig.axes)
      2
    """
    if not curves:
        raise ValueError("curves: expected at least one model")
    per_panel: Dict[str, Dict[str, Curve]] = {}
    for norm in _panel_order(curves):
        per_panel[norm] = {m: c[norm] for m, c in curves.items() if norm in c}
    return plot_curve_grid({"": per_panel}, path, thresholds=thresholds, n_points=n_points,
                           alpha=alpha, step=step, title=title)


def step_curve(distances: Any, eps_max: Optional[float] = None) -> Tuple[np.ndarray, np.ndarray]:
    """An exact robustness curve as ``(eps, values)`` for ``drawstyle='steps-post'``.

    The points are ``(0, R(0))``, every knot of
    :func:`rcurves.curves.curve_points` up to ``eps_max``, and ``(eps_max,
    R(eps_max))``; ``eps_max`` defaults to 1.05 x the largest finite distance
    (1 when there is none). Drawn with ``steps-post`` this is the exact curve.
    """
    knots, values = curve_points(distances)
    top = float(knots[-1]) * 1.05 if knots.size and knots[-1] > 0 else 1.0
    eps_max = top if eps_max is None else float(eps_max)
    keep = knots <= eps_max
    knots, values = knots[keep].astype(np.float64), values[keep]
    if not knots.size or knots[0] > 0:
        knots, values = np.concatenate([[0.0], knots]), np.concatenate([[0.0], values])
    last = values[-1]
    return np.concatenate([knots, [eps_max]]), np.concatenate([values, [last]])


def plot_step_curves(
    distances: Mapping[str, Mapping[str, Any]],
    path: Optional[str] = None,
    *,
    thresholds: Optional[Mapping[str, Sequence[float]]] = None,
    dkw_alpha: Optional[float] = None,
    eps_max: Optional[Mapping[str, float]] = None,
    title: Optional[str] = None,
) -> Figure:
    """Exact robustness curves from distances, drawn as step functions.

    Args:
      distances: ``{model: {norm: (n,) distances}}`` (0 = misclassified,
        inf = no adversarial found).
      path: PNG file to write, or None.
      thresholds: ``{norm: [eps, ...]}`` dashed vertical lines.
      dkw_alpha: draw DKW bands at this level (``n`` = number of distances), or None.
      eps_max: ``{norm: right end of the x axis}``; default: the largest
        finite distance over all models (x 1.05).
      title: figure title.

    Returns:
      The ``Figure``, as :func:`plot_curves`.
    """
    if not distances:
        raise ValueError("distances: expected at least one model")
    norms = _panel_order(distances)
    ends: Dict[str, float] = {}
    for norm in norms:
        finite = [np.asarray(d[norm], np.float64) for d in distances.values() if norm in d]
        finite = np.concatenate([f[np.isfinite(f)] for f in finite])
        default = float(finite.max()) * 1.05 if finite.size and finite.max() > 0 else 1.0
        ends[norm] = float((eps_max or {}).get(norm, default))
    curves = {m: {norm: step_curve(d, ends[norm]) for norm, d in per.items()} for m, per in distances.items()}
    n_points = None
    if dkw_alpha is not None:
        n_points = {}
        for m, per in distances.items():
            sizes = {np.asarray(d).shape[0] for d in per.values()}
            if len(sizes) != 1:
                raise ValueError(f"distances: model {m!r} has different numbers of points per norm {sorted(sizes)}")
            n_points[m] = sizes.pop()
    return plot_curves(curves, path, thresholds=thresholds, n_points=n_points,
                       alpha=0.05 if dkw_alpha is None else dkw_alpha, title=title, step=True)


def plot_bands(
    bands: Mapping[str, Mapping[str, Tuple[Any, Any]]],
    path: Optional[str] = None,
    *,
    eps_max: Optional[Mapping[str, float]] = None,
    title: Optional[str] = None,
) -> Figure:
    """Attack curves with the band that provably contains the true curve.

    Args:
      bands: ``{model: {norm: (upper (n,), lower (n,))}}``: per point an upper
        bound on the minimal distance (the attack's) and a lower bound (a
        certified radius). The attack's curve ``P(upper <= eps)`` is drawn
        solid, the certified curve ``P(lower <= eps)`` dashed, the band
        between them shaded: the true robustness curve lies inside it.
      path: PNG to write, or None.
      eps_max: ``{norm: right end of the x axis}``; default the largest finite
        attack distance (x 1.05).
      title: figure title.
    """
    if not bands:
        raise ValueError("bands: expected at least one model")
    norms = _panel_order(bands)
    fig = Figure(figsize=(5.2 * len(norms), 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(norms), squeeze=False)[0]
    for ax, norm in zip(axes, norms):
        ups = [np.asarray(b[norm][0], np.float64) for b in bands.values() if norm in b]
        fin = np.concatenate([u[np.isfinite(u)] for u in ups])
        end = float((eps_max or {}).get(norm, float(fin.max()) * 1.05 if fin.size and fin.max() > 0 else 1.0))
        for k, (model, per) in enumerate(bands.items()):
            if norm not in per:
                continue
            upper, lower = per[norm]
            color = f"C{k % 10}"
            e = np.linspace(0.0, end, 400)
            cu = np.mean(np.asarray(upper, np.float64)[None, :] <= e[:, None], axis=1)
            cl = np.mean(np.asarray(lower, np.float64)[None, :] <= e[:, None], axis=1)
            ax.fill_between(e, cu, cl, step="post", color=color, alpha=0.2, lw=0)
            ax.step(*step_curve(upper, end), where="post", color=color, label=f"{model}: attack")
            ax.step(*step_curve(lower, end), where="post", color=color, ls="--", lw=1.0,
                    label=f"{model}: certified")
        ax.set_xlim(0, end)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(f"{_NORM_LABEL.get(norm, norm)} eps")
        ax.set_ylabel("robust error")
        ax.set_title(f"{_NORM_LABEL.get(norm, norm)}: the true curve lies in the band")
        ax.legend(fontsize=7, loc="lower right")
    if title:
        fig.suptitle(title)
    if path is not None:
        _save(fig, path)
    return fig


def _save(fig: Figure, path: str) -> None:
    """Write the PNG atomically (temp file + rename)."""
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = path + ".tmp"
    fig.savefig(tmp, format="png", dpi=100)
    os.replace(tmp, path)


__all__ = [
    "plot_bands",
    "plot_curve_grid",
    "plot_curves",
    "plot_step_curves",
    "step_curve",
]
