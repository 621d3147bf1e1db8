"""The kernel ridge system matrix A = K(X, X) + lam I as an operator for iterative solvers.

Two forms with one meaning: the kernel matrix stored once (8 n^2 bytes; each product a tiled
GEMM), or recomputed at every product by the fused kernel-product engine (one cache-sized tile
per thread; each product costs the kernel evaluations again), for data whose kernel matrix does
not fit in memory.

The rows of the product are computed a segment at a time (stored) or by the engine's row tiles
(recomputed), and the columns are summed in blocks of COLUMN_BLOCK, added in order
(:mod:`hkern._row_span`): so a process holding some of the rows, and receiving the columns a
block at a time, computes its rows of K V bit for bit as one process computes all of them
(fit_exact(solver="pcg", comm=...), :mod:`hkern.exact.sharded`).
"""
from __future__ import annotations

import numpy as np

from .. import _linalg
from .._linalg.segments import rows_times
from .._row_span import SEGMENT_ROWS, RowSpan
from .._threads import blas_threads
from ..kernels._api import _common_shift, _kernel_matrix_raw, _kernel_matvec_raw, _single_operand

__all__ = ["COLUMN_BLOCK", "KernelSystem", "SerialRows", "kernel_cross", "single_times"]

# Columns of K summed at a time: 16 of the float32 engine's 256-column tiles, its flush span
# (hk_gaussian_times_f32), so that blocks add its float sums as one call over all columns does.
COLUMN_BLOCK = 4096
# Rows, evenly spread over the n, whose mean is the shift of the data far from the origin
# (hkern.kernels._api._centred_for_accuracy): the same rows wherever the rows live.
_CENTRE_ROWS = 1024
# Columns of a stored K computed at a time (a multiple of the engine's 256-column tile).
_STORED_COLUMNS = 1024


class SerialRows:
    """The rows of a kernel system on one process: all of X (the interface that
    :class:`hkern.exact.sharded.ShardedRows` gives a rank's share of them).

    Attributes
    ----------
    X : ndarray (n, d)
        The rows held here (float64, scaled).
    span : hkern._row_span.RowSpan
    """

    def __init__(self, X):
        self.X = X
        self.span = RowSpan(X.shape[0])

    def rows_at(self, rows):
        """X at global rows ``rows`` (sorted), on every process."""
        return np.ascontiguousarray(self.X[rows])

    def column_blocks(self, X_held):
        """(start, rows) of every COLUMN_BLOCK rows of the array whose rows held here are
        ``X_held`` (X shifted, or in float32), in order."""
        for a in range(0, X_held.shape[0], COLUMN_BLOCK):
            yield a, X_held[a:a + COLUMN_BLOCK]

    def all_agree(self, flag):
        """Whether ``flag`` holds on every process."""
        return bool(flag)


def system_centre(kind, rows):
    """The shift of the data far from the origin (None near it), from _CENTRE_ROWS rows evenly
    spread over the n, gathered from wherever they live (``rows``: :class:`SerialRows` or a
    rank's share)."""
    n = rows.span.n
    sample = np.unique(np.linspace(0, n - 1, min(n, _CENTRE_ROWS)).astype(np.int64))
    centre, _ = _common_shift(kind, rows.rows_at(sample).astype(np.float64))
    return centre


def single_times(A, V, *, trans_a=False, alpha=1.0, n_threads=1):
    """alpha op(A) V for a float32 matrix A and a float64 V, in single precision (sgemm) with a
    float64 result: V is scaled by a power of two into float32's range first (exact), so any
    finite V is used at float32's relative precision (the mixed-precision operators)."""
    V32, scale = _single_operand(np.ascontiguousarray(V, dtype=np.float64))
    out = _linalg.matmul(A, V32, trans_a=trans_a, alpha=alpha, n_threads=n_threads)
    out = out.astype(np.float64)
    if scale != 1.0:
        out *= scale
    return out


