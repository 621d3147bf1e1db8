"""Exact kernel ridge regression by preconditioned conjugate gradients (fit_exact, "pcg").

(K + lam I) alpha = Y is solved by block CG (:func:`hkern.solvers.block_pcg`) preconditioned
with M = F F^T + lam I, F the Nystrom factor of k columns chosen by
:func:`hkern.select_columns` (randomly pivoted Cholesky by default, as Diaz, Epperly, Frangella,
Tropp and Webber, "Robust, randomized preconditioning for kernel ridge regression", 2023, in its
accelerated block form), or with any other preconditioner kind the caller hands in
(:class:`hkern.solvers.preconditioners.PreconditionerKind`, looked up by name in the registry of
:mod:`hkern.solvers.preconditioners`, where the Nystrom kinds below register themselves and the
hierarchical package registers M = K_hier + lam I, the hierarchically compositional kernel of r
landmarks per node, ``preconditioner="hck"``,
:data:`hkern.hierarchical.preconditioner.HCK_PRECONDITIONER`).
The kernel matrix is stored when it fits ``max_memory`` and recomputed tile by tile by the fused
kernel-product engine at every iteration otherwise; either way the solution is that of
K + lam I, to the requested relative residual.

``precision="mixed"`` evaluates the kernel products and holds the Nystrom factor in single
precision (half the memory; the float32 engine and sgemm, about twice the speed), while CG's
vectors, its sums and the answer stay float64.  The residual is then recomputed against K + lam
I in float64 at the end, and CG restarts from that residual (steps of iterative refinement,
up to four) when the single-precision products held it above ``tol``: the solution is that of
the float64 system, to ``tol``, or the fit warns with the residual it attained.
``precision="auto"`` runs the mixed solve where float32 reaches the system, by an estimate of eps32
lambda_max(K) / lam made before any solve (:func:`float32_reach`) and for a ``tol`` that float32
reaches without many refinements, and in double precision otherwise; where the mixed solve stops
short of ``tol`` in float64 before ``max_iter``, it goes on in double precision from its solution
(``max_iter`` bounds each of the two).
"""
from __future__ import annotations

import dataclasses
import time
import warnings

import numpy as np

from .. import _linalg
from .._memory import check_memory, resolve_max_memory
from .._parameters import COLUMN_SELECTORS
from .._progress import listening, report
from ..kernels._api import _kernel_matrix_trusted, _matvec_bytes
from ..oasis.api import nystrom_factor
from ..oasis.block_rpcholesky import BLOCK
from .cg import ConvergenceWarning
from .operators import KernelSystem, SerialRows
from .preconditioners import (
    NystromPreconditioner,
    PreconditionerKind,
    float64_gram,
    register_preconditioner,
)
from .trace import MixedPrecisionStall, joined_trace, traced_pcg, validation_error

__all__ = ["MIXED_MAX_REACH", "MIXED_MIN_TOL", "NYSTROM_PRECONDITIONERS", "adaptive_min_rank",
           "auto_precision", "default_rank", "extended_preconditioner", "float32_reach",
           "kernel_storage", "pcg_bytes", "preconditioner_for", "preconditioner_from_pivots",
           "solve_pcg"]


# The preconditioner's rank when none is given.  On kin40k (36 000 points, lam 0.0027, tol
# 1e-2, 2 threads) a rank-3000 Nystrom preconditioner took CG 25 iterations and 46 s in all,
# rank 1000 85 iterations and 89 s: each iteration costs n^2 kernel evaluations, the factor
# n r^2 flops once.  The factor's 8 n r bytes are held to DEFAULT_RANK_BYTES.
DEFAULT_RANK = 3000
DEFAULT_RANK_BYTES = 2**30
# K is stored (each product a GEMM over 8 n^2 bytes) only up to this size: above it the fused
# engine's recomputation is as fast (kin40k: 8 n^2 = 10 GB, whose first touch alone takes 6 s
# here) and the fit stays within O(n r) memory.
STORED_KERNEL_MAX_BYTES = 2**30


