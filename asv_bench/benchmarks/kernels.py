"""Kernel matrix evaluation: hkern.kernel_matrix against scikit-learn's rbf_kernel.

The shape mimics the inner loop of the approximate methods: many points (n_rows) against a
few hundred centres/landmarks (256), d = 8 as in kin40k.
"""
import numpy as np
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_limits

import hkern

from .common import Quick, grid

SIGMA = 2.0
N_FEATURES = 8
N_CENTERS = 256


def make_data(n_rows, rng=None):
    """Standard-normal X (n_rows, 8) and Y (256, 8) from ``rng`` (default: seed 0)."""
    rng = np.random.default_rng(0) if rng is None else rng
    return rng.standard_normal((n_rows, N_FEATURES)), rng.standard_normal((N_CENTERS, N_FEATURES))


def prefault(n_rows):
    """Touch (then free) an output-sized buffer.

    A fresh process pays page faults the first time it grows by the ~400 MB of a
    200_000 x 256 output (0.5 s on a small VM, more than the kernel evaluation itself); later
    allocations reuse those pages.  Doing it in setup makes every sample, including the single
    cold one of ``asv run --quick``, measure the steady state, for hkern and the peer alike.
    """
    np.ones((n_rows, N_CENTERS))


class _RowsThreads(Quick):
    params = grid(([20_000, 200_000], [1, 2]))
    param_names = ["n_rows", "n_jobs"]


class KernelMatrix(_RowsThreads):
    """Gaussian K(X, Y) for X (n_rows, 8), Y (256, 8), with n_jobs threads.

    ``time_sklearn_rbf_kernel`` is the peer: ``rbf_kernel(X, Y, gamma=1/(2 sigma^2))`` with
    its BLAS limited to the same ``n_jobs`` threads.
    """

    def setup(self, n_rows, n_jobs):
        self.X, self.Y = make_data(n_rows)
        prefault(n_rows)
        # For the scikit-learn peer (one BLAS GEMM): n_jobs BLAS threads.  hkern itself pins
        # BLAS to one thread inside its OpenMP tiles, so this does not change its timing.
        self._limits = threadpool_limits(limits=n_jobs, user_api="blas")

    def teardown(self, n_rows, n_jobs):
        self._limits.restore_original_limits()

    def time_kernel_matrix(self, n_rows, n_jobs):
        hkern.kernel_matrix(self.X, self.Y, kernel="gaussian", sigma=SIGMA, n_jobs=n_jobs)

    def time_sklearn_rbf_kernel(self, n_rows, n_jobs):
        rbf_kernel(self.X, self.Y, gamma=1.0 / (2.0 * SIGMA**2))

    def peakmem_kernel_matrix(self, n_rows, n_jobs):
        hkern.kernel_matrix(self.X, self.Y, kernel="gaussian", sigma=SIGMA, n_jobs=n_jobs)


class OtherKernels(Quick):
    """Every kernel family at one size (200_000 x 256, one thread); gaussian for reference."""

    params = grid(["gaussian", "laplace", "matern32"])
    param_names = ["kernel"]

    n_rows = 200_000

    def setup(self, kernel):
        self.X, self.Y = make_data(self.n_rows)
        prefault(self.n_rows)

    def time_kernel_matrix(self, kernel):
        hkern.kernel_matrix(self.X, self.Y, kernel=kernel, sigma=SIGMA, n_jobs=1)


class KernelMatvec(_RowsThreads):
    """K(X, Y) B without forming K (hkern.kernel_matvec): X (n_rows, 8), Y (256, 8), B (256,)."""

    def setup(self, n_rows, n_jobs):
        rng = np.random.default_rng(0)
        self.X, self.Y = make_data(n_rows, rng)
        self.B = rng.standard_normal(N_CENTERS)

    def time_kernel_matvec(self, n_rows, n_jobs):
        hkern.kernel_matvec(self.X, self.Y, self.B, sigma=SIGMA, n_jobs=n_jobs)

    def peakmem_kernel_matvec(self, n_rows, n_jobs):
        hkern.kernel_matvec(self.X, self.Y, self.B, sigma=SIGMA, n_jobs=n_jobs)


class KernelAccuracy:
    """Largest relative difference of hkern.kernel_matrix from the textbook formulas computed
    from differences (no GEMM cancellation), 2000 x 256: Gaussian exp(-||x - y||_2^2 / (2
    sigma^2)) and Laplace exp(-||x - y||_1 / sigma)."""

    params = grid(["gaussian", "laplace"])
    param_names = ["kernel"]

    def setup(self, kernel):
        self.X, self.Y = make_data(2000)
        diff = self.X[:, None, :] - self.Y[None, :, :]
        if kernel == "gaussian":
            self.K = np.exp(-0.5 * (diff**2).sum(-1) / SIGMA**2)
        else:
            self.K = np.exp(-np.abs(diff).sum(-1) / SIGMA)

    def track_max_relative_error(self, kernel):
        K = hkern.kernel_matrix(self.X, self.Y, kernel=kernel, sigma=SIGMA, n_jobs=1)
        return float(np.max(np.abs(K - self.K) / self.K))

    track_max_relative_error.unit = "relative error"
