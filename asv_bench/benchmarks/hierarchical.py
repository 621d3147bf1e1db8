"""HCK (hkern.fit_hierarchical) and the independent kernel: kin40k accuracy, speed, scaling.

kin40k split 0 standardised with training statistics; sigma = 1.5, lam = 0.01 (validation-tuned
for HCK, see experiments/compare_hierarchical.py), seed 0, every core.  The scaling benchmarks use
hkern.datasets.make_regression(n, d=8, seed=0) with r = 128.
"""
import time

import numpy as np
from hkern.hierarchical._hck import HCKOperator

import hkern
from hkern._threads import blas_threads, resolve_n_jobs
from hkern.datasets import make_regression
from hkern.hierarchical import _tree
from hkern.hierarchical.factor import build_tree

from .common import SlowFit, grid, kin40k, model_rmse

SIGMA = 1.5
LAM = 0.01
SEED = 0


class _SlowFit(SlowFit):
    repeat = (1, 3, 30.0)
    timeout = 300


class HierarchicalKin40k(_SlowFit):
    """fit_hierarchical on the 36000 kin40k training points."""

    params = grid([256, 512])
    param_names = ["r"]

    def setup(self, r):
        self.X_train, self.y_train, self.X_test, self.y_test = kin40k()
        self.model = hkern.fit_hierarchical(self.X_train, self.y_train, r=r, sigma=SIGMA,
                                            lam=LAM, seed=SEED)
        self.B = np.random.default_rng(0).standard_normal(len(self.y_train))

    def time_fit(self, r):
        hkern.fit_hierarchical(self.X_train, self.y_train, r=r, sigma=SIGMA, lam=LAM, seed=SEED)

    def peakmem_fit(self, r):
        hkern.fit_hierarchical(self.X_train, self.y_train, r=r, sigma=SIGMA, lam=LAM, seed=SEED)

    def time_predict(self, r):
        self.model.predict(self.X_test)

    def time_solve(self, r):
        self.model.solve(self.B)

    def time_matvec(self, r):
        self.model.matvec(self.B)

    def track_test_rmse(self, r):
        return model_rmse(self.model, self.X_test, self.y_test)

    track_test_rmse.unit = "RMSE"

    def track_model_mib(self, r):
        return self.model.nbytes / 2**20

    track_model_mib.unit = "MiB"


class IndependentKin40k(_SlowFit):
    """fit_independent (block-diagonal kernel on the same tree) on kin40k."""

    params = grid([256, 512])
    param_names = ["r"]

    def setup(self, r):
        self.X_train, self.y_train, self.X_test, self.y_test = kin40k()

    def time_fit(self, r):
        hkern.fit_independent(self.X_train, self.y_train, r=r, sigma=SIGMA, lam=LAM, seed=SEED)

    def track_test_rmse(self, r):
        model = hkern.fit_independent(self.X_train, self.y_train, r=r, sigma=SIGMA, lam=LAM,
                                      seed=SEED)
        return model_rmse(model, self.X_test, self.y_test)

    track_test_rmse.unit = "RMSE"


class HierarchicalScaling(_SlowFit):
    """Fit time and peak memory against n at r = 128 (n = 10^6: target <= 40 s and peak RSS
    <= 1.5 (4 n r + n d) 8 bytes = 5.81 GiB)."""

    params = grid([125_000, 1_000_000])
    param_names = ["n"]
    repeat = (1, 1, 60.0)

    def setup(self, n):
        self.X, self.y = make_regression(n, d=8, seed=0)

    def time_fit(self, n):
        hkern.fit_hierarchical(self.X, self.y, r=128, sigma=1.0, lam=LAM, seed=SEED)

    def peakmem_fit(self, n):
        hkern.fit_hierarchical(self.X, self.y, r=128, sigma=1.0, lam=LAM, seed=SEED)


class InversionRate(_SlowFit):
    """GFLOP/s of the HCK construction and of its inversion phase (BLAS/LAPACK flops only),
    n = 200000."""

    params = grid([128, 512])
    param_names = ["r"]

    def setup(self, r):
        X, _ = make_regression(200_000, d=8, seed=1)
        self.n_threads = resolve_n_jobs(None)
        self.X_tree, self.tree = build_tree(X, r, None, "random", np.random.default_rng(0),
                                             self.n_threads)
        depth = self.tree["depth"]
        uniforms = np.random.default_rng(1).random(((1 << depth) - 1, r))
        self.lm_off, self.lm = _tree.select_landmarks(self.tree["start"], self.tree["count"],
                                                      depth, r, uniforms, self.n_threads)

    def _build(self):
        with blas_threads(1):
            start = time.perf_counter()
            op = HCKOperator(self.X_tree, self.tree["depth"], self.tree["start"],
                             self.tree["count"], self.lm_off, self.lm, 0, 1.0, LAM, 1e-8,
                             self.n_threads)
            elapsed = time.perf_counter() - start
        return op, elapsed

    def track_construction_gflops(self, r):
        """Whole construction: kernel blocks (first touch of the factor memory) + inversion."""
        op, elapsed = self._build()
        return op.construction_flops() / elapsed / 1e9

    track_construction_gflops.unit = "GFLOP/s"

    def track_inversion_gflops(self, r):
        """The inversion phase alone (the arithmetic after the kernel blocks are instantiated)."""
        op, _ = self._build()
        return op.construction_flops() / op.construction_seconds["invert"] / 1e9

    track_inversion_gflops.unit = "GFLOP/s"


class HierarchicalThreads(_SlowFit):
    """fit_hierarchical (r = 128) on make_regression(100 000, d=8) with 1 and 2 threads."""

    params = grid([1, 2])
    param_names = ["n_jobs"]

    def setup(self, n_jobs):
        self.X, self.y = make_regression(100_000, d=8, seed=0)

    def time_fit(self, n_jobs):
        hkern.fit_hierarchical(self.X, self.y, r=128, sigma=1.0, lam=LAM, seed=SEED,
                               n_jobs=n_jobs)
