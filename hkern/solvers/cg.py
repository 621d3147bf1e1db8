"""Block preconditioned conjugate gradients: the iterative solver of every kernel ridge system.

One CG recursion per column of B (its own step lengths), with the operator and the
preconditioner applied to all the active columns at once, so that one pass over the data (a
kernel block, a tree) serves every output and class.  A column stops when its relative residual
||b_j - A x_j|| / ||b_j|| falls to ``tol``; it then takes no further step, so its iteration count
is its own, and later passes apply the operator to the columns still running only.

On request each column keeps its CG coefficients, from which :func:`lanczos_tridiagonal`
rebuilds the Lanczos tridiagonal matrix of the preconditioned operator M^{-1/2} A M^{-1/2} (what
stochastic Lanczos quadrature needs, :mod:`hkern.solvers.slq`), and the solve can start from a
guess X0 instead of zero.

Every reduction is a column sum over rows in a fixed order (numpy's einsum), so the iterates
are the same for any thread count when the operator and the preconditioner are.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["CGResult", "ConvergenceWarning", "block_pcg", "lanczos_tridiagonal"]


class ConvergenceWarning(UserWarning):
    """An iterative solver stopped at ``max_iter`` before its residual met ``tol``."""


@dataclass
class CGResult:
    """What :func:`block_pcg` returns.

    Attributes
    ----------
    X : ndarray (n, k)
        The solution, one column per column of B.
    n_iter : ndarray (k,) of int
        Iterations each column took until its residual met ``tol`` (``max_iter`` if it did not).
    converged : ndarray (k,) of bool
    residuals : list of ndarray (k,)
        The relative residual of every column after each iteration (index 0: the start), from
        the recursion's residual vectors.
    seconds : list of float
        Seconds from the start to the end of each iteration (index 0: the setup).
    steps, betas : list of list of float, or None
        With ``record_lanczos``: for each column its step lengths alpha_i = r_i^T z_i / p_i^T A p_i
        (one per iteration it took) and its ratios beta_i = r_{i+1}^T z_{i+1} / r_i^T z_i (one per
        new search direction; z = M^{-1} r); :func:`lanczos_tridiagonal` turns them into T.
    """

    X: np.ndarray
    n_iter: np.ndarray
    converged: np.ndarray
    residuals: list = field(default_factory=list)
    seconds: list = field(default_factory=list)
    steps: list | None = None
    betas: list | None = None


def _column_dots(U, V):
    return np.einsum("ij,ij->j", U, V)


def lanczos_tridiagonal(steps, betas):
    """The Lanczos tridiagonal matrix T of one column's preconditioned CG, from its coefficients.

    m CG steps from residual r_0 are m Lanczos steps on P = M^{-1/2} A M^{-1/2} from
    q_1 = M^{-1/2} r_0 / ||M^{-1/2} r_0||, with T_ii = 1/alpha_i + beta_{i-1}/alpha_{i-1} and
    T_{i,i+1} = sqrt(beta_i)/alpha_i (Saad, Iterative Methods for Sparse Linear Systems, ch. 6).
    Hence r_0^T M^{-1/2} f(P) M^{-1/2} r_0 ~ (r_0^T M^{-1} r_0) e_1^T f(T) e_1, the m-point Gauss
    quadrature, exact for polynomials f of degree < 2m; T's extreme eigenvalues approach P's.

    Parameters
    ----------
    steps : sequence of float (m,)
        ``CGResult.steps[j]``.
    betas : sequence of float (at least m - 1)
        ``CGResult.betas[j]`` (a column stopped by ``max_iter`` has one beta more, unused).

    Returns
    -------
    diagonal : ndarray (m,)
    off_diagonal : ndarray (m - 1,)
    """
    steps = np.asarray(steps, dtype=float)
    m = steps.size
    betas = np.asarray(betas, dtype=float)[: max(m - 1, 0)]
    diagonal = 1.0 / steps
    diagonal[1:] += betas / steps[:-1]
    return diagonal, np.sqrt(betas) / steps[:-1]


def block_pcg(apply_a, B, *, apply_m=None, tol=1e-6, max_iter=100, callback=None, x0=None,
              record_lanczos=False):
    """Solve A X = B for a symmetric positive definite A given by its action.

    Parameters
    ----------
    apply_a : callable
        ``apply_a(V)`` -> A V for a C-contiguous V of shape (n, j), any j <= k (a new array).
    B : ndarray (n, k)
        Right-hand sides.
    apply_m : callable, optional
        ``apply_m(R)`` -> M^{-1} R (R C-contiguous), the preconditioner (symmetric positive
        definite, close to A); the identity by default.
    tol : float
        Relative residual at which a column stops.
    max_iter : int
        Most iterations (operator applications after the start).
    callback : callable, optional
        ``callback(iteration, X, residuals)`` after each iteration (0: the start), with the
        current solution and the relative residuals of every column; the iterates are not
        copied (do not modify X).
    x0 : ndarray (n, k), optional
        Starting guess (a warm start: the recursion starts from the residual B - A x0; the
        relative residuals stay relative to ||b_j||); zero by default, and for every column
        whose guess has a larger residual than zero has.
    record_lanczos : bool
        Keep each column's CG coefficients in ``CGResult.steps`` and ``CGResult.betas`` (see
        :func:`lanczos_tridiagonal`).  The iterates are the same with or without.

    Returns
    -------
    CGResult

    Raises
    ------
    numpy.linalg.LinAlgError
        If a search direction has non-positive curvature p^T A p (A is not positive definite).
    """
    started = time.perf_counter()
    n, k = B.shape
    R = np.array(B, dtype=np.float64, order="C", copy=True)
    if x0 is None:
        X = np.zeros((n, k))
    else:
        X = np.array(x0, dtype=np.float64, order="C", copy=True).reshape(n, k)
        R -= apply_a(X)
        # A guess whose residual exceeds ||b|| is worse than none (a neighbouring system's
        # solution can be: exact KRR's dual coefficients change fast with the bandwidth);
        # such columns start from zero.
        worse = _column_dots(R, R) > _column_dots(B, B)
        if worse.any():
            X[:, worse] = 0.0
            R[:, worse] = B[:, worse]
    norms = np.sqrt(_column_dots(B, B))
    scale = np.where(norms > 0, norms, 1.0)
    residual = np.sqrt(_column_dots(R, R)) / scale
    active = residual > tol
    n_iter = np.zeros(k, dtype=np.intp)
    Z = apply_m(R) if apply_m is not None else R.copy()
    P = Z.copy()
    rz = _column_dots(R, Z)
    result = CGResult(X, n_iter, ~active, [residual.copy()], [time.perf_counter() - started])
    if record_lanczos:
        result.steps, result.betas = [[] for _ in range(k)], [[] for _ in range(k)]
    if callback is not None:
        callback(0, X, residual)
    for it in range(1, max_iter + 1):
        if not active.any():
            break
        cols = np.flatnonzero(active)
        Pa = np.take(P, cols, axis=1)        # C-ordered (P[:, cols] need not be)
        AP = apply_a(Pa)
        curvature = _column_dots(Pa, AP)
        if np.any(curvature <= 0.0):
            raise np.linalg.LinAlgError(
                "conjugate gradients met non-positive curvature p^T A p: the system matrix is "
                "not positive definite (raise lam)")
        step = rz[cols] / curvature
        if record_lanczos:
            for j, value in zip(cols, step):
                result.steps[j].append(float(value))
        X[:, cols] += Pa * step
        R[:, cols] -= AP * step
        Ra = np.take(R, cols, axis=1)
        residual[cols] = np.sqrt(_column_dots(Ra, Ra)) / scale[cols]
        n_iter[cols] = it
        done = residual[cols] <= tol
        active[cols[done]] = False
        running = cols[~done]
        if running.size:
            Rr = np.take(R, running, axis=1)
            Zr = apply_m(Rr) if apply_m is not None else Rr.copy()
            rz_new = _column_dots(Rr, Zr)
            beta = rz_new / rz[running]
            P[:, running] = Zr + P[:, running] * beta
            rz[running] = rz_new
            if record_lanczos:
                for j, value in zip(running, beta):
                    result.betas[j].append(float(value))
        result.residuals.append(residual.copy())
        result.seconds.append(time.perf_counter() - started)
        if callback is not None:
            callback(it, X, residual)
    result.converged = ~active
    return result
