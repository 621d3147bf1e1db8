"""The result of a column selection (:class:`ColumnSelection`) and what the serial selectors
(:mod:`hkern.oasis.api`) and oASIS-P (:mod:`hkern.oasis.sharded`) share: the stopping floors,
the memory estimate and the factor and inverse of W."""
from __future__ import annotations

import numpy as np

from .. import _linalg
from .._memory import check_memory
from .._model import FittedModel, renamed
from .._threads import budgeted
from .block_rpcholesky import BLOCK

__all__ = ["ColumnSelection", "NEGATIVE_TOL", "NUMERICAL_FLOOR", "initial_columns_error",
           "selection_peak_bytes"]

# Selection stops when the best score falls to this fraction of max diag(G) whatever tol says:
# below it 1/Delta amplifies round-off (doc/specs/oasis.md, section 8, item 6).
NUMERICAL_FLOOR = 1e-12
# A score below -NEGATIVE_TOL * max diag(G) cannot be round-off: the matrix is not PSD.
NEGATIVE_TOL = 1e-8


class ColumnSelection(FittedModel):
    """Selected columns of a PSD matrix G and its Nystrom approximation G~ = C W^{-1} C^T.

    Attributes
    ----------
    indices_ : ndarray (k,)
        Selected columns, in selection order.
    C_ : ndarray (n, k)
        G(:, ``indices_``).
    W_inv_ : ndarray (k, k)
        W^{-1}, W = G(``indices_``, ``indices_``).
    scores_ : ndarray (k,)
        Delta_i = diag(G - G~)_i of each column when it was selected (NaN for the random
        initial columns of oASIS and for uniform sampling).
    F_ : ndarray (n, k)
        Cholesky factor of the approximation, G~ = F F^T (the Nystrom features).
    R_ : ndarray (k, n)
        W^{-1} C^T, so that G~ = C R (computed when read).
    method_ : str
        The selection rule that produced it.
    row_offset_ : int
        Row of the full data that the first row of ``C_`` and ``F_`` is: 0, except on the ranks
        of :func:`hkern.oasis.sharded.oasis_mpi` that hold only their own block of rows.
    comm_rank_, comm_size_ : int
        MPI rank that holds this result and the number of ranks (0 and 1 when serial); not a
        numerical rank, which is ``len(selection)``.
    n_features_in_ : int or None
        Number of columns of the points the kernel was evaluated on; None when a precomputed
        matrix G was given.
    n_jobs : int or None
        The selection's ``n_jobs``: the thread budget of :attr:`R_` and :meth:`approximation`.

    Examples
    --------
    Returned by :func:`oasis` and :func:`select_columns`:

    >>> import numpy as np
    >>> import hkern
    >>> X = np.random.default_rng(0).normal(size=(300, 2))
    >>> sel = hkern.select_columns(X, 20, method="greedy", sigma=1.0)
    >>> G_approx = sel.approximation()
    >>> bool(np.allclose(G_approx, sel.F_ @ sel.F_.T))
    True
    """

    def __init__(self, indices, C, W_inv, scores, F, method, *, n_features, n_jobs=None,
                 row_offset=0, comm_rank=0, comm_size=1):
        super().__init__(n_features=n_features, n_jobs=n_jobs)
        self.indices_ = indices
        self.C_ = C
        self.W_inv_ = W_inv
        self.scores_ = scores
        self.F_ = F
        self.method_ = method
        self.row_offset_ = row_offset
        self.comm_rank_ = comm_rank
        self.comm_size_ = comm_size

    indices = renamed("indices_")
    C = renamed("C_")
    W_inv = renamed("W_inv_")
    scores = renamed("scores_")
    F = renamed("F_")
    R = renamed("R_")
    method = renamed("method_")
    row_offset = renamed("row_offset_")
    rank = renamed("comm_rank_")
    size = renamed("comm_size_")

    @property
    @budgeted
    def R_(self):
        """R = W^{-1} C^T (k, n): G~ = C R."""
        return self.W_inv_ @ self.C_.T

    @budgeted
    def approximation(self, max_memory=None):
        """The dense n x n matrix G~ = C W^{-1} C^T (small n only).

        Parameters
        ----------
        max_memory : int or None
            Most bytes it may allocate (8 n^2 for G~ and 8 n k for C W^{-1}); None (default):
            the memory available when the call starts.
        """
        n, k = self.C_.shape
        check_memory(8 * n * n + 8 * n * k, max_memory,
                     what=f"ColumnSelection.approximation with n={n} (the dense n x n matrix)",
                     fix="use the factors C_, W_inv_ or F_ instead of the dense matrix")
        return self.C_ @ self.W_inv_ @ self.C_.T

    def nystrom(self):
        """Nystrom features F (n, k) with F F^T = G~ (F = C L^{-T}, W = L L^T)."""
        return self.F_

    def __len__(self):
        return len(self.indices_)

    def _repr_fields(self):
        return {"method": repr(self.method_), "k": str(len(self.indices_))}


