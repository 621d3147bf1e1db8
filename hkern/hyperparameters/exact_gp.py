"""Type-II maximum likelihood of an exact Gaussian process on a few thousand points.

The GP is y ~ N(0, s2 K + noise I) with K the kernel matrix of x / ls: one lengthscale per
feature (``"ard"``, the squared-exponential kernel), one for all (``"iso"``), or lengthscales
held fixed (``"fixed"``, any kernel family: only s2 and the noise are learnt).  Parameters are
theta = [log ls (d, 1 or none), log s2, log noise].  It is the first stage of the library's
hyperparameter selection (:mod:`hkern.hyperparameters.select`) and GRIEF's initialisation
(doc/specs/grief.md, section 4, and its Corrections 3).

Cost of one evaluation with its gradient at m points: the kernel matrix (m^2 d), a Cholesky
factor (m^3 / 3), the inverse from it (2 m^3 / 3, :func:`hkern._linalg.cho_inverse`) and, for
``"ard"``, one (m, m) x (m, d) product: on this project's 2-core machine, 3.2 ms at m = 500 and
19 ms at m = 1000 (d = 26, two threads).
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from .. import _linalg
from .._threads import blas_threads
from ..kernels._api import _kernel_matrix_trusted

__all__ = ["BOUNDS", "LOG_2PI", "MODES", "OFF_FACTOR", "Workspace", "exact_lml", "fit_exact_gp",
           "fit_exact_ard", "n_lengthscales"]

LOG_2PI = float(np.log(2.0 * np.pi))
MODES = ("ard", "iso", "fixed")

# Search box for the log-parameters, for standardised inputs and targets: keeps L-BFGS-B away
# from overflow; noise >= 1e-6 of the target variance.
BOUNDS = {"log_ls": (np.log(1e-3), np.log(1e3)), "log_s2": (np.log(1e-4), np.log(1e4)),
          "log_noise": (np.log(1e-6), np.log(1e1))}

# An input whose lengthscale exceeds OFF_FACTOR * sqrt(d) (standardised inputs) is switched off:
# its kernel factor stays within exp(-(range / ls)^2 / 2) ~ 1 - 0.08 / d of one over a range of 4.
OFF_FACTOR = 10.0

_GAUSSIAN = 0   # the kernel engine's code for the squared-exponential kernel


def n_lengthscales(mode, d):
    """How many log lengthscales theta starts with: d for "ard", 1 for "iso", 0 for "fixed"."""
    return {"ard": d, "iso": 1, "fixed": 0}[mode]


class Workspace:
    """The three (m, m) matrices of :func:`exact_lml`, kept across the evaluations of a search.

    Fresh matrices would fault in their pages at every evaluation (m = 500: 6 MB, a third of an
    evaluation on this project's machine, whose first touch runs at about 1.7 GB/s).
    """

    def __init__(self, m):
        self.m = m
        self.kernel, self.factor, self.outer = (np.empty((m, m)) for _ in range(3))


def exact_lml(theta, X, Y, *, mode="ard", kind=_GAUSSIAN, lengthscales=None, n_threads=1,
              workspace=None):
    """Log marginal likelihood of the exact GP and its gradient in theta.

    Parameters
    ----------
    theta : ndarray
        [log ls, log s2, log noise]: d lengthscales for ``mode="ard"``, one for ``"iso"``, none
        for ``"fixed"``.
    X : ndarray (m, d)
        C-contiguous float64 inputs.
    Y : ndarray (m,) or (m, k)
        Targets; the columns are independent GPs sharing theta (their LMLs are summed).
    mode : {"ard", "iso", "fixed"}
    kind : int
        Kernel code (only ``"fixed"`` may use another family than the Gaussian: the other
        modes differentiate in the lengthscales).
    lengthscales : ndarray (d,), only for ``"fixed"``
    n_threads : int
        Threads of the kernel matrix, the Cholesky factor and the inverse (results identical for
        any value).
    workspace : Workspace, optional
        Memory for the (m, m) matrices, reused by a search; a fresh one by default.

    Returns
    -------
    lml : float
    grad : ndarray, theta's shape
    """
    m, d = X.shape
    Y = Y.reshape(m, -1)
    k = Y.shape[1]
    q = n_lengthscales(mode, d)
    ls = lengthscales if mode == "fixed" else np.exp(theta[:q])
    s2, noise = np.exp(theta[q]), np.exp(theta[q + 1])
    if mode != "fixed" and kind != _GAUSSIAN:
        raise ValueError("exact_lml differentiates in the lengthscales of the Gaussian kernel only")
    if workspace is None or workspace.m != m:
        workspace = Workspace(m)
    Xs = np.ascontiguousarray(X / ls)
    K = _kernel_matrix_trusted(kind, 1.0, Xs, Xs, n_threads, out=workspace.kernel)
    K *= s2
    C = workspace.factor
    np.copyto(C, K)
    C.flat[:: m + 1] += noise
    L = _linalg.cholesky(C, overwrite=True, n_threads=n_threads)
    alpha = _linalg.cho_solve(L, Y, n_threads=n_threads)
    lml = -0.5 * k * _linalg.cholesky_logdet(L) - 0.5 * np.sum(Y * alpha) - 0.5 * k * m * LOG_2PI
    # d lml / d theta_j = tr(Wm dC/dtheta_j) / 2 with Wm = alpha alpha^T - k C^{-1}.
    Wm = _linalg.cho_inverse(L, overwrite=True, n_threads=n_threads, work=workspace.outer)
    Wm *= -k
    Wm += _linalg.matmul(alpha, alpha, trans_b=True, n_threads=n_threads, out=workspace.outer)
    trace_w = np.trace(Wm)
    WK = np.multiply(Wm, K, out=K)
    grad = np.empty(q + 2)
    if q:
        # For the Gaussian kernel dK/dlog ls_i = K (x_ai - x_bi)^2 / ls_i^2, and
        # sum_ab WK_ab (x_a - x_b)^2 = 2 sum_a x_a^2 rows_a - 2 x^T WK x (x one column of X / ls).
        # (_linalg.matmul and einsum: the same rounding for any thread count, unlike threaded
        # BLAS through numpy's @, so the selected values do not depend on n_jobs.)
        rows = WK.sum(axis=1)
        WKX = _linalg.matmul(WK, Xs, n_threads=n_threads)
        per_feature = np.einsum("ai,a->i", Xs**2, rows) - np.einsum("ai,ai->i", Xs, WKX)
        grad[:q] = per_feature if q == d else per_feature.sum()
    grad[q] = 0.5 * WK.sum()
    grad[q + 1] = 0.5 * noise * trace_w
    return float(lml), grad


def _bounds(q):
    return [BOUNDS["log_ls"]] * q + [BOUNDS["log_s2"], BOUNDS["log_noise"]]


def fit_exact_gp(X, Y, *, mode="ard", kind=_GAUSSIAN, lengthscales=None, theta0=None,
                 maxiter=200, ftol=None, starts=None, n_threads=1):
    """Maximise the exact GP's LML (:func:`exact_lml`) from standardised inputs and targets.

    Without ``theta0`` the searches start at lengthscales sqrt(d) (every squared distance of
    standardised inputs O(1) in units of the lengthscale) and 1 (each input on its own scale),
    both with s2 = 1 and noise 0.1, and the better is kept.  One start is not enough: on
    pumadyn32nm split 1 the sqrt(d) start stops at LML -167.6 with noise 0.071 while the unit
    start reaches 34.2 with noise 0.042.

    With ``mode="ard"``, inputs the best search switched off (lengthscale above
    ``OFF_FACTOR * sqrt(d)``, where the LML is flat in that lengthscale, so no gradient step
    turns the input back on) are re-opened at sqrt(d), the other parameters kept, and one more
    search runs; it is kept if its LML is larger.  On pumadyn32nm split 2 both starts end with 2
    of the 4 relevant inputs (LML -209.1, noise 0.079); the re-opened search finds all 4 (LML
    27.4, noise 0.042).

    ``theta0`` (a warm start, e.g. the optimum on a smaller subsample) replaces the starts by
    one search from it; ``starts`` (a sequence of log lengthscales) replaces the two default
    starts, ``ftol`` L-BFGS-B's relative tolerance on the LML (default scipy's 2.2e-9; a
    starting point for a search on all the data needs far less).

    Returns
    -------
    theta : ndarray
        The best parameters, [log ls, log s2, log noise] as in :func:`exact_lml`.
    lml : float
        Their LML.
    n_evaluations : int
        LML evaluations of all searches.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    d = X.shape[1]
    q = n_lengthscales(mode, d)
    evaluations = 0
    workspace = Workspace(X.shape[0])

    def neg(theta):
        nonlocal evaluations
        evaluations += 1
        lml, g = exact_lml(theta, X, Y, mode=mode, kind=kind, lengthscales=lengthscales,
                           n_threads=n_threads, workspace=workspace)
        return -lml, -g

    options = {"maxiter": maxiter} if ftol is None else {"maxiter": maxiter, "ftol": ftol}

    def search(start):
        # The LML's linear algebra runs on the shim's own threads (n_threads); a threaded BLAS
        # woken by L-BFGS-B's vector steps between evaluations spins against them, which made
        # every evaluation 3x slower on 2 cores (pol, m = 500: 4.7 s against 1.6 s).
        with blas_threads(1):
            return minimize(neg, start, jac=True, method="L-BFGS-B", bounds=_bounds(q),
                            options=options)

    if theta0 is not None:
        best = search(np.asarray(theta0, dtype=float))
        return best.x, float(-best.fun), evaluations
    best = None
    if starts is None:
        starts = (0.5 * np.log(d), 0.0) if q else (0.0,)
    for log_ls in dict.fromkeys(starts):                    # one search when d = 1
        res = search(np.concatenate([np.full(q, log_ls), [0.0, np.log(0.1)]]))
        if best is None or res.fun < best.fun:
            best = res
    off = best.x[:q] > np.log(OFF_FACTOR * np.sqrt(d))
    if mode == "ard" and off.any() and not off.all():
        theta = best.x.copy()
        theta[:q][off] = 0.5 * np.log(d)
        res = search(theta)
        if res.fun < best.fun:
            best = res
    return best.x, float(-best.fun), evaluations


def fit_exact_ard(X, y, maxiter=200):
    """theta (d + 2,) of the SE-ARD GP maximising the LML on standardised X, y (GRIEF's start)."""
    return fit_exact_gp(X, y, mode="ard", maxiter=maxiter)[0]
