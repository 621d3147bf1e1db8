"""FALKON's preconditioned normal equations of Nystrom kernel ridge regression.

With m centres Z among the n training points X, C = K(X, Z) and W = K(Z, Z), Nystrom KRR with
ridge lam (hkern's convention: the lam of K + lam I) has the coefficients alpha of
f(x) = k(x, Z) alpha solving

    H alpha = C^T y,    H = C^T C + lam W.

Rudi, Carratino and Rosasco (FALKON, NeurIPS 2017) precondition H with B = T^{-1} A^{-1}, where
T^T T = W (upper T) and A^T A = (n / m) T T^T + lam I: for uniformly drawn centres
C^T C ~ (n / m) W^2, so B^T H B is close to the identity and conjugate gradients on

    B^T H B beta = B^T C^T y,    alpha = B beta,

converge in a few tens of iterations for any conditioning of H.  (FALKON writes the problem
divided by n, with lam / n for our lam: the same system.)  Since T^{-T} (lam W) T^{-1} = lam I,
one product is B^T H B u = A^{-T} (T^{-T} C^T C T^{-1} A^{-1} u + lam A^{-1} u): four triangular
solves and one pass of the kernel engine over C (K^T (K v), each block of C computed once,
never stored: :func:`hkern.kernels._api._kernel_normal_times_trusted`).

T and A share one m x m array (:func:`hkern._linalg.cholesky_pair`): T in the strict upper
triangle with its diagonal kept aside, A^T in the lower triangle.  When W is numerically
singular (close centres), W + jitter I is factorised instead, the jitter growing from
m * eps (FALKON's choice) by tenfold steps; the system solved is then H with W + jitter I.

:func:`solve_falkon` runs CG on this system with an iterative fit's progress, warning and
record (:mod:`hkern.solvers.trace`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import _linalg
from .._memory import resolve_max_memory
from ..kernels._api import _kernel_matrix_trusted, _kernel_normal_times_trusted, _normal_times_bytes
from .trace import traced_pcg, validation_error

__all__ = ["FalkonStart", "FalkonSystem", "falkon_bytes", "landmarks_name", "solve_falkon"]

# Tenfold jitter steps tried after m * eps before W is declared unfactorisable.
_JITTER_STEPS = 10


def falkon_bytes(n, m, d, k, n_threads):
    """Peak bytes of :class:`FalkonSystem` and of CG on it beyond the inputs: the m x m factor
    pair, the kernel engine's blocks and partial sums, and about ten m x k blocks."""
    return 8 * m * m + _normal_times_bytes(n, m, d, k, n_threads) + 80 * m * k + 8 * n * k


