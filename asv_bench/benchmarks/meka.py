"""MEKA on kin40k split 0 (standardised, 36000 x 8), Gaussian kernel.

Construction time/memory of hkern.meka for (c, k) pairs, the matvec, the relative kernel
approximation error on 2000 sampled rows next to uniform Nystrom at equal memory (rank r =
MEKA's stored numbers / n, the paper's memory count), and KRR (fit_meka) time and test RMSE.
Side-by-side numbers for the issue come from experiments/compare_meka.py.
"""
import numpy as np

import hkern
from hkern.nystrom.api import nystrom_feature_map

from .common import Quick, SlowFit, grid, kin40k, model_rmse

SIGMA = 2.0   # gamma = 1 / (2 sigma^2) = 0.125
LAM = 0.01
N_ROWS = 2000


def nystrom_rel_error(X, r, sigma, n_rows, seed=0):
    """Row-sampled ||G - C W^+ C^T||_F / ||G||_F for r uniform landmarks."""
    rng = np.random.default_rng(seed)
    Z = X[np.sort(rng.choice(X.shape[0], r, replace=False))]
    M, _ = nystrom_feature_map(hkern.kernel_matrix(Z, sigma=sigma), 1e-11)
    Phi = hkern.kernel_matrix(X, Z, sigma=sigma) @ M
    rows = np.sort(np.random.default_rng(1).choice(X.shape[0], n_rows, replace=False))
    G = hkern.kernel_matrix(X[rows], X, sigma=sigma)
    return float(np.linalg.norm(G - Phi[rows] @ Phi.T) / np.linalg.norm(G))


class MekaBuild(SlowFit):
    params = grid(([(10, 64), (20, 64), (10, 128)],))
    param_names = ["(c, k)"]
    timeout = 300

    def setup(self, ck):
        self.X = kin40k()[0]

    def time_meka(self, ck):
        hkern.meka(self.X, r=ck[1], n_clusters=ck[0], sigma=SIGMA, seed=0)

    def peakmem_meka(self, ck):
        hkern.meka(self.X, r=ck[1], n_clusters=ck[0], sigma=SIGMA, seed=0)

    def track_rel_error(self, ck):
        G = hkern.meka(self.X, r=ck[1], n_clusters=ck[0], sigma=SIGMA, seed=0)
        return G.rel_error(N_ROWS, seed=1)

    track_rel_error.unit = "relative error"

    def track_nystrom_rel_error_equal_memory(self, ck):
        G = hkern.meka(self.X, r=ck[1], n_clusters=ck[0], sigma=SIGMA, seed=0)
        r = round(G.n_stored / self.X.shape[0])
        return nystrom_rel_error(self.X, r, SIGMA, N_ROWS)

    track_nystrom_rel_error_equal_memory.unit = "relative error"


class MekaMatvec(Quick):
    number = 5

    def setup(self):
        X = kin40k()[0]
        self.G = hkern.meka(X, r=64, n_clusters=10, sigma=SIGMA, seed=0)
        self.v = np.random.default_rng(0).normal(size=X.shape[0])

    def time_matvec(self):
        self.G.matvec(self.v)


class MekaKRR(SlowFit):
    params = grid((["direct", "pcg"],))
    param_names = ["solver"]
    timeout = 300

    def setup(self, solver):
        self.X, self.y, self.Xt, self.yt = kin40k()

    def _fit(self, solver):
        return hkern.fit_meka(self.X, self.y, r=64, n_clusters=10, lam=LAM, sigma=SIGMA,
                              seed=0, solver=solver, tol=1e-6)

    def time_fit(self, solver):
        self._fit(solver)

    def track_test_rmse(self, solver):
        return model_rmse(self._fit(solver), self.Xt, self.yt)

    track_test_rmse.unit = "RMSE (std units)"