# Without a given r the preconditioner's factor also stops growing once the mean diagonal of
# the Nystrom residual K - F F^T is at most this fraction of lam (its trace at most
# fraction * n * lam): the preconditioned matrix is then close to the identity, and further
# columns cost more (n r^2 flops) than the iterations they save.  Measured at the values
# sigma="ard", lam="auto" selects (doc/solvers.md): on elevators the mean is 0.018 lam after
# 1000 columns, where CG needs 3 iterations (11.7 s in all against 29.8 s at rank 3000, the
# same test RMSE); on pol (1.1 lam at 3000 columns) and kin40k the rule does not stop early.
ADAPTIVE_RESIDUAL = 0.02
# ... but not before the factor has cost about one of CG's kernel passes: its n k^2 flops
# against the pass's n^2 kernel entries of d coordinates (an entry's cost about d + 8 flops'
# worth), so not before sqrt(ADAPTIVE_PASS_SHARE n (d + 8)) columns.  Measured at the values
# sigma="ard", lam="auto" selects on keggundirected (57 248 rows, d = 27, 2 threads), where
# a pass takes 3.0 s and 1000 columns 2.2 s: the residual rule alone stopped at 362 columns,
# and CG took 5 iterations, 20.7 s in all; 1000 columns 2 iterations, 12.3 s; 2000 columns
# 1 iteration, 13.1 s (the same test RMSE).  The share puts the floor there (1201 columns).
ADAPTIVE_PASS_SHARE = 0.72


def adaptive_min_rank(n, d):
    """The columns a Nystrom preconditioner built without a given r has at least before the
    residual rule (ADAPTIVE_RESIDUAL) may stop it: about one kernel pass's worth of work."""
    return int(np.sqrt(ADAPTIVE_PASS_SHARE * n * (d + 8)))


