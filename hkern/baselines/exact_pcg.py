"""Exact kernel ridge regression by preconditioned conjugate gradients (fit_exact, "pcg").

(K + lam I) alpha = Y is solved by block CG (:func:`hkern.solvers.block_pcg`) preconditioned
with M = F F^T + lam I, F the Nystrom factor of k columns chosen by
:func:`hkern.select_columns` (randomly pivoted Cholesky by default, as Diaz, Epperly, Frangella,
Tropp and Webber, "Robust, randomized preconditioning for kernel ridge regression", 2023, in its
accelerated block form), or with M = K_hier + lam I, the hierarchically compositional kernel of
r landmarks per node (``preconditioner="hck"``, :class:`hkern.hierarchical.preconditioner.
HCKPreconditioner`).
The kernel matrix is stored when it fits ``max_memory`` and recomputed tile by tile by the fused
kernel-product engine at every iteration otherwise; either way the solution is that of
K + lam I, to the requested relative residual.
"""
from __future__ import annotations

import time

from .._memory import check_memory, resolve_max_memory
from ..hierarchical.preconditioner import HCKPreconditioner, hck_preconditioner_bytes
from ..kernels._api import _matvec_bytes
from ..oasis.api import nystrom_factor
from ..oasis.block_rpcholesky import BLOCK
from ..solvers import KernelSystem, NystromPreconditioner
from ._iterative import traced_pcg, validation_error

__all__ = ["PRECONDITIONERS", "default_rank", "pcg_bytes", "solve_pcg"]

PRECONDITIONERS = ("block_rpcholesky", "rpcholesky", "oasis", "greedy", "uniform", "hck")


def default_rank(n):
    """The preconditioner's rank when none is given: 1000 columns, at most a quarter of n."""
    return max(1, min(1000, n // 4))


def pcg_bytes(n, d, k, rank, stored, n_threads, preconditioner="block_rpcholesky"):
    """Peak bytes of :func:`solve_pcg` beyond the inputs: the preconditioner (the Nystrom
    factor, plus for all but block RPCholesky the selection's copy of the columns (16 n rank in
    all), a block's columns and S; or the HCK factors and a solve), CG's five n x k blocks, and
    the stored kernel matrix (8 n^2) or the fused product's tiles."""
    kernel = 8 * n * n if stored else _matvec_bytes(n, n, d, k, n_threads)
    if preconditioner == "hck":
        factor = hck_preconditioner_bytes(n, d, k, rank, n_threads)
    else:
        factor = (8 * n * rank * (1 if preconditioner == "block_rpcholesky" else 2)
                  + 24 * n * BLOCK + 24 * rank * rank)
    return factor + 40 * n * k + kernel


def solve_pcg(inputs, *, preconditioner, rank, tol, max_iter, seed, validation, verbose,
              max_memory, n_threads):
    """(alpha, SolverTrace, iterations) for (K + lam I) alpha = Y (module docstring); the
    arguments are checked."""
    X, Y = inputs.X, inputs.Y
    n, d = X.shape
    k = Y.shape[1]
    # Store K when it fits: each product is then a GEMM instead of n^2 kernel evaluations.
    stored = pcg_bytes(n, d, k, rank, True, n_threads, preconditioner) + inputs.scaled_bytes \
        <= resolve_max_memory(max_memory)
    check_memory(pcg_bytes(n, d, k, rank, stored, n_threads, preconditioner)
                 + inputs.scaled_bytes, max_memory,
                 what=f"fit_exact(solver='pcg') with n={n} and a rank-{rank} preconditioner",
                 fix="choose a smaller r")
    t0 = time.perf_counter()
    if preconditioner == "hck":
        apply_m = HCKPreconditioner(X, rank, kind=inputs.kind, bandwidth=inputs.bandwidth,
                                    lam=inputs.lam, seed=seed, n_threads=n_threads)
    else:
        F = nystrom_factor(X, rank, method=preconditioner, kernel=inputs.kernel,
                           sigma=inputs.bandwidth, seed=seed, n_jobs=n_threads,
                           max_memory=max_memory)
        apply_m = NystromPreconditioner(F, inputs.lam, n_threads)
        del F
    pre_seconds = time.perf_counter() - t0
    apply_a = KernelSystem(inputs.kind, inputs.bandwidth, X, inputs.lam, stored=stored,
                           n_threads=n_threads)
    if verbose:
        print(f"[fit_exact pcg] {preconditioner} preconditioner of rank {apply_m.rank} in "
              f"{pre_seconds:.1f} s; kernel matrix {'stored' if stored else 'recomputed'}",
              flush=True)
    return traced_pcg(
        apply_a, Y, apply_m=apply_m, tol=tol, max_iter=max_iter,
        error=validation_error(validation, inputs, X, n_threads), coef=lambda alpha: alpha,
        label="fit_exact pcg", verbose=verbose, started=t0,
        fix="raise max_iter or the preconditioner's rank r", preconditioner=preconditioner,
        rank=apply_m.rank, preconditioner_seconds=pre_seconds, stored_kernel=stored)
