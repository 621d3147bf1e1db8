"""Python face of the kernel families: names, validation, thread budgets, spectral sampling."""
from __future__ import annotations

import numpy as np

from .._memory import check_memory
from .._threads import blas_threads, budget_threads, budgeted
from .._validation import (
    check_array,
    check_bandwidth,
    check_rhs,
    check_sigma,
    document_sigma,
    scale_inputs,
)
from . import _kernels

__all__ = ["KERNELS", "kernel_matrix", "kernel_diag", "kernel_matvec", "kernel_kind",
           "sample_spectral"]

# Canonical names and the integer kind the compiled core uses (hkern/kernels/_kernels.pxd).
KERNELS = {
    "gaussian": 0,
    "laplace": 1,
    "imq": 2,
    "matern12": 3,
    "matern32": 4,
    "matern52": 5,
}
_ALIASES = {"rbf": "gaussian", "inverse_multiquadric": "imq", "exponential": "matern12"}


def kernel_kind(kernel):
    """Canonical name and compiled kind for a kernel name (aliases accepted)."""
    if not isinstance(kernel, str):
        raise ValueError(f"kernel must be a string, one of {sorted(KERNELS)}; got {kernel!r}")
    name = _ALIASES.get(kernel.lower(), kernel.lower())
    if name not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)} (aliases: "
                         f"{sorted(_ALIASES)}); got {kernel!r}")
    return name, KERNELS[name]


def _centred_for_accuracy(kind, X, Y):
    """X and Y shifted by a common vector when their offset from the origin dwarfs their spread.

    Squared distances come from ||x||^2 + ||y||^2 - 2 x.y, whose rounding error grows with the
    norms, not with the distances: data at 30 standard deviations from the origin lost three
    digits.  Every kernel depends on x - y only, so a common shift changes nothing but the
    rounding.  Data already near the origin (standardised data) are used as they are.
    """
    if kind == KERNELS["laplace"] or Y.shape[0] == 0:
        return X, Y     # L1 distances are computed from differences directly
    centre = Y.mean(axis=0)
    shifted_Y = Y - centre                  # one n x d temporary, kept if the shift is used
    spread = np.mean(np.einsum("ij,ij->i", shifted_Y, shifted_Y))
    if centre @ centre <= spread:
        return X, Y
    return (shifted_Y if X is Y else np.ascontiguousarray(X - centre)), shifted_Y


def _kernel_matrix_trusted(kind, sigma, X, Y, n_threads, out=None):
    """K(X, Y) for validated C-contiguous float64 inputs (internal fast path), written into
    ``out`` (C-contiguous float64 of K's shape) if given: a loop that rebuilds the matrix reuses
    its memory instead of faulting in fresh pages each time."""
    X, Y = _centred_for_accuracy(kind, X, Y)
    if out is None:
        out = np.empty((X.shape[0], Y.shape[0]))
    # Tiles call single-threaded BLAS from OpenMP threads: BLAS and OpenMP must not multiply.
    with blas_threads(1):
        _kernels.fill_kernel_matrix(kind, sigma, X, Y, out, n_threads)
    return out


