"""The candidate set S and its columns, shared by SLKL and its baselines (Unif, KRRM)."""
from __future__ import annotations

import numpy as np

from .._validation import check_rank

__all__ = ["draw_candidates"]


def draw_candidates(n, n_candidates, rng, candidates=None):
    """Sorted indices of S: M rows drawn uniformly without replacement, or the given rows.

    The same seed gives the same S in fit_slkl, fit_slkl_unif and fit_slkl_krrm, so the
    baselines of the paper's Table 2 see the candidates SLKL saw.
    """
    if candidates is None:
        M = check_rank(n_candidates, n, "n_candidates")
        if M == n:
            return np.arange(n, dtype=np.intp)
        return np.sort(rng.choice(n, size=M, replace=False)).astype(np.intp)
    idx = np.asarray(candidates)
    if idx.ndim != 1 or idx.size == 0 or idx.dtype.kind not in "iu":
        raise ValueError("candidates must be a non-empty 1-D array of integer row indices of X; "
                         f"got {idx.dtype} array of shape {idx.shape}")
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"candidates must index rows of X: values in [0, {n}), got "
                         f"[{idx.min()}, {idx.max()}]")
    if len(np.unique(idx)) != len(idx):
        raise ValueError("candidates contains repeated indices; each must be distinct")
    return np.sort(idx).astype(np.intp)
