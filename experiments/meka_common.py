"""Helpers shared by the MEKA benchmarks and comparison script: Nystrom baselines built the same
way as the paper's (uniform landmarks, k-means landmarks) and the row-sampled error metric."""
from __future__ import annotations

import math
import time

import numpy as np
from scipy.cluster.vq import kmeans2

import hkern
from hkern.baselines.nystrom import nystrom_feature_map
from hkern.datasets import load_uci, standardize
from hkern.kernels._api import _kernel_matrix_trusted

CHUNK = 256


class NystromApprox:
    """K ~ Phi Phi^T with Phi = K(X, Z) M, M M^T = K(Z, Z)^+ (eigenvalues <= 1e-12 max dropped).

    ``seconds`` is the construction time (landmarks + Phi); ``n_stored`` = n r numbers, the
    paper's memory count for a rank-r Nystrom approximation.
    """

    def __init__(self, X, Z, sigma, n_threads=1):
        start = time.perf_counter()
        self.X, self.sigma = X, sigma
        M = nystrom_feature_map(_kernel_matrix_trusted(0, sigma, Z, Z, n_threads), 1e-12)
        self.Phi = np.empty((X.shape[0], M.shape[1]))
        for s in range(0, X.shape[0], 8192):
            C = _kernel_matrix_trusted(0, sigma, X[s:s + 8192], Z, n_threads)
            self.Phi[s:s + 8192] = C @ M
        self.seconds = time.perf_counter() - start
        self.n_stored = self.Phi.size

    def rel_error(self, n_rows, seed):
        n = self.X.shape[0]
        rng = np.random.default_rng(seed)
        rows = np.arange(n) if n_rows >= n else np.sort(rng.choice(n, n_rows, replace=False))
        num = den = 0.0
        for s in range(0, len(rows), CHUNK):
            r = rows[s:s + CHUNK]
            G = _kernel_matrix_trusted(0, self.sigma, self.X[r], self.X, 1)
            num += float(np.sum((G - self.Phi[r] @ self.Phi.T) ** 2))
            den += float(np.sum(G ** 2))
        return math.sqrt(num / den)


def uniform_nystrom(X, r, sigma, seed=0):
    idx = np.sort(np.random.default_rng(seed).choice(X.shape[0], r, replace=False))
    return NystromApprox(X, np.ascontiguousarray(X[idx]), sigma)


def kmeans_nystrom(X, r, sigma, seed=0, sample=20000):
    """KNys (Zhang & Kwok): the r k-means centroids of a 20000-point subsample as landmarks."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    S = X if X.shape[0] <= sample else X[rng.choice(X.shape[0], sample, replace=False)]
    Z, _ = kmeans2(S, r, iter=10, minit="++", seed=rng)
    t_cluster = time.perf_counter() - start
    out = NystromApprox(X, np.ascontiguousarray(Z), sigma)
    out.seconds += t_cluster
    return out


def uci_standardised(name):
    X_train, y_train, X_test, y_test, _ = standardize(*load_uci(name, split=0))
    return X_train, y_train, X_test, y_test


def meka_time(X, **kw):
    start = time.perf_counter()
    G = hkern.meka(X, **kw)
    return G, time.perf_counter() - start