# Rows of G per block of the symmetry check: a (block x n) temporary of at most 32 MiB.


def _panel_columns(n_columns):
    """Columns OasisCore allocates for F: n_columns rounded up to its 64-column panels."""
    return 64 * ((max(n_columns, 1) + 63) // 64)


def selection_peak_bytes(n_rows, n_columns, method="oasis", n_total=None):
    """Estimated peak bytes a selection of ``n_columns`` = l columns allocates for ``n_rows``
    = m rows of G (beyond its input), the figure passed to :func:`hkern._memory.check_memory`.

    Adaptive methods, in doubles: the core's panels of F (m x l', l' = l rounded up to 64)
    and the F copied out of them (m x l) live together; the panels are freed, then W^{-1}
    needs F, L = F[idx], the identity and the solution (m l + 3 l^2), then C is formed next to
    F and W^{-1} (2 m l + l^2).  Uniform: C, the transposed right-hand side of the triangular
    solve and F (3 m l).  Plus the per-row vectors: the diagonal of all n_total rows, Delta
    and the selection flags of the m rows.
    """
    n_total = n_rows if n_total is None else n_total
    m, ell = n_rows, n_columns
    if method == "uniform":
        peak = 3 * m * ell + 2 * ell * ell
    elif method == "block_rpcholesky":
        # F and C, a block's columns, their update and its product, W^{-1} at the end.
        peak = 2 * m * ell + 3 * m * BLOCK + 3 * ell * ell
    else:
        peak = max(m * (_panel_columns(ell) + ell), m * ell + 3 * ell * ell,
                   2 * m * ell + ell * ell)
    return 8 * (peak + n_total + 2 * m)


# Why random columns give a singular W: duplicate points, or a bandwidth at which the kernel
# cannot tell the points apart (sigma far above their spread: K = ones), or a zero matrix.
_SINGULAR_CAUSES = ("duplicate or nearly identical points, a sigma far above the spread of the "
                    "data, or a zero matrix")


def _cholesky_of_w(W, max_d, what):
    """Cholesky factor of W = G(idx, idx), or a ValueError saying why there is none."""
    try:
        return _linalg.cholesky(W)
    except np.linalg.LinAlgError:
        # The smallest eigenvalue only (dsyevr), on one thread: the same answer for any n_jobs.
        if _linalg.eigh(W, subset=(0, 0))[0][0] < -NEGATIVE_TOL * max(max_d, 1e-300):
            raise ValueError(f"the matrix is not positive semidefinite: its block at the {what} "
                             "has a negative eigenvalue") from None
        raise ValueError(f"the {what} give a singular W = G(idx, idx) ({_SINGULAR_CAUSES}); use "
                         "another seed, or an adaptive method") from None


def initial_columns_error(value, max_d):
    """The ValueError for initial columns whose W is singular or indefinite (score ``value``
    of the column that failed; shared with oASIS-P, which raises it on every rank)."""
    if value < -NEGATIVE_TOL * max_d:
        return ValueError("the matrix is not positive semidefinite: its block at the initial "
                          f"columns has a negative Schur complement ({value:.3g})")
    return ValueError(f"the initial columns give a singular W = G(init, init) "
                      f"({_SINGULAR_CAUSES}); use init=0 or another seed")


def _w_inverse(L, max_d):
    """W^{-1} = (L L^T)^{-1}, or a ValueError when it overflows (an explicit matrix with
    entries near the smallest doubles: 1 / Delta exceeds the largest double)."""
    with np.errstate(over="ignore"):
        W_inv = _linalg.cho_solve(L, np.eye(L.shape[0]))
    if not np.isfinite(W_inv).all():
        raise ValueError(f"W^{{-1}} overflows double precision: the matrix's entries are too "
                         f"small (largest diagonal entry {max_d:.3g}); multiply X by a common "
                         "factor (the selection does not change)")
    return W_inv
