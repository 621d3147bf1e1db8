"""SLKL: fit time and accuracy on the paper's sinc problem; time per coordinate step vs n.

Sinc: x ~ U([-5, 5]^2), y = sin||x|| / ||x|| with noise at SNR 10 dB, n = 1000, Gaussian
sigma = 1, lam = 1, nu = 1e-2, one thread (doc/specs/slkl.md, section 4).
"""
from typing import ClassVar

import numpy as np
from hkern.slkl._core import SlklCore

import hkern
from hkern._threads import blas_threads

from .common import grid


def sinc(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-5, 5, size=(n, 2))
    r = np.linalg.norm(X, axis=1)
    y = np.sin(r) / r
    return X, y + np.sqrt(np.var(y) / 10.0) * rng.normal(size=n), y


class SincFit:
    params: ClassVar = grid(([256, 1000], ["exact", "newton"]))
    param_names: ClassVar = ["n_candidates", "step"]
    number = 1
    repeat = (1, 3, 30.0)
    timeout = 300

    def setup(self, M, step):
        self.X, self.y, _ = sinc(1000, 0)
        self.Xt, _, self.yt = sinc(1000, 1)

    def fit(self, M, step):
        with blas_threads(1):
            return hkern.fit_slkl(self.X, self.y, r=M, nu=1e-2, sigma=1.0, lam=1.0,
                                  step=step, seed=0, n_jobs=1)

    def time_fit(self, M, step):
        self.fit(M, step)

    def track_test_mse(self, M, step):
        return float(np.mean((self.fit(M, step).predict(self.Xt) - self.yt) ** 2))

    def track_m0(self, M, step):
        return self.fit(M, step).m0_

    def peakmem_fit(self, M, step):
        self.fit(M, step)

    track_test_mse.unit = "MSE (noiseless test)"
    track_m0.unit = "active landmarks"


class StepTime:
    """2000 coordinate steps leaving a weight at 0 with m0 = 100 active (O(n m0) each)."""
    params: ClassVar = grid([2000, 8000, 32000])
    param_names: ClassVar = ["n"]
    number = 1
    repeat = (3, 10, 10.0)

    def setup(self, n):
        rng = np.random.default_rng(0)
        M, m0 = 200, 100
        X, y = rng.normal(size=(n, 4)), rng.normal(size=n)
        S = np.sort(rng.choice(n, M, replace=False)).astype(np.intp)
        cols = hkern.kernel_matrix(X[S], X, sigma=1.0, n_jobs=1)
        self.core = SlklCore(y, 1.0, 1e12, 0, np.ones(M), S, cols=cols, capacity=M)
        mu0 = np.zeros(M)
        mu0[:m0] = 1.0
        self.core.set_all(mu0)
        self.core.grow(M)
        self.draws = rng.integers(m0, M, size=2000).astype(np.intp)
        self.hist = np.empty(2001)

    def time_2000_steps(self, n):
        with blas_threads(1):
            self.core.run(self.draws, self.hist, 0, 0, 0.0, 200, 0)


class SincPredict:
    """Prediction on 20 000 sinc points: the kernel at the m0 active landmarks only."""

    params: ClassVar = grid([256, 1000])
    param_names: ClassVar = ["n_candidates"]
    number = 1
    repeat = (3, 10, 10.0)
    timeout = 300

    def setup(self, M):
        X, y, _ = sinc(1000, 0)
        self.Xt = sinc(20_000, 1)[0]
        with blas_threads(1):
            self.model = hkern.fit_slkl(X, y, r=M, nu=1e-2, sigma=1.0, lam=1.0, seed=0,
                                        n_jobs=1)

    def time_predict(self, M):
        self.model.predict(self.Xt)
