"""The kernel ridge system matrix A = K(X, X) + lam I as an operator for iterative solvers.

Two forms with one meaning: the kernel matrix stored once (8 n^2 bytes; each product a tiled
GEMM), or recomputed at every product by the fused kernel-product engine (one cache-sized tile
per thread; each product costs the kernel evaluations again), for data whose kernel matrix does
not fit in memory.
"""
from __future__ import annotations

import numpy as np

from .. import _linalg
from ..kernels._api import _kernel_matrix_trusted, _kernel_matvec_trusted, _single_operand

__all__ = ["KernelSystem", "single_times"]


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

    With X float32 the kernel is computed in single precision (stored: 4 n^2 bytes, each
    product an sgemm; recomputed: the float32 engine) and V, the sums and the result are
    float64: the mixed-precision operator of fit_exact(precision="mixed").

    Parameters
    ----------
    kind : int
        The kernel engine's code.
    bandwidth : float
    X : ndarray (n, d), float64 or float32
    lam : float
    stored : bool
        Keep K (8 n^2 bytes) instead of recomputing it at every product.
    n_threads : int
    """

    def __init__(self, kind, bandwidth, X, lam, *, stored, n_threads=1):
        self.kind, self.bandwidth, self.X, self.lam = kind, bandwidth, X, float(lam)
        self.n_threads = n_threads
        self.K = _kernel_matrix_trusted(kind, bandwidth, X, X, n_threads) if stored else None

    @property
    def stored(self):
        return self.K is not None

    def __call__(self, V):
        V = np.ascontiguousarray(V)
        if self.K is not None and self.K.dtype == np.float32:
            out = single_times(self.K, V, n_threads=self.n_threads)
        elif self.K is not None:
            out = _linalg.matmul(self.K, V, n_threads=self.n_threads)
        else:
            out = _kernel_matvec_trusted(self.kind, self.bandwidth, self.X, self.X, V,
                                         self.n_threads)
        out += self.lam * V
        return out
