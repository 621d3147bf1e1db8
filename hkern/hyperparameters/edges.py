"""The warning of a selection that ended at the edge of what it searched: its criterion was
still improving there, so the chosen value is where the search stopped, not an optimum."""
from __future__ import annotations

from .._model import format_sigma
from .._validation import warn_user

__all__ = ["SelectionWarning", "warn_at_edges"]


class SelectionWarning(UserWarning):
    """A hyperparameter selection chose a value at the edge of the range it searched, with its
    criterion still improving beyond it (``sigma="auto"``/``"ard"``, ``lam="auto"``)."""


# What each edge usually means, and the way out (axis 0: the bandwidth's scale, 1: lam).
_ADVICE = {
    (1, -1): "exact duplicate rows with equal targets, or targets without noise, do this (the "
             "model then interpolates them); remove the duplicate rows, or pass a number for lam",
    (1, 1): "the targets look like noise to this kernel; check them against X, or pass a "
            "number for lam",
    (0, -1): "the inputs may be on very different scales, or hold duplicates; standardise X, or "
             "pass numbers for sigma and lam",
    (0, 1): "the targets may hardly depend on X; check them, or pass numbers for sigma and lam",
}


def warn_at_edges(label, open_ends, chosen, criterion, lam_range=None):
    """Warn (:class:`SelectionWarning`) for each coordinate whose search ended at an edge.

    Parameters
    ----------
    label : str
        The fit's name, for the message.
    open_ends : dict
        axis -> side, from :func:`hkern.hyperparameters.search.coordinate_search` (0: the
        bandwidth's scale, 1: lam).
    chosen : Candidate
        The chosen values.
    criterion : str
        "likelihood" or "holdout".
    lam_range : (float, float) or None
        The interval of a ridge the fit profiles itself: its bounds are edges too.
    """
    sides = dict(open_ends)
    if lam_range is not None and chosen.lam <= lam_range[0] * (1 + 1e-9):
        sides[1] = -1
    elif lam_range is not None and chosen.lam >= lam_range[1] * (1 - 1e-9):
        sides[1] = 1
    for axis, side in sorted(sides.items()):
        name, value = (("sigma", format_sigma(chosen.sigma)) if axis == 0
                       else ("lam", f"{chosen.lam:.3g}"))
        where = "smallest" if side < 0 else "largest"
        warn_user(f"{label}: the selection chose {name}={value}, the {where} value it "
                  f"searched, with its {criterion} criterion still improving beyond it, so "
                  f"{name} is where the search stopped rather than an optimum: "
                  f"{_ADVICE[axis, side]}", SelectionWarning)
