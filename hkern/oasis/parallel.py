"""oASIS-P: oASIS on MPI through mpi4py (spec: shared/spec/oasis.md, section 4).

Run a script that calls :func:`oasis_mpi` under ``mpiexec -n P``, or the command line

    mpiexec -n 4 python -m hkern.oasis.parallel data.npy --n-columns 1000 --sigma 1.0 --seed 0

Rows are split in contiguous blocks over the ranks.  Each rank keeps the pivoted-Cholesky rows
of its block (hkern/oasis/_oasis.pyx) and every step communicates O(P + k + d) numbers: an
allgather of each rank's best candidate (ties go to the smallest global index) and a broadcast,
from the pivot's owner, of its row of F and its point.  Every rank then applies the same update
to its rows with the same per-row arithmetic as the serial code, so for a given seed oASIS-P
selects exactly the indices of :func:`hkern.oasis`.

Requires the optional extra ``pip install "hkern[mpi]"`` (mpi4py and an MPI runtime wheel).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from .._validation import check_int, check_nonnegative, check_seed
from ..kernels._api import _kernel_matrix_trusted
from ._oasis import OasisCore
from .api import NEGATIVE_TOL, NUMERICAL_FLOOR, ColumnSelection, _prepare

__all__ = ["oasis_mpi", "block_layout"]


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("oASIS-P needs mpi4py and an MPI runtime: pip install 'hkern[mpi]'") \
            from None
    return MPI


def block_layout(n, size):
    """Row offsets (size + 1,) of the contiguous blocks: n // size rows each, the first
    n % size ranks one more."""
    counts = np.full(size, n // size, dtype=np.int64)
    counts[: n % size] += 1
    offsets = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def oasis_mpi(X, n_columns, kernel="gaussian", sigma=1.0, tol=0.0, rtol=0.0, init=1, seed=0,
              refresh=0, comm=None, n_jobs=1, gather=True):
    """oASIS with the rows of the kernel matrix distributed over MPI ranks.

    Call it on every rank with the same arguments (``X`` the full data set, each rank uses its
    block of rows).

    Parameters
    ----------
    X : array_like (n, d)
        The data, identical on every rank.
    n_columns, kernel, sigma, tol, rtol, init, refresh
        As for :func:`hkern.oasis` (``kernel="precomputed"`` is not supported here).
    seed : int or numpy.random.Generator
        Must give the same stream on every rank; None draws a seed on rank 0 and broadcasts it.
    comm : mpi4py communicator or None
        Default ``MPI.COMM_WORLD``.
    n_jobs : int
        OpenMP threads per rank (1 when each rank has its own core).
    gather : bool
        Gather C and F to rank 0 (other ranks get their own rows only).

    Returns
    -------
    ColumnSelection
        ``indices``, ``W_inv`` and ``scores`` on every rank; ``C`` and ``F`` with all n rows
        on rank 0 when ``gather``, otherwise (and on the other ranks) the rank's own rows,
        which start at ``result.row_offset``.

    Examples
    --------
    Saved as ``select.py`` and run with ``mpiexec -n 2 python select.py`` (needs the ``mpi``
    extra), every rank gets the indices serial :func:`hkern.oasis` selects:

    >>> import numpy as np
    >>> import hkern
    >>> from hkern.oasis.parallel import oasis_mpi
    >>> X = np.random.default_rng(0).normal(size=(2000, 4))
    >>> sel = oasis_mpi(X, 50, sigma=1.0, seed=0)                   # doctest: +SKIP
    >>> serial = hkern.oasis(X, 50, sigma=1.0, seed=0)  # doctest: +SKIP
    >>> bool(np.array_equal(sel.indices, serial.indices))  # doctest: +SKIP
    True
    """
    MPI = _mpi()
    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    if isinstance(kernel, str) and kernel == "precomputed":
        raise ValueError("oasis_mpi works from data and a kernel; kernel='precomputed' is serial "
                         "only (hkern.oasis)")
    points, _, diag, kind, sigma = _prepare(X, kernel, sigma)
    n, d = points.shape
    n_columns = check_int(n_columns, "n_columns", low=1, high=n)
    tol = check_nonnegative(tol, "tol")
    rtol = check_nonnegative(rtol, "rtol")
    init = check_int(init, "init", low=0, high=n_columns)
    refresh = check_int(refresh, "refresh", low=0)
    if seed is None:
        seed = comm.bcast(int(np.random.SeedSequence().entropy % 2**63) if rank == 0 else None)
    rng = check_seed(seed)

    offsets = block_layout(n, size)
    lo, hi = int(offsets[rank]), int(offsets[rank + 1])
    core = OasisCore(n_columns, diag[lo:hi], X=np.ascontiguousarray(points[lo:hi]), kind=kind,
                     sigma=sigma)
    core.recompute_delta(n_jobs)
    max_d = float(diag.max())
    stop = max(tol, rtol * max_d, NUMERICAL_FLOOR * max_d)
    indices, scores = [], []

    def add(i, value, adaptive):
        """Broadcast the pivot's (score, F row, point) from its owner; update every block."""
        owner = int(np.searchsorted(offsets, i, side="right") - 1)
        buf = np.empty(1 + core.k + d)
        if rank == owner:
            local = i - lo
            buf[0] = core.delta_array[local] if value is None else value
            buf[1: 1 + core.k] = core.row(local)
            buf[1 + core.k:] = points[i]
        comm.Bcast(buf, root=owner)
        score = float(buf[0])
        if not adaptive and not score > NUMERICAL_FLOOR * max_d:
            raise ValueError("the initial columns give a singular W = G(init, init) (duplicate "
                             "or nearly identical points); use init=0 or another seed")
        core.step(np.ascontiguousarray(buf[1: 1 + core.k]), score,
                  z=np.ascontiguousarray(buf[1 + core.k:]), global_i=i,
                  local_i=(i - lo) if rank == owner else -1, n_threads=n_jobs)
        indices.append(int(i))
        scores.append(score if adaptive else np.nan)

    # The same random initial columns as the serial code (same generator, same draw).
    for i in (rng.choice(n, size=init, replace=False) if init else ()):
        add(int(i), None, adaptive=False)
    while core.k < n_columns:
        if refresh and core.k and core.k % refresh == 0:
            core.recompute_delta(n_jobs)
        best, arg, _, low = core.pivot()
        candidates = comm.allgather((best, lo + arg if arg >= 0 else -1, low))
        if min(c[2] for c in candidates) < -NEGATIVE_TOL * max_d:
            raise ValueError("the matrix is not positive semidefinite (a score fell below "
                             "round-off)")
        live = [c for c in candidates if c[1] >= 0]
        if not live:
            break
        value, i, _ = max(live, key=lambda c: (c[0], -c[1]))   # ties: smallest global index
        if value <= stop:
            break
        add(int(i), value, adaptive=True)

    indices = np.asarray(indices, dtype=np.intp)
    k = len(indices)
    F_local = core.F_array
    # W = L L^T with L = F[indices]: every rank contributes the rows it owns.
    L = np.zeros((k, k))
    mine = (indices >= lo) & (indices < hi)
    L[mine] = F_local[indices[mine] - lo]
    comm.Allreduce(MPI.IN_PLACE, L, op=MPI.SUM)
    from .. import _linalg
    W_inv = _linalg.cho_solve(L, np.eye(k)) if k else np.zeros((0, 0))
    C_local = _kernel_matrix_trusted(kind, sigma, np.ascontiguousarray(points[lo:hi]),
                                     np.ascontiguousarray(points[indices]), n_jobs) \
        if k else np.zeros((hi - lo, 0))
    C, F, row_offset = C_local, F_local, lo
    if gather:
        counts = np.diff(offsets) * k
        if rank == 0:
            C, F = np.empty((n, k)), np.empty((n, k))
        comm.Gatherv(np.ascontiguousarray(C_local), [C, counts] if rank == 0 else None, root=0)
        comm.Gatherv(np.ascontiguousarray(F_local), [F, counts] if rank == 0 else None, root=0)
        if rank == 0:
            row_offset = 0
        else:
            C, F = C_local, F_local
    result = ColumnSelection(indices, C, W_inv, np.asarray(scores), F, "oasis")
    result.row_offset = row_offset
    result.rank, result.size = rank, size
    return result


