"""Nystrom kernel ridge regression by FALKON's preconditioned conjugate gradients
(fit_nystrom, solver="pcg").

The coefficients on the m centres solve the normal equations (C^T C + lam W) alpha = C^T y
(:mod:`hkern.solvers.falkon`): CG on FALKON's preconditioned system, each iteration one pass of
the kernel engine over C = K(X, Z) (computed in cache, never stored) and four triangular solves
with the m x m factors.  Memory O(m^2 + n d + n k) for any n; time O(m^3) for the factors and
O(n m d) per iteration.
"""
from __future__ import annotations

import time

from ..solvers import FalkonSystem
from ._iterative import traced_pcg, validation_error

__all__ = ["solve_nystrom_pcg"]


def solve_nystrom_pcg(inputs, Z, *, landmarks, tol, max_iter, validation, verbose, n_threads,
                      error=None, x0=None, return_beta=False, **sharded):
    """(alpha, SolverTrace, iterations) for the Nystrom normal equations with centres Z (module
    docstring); the arguments and the memory are checked by the caller.  ``x0``: a starting
    guess for FALKON's preconditioned variable beta (alpha = B beta), e.g. a neighbouring
    candidate's in a hyperparameter selection; ``return_beta`` appends the final beta to the
    returned tuple (the next candidate's warm start).

    On one MPI rank's shard (hkern.baselines.nystrom_sharded): ``sharded`` holds FalkonSystem's
    ``n_total`` and ``sum_over_ranks``, and ``error`` the validation error over every rank's
    validation rows (``validation`` is then ignored)."""
    X, Y = inputs.X, inputs.Y
    t0 = time.perf_counter()
    system = FalkonSystem(inputs.kind, inputs.bandwidth, X, Z, inputs.lam, n_threads, **sharded)
    pre_seconds = time.perf_counter() - t0
    if verbose:
        print(f"[fit_nystrom pcg] preconditioner of {Z.shape[0]} centres in {pre_seconds:.1f} s "
              f"(jitter {system.jitter:.1e})", flush=True)
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
        return system.coef(beta), trace, n_iter, beta
    return system.coef(beta), trace, n_iter


def landmarks_name(landmarks):
    """How the centres were chosen, for the trace: a selector's name or "given"."""
    return landmarks if isinstance(landmarks, str) else "given"

