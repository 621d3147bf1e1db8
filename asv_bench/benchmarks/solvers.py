"""The iterative solvers and the kernel-product engine they run on (issue 19).

* ``ExactPCG``: ``fit_exact(solver="pcg")`` against ``solver="direct"`` on a fixed
  12 000-point subsample of kin40k split 0 (sigma 1.41, lam 1e-2, rank-1000 block-RPCholesky
  preconditioner, tol 1e-3), the kernel recomputed at every iteration (``max_memory`` below
  the 1.15 GB of K).  The whole-set numbers are in experiments/compare_solvers.py.
* ``NystromPCG``: ``fit_nystrom(solver="pcg")`` (FALKON) on all 36 000 points, sigma 2,
  lam 1e-3, M = 2048 and 4096 uniform centres, tol 1e-3, in double and in mixed precision
  (``precision="double"`` pinned: the default ``"auto"`` runs these mixed); the direct
  ``fit_nystrom`` beside it.
* ``KernelEngine``: one Gaussian product K(X, Z) u and one K^T (K u) (FALKON's per-iteration
  pass) for X (36 000, 8) and Z (4096, 8), with 1 and 2 threads; ``track_ns_per_entry``
  states the products in nanoseconds per kernel entry (the target is <= 0.6 on 2 threads);
  K^T (K u) in float32 beside it.
* ``TriangularSolve`` and ``CholeskyPair``: FALKON's dense M x M pieces at M = 8192 / 4096
  (the solve also from a float32 triangle in double arithmetic, mixed FALKON's).
* ``SymmetricEigen``: the polled symmetric eigendecomposition beside LAPACK's drivers.
"""
import time

import numpy as np

import hkern
from hkern import _linalg
from hkern.kernels import kernel_kind
from hkern.kernels._api import _kernel_matvec_trusted, _kernel_normal_times_trusted

from .common import Quick, SlowFit, grid, kin40k, model_rmse

SEED = 0
EXACT_N, EXACT_SIGMA, EXACT_LAM, EXACT_RANK = 12_000, 1.41, 1e-2, 1000
NYSTROM_SIGMA, NYSTROM_LAM = 2.0, 1e-3
TOL = 1e-3
RECOMPUTE = 10**9      # below the 8 n^2 = 1.15 GB of the subsample's K: PCG recomputes it


def exact_data():
    X, y, Xt, yt = kin40k()
    idx = np.sort(np.random.default_rng(SEED).choice(X.shape[0], EXACT_N, replace=False))
    return X[idx], y[idx], Xt, yt


def fit_exact_pcg(X, y):
    return hkern.fit_exact(X, y, sigma=EXACT_SIGMA, lam=EXACT_LAM, solver="pcg", r=EXACT_RANK,
                           tol=TOL, seed=SEED, max_memory=RECOMPUTE)


def fit_exact_cholesky(X, y):
    return hkern.fit_exact(X, y, sigma=EXACT_SIGMA, lam=EXACT_LAM)


class ExactPCG(SlowFit):
    """Exact KRR by PCG (recomputed K) and by Cholesky on 12 000 kin40k points."""

    def setup_cache(self):
        X, y, Xt, yt = data = exact_data()
        return {"data": data, "pcg": fit_exact_pcg(X, y), "cholesky": fit_exact_cholesky(X, y)}

    setup_cache.timeout = 300

    def setup(self, cache):
        self.X, self.y, self.Xt, self.yt = cache["data"]

    def time_fit_pcg(self, cache):
        fit_exact_pcg(self.X, self.y)

    def peakmem_fit_pcg(self, cache):
        fit_exact_pcg(self.X, self.y)

    def time_fit_cholesky(self, cache):
        fit_exact_cholesky(self.X, self.y)

    def track_test_rmse_pcg(self, cache):
        return model_rmse(cache["pcg"], self.Xt, self.yt)

    def track_test_rmse_cholesky(self, cache):
        return model_rmse(cache["cholesky"], self.Xt, self.yt)

    def track_iterations_pcg(self, cache):
        return cache["pcg"].n_iter_

    track_test_rmse_pcg.unit = track_test_rmse_cholesky.unit = "RMSE"
    track_iterations_pcg.unit = "iterations"


def fit_falkon(X, y, m, precision="double"):
    return hkern.fit_nystrom(X, y, r=m, sigma=NYSTROM_SIGMA, lam=NYSTROM_LAM, seed=SEED,
                             solver="pcg", tol=TOL, precision=precision)


def fit_nystrom_direct(X, y, m):
    return hkern.fit_nystrom(X, y, r=m, sigma=NYSTROM_SIGMA, lam=NYSTROM_LAM, seed=SEED)


class NystromPCG(SlowFit):
    """FALKON (fit_nystrom solver='pcg') and the direct Nystrom fit on all of kin40k."""

    params = grid([2048, 4096])
    param_names = ["M"]

    def setup_cache(self):
        X, y, Xt, yt = data = kin40k()
        return {"data": data, "pcg": {m: fit_falkon(X, y, m) for m in self.params},
                "mixed": {m: fit_falkon(X, y, m, "mixed") for m in self.params}}

    setup_cache.timeout = 300

    def setup(self, cache, m):
        self.X, self.y, self.Xt, self.yt = cache["data"]

    def time_fit_pcg(self, cache, m):
        fit_falkon(self.X, self.y, m)

    def peakmem_fit_pcg(self, cache, m):
        fit_falkon(self.X, self.y, m)

    def time_fit_direct(self, cache, m):
        fit_nystrom_direct(self.X, self.y, m)

    def time_fit_pcg_mixed(self, cache, m):
        fit_falkon(self.X, self.y, m, "mixed")

    def peakmem_fit_pcg_mixed(self, cache, m):
        fit_falkon(self.X, self.y, m, "mixed")

    def track_test_rmse_pcg(self, cache, m):
        return model_rmse(cache["pcg"][m], self.Xt, self.yt)

    def track_test_rmse_pcg_mixed(self, cache, m):
        return model_rmse(cache["mixed"][m], self.Xt, self.yt)

    def track_iterations_pcg(self, cache, m):
        return cache["pcg"][m].n_iter_

    track_test_rmse_pcg.unit = "RMSE"
    track_test_rmse_pcg_mixed.unit = "RMSE"
    track_iterations_pcg.unit = "iterations"


