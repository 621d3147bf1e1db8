"""Accelerated randomly pivoted Cholesky: RPCholesky's pivots, found a block at a time.

Sequential RPCholesky (Chen, Epperly, Tropp and Webber 2022) draws each pivot with probability
proportional to the diagonal of the residual G - F F^T, then updates F by one column: k passes
over the n x k factor, n k^2 / 2 memory traffic at vector speed.  Epperly, Tropp and Webber
("Embrace rejection: kernel matrix approximation by accelerated randomly pivoted Cholesky",
2024) draw b candidates at once from the current residual diagonal d (with replacement), and
accept them in order by rejection: candidate j, whose residual diagonal is still H_jj after the
candidates accepted before it in the block (a partial Cholesky of the b x b residual block H),
is accepted with probability H_jj / d_j.  The accepted pivots have exactly the distribution of
sequential RPCholesky's, and the factor grows by all of them in one GEMM-rate update:

    G_T = G(:, T) - F F(T, :)^T,   F <- [F, G_T L^{-T}],   d <- d - rownorms(G_T L^{-T})^2

with L the Cholesky factor of the residual block at the accepted pivots.
"""
from __future__ import annotations

import numpy as np

from .. import _linalg
from .._linalg.segments import update_factor_rows
from .._row_span import SEGMENT_ROWS, RowSpan

__all__ = ["BLOCK", "block_rpcholesky"]

# Candidates drawn per block.  About as many are accepted while the residual diagonal is flat,
# fewer once it concentrates; each block costs one b x b kernel block, its O(b^3) partial
# Cholesky and one n x (accepted) GEMM-rate update.
BLOCK = 128
# The smallest residual, relative to the largest diagonal entry, that a float32 factor accepts
# as a pivot: about a hundred float32 roundings (2^-24 each) of a diagonal entry.
FLOAT32_PIVOT_FLOOR = 2.0**-17


def _accept(H, stop, room, rng):
    """Rejection sampling through the b x b residual block H (overwritten): the positions
    accepted, at most ``room``, their residual diagonals when accepted, and the Cholesky factor
    of H at them (lower, in acceptance order)."""
    proposal = np.diag(H).copy()
    accepted, scores = [], []
    for j in range(H.shape[0]):
        pivot = H[j, j]
        if pivot <= stop or proposal[j] * rng.random() > pivot:
            continue
        accepted.append(j)
        scores.append(float(pivot))
        H[j:, j] /= np.sqrt(pivot)
        H[j + 1:, j + 1:] -= np.outer(H[j + 1:, j], H[j + 1:, j])
        if len(accepted) == room:
            break
    idx = np.asarray(accepted, dtype=np.intp)
    return idx, scores, np.tril(H[np.ix_(idx, idx)])


