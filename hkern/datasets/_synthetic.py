"""Synthetic data of any size, and the standardisation used throughout the benchmarks."""
from __future__ import annotations

import numpy as np

from .._validation import check_array, check_int, check_nonnegative, check_seed

__all__ = ["make_regression", "make_two_moons", "make_hypercube_clusters", "standardize"]


def make_regression(n, d=8, noise=0.1, seed=None):
    """A smooth nonlinear regression problem with inputs in [-1, 1]^d.

    y = sum_j sin(pi x_j w_j) / sqrt(d) + 0.5 cos(2 * u . x) + noise * N(0, 1), with fixed random
    weights w ~ U(0.5, 1.5) and a unit direction u drawn from ``seed``; its scale does not depend
    on d.

    Parameters
    ----------
    n : int
        Number of samples (any size: 10^7 fits in memory for moderate d).
    d : int
        Number of features.
    noise : float
        Standard deviation of the additive Gaussian noise.
    seed : None, int or numpy.random.Generator

    Returns
    -------
    X : ndarray (n, d)
    y : ndarray (n,)

    Examples
    --------
    >>> from hkern.datasets import make_regression
    >>> X, y = make_regression(1000, d=4, seed=0)
    >>> X.shape, y.shape
    ((1000, 4), (1000,))
    """
    n = check_int(n, "n", low=1)
    d = check_int(d, "d", low=1)
    noise = check_nonnegative(noise, "noise")
    rng = check_seed(seed)
    weights = rng.uniform(0.5, 1.5, size=d)
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)
    X = rng.uniform(-1.0, 1.0, size=(n, d))
    y = np.sin(np.pi * X * weights).sum(axis=1) / np.sqrt(d) + 0.5 * np.cos(2.0 * X @ direction)
    y += noise * rng.standard_normal(n)
    return X, y


def standardize(X_train, y_train, X_test, y_test):
    """Scale inputs and targets to zero mean, unit variance with *training* statistics.

    Constant input columns are left centred but unscaled (their scale would be 0).

    Returns
    -------
    X_train, y_train, X_test, y_test : ndarray
        Standardised copies.
    y_scale : float
        Training standard deviation of y: multiply a standardised RMSE by it for original units.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.datasets import load_uci, standardize
    >>> X_train, y_train, X_test, y_test, y_scale = standardize(*load_uci("kin40k", split=0))
    >>> bool(np.allclose(X_train.mean(axis=0), 0) and np.allclose(X_train.std(axis=0), 1))
    True
    >>> bool(np.isclose(y_scale, load_uci("kin40k", split=0)[1].std()))
    True
    """
    X_train = check_array(X_train, "X_train")
    X_test = check_array(X_test, "X_test")
    y_train = np.asarray(y_train, dtype=np.float64)
    y_test = np.asarray(y_test, dtype=np.float64)
    mean, scale = X_train.mean(axis=0), X_train.std(axis=0)
    scale[scale == 0] = 1.0
    y_mean, y_scale = y_train.mean(), y_train.std()
    if y_scale == 0:
        y_scale = 1.0
    return ((X_train - mean) / scale, (y_train - y_mean) / y_scale, (X_test - mean) / scale,
            (y_test - y_mean) / y_scale, float(y_scale))


def make_two_moons(n, noise=0.05, seed=None):
    """Two interleaving half circles in 2-D (the oASIS paper's "Two Moons").

    Points t ~ U(0, pi): upper moon (cos t, sin t), lower moon (1 - cos t, 0.5 - sin t), half
    the points each, plus N(0, noise^2 I).

    Returns
    -------
    X : ndarray (n, 2)
    labels : ndarray (n,) of {0, 1}

    Examples
    --------
    >>> from hkern.datasets import make_two_moons
    >>> make_two_moons(100, seed=0)[0].shape
    (100, 2)
    """
    n = check_int(n, "n", low=1)
    noise = check_nonnegative(noise, "noise")
    rng = check_seed(seed)
    labels = (np.arange(n) >= (n + 1) // 2).astype(int)
    t = rng.uniform(0.0, np.pi, size=n)
    X = np.where(labels[:, None] == 0,
                 np.column_stack([np.cos(t), np.sin(t)]),
                 np.column_stack([1.0 - np.cos(t), 0.5 - np.sin(t)]))
    X += noise * rng.standard_normal((n, 2))
    return X, labels


def make_hypercube_clusters(points_per_vertex=30, dim=8, variance=0.1, seed=None):
    """Gaussian clusters N(v, variance I) around every vertex v of {0, 1}^dim (the oASIS
    paper's BORG set: 30 points per vertex of the 8-cube, variance 0.1, n = 7680).

    Returns
    -------
    X : ndarray (points_per_vertex * 2^dim, dim)
    vertex : ndarray of the vertex number of each point

    Examples
    --------
    >>> from hkern.datasets import make_hypercube_clusters
    >>> make_hypercube_clusters(seed=0)[0].shape
    (7680, 8)
    """
    points_per_vertex = check_int(points_per_vertex, "points_per_vertex", low=1)
    dim = check_int(dim, "dim", low=1, high=20)
    variance = check_nonnegative(variance, "variance")
    rng = check_seed(seed)
    vertices = ((np.arange(2**dim)[:, None] >> np.arange(dim)) & 1).astype(float)
    vertex = np.repeat(np.arange(2**dim), points_per_vertex)
    X = vertices[vertex] + np.sqrt(variance) * rng.standard_normal((len(vertex), dim))
    return X, vertex
