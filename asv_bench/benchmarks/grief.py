"""GP-GRIEF: basis construction, LML evaluation after the precompute, fit on a UCI set.

Synthetic inputs from hkern.datasets.make_regression(n, d=8, seed=0), mbar = 10 (m = 10^8).
"""
import numpy as np

import hkern
from hkern.datasets import make_regression
from hkern.grief import GriefBasis, make_grids
from hkern.grief._lml import plain_lml, svd_lml, svd_transform

from .common import SlowFit, grid, model_rmse


class Basis(SlowFit):
    """Phi (n x p) as products of 1-D eigenfunctions, OpenMP over rows."""
    params = grid(([20_000, 100_000], [1, 2]))
    param_names = ["n", "n_jobs"]
    repeat = (1, 5, 30.0)
    timeout = 300

    def setup(self, n, n_jobs):
        self.X, _ = make_regression(n, d=8, seed=0)
        self.basis = GriefBasis(make_grids(self.X, [10] * 8), np.ones(8), 256)

    def time_phi_p256(self, n, n_jobs):
        self.basis.phi(self.X, n_jobs)


class LML:
    """One LML + gradient evaluation after the O(n p^2) precompute: independent of n."""
    params = grid(([10_000, 200_000], ["svd", "plain"]))
    param_names = ["n", "form"]
    timeout = 300

    def setup(self, n, form):
        X, y = make_regression(n, d=8, seed=0)
        basis = GriefBasis(make_grids(X, [10] * 8), np.ones(8), 256)
        self.A, self.r = basis.gram(X, y)
        self.yy, self.n = float(y @ y), n
        s, _, uy = svd_transform(self.A, self.r)
        self.rho, self.w = uy**2, np.ones(s.size)

    def time_lml_and_gradient(self, n, form):
        if form == "svd":
            svd_lml(self.yy, self.rho, self.n, self.w, 0.1)
        else:
            plain_lml(self.yy, self.r, self.A, self.n, np.ones(self.r.size), 0.1)


class FitHousing(SlowFit):
    """fit_grief type II on housing split 0 (p = 100, mbar = 10, m = 10^13); needs HKERN_DATA."""
    repeat = (1, 3, 60.0)
    timeout = 300

    def setup(self):
        try:
            self.data = hkern.datasets.load_uci("housing", 0)
        except ValueError:
            raise NotImplementedError("housing not available (set HKERN_DATA)") from None

    def time_fit_type2(self):
        X, y, _, _ = self.data
        hkern.fit_grief(X, y, r=100, grid_size=10, seed=0, n_jobs=1)

    def track_rmse_type2(self):
        X, y, Xt, yt = self.data
        return model_rmse(hkern.fit_grief(X, y, r=100, grid_size=10, seed=0, n_jobs=1), Xt, yt)
