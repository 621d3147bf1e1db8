"""Plots of what hkern measures: error against fit time (the frontier), fit time against n, and
the calibration of predictive intervals.  matplotlib is an optional extra
(``pip install "hkern[plot]"``); every function takes an ``ax`` to draw into (a new figure
when None) and returns it.

Examples
--------
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> from hkern.plotting import plot_frontier
>>> ax = plot_frontier([("hck", 12.2, 0.163), ("nystrom", 1.8, 0.339), ("rff", 1.4, 0.385)])
>>> ax.get_xscale()
'log'
"""
from __future__ import annotations

import numpy as np

__all__ = ["frontier", "plot_calibration", "plot_frontier", "plot_scaling"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("hkern.plotting needs matplotlib: pip install 'hkern[plot]' "
                          "(or pip install matplotlib)") from None
    return plt


def _axes(ax, figsize):
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=figsize)
    return ax


def frontier(points):
    """The points of ``(label, seconds, error)`` that no faster point beats: sorted by
    seconds, each more accurate than every faster one (ties in seconds: the more accurate
    first)."""
    best, kept = np.inf, []
    for label, seconds, error in sorted(points, key=lambda p: (p[1], p[2])):
        if error < best:
            best = error
            kept.append((label, seconds, error))
    return kept


def plot_frontier(points, ax=None, *, ylabel="test RMSE", title=None):
    """Error against fit time: every ``(label, seconds, error)`` as a labelled point, and the
    frontier (:func:`frontier`) as a line.  Log-scaled time.

    Parameters
    ----------
    points : iterable of (str, float, float)
    ax : matplotlib Axes or None
    ylabel, title : str
    """
    points = list(points)
    ax = _axes(ax, (5.5, 3.8))
    for label, seconds, error in points:
        ax.plot(seconds, error, "o", ms=5)
        ax.annotate(label, (seconds, error), textcoords="offset points", xytext=(4, 3),
                    fontsize=8)
    edge = frontier(points)
    if edge:
        ax.step([p[1] for p in edge], [p[2] for p in edge], where="post", color="0.4", lw=1,
                label="frontier")
        ax.legend(fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("fit seconds")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def plot_scaling(curves, ax=None, *, ylabel="fit seconds", title=None):
    """Fit time (or memory) against n for each method, log-log, with a dotted O(n) guide
    through each curve's first point.

    Parameters
    ----------
    curves : dict of str -> (sequence of n, sequence of values)
    """
    ax = _axes(ax, (5.5, 3.8))
    for label, (n, values) in curves.items():
        n, values = np.asarray(n, dtype=float), np.asarray(values, dtype=float)
        line, = ax.plot(n, values, "o-", ms=4, label=label)
        if len(n) > 1:
            ax.plot(n, values[0] * n / n[0], ":", color=line.get_color(), lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (training rows)")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def plot_calibration(levels, coverage, ax=None, *, title=None, colors=None, legend=True):
    """A reliability diagram: the share of test targets inside the central intervals against
    their nominal level, one line per fit, beside the diagonal of perfect calibration.

    Parameters
    ----------
    levels : sequence of float
        Nominal levels (0.5, 0.8, 0.9, 0.95, ...).
    coverage : dict of str -> sequence of float
        Each fit's coverage at ``levels``.
    colors : dict of str -> color, optional
        A colour per fit (the same fit alike on several panels).
    legend : bool
    """
    ax = _axes(ax, (3.6, 3.4))
    ax.plot([0, 1], [0, 1], color="0.7", lw=1)
    for label, values in coverage.items():
        ax.plot(levels, values, marker="o", ms=3, lw=1, label=label,
                color=None if colors is None else colors.get(label))
    low = min(min(levels), *(min(v) for v in coverage.values())) if coverage else 0.0
    ax.set_xlim(low - 0.05, 1.0)
    ax.set_ylim(low - 0.05, 1.0)
    ax.set_xlabel("nominal level")
    ax.set_ylabel("coverage")
    if legend:
        ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return ax
