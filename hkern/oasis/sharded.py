"""oASIS-P: oASIS on MPI through mpi4py, on data sharded over the ranks (spec:
doc/specs/oasis.md, section 4; how-to: doc/mpi.md).

Run a script that calls :func:`oasis_mpi` (or ``hkern.oasis(X_local, r, comm=comm)``) under
``mpiexec -n P``, each rank passing only its own rows ``X_local``, or the command line
(:mod:`hkern.oasis.__main__`)

    mpiexec -n 4 python -m hkern.oasis data.npy --r 1000 --sigma 1.0 --seed 0

The data set is the concatenation of the ranks' shards in rank order (:mod:`hkern._mpi`):
rank p owns the global rows ``offsets[p]:offsets[p + 1]``, from one allgather of the row
counts.  Shards may be uneven or empty; no rank ever holds all of X.  Each rank keeps the
pivoted-Cholesky rows of its shard (hkern/oasis/_oasis.pyx) and every step communicates
O(P + k + d) numbers: an allgather of each rank's best candidate (ties go to the smallest
global index) and a broadcast, from the pivot's owner, of its row of F and its point.  Every
rank keeps the broadcast points (k x d) and applies the same update to its rows with the same
per-row arithmetic as the serial code, so for a given seed oASIS-P selects exactly the indices
of :func:`hkern.oasis` on the concatenated data (and C, W^{-1}, F and the scores bit for bit).
A rank that owns no rows takes part in every collective and offers no candidate.

Errors end every rank together, never one rank while the others wait in a collective
(:mod:`hkern._mpi`):

* what can go wrong on one rank only (a bad shard or argument, a memory limit, a failure inside
  the rank's local work) is kept until the next collective the ranks make anyway -- the two
  start-up agreements (shard sizes and arguments; the memory estimate and the initial columns),
  the per-step allgather of candidates, or the agreement before C and F are gathered -- and
  there every rank raises the same exception, naming the rank where it happened;
* what is decided from exchanged numbers (shards with different numbers of features,
  arguments that differ between ranks, no rows at all, r above the global n, a matrix that is
  not PSD, singular initial columns) is raised by every rank at the same step;
* anything else (an interrupt, an error inside MPI itself) prints the message and the
  traceback to stderr and calls ``comm.Abort(1)``, which ends every rank with a non-zero exit.

Requires the optional extra ``pip install "hkern[mpi]"`` (mpi4py and an MPI runtime wheel).
"""
from __future__ import annotations

import hashlib

import numpy as np

from .._memory import check_memory
from .._mpi import (
    Agreed,
    RankState,
    block_layout,
    check_same_everywhere,
    every_rank_stops,
    get_mpi,
    offsets_of,
    resolve_comm,
)
from .._parameters import check_parameter
from .._progress import Progress
from .._threads import budget_threads, budgeted, resolve_n_jobs
from .._validation import (
    check_array,
    check_seed,
    check_sigma,
    check_underflow,
    scale_inputs,
)
from ..kernels._api import _kernel_matrix_trusted, kernel_kind
from ._oasis import OasisCore
from .selection import (
    NEGATIVE_TOL,
    NUMERICAL_FLOOR,
    ColumnSelection,
    _w_inverse,
    initial_columns_error,
    selection_peak_bytes,
)

# block_layout lives in hkern._mpi; re-exported because scripts shard their data with it.
__all__ = ["oasis_mpi", "block_layout", "mpi_peak_bytes"]

LABEL = "oasis_mpi"
_HINTS = {"seed": "pass an int, or None to draw one on rank 0"}


# ------------------------------------------------------------------ set-up


def mpi_peak_bytes(n, n_rows, n_columns, gather_here, n_features=0):
    """Estimated peak bytes oasis_mpi allocates on a rank that owns ``n_rows`` of the n rows.

    The rank's core and F (as :func:`hkern.oasis.api.selection_peak_bytes` for its rows alone:
    no rank holds a vector of all n rows; after the core is freed F and C of its rows,
    16 n_rows l, are smaller), plus on rank 0 with ``gather`` the gathered C and F (16 n l,
    allocated next to its own rows' C and F), plus the selected points broadcast during the
    selection (l x ``n_features``).
    """
    own = selection_peak_bytes(n_rows, n_columns, "oasis")
    if gather_here:
        own = max(own, 8 * (2 * n_rows * n_columns + 2 * n * n_columns + n_rows))
    return own + 8 * n_columns * n_features


