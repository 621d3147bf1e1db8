"""hkern.plotting: the frontier's points from its definition, and the three plots' contents."""
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from hkern.plotting import frontier, plot_calibration, plot_frontier, plot_scaling  # noqa: E402


def test_frontier_keeps_each_point_no_faster_point_beats():
    points = [("a", 10.0, 0.2), ("b", 1.0, 0.5), ("c", 5.0, 0.6), ("d", 20.0, 0.1),
              ("e", 1.0, 0.4), ("f", 30.0, 0.1)]
    assert frontier(points) == [("e", 1.0, 0.4), ("a", 10.0, 0.2), ("d", 20.0, 0.1)]
    assert frontier([]) == []


def test_plot_frontier_draws_every_point_and_the_frontier():
    points = [("hck", 12.2, 0.163), ("nystrom", 1.8, 0.339), ("rff", 1.4, 0.385),
              ("meka", 58.0, 0.21)]
    ax = plot_frontier(points, title="kin40k")
    assert ax.get_xscale() == "log" and ax.get_title() == "kin40k"
    assert sorted(t.get_text() for t in ax.texts) == ["hck", "meka", "nystrom", "rff"]
    step = [line for line in ax.get_lines() if line.get_label() == "frontier"][0]
    np.testing.assert_array_equal(step.get_xdata(), [1.4, 1.8, 12.2])


def test_plot_scaling_and_its_linear_guides():
    ax = plot_scaling({"hck": ([1e3, 1e4, 1e5], [0.1, 1.0, 12.0])})
    data, guide = ax.get_lines()
    np.testing.assert_allclose(guide.get_ydata(), [0.1, 1.0, 10.0])
    assert ax.get_xscale() == ax.get_yscale() == "log"


def test_plot_calibration_against_the_diagonal():
    ax = plot_calibration([0.5, 0.9, 0.95], {"exact": [0.52, 0.9, 0.949]})
    diagonal, line = ax.get_lines()
    np.testing.assert_array_equal(line.get_ydata(), [0.52, 0.9, 0.949])
    assert ax.get_xlim()[0] == pytest.approx(0.45)
