"""Exact kernel ridge regression: the reference every approximation is measured against."""
from __future__ import annotations

from .. import _linalg
from .._memory import check_memory
from .._model import KernelRidgeModel, prepare_fit
from .._threads import thread_budget
from ..kernels._api import _kernel_matrix_trusted, _kernel_matvec_trusted

__all__ = ["fit_exact", "ExactKRR"]

class ExactKRR(KernelRidgeModel):
    """Exact KRR: f(x) = k(x, X) alpha with alpha = (K + lam I)^{-1} Y.

    Attributes
    ----------
    X_fit_ : ndarray (n, d)
        Training inputs.
    dual_coef_ : ndarray (n, k)
        alpha.

    Examples
    --------
    Returned by :func:`fit_exact`; predictions are k(x, X) alpha:

    >>> import numpy as np
    >>> import hkern
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(200, 3)), rng.normal(size=200)
    >>> model = hkern.fit_exact(X, y, sigma=1.0, lam=1e-2)
    >>> K = hkern.kernel_matrix(X[:5], X, sigma=1.0)
    >>> bool(np.allclose(model.predict(X[:5]), K @ model.dual_coef_[:, 0]))
    True
    """

    def __init__(self, X, alpha, **kw):
        super().__init__(**kw)
        self.X_fit_ = X
        self.dual_coef_ = alpha

    def _scores(self, X):
        return _kernel_matvec_trusted(self._kind, self.sigma, X, self.X_fit_, self.dual_coef_,
                                      self._threads())


def fit_exact(X, y, *, kernel="gaussian", sigma=1.0, lam=1e-2, task="regression", n_jobs=None,
              max_memory=None):
    """Exact kernel ridge regression by a Cholesky factorisation of K + lam I.

    Parameters
    ----------
    X : array_like (n, d)
    y : array_like (n,) or (n, k)
        Targets, or class labels for ``task="classification"`` (one-vs-rest, one solve for all
        classes).
    kernel : str
        See :func:`hkern.kernel_matrix`.
    sigma : float
        Kernel bandwidth, > 0.
    lam : float
        Ridge regularisation (the GP noise variance), > 0.
    task : {"regression", "classification"}
    max_memory : int or None
        Most bytes the fit may allocate; None (default): the memory available when the call
        starts.  The fit needs about 8 n^2 bytes (the kernel matrix, factorised in place).
    n_jobs : int or None
        Threads; None uses the CPUs available, within OMP_NUM_THREADS and threadpoolctl
        limits.  Results are identical for any value.

    Returns
    -------
    ExactKRR

    Raises
    ------
    ValueError
        For invalid input; :class:`hkern.MemoryLimitError` (a ValueError) when 8 n^2 bytes
        exceed ``max_memory``.

    Notes
    -----
    Cost O(n^2 d + n^3 / 3) time, 8 n^2 bytes.  The Cholesky factorisation is hkern's tiled one
    (``hkern._linalg.potrf_tiled``): OpenMP threads over 256 x 256 tiles, each a single-threaded
    BLAS call.  Multi-threaded OpenBLAS ``dpotrf``/``dsyrk`` have crashed near n = 16 000-18 000
    on this project's machines and change their rounding with the thread count; the tiled
    form does neither, so results are identical for any ``n_jobs``.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = np.sin(X[:, 0])
    >>> model = hkern.fit_exact(X, y, sigma=1.0, lam=1e-3)
    >>> float(np.abs(model.predict(X) - y).max()) < 0.05
    True
    """
    inputs = prepare_fit(X, y, kernel=kernel, sigma=sigma, lam=lam, task=task)
    X, Y = inputs.X, inputs.Y
    n = X.shape[0]
    check_memory(8 * n * n + 16 * n * Y.shape[1], max_memory,
                 what=f"fit_exact with n={n} (the n x n kernel matrix)",
                 fix="fit on a subsample, or use fit_nystrom, fit_rff or fit_hierarchical")
    with thread_budget(n_jobs) as n_threads:
        K = _kernel_matrix_trusted(inputs.kind, inputs.sigma, X, X, n_threads)
        K.flat[:: n + 1] += inputs.lam
        factor = _linalg.cholesky(K, overwrite=True, n_threads=n_threads)
        alpha = _linalg.cho_solve(factor, Y, n_threads=n_threads)
        del K, factor
    return ExactKRR(X, alpha, **inputs.model_params(n_jobs))