class FalkonSystem:
    """beta -> B^T H B beta, its right-hand side and alpha = B beta (module docstring).

    Parameters
    ----------
    kind : int
        The kernel engine's code.
    bandwidth : float
    X : ndarray (n, d)
        Training points, C-contiguous float64 (already scaled).
    Z : ndarray (m, d)
        Centres, C-contiguous float64.
    lam : float
        The ridge, > 0.
    n_threads : int
        Threads (results identical for any value).
    n_total : int or None
        The number of training points in all (X is one MPI rank's shard of them); default
        ``len(X)``.
    normal_times : callable or None
        ``normal_times(U, V)`` = C^T (C U + V) (U or V None: zero) over every rank's rows, V
        this rank's rows (:class:`hkern.kernels.sharded.ShardedNormalTimes`); None: X is all
        the data and the serial kernel engine computes it.

    Raises
    ------
    ValueError
        If W + jitter I cannot be factorised for any jitter up to 1e-6 or so (duplicated
        centres beyond repair: fewer centres, or an adaptive selection, fix that).

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.solvers import FalkonSystem, block_pcg
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); Z = X[:40].copy(); y = np.sin(X[:, :1])
    >>> system = FalkonSystem(0, 1.0, X, Z, 1e-2)      # Gaussian kernel, sigma = 1
    >>> alpha = system.coef(block_pcg(system, system.rhs(y), tol=1e-10).X)
    >>> C = np.exp(-((X[:, None] - Z[None]) ** 2).sum(-1) / 2)
    >>> H = C.T @ C + 1e-2 * (C[:40] + system.jitter * np.eye(40))
    >>> bool(np.allclose(H @ alpha, C.T @ y))
    True
    """

    def __init__(self, kind, bandwidth, X, Z, lam, n_threads=1, *, n_total=None,
                 normal_times=None):
        self.kind, self.bandwidth, self.X, self.Z = kind, bandwidth, X, Z
        self.lam = float(lam)
        self.n_threads = n_threads
        self._normal_times = normal_times or self._serial_normal_times
        n, m = (X.shape[0] if n_total is None else n_total), Z.shape[0]
        P = _kernel_matrix_trusted(kind, bandwidth, Z, Z, n_threads)
        w_diag = P.diagonal().copy()
        jitter = m * np.finfo(np.float64).eps
        for _ in range(_JITTER_STEPS + 1):
            P.flat[:: m + 1] = w_diag + jitter
            t_diag = _linalg.cholesky_pair(P, n / m, self.lam, n_threads)
            if t_diag is not None:
                break
            # The upper triangle still holds W: restore the lower one and try a larger jitter.
            _linalg.symmetrize(P, from_lower=False)
            jitter *= 10.0
        else:
            raise ValueError(
                f"the kernel matrix of the {m} centres is singular even with {jitter / 10:.1e} "
                "added to its diagonal (centres nearly duplicated): use fewer centres, "
                "landmarks='rpcholesky', or a smaller sigma")
        self.jitter = jitter
        self._P = P
        self._t_diag = t_diag
        self._b_diag = P.diagonal().copy()

    @property
    def rank(self):
        return self.Z.shape[0]

    def on_rows(self, X, normal_times=None):
        """The system of the same centres, ridge and factors for the training points ``X``
        (``normal_times`` as the constructor's, for shards; the factors shared, not copied).
        Its B was built for this system's n, and B^T H B for the new rows is still the exact
        system, preconditioned by A with (n / m) T T^T weighted by the old n: a selection's
        final fit on all rows reuses the chosen hold-out candidate's factors (nine tenths of
        the rows; kin40k, 8192 centres: 6 s of factors saved)."""
        other = object.__new__(FalkonSystem)
        other.__dict__.update(self.__dict__)
        other.X = X
        other._normal_times = normal_times or other._serial_normal_times
        return other

    def _solve_t(self, V, trans):
        """T^{-1} V or T^{-T} V: T's diagonal is swapped into the shared array for the solve."""
        diagonal = self._P.reshape(-1)[:: self._P.shape[0] + 1]
        diagonal[:] = self._t_diag
        try:
            return _linalg.solve_triangular(self._P, V, lower=False, trans=trans,
                                            n_threads=self.n_threads)
        finally:
            diagonal[:] = self._b_diag

    def _solve_a(self, V, trans):
        """A^{-1} V (trans=False) or A^{-T} V, A = (the lower factor)^T."""
        return _linalg.solve_triangular(self._P, V, lower=True, trans=not trans,
                                        n_threads=self.n_threads)

    def _serial_normal_times(self, U, V):
        """C^T (C U + V) by the kernel engine (U or V None: zero)."""
        return _kernel_normal_times_trusted(self.kind, self.bandwidth, self.X, self.Z, U, V,
                                            self.n_threads)

    def rhs(self, Y):
        """B^T C^T Y for targets Y (n, k)."""
        CtY = self._normal_times(None, np.ascontiguousarray(Y))
        return self._solve_a(self._solve_t(CtY, trans=True), trans=True)

    def __call__(self, U):
        """B^T H B U for U (m, j)."""
        V = self._solve_a(U, trans=False)
        W = self._normal_times(self._solve_t(V, trans=False), None)
        W = self._solve_t(W, trans=True)
        W += self.lam * V
        return self._solve_a(W, trans=True)

    def logdet_factor(self):
        """log det A of the second factor (A^T A = (n / m) T T^T + lam I).

        With it, the Nystrom GP's log det(C W^-1 C^T + lam I) = (n - m) log lam
        + log det(B^T H B) + 2 log det A: by Sylvester's identity det(lam I + C W^-1 C^T) =
        lam^(n-m) det H / det W, det W = det(T)^2 (W + jitter I when jittered), and
        det(B^T H B) = det H / (det T det A)^2."""
        return float(np.sum(np.log(np.abs(self._b_diag))))

    def coef(self, beta):
        """alpha = B beta = T^{-1} A^{-1} beta."""
        return self._solve_t(self._solve_a(beta, trans=False), trans=False)


