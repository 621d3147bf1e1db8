"""The rows of an exact kernel ridge system as fixed segments, so that the serial fit and the
fit on MPI shards do the same arithmetic (fit_exact(solver="pcg", comm=...)).

BLAS gives a row of a product bits that depend on the call's shape, not only on the row: a
row of F @ w differs in its last bits between a call on 5003 rows and one on 128 of them (the
kernels treat the tail of M, and small products, their own way).  So every product over the
n rows here is made on fixed segments of SEGMENT_ROWS global rows (the last one shorter), one
BLAS call each, wherever the rows live, and every sum over rows adds the segments' terms in
global order (:meth:`RowSpan.fold`, :meth:`RowSpan.chain`).  On one process a
:class:`RowSpan` holds every segment; on MPI ranks each rank holds a run of whole segments
(:class:`hkern.exact.sharded.ShardedSpan`, the same interface), and the results are bit for
bit those of one process.  The fused kernel engine's row tiles are SEGMENT_ROWS rows too, so
its rows agree as well.
"""
from __future__ import annotations

import numpy as np

__all__ = ["SEGMENT_ROWS", "RowSpan", "segment_bounds"]

# The kernel engine's row tile (TILE_ROWS in hkern/kernels/_kernels.pyx): a run of whole
# segments starts a tile at its first row, as a call on all n rows does.
SEGMENT_ROWS = 128


def segment_bounds(lo, hi, n):
    """[(a, b)] of the global segments that cover rows lo .. hi - 1 (lo a segment's start)."""
    return [(a, min(a + SEGMENT_ROWS, n, hi)) for a in range(lo, hi, SEGMENT_ROWS)]


class RowSpan:
    """All n rows on one process (the serial fit's span).

    Attributes
    ----------
    n : int
        Rows in all.
    lo, hi : int
        The global rows held here (lo .. hi - 1): all of them.
    """

    def __init__(self, n):
        self.n = self.hi = int(n)
        self.lo = 0

    @property
    def segments(self):
        """[(a, b)] global bounds of the segments held here."""
        return segment_bounds(self.lo, self.hi, self.n)

    def local(self, a, b):
        """The local slice of global rows a .. b - 1 (held here)."""
        return slice(a - self.lo, b - self.lo)

    def chain(self, carry, step):
        """``carry = step(carry, a, b)`` for every segment (a, b) in global order, from
        ``carry``; returns the last carry (an array), the same on every process."""
        for a, b in self.segments:
            carry = step(carry, a, b)
        return carry

    def fold(self, partials):
        """The sum of one array per segment held here (``partials``, in order), added in
        global segment order (a copy of the first, then += each next)."""
        parts = iter(partials)

        def step(carry, a, b):
            part = next(parts)
            if carry is None:
                return np.array(part, dtype=np.float64, copy=True)
            carry += part
            return carry
        return self.chain(None, step)

    def all_rows(self, local):
        """The (n, ...) array of every process's rows of ``local`` (here: itself)."""
        return local

    def all_entries(self, local):
        """A vector of n entries from every process's part (here: itself)."""
        return local

    def rows_at(self, local, rows):
        """Rows ``rows`` (global indices, any order, repeats allowed) of the row-distributed
        array whose part held here is ``local``, on every process."""
        return np.take(local, rows, axis=0)

    def columns_at(self, local_t, rows):
        """Columns ``rows`` of the column-distributed (k, n) array whose part held here is
        ``local_t`` (a factor stored transposed), on every process."""
        return np.take(local_t, rows, axis=1)
