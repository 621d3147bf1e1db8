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

from .._targets import on_grid, power_of_two_at_most

__all__ = ["CGResult", "ConvergenceWarning", "block_pcg", "lanczos_tridiagonal", "unit_columns"]


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
    true_residual : ndarray (k,)
        ||b_j - A x_j|| / ||b_j|| of the returned X, recomputed at the end; ``converged`` is
        judged by it, not by the recursion's (which drifts from it in floating point).
    restarted : ndarray (k,) of bool
        Columns whose recursion met ``tol`` while the true residual did not, and that CG
        restarted from the true residual (once).
    reset : ndarray (k,) of bool
        Columns whose final iterate had a larger true residual than the start, and that were
        returned at the start instead (zero, or the guess x0).
    seconds : list of float
        Seconds from the start to the end of each iteration (index 0: the setup).
    exact : ndarray (k,) of bool
        Columns whose last recorded residual is the true one (``replace_below``'s
        replacement at their last iteration): the check at the end reuses it.
    final_residual : ndarray (n, k)
        The recursion's residual vectors at its end (for that check).
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
    true_residual: np.ndarray | None = None
    restarted: np.ndarray | None = None
    reset: np.ndarray | None = None
    exact: np.ndarray | None = None
    final_residual: np.ndarray | None = field(default=None, repr=False)


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
              record_lanczos=False, exact_a=None, recheck=True, replace_below=None):
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
        :func:`lanczos_tridiagonal`).  The iterates are the same with or without; the
        restart below is then not made (it would mix two Krylov sequences).
    exact_a : callable, optional
        The operator A itself when ``apply_a`` is an approximation of it (a kernel evaluated
        in single precision): the residuals of the starts (x0, the restarts) and the true
        residual at the end come from ``exact_a``, so a restart is a step of iterative
        refinement (up to four are made, while each halves the residual) and ``converged`` is
        judged against A.  ``apply_a`` by default.
    replace_below : float, optional
        With ``exact_a``: reliable updates.  Whenever a column's recursive residual has fallen
        below ``replace_below`` times the largest one since its last replacement, it is
        replaced by the true residual b - A x from ``exact_a`` and the recursion goes on from
        the same iterate and (below) search direction.  The gap between the two residuals
        comes from the approximate products times the steps taken, mostly the large early
        ones; replacing the residual every decade keeps it a decade below the residual, where
        a restart at the end would have to undo all of it (FALKON in mixed precision on
        kin40k: 34 float32 iterations ended at a true residual of 9.3e-3 against tol 1e-3,
        and the restart took 11 more).  At a replacement the last direction is made
        orthogonal to the new residual in the preconditioner's inner product, as the next step
        assumes.  None (default): no replacement.
    recheck : bool
        Recompute the true residual at the end (below).  False skips that product (and the
        restarts it may start) for a solve whose answer is judged otherwise, such as a
        hyperparameter selection's hold-out candidate, ranked by its hold-out error: then
        ``true_residual`` and ``converged`` are the recursion's.

    Returns
    -------
    CGResult
        At the end the true residual B - A X is recomputed (one more product with A).  A
        column whose recursion met ``tol`` but whose true residual did not is restarted once
        from it, for at most as many iterations as it took and within ``max_iter``, and keeps
        the better of the two solutions; ``converged`` is the true residual's verdict.  A
        column whose true residual ends above its start's is returned at the start.

    Raises
    ------
    numpy.linalg.LinAlgError
        If a search direction has non-positive curvature p^T A p (A is not positive definite),
        or the iteration produces NaN or infinity.
    """
    started = time.perf_counter()
    B = np.asarray(B, dtype=np.float64)
    exact_a = exact_a or apply_a
    # The recursion solves for unit right-hand sides on a grid (unit_columns), so that c * B
    # runs on the same bits as B; the answers are scaled back at the end.
    B_user = B
    unit, B = unit_columns(B, tol)
    start = None
    if x0 is not None:
        start = np.asarray(x0, dtype=np.float64).reshape(B.shape)
        x0 = _on_grid(start / unit, tol)
    if callback is not None:
        users_callback = callback

        def callback(it, X, residuals):
            users_callback(it, X * unit, residuals)
    result = _block_pcg(apply_a, B, B_user, unit, apply_m, tol, max_iter, callback, x0,
                        record_lanczos, exact_a, recheck, replace_below, started)
    result.X *= unit
    if start is not None:
        # A column returned at its start (no step taken, or reset to it) is the caller's start
        # itself, not its rounding (a zero column is the zero start of a guess worse than it).
        kept = ((result.n_iter == 0) | result.reset) & np.any(result.X != 0, axis=0)
        result.X[:, kept] = start[:, kept]
    return result


def _block_pcg(apply_a, B, B_user, unit, apply_m, tol, max_iter, callback, x0, record_lanczos,
               exact_a, recheck, replace_below, started):
    """block_pcg's recursion for the right-hand sides B = B_user / unit on the grid; the true
    residuals are those of X * unit (the answer) against B_user."""
    result, R0, X0 = _recursion(apply_a, B, apply_m, tol, max_iter, callback, x0,
                                record_lanczos, started, exact_a,
                                replace_below if exact_a is not apply_a else None)
    k = B.shape[1]
    norms = np.sqrt(_column_dots(B_user, B_user))
    scale = np.where(norms > 0, norms, 1.0)
    if not recheck:
        result.true_residual = np.array(result.residuals[-1], dtype=float)
        result.restarted = np.zeros(k, dtype=bool)
        result.reset = np.zeros(k, dtype=bool)
        return result
    if result.exact.all():
        # Reliable updates replaced every column's last residual R with the true one of the
        # recursion's B: that of B_user / unit is R plus the grid's rounding of B.
        R = result.final_residual + (B_user / unit - B)
        true = np.sqrt(_column_dots(R, R)) / (scale / unit)
    else:
        true = _true_residual(exact_a, B_user, result.X * unit, scale)
    result.restarted = result.converged & (true > tol)
    taken = int(result.n_iter.max()) if k else 0
    # The restart gets at most the iterations the first run took: where the recursion drifts,
    # the conditioning usually limits the attainable residual, and more steps do not help.
    left = min(max_iter - taken, taken)
    if result.restarted.any() and left > 0 and not record_lanczos:
        restarted = result.restarted.copy()
        # With an approximate operator each restart is a step of iterative refinement, which
        # shrinks the residual by the operator's relative error: several, while they halve it.
        for _ in range(1 if exact_a is apply_a else _REFINEMENTS):
            before = true
            true = _restart(apply_a, B, B_user, unit, apply_m, tol, left, callback, result,
                            true, scale, started, exact_a)
            result.restarted = result.restarted & (true > tol) & (true < 0.5 * before)
            left = min(max_iter - int(result.n_iter.max()), taken)
            if not result.restarted.any() or left <= 0:
                break
        result.restarted = restarted
    else:
        result.restarted[:] = False
    # Never worse than the start: CG's iterates approach the solution in the A-norm, not in
    # the residual, and in floating point (a tiny lam) not even that.
    # (the start's residual, relative to the recursion's unit right-hand sides)
    grid_norms = np.sqrt(_column_dots(B, B))
    start = np.sqrt(_column_dots(R0, R0)) / np.where(grid_norms > 0, grid_norms, 1.0)
    result.reset = true > start
    if result.reset.any():
        result.X[:, result.reset] = X0[:, result.reset]
        true[result.reset] = start[result.reset]
    result.true_residual = true
    result.converged = true <= tol
    return result


# Most restarts from the exact operator's residual when the recursion's operator approximates
# it (block_pcg's exact_a: a kernel computed in single precision).
_REFINEMENTS = 4


def _restart(apply_a, B, B_user, unit, apply_m, tol, left, callback, result, true, scale,
             started, exact_a):
    """Restart CG once, from the true residual, for the columns ``result.restarted`` (their
    recursion met tol, their true residual did not), within ``left`` iterations; the record
    and the callback go on as one sequence.  Each column keeps the restart's solution if its
    true residual is smaller, else the one before.  Returns the true residuals afterwards."""
    cols = np.flatnonzero(result.restarted)
    done = len(result.residuals) - 1
    residual = result.residuals[-1].copy()
    residual[cols] = true[cols]

    def report(it, X, res):
        residual[cols] = res
        if it == 0:
            return
        full = result.X.copy()
        full[:, cols] = X
        result.residuals.append(residual.copy())
        result.seconds.append(time.perf_counter() - started)
        if callback is not None:
            callback(done + it, full, residual)

    again, _, _ = _recursion(apply_a, np.ascontiguousarray(B[:, cols]), apply_m, tol, left,
                             report, result.X[:, cols], False, started, exact_a, None)
    result.n_iter[cols] += again.n_iter
    after = _true_residual(exact_a, np.ascontiguousarray(B_user[:, cols]),
                           again.X * unit[cols], scale[cols])
    better = after < true[cols]          # else the iterate before the restart stays
    result.X[:, cols[better]] = again.X[:, better]
    true = true.copy()
    true[cols[better]] = after[better]
    return true


# The grid of the unit right-hand sides, relative to tol: a column's rounding error is at most
# 2^-21 tol (5e-7 tol) of its norm, so it moves no residual that tol judges, nor the answer of
# a system CG solves exactly (MEKA's full-rank K = I: 1e-9 of y; at 2^-13 tol, 1.4e-7).
# Rounding c * b / ||c * b|| lands on the same grid points as b / ||b|| unless an entry is
# within their rounding difference (1e-16 of the entry) of a grid boundary: about 2e-10 / tol
# of the entries (tol 1e-3: one of keggundirected's 57 248 rows with probability 1%).  The
# recursion then repeats the same bits: without the grid, CG's loss of orthogonality magnified
# that rounding to 0.15% of the residual after 85 iterations (pol, n = 3 000, y and 1000 y),
# and the predictive z-scores of fit_exact differed by 6e-3 (issue 52).
_GRID_BELOW_TOL = 2.0 ** -20


def unit_columns(B, tol, norms=None, n=None):
    """(norms, B / norms on the grid): the columns of B scaled to unit norm (a zero column
    stays zero, its norm taken as 1), and rounded to a power-of-two grid of spacing at most
    2 tol _GRID_BELOW_TOL / sqrt(n) (at most tol _GRID_BELOW_TOL of the norm per column in
    all); ``tol=None`` scales without a grid.  On one MPI rank's rows: ``norms`` the columns'
    norms over every rank's rows and ``n`` their number (so that every rank scales and rounds
    alike)."""
    if norms is None:
        n = B.shape[0]
        largest = np.max(np.abs(B), axis=0) if n else np.zeros(B.shape[1])
        largest = np.where(largest > 0, largest, 1.0)
        scaled = B / largest                        # (no overflow in the norms at 1e200)
        norms = largest * np.sqrt(_column_dots(scaled, scaled))
    unit = np.where(norms > 0, norms, 1.0)
    B_exact = B / unit
    if tol is None:
        return unit, B_exact
    spacing = power_of_two_at_most(2.0 * float(np.min(tol)) * _GRID_BELOW_TOL
                                   / np.sqrt(max(n, 1)))
    if not np.isfinite(spacing) or spacing < 1e-15 / np.sqrt(max(n, 1)):
        return unit, B_exact                        # a tol too small for a grid to matter
    return unit, on_grid(B_exact, spacing)


# A warm start is rounded too, to a power-of-two grid of tol _GRID_BELOW_TOL of its largest
# entry (any start is as valid as another, and one at the solution moves by far less than tol).
def _on_grid(X0, tol):
    """X0 rounded to a power-of-two grid of tol * _GRID_BELOW_TOL of its largest entry."""
    largest = float(np.max(np.abs(X0))) if X0.size else 0.0
    if not np.isfinite(largest) or largest == 0.0:
        return X0
    spacing = power_of_two_at_most(largest * float(np.min(tol)) * _GRID_BELOW_TOL)
    if spacing < 1e-15 * largest:
        return X0                                   # a tol too small for a grid to matter
    return on_grid(X0, spacing)


def _true_residual(apply_a, B, X, scale):
    """||b_j - A x_j|| / scale_j for every column, from one product with A."""
    if B.shape[1] == 0:
        return np.zeros(0)
    R = B - apply_a(np.ascontiguousarray(X))
    true = np.sqrt(_column_dots(R, R)) / scale
    if not np.all(np.isfinite(true)):
        raise np.linalg.LinAlgError(_NOT_FINITE)
    return true


_NOT_FINITE = ("conjugate gradients produced NaN or infinity: the system is too ill-conditioned "
               "for floating point (raise lam) or its entries overflow")


def _recursion(apply_a, B, apply_m, tol, max_iter, callback, x0, record_lanczos, started,
               exact_a, replace_below):
    """The CG recursion of :func:`block_pcg`, its start's residual from ``exact_a`` (and its
    reliable updates, with ``replace_below``); returns (CGResult, the start's residual, the
    start)."""
    n, k = B.shape
    R = np.array(B, dtype=np.float64, order="C", copy=True)
    if x0 is None:
        X = np.zeros((n, k))
    else:
        X = np.array(x0, dtype=np.float64, order="C", copy=True).reshape(n, k)
        R -= exact_a(X)
        # A guess whose residual exceeds ||b|| is worse than none (a neighbouring system's
        # solution can be: exact KRR's dual coefficients change fast with the bandwidth);
        # such columns start from zero.
        worse = _column_dots(R, R) > _column_dots(B, B)
        if worse.any():
            X[:, worse] = 0.0
            R[:, worse] = B[:, worse]
    X0, R0 = X.copy(), R.copy()
    norms = np.sqrt(_column_dots(B, B))
    scale = np.where(norms > 0, norms, 1.0)
    residual = np.sqrt(_column_dots(R, R)) / scale
    active = residual > tol
    n_iter = np.zeros(k, dtype=np.intp)
    Z = apply_m(R) if apply_m is not None else R.copy()
    P = Z.copy()
    rz = _column_dots(R, Z)
    if not np.all(np.isfinite(residual)):
        raise np.linalg.LinAlgError(_NOT_FINITE)
    result = CGResult(X, n_iter, ~active, [residual.copy()], [time.perf_counter() - started])
    since = residual.copy()        # the largest residual since the last replacement
    exact = np.zeros(k, dtype=bool)     # whether residual is the true one (replace_below)
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
        if not np.all(np.isfinite(curvature)):
            raise np.linalg.LinAlgError(_NOT_FINITE)
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
        if not np.all(np.isfinite(residual[cols])):
            raise np.linalg.LinAlgError(_NOT_FINITE)
        n_iter[cols] = it
        if replace_below is not None:
            # Reliable updates, and a column stops only on its true residual.
            since[cols] = np.maximum(since[cols], residual[cols])
            due = cols[(residual[cols] < replace_below * since[cols]) | (residual[cols] <= tol)]
            exact[cols] = False
            if due.size:
                R[:, due] = B[:, due] - exact_a(np.ascontiguousarray(X[:, due]))
                Rd = np.take(R, due, axis=1)
                residual[due] = np.sqrt(_column_dots(Rd, Rd)) / scale[due]
                since[due] = residual[due]
                exact[due] = True
        done = residual[cols] <= tol
        active[cols[done]] = False
        running = cols[~done]
        if running.size:
            Rr = np.take(R, running, axis=1)
            Zr = apply_m(Rr) if apply_m is not None else Rr.copy()
            rz_new = _column_dots(Rr, Zr)
            beta = rz_new / rz[running]
            if replace_below is not None:
                # A replaced residual is not orthogonal to the last direction, as CG's next
                # direction needs (going on without this diverged where the two residuals
                # differed by more than the new one): the direction loses its component along
                # z = M^-1 r in the r-inner product (QUDA's reliable updates do the same).
                fix = np.isin(running, due)
                if fix.any():
                    cols_fix = running[fix]
                    Pf = np.take(P, cols_fix, axis=1)
                    Rf, Zf = Rr[:, fix], Zr[:, fix]
                    P[:, cols_fix] = Pf - Zf * (_column_dots(Rf, Pf) / rz_new[fix])
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
    result.exact = exact
    result.final_residual = R
    return result, R0, X0
