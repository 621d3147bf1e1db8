"""fit_exact(solver="pcg", comm=comm): exact kernel ridge regression on rows sharded over MPI
ranks, bit for bit the serial fit of the concatenated shards.

The serial fit already does its arithmetic on fixed segments of SEGMENT_ROWS global rows and
sums K V over fixed blocks of COLUMN_BLOCK columns (:mod:`hkern._row_span`,
:mod:`hkern.solvers.operators`), so a rank can do its part of it exactly:

* each rank takes the whole segments that start in its shard (the rows past its end, fewer
  than SEGMENT_ROWS, fetched once from the next ranks): its rows of X, of the preconditioner's
  factor F and of every product;
* a product K V: the ranks' columns of X pass, a block of COLUMN_BLOCK at a time, to every
  rank (one allgather each, so that no rank holds all of X), each rank computes its rows with
  the fused engine, and the rows are allgathered;
* the preconditioner: block RPCholesky draws its pivots from the residual diagonal of all n
  rows (allgathered, n numbers a block), and each rank updates its rows of F; F^T R and
  F^T F are summed over segments in global order, the running sum passed from rank to rank;
* CG's vectors (n x k) are whole on every rank, and every rank runs the same recursion.

So for a given seed the pivots, every iterate and the coefficients are those of the serial
fit, for any number of ranks and any shard sizes (empty shards too).  The model is the serial
one: every rank receives X (a block at a time) at the end, to predict on any rows.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .._gp import Evidence, column_quads
from .._mpi import Agreed
from .._parameters import check_parameter
from .._row_span import SEGMENT_ROWS, RowSpan
from .._sharded import prepare_sharded_fit
from .._threads import blas_threads, in_budget
from ..kernels._api import _kernel_matrix_trusted
from ..kernels.sharded import fetch_rows
from ..oasis.block_rpcholesky import block_rpcholesky
from ..oasis.selection import NUMERICAL_FLOOR
from ..solvers.exact_pcg import ADAPTIVE_RESIDUAL, adaptive_min_rank, default_rank, solve_pcg
from ..solvers.operators import COLUMN_BLOCK
from ..solvers.preconditioners import NystromPreconditioner, preconditioner_kind
from ..solvers.trace import check_stopping
from .model import ExactKRR

__all__ = ["ShardedRows", "ShardedSpan", "fit_exact_sharded"]

_CHAIN_TAG = 7301


class ShardedSpan(RowSpan):
    """A rank's run of whole segments of the n rows (the interface of
    :class:`hkern._row_span.RowSpan`); ``bounds[q]`` is rank q's (lo, hi), a partition of
    0 .. n - 1 in rank order."""

    def __init__(self, state, bounds, n):
        self.state, self.bounds, self.n = state, bounds, int(n)
        self.lo, self.hi = bounds[state.rank]
        self.holders = [q for q, (a, b) in enumerate(bounds) if b > a]

    def chain(self, carry, step):
        """The serial chain over every segment: this rank continues the running ``carry``
        from the rank before it with rows, and passes it on; the last one's result is sent to
        every rank."""
        comm, rank = self.state.comm, self.state.rank
        if rank in self.holders:
            i = self.holders.index(rank)
            if i > 0:
                carry = comm.recv(source=self.holders[i - 1], tag=_CHAIN_TAG)
            for a, b in self.segments:
                carry = step(carry, a, b)
            if i + 1 < len(self.holders):
                comm.send(carry, dest=self.holders[i + 1], tag=_CHAIN_TAG)
        return comm.bcast(carry, root=self.holders[-1])

    def fold(self, partials):
        # This rank's terms first (in parallel with the other ranks), then the running sum.
        return super().fold(list(partials))

    def all_rows(self, local):
        local = np.ascontiguousarray(local)
        tail = local.shape[1:]
        width = int(np.prod(tail, dtype=np.int64))
        out = np.empty((self.n,) + tail, dtype=local.dtype)
        counts = [(b - a) * width for a, b in self.bounds]
        self.state.comm.Allgatherv(local.reshape(-1), [out.reshape(-1), counts])
        return out

    all_entries = all_rows

    def rows_at(self, local, rows):
        rows = np.asarray(rows, dtype=np.int64)
        wanted, inverse = np.unique(rows, return_inverse=True)
        edges = np.searchsorted(wanted, [a for a, _ in self.bounds] + [self.n])
        rank = self.state.rank
        mine = np.ascontiguousarray(local[wanted[edges[rank]:edges[rank + 1]] - self.lo])
        tail = local.shape[1:]
        width = int(np.prod(tail, dtype=np.int64))
        out = np.empty((wanted.size,) + tail, dtype=local.dtype)
        self.state.comm.Allgatherv(mine.reshape(-1),
                                   [out.reshape(-1), list(np.diff(edges) * width)])
        return out[inverse.reshape(-1)]

    def columns_at(self, local_t, rows):
        return self.rows_at(np.ascontiguousarray(local_t.T), rows).T


class ShardedRows:
    """A rank's rows of X for :class:`hkern.solvers.KernelSystem` (the interface of
    :class:`hkern.solvers.operators.SerialRows`)."""

    def __init__(self, state, span, X):
        self.state, self.span, self.X = state, span, X

    def rows_at(self, rows):
        return self.span.rows_at(self.X, rows)

    def column_blocks(self, X_held):
        """Every COLUMN_BLOCK rows of the array whose rows here are ``X_held``, in order, one
        allgather each (the rank holds one block at a time besides its own rows)."""
        span, d = self.span, X_held.shape[1]
        for a in range(0, span.n, COLUMN_BLOCK):
            b = min(span.n, a + COLUMN_BLOCK)
            counts = [max(0, min(b, hi) - max(a, lo)) * d for lo, hi in span.bounds]
            s, e = max(a, span.lo), min(b, span.hi)
            mine = np.ascontiguousarray(X_held[s - span.lo:e - span.lo] if e > s
                                        else X_held[:0])
            out = np.empty((b - a, d), dtype=X_held.dtype)
            self.state.comm.Allgatherv(mine.reshape(-1), [out.reshape(-1), counts])
            yield a, out

    def all_agree(self, flag):
        return all(self.state.comm.allgather(bool(flag)))


def segment_bounds_of(offsets):
    """Each rank's (lo, hi): the whole segments that start in its shard (module docstring)."""
    n = int(offsets[-1])
    starts = [min(n, -(-int(o) // SEGMENT_ROWS) * SEGMENT_ROWS) for o in offsets[:-1]]
    return [(starts[q], starts[q + 1] if q + 1 < len(starts) else n)
            for q in range(len(starts))]


def fit_exact_sharded(state, *, X, y, kernel, sigma, lam, task, seed, n_jobs, solver,
                      preconditioner, r, tol, max_iter, validation, verbose, precision,
                      max_memory, comm, criterion="auto"):
    """The sharded fit_exact (module docstring); arguments as fit_exact's, X and y this
    rank's rows (``criterion`` concerns a selection, which a sharded fit does not run)."""
    def check_arguments():
        if isinstance(sigma, str) or isinstance(lam, str):
            raise ValueError("fit_exact on sharded data (comm=...) takes numbers for sigma and "
                             "lam (it selects neither yet): pass those a serial fit_exact on a "
                             "subsample selects (its model's sigma and lam)")
        if solver not in ("pcg", "auto"):
            check_parameter("solver", solver, "fit_exact")
            raise ValueError("fit_exact on sharded data (comm=...) runs preconditioned CG: pass "
                             "solver='pcg'")
        if preconditioner != "block_rpcholesky":
            preconditioner_kind(preconditioner)
            raise ValueError("fit_exact on sharded data (comm=...) builds its preconditioner "
                             "by block RPCholesky on the shards: pass "
                             "preconditioner='block_rpcholesky'")
        check_parameter("precision", precision, "fit_exact")
        if validation is not None:
            raise ValueError("fit_exact on sharded data (comm=...) takes no validation set: "
                             "pass validation=None and score the model afterwards")
        return check_stopping(tol, max_iter), check_parameter("verbose", verbose)

    stopping = state.run(check_arguments)
    arguments = dict(kernel=kernel, sigma=np.asarray(sigma).tolist(), lam=lam, task=task,
                     seed=seed if seed is None or np.isscalar(seed) else "generator",
                     r=r, tol=tol, max_iter=max_iter, precision=precision)
    fit = prepare_sharded_fit(state, X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                              n_jobs=n_jobs, max_memory=max_memory, arguments=arguments)
    (tol, max_iter), verbose = stopping
    n = fit.n
    if n < 2:
        raise Agreed(ValueError("solver='pcg' needs at least 2 training points (its "
                                "preconditioner has rank < n)"))
    rank = default_rank(n) if r is None else state.run(check_parameter, "r", r, "fit_exact",
                                                       n=n)
    state.agree()
    with in_budget(n_jobs) as n_threads:
        return _fit(state, fit, rank, r is None, seed, tol, max_iter, verbose, precision,
                    max_memory, n_threads, n_jobs)


def _fit(state, fit, rank, adaptive, seed, tol, max_iter, verbose, precision, max_memory,
         n_threads, n_jobs):
    inputs = fit.inputs
    bounds = segment_bounds_of(fit.offsets)
    span = ShardedSpan(state, bounds, fit.n)
    X_rows = fetch_rows(state, fit.offsets, inputs.X, bounds)
    Y_all = span.all_rows(fetch_rows(state, fit.offsets, inputs.Y, bounds))
    local = dataclasses.replace(inputs, X=np.ascontiguousarray(X_rows), Y=Y_all, single=None)
    rows = ShardedRows(state, span, local.X)

    def build(precision):
        # A generator of its own for each build, as the serial fit's check_seed(seed) gives.
        return _preconditioner(rows, local, rank, fit.rng(seed), n_threads, adaptive,
                               precision)

    alpha, trace, n_iter = solve_pcg(
        local, preconditioner=preconditioner_kind("block_rpcholesky"), rank=rank, tol=tol,
        max_iter=max_iter, seed=seed, validation=None, verbose=verbose and state.rank == 0,
        max_memory=max_memory, n_threads=n_threads, adaptive=adaptive, precision=precision,
        rows=rows, build=build)
    evidence = Evidence(column_quads(Y_all, alpha), None, fit.n)
    X_all = np.empty((fit.n, local.X.shape[1]))
    for a, block in rows.column_blocks(local.X):
        X_all[a:a + block.shape[0]] = block
    return ExactKRR(X_all, alpha, n_iter=n_iter, solver_trace=trace, evidence=evidence,
                    **inputs.model_params(n_jobs))


def _preconditioner(rows, inputs, rank, rng, n_threads, adaptive, precision):
    """The serial fit's block-RPCholesky preconditioner (hkern.solvers.exact_pcg,
    hkern.oasis.api.nystrom_factor), with this rank's rows of its factor."""
    span, X = rows.span, rows.X
    kind, bandwidth = inputs.kind, inputs.bandwidth
    n, d = span.n, X.shape[1]
    dtype = np.float32 if precision in ("mixed", "auto") else np.float64

    def columns(idx, out):
        return _kernel_matrix_trusted(kind, bandwidth, X, rows.rows_at(idx), n_threads, out=out)

    def block_of(idx):
        Z = rows.rows_at(idx)
        return _kernel_matrix_trusted(kind, bandwidth, Z, Z, n_threads)

    with blas_threads(1):
        pivots, _, F, _ = block_rpcholesky(
            columns, block_of, np.ones(X.shape[0]), rank, NUMERICAL_FLOOR, rng, n_threads,
            keep_columns=False, trace_stop=ADAPTIVE_RESIDUAL * n * inputs.lam if adaptive
            else 0.0, trace_stop_after=adaptive_min_rank(n, d), dtype=dtype, span=span)
    return NystromPreconditioner(F, inputs.lam, n_threads, pivots=pivots, span=span)
