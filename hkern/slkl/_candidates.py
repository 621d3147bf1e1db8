"""The candidate set S and its columns, shared by SLKL and its baselines (Unif, KRRM)."""
from __future__ import annotations

import numpy as np

from .._validation import check_rank, check_row_indices

__all__ = ["draw_candidates"]


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