def _prepare_shard(X, kernel, sigma, max_memory):
    """This rank's rows as the selection uses them, without communicating.

    As :func:`hkern.oasis.api._prepare` for data, except that a shard may have no rows and
    that the bandwidth is checked later, against the largest magnitude over every rank (a
    shard of tiny values must not be refused when the data as a whole is not).

    Returns
    -------
    dict
        ``points`` (the rows divided by the lengthscales, if any), ``diag`` (the kernel
        diagonal of the rows), ``name`` and ``kind`` of the kernel, ``bandwidth``,
        ``sigma_key`` (the bandwidth or the lengthscales as a tuple, for comparing across
        ranks), ``largest`` (largest magnitude of the points, 0 for none), ``copy_bytes``
        (the scaled copy, 0 without lengthscales).
    """
    if isinstance(kernel, str) and kernel == "precomputed":
        raise ValueError("oasis_mpi works from data and a kernel; kernel='precomputed' is "
                         "serial only (hkern.oasis)")
    points = check_array(X, "X", min_samples=0)
    name, kind = kernel_kind(kernel)
    bandwidth, lengthscales = check_sigma(sigma, points.shape[1])
    copy_bytes = 0
    if lengthscales is not None:
        rows, d = points.shape
        copy_bytes = 8 * rows * d
        check_memory(copy_bytes, max_memory, what=f"the inputs divided by the lengthscales "
                     f"({rows} rows, d={d})", fix="pass fewer rows or raise max_memory")
        points = scale_inputs(points, lengthscales)
    largest = max(float(points.max()), -float(points.min())) if points.size else 0.0
    sigma_key = bandwidth if lengthscales is None else tuple(float(v) for v in lengthscales)
    # Every hkern kernel has k(x, x) = 1.
    return dict(points=points, diag=np.ones(points.shape[0]), name=name, kind=kind,
                bandwidth=bandwidth, sigma_key=sigma_key, largest=largest,
                copy_bytes=copy_bytes)


def _check_locally(state, X, r, kernel, sigma, tol, rtol, init, seed, refresh, n_jobs, gather,
                   max_memory):
    """Everything one rank can check alone: (its arguments, its report to the others)."""
    shard = _prepare_shard(X, kernel, sigma, max_memory)
    ell = check_parameter("r", r, "select_columns", n=None)      # r <= n once n is known
    t, rt = check_parameter("tol", tol, "oasis_mpi"), check_parameter("rtol", rtol)
    k0 = check_parameter("init", init, r=ell)
    ref = check_parameter("refresh", refresh)
    gathered = check_parameter("gather", gather)
    # n_jobs is checked here, inside the agreement, so that a bad value on one rank stops
    # every rank; the selection's thread budget is set by @budgeted _select.
    resolve_n_jobs(n_jobs)
    rng = None if seed is None else check_seed(seed)
    entropy = int(np.random.SeedSequence().entropy % 2**63) \
        if seed is None and state.rank == 0 else None
    points = shard["points"]
    # Canonical kernel names: aliases compare equal across ranks.
    fingerprint = {"kernel": shard["name"], "sigma": shard["sigma_key"], "r": ell,
                   "tol": t, "rtol": rt, "init": k0, "refresh": ref, "gather": gathered,
                   "seed": seed is None}
    report = dict(rows=points.shape[0], d=points.shape[1], fingerprint=fingerprint,
                  largest=shard["largest"],
                  max_diag=float(shard["diag"].max()) if points.shape[0] else -np.inf,
                  entropy=entropy)
    args = dict(points=points, diag=shard["diag"], kind=shard["kind"],
                sigma=shard["bandwidth"], copy_bytes=shard["copy_bytes"], n_columns=ell, tol=t,
                rtol=rt, init=k0, refresh=ref, gather=gathered, rng=rng)
    return args, report


def _agreed(check, *args, **kwargs):
    """``check(...)`` where every rank has the same inputs: its ValueError is raised by every
    rank alike."""
    try:
        return check(*args, **kwargs)
    except ValueError as exc:
        raise Agreed(exc) from None


