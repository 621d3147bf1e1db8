"""The kernel engine's K(X, Z)^T (K(X, Z) U + V) on rows sharded over MPI ranks, bit for bit
the serial sum.

The serial engine (hkern/kernels/_kernels.pyx, kernel_normal_times) cuts the n rows into
blocks of ``rows`` rows and the blocks into slabs; each slab's partial sum adds its blocks'
products in order, and the slabs are added in order.  That layout depends on (n, m) only, so
each rank can run exactly the serial arithmetic on its part of it:

* a rank computes the blocks that start in its rows; the rows a block needs beyond them (at
  most rows - 1, from the next ranks) are fetched once (:func:`fetch_rows`);
* a slab that starts on an earlier rank is continued from that rank's partial sum (one
  point-to-point message of m x k numbers), exactly as the serial loop continues it;
* the finished slabs are allgathered and added in slab order on every rank.

So every rank holds the serial result for any number of ranks and any shard sizes.
"""
from __future__ import annotations

import numpy as np

from ._api import _centred_for_accuracy
from ._kernels import kernel_normal_times_blocks, normal_times_layout

__all__ = ["ShardedNormalTimes", "fetch_rows"]


def fetch_rows(state, offsets, local, wanted):
    """Rows of the global array (sharded as ``offsets``, this rank's rows ``local``) that each
    rank wants: ``wanted[q] = (a, b)`` is rank q's range of global rows (the same list on every
    rank).  One alltoallv; returns this rank's rows a:b."""
    rank, size = state.rank, state.size
    width = int(np.prod(local.shape[1:], dtype=np.int64))
    lo, hi = int(offsets[rank]), int(offsets[rank + 1])
    send_counts = np.zeros(size, dtype=np.int64)
    send_parts = []
    for q, (a, b) in enumerate(wanted):
        s, e = max(a, lo), min(b, hi)
        if e > s:
            send_parts.append(local[s - lo:e - lo].reshape(-1))
            send_counts[q] = (e - s) * width
    a, b = wanted[rank]
    recv_counts = np.array([max(0, min(b, offsets[p + 1]) - max(a, offsets[p])) * width
                            for p in range(size)], dtype=np.int64)
    send = np.concatenate(send_parts) if send_parts else np.empty(0)
    recv = np.empty(int(recv_counts.sum()))
    state.comm.Alltoallv([np.ascontiguousarray(send, dtype=np.float64), send_counts],
                         [recv, recv_counts])
    return recv.reshape((b - a,) + tuple(local.shape[1:]))