def default_rank(n):
    """The preconditioner's rank when none is given: DEFAULT_RANK columns, at most a quarter of
    n and at most DEFAULT_RANK_BYTES of factor."""
    return max(1, min(DEFAULT_RANK, n // 4, DEFAULT_RANK_BYTES // (8 * n)))


def _nystrom_kind(method):
    """The Nystrom preconditioner F F^T + lam I whose factor F has columns chosen by
    :func:`hkern.select_columns` with ``method``."""
    def build(inputs, rank, *, seed, n_threads, max_memory, adaptive=False, dtype=np.float64):
        n, d = inputs.X.shape
        stop = ADAPTIVE_RESIDUAL * n * inputs.lam if adaptive else 0.0
        F, pivots = nystrom_factor(inputs.X, rank, method=method, kernel=inputs.kernel,
                                   sigma=inputs.bandwidth, seed=seed, n_jobs=n_threads,
                                   max_memory=max_memory, trace_stop=stop,
                                   trace_stop_after=adaptive_min_rank(n, d), dtype=dtype,
                                   return_pivots=True)
        return NystromPreconditioner(F, inputs.lam, n_threads, pivots=pivots)

    def peak_bytes(n, d, k, rank, n_threads, itemsize=8):
        # The factor (``itemsize`` bytes an entry), plus for all but block RPCholesky the
        # selection's float64 copy of the columns and F, a block's columns and S.
        factor = itemsize * n * rank + (0 if method == "block_rpcholesky" else 16 * n * rank)
        return factor + 24 * n * BLOCK + 24 * rank * rank
    return PreconditionerKind(method, build, peak_bytes)


# The Nystrom preconditioners, one for each column selector (hkern._parameters.COLUMN_SELECTORS),
# registered by its name (fit_exact(solver="pcg", preconditioner=name) looks them up).
NYSTROM_PRECONDITIONERS = {method: register_preconditioner(_nystrom_kind(method))
                           for method in COLUMN_SELECTORS}


def pcg_bytes(n, d, k, rank, stored, n_threads, preconditioner, precision="double"):
    """Peak bytes of :func:`solve_pcg` beyond the inputs: the preconditioner (its kind's
    ``peak_bytes``), CG's five n x k blocks, and the stored kernel matrix (8 n^2, or 4 n^2 in
    mixed precision, which also holds a float32 copy of X) or the fused product's tiles."""
    itemsize = 4 if precision == "mixed" else 8
    kernel = itemsize * n * n if stored else _matvec_bytes(n, n, d, k, n_threads)
    return (preconditioner.peak_bytes(n, d, k, rank, n_threads, itemsize) + 40 * n * k + kernel
            + (4 * n * d if precision == "mixed" else 0))


def solve_pcg(inputs, *, preconditioner, rank, tol, max_iter, seed, validation, verbose,
              max_memory, n_threads, x0=None, apply_m=None, error=None,
              preconditioner_seconds=0.0, adaptive=False, precision="double", recheck=True,
              rows=None, build=None):
    """(alpha, SolverTrace, iterations) for (K + lam I) alpha = Y (module docstring); the
    arguments are checked, ``preconditioner`` a
    :class:`~hkern.solvers.preconditioners.PreconditionerKind`.

    ``x0``: a starting guess for alpha (a warm start, e.g. a neighbouring candidate's solution
    in a hyperparameter selection).  ``apply_m``: the preconditioner, already built for these
    inputs (:func:`preconditioner_for`) in ``preconditioner_seconds``; None builds it.
    ``error``: a function of the
    iterate called after every iteration instead of the validation error (a selection's
    hold-out error, which may stop a losing candidate by raising).  ``adaptive``: ``rank``
    is the most columns of the Nystrom factor (ADAPTIVE_RESIDUAL), not their number.
    ``precision``: "double", "mixed" or "auto" (module docstring).  ``recheck=False``: no
    true residual at the end (:func:`hkern.solvers.block_pcg`), and in mixed precision no
    float64 operator at all, for a selection's hold-out candidates (ranked by their hold-out
    error; keggundirected: 4 products of 2.5 s in a 68 s selection).
    ``rows``: where the rows of X live (:class:`~hkern.solvers.operators.SerialRows` of
    inputs.X by default; a rank's share on MPI, whose inputs.X are its rows and inputs.Y all
    n); ``build(precision)``: the preconditioner (default :func:`preconditioner_for` of
    these arguments)."""
    if build is None:
        def build(precision):
            return preconditioner_for(inputs, preconditioner, rank, seed=seed,
                                      n_threads=n_threads, max_memory=max_memory,
                                      adaptive=adaptive, precision=precision)
    if precision == "auto":
        return _solve_auto(inputs, preconditioner=preconditioner, rank=rank, tol=tol,
                           max_iter=max_iter, seed=seed, validation=validation, verbose=verbose,
                           max_memory=max_memory, n_threads=n_threads, x0=x0, apply_m=apply_m,
                           error=error, preconditioner_seconds=preconditioner_seconds,
                           adaptive=adaptive, recheck=recheck, rows=rows, build=build)
    X, Y = inputs.X, inputs.Y
    mixed = precision == "mixed"
    stored = kernel_storage(inputs, Y.shape[1], rank, preconditioner, max_memory, n_threads,
                            precision, rows=rows)
    rows = SerialRows(X) if rows is None else rows      # float64: the data's shift
    t0 = time.perf_counter()
    if apply_m is None:
        apply_m = build(precision)
    pre_seconds = time.perf_counter() - t0 + preconditioner_seconds
    apply_a = KernelSystem(inputs.kind, inputs.bandwidth, inputs.float32_X() if mixed else X,
                           inputs.lam, stored=stored, n_threads=n_threads, rows=rows)
    # Mixed precision: the float64 operator for the starts' and the final residuals.
    exact_a = KernelSystem(inputs.kind, inputs.bandwidth, X, inputs.lam, stored=False,
                           n_threads=n_threads, rows=rows) if mixed and recheck else None
    if listening(verbose):
        report(f"[fit_exact pcg] {preconditioner.name} preconditioner of rank {apply_m.rank} "
               f"in {pre_seconds:.1f} s; kernel matrix {'stored' if stored else 'recomputed'}"
               f"{' in single precision' if mixed else ''}", verbose)
    try:
        return traced_pcg(
            apply_a, Y, apply_m=apply_m, tol=tol, max_iter=max_iter, x0=x0,
            error=error or validation_error(validation, inputs, X, n_threads),
            coef=lambda alpha: alpha,
            label="fit_exact pcg", verbose=verbose, started=t0,
            fix="raise max_iter or the preconditioner's rank r",
            preconditioner=preconditioner.name, rank=apply_m.rank,
            preconditioner_seconds=pre_seconds, stored_kernel=stored, exact_a=exact_a,
            precision=precision, recheck=recheck)
    except np.linalg.LinAlgError as error_:
        if not mixed or isinstance(error_, MixedPrecisionStall):
            raise
        raise np.linalg.LinAlgError(
            f"{error_} in single precision: K's float32 rounding (about 1e-7 of its entries) "
            f"outweighs lam={inputs.lam:.3g} there; use precision='double' (or 'auto', which "
            "falls back to it)") from None


# precision="auto" runs mixed up to this float32_reach.  Measured on the five shared sets (6000
# rows, sigma a quarter, half and all of the median distance, lam 1e-1 .. 1e-4, the defaults
# otherwise; doc/solvers.md, "Mixed precision"): the 36 points with a reach up to 0.081 all met
# tol in float64 within 0.021% of the double fit's test RMSE; the 6 from 0.13 to 0.23 did too,
# with up to twice the iterations; from 0.43 on, the mixed solve failed on 11 of 18 points.
MIXED_MAX_REACH = 0.1
# ... and only for a tol at least this: below it the refinement that makes up for float32
# costs iterations (n = 1500, lam 1e-3, tol 1e-8: 61 against 29 in double), and at tol 1e-11
# the mixed solve stalled near 5e-5 where double met it.
MIXED_MIN_TOL = 1e-5
# Rows of the subsample whose kernel matrix estimates lambda_max(K).
_REACH_ROWS = 2000


def float32_reach(inputs, n_threads, rows=None):
    """eps32 lambda_max(K) / lam, estimated from a fixed subsample of m rows as
    (n / m) lambda_max(K_m) (a smooth kernel's top eigenvalue grows with the rows): how far
    float32's rounding of K reaches against the ridge, which sets the relative error of the
    mixed operator and preconditioner in K's leading directions.  ``rows``: where the rows
    live (solve_pcg)."""
    rows = SerialRows(inputs.X) if rows is None else rows
    n = rows.span.n
    m = min(n, _REACH_ROWS)
    Xs = rows.rows_at(np.sort(np.random.default_rng(0).permutation(n)[:m]))
    Ks = _kernel_matrix_trusted(inputs.kind, inputs.bandwidth, Xs, Xs, n_threads)
    v = np.ones(m) / np.sqrt(m)              # K has positive entries: ones is near the top
    top = 0.0
    for _ in range(30):
        w = Ks @ v
        top = float(v @ w)
        v = w / np.linalg.norm(w)
    return float(np.finfo(np.float32).eps) * (n / m) * top / inputs.lam


def auto_precision(inputs, tol, n_threads, rows=None):
    """What precision="auto" starts with: "mixed" where float32 is safe (tol at least
    MIXED_MIN_TOL and float32_reach at most MIXED_MAX_REACH), "double" elsewhere."""
    return "mixed" if tol >= MIXED_MIN_TOL and \
        float32_reach(inputs, n_threads, rows) <= MIXED_MAX_REACH else "double"


def _solve_auto(inputs, *, max_iter, apply_m, preconditioner_seconds, **arguments):
    """solve_pcg with precision="auto": mixed, then double from its solution (up to max_iter
    iterations each) when the mixed solve stopped short of tol before max_iter (its
    refinement stalled, its recursion stalled above tol, or float32 made the system indefinite;
    one record for both).  The double
    solve builds its own float64 preconditioner: where float32 falls short, so may a float32
    factor.  Beyond MIXED_MAX_REACH, or below MIXED_MIN_TOL, double precision from the
    start."""
    if auto_precision(inputs, arguments["tol"], arguments["n_threads"],
                      arguments["rows"]) == "double":
        return solve_pcg(inputs, max_iter=max_iter, apply_m=apply_m, precision="double",
                         preconditioner_seconds=preconditioner_seconds, **arguments)
    # The memory plan is checked before the factor is built, as solve_pcg checks it.
    kernel_storage(inputs, inputs.Y.shape[1], arguments["rank"], arguments["preconditioner"],
                   arguments["max_memory"], arguments["n_threads"], "mixed", rows=arguments["rows"])
    t0 = time.perf_counter()
    if apply_m is None:
        apply_m = arguments["build"]("mixed")
    preconditioner_seconds += time.perf_counter() - t0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            alpha, trace, n_iter = solve_pcg(
                inputs, max_iter=max_iter, apply_m=apply_m, precision="mixed",
                preconditioner_seconds=preconditioner_seconds, **arguments)
        except MixedPrecisionStall as stall:
            # float32's rounding held the recursion above tol: double, from where it stalled.
            trace, stalled, arguments["x0"] = None, True, stall.X
        except np.linalg.LinAlgError:
            # float32's rounding made K + lam I indefinite: all in double, from the start.
            trace, stalled = None, False
    del apply_m                 # the float32 factor is freed before the float64 one is built
    if trace is None:
        alpha, trace, n_iter = solve_pcg(inputs, max_iter=max_iter, apply_m=None,
                                         precision="double", **arguments)
        if stalled:
            trace = dataclasses.replace(trace, precision="mixed (stalled), then double")
        return alpha, trace, n_iter
    if trace.converged or n_iter >= max_iter:       # met tol, or spent the budget
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return alpha, trace, n_iter
    for w in caught:
        if not issubclass(w.category, ConvergenceWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    arguments["x0"] = alpha
    alpha, then, more = solve_pcg(inputs, max_iter=max_iter, apply_m=None, precision="double",
                                  **arguments)
    return alpha, joined_trace(trace, then), n_iter + more


def kernel_storage(inputs, k, rank, preconditioner, max_memory, n_threads, precision="double",
                   rows=None):
    """Whether PCG with k right-hand sides stores K (up to STORED_KERNEL_MAX_BYTES, when it
    fits: each product is then a GEMM instead of n^2 kernel evaluations), after checking that
    the solve fits max_memory.  ``rows``: where the rows live (solve_pcg); on MPI ranks K is
    stored where the serial fit of all the rows stores it (so that both take the same path),
    and only when every rank agrees."""
    n, d = inputs.X.shape
    n_all = n if rows is None else rows.span.n
    itemsize = 4 if precision == "mixed" else 8
    stored = itemsize * n_all * n_all <= STORED_KERNEL_MAX_BYTES and pcg_bytes(
        n_all, d, k, rank, True, n_threads, preconditioner, precision) + inputs.scaled_bytes \
        <= resolve_max_memory(max_memory)
    if rows is not None:
        stored = rows.all_agree(stored)
    check_memory(pcg_bytes(n, d, k, rank, stored, n_threads, preconditioner, precision)
                 + inputs.scaled_bytes, max_memory,
                 what=f"fit_exact(solver='pcg') with n={n} and a rank-{rank} preconditioner",
                 fix="choose a smaller r")
    return stored


def preconditioner_for(inputs, preconditioner, rank, *, seed, n_threads, max_memory,
                       adaptive=False, precision="double"):
    """M^{-1} for M close to K + lam I of the prepared ``inputs``, of the ``preconditioner``
    kind and ``rank``: for the Nystrom kinds F F^T + lam I (``adaptive``: at most ``rank``
    columns, fewer once the residual is small against lam, ADAPTIVE_RESIDUAL;
    ``precision="mixed"``: F in float32)."""
    dtype = np.float32 if precision in ("mixed", "auto") else np.float64
    return preconditioner.build(inputs, rank, seed=seed, n_threads=n_threads,
                                max_memory=max_memory, adaptive=adaptive, dtype=dtype)


def extended_preconditioner(apply_m, X, rows, kind, bandwidth, lam, n_threads, max_memory):
    """The Nystrom preconditioner of all rows of ``X`` (scaled inputs) from ``apply_m``, one
    built on ``X[rows]`` (sorted row indices) with its pivots: F on the other rows is
    K(x, Z) T^{-T}, with Z the pivots' points and T = F at the pivots (lower triangular, their
    kernel matrix's Cholesky factor), which is how F extends the Nystrom approximation
    K(X, Z) K(Z, Z)^{-1} K(Z, X) on the rows it was built on.  The same pivots, the same kind of
    preconditioner: a selection's final fit on all rows reuses its chosen candidate's factor
    (n_held x k kernel entries and a triangular solve, instead of a new factor).  None when
    ``apply_m`` has no pivots, or when the two factors together would not fit ``max_memory``
    (the caller then builds a new one, after freeing the old)."""
    pivots = getattr(apply_m, "pivots", None)
    if pivots is None:
        return None
    F = apply_m.F
    n, k = X.shape[0], F.shape[1]
    if F.itemsize * (n + F.shape[0]) * k + 8 * (_EXTEND_ROWS + k) * k \
            > resolve_max_memory(max_memory):
        return None
    held = np.setdiff1d(np.arange(n), rows, assume_unique=True)
    T = np.tril(F[pivots].astype(np.float64))
    Z = np.ascontiguousarray(X[rows[pivots]])
    full = np.empty((n, k), dtype=F.dtype)
    full[rows] = F
    gram = apply_m.gram.copy()          # F^T F: the built rows' plus the new rows'
    _nystrom_rows(full, held, X, Z, T, kind, bandwidth, n_threads, gram)
    return NystromPreconditioner(full, lam, n_threads, pivots=rows[pivots], gram=gram)


def preconditioner_from_pivots(pivot_rows, T, X, kind, bandwidth, lam, n_threads, gram=None,
                               rows=None):
    """The Nystrom preconditioner of all rows of ``X`` (scaled inputs) from the pivots of one
    built on ``rows`` of them: F = K(X, Z) T^{-T}, with Z = X[pivot_rows] and T the lower
    triangular factor of K(Z, Z) that factor had at its pivots (``extended_preconditioner``'s
    formula on every row), F in float64; ``gram``, that factor's F^T F on ``rows``, spares
    those rows' share of F^T F (n k^2 flops, as much as the solve).  A selection's candidate
    keeps these (k^2 doubles each) instead of its n x k factor, which doubled the
    selection's peak memory (kin40k in double: 2.05 GiB)."""
    n, k = X.shape[0], T.shape[0]
    Z = np.ascontiguousarray(X[pivot_rows])
    F = np.empty((n, k))
    counted = None
    if gram is None:
        gram = np.zeros((k, k))
    else:
        gram = gram.copy()
        counted = np.ones(n, dtype=bool)
        counted[slice(None) if rows is None else rows] = False
    _nystrom_rows(F, np.arange(n), X, Z, T, kind, bandwidth, n_threads, gram, counted)
    return NystromPreconditioner(F, lam, n_threads, pivots=np.asarray(pivot_rows), gram=gram)


def _nystrom_rows(F, targets, X, Z, T, kind, bandwidth, n_threads, gram, counted=None):
    """F[targets] = K(X[targets], Z) T^{-T}, _EXTEND_ROWS rows at a time, and their F^T F added
    to ``gram`` (only the rows ``counted`` marks, when given)."""
    for start in range(0, targets.size, _EXTEND_ROWS):
        part = targets[start:start + _EXTEND_ROWS]
        C = _kernel_matrix_trusted(kind, bandwidth, np.ascontiguousarray(X[part]), Z, n_threads)
        F[part] = _linalg.solve_triangular(T, C, lower=True, trans=True, left=False,
                                           n_threads=n_threads, overwrite_b=True)
        new = part if counted is None else part[counted[part]]
        if new.size:
            gram += float64_gram(F[new], n_threads)


# Rows of the held-out kernel block an extension computes at a time (4096 x 3000 float64: 98 MB).
_EXTEND_ROWS = 4096
