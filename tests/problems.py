"""Small synthetic problems that several test files share (data only; references live in
tests/oracles.py)."""
import numpy as np


def smooth_regression(rng, n=240, n_test=60):
    """X uniform on [-1, 1]^3, y = sin(3 x_1) + x_2^2 + 0.05 noise, and test points X_test.

    Examples
    --------
    >>> X, y, X_test = smooth_regression(np.random.default_rng(0))
    >>> X.shape, y.shape, X_test.shape
    ((240, 3), (240,), (60, 3))
    """
    X = rng.uniform(-1, 1, size=(n, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=n)
    X_test = rng.uniform(-1, 1, size=(n_test, 3))
    return X, y, X_test


def blobs(n=600, d=3, centres=4, spread=0.6, seed=0):
    """Points around well-separated centres (the regime MEKA is built for).

    Examples
    --------
    >>> blobs(n=10, d=2).shape
    (10, 2)
    """
    rng = np.random.default_rng(seed)
    C = rng.normal(scale=4.0, size=(centres, d))
    return C[rng.integers(centres, size=n)] + spread * rng.normal(size=(n, d))