class ShardedNormalTimes:
    """``(U, V) -> K(X, Z)^T (K(X, Z) U + V)`` for X sharded over the ranks (module docstring);
    a collective: every rank calls it with the same U (m x k) and its own rows of V.

    Parameters
    ----------
    state : hkern._mpi.RankState
    offsets : ndarray (size + 1,)
        The shards' global row offsets.
    X_local : ndarray (n_local, d)
        This rank's rows (C-contiguous float64, already scaled).
    Z : ndarray (m, d)
        The centres, the same on every rank.
    kind, bandwidth, n_threads
        As for the serial engine.
    """

    def __init__(self, state, offsets, X_local, Z, kind, bandwidth, n_threads):
        self.state, self.offsets = state, np.asarray(offsets, dtype=np.int64)
        self.Z, self.kind, self.bandwidth, self.n_threads = Z, kind, bandwidth, n_threads
        self.n = int(self.offsets[-1])
        self.rows, self.n_blocks, self.slabs = normal_times_layout(self.n, Z.shape[0])
        rows = self.rows
        # Blocks starting in rank p's rows: b0[p] .. b1[p] - 1 (none for an empty shard).
        self.b0 = -(-self.offsets[:-1] // rows)
        self.b1 = -(-self.offsets[1:] // rows)
        self.b1 = np.maximum(self.b1, self.b0)
        rank = state.rank
        self.first, self.last = int(self.b0[rank]), int(self.b1[rank])
        # This rank's blocks cover global rows first * rows .. end - 1; those past its shard are
        # fetched from the next ranks once.
        self._ranges = []
        for p in range(state.size):
            a = int(max(self.offsets[p + 1], self.b0[p] * rows))
            self._ranges.append((a, int(max(a, min(self.b1[p] * rows, self.n)))))
        self.X_blocks = self.rows_of(X_local)
        # Slab s holds blocks slab_start[s] .. slab_start[s + 1] - 1; it is finished by the
        # rank holding its last block, which sends it in the final allgather.
        self.slab_start = np.array([s * self.n_blocks // self.slabs
                                    for s in range(self.slabs + 1)], dtype=np.int64)
        finisher = np.searchsorted(self.b1, self.slab_start[1:] - 1, side="right")
        self.finished_here = np.flatnonzero(finisher == rank)
        self.finished_counts = np.bincount(finisher, minlength=state.size)
        self._X_centred = None

    # -------------------------------------------------------------- the layout

    def _slab_of(self, b):
        """The slab of block b."""
        return int(np.searchsorted(self.slab_start, b, side="right")) - 1

    def _neighbour(self, step):
        """The nearest rank before (step -1) or after (+1) this one that has blocks."""
        p = self.state.rank + step
        while 0 <= p < self.state.size and self.b1[p] <= self.b0[p]:
            p += step
        return p

    # -------------------------------------------------------------- the product

    def rows_of(self, V_local):
        """This rank's block rows of a sharded (n_local, k) array (its tail fetched): the V
        argument of :meth:`__call__` (a collective)."""
        start = self.first * self.rows - int(self.offsets[self.state.rank])
        tail = fetch_rows(self.state, self.offsets, V_local, self._ranges)
        return np.ascontiguousarray(np.concatenate([V_local[start:], tail]))

    def __call__(self, U, V):
        """K(X, Z)^T (K(X, Z) U + V) on every rank; U (m, k) or None, V this rank's rows
        (n_local, k) or None."""
        V_blocks = None if V is None else self.rows_of(V)
        state, comm = self.state, self.state.comm
        m = self.Z.shape[0]
        k = (U if U is not None else V_blocks).shape[1]
        sums = np.zeros((self.slabs, m, k))
        first, last = self.first, self.last
        X, Z = self._centred()

        def run(b_from, b_to):
            if b_to > b_from:
                off = (b_from - first) * self.rows
                Vb = None if V_blocks is None else np.ascontiguousarray(V_blocks[off:])
                kernel_normal_times_blocks(self.kind, self.bandwidth, self.n, b_from, b_to,
                                           np.ascontiguousarray(X[off:]), Z, U, Vb, sums,
                                           self.n_threads)

        # A slab begun by an earlier rank is continued last, from that rank's partial sum;
        # the other blocks run first, and the partial sum of a slab that a later rank
        # continues is sent as soon as it is done.
        s_first = self._slab_of(first) if first < last else -1
        carried = first < last and self.slab_start[s_first] < first
        cont_end = min(last, int(self.slab_start[s_first + 1])) if carried else first
        requests = []
        state.run(run, cont_end, last)
        if first < last:
            s_last = self._slab_of(last - 1)
            if self.slab_start[s_last + 1] > last and not (carried and s_last == s_first):
                requests.append(comm.Isend(sums[s_last], dest=self._neighbour(+1), tag=s_last))
        if carried:
            comm.Recv(sums[s_first], source=self._neighbour(-1), tag=s_first)
            state.run(run, first, cont_end)
            if self.slab_start[s_first + 1] > last:
                requests.append(comm.Isend(sums[s_first], dest=self._neighbour(+1),
                                           tag=s_first))
        for request in requests:
            request.Wait()
        state.agree()          # a failure in any rank's blocks ends every rank here
        finished = np.empty((self.slabs, m, k))
        comm.Allgatherv(np.ascontiguousarray(sums[self.finished_here]),
                        [finished, self.finished_counts * m * k])
        out = np.zeros((m, k))
        for s in range(self.slabs):
            out += finished[s]
        return out

    def _centred(self):
        """The block rows and centres with the serial engine's shift (it depends on Z only)."""
        if self._X_centred is None:
            self._X_centred = _centred_for_accuracy(self.kind, self.X_blocks, self.Z)
        return self._X_centred