class KernelSystem:
    """V -> (K + lam I) V for the kernel matrix K of X (C-contiguous, already scaled).

    With X float32 the kernel is computed in single precision (stored: 4 n^2
    bytes, each product an sgemm; recomputed: the float32 engine) and V, the sums and the
    result are float64: the mixed-precision operator of fit_exact(precision="mixed").

    Parameters
    ----------
    kind : int
        The kernel engine's code.
    bandwidth : float
    X : ndarray (n, d), float64 or float32
        The rows held here (all of them on one process).
    lam : float
    stored : bool
        Keep K (8 n^2 bytes) instead of recomputing it at every product.
    n_threads : int
    rows : SerialRows or hkern.solvers.sharded_pcg.ShardedKernelRows, optional
        Where the rows live, in float64 (the data's shift is taken from them):
        :class:`SerialRows` of X by default.  V and the result are always all n rows.
    """

    def __init__(self, kind, bandwidth, X, lam, *, stored, n_threads=1, rows=None):
        self.kind, self.bandwidth, self.lam = kind, bandwidth, float(lam)
        self.n_threads = n_threads
        self.rows = SerialRows(X) if rows is None else rows
        centre = system_centre(kind, self.rows)
        # A float32 X (the mixed operator; the user's own float32 X, not copied, near the
        # origin) is shifted in float64 and rounded after.
        held = X if centre is None else (X.astype(np.float64) - centre).astype(X.dtype)
        self.X = np.ascontiguousarray(held)
        self.K = self._kernel_rows() if stored else None

    @property
    def stored(self):
        return self.K is not None

    def _kernel_rows(self):
        """The rows of K held here, _STORED_COLUMNS columns at a time (one buffer for all)."""
        m = self.X.shape[0]
        K = np.empty((m, self.rows.span.n), dtype=self.X.dtype)
        buffer = np.empty((m, _STORED_COLUMNS), dtype=self.X.dtype)
        for a, block in self.rows.column_blocks(self.X):
            for c in range(0, block.shape[0], _STORED_COLUMNS):
                part = np.ascontiguousarray(block[c:c + _STORED_COLUMNS])
                w = part.shape[0]
                out = buffer if w == _STORED_COLUMNS else None
                K[:, a + c:a + c + w] = _kernel_matrix_raw(self.kind, self.bandwidth, self.X,
                                                           part, self.n_threads, out=out)
        return K

    def __call__(self, V):
        V = np.ascontiguousarray(V, dtype=np.float64)
        span = self.rows.span
        if self.K is not None:
            with blas_threads(1):
                local = rows_times(self.K, V, 1.0, SEGMENT_ROWS, self.n_threads)
        else:
            local = None
            for a, block in self.rows.column_blocks(self.X):
                if not self.X.shape[0]:
                    continue                # a rank without rows takes part in the gathers
                part = _kernel_matvec_raw(self.kind, self.bandwidth, self.X, block,
                                          V[a:a + block.shape[0]], self.n_threads)
                if local is None:
                    local = part
                else:
                    local += part
            if local is None:
                local = np.zeros((self.X.shape[0], V.shape[1]))
        out = span.all_rows(local)
        out += self.lam * V
        return out


def kernel_cross(kind, bandwidth, X_new, rows, V, n_threads=1):
    """K(X_new, X) V in float64 for the scaled rows X that ``rows`` holds (:class:`SerialRows`,
    or a rank's share) and V of all n rows, summed as :class:`KernelSystem` sums K V: the same
    shift of the data and blocks of columns, so that every rank, given the same X_new and V,
    computes the serial numbers (a selection's hold-out scores)."""
    centre = system_centre(kind, rows)
    held = rows.X if centre is None else rows.X - centre
    X_new = np.ascontiguousarray(X_new if centre is None else X_new - centre, dtype=np.float64)
    V = np.ascontiguousarray(V, dtype=np.float64)
    out = np.zeros((X_new.shape[0], V.shape[1]))
    for a, block in rows.column_blocks(np.ascontiguousarray(held)):
        if X_new.shape[0]:
            out += _kernel_matvec_raw(kind, bandwidth, X_new, block, V[a:a + block.shape[0]],
                                      n_threads)
    return out