def _global_sizes(reports, size):
    """(offsets, n) of the concatenated shards, after checking that the shards fit together and
    the arguments match (on every rank: ``reports`` are every rank's)."""
    dims = [rep["d"] for rep in reports]
    if len(set(dims)) > 1:
        where = next(p for p, d in enumerate(dims) if d != dims[0])
        raise Agreed(ValueError(
            f"X has {dims[0]} features on rank 0 but {dims[where]} on rank {where}: every "
            f"rank's shard needs the same columns (an empty shard too: shape (0, {dims[0]}))"))
    check_same_everywhere([rep["fingerprint"] for rep in reports], LABEL, _HINTS)
    offsets = offsets_of([rep["rows"] for rep in reports])
    n = int(offsets[-1])
    if n == 0:
        where = "" if size == 1 else f" on every one of the {size} ranks"
        raise Agreed(ValueError(f"X has 0 samples{where} (shape (0, {dims[0]})); at least 1 "
                                "required in all"))
    return offsets, n


def _check_rank_memory(state, n, n_rows, n_columns, d, gathered, copy_bytes, max_memory):
    """This rank's memory estimate against its ``max_memory``, before anything large exists."""
    here = gathered and state.rank == 0
    check_memory(mpi_peak_bytes(n, n_rows, n_columns, here, n_features=d) + copy_bytes,
                 max_memory,
                 what=f"oasis_mpi on rank {state.rank} of {state.size} with n={n}, {n_rows} "
                      f"rows, r={n_columns}" + (", gather=True" if gathered else ""),
                 fix="choose a smaller r, use more ranks" + (", or gather=False" if here else ""))


def _draw_initial(rng, n, k0):
    """oASIS's random initial columns: the same generator and draw as serial oASIS."""
    return [int(i) for i in (rng.choice(n, size=k0, replace=False) if k0 else ())]


def _setup(state, X, r, kernel, sigma, tol, rtol, init, seed, refresh, n_jobs, gather,
           max_memory):
    """Validate this rank's shard and arguments, then agree in two allgathers.

    The first exchanges every rank's (row count, d, fingerprint of the arguments): every rank
    raises the first rank's error, or a ValueError if the shards have different numbers of
    features, the arguments differ, there are no rows at all or r exceeds the global n.  The
    second exchanges the memory check (which needs the global n) and a digest of the initial
    columns, which differ when the ranks' seeds give different streams.
    """
    out = state.run(_check_locally, state, X, r, kernel, sigma, tol, rtol, init, seed, refresh,
                    n_jobs, gather, max_memory)
    reports = state.agree(None if out is None else out[1])
    args = out[0]
    offsets, n = _global_sizes(reports, state.size)
    _agreed(check_parameter, "r", args["n_columns"], "select_columns", n=n)
    # As serial check_underflow on all of X: the largest magnitude over every shard.
    _agreed(check_underflow, args["sigma"], np.array([max(rep["largest"] for rep in reports)]))
    # An empty shard reports -inf: max_d is the max of all n diagonal entries, as serially.
    max_d = max(rep["max_diag"] for rep in reports)

    lo, hi = int(offsets[state.rank]), int(offsets[state.rank + 1])
    state.run(_check_rank_memory, state, n, hi - lo, args["n_columns"], reports[0]["d"],
              args["gather"], args.pop("copy_bytes"), max_memory)
    rng = args.pop("rng")
    if rng is None:      # seed=None: rank 0's entropy, the same stream everywhere
        rng = np.random.default_rng(reports[0]["entropy"])
    initial = _draw_initial(rng, n, args.pop("init"))
    drawn = hashlib.blake2b(np.asarray(initial, dtype=np.int64).tobytes(),
                            digest_size=16).hexdigest()
    digests = state.agree(drawn)
    check_same_everywhere([{"seed": dig} for dig in digests], LABEL, _HINTS)
    return dict(args, offsets=offsets, max_d=max_d, initial=initial)


# ------------------------------------------------------------------ oASIS-P