class KernelEngine(Quick):
    """K u and K^T (K u) for the Gaussian kernel, X (36 000, 8), Z (4096, 8)."""

    params = grid([1, 2])
    param_names = ["n_jobs"]
    n, m = 36_000, 4096

    def setup(self, n_jobs):
        rng = np.random.default_rng(SEED)
        self.X = rng.standard_normal((self.n, 8))
        self.Z = rng.standard_normal((self.m, 8))
        self.u = rng.standard_normal((self.m, 1))
        self.X32, self.Z32 = self.X.astype(np.float32), self.Z.astype(np.float32)
        self.kind = kernel_kind("gaussian")[1]
        self.matvec()        # the engine's buffers and the output pages, touched once
        self.normal(n_jobs)

    def matvec(self, n_jobs=1):
        return _kernel_matvec_trusted(self.kind, 2.0, self.X, self.Z, self.u, n_jobs)

    def normal(self, n_jobs):
        return _kernel_normal_times_trusted(self.kind, 2.0, self.X, self.Z, self.u, None,
                                            n_jobs)

    def time_matvec(self, n_jobs):
        self.matvec(n_jobs)

    def time_normal_times(self, n_jobs):
        self.normal(n_jobs)

    def time_normal_times_float32(self, n_jobs):
        _kernel_normal_times_trusted(self.kind, 2.0, self.X32, self.Z32, self.u, None, n_jobs)

    def track_ns_per_entry_normal_times(self, n_jobs):
        times = []
        for _ in range(3):
            started = time.perf_counter()
            self.normal(n_jobs)
            times.append(time.perf_counter() - started)
        return 1e9 * float(np.median(times)) / (self.n * self.m)

    track_ns_per_entry_normal_times.unit = "ns"


class TriangularSolve(Quick):
    """One right-hand side against an 8192 x 8192 triangle (FALKON's four solves per
    iteration), each orientation, 1 and 2 threads."""

    params = grid(([1, 2], [False, True]))
    param_names = ["n_jobs", "trans"]
    m = 8192

    def setup(self, n_jobs, trans):
        rng = np.random.default_rng(SEED)
        self.T = np.triu(rng.standard_normal((self.m, self.m))) + self.m * np.eye(self.m)
        self.T32 = self.T.astype(np.float32)
        self.diagonal = self.T.diagonal().copy()
        self.b = rng.standard_normal(self.m)

    def time_solve_upper(self, n_jobs, trans):
        _linalg.solve_triangular(self.T, self.b, lower=False, trans=trans, n_threads=n_jobs)

    def time_solve_upper_mixed(self, n_jobs, trans):
        """The float32 triangle in double arithmetic (mixed-precision FALKON's solves)."""
        _linalg.solve_triangular_mixed(self.T32, self.b, self.diagonal, lower=False,
                                       trans=trans, n_threads=n_jobs)


class CholeskyPair(SlowFit):
    """FALKON's two factors of a 4096 x 4096 kernel matrix in its own memory."""

    params = grid([1, 2])
    param_names = ["n_jobs"]
    m = 4096

    def setup(self, n_jobs):
        Z = np.random.default_rng(SEED).standard_normal((self.m, 8))
        self.W = hkern.kernel_matrix(Z, sigma=2.0)
        self.W.flat[:: self.m + 1] += 1e-6          # FALKON's jitter, safely above rounding
        self.A = np.empty_like(self.W)
        np.copyto(self.A, self.W)
        if _linalg.cholesky_pair(self.A, 9.0, 1e-3, n_jobs) is None:
            raise RuntimeError("the benchmark's W does not factorise")

    def time_cholesky_pair(self, n_jobs):
        np.copyto(self.A, self.W)
        _linalg.cholesky_pair(self.A, 9.0, 1e-3, n_jobs)


class SymmetricEigen(SlowFit):
    """The eigenpairs of a 2000 x 2000 Gaussian kernel matrix of kin40k points (MEKA's and
    the ridge selection's eigendecomposition): hkern's ``_linalg.eigh`` (LAPACK's dsyevd
    through hkern's row-major shim) beside dsyevd through SciPy, on one and two threads, and
    the top 16 pairs (dsyevr) beside SciPy's."""

    m = 2000
    params = [1, 2]
    param_names = ["n_threads"]

    def setup(self, n_threads):
        self.W = hkern.kernel_matrix(kin40k()[0][:self.m], sigma=1.41)

    def time_eigh_hkern(self, n_threads):
        _linalg.eigh(self.W, n_threads=n_threads)

    def time_eigh_lapack_dsyevd(self, n_threads):
        from scipy.linalg import eigh
        from threadpoolctl import threadpool_limits
        with threadpool_limits(n_threads):
            eigh(self.W, driver="evd")

    def time_eigh_top16_hkern(self, n_threads):
        _linalg.eigh(self.W, subset=(self.m - 16, self.m - 1), n_threads=n_threads)

    def time_eigh_top16_lapack_dsyevr(self, n_threads):
        from scipy.linalg import eigh
        from threadpoolctl import threadpool_limits
        with threadpool_limits(n_threads):
            eigh(self.W, driver="evr", subset_by_index=(self.m - 16, self.m - 1))