@budgeted
@document_sigma
def kernel_matrix(X, Y=None, *, kernel="gaussian", sigma=1.0, n_jobs=None, max_memory=None):
    r"""Kernel matrix K[i, j] = k(X[i], Y[j]).

    All kernels share one parametrisation: a bandwidth (lengthscale) ``sigma > 0`` and
    ``k(x, x) = 1``; with one lengthscale per feature (an array ``sigma``, ARD) each is the
    formula below with :math:`\sigma = 1` at :math:`x / \sigma, y / \sigma`:

    ============  ==================================================================
    ``gaussian``  :math:`\exp(-\|x-y\|_2^2 / (2\sigma^2))`  (alias ``"rbf"``)
    ``laplace``   :math:`\exp(-\|x-y\|_1 / \sigma)`
    ``imq``       :math:`\sigma / \sqrt{\|x-y\|_2^2 + \sigma^2}`
    ``matern12``  :math:`\exp(-r/\sigma)`, :math:`r = \|x-y\|_2`  (alias ``"exponential"``)
    ``matern32``  :math:`(1 + \sqrt3 r/\sigma) \exp(-\sqrt3 r/\sigma)`
    ``matern52``  :math:`(1 + \sqrt5 r/\sigma + 5r^2/(3\sigma^2)) \exp(-\sqrt5 r/\sigma)`
    ============  ==================================================================

    Conversions to the papers' conventions:

    * MEKA and scikit-learn's ``rbf_kernel`` write :math:`\exp(-\gamma\|x-y\|^2)`:
      :math:`\gamma = 1/(2\sigma^2)`.
    * oASIS writes :math:`\exp(-\|x-y\|^2/\sigma_{paper}^2)`: :math:`\sigma_{paper}^2 = 2\sigma^2`.
    * The HCK paper's inverse multiquadric is :math:`\sigma^2/\sqrt{\|x-y\|^2+\sigma^2}`, which
      is ``sigma`` times hkern's ``imq``.

    Parameters
    ----------
    X : array_like of shape (m, d)
    Y : array_like of shape (n, d), optional
        Defaults to ``X``.
    kernel : str
        One of the names above.
    {sigma}
    n_jobs : int or None
        Threads; None uses the CPUs available, within OMP_NUM_THREADS and threadpoolctl
        limits.  The result is bitwise identical for any value.
    max_memory : int or None
        Most bytes the call may allocate (the result takes 8 m n, scaled copies of X and Y
        8 (m + n) d more with lengthscales); None (default): the memory available when the
        call starts.

    Returns
    -------
    K : ndarray of shape (m, n)

    Raises
    ------
    ValueError
        For invalid input; :class:`hkern.MemoryLimitError` (a ValueError) when the result
        would not fit in ``max_memory``.

    Notes
    -----
    Squared distances come from one GEMM per output tile (:math:`\|x\|^2 + \|y\|^2 - 2x^Ty`);
    distances smaller than 1e-3 of :math:`\|x\|^2+\|y\|^2`, where that formula cancels, are
    recomputed exactly, and data far from the origin compared with their spread are first
    shifted by a common vector (the kernels depend on x - y only).  The elementwise map runs in
    an OpenMP loop over tiles.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> hkern.kernel_matrix(X, kernel="gaussian", sigma=1.0).round(4)
    array([[1.    , 0.6065],
           [0.6065, 1.    ]])
    """
    X = check_array(X, "X")
    if Y is None:
        Y = X
    else:
        Y = check_array(Y, "Y")
        if Y.shape[1] != X.shape[1]:
            raise ValueError(f"Y has {Y.shape[1]} features but X has {X.shape[1]}; they must "
                             "match")
    _, kind = kernel_kind(kernel)
    bandwidth, lengthscales = check_sigma(sigma, X.shape[1])
    m, n, d = X.shape[0], Y.shape[0], X.shape[1]
    copies = 1 if lengthscales is None else 2
    # The m x n result, and shifted copies of X and Y when they sit far from the origin (and
    # their copies divided by the lengthscales).
    check_memory(8 * (m * n + copies * (m + n) * d), max_memory,
                 what=f"kernel_matrix of shape ({m}, {n})",
                 fix="use kernel_matvec for products K @ B, or pass fewer rows")
    X, Y = _scaled_pair(X, Y, bandwidth, lengthscales)
    return _kernel_matrix_trusted(kind, bandwidth, X, Y, budget_threads())


def kernel_diag(X, *, kernel="gaussian", sigma=1.0):
    """Diagonal k(X[i], X[i]) of the kernel matrix without forming it.

    Every hkern kernel is stationary with unit peak, so this is a vector of ones; it exists so
    that code written against it stays correct if a non-stationary kernel is added.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> hkern.kernel_diag(np.zeros((3, 2)))
    array([1., 1., 1.])
    """
    X = check_array(X, "X")
    kernel_kind(kernel)
    check_sigma(sigma, X.shape[1])
    return np.ones(X.shape[0])


def _scaled_pair(X, Y, bandwidth, lengthscales):
    """X and Y divided by the lengthscales (Y once when it is X), checked against the bandwidth
    the engine will use on them."""
    if lengthscales is not None:
        same = Y is X
        X = scale_inputs(X, lengthscales, "X")
        Y = X if same else scale_inputs(Y, lengthscales, "Y")
    check_bandwidth(bandwidth, X, Y)
    return X, Y


def _matvec_bytes(m, n, d, k, n_threads):
    """Bytes of :func:`_kernel_matvec_trusted` beyond its inputs: the m x k result, squared norms,
    one kernel tile per thread (the kernel is never stored), and shifted copies of X and Y when
    the data sit far from the origin."""
    return 8 * (m * k + m + n + (m + n) * d) + _kernels.TILE_BYTES * n_threads


def _kernel_matvec_trusted(kind, sigma, X, Y, B, n_threads):
    """K(X, Y) @ B by the fused kernel-product engine: each tile of K is computed in cache and
    multiplied at once, never stored (hkern.kernels._kernels.kernel_times)."""
    X, Y = _centred_for_accuracy(kind, X, Y)
    m, n = X.shape[0], Y.shape[0]
    out = np.empty((m,) + B.shape[1:])
    B2 = np.ascontiguousarray(B.reshape(n, -1))
    with blas_threads(1):   # tiles call single-threaded BLAS from OpenMP threads
        _kernels.kernel_times_matrix(kind, sigma, X, Y, B2, out.reshape(m, -1), n_threads)
    return out


