"""The exact kernel ridge model: :class:`ExactKRR`, the Gaussian-process posterior that
:func:`hkern.fit_exact` returns, and the Cholesky factor of K + lam I that the fit and the
model's posterior variance and likelihood compute."""
from __future__ import annotations

import numpy as np

from .. import _linalg
from .._gp import Evidence, GaussianProcessKRR, column_quads
from .._memory import check_memory, resolve_max_memory
from .._model import KernelRidgeModel
from .._ridge import block_rows
from .._threads import budget_threads
from ..kernels._api import _kernel_matrix_trusted, _kernel_matvec_trusted, kernel_diag
from ..solvers.cg import unit_columns
from . import variance as _conditional

__all__ = ["ExactKRR"]


def _system_factor(kind, sigma, lam, X, n_threads):
    """Lower Cholesky factor of K(X, X) + lam I, computed in the kernel matrix's memory."""
    n = X.shape[0]
    K = _kernel_matrix_trusted(kind, sigma, X, X, n_threads)
    K.flat[:: n + 1] += lam
    return _linalg.cholesky(K, overwrite=True, n_threads=n_threads)


# Below lam 1e-4 the products k(x, X) alpha cancel to eps / lam of |alpha| and show c * y's
# rounding (at lam 8e-5, 2.6e-10 of the z-scores; at 1.1e-7, 1.2e-7), so the direct solve's
# targets go on CG's grid (hkern.solvers.cg.unit_columns) as for a tol of min(2^-15,
# 2^-32 / lam): a spacing of at most 2^-34 / sqrt(n) on unit-norm columns, at most 2^-35 of
# each column's norm.  Above it the targets are only scaled: every entry keeps its bits to a
# rounding (K = I gives (y - mean) / (1 + lam) to 1e-13 of each entry).
DIRECT_GRID_BELOW_LAM = 1e-4
DIRECT_GRID_TOL = 2.0 ** -15
DIRECT_GRID_LAM = 2.0 ** -32


def unit_solve(factor, Y, n_threads, lam):
    """(alpha_unit, norms, Evidence): A^{-1} of Y's columns scaled to unit norm on a fine grid
    (A = L L^T, ``factor`` from :func:`_system_factor` at ``lam``), their norms, and the
    evidence of Y.  c * y then solves the same bits: at small lam the products k(x, X) alpha
    cancel and would show c * y's rounding (energy, lam 1.1e-7: z-scores of y and 1000 y
    1.2e-7 apart); the grid is there below DIRECT_GRID_BELOW_LAM, its spacing growing as lam
    shrinks."""
    tol = min(DIRECT_GRID_TOL, DIRECT_GRID_LAM / lam) if lam < DIRECT_GRID_BELOW_LAM else None
    norms, Y_unit = unit_columns(Y, tol)
    alpha_unit = _linalg.cho_solve(factor, Y_unit, n_threads=n_threads)
    evidence = Evidence(column_quads(Y_unit, alpha_unit) * norms ** 2,
                        _linalg.cholesky_logdet(factor), Y.shape[0])
    return alpha_unit, norms, evidence


