"""Landmarks: the rows of X a Nystrom method builds on, given as row indices, drawn uniformly or
chosen by a column selector (:func:`hkern.select_columns`).

The Nystrom fits (:mod:`hkern.nystrom`, on one process and on MPI shards), the hyperparameter
selection of FALKON (:mod:`hkern.hyperparameters`) and the Nystrom estimators take their
landmarks from here, so that every Nystrom piece selects columns through this package.
"""
from __future__ import annotations

import numpy as np

from .._validation import check_rank, check_row_indices, scale_inputs
from .api import SELECTORS, _select_columns_trusted

__all__ = ["check_landmarks", "draw_landmarks", "landmark_rows", "uniform_landmarks"]


def check_landmarks(landmarks, r, n):
    """(landmarks, r) checked for n training points: a selector name and 1 <= r <= n, or
    validated row indices (sorted), whose number is then r."""
    if isinstance(landmarks, str):
        if landmarks not in SELECTORS:
            raise ValueError(f"landmarks must be one of {SELECTORS} or an array of row indices; "
                             f"got {landmarks!r}")
    else:
        landmarks = check_row_indices(landmarks, n, "landmarks")
        r = len(landmarks)                       # the given landmarks decide r
    return landmarks, check_rank(r, n, "r")


def uniform_landmarks(n, r, rng):
    """r of the n row indices drawn uniformly without replacement by ``rng``, sorted (also
    the draw of the sharded fit, from the global index range)."""
    return np.sort(rng.choice(n, size=r, replace=False))


def landmark_rows(landmarks, r, n, rng):
    """The sorted rows of the landmarks that need no kernel, for ``landmarks`` and ``r`` checked
    by :func:`check_landmarks` at n rows: the given rows, or r of the n drawn uniformly by
    ``rng``; None for an adaptive selector, which needs the data (:func:`draw_landmarks`, or
    oASIS-P on MPI shards)."""
    if not isinstance(landmarks, str):
        return landmarks
    if landmarks == "uniform":
        return uniform_landmarks(n, r, rng)
    return None


def draw_landmarks(X, r, landmarks, *, kind, bandwidth, rng, n_jobs, max_memory):
    """Sorted landmark rows of a fit's checked inputs X (divided by any lengthscales; ``kind``
    and ``bandwidth`` the kernel's engine code and bandwidth) for ``landmarks`` and ``r``
    checked by :func:`check_landmarks`: the given rows, r drawn uniformly without replacement
    by ``rng`` (a numpy Generator), or r chosen by an adaptive selector on these inputs (the
    selection of :func:`hkern.select_columns`, which does not check them again).  The same set
    as in selection order, in memory order (better locality, the same model)."""
    rows = landmark_rows(landmarks, r, X.shape[0], rng)
    if rows is not None:
        return rows
    # In float64 (a float32 X kept by FALKON is widened for the selection's kernel columns).
    selection = _select_columns_trusted(scale_inputs(X, None), r, landmarks, kind=kind,
                                        bandwidth=bandwidth, rng=rng, n_jobs=n_jobs,
                                        max_memory=max_memory)
    return np.sort(selection.indices_)