def _normal_times_bytes(n, m, d, k, n_threads):
    """Bytes of :func:`_kernel_normal_times_trusted` beyond its inputs: the m x k result, squared
    norms, the engine's blocks and partial sums, and shifted copies of X and Z when the data sit
    far from the origin."""
    return 8 * (m * k + m + n + (m + n) * d) + _kernels.normal_times_bytes(n, m, k, n_threads)


def _kernel_normal_times_trusted(kind, sigma, X, Z, U, V, n_threads):
    """K(X, Z)^T (K(X, Z) U + V) in one pass over K(X, Z) (U or V None: zero), each block of K
    computed in cache and used twice, never stored (hkern.kernels._kernels.kernel_normal_times).

    The products FALKON's conjugate gradients need: with U the normal-equations operator, with
    V alone the right-hand side K^T y.  U (m x k) and V (n x k) are C-contiguous float64.
    """
    X, Z = _centred_for_accuracy(kind, X, Z)
    k = (U if U is not None else V).shape[1]
    out = np.empty((Z.shape[0], k))
    with blas_threads(1):   # blocks call single-threaded BLAS from OpenMP threads
        _kernels.kernel_normal_times_matrix(kind, sigma, X, Z, U, V, out, n_threads)
    return out


@budgeted
def kernel_matvec(X, Y, B, *, kernel="gaussian", sigma=1.0, n_jobs=None, max_memory=None):
    """``kernel_matrix(X, Y) @ B`` without holding the whole kernel matrix.

    Parameters
    ----------
    X : array_like of shape (m, d)
    Y : array_like of shape (n, d)
    B : array_like of shape (n,) or (n, k)
    kernel, sigma, n_jobs
        As in :func:`kernel_matrix`.
    max_memory : int or None
        Most bytes the call may allocate (the result and one 128 x 256 tile of K per thread:
        the kernel matrix is never stored; and copies of X and Y divided by the lengthscales
        when sigma is an array); None (default): the memory available when the call starts.

    Returns
    -------
    ndarray of shape (m,) or (m, k)

    Examples
    --------
    >>> import numpy as np, hkern
    >>> X = np.random.default_rng(0).normal(size=(5, 2))
    >>> np.allclose(hkern.kernel_matvec(X, X, np.ones(5)), hkern.kernel_matrix(X).sum(1))
    True
    """
    X = check_array(X, "X")
    Y = check_array(Y, "Y")
    if Y.shape[1] != X.shape[1]:
        raise ValueError(f"Y has {Y.shape[1]} features but X has {X.shape[1]}; they must match")
    B = check_rhs(B, Y.shape[0], "B")
    _, kind = kernel_kind(kernel)
    bandwidth, lengthscales = check_sigma(sigma, X.shape[1])
    m, n, d = X.shape[0], Y.shape[0], X.shape[1]
    k = B.shape[1] if B.ndim == 2 else 1
    scaled = 0 if lengthscales is None else (m + n) * d
    # The m x k result, a tile of K per thread, shifted copies of X and Y when the data sit far
    # from the origin (and copies divided by the lengthscales).
    check_memory(_matvec_bytes(m, n, d, k, budget_threads()) + 8 * scaled, max_memory,
                 what=f"kernel_matvec with m={m}, n={n}, k={k}",
                 fix="pass B with fewer columns, or fewer rows of X at a time")
    X, Y = _scaled_pair(X, Y, bandwidth, lengthscales)
    return _kernel_matvec_trusted(kind, bandwidth, X, Y, B, budget_threads())


def sample_spectral(kernel, n_features, n_components, sigma, rng):
    """Frequencies drawn from the kernel's spectral density (Bochner), for random features.

    k(x - y) = E_w[cos(w.(x - y))] with w drawn from the returned distribution:

    * gaussian: w ~ N(0, I / sigma^2);
    * laplace (a product of 1-D Laplace kernels): w_j ~ Cauchy(0, 1/sigma) independently;
    * matern (nu = 1/2, 3/2, 5/2): multivariate Student-t with 2 nu degrees of freedom and
      scale 1/sigma, i.e. w = g / (sigma sqrt(u / (2 nu))), g ~ N(0, I), u ~ chi2(2 nu).

    Returns an (n_components, n_features) array.
    """
    name, _ = kernel_kind(kernel)
    shape = (n_components, n_features)
    if name == "gaussian":
        return rng.standard_normal(shape) / sigma
    if name == "laplace":
        return rng.standard_cauchy(shape) / sigma
    if name.startswith("matern"):
        nu = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}[name]
        u = rng.chisquare(2 * nu, size=(n_components, 1))
        return rng.standard_normal(shape) / (sigma * np.sqrt(u / (2 * nu)))
    raise ValueError(f"random Fourier features are not available for kernel={kernel!r}: its "
                     "spectral density has no sampler here; use 'gaussian', 'laplace' or a "
                     "Matern kernel")
