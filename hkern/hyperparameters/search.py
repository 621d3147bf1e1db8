"""A derivative-free search for few, expensive evaluations: one parabolic line search per
coordinate in log space.

The criteria it maximises (a method's profiled log marginal likelihood, a hold-out error) cost a
whole fit per evaluation and are smooth and, in each coordinate near the optimum, close to a
parabola in log lam and log sigma.  So each coordinate gets a bracket from three points (moving,
further each time, while the edge is best and the parabola through them peaks beyond it, at most
``max_moves`` times) and one evaluation at the vertex of the parabola through the best point and
its neighbours.  With two coordinates that
is 5 to 10 evaluations.
"""
from __future__ import annotations

import math

import numpy as np

from .._targets import on_grid

__all__ = ["best_of_origins", "coordinate_search"]


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


def _parabola_at(xs, fs, x):
    """The value at x of the parabola through three points (Lagrange's form)."""
    (x0, x1, x2), (f0, f1, f2) = xs, fs
    return (f0 * (x - x1) * (x - x2) / ((x0 - x1) * (x0 - x2))
            + f1 * (x - x0) * (x - x2) / ((x1 - x0) * (x1 - x2))
            + f2 * (x - x0) * (x - x1) / ((x2 - x0) * (x2 - x1)))


def coordinate_search(evaluate, start, plan, *, max_moves=3, grow=2.0, min_gain=0.0,
                      min_vertex_move=0.1, vertex_grid=None):
    """Maximise ``evaluate`` over a few log-space coordinates, one coordinate at a time.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(point)`` -> criterion value (larger is better; -inf for a failed fit) for a
        point (tuple of floats).  The search remembers every value, so each point is evaluated
        once.
    start : sequence of float
        The starting point.
    plan : sequence of (axis, step) or (axis, step, -1)
        The line searches, in order: coordinate ``axis`` is searched from the best point so
        far, first at +-``step`` (an axis may come back, with a smaller step).  With ``-1`` the
        optimum is expected below the start: -``step`` is evaluated first and, if it is better,
        +``step`` is not evaluated (one fit fewer when the guess is right, none more when not).
    max_moves : int
        Most moves a line search makes while the best point is at the edge of its bracket and
        the parabola through the bracket does not peak inside it; each moves ``grow`` times
        further than the one before (a start far from the optimum, like a bandwidth from a
        small subsample, is reached in few evaluations).
    grow : float >= 1
    min_gain : float >= 0
        A vertex whose parabola promises less than ``min_gain * |best value|`` over the best
        point is not evaluated either (a criterion measured to about that precision, each
        evaluation a whole fit).
    min_vertex_move : float >= 0
        Nor a vertex within this fraction of a step of the best point.
    vertex_grid : float > 0 or None
        A vertex's distance from the best point of its bracket is rounded to a multiple of
        this (a criterion that is not continuous in the coordinates: the vertex, which moves
        continuously with the values, then stays on the same point for values that differ
        by rounding).

    Returns
    -------
    best : tuple
        The best point evaluated.
    value : float
        Its criterion value.
    open_ends : dict
        axis -> -1 or +1 for each coordinate whose last line search ended with the criterion
        still rising towards that side: its moves ran out with the bracket's edge best and no
        vertex inside, so the best value is at the edge of the range searched.
    """
    values = {}
    open_ends = {}

    def value_at(point):
        point = tuple(float(v) for v in point)
        if point not in values:
            values[point] = evaluate(point)
        return values[point]

    best = tuple(float(v) for v in start)
    value_at(best)
    for axis, step, *first in plan:
        def at(x):
            out = list(best)
            out[axis] = x
            return tuple(out)

        centre = best[axis]
        triple = [centre - step, centre, centre + step]
        if first and first[0] == -1 and value_at(at(triple[0])) > value_at(best):
            # The expected side is better: the search moves on from it without evaluating the
            # other side (-inf stands for it; the first move replaces it).
            f = [value_at(at(triple[0])), value_at(best), -np.inf]
        else:
            f = [value_at(at(x)) for x in triple]
        reach = step
        open_ends.pop(axis, None)
        for _ in range(max_moves + 1):
            if f[1] >= max(f[0], f[2]):
                break
            # An edge is best, but a concave parabola may still peak inside the bracket
            # (between the centre and that edge): its vertex, evaluated below, is the next point.
            vertex = _vertex(triple, f) if np.all(np.isfinite(f)) else None
            if vertex is not None and triple[0] < vertex < triple[2]:
                break
            if _ == max_moves:          # the moves ran out with the edge still best
                open_ends[axis] = -1 if f[0] > f[2] else 1
                break
            # Keep the better edge and the centre as two points of the next bracket.
            reach *= grow
            if f[0] > f[2]:
                triple = [triple[0] - reach, triple[0], triple[1]]
                f = [value_at(at(triple[0])), f[0], f[1]]
            else:
                triple = [triple[1], triple[2], triple[2] + reach]
                f = [f[1], f[2], value_at(at(triple[2]))]
        i = int(np.argmax(f))
        best = at(triple[i])
        vertex = _vertex(triple, f) if np.all(np.isfinite(f)) else None
        if vertex is not None:      # at most one step beyond the bracket
            vertex = min(max(vertex, triple[0] - step), triple[2] + step)
            if vertex_grid is not None:
                vertex = triple[i] + float(on_grid(vertex - triple[i], vertex_grid))
        if vertex is not None and abs(vertex - triple[i]) > min_vertex_move * step and \
                _parabola_at(triple, f, vertex) - f[i] >= min_gain * abs(f[i]):
            candidate = at(vertex)
            if value_at(candidate) > value_at(best):
                best = candidate
    return best, values[best], open_ends


def best_of_origins(record, origins, values, index, search, keep_per_feature=None):
    """(best point, its open ends): ``search(origin, lam0)`` (a coordinate search from each
    origin, returning (best, value, open_ends)) from every origin in turn, the better end
    point by the criterion kept (the first, per-feature one on a tie).  With two origins the
    record notes where the isotropic candidates start (``isotropic_from``), and when the
    per-feature end wins, ``keep_per_feature(per_feature, isotropic)`` (two Candidates) may
    still give the isotropic end the choice by returning False (:mod:`.leave_one_out`)."""
    ends = []
    for o, (_, lam0, _) in enumerate(origins):
        if o == 1:
            record.isotropic_from = len(record.candidates)
        best, _, open_ends = search(o, lam0)
        ends.append((values[index[best]], -o, best, open_ends))
    _, o, best, open_ends = max(ends, key=lambda end: end[:2])
    if len(ends) == 2 and o == 0 and keep_per_feature is not None and math.isfinite(ends[1][0]) \
            and not keep_per_feature(*(record.candidates[index[end[2]]] for end in ends)):
        _, _, best, open_ends = ends[1]
    # The points' first coordinate is the origin: the searched axes count from 1.
    return best, {axis - 1: side for axis, side in open_ends.items()}
