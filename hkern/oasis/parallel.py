"""oASIS-P: oASIS on MPI through mpi4py (spec: doc/specs/oasis.md, section 4).

Run a script that calls :func:`oasis_mpi` under ``mpiexec -n P``, or the command line

    mpiexec -n 4 python -m hkern.oasis.parallel data.npy --n-columns 1000 --sigma 1.0 --seed 0

Rows are split in contiguous blocks over the ranks.  Each rank keeps the pivoted-Cholesky rows
of its block (hkern/oasis/_oasis.pyx) and every step communicates O(P + k + d) numbers: an
allgather of each rank's best candidate (ties go to the smallest global index) and a broadcast,
from the pivot's owner, of its row of F and its point.  Every rank then applies the same update
to its rows with the same per-row arithmetic as the serial code, so for a given seed oASIS-P
selects exactly the indices of :func:`hkern.oasis`.  A rank may own no rows (n < P): it takes
part in every collective and offers no candidate.

Errors end every rank together, never one rank while the others wait in a collective:

* what can go wrong on one rank only (bad or differing arguments or data, a memory limit, a
  failure inside the rank's local work) is kept until the next collective the ranks make
  anyway -- the start-up agreement, the per-step allgather of candidates, or the agreement
  before C and F are gathered -- and there every rank raises the same exception, naming the
  rank where it happened;
* what is decided from exchanged numbers (a matrix that is not PSD, singular initial
  columns) is raised by every rank at the same step;
* anything else (an interrupt, an error inside MPI itself) prints the message and the
  traceback to stderr and calls ``comm.Abort(1)``, which ends every rank with a non-zero exit.

Requires the optional extra ``pip install "hkern[mpi]"`` (mpi4py and an MPI runtime wheel).
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import pickle
import sys
import traceback

import numpy as np

from .._memory import check_memory
from .._threads import budget_threads, budgeted, resolve_n_jobs
from .._validation import check_bool, check_int, check_nonnegative, check_seed
from ..kernels._api import _kernel_matrix_trusted
from ._oasis import OasisCore
from .api import (
    NEGATIVE_TOL,
    NUMERICAL_FLOOR,
    ColumnSelection,
    _prepare,
    _w_inverse,
    initial_columns_error,
    selection_peak_bytes,
)

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
    n % size ranks one more (ranks beyond n get no rows when n < size)."""
    counts = np.full(size, n // size, dtype=np.int64)
    counts[: n % size] += 1
    offsets = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


# ------------------------------------------------------------------ every rank stops together


class _Agreed(Exception):
    """Carries an exception that every rank raises at the same point (see the module
    docstring); :func:`_every_rank_stops` unwraps it."""

    def __init__(self, error, cause=None):
        super().__init__(str(error))
        self.error = error
        self.cause = cause


def _portable(exc):
    """(class, message) of a local failure, in a form every rank can rebuild: the class itself
    when it pickles by reference and takes one message, else RuntimeError."""
    cls = type(exc)
    try:
        pickle.loads(pickle.dumps(cls))
        cls(str(exc))
    except Exception:
        return RuntimeError, f"{cls.__name__}: {exc}"
    return cls, str(exc)


class _RankState:
    """This rank's first local failure, held until the next collective (running more local
    work after a failure would only fail again, so :meth:`run` then does nothing)."""

    def __init__(self, comm):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.failure = None

    def run(self, fn, *args, **kwargs):
        """fn(*args, **kwargs), or None if it raises (or an earlier call did)."""
        if self.failure is not None:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as exc:     # KeyboardInterrupt etc. go to the Abort path
            self.failure = exc
            return None

    def agree(self, payload=None):
        """Allgather of (failure, payload): raise on every rank if any rank failed, else
        return every rank's payload."""
        mine = _portable(self.failure) if self.failure is not None else None
        reports = self.comm.allgather((mine, payload))
        failed = [(r, report[0]) for r, report in enumerate(reports) if report[0] is not None]
        if not failed:
            return [report[1] for report in reports]
        if len(failed) == self.size and len({f[1] for f in failed}) == 1:
            # Every rank failed the same way (e.g. the same bad argument): raise it as is.
            raise _Agreed(self.failure)
        where, (cls, message) = failed[0]
        error = cls(f"{message} [raised on rank {where} of {self.size}; oasis_mpi stopped on "
                    "every rank]")
        raise _Agreed(error, cause=self.failure if where == self.rank else None)


@contextlib.contextmanager
def _every_rank_stops(comm):
    """Raise agreed errors; end every rank with comm.Abort on anything else (size > 1)."""
    try:
        yield
    except _Agreed as agreed:
        raise agreed.error from agreed.cause
    except BaseException as exc:
        if comm.Get_size() == 1:
            raise
        print(f"hkern.oasis.parallel: rank {comm.Get_rank()} of {comm.Get_size()} failed with "
              f"{type(exc).__name__}: {exc}; aborting every rank (comm.Abort)", file=sys.stderr,
              flush=True)
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        comm.Abort(1)
        raise    # pragma: no cover - Abort does not return


# ------------------------------------------------------------------ set-up


def mpi_peak_bytes(n, n_rows, n_columns, gather_here):
    """Estimated peak bytes oasis_mpi allocates on a rank that owns ``n_rows`` of the n rows.

    The rank's core and F (as :func:`hkern.oasis.api.selection_peak_bytes`, for its rows;
    after the core is freed F and C of its rows, 16 n_rows l, are smaller), plus on rank 0
    with ``gather`` the gathered C and F (16 n l, allocated next to its own rows' C and F).
    """
    own = selection_peak_bytes(n_rows, n_columns, "oasis", n_total=n)
    if gather_here:
        own = max(own, 8 * (2 * n_rows * n_columns + 2 * n * n_columns + n))
    return own


def _fingerprint(points, kind, sigma, n_columns, tol, rtol, init, refresh, gather, initial):
    """What every rank must agree on: the data (a digest) and the arguments, by name."""
    digest = hashlib.blake2b(memoryview(points).cast("B"), digest_size=16).hexdigest()
    return {"X": (points.shape, digest), "kernel": kind, "sigma": sigma,
            "r": n_columns, "tol": tol, "rtol": rtol, "init": init, "refresh": refresh,
            "gather": gather, "seed": initial}


def _check_same_everywhere(fingerprints):
    differ = [name for name in fingerprints[0]
              if any(f[name] != fingerprints[0][name] for f in fingerprints[1:])]
    if differ:
        raise _Agreed(ValueError(
            "oasis_mpi must be called with the same data and arguments on every rank; these "
            f"differ between ranks: {', '.join(differ)}" +
            (" (seed: pass an int, or None to draw one on rank 0)" if "seed" in differ else "")))


def _setup(state, X, n_columns, kernel, sigma, tol, rtol, init, seed, refresh, n_jobs, gather,
           max_memory):
    """Validate on this rank (no communication), then agree: every rank raises the first
    rank's error, or a ValueError if the ranks were given different data or arguments."""
    def local():
        if isinstance(kernel, str) and kernel == "precomputed":
            raise ValueError("oasis_mpi works from data and a kernel; kernel='precomputed' is "
                             "serial only (hkern.oasis)")
        points, _, diag, kind, sig, _ = _prepare(X, kernel, sigma, max_memory)
        n = points.shape[0]
        ell = check_int(n_columns, "r", low=1, high=n,
                        hint="r is the number of columns; a Nystrom approximation has at most n")
        t, rt = check_nonnegative(tol, "tol"), check_nonnegative(rtol, "rtol")
        k0 = check_int(init, "init", low=0, high=ell)
        ref = check_int(refresh, "refresh", low=0)
        gathered = check_bool(gather, "gather")
        # n_jobs is checked here, inside the agreement, so that a bad value on one rank stops
        # every rank; the selection's thread budget is set by @budgeted _select.
        resolve_n_jobs(n_jobs)
        offsets = block_layout(n, state.size)
        lo, hi = int(offsets[state.rank]), int(offsets[state.rank + 1])
        check_memory(mpi_peak_bytes(n, hi - lo, ell, gathered and state.rank == 0), max_memory,
                     what=f"oasis_mpi on rank {state.rank} of {state.size} with n={n}, "
                          f"{hi - lo} rows, r={ell}"
                          + (", gather=True" if gathered else ""),
                     fix="choose a smaller r, use more ranks" +
                         (", or gather=False" if gathered and state.rank == 0 else ""))
        # The initial columns are drawn on every rank (each advances its own generator, as
        # serial oasis does); with seed=None rank 0 draws the seed after the agreement.
        initial = None if seed is None else \
            [int(i) for i in (check_seed(seed).choice(n, size=k0, replace=False) if k0 else ())]
        entropy = int(np.random.SeedSequence().entropy % 2**63) \
            if seed is None and state.rank == 0 else None
        fingerprint = _fingerprint(points, kind, sig, ell, t, rt, k0, ref, gathered,
                                   "None" if seed is None else initial)
        return dict(points=points, diag=diag, kind=kind, sigma=sig, n_columns=ell, tol=t,
                    rtol=rt, init=k0, refresh=ref, gather=gathered, offsets=offsets, lo=lo,
                    hi=hi, initial=initial), (fingerprint, entropy)

    out = state.run(local)
    reports = state.agree(out[1] if out is not None else None)
    _check_same_everywhere([r[0] for r in reports])
    args = out[0]
    k0 = args.pop("init")               # the number of initial columns: drawn in ``initial``
    if args["initial"] is None:
        n = args["points"].shape[0]
        rng = np.random.default_rng(reports[0][1])
        args["initial"] = [int(i) for i in (rng.choice(n, size=k0, replace=False)
                                            if k0 else ())]
    return args


# ------------------------------------------------------------------ oASIS-P


def oasis_mpi(X, r, *, kernel="gaussian", sigma=1.0, seed=None, n_jobs=None, tol=0.0, rtol=0.0,
              init=1, refresh=0, comm=None, gather=True, max_memory=None):
    """oASIS with the rows of the kernel matrix distributed over MPI ranks.

    Call it on every rank with the same arguments (``X`` the full data set, each rank uses its
    block of rows).  An error on any rank ends the call on every rank with that error (see
    :mod:`hkern.oasis.parallel` and the MPI how-to).

    Parameters
    ----------
    X : array_like (n, d)
        The data, identical on every rank (checked: a digest is compared).
    r, kernel, sigma, tol, rtol, init, refresh
        As for :func:`hkern.oasis` (``kernel="precomputed"`` is not supported here).
    seed : None, int or numpy.random.Generator
        Must give the same stream on every rank; None (default) draws a seed on rank 0 and
        broadcasts it.
    comm : mpi4py communicator or None
        Default ``MPI.COMM_WORLD``.
    n_jobs : int or None
        OpenMP (and BLAS) threads per rank, with the rules of the serial functions: None
        honours OMP_NUM_THREADS, threadpoolctl limits and the CPUs this rank may use; -1 every
        CPU.  When several ranks share a machine, 1 per rank (or ``OMP_NUM_THREADS=1``) is
        typical: ranks x threads should not exceed the cores.
    gather : bool
        Gather C and F to rank 0 (other ranks get their own rows only).
    max_memory : int or None
        Most bytes each rank may allocate; None (default): the memory available to it when the
        call starts.  A rank needs about 8 m (l + l') bytes for its m rows (l' = l rounded up
        to a multiple of 64); rank 0 with ``gather`` also 16 n l for the gathered C and F.
        Ranks on one machine share its memory: the limit is per rank.

    Returns
    -------
    ColumnSelection
        ``indices``, ``W_inv`` and ``scores`` on every rank; ``C`` and ``F`` with all n rows
        on rank 0 when ``gather``, otherwise (and on the other ranks) the rank's own rows,
        which start at ``result.row_offset``.

    Raises
    ------
    ValueError
        On every rank, when any rank is given bad arguments or data, or the ranks are given
        different ones (the message names the rank).
    hkern.MemoryLimitError
        On every rank, when the estimated peak of any rank exceeds its ``max_memory``.

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
    with _every_rank_stops(comm):
        state = _RankState(comm)
        args = _setup(state, X, r, kernel, sigma, tol, rtol, init, seed, refresh, n_jobs,
                      gather, max_memory)
        return _select(MPI, state, n_jobs=n_jobs, **args)


def _fill_pivot(buf, core, local, value, z):
    """The owner's broadcast: (score, F row, point) of its row ``local``."""
    k = core.k
    buf[0] = core.delta_array[local] if value is None else value
    buf[1: 1 + k] = core.row(local)
    buf[1 + k:] = z


@budgeted
def _select(MPI, state, *, points, diag, kind, sigma, n_columns, tol, rtol, refresh, gather,
            n_jobs, offsets, lo, hi, initial):
    """The selection on this rank, in the thread budget of the (agreed, valid) ``n_jobs``."""
    n_threads = budget_threads()
    comm, rank = state.comm, state.rank
    n, d = points.shape
    core = state.run(OasisCore, n_columns, diag[lo:hi], X=points[lo:hi], kind=kind, sigma=sigma)
    state.run(lambda: core.recompute_delta(n_threads))
    max_d = float(diag.max())
    stop = max(tol, rtol * max_d, NUMERICAL_FLOOR * max_d)
    indices, scores = [], []

    def add(i, value, adaptive):
        """Broadcast the pivot's (score, F row, point) from its owner; update every block.
        False (on every rank) when the owner failed: its error surfaces at the next agreement."""
        owner = int(np.searchsorted(offsets, i, side="right") - 1)
        k = len(indices)
        buf = np.empty(1 + k + d)
        if rank == owner:
            buf[0] = np.nan           # stays NaN if the owner fails: every rank then stops
            state.run(_fill_pivot, buf, core, i - lo, value, points[i])
        comm.Bcast(buf, root=owner)
        score = float(buf[0])
        if np.isnan(score):
            return False
        if not adaptive and not score > NUMERICAL_FLOOR * max_d:
            raise _Agreed(initial_columns_error(score, max_d))
        state.run(lambda: core.step(np.ascontiguousarray(buf[1: 1 + k]), score,
                                    z=np.ascontiguousarray(buf[1 + k:]), global_i=i,
                                    local_i=(i - lo) if rank == owner else -1,
                                    n_threads=n_threads))
        indices.append(int(i))
        scores.append(score if adaptive else np.nan)
        return True

    # The same random initial columns as the serial code (same generator, same draw).  The
    # number of steps is counted in len(indices), which every rank agrees on, not in core.k,
    # which a rank that failed locally did not advance.
    going = all(add(i, None, adaptive=False) for i in initial)
    while going and len(indices) < n_columns:
        k = len(indices)
        if refresh and k and k % refresh == 0:
            state.run(lambda: core.recompute_delta(n_threads))
        summary = state.run(core.pivot) if core is not None else None
        best, arg, _, low = summary if summary is not None else (-np.inf, -1, 0.0, np.inf)
        candidates = state.agree((best, lo + arg if arg >= 0 else -1, low))
        if min(c[2] for c in candidates) < -NEGATIVE_TOL * max_d:
            raise _Agreed(ValueError("the matrix is not positive semidefinite (a score fell "
                                     "below round-off)"))
        live = [c for c in candidates if c[1] >= 0]
        if not live:
            break
        value, i, _ = max(live, key=lambda c: (c[0], -c[1]))   # ties: smallest global index
        if value <= stop:
            break
        going = add(int(i), value, adaptive=True)

    indices = np.asarray(indices, dtype=np.intp)
    k = len(indices)
    mine = (indices >= lo) & (indices < hi)
    F_local = state.run(lambda: core.F_array)
    core = None       # its panels of F: freed before C is formed (mpi_peak_bytes)
    C_local = state.run(lambda: _kernel_matrix_trusted(kind, sigma, points[lo:hi],
                                                       np.ascontiguousarray(points[indices]),
                                                       n_threads))
    L = np.zeros((k, k))
    if F_local is not None:
        L[mine] = F_local[indices[mine] - lo]
    C, F, row_offset = C_local, F_local, lo
    if gather and rank == 0:
        C, F = state.run(lambda: (np.empty((n, k)), np.empty((n, k)))) or (None, None)
        row_offset = 0
    state.agree()     # every rank's local results exist before the collectives that need them

    # W = L L^T with L = F[indices]: every rank contributes the rows it owns.
    comm.Allreduce(MPI.IN_PLACE, L, op=MPI.SUM)
    try:
        W_inv = _w_inverse(L, max_d)     # the same L everywhere: fails on every rank or none
    except ValueError as exc:
        raise _Agreed(exc) from None
    if gather:
        counts = np.diff(offsets) * k
        comm.Gatherv(C_local, [C, counts] if rank == 0 else None, root=0)
        comm.Gatherv(F_local, [F, counts] if rank == 0 else None, root=0)
    return ColumnSelection(indices, C, W_inv, np.asarray(scores), F, "oasis", n_jobs=n_jobs,
                           row_offset=row_offset, rank=rank, size=state.size)


# ------------------------------------------------------------------ command line


def _load_everywhere(comm, path):
    """The data file on every rank; a file missing or unreadable on one node stops every rank
    with that rank's error (rather than leaving the others in oasis_mpi's first collective)."""
    def load():
        return np.load(path) if path.endswith(".npy") else \
            np.loadtxt(path, delimiter=",", ndmin=2)

    with _every_rank_stops(comm):
        state = _RankState(comm)
        X = state.run(load)
        state.agree()
    return X


def main(argv=None):
    """``python -m hkern.oasis.parallel DATA.npy --r L ...`` under mpiexec.

    Exit status 0 on success, 2 for bad arguments or data (the message on stderr, from rank
    0, every rank exiting), 1 when the ranks were aborted.
    """
    p = argparse.ArgumentParser(prog="mpiexec -n P python -m hkern.oasis.parallel",
                                description="oASIS-P: select Nystrom columns of the kernel "
                                            "matrix of a data file on MPI ranks.")
    p.add_argument("data", help="a .npy file (n x d) or a CSV file (one point per row)")
    p.add_argument("--r", type=int, required=True, help="number of columns to select")
    p.add_argument("--kernel", default="gaussian")
    p.add_argument("--sigma", type=float, default=1.0)
    p.add_argument("--tol", type=float, default=0.0)
    p.add_argument("--init", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-jobs", type=int, default=None,
                   help="OpenMP threads per rank (default: honour OMP_NUM_THREADS and the CPUs "
                        "available; 1 is typical when the ranks share a machine)")
    p.add_argument("--out", default=None, help="write indices, W_inv, scores to this .npz")
    args = p.parse_args(argv)       # the same arguments on every rank: each exits alike
    comm = _mpi().COMM_WORLD
    try:
        X = _load_everywhere(comm, args.data)
        result = oasis_mpi(X, args.r, kernel=args.kernel, sigma=args.sigma,
                           tol=args.tol, init=args.init, seed=args.seed, n_jobs=args.n_jobs,
                           gather=False, comm=comm)
    except (ValueError, OSError) as exc:
        if comm.Get_rank() == 0:
            p.exit(2, f"{p.prog}: error: {exc}\n")
        return 2
    if result.rank == 0:
        print(f"oASIS-P on {result.size} ranks: {len(result.indices)} columns of n = "
              f"{X.shape[0]}; first indices {result.indices[:10].tolist()}")
        if args.out:
            np.savez(args.out, indices=result.indices, W_inv=result.W_inv, scores=result.scores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
