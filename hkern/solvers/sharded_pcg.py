"""The exact PCG fit's rows on MPI ranks (fit_exact(solver="pcg", comm=...) and its
hyperparameter selection): each rank's run of whole segments of the rows
(:class:`ShardedSpan`, the interface of :class:`hkern._row_span.RowSpan`), its rows of X for the
kernel products (:class:`ShardedKernelRows`, that of
:class:`hkern.solvers.operators.SerialRows`), and the block-RPCholesky preconditioner built on
them (:func:`sharded_preconditioner`).  With these, :func:`hkern.solvers.exact_pcg.solve_pcg`
runs on every rank the arithmetic of the serial solve (:mod:`hkern.exact.sharded`).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .._row_span import SEGMENT_ROWS, RowSpan
from .._threads import blas_threads
from ..kernels._api import _kernel_matrix_trusted
from ..kernels.sharded import fetch_rows
from ..oasis.block_rpcholesky import block_rpcholesky
from ..oasis.selection import NUMERICAL_FLOOR
from .exact_pcg import ADAPTIVE_RESIDUAL, adaptive_min_rank
from .operators import COLUMN_BLOCK
from .preconditioners import NystromPreconditioner

__all__ = ["ShardedKernelRows", "ShardedSpan", "segment_bounds_of", "shard_rows",
           "sharded_preconditioner"]

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


class ShardedKernelRows:
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


def sharded_preconditioner(rows, inputs, rank, rng, n_threads, adaptive, precision):
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


def shard_rows(state, offsets, inputs):
    """(inputs of this rank's run of segments, :class:`ShardedKernelRows`) for the rows that
    ``inputs`` hold on this rank (the shards ``offsets``): X its rows of the segments that start
    in its shard (the tail fetched from the next ranks), Y all n rows (CG's vectors are whole
    on every rank)."""
    bounds = segment_bounds_of(offsets)
    span = ShardedSpan(state, bounds, int(offsets[-1]))
    X = fetch_rows(state, offsets, inputs.X, bounds)
    Y = span.all_rows(fetch_rows(state, offsets, inputs.Y, bounds))
    local = dataclasses.replace(inputs, X=np.ascontiguousarray(X), Y=Y, single=None)
    return local, ShardedKernelRows(state, span, local.X)


def gathered_X(rows):
    """All n rows of X, received a block at a time (a sharded model predicts on every rank)."""
    X = np.empty((rows.span.n, rows.X.shape[1]))
    for a, block in rows.column_blocks(rows.X):
        X[a:a + block.shape[0]] = block
    return X
