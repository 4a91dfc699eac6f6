"""Plots: valid PNGs with the expected panels, lines, bands and step data."""
import numpy as np
import pytest
from matplotlib.collections import PolyCollection

from rcurves.curves import robustness_curve
from rcurves.plotting import plot_curve_grid, plot_curves, plot_step_curves, step_curve

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _is_png(path):
    data = path.read_bytes()
    return len(data) > 1000 and data[:8] == PNG_MAGIC


def test_plot_curves_panels_lines_thresholds_bands(tmp_path):
    eps = np.linspace(0, 1, 11)
    curves = {
        "ST": {"linf": (eps, eps), "l2": (eps, eps ** 2)},
        "AT": {"linf": (eps, eps ** 3)},  # no l2 curve for this model
    }
    path = tmp_path / "sub" / "curves.png"
    fig = plot_curves(curves, str(path), thresholds={"linf": [0.1, 0.3]}, n_points=100, title="t")
    assert _is_png(path)
    assert [ax.get_title() for ax in fig.axes] == ["linf", "l2"]
    linf, l2 = fig.axes
    assert len(linf.lines) == 2 + 2 and len(l2.lines) == 1  # models + threshold lines
    dashed = [ln for ln in linf.lines if ln.get_linestyle() == "--"]
    assert sorted(ln.get_xdata()[0] for ln in dashed) == [0.1, 0.3]
    assert sum(isinstance(c, PolyCollection) for c in linf.collections) == 2  # one DKW band per model
    np.testing.assert_allclose(linf.lines[1].get_ydata(), eps ** 3)
    # same model, same color in every panel
    assert linf.lines[0].get_color() == l2.lines[0].get_color() != linf.lines[1].get_color()


def test_plot_curves_without_path_writes_nothing_and_no_bands(tmp_path):
    eps = np.linspace(0, 1, 5)
    fig = plot_curves({"A": {"l2": (eps, eps)}})
    assert len(fig.axes) == 1 and len(fig.axes[0].lines) == 1 and not fig.axes[0].collections
    assert list(tmp_path.iterdir()) == []


def test_plot_step_curves_draws_exact_step_functions(tmp_path):
    d = {"m1": {"l2": np.array([0.0, 1.0, 2.0, np.inf], np.float32), "linf": np.array([0.5, 0.5, 1.0, 3.0])},
         "m2": {"l2": np.array([0.5, 1.5, 1.5, 2.5], np.float32), "linf": np.array([1.0, 2.0, 2.0, 2.0])}}
    path = tmp_path / "steps.png"
    fig = plot_step_curves(d, str(path), thresholds={"l2": [1.0]}, dkw_alpha=0.05)
    assert _is_png(path)
    assert len(fig.axes) == 2
    l2 = fig.axes[0]
    assert len(l2.lines) == 3 and all(ln.get_drawstyle() == "steps-post" for ln in l2.lines[:2])
    x, y = l2.lines[0].get_xdata(), l2.lines[0].get_ydata()
    np.testing.assert_allclose(x, [0.0, 1.0, 2.0, 2.5 * 1.05])
    np.testing.assert_allclose(y, [0.25, 0.5, 0.75, 0.75])
    # drawn steps-post, the polyline is the exact curve: compare on a fine grid
    grid = np.linspace(0, x[-1], 200)
    drawn = y[np.searchsorted(x, grid, side="right") - 1]
    np.testing.assert_allclose(drawn, np.asarray(robustness_curve(d["m1"]["l2"], grid)), atol=1e-7)


def test_step_curve_starts_at_zero_and_honours_eps_max():
    x, y = step_curve(np.array([1.0, 2.0, 3.0]), eps_max=2.5)
    np.testing.assert_allclose(x, [0.0, 1.0, 2.0, 2.5])
    np.testing.assert_allclose(y, [0.0, 1 / 3, 2 / 3, 2 / 3])


def test_plot_curve_grid_rows_and_panels(tmp_path):
    eps = np.linspace(0, 1, 4)
    grid = {r: {k: {"l1": (eps, eps), "l2": (eps, eps), "linf": (eps, eps)} for k in ("margin", "robustness")}
            for r in ("a", "b", "c")}
    fig = plot_curve_grid(grid, step=True)
    assert len(fig.axes) == 6 and all(len(ax.lines) == 3 for ax in fig.axes)
    assert fig.axes[1].get_title() == "a: robustness"


def test_bad_input():
    eps = np.linspace(0, 1, 4)
    with pytest.raises(ValueError, match="^curves:"):
        plot_curves({"A": {"l2": (eps, eps[:2])}})
    with pytest.raises(ValueError, match="^curves:"):
        plot_curves({})
    with pytest.raises(ValueError, match="^distances:"):
        plot_step_curves({"A": {"l2": np.array([np.nan])}})
