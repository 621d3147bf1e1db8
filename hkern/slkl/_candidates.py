"""The candidate set S and its columns, shared by SLKL and its baselines (Unif, KRRM)."""
from __future__ import annotations

import numpy as np

from .._validation import check_rank, check_row_indices

__all__ = ["draw_candidates", "holdout_rows"]


def draw_candidates(n, r, rng, candidates=None):
    """Sorted indices of S: M rows drawn uniformly without replacement, or the given rows.

    The same seed gives the same S in fit_slkl, fit_slkl_unif and fit_slkl_krrm, so the
    baselines of the paper's Table 2 see the candidates SLKL saw.
    """
    if candidates is None:
        M = check_rank(r, n, "r")
        if M == n:
            return np.arange(n, dtype=np.intp)
        return np.sort(rng.choice(n, size=M, replace=False)).astype(np.intp)
    return check_row_indices(candidates, n, "candidates")


def holdout_rows(arguments, n, rows):
    """The arguments of a fit on the hold-out criterion's training part ``rows`` of the user's
    n rows (``sigma="auto"``, ``"ard"`` or ``lam="auto"``; see
    :func:`hkern.hyperparameters.select.selects_hyperparameters`).

    ``r`` is checked against n, with the message of a fit on all the data, and capped at
    ``len(rows)``: an r that all the data allow is allowed with selection, and a fit without the
    held-out fifth then takes min(r, its rows) candidates.  Given ``candidates`` (rows of the
    user's X) are checked against n and renumbered as rows of ``X[rows]``; those held out are
    not candidates of that fit.
    """
    m = len(rows)
    if arguments["candidates"] is None:
        return dict(arguments, r=min(check_rank(arguments["r"], n, "r"), m))
    S = check_row_indices(arguments["candidates"], n, "candidates")
    at = np.minimum(np.searchsorted(rows, S), m - 1)
    inside = rows[at] == S
    if not inside.any():
        raise ValueError(f"candidates: all {len(S)} given rows fell in the fifth of the data that "
                         "the hold-out criterion of sigma='auto'/'ard', lam='auto' holds out; "
                         "give more candidates, or numbers for sigma and lam")
    return dict(arguments, candidates=at[inside].astype(np.intp))