def main(argv=None):
    """``python -m hkern.oasis.parallel DATA.npy --n-columns L ...`` under mpiexec."""
    p = argparse.ArgumentParser(prog="mpiexec -n P python -m hkern.oasis.parallel",
                                description="oASIS-P: select Nystrom columns of the kernel "
                                            "matrix of a data file on MPI ranks.")
    p.add_argument("data", help="a .npy file (n x d) or a CSV file (one point per row)")
    p.add_argument("--n-columns", type=int, required=True)
    p.add_argument("--kernel", default="gaussian")
    p.add_argument("--sigma", type=float, default=1.0)
    p.add_argument("--tol", type=float, default=0.0)
    p.add_argument("--init", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-jobs", type=int, default=1, help="OpenMP threads per rank")
    p.add_argument("--out", default=None, help="write indices, W_inv, scores to this .npz")
    args = p.parse_args(argv)
    X = np.load(args.data) if args.data.endswith(".npy") else np.loadtxt(args.data, delimiter=",",
                                                                          ndmin=2)
    result = oasis_mpi(X, args.n_columns, kernel=args.kernel, sigma=args.sigma, tol=args.tol,
                       init=args.init, seed=args.seed, n_jobs=args.n_jobs, gather=False)
    if result.rank == 0:
        print(f"oASIS-P on {result.size} ranks: {len(result.indices)} columns of n = "
              f"{X.shape[0]}; first indices {result.indices[:10].tolist()}")
        if args.out:
            np.savez(args.out, indices=result.indices, W_inv=result.W_inv, scores=result.scores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