@dataclass
class FalkonStart:
    """A warm start for FALKON (a selection candidate's state): the preconditioned variable
    beta and the :class:`FalkonSystem` it was solved in (None: not kept), whose B beta are the
    coefficients."""

    beta: np.ndarray
    system: FalkonSystem | None

    @classmethod
    def kept(cls, beta, system, max_memory):
        """The start, with the system only when three factor pairs of its size fit
        ``max_memory`` (this one, the next candidate's, and the solve that reuses it)."""
        keep = 3 * 8 * system.rank ** 2 <= resolve_max_memory(max_memory)
        return cls(beta, system if keep else None)

    def system_on(self, X, lam, normal_times=None):
        """The kept system's factors for the rows X (:meth:`FalkonSystem.on_rows`) when they
        were built for this ``lam``; else None."""
        if self.system is None or self.system.lam != lam:
            return None
        return self.system.on_rows(X, normal_times)


def solve_falkon(inputs, Z, *, landmarks, tol, max_iter, validation, verbose, n_threads,
                error=None, x0=None, return_beta=False, system=None, **sharded):
    """(alpha, SolverTrace, iterations) for the Nystrom normal equations with centres Z, by CG
    on FALKON's preconditioned system (:class:`FalkonSystem`) as fit_nystrom(solver="pcg") runs
    it; the arguments and the memory are checked by the caller.  Each iteration is one pass of
    the kernel engine over C = K(X, Z) (computed in cache, never stored) and four triangular
    solves with the m x m factors: memory O(m^2 + n d + n k) for any n, time O(m^3) for the
    factors and O(n m d) per iteration.

    ``x0``: a starting guess for FALKON's preconditioned variable beta (alpha = B beta), e.g. a
    neighbouring candidate's in a hyperparameter selection; ``return_beta`` appends the final
    beta and the :class:`FalkonSystem` to the returned tuple (the next candidate's warm start).
    ``system``: that system, already built for these inputs and centres (its B the one x0 was
    computed with); None builds it.

    On one MPI rank's shard (hkern.baselines.nystrom_sharded): ``sharded`` holds FalkonSystem's
    ``n_total`` and ``sum_over_ranks``, and ``error`` the validation error over every rank's
    validation rows (``validation`` is then ignored)."""
    X, Y = inputs.X, inputs.Y
    t0 = time.perf_counter()
    built = system is None
    if built:
        system = FalkonSystem(inputs.kind, inputs.bandwidth, X, Z, inputs.lam, n_threads,
                              **sharded)
    pre_seconds = time.perf_counter() - t0
    if verbose:
        print(f"[fit_nystrom pcg] preconditioner of {Z.shape[0]} centres "
              f"{'in' if built else 'reused,'} {pre_seconds:.1f} s (jitter {system.jitter:.1e})",
              flush=True)
    beta, trace, n_iter = traced_pcg(
        system, system.rhs(Y), apply_m=None, tol=tol, max_iter=max_iter,
        error=error if sharded or error is not None
        else validation_error(validation, inputs, Z, n_threads),
        coef=system.coef,
        label="fit_nystrom pcg", verbose=verbose, started=t0,
        fix="raise max_iter (or lam: a smaller ridge needs more iterations)",
        preconditioner=landmarks_name(landmarks), rank=Z.shape[0],
        preconditioner_seconds=pre_seconds, stored_kernel=False, jitter=system.jitter, x0=x0)
    if return_beta:
        return system.coef(beta), trace, n_iter, beta, system
    return system.coef(beta), trace, n_iter


def landmarks_name(landmarks):
    """How the centres were chosen, for the trace: a selector's name or "given"."""
    return landmarks if isinstance(landmarks, str) else "given"
