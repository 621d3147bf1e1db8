"""A derivative-free search for few, expensive evaluations: one parabolic line search per
coordinate in log space.

The criteria it maximises (a method's profiled log marginal likelihood, a hold-out error) cost a
whole fit per evaluation and are smooth and, in each coordinate near the optimum, close to a
parabola in log lam and log sigma.  So each coordinate gets a bracket from three points (moving
by whole steps while the edge is best, at most ``max_moves`` times) and one evaluation at the
vertex of the parabola through the best point and its neighbours.  With two coordinates that is
about 7 evaluations, within the issue's budget of ten fits.
"""
from __future__ import annotations

import numpy as np

__all__ = ["coordinate_search"]


def _vertex(xs, fs):
    """Abscissa of the maximum of the parabola through three points, or None if it is not
    concave there."""
    (x0, x1, x2), (f0, f1, f2) = xs, fs
    den = (x1 - x0) * (f1 - f2) - (x1 - x2) * (f1 - f0)
    if den == 0:
        return None
    num = (x1 - x0) ** 2 * (f1 - f2) - (x1 - x2) ** 2 * (f1 - f0)
    curvature = (f2 - f1) / (x2 - x1) - (f1 - f0) / (x1 - x0)
    return None if curvature >= 0 else x1 - 0.5 * num / den


def coordinate_search(evaluate, start, plan, *, max_moves=3):
    """Maximise ``evaluate`` over a few log-space coordinates, one coordinate at a time.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(point)`` -> criterion value (larger is better; -inf for a failed fit) for a
        point (tuple of floats).  The search remembers every value, so each point is evaluated
        once.
    start : sequence of float
        The starting point.
    plan : sequence of (axis, step)
        The line searches, in order: coordinate ``axis`` is searched with steps ``step`` from
        the best point so far (an axis may come back, with a smaller step).
    max_moves : int
        Most whole steps a line search moves while the best point is at the edge of its bracket.
        A vertex within a tenth of a step of the best point is not evaluated.

    Returns
    -------
    best : tuple
        The best point evaluated.
    value : float
        Its criterion value.
    """
    values = {}

    def value_at(point):
        point = tuple(float(v) for v in point)
        if point not in values:
            values[point] = evaluate(point)
        return values[point]

    best = tuple(float(v) for v in start)
    value_at(best)
    for axis, step in plan:
        def moved(point, offset):
            out = list(point)
            out[axis] += offset
            return tuple(out)

        centre = best
        for move in range(max_moves + 1):
            below, above = moved(centre, -step), moved(centre, step)
            f = [value_at(below), value_at(centre), value_at(above)]
            if f[1] >= max(f[0], f[2]) or move == max_moves:
                break
            centre = below if f[0] > f[2] else above
        xs = (centre[axis] - step, centre[axis], centre[axis] + step)
        best = max((below, centre, above), key=value_at)
        vertex = _vertex(xs, f) if np.all(np.isfinite(f)) else None
        if vertex is not None:      # at most one step beyond the bracket
            vertex = min(max(vertex, xs[0] - step), xs[2] + step)
        if vertex is not None and abs(vertex - best[axis]) > step / 10:
            candidate = moved(best, vertex - best[axis])
            if value_at(candidate) > value_at(best):
                best = candidate
    return best, values[best]