class ExactKRR(GaussianProcessKRR, KernelRidgeModel):
    """Exact KRR: f(x) = k(x, X) alpha with alpha = (K + lam I)^{-1} Y.

    Also the posterior mean of the Gaussian process f ~ GP(0, k) observed with noise variance
    lam: ``predict(X, return_std=True)`` adds the posterior standard deviation of f,
    sqrt(k(x, x) - k(x, X) (K + lam I)^{-1} k(X, x)), and ``log_marginal_likelihood()`` is
    log N(y | 0, K + lam I) of the training targets.  The model keeps only X and alpha: the
    standard deviation and ``log_marginal_likelihood(y)`` factorise K + lam I again (the fit's
    cost: O(n^3) time and 8 n^2 bytes per call), so pass all test points in one call.  A PCG
    fit's standard deviation does so only where that is the cheaper way and fits in memory;
    elsewhere it is the std of f(x) given the training targets nearest x and global summaries
    of them all, never below the exact one and with no n x n matrix
    (:mod:`hkern.exact.variance`).

    Attributes
    ----------
    X_fit_ : ndarray (n, d)
        Training inputs.
    dual_coef_ : ndarray (n, k)
        alpha, in training order.
    n_iter_ : int or None
        Conjugate-gradient iterations (``solver="pcg"``); None for the Cholesky solver.
    solver_trace_ : hkern.solvers.SolverTrace or None
        Per-iteration residuals, seconds and validation errors of ``solver="pcg"``.

    Examples
    --------
    Returned by :func:`fit_exact`; predictions are the training mean plus k(x, X) alpha:

    >>> import numpy as np
    >>> import hkern
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(200, 3)), rng.normal(size=200)
    >>> model = hkern.fit_exact(X, y, sigma=1.0, lam=1e-2)
    >>> K = hkern.kernel_matrix(X[:5], X, sigma=1.0)
    >>> bool(np.allclose(model.predict(X[:5]), model.y_mean_[0] + K @ model.dual_coef_[:, 0]))
    True

    The posterior standard deviation, and the evidence of the training targets:

    >>> mean, std = model.predict(X[:5], return_std=True)
    >>> bool(np.all((std > 0) & (std < 1)))
    True
    >>> model.log_marginal_likelihood() == model.log_marginal_likelihood(y)
    True
    """

    def __init__(self, X, alpha, n_iter=None, solver_trace=None, coef_scale=None, **kw):
        super().__init__(**kw)
        self.X_fit_ = X
        # With coef_scale (fit_exact's direct solve), alpha is the solution for unit-norm
        # targets and each output's scores are k(x, X) alpha times its scale: c * y then
        # predicts c times the same bits.  At small lam, |alpha| is |y| / lam and k(x, X) alpha
        # cancels to 1e-9 of it, so a product with the scaled alpha rounded c * y's last bits
        # into 1e-9 of the predictions (energy, lam 1.1e-7).
        self._unit_coef = None if coef_scale is None else alpha
        self._coef_scale = coef_scale
        self.dual_coef_ = alpha if coef_scale is None else alpha * coef_scale
        self.n_iter_ = n_iter
        self.solver_trace_ = solver_trace

    def _scores(self, X):
        unit = getattr(self, "_unit_coef", None)        # (absent from older pickles)
        coef = self.dual_coef_ if unit is None else unit
        scores = _kernel_matvec_trusted(self._kind, self._bandwidth, X, self.X_fit_, coef,
                                        budget_threads())
        return scores if unit is None else scores * self._coef_scale

    def _factor(self, extra_bytes, what, fix, max_memory, n_threads):
        """The Cholesky factor of K + lam I, again, after checking that it and ``extra_bytes``
        fit in max_memory."""
        n = self.X_fit_.shape[0]
        check_memory(8 * n * n + extra_bytes, max_memory,
                     what=f"{what} (the n x n kernel matrix, n={n})", fix=fix)
        return _system_factor(self._kind, self._bandwidth, self.lam, self.X_fit_, n_threads)

    def _n_train(self):
        return self.X_fit_.shape[0]

    def _evidence_at(self, Y, max_memory):
        # log_marginal_likelihood(y): the fit's factorisation and solve again.
        n, k = Y.shape
        n_threads = budget_threads()
        factor = self._factor(16 * n * k, f"log_marginal_likelihood with {k} column(s) in y",
                              "fit on a subsample", max_memory, n_threads)
        return unit_solve(factor, Y, n_threads, self.lam)[2]

    def _latent_covariance(self, X, n_threads, max_memory):
        """K(X, X) - V^T V, V = L^{-1} K(X_fit, X): m x m, for a modest number of points."""
        n, m = self.X_fit_.shape[0], X.shape[0]
        factor = self._factor(8 * n * m + 8 * m * m, f"the posterior covariance at {m} points",
                              "pass fewer points", max_memory, n_threads)
        V = _linalg.solve_triangular(
            factor, _kernel_matrix_trusted(self._kind, self._bandwidth, self.X_fit_, X,
                                           n_threads), lower=True, n_threads=n_threads)
        del factor
        cov = _kernel_matrix_trusted(self._kind, self._bandwidth, X, X, n_threads)
        cov -= _linalg.matmul(V, V, trans_a=True, n_threads=n_threads)
        return cov

    def _latent_variance(self, X, n_threads, max_memory):
        """The posterior variance at X: from the n x n factor, or, for a PCG fit where that
        costs more or does not fit, given the nearest training targets and global summaries
        of them all (:mod:`hkern.exact.variance`, no n x n matrix)."""
        n, m = self.X_fit_.shape[0], X.shape[0]
        var = kernel_diag(X, kernel=self.kernel, sigma=self._bandwidth)
        if self.n_iter_ is not None and self._conditions(n, m, max_memory):
            return _conditional.conditional_variance(
                self.kernel, self._bandwidth, self.X_fit_, self.lam, X, var,
                n_threads=n_threads, max_memory=max_memory)
        step = min(m, block_rows(m, n))
        factor = self._factor(16 * n * step + 8 * m, f"the posterior variance at {m} points",
                              "fit on a subsample", max_memory, n_threads)
        for start in range(0, m, max(step, 1)):
            stop = min(m, start + step)
            V = _linalg.solve_triangular(
                factor, _kernel_matrix_trusted(self._kind, self._bandwidth, self.X_fit_,
                                               X[start:stop], n_threads),
                lower=True, n_threads=n_threads)
            var[start:stop] -= np.einsum("ij,ij->j", V, V)
            del V     # before the next block's kernel matrix and its copy (the 16 n step bytes)
        return var

    @staticmethod
    def _conditions(n, m, max_memory):
        """Whether the PCG model's variance conditions (hkern.exact.variance) rather than
        factorises: when n is above its neighbours and the factor (n^3 / 3 + n^2 m flops)
        costs more or its 8 n^2 bytes exceed the memory limit."""
        if n <= _conditional.NEIGHBOURS:
            return False
        factor_flops = n ** 3 / 3.0 + float(n) * n * m
        return (_conditional.conditional_flops(n, m) < factor_flops
                or 8 * n * n + 16 * n * min(m, block_rows(m, n)) > resolve_max_memory(max_memory))