def oasis_mpi(X, r, *, kernel="gaussian", sigma=1.0, seed=None, n_jobs=None, tol=0.0, rtol=0.0,
              init=1, refresh=0, comm=None, gather=True, verbose=False, max_memory=None):
    """oASIS on data sharded over MPI ranks: each rank passes only its own rows.

    Call it on every rank of ``comm`` with the same arguments and that rank's shard
    ``X_local``; the data set is the concatenation of the shards in rank order (rank p owns the
    global rows ``offsets[p]:offsets[p + 1]``, offsets from the shards' row counts).  Shards
    may be uneven or empty.  The selection is serial :func:`hkern.oasis`'s on the concatenated
    data, bit for bit.  An error on any rank ends the call on every rank with that error (see
    :mod:`hkern.oasis.sharded` and doc/mpi.md).

    Parameters
    ----------
    X : array_like (n_local, d)
        ``X_local``: this rank's rows of the data, (0, d) for a rank without rows.  Every
        rank's shard must have the same d.
    r : int
        Largest number of columns l, 1 <= l <= n (the total number of rows over the ranks).
    kernel, sigma, tol, rtol, init, refresh
        As for :func:`hkern.oasis` (``kernel="precomputed"`` is not supported here); the same
        on every rank (checked).
    seed : None, int or numpy.random.Generator
        Must give the same stream on every rank (checked on the initial columns drawn); None
        (default) draws a seed on rank 0 and broadcasts it.
    n_jobs : int or None
        OpenMP (and BLAS) threads per rank, with the rules of the serial functions: None
        honours OMP_NUM_THREADS, threadpoolctl limits and the CPUs this rank may use; -1 every
        CPU.  When several ranks share a machine, 1 per rank (or ``OMP_NUM_THREADS=1``) is
        typical: ranks x threads should not exceed the cores.
    comm : mpi4py communicator or None
        Default ``MPI.COMM_WORLD``.
    gather : bool
        Gather C and F (all n rows) to rank 0; the other ranks keep their own rows.
    verbose : bool, default=False
        Print (on rank 0) one line when the selection starts and one when it ends, with the
        seconds since the call started.
    max_memory : int or None
        Most bytes each rank may allocate; None (default): the memory available to it when the
        call starts.  A rank needs about 8 m (l + l') bytes for its m rows (l' = l rounded up
        to a multiple of 64) and 8 l d for the selected points; rank 0 with ``gather`` also
        16 n l for the gathered C and F.  Ranks on one machine share its memory: the limit is
        per rank.

    Returns
    -------
    ColumnSelection
        ``indices`` (global row numbers), ``W_inv`` and ``scores`` on every rank; ``C`` and
        ``F`` with all n rows on rank 0 when ``gather``, otherwise (and on the other ranks)
        the rank's own rows, which start at global row ``result.row_offset_``.

    Raises
    ------
    ValueError
        On every rank, when any rank is given a bad shard or argument, the shards have
        different numbers of features, the ranks are given different arguments, every shard
        is empty, or r exceeds the total number of rows (the message names the rank where
        the error happened, if only some ranks had it).
    hkern.MemoryLimitError
        On every rank, when the estimated peak of any rank exceeds its ``max_memory``.

    Examples
    --------
    Saved as ``select.py`` and run with ``mpiexec -n 2 python select.py`` (needs the ``mpi``
    extra): each rank reads its contiguous block of rows (:func:`block_layout`), and every
    rank gets the indices serial :func:`hkern.oasis` selects on all of X:

    >>> import numpy as np
    >>> import hkern
    >>> from mpi4py import MPI                                      # doctest: +SKIP
    >>> from hkern.oasis.sharded import block_layout, oasis_mpi
    >>> comm = MPI.COMM_WORLD                                       # doctest: +SKIP
    >>> X = np.random.default_rng(0).normal(size=(2000, 4))       # or np.load(..., mmap_mode="r")
    >>> offsets = block_layout(len(X), comm.size)                   # doctest: +SKIP
    >>> X_local = X[offsets[comm.rank]: offsets[comm.rank + 1]]     # doctest: +SKIP
    >>> sel = oasis_mpi(X_local, 50, sigma=1.0, seed=0, comm=comm)  # doctest: +SKIP
    >>> serial = hkern.oasis(X, 50, sigma=1.0, seed=0)              # doctest: +SKIP
    >>> bool(np.array_equal(sel.indices_, serial.indices_))           # doctest: +SKIP
    True
    """
    comm = resolve_comm(comm)
    with every_rank_stops(comm, LABEL):
        state = RankState(comm, LABEL)
        progress = Progress(LABEL, check_parameter("verbose", verbose) and comm.Get_rank() == 0)
        args = _setup(state, X, r, kernel, sigma, tol, rtol, init, seed, refresh, n_jobs,
                      gather, max_memory)
        progress(f"oasis on {comm.Get_size()} ranks: up to {args['n_columns']} columns of "
                 f"{args['offsets'][-1]}")
        selection = _select(get_mpi(), state, n_jobs=n_jobs, **args)
        progress(f"{len(selection)} columns selected")
        return selection


