"""Python face of Nystrom column selection: oASIS and the selectors it is compared with."""
from __future__ import annotations

import numpy as np

from .. import _linalg
from .._memory import check_memory
from .._model import prepare_sigma, scaled_copy_bytes
from .._parameters import check_parameter, choices_of
from .._progress import Progress
from .._threads import blas_threads, budget_threads, budgeted, in_budget, resolve_n_jobs
from .._validation import (
    check_array,
    check_seed,
    document_sigma,
)
from ..kernels._api import _kernel_matrix_trusted, kernel_kind
from ._oasis import OasisCore
from .block_rpcholesky import BLOCK, block_rpcholesky
from .selection import (
    NEGATIVE_TOL,
    NUMERICAL_FLOOR,
    ColumnSelection,
    _cholesky_of_w,
    _w_inverse,
    initial_columns_error,
    selection_peak_bytes,
)
from .sharded import oasis_mpi

__all__ = ["oasis", "select_columns", "ColumnSelection", "SELECTORS", "nystrom_factor"]

SELECTORS = choices_of("method")

_SYMMETRY_BLOCK_BYTES = 32 * 2**20


def _symmetry_block_rows(n):
    return max(1, min(n, _SYMMETRY_BLOCK_BYTES // (8 * max(n, 1))))


def _explicit_violations(G, diag):
    """(max |G - G^T|, max (G_ij^2 - G_ii G_jj)), one block of rows at a time (G - G^T whole
    would be two n x n temporaries).  The second is > 0 when a 2 x 2 principal minor is
    negative, which no PSD matrix has: an O(n^2) necessary condition, like the symmetry."""
    n = G.shape[0]
    # Two buffers of half the block each (the second for G_ii G_jj), so the peak stays the
    # one block _check_selection_memory counts.
    rows = max(1, _symmetry_block_rows(n) // 2)
    buf, outer = np.empty((rows, n)), np.empty((rows, n))
    asymmetry = minor = -np.inf
    for lo in range(0, n, rows):
        m = min(rows, n - lo)
        part, products = buf[:m], outer[:m]
        np.subtract(G[lo: lo + m], G[:, lo: lo + m].T, out=part)
        np.abs(part, out=part)
        asymmetry = max(asymmetry, float(part.max()))
        np.square(G[lo: lo + m], out=part)
        np.multiply(diag[lo: lo + m, None], diag[None, :], out=products)
        part -= products
        minor = max(minor, float(part.max()))
    return asymmetry, minor


def _prepare(X, kernel, sigma, max_memory=None):
    """(points or None, explicit G or None, diag, kind, bandwidth, copy bytes) from the user's
    input; with per-feature lengthscales the points are X / sigma (a copy of the given bytes,
    0 otherwise), and the bandwidth 1."""
    if isinstance(kernel, str) and kernel == "precomputed":
        G = check_array(X, "X")
        n = G.shape[0]
        if G.shape[1] != n:
            raise ValueError(f"with kernel='precomputed' X must be a square PSD matrix; got shape "
                             f"{G.shape}")
        scale = max(float(G.max()), -float(G.min()), 1.0)
        diag = np.diag(G).copy()
        asymmetry, minor = _explicit_violations(G, diag)
        if asymmetry > 1e-12 * scale:
            raise ValueError("with kernel='precomputed' X must be symmetric (max |X - X^T| = "
                             f"{asymmetry:.3g})")
        if (diag < 0).any():
            raise ValueError("X is not positive semidefinite: it has a negative diagonal entry "
                             f"({diag.min():.3g})")
        if minor > NEGATIVE_TOL * float(diag.max()) ** 2:
            raise ValueError("X is not positive semidefinite: an entry exceeds the geometric "
                             "mean of its two diagonal entries (X_ij^2 - X_ii X_jj up to "
                             f"{minor:.3g}), so a 2 x 2 principal minor is negative")
        return None, G, diag, 0, 1.0, 0
    points = check_array(X, "X")
    _, kind = kernel_kind(kernel)
    points, _, sigma, lengthscales = prepare_sigma(points, sigma, max_memory)
    # Every hkern kernel has k(x, x) = 1.
    return (points, None, np.ones(points.shape[0]), kind, sigma,
            scaled_copy_bytes(points, lengthscales))


def _check_selection_memory(n, n_columns, method, precomputed, max_memory, copy_bytes=0):
    """check_memory for select_columns, before the selection allocates anything large.

    With an explicit matrix the symmetry check needs a block of rows; the peak is the larger
    of that and the selection's.  ``copy_bytes``: the inputs scaled by lengthscales, held
    throughout.
    """
    need = selection_peak_bytes(n, n_columns, method) + copy_bytes
    if precomputed:
        need = max(need, 8 * _symmetry_block_rows(n) * n + 16 * n)
    check_memory(need, max_memory, what=f"select_columns(method={method!r}) with n={n}, "
                                        f"r={n_columns}",
                 fix="choose a smaller r")


def _n_features(points):
    """The selection's n_features_in_: the columns of the points, None for a precomputed G."""
    return None if points is None else points.shape[1]


def _columns(points, G, kind, sigma, idx, n_threads, out=None):
    """G(:, idx) as an (n, len(idx)) array (written into ``out``, C-contiguous float64 of that
    shape, if given)."""
    if G is not None:
        # C-ordered (G[:, idx] is not, and needed a copy)
        return np.take(G, idx, axis=1, out=out)
    return _kernel_matrix_trusted(kind, sigma, points, np.ascontiguousarray(points[idx]),
                                  n_threads, out=out)


# Probe vectors of the residual test on an explicit matrix (_check_residual): a fixed stream, so
# the test never draws from the user's seed and the selection is unchanged by it.
_PROBES = 2
_PROBE_SEED = 20240531


def _check_residual(G, F, diag, max_d):
    """ValueError unless the residual R = G - F F^T of an explicit matrix passes two necessary
    conditions of positive semidefiniteness.

    R is the Schur complement of the selected block (zero on its rows), so it is PSD when G
    is.  The selection only reads R's diagonal (the scores), and an indefinite G can leave it
    at zero with large entries off it: I - 0.5 * ones has every score 0 after one column while
    its smallest eigenvalue is 1 - n / 2 (issue 31).  A PSD R has a diagonal >= 0 and
    ||R v|| <= trace(R) ||v|| (its 2-norm is at most its trace); two random probes v cost two
    products with G, O(n^2), against the O(n^2) the matrix's validation costs anyway.
    NEGATIVE_TOL * n * max diag(G) covers the rounding of G v - F (F^T v).
    """
    n = G.shape[0]
    residual_diag = diag - np.einsum("ij,ij->i", F, F)
    slack = NEGATIVE_TOL * max(max_d, 1e-300)
    if residual_diag.min() < -slack:
        raise ValueError(
            "X (kernel='precomputed') is not positive semidefinite: the residual G - G~ of the "
            f"selected columns has a negative diagonal entry ({residual_diag.min():.3g}, max "
            f"diagonal of G {max_d:.3g}), beyond round-off; pass a PSD kernel matrix")
    V = np.random.default_rng(_PROBE_SEED).standard_normal((n, _PROBES))
    with blas_threads(1):                  # the same numbers for any n_jobs
        RV = G @ V - F @ (F.T @ V)
    trace = float(np.maximum(residual_diag, 0.0).sum())
    ratio = float((np.linalg.norm(RV, axis=0) / np.linalg.norm(V, axis=0)).max())
    if ratio > trace + slack * n:
        raise ValueError(
            "X (kernel='precomputed') is not positive semidefinite: the residual G - G~ of the "
            f"{F.shape[1]} selected columns has trace {trace:.3g} but ||(G - G~) v|| / ||v|| = "
            f"{ratio:.3g} for a random v, which a PSD residual cannot have (its norm is at most "
            "its trace); pass a PSD kernel matrix")


@budgeted
@document_sigma
def select_columns(X, r, *, method="oasis", kernel="gaussian", sigma=1.0, seed=None, n_jobs=None,
                   tol=0.0, rtol=0.0, init=1, refresh=0, verbose=False, max_memory=None):
    """Select Nystrom columns of the kernel matrix of X (or of a PSD matrix).

    Parameters
    ----------
    X : array_like (n, d), or (n, n) with ``kernel="precomputed"``
    r : int
        Largest number of columns l, 1 <= l <= n.
    method : {"oasis", "greedy", "rpcholesky", "block_rpcholesky", "uniform"}
        The column selector (the same names choose :func:`hkern.fit_nystrom`'s landmarks and
        :func:`hkern.fit_exact`'s Nystrom preconditioner; doc/parameters.md lists them).
        ``oasis``: Patel et al.'s adaptive selection, starting from ``init`` random columns
        and adding argmax Delta; ``greedy``: diagonally pivoted partial Cholesky (argmax
        Delta from the start, i.e. oASIS with ``init=0``); ``rpcholesky``: randomly pivoted
        Cholesky (Chen, Epperly, Tropp, Webber 2022), pivot drawn with probability
        proportional to Delta; ``block_rpcholesky``: the same distribution of pivots, found
        128 candidates at a time by rejection sampling and added to the factor in one
        GEMM-rate update (Epperly, Tropp, Webber 2024; see
        :mod:`hkern.oasis.block_rpcholesky`); ``uniform``: uniform without replacement.
    kernel : str
        A kernel name (see :func:`hkern.kernel_matrix`) or ``"precomputed"``.
    {sigma}
        hkern's convention: the oASIS paper's sigma_paper^2 = 2 sigma^2.  Ignored with
        ``kernel="precomputed"``.
    tol, rtol : float
        Stop when the best score Delta falls to ``max(tol, rtol * max diag(G))`` or below
        (adaptive methods).  Selection also stops at 1e-12 max diag(G), where 1/Delta would
        amplify round-off.
    init : int
        Random initial columns of ``oasis`` (0 starts from the largest diagonal entry).
    seed : None, int or numpy.random.Generator
    refresh : int
        Every ``refresh`` steps recompute every score from the factor (Delta_j = G_jj -
        ||F_j||^2, O(n k)) instead of trusting the incremental updates; 0 (default) never.
    n_jobs : int or None
        Threads for the per-step pass over the rows (and BLAS threads); results are identical
        for any value.  None honours OMP_NUM_THREADS, threadpoolctl limits and the CPUs
        available; -1 every CPU.
    verbose : bool, default=False
        Print one line when the selection starts and one when it ends, with the seconds since
        the call started.
    max_memory : int or None
        Most bytes the selection may allocate; None (default): the memory available when the
        call starts.  The adaptive methods need about 8 n (l + l') bytes (F, n x l, and the
        core's panels of it, l' = l rounded up to a multiple of 64; 8 (2 n l + l^2) when l is
        close to n), ``uniform`` 24 n l (C, F and a transposed copy), an explicit matrix at
        least 8 n^2 (a temporary of its validation).  Checked before the selection allocates
        anything large (see :func:`selection_peak_bytes`).

    Returns
    -------
    ColumnSelection

    Raises
    ------
    ValueError
        For bad arguments, or when an explicit matrix turns out not to be PSD (a score below
        -1e-8 max diag(G), which round-off cannot explain, or a residual G - G~ that no PSD
        matrix leaves: a negative diagonal entry, or a norm above its trace at a random
        probe, checked in O(n^2) after the selection).
    hkern.MemoryLimitError
        (a ValueError) When the estimated peak memory exceeds ``max_memory``.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> sel = hkern.select_columns(X, 50, method="oasis", sigma=1.0, seed=0)
    >>> err = np.linalg.norm(hkern.kernel_matrix(X) - sel.approximation()) / np.linalg.norm(
    ...     hkern.kernel_matrix(X))
    >>> bool(err < 1e-3)
    True
    """
    progress = Progress("select_columns", verbose)
    check_parameter("method", method)
    points, G, diag, kind, sigma, copy_bytes = _prepare(X, kernel, sigma, max_memory)
    n = diag.shape[0]
    n_columns = check_parameter("r", r, "select_columns", n=n)
    tol = check_parameter("tol", tol, "select_columns")
    rtol = check_parameter("rtol", rtol)
    init = check_parameter("init", init, r=n_columns)
    refresh = check_parameter("refresh", refresh)
    rng = check_seed(seed)
    _check_selection_memory(n, n_columns, method, G is not None, max_memory, copy_bytes)
    progress(f"{method}: up to {n_columns} columns of {n}")
    selection = _selection(points, G, diag, kind, sigma, n_columns, method, tol=tol, rtol=rtol,
                           init=init, rng=rng, refresh=refresh, n_jobs=n_jobs)
    if G is not None:          # hkern's own kernels are PSD by construction
        _check_residual(G, selection.F_, diag, float(diag.max()))
    progress(f"{len(selection)} columns selected")
    return selection


def _selection(points, G, diag, kind, sigma, n_columns, method, *, tol, rtol, init, rng,
               refresh, n_jobs):
    """The ColumnSelection of ``method`` on checked inputs (the points and their kernel, or an
    explicit G), inside the caller's thread budget: :func:`select_columns` after its checks."""
    if method == "uniform":
        return _uniform(points, G, diag, kind, sigma, n_columns, rng, n_jobs)
    if method == "block_rpcholesky":
        return _block(points, G, diag, kind, sigma, n_columns, tol, rtol, rng, n_jobs)
    return _adaptive(points, G, diag, kind, sigma, n_columns, method, tol, rtol, init, rng,
                     refresh, n_jobs)


def _select_columns_trusted(X, r, method, *, kind, bandwidth, rng, n_jobs, max_memory):
    """``select_columns(X, r, method=method, seed=rng)`` (its other arguments at their defaults)
    on inputs a fit has already checked, which are not checked again (select_columns scans X's
    n d values and checks sigma against them): X the fit's C-contiguous float64 points, divided
    by any lengthscales; ``kind`` and ``bandwidth`` its kernel's engine code and bandwidth;
    1 <= r <= n; ``method`` a selector's name; ``rng`` a numpy Generator.  The selection's
    memory is checked against ``max_memory`` before it starts, and it runs in the thread
    budget of ``n_jobs``, as select_columns runs."""
    n = X.shape[0]
    _check_selection_memory(n, r, method, False, max_memory)
    with in_budget(n_jobs):
        # Every hkern kernel has k(x, x) = 1.
        return _selection(X, None, np.ones(n), kind, bandwidth, r, method, tol=0.0, rtol=0.0,
                          init=1, rng=rng, refresh=0, n_jobs=n_jobs)


def _uniform(points, G, diag, kind, sigma, n_columns, rng, n_jobs):
    """Uniform sampling without replacement; F = C L^{-T} with W = L L^T (inside
    select_columns' thread budget; ``n_jobs`` is recorded on the result)."""
    n_threads = budget_threads()
    n = diag.shape[0]
    max_d = float(diag.max())
    idx = rng.choice(n, size=n_columns, replace=False)
    C = _columns(points, G, kind, sigma, idx, n_threads)
    L = _cholesky_of_w(np.ascontiguousarray(C[idx]), max_d, "uniformly drawn columns")
    F = _linalg.solve_triangular(L, C.T, lower=True).T.copy()
    return ColumnSelection(idx, C, _w_inverse(L, max_d), np.full(n_columns, np.nan), F,
                           "uniform", n_features=_n_features(points), n_jobs=n_jobs)


def _block_factor(points, G, diag, kind, sigma, n_columns, stop, rng, n_threads,
                  keep_columns, trace_stop=0.0, dtype=np.float64, trace_stop_after=0):
    """block_rpcholesky on the kernel matrix of ``points`` or on an explicit G."""
    def block_of(idx):
        if G is not None:
            return G[np.ix_(idx, idx)]
        Z = np.ascontiguousarray(points[idx])
        return _kernel_matrix_trusted(kind, sigma, Z, Z, n_threads)

    with blas_threads(1):
        return block_rpcholesky(
            lambda idx, out: _columns(points, G, kind, sigma, idx, n_threads, out), block_of,
            diag, n_columns, stop, rng, n_threads, keep_columns=keep_columns, trace_stop=trace_stop,
            dtype=dtype, trace_stop_after=trace_stop_after)


def _block(points, G, diag, kind, sigma, n_columns, tol, rtol, rng, n_jobs):
    """Accelerated RPCholesky (hkern.oasis.block_rpcholesky), inside select_columns' thread
    budget; ``n_jobs`` is recorded on the result."""
    max_d = float(diag.max())
    stop = max(tol, rtol * max_d, NUMERICAL_FLOOR * max_d)
    indices, scores, F, C = _block_factor(points, G, diag, kind, sigma, n_columns, stop, rng,
                                          budget_threads(), keep_columns=True)
    L = _cholesky_of_w(np.ascontiguousarray(C[indices]), max_d, "block-RPCholesky pivots")
    return ColumnSelection(indices, C, _w_inverse(L, max_d), scores, F, "block_rpcholesky",
                           n_features=_n_features(points), n_jobs=n_jobs)


def nystrom_factor(X, r, *, method, kernel, sigma, seed, n_jobs, max_memory, trace_stop=0.0,
                   trace_stop_after=0, dtype=np.float64, return_pivots=False):
    """F (n, r) with K(X, X) ~ F F^T from the columns ``method`` selects, for a preconditioner
    (validated X; the bandwidth ``sigma``).  Block RPCholesky keeps no copy of the columns
    (F alone: n r items of ``dtype``), and stops before r columns once the trace of K - F F^T
    is at most ``trace_stop`` and it has at least ``trace_stop_after`` columns; the other
    methods run :func:`select_columns`' selection on these checked inputs (r columns, F
    rounded to ``dtype``).
    ``return_pivots``: also the rows whose kernel columns F spans, in F's column order (F at
    them is lower triangular: their kernel matrix's Cholesky factor), as ``(F, pivots)``."""
    _, kind = kernel_kind(kernel)
    if method != "block_rpcholesky":
        selection = _select_columns_trusted(X, r, method, kind=kind, bandwidth=sigma,
                                            rng=check_seed(seed), n_jobs=n_jobs,
                                            max_memory=max_memory)
        F = selection.F_.astype(dtype, copy=False)
        return (F, selection.indices_) if return_pivots else F
    n = X.shape[0]
    check_memory(np.dtype(dtype).itemsize * n * r + 8 * (3 * n * BLOCK + r * r + 2 * n),
                 max_memory,
                 what=f"the rank-{r} Nystrom factor of n={n} points", fix="choose a smaller r")
    # Every hkern kernel has k(x, x) = 1.
    pivots, _, F, _ = _block_factor(X, None, np.ones(n), kind, sigma, r, NUMERICAL_FLOOR,
                                    check_seed(seed), resolve_n_jobs(n_jobs), keep_columns=False,
                                    trace_stop=trace_stop, trace_stop_after=trace_stop_after,
                                    dtype=dtype)
    return (F, pivots) if return_pivots else F


def _adaptive(points, G, diag, kind, sigma, n_columns, method, tol, rtol, init, rng, refresh,
              n_jobs):
    """The adaptive selectors (oasis, greedy, rpcholesky) through one OasisCore (inside
    select_columns' thread budget; ``n_jobs`` is recorded on the result)."""
    n_threads = budget_threads()
    n = diag.shape[0]
    max_d = float(diag.max())
    core = OasisCore(n_columns, diag, X=points, G_rows=G, kind=kind, sigma=sigma)
    core.recompute_delta(n_threads)
    indices, scores = [], []
    k0 = init if method == "oasis" else 0
    stop = max(tol, rtol * max_d, NUMERICAL_FLOOR * max_d)
    with blas_threads(1):
        # oASIS's random initial columns enter as forced pivots through the same per-row pass
        # (the incremental Cholesky of W0): the same numbers for any split of the rows, which
        # is what lets oASIS-P on MPI reproduce this selection exactly.
        for i in rng.choice(n, size=k0, replace=False) if k0 else ():
            value = float(core.delta_array[i])
            if not value > NUMERICAL_FLOOR * max_d:
                raise initial_columns_error(value, max_d)
            z = points[i] if points is not None else None
            core.step(core.row(i), value, z=z, global_i=i, local_i=i, n_threads=n_threads)
            indices.append(int(i))
            scores.append(np.nan)
        while core.k < n_columns:
            if refresh and core.k and core.k % refresh == 0:
                core.recompute_delta(n_threads)
            best, arg, total, low = core.pivot()
            if low < -NEGATIVE_TOL * max_d:
                raise ValueError(
                    f"the matrix is not positive semidefinite: a Schur complement score fell to "
                    f"{low:.3g} (max diagonal {max_d:.3g}), beyond round-off")
            if arg < 0 or best <= stop:      # every method stops on the best remaining score
                break
            if method == "rpcholesky":
                i = core.sample(rng.random() * total)
                value = float(core.delta_array[i])
            else:
                i, value = arg, best
            z = points[i] if points is not None else None
            core.step(core.row(i), value, z=z, global_i=i, local_i=i, n_threads=n_threads)
            indices.append(int(i))
            scores.append(float(value))
    indices = np.asarray(indices, dtype=np.intp)
    F = core.F_array
    del core        # its panels of F: freed before C is formed (the peak selection_peak_bytes)
    # C and W^{-1} once, at the end: W = G(idx, idx) = L L^T with L = F[idx] lower triangular.
    W_inv = _w_inverse(np.ascontiguousarray(F[indices]), max_d)
    C = _columns(points, G, kind, sigma, indices, n_threads)
    return ColumnSelection(indices, C, W_inv, np.asarray(scores), F, method,
                           n_features=_n_features(points), n_jobs=n_jobs)


def oasis(X, r, *, kernel="gaussian", sigma=1.0, seed=None, n_jobs=None, tol=0.0, rtol=0.0,
          init=1, refresh=0, comm=None, verbose=False, max_memory=None):
    """oASIS: adaptive Nystrom column selection (Patel, Goldstein, Dyer, Mirhoseini, Baraniuk).

    Each step adds the column i maximising the Schur complement Delta_i = G_ii - b_i^T W^{-1}
    b_i = diag(G - G~)_i, and updates every Delta in O(n k) -- one streaming pass per step.
    Only the selected columns of G are ever formed.  The state is kept in the pivoted-Cholesky
    form G~ = F F^T (round-off does not grow with cond(W), unlike the paper's explicit W^{-1};
    see hkern/oasis/_oasis.pyx); C and W^{-1} are returned as the paper defines them.

    Parameters and return value as :func:`select_columns` with ``method="oasis"``, and

    comm : mpi4py communicator or None
        With a communicator, X is this rank's shard of the data and the call is oASIS-P on
        every rank of ``comm`` (:func:`hkern.oasis.sharded.oasis_mpi`, ``gather=True``: the
        same indices as the serial selection of the concatenated shards, C and F on rank 0),
        as the fits take ``comm``.  None (default): serial.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> X = np.random.default_rng(0).normal(size=(400, 2))
    >>> sel = hkern.oasis(X, r=40, sigma=1.0, seed=0)
    >>> sel.C_.shape, sel.W_inv_.shape
    ((400, 40), (40, 40))
    """
    if comm is not None:
        return oasis_mpi(X, r, kernel=kernel, sigma=sigma, seed=seed, n_jobs=n_jobs, tol=tol,
                         rtol=rtol, init=init, refresh=refresh, comm=comm, verbose=verbose,
                         max_memory=max_memory)
    return select_columns(X, r, method="oasis", kernel=kernel, sigma=sigma, tol=tol,
                          rtol=rtol, init=init, seed=seed, refresh=refresh, n_jobs=n_jobs,
                          verbose=verbose, max_memory=max_memory)
