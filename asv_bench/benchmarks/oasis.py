"""Nystrom column selection: oASIS against uniform, RPCholesky and greedy pivoted Cholesky.

Speed on make_regression(n, d=8) with the Gaussian kernel (sigma = 1); accuracy on Two Moons
(n = 2000, l = 450, sigma_paper = 5% of the largest distance, hkern sigma = sigma_paper / sqrt 2)
as in the oASIS paper's Table I.
"""
import numpy as np
from scipy.spatial.distance import pdist

import hkern
from hkern.datasets import make_regression, make_two_moons

from .common import SlowFit, grid


class _Selection(SlowFit):
    repeat = (1, 3, 30.0)
    timeout = 300


class SelectionTime(_Selection):
    params = grid((["oasis", "rpcholesky", "uniform"], [20_000, 100_000]))
    param_names = ["method", "n"]

    def setup(self, method, n):
        self.X, _ = make_regression(n, d=8, seed=0)

    def time_select_200(self, method, n):
        hkern.select_columns(self.X, 200, method=method, sigma=1.0, seed=0)

    def peakmem_select_200(self, method, n):
        hkern.select_columns(self.X, 200, method=method, sigma=1.0, seed=0)


class TwoMoonsError:
    params = grid(["oasis", "rpcholesky", "uniform", "greedy"])
    param_names = ["method"]
    timeout = 300

    def setup(self, method):
        self.X = make_two_moons(2000, noise=0.05, seed=0)[0]
        self.sigma = 0.05 * pdist(self.X).max() / np.sqrt(2.0)
        self.G = hkern.kernel_matrix(self.X, sigma=self.sigma)

    def track_relative_frobenius_error(self, method):
        sel = hkern.select_columns(self.X, 450, method=method, sigma=self.sigma, seed=0)
        return float(np.linalg.norm(self.G - sel.approximation()) / np.linalg.norm(self.G))

    track_relative_frobenius_error.unit = "relative error"


class SelectionThreads(_Selection):
    """oASIS, 200 columns of make_regression(20 000, d=8), with 1 and 2 threads."""

    params = grid([1, 2])
    param_names = ["n_jobs"]

    def setup(self, n_jobs):
        self.X, _ = make_regression(20_000, d=8, seed=0)

    def time_oasis_200(self, n_jobs):
        hkern.oasis(self.X, 200, sigma=1.0, seed=0, n_jobs=n_jobs)