def _fill_pivot(buf, core, local, value, z):
    """The owner's broadcast: (score, F row, point) of its row ``local``."""
    k = core.k
    buf[0] = core.delta_array[local] if value is None else value
    buf[1: 1 + k] = core.row(local)
    buf[1 + k:] = z


def _allocate(n_columns, diag, points, kind, sigma):
    """The rank's core and room for the selected points (after the agreed memory check)."""
    core = OasisCore(n_columns, diag, X=points, kind=kind, sigma=sigma)
    return core, np.empty((n_columns, points.shape[1]))


@budgeted
def _select(MPI, state, *, points, diag, kind, sigma, n_columns, tol, rtol, refresh, gather,
            n_jobs, offsets, max_d, initial):
    """The selection on this rank, in the thread budget of the (agreed, valid) ``n_jobs``."""
    n_threads = budget_threads()
    comm, rank = state.comm, state.rank
    n, d = int(offsets[-1]), points.shape[1]
    lo, hi = int(offsets[rank]), int(offsets[rank + 1])
    core, selected = state.run(_allocate, n_columns, diag, points, kind, sigma) or (None, None)
    state.run(lambda: core.recompute_delta(n_threads))
    stop = max(tol, rtol * max_d, NUMERICAL_FLOOR * max_d)
    indices, scores = [], []

    def add(i, value, adaptive):
        """Broadcast the pivot's (score, F row, point) from its owner; every rank keeps the
        point and updates its rows.  False (on every rank) when the owner failed: its error
        surfaces at the next agreement."""
        owner = int(np.searchsorted(offsets, i, side="right") - 1)
        k = len(indices)
        buf = np.empty(1 + k + d)
        if rank == owner:
            buf[0] = np.nan           # stays NaN if the owner fails: every rank then stops
            state.run(_fill_pivot, buf, core, i - lo, value, points[i - lo])
        comm.Bcast(buf, root=owner)
        score = float(buf[0])
        if np.isnan(score):
            return False
        if not adaptive and not score > NUMERICAL_FLOOR * max_d:
            raise Agreed(initial_columns_error(score, max_d))
        z = buf[1 + k:]
        state.run(lambda: core.step(np.ascontiguousarray(buf[1: 1 + k]), score,
                                    z=np.ascontiguousarray(z), global_i=i,
                                    local_i=(i - lo) if rank == owner else -1,
                                    n_threads=n_threads))
        if selected is not None:
            selected[k] = z           # the broadcast bits: exactly the owner's row of X
        indices.append(int(i))
        scores.append(score if adaptive else np.nan)
        return True

    # The same random initial columns as the serial code (same generator, same draw), sent by
    # their owners like any pivot.  The number of steps is counted in len(indices), which every
    # rank agrees on, not in core.k, which a rank that failed locally did not advance.
    going = all(add(i, None, adaptive=False) for i in initial)
    while going and len(indices) < n_columns:
        k = len(indices)
        if refresh and k and k % refresh == 0:
            state.run(lambda: core.recompute_delta(n_threads))
        summary = state.run(core.pivot) if core is not None else None
        best, arg, _, low = summary if summary is not None else (-np.inf, -1, 0.0, np.inf)
        candidates = state.agree((best, lo + arg if arg >= 0 else -1, low))
        if min(c[2] for c in candidates) < -NEGATIVE_TOL * max_d:
            raise Agreed(ValueError("the matrix is not positive semidefinite (a score fell "
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
    # C's rows of this shard against the broadcast points: bitwise serial's points[indices].
    C_local = state.run(lambda: _kernel_matrix_trusted(kind, sigma, points, selected[:k],
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
        raise Agreed(exc) from None
    if gather:
        counts = np.diff(offsets) * k
        comm.Gatherv(C_local, [C, counts] if rank == 0 else None, root=0)
        comm.Gatherv(F_local, [F, counts] if rank == 0 else None, root=0)
    return ColumnSelection(indices, C, W_inv, np.asarray(scores), F, "oasis",
                           n_features=d, n_jobs=n_jobs, row_offset=row_offset,
                           comm_rank=rank, comm_size=state.size)
