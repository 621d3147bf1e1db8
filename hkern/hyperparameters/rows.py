"""The rows a hyperparameter selection reads: arrays in this process, or MPI shards.

The selection (:mod:`hkern.hyperparameters.select`, :mod:`hkern.hyperparameters.iterative`)
reads the data itself in three places only: the robust feature statistics, the check that the
targets vary, and the rows of its random subsamples.  Everything else it asks of the fit.  So
one interface, :class:`SelectionRows`, lets the same selection run serially (:class:`LocalRows`)
and on data sharded over MPI ranks (:class:`ShardedRows`): there every rank reads the same
global rows, in the same order, as the serial selection of the concatenated shards, and so makes
the same choice.
"""
from __future__ import annotations

import numpy as np

from .._sharded import gather_rows, sum_over_ranks, total_of
from .._targets import encode_targets, squares_sums, target_scale
from .._validation import check_array
from .robust import check_targets_vary, feature_scales, statistics_rows

__all__ = ["SelectionRows", "LocalRows", "ShardedRows"]


class SelectionRows:
    """What the selection reads of the data (checked X, encoded Y).

    Attributes
    ----------
    n, d : int
        Rows and features of all the data.

    Methods
    -------
    rows(indices) -> (X_rows, Y_rows)
        The rows at global ``indices`` (any order, no repeats), in that order.
    scales() -> hkern.hyperparameters.robust.FeatureScales
    check_targets(task)
        :func:`hkern.hyperparameters.robust.check_targets_vary` on all the targets.
    target_scale() -> float
        The root mean square of all the encoded targets (:func:`hkern._targets.target_scale`).
    """


class LocalRows(SelectionRows):
    """All the rows, in this process."""

    def __init__(self, X, Y):
        self.X, self.Y = X, Y
        self.n, self.d = X.shape

    @classmethod
    def of(cls, arguments):
        """The checked X and encoded (centred) y of a fit's ``arguments``."""
        X = check_array(arguments["X"], "X", keep_float32=True)   # the fits widen their rows
        Y, _ = encode_targets(arguments["y"], X.shape[0], arguments["task"])
        return cls(X, Y)

    def rows(self, indices):
        return self.X[indices], self.Y[indices]

    def scales(self):
        return feature_scales(self.X)

    def check_targets(self, task):
        check_targets_vary(self.Y, task)

    def target_scale(self):
        return target_scale(self.Y)


class ShardedRows(SelectionRows):
    """Rows sharded over MPI ranks (hkern._sharded): every method is a collective, and returns
    the same on every rank.

    Parameters
    ----------
    state : hkern._mpi.RankState
    offsets : ndarray (size + 1,)
        Rank p holds the global rows offsets[p]:offsets[p + 1].
    X, Y : ndarray
        This rank's checked rows and encoded targets.
    """

    def __init__(self, state, offsets, X, Y):
        self.state, self.offsets, self.X, self.Y = state, offsets, X, Y
        self.n, self.d = int(offsets[-1]), X.shape[1]

    def rows(self, indices):
        indices = np.asarray(indices, dtype=np.int64)
        order = np.argsort(indices, kind="stable")
        both = gather_rows(self.state, self.offsets, np.hstack([self.X, self.Y]),
                           indices[order])
        out = np.empty_like(both)
        out[order] = both
        return np.ascontiguousarray(out[:, :self.d]), np.ascontiguousarray(out[:, self.d:])

    def scales(self):
        # The serial statistics read every step-th row; the same rows, gathered, give the
        # same numbers bit for bit.
        X, _ = self.rows(statistics_rows(self.n))
        return feature_scales(X)

    def check_targets(self, task):
        # A column is zero everywhere when it is zero on every rank: the check on one row per
        # column, 1 where any rank has a nonzero value, is the check on all the targets.
        nonzero = sum_over_ranks(self.state, lambda: np.any(self.Y != 0.0, axis=0)
                                 .astype(float))
        check_targets_vary(nonzero[None, :], task)

    def target_scale(self):
        largest = max(self.state.agree(float(np.max(np.abs(self.Y))) if self.Y.size else 0.0))
        if largest == 0:
            return 1.0
        # Exact sums of each rank's squares: the serial sum's bits (hkern._targets).
        total = total_of(self.state.agree(self.state.run(squares_sums, self.Y, largest)))
        return target_scale(None, largest, float(total.sum()[0]), total.count)