def block_rpcholesky(columns, block_of, diag, n_columns, stop, rng, n_threads,
                     keep_columns=True, trace_stop=0.0, dtype=np.float64, trace_stop_after=0,
                     span=None):
    """Pivots and factor of accelerated RPCholesky (module docstring).

    Parameters
    ----------
    columns : callable
        ``columns(idx, out)`` -> G(:, idx), (n, len(idx)), written into ``out`` (a
        C-contiguous float64 array of that shape) and returned.
    block_of : callable
        ``block_of(idx)`` -> G(idx, idx).
    diag : ndarray (n,)
        diag(G).
    n_columns : int
        Most pivots.
    stop : float
        The selection ends when the residual diagonal is at most ``stop`` everywhere; a
        candidate whose residual is at most ``stop`` is never accepted.
    rng : numpy.random.Generator
    n_threads : int
    keep_columns : bool
        Keep G(:, indices) (8 n k bytes); a preconditioner needs only F.
    trace_stop : float
        The selection also ends when the residual's trace, sum(diag(G - F F^T)), is at most
        this (a preconditioner that is already good enough), once it has at least
        ``trace_stop_after`` columns.
    dtype : numpy dtype
        F's precision.  float32 halves its memory and runs the n x k updates in single
        precision (a mixed-precision preconditioner); the pivots' residuals, the b x b blocks
        and the triangular solves stay float64.
    span : hkern._row_span.RowSpan, optional
        The rows held here (all n by default): ``diag`` and ``columns`` give those rows
        only, F is returned on them, and the factor's updates run a segment of rows at a time
        (hkern._row_span), so that MPI ranks holding runs of segments
        (fit_exact(solver="pcg", comm=...)) draw the same pivots and hold the same bits as
        one process.

    Returns
    -------
    indices : ndarray (k,) of int
    scores : ndarray (k,)
        Residual diagonal of each pivot when it was accepted.
    F : ndarray (n, k) of ``dtype``
        G ~ F F^T; Fortran-ordered (a view of the first k rows of F^T; hkern._linalg reads
        it in place).
    C : ndarray (n, k) or None
        G(:, indices), if kept; Fortran-ordered too.
    """
    span = RowSpan(diag.shape[0]) if span is None else span
    n, n_local = span.n, diag.shape[0]
    d = diag.astype(np.float64, copy=True)
    if np.dtype(dtype) == np.float32 and n:
        # A float32 factor's residual diagonal is known to about k float32 roundings of the
        # diagonal; a pivot accepted below that divides rounding by its square root, and
        # K - F F^T grew to 1e-3 on duplicated rows (200 distinct points, 10 times each).
        stop = max(stop, FLOAT32_PIVOT_FLOOR * float(span.all_entries(diag).max()))
    # F and C are stored transposed, a column of each in a contiguous row, and returned as
    # views (n, k) of their first k rows: a factor that stops early (the adaptive
    # preconditioner: keggundirected 1139 or 2143 of 3000 columns) then needs no copy, and the
    # rows never filled are never touched (memory is slow to touch for the first time here:
    # the copy of the filled columns and the n x 3000 array cost 2.4 s of a 4 s factor).
    Ft = np.empty((n_columns, n_local), dtype=dtype)
    Ct = np.empty((n_columns, n_local)) if keep_columns else None
    # Each block's n x b columns in the same memory every block: fresh arrays each time
    # faulted in 3 n b doubles a block (keggundirected, n = 57 248: a
    # third of a 2.4 s factor).
    column_work = np.empty(n_local * BLOCK)
    indices, scores = [], []
    k = 0
    while k < n_columns:
        d_all = span.all_entries(d)
        total = d_all.sum()
        if not d_all.max() > stop or not total > 0 or (total <= trace_stop
                                                        and k >= trace_stop_after):
            break
        candidates = rng.choice(n, size=BLOCK, p=d_all / total)
        H = block_of(candidates)
        if k:
            Fc = np.ascontiguousarray(span.columns_at(Ft[:k], candidates))
            H -= _linalg.matmul(Fc, Fc, trans_a=True, n_threads=n_threads)   # F's precision
        at, block_scores, L = _accept(H, stop, n_columns - k, rng)
        if at.size == 0:
            # A block's first candidate is accepted unless its residual, recomputed as
            # G_jj - F_j F_j^T, is at most ``stop``: a block with none accepted drew only
            # candidates whose residual d kept by the updates is rounding (a float32 factor
            # of a smooth kernel: d stays near 1e-7 while G - F F^T is exhausted).  Drawing
            # again would loop without end (keggundirected, sigma 8.3, float32: 1987 empty
            # blocks of 2000); the factor has all the columns its precision resolves.
            break
        chosen = candidates[at]
        b = at.size
        G_T = columns(chosen, column_work[:n_local * b].reshape(n_local, b))
        if Ct is not None:
            Ct[k:k + b] = G_T.T
        Fk = np.ascontiguousarray(span.columns_at(Ft[:k], chosen))
        # F's new columns (G_T - F F(T, :)^T) L^{-T}, in place, a segment of rows at a time.
        update_factor_rows(Ft[:k], Fk, G_T, np.ascontiguousarray(L), SEGMENT_ROWS, n_threads)
        Ft[k:k + b] = G_T.T
        d -= np.einsum("ij,ij->i", G_T, G_T)
        np.maximum(d, 0.0, out=d)
        mine = chosen[(chosen >= span.lo) & (chosen < span.hi)]
        d[mine - span.lo] = 0.0         # exactly interpolated: never drawn again
        indices.extend(int(i) for i in chosen)
        scores.extend(block_scores)
        k += b
    F = Ft[:k].T
    C = None if Ct is None else Ct[:k].T
    return np.asarray(indices, dtype=np.intp), np.asarray(scores), F, C
