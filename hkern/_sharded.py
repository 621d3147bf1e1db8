"""Fits on data sharded over MPI ranks: the calling convention and what the sharded fits share.

A ``fit_<method>(X, y, ..., comm=comm)`` call on every rank of ``comm`` passes that rank's rows
only; the data set fitted is the concatenation of the shards in rank order (hkern._mpi).  This
module gives the fits their front door (:func:`runs_on_shards`), the checked inputs with the
global sizes (:func:`prepare_sharded_fit`), sums over ranks that every rank sees bit for bit
alike (:func:`sum_over_ranks`), and the rows of given global indices (:func:`gather_rows`).
"""
from __future__ import annotations

import functools
import hashlib
import inspect
from dataclasses import dataclass

import numpy as np

from ._arguments import call_arguments
from ._model import FitInputs, prepare_fit
from ._mpi import (
    Agreed,
    RankState,
    check_comm,
    check_same_everywhere,
    every_rank_stops,
    offsets_of,
)
from ._parameters import check_parameter
from ._targets import exact_sums, local_classes
from ._threads import resolve_n_jobs
from ._validation import check_array, check_seed, check_sigma, check_targets
from .kernels import kernel_kind

__all__ = ["ShardedFit", "collective_step", "digest", "exact_over_ranks", "gather_rows",
           "prepare_sharded_fit", "runs_on_shards", "sum_over_ranks", "total_of"]


def runs_on_shards(label, sharded_fit, select=None):
    """Decorator of a ``fit_<method>`` with a ``comm`` parameter: ``comm=None`` runs the fit as
    it is; a communicator runs ``sharded_fit(state, **arguments)`` on this rank's shard, in
    :func:`hkern._mpi.every_rank_stops` (an error on any rank ends every rank).

    ``select``: when any rank asks for a hyperparameter selection (a string for sigma or
    lam), ``select(state, fit, sharded_fit, arguments)`` runs it on every rank
    (:mod:`hkern.hyperparameters.sharded`).

    Put it outermost: the serial fit's own decorators (thread budget, hyperparameter
    selection) would otherwise check arguments on one rank before the ranks agree.
    """
    def decorate(fit):
        signature = inspect.signature(fit)
        if "comm" not in signature.parameters:
            raise TypeError(f"{fit.__name__} has no comm parameter")

        @functools.wraps(fit)
        def wrapper(*args, **kwargs):
            arguments = call_arguments(signature, args, kwargs)
            comm = arguments["comm"]
            if comm is None:
                return fit(**arguments)
            # Before any collective: a non-communicator fails the same way on every rank.
            check_comm(comm)
            with every_rank_stops(comm, label):
                state = RankState(comm, label)
                if select is not None and any(comm.allgather(
                        isinstance(arguments["sigma"], str) or isinstance(arguments["lam"], str))):
                    # Every rank takes the same path; one that passed numbers is told so there.
                    return select(state, fit, sharded_fit, arguments)
                return sharded_fit(state, **arguments)
        return wrapper
    return decorate


def collective_step(state, label, step, *args):
    """``step(*args)``, a collective of every rank (a selection's candidate fit), with its
    errors sorted: one every rank agreed on is raised as itself, on every rank alike (so a
    selection skips the candidate alike); a numpy.linalg.LinAlgError passes as it is (the
    iterative solvers raise it from arithmetic that is the same on every rank, so on every rank
    at the same step).  A ValueError or TypeError happened on this rank alone, while the others
    wait in a collective: it is raised as a RuntimeError, which a selection does not catch, so
    that :func:`hkern._mpi.every_rank_stops` ends every rank (comm.Abort) with the message."""
    try:
        return step(*args)
    except Agreed as agreed:
        raise agreed.error from agreed.cause
    except (ValueError, TypeError) as exc:
        raise RuntimeError(f"{label} on rank {state.rank} of {state.size}: "
                           f"{type(exc).__name__}: {exc}") from exc


def digest(*arrays):
    """A short digest of arrays' bytes, for comparing them across ranks."""
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


@dataclass
class ShardedFit:
    """One rank's view of a sharded fit.

    Attributes
    ----------
    state : hkern._mpi.RankState
    inputs : hkern._model.FitInputs
        This rank's checked shard.
    offsets : ndarray (size + 1,)
        Rank p owns the global rows offsets[p]:offsets[p + 1].
    n_threads : int
        The rank's thread budget (the agreed ``n_jobs`` resolved on this rank).
    entropy : int or None
        Rank 0's fresh entropy, shared, for ``seed=None``.
    """

    state: RankState
    inputs: FitInputs
    offsets: np.ndarray
    n_threads: int
    entropy: int | None

    @property
    def n(self):
        return int(self.offsets[-1])

    @property
    def lo(self):
        return int(self.offsets[self.state.rank])

    @property
    def hi(self):
        return int(self.offsets[self.state.rank + 1])

    def local_indices(self, rows):
        """This rank's rows among the sorted global ``rows``, as indices into its shard."""
        return rows[(rows >= self.lo) & (rows < self.hi)] - self.lo

    def rng(self, seed):
        """The fit's generator: ``seed`` as serial fits take it, or, for None, rank 0's
        entropy (the same stream on every rank)."""
        return check_seed(self.entropy if seed is None else seed)


def prepare_sharded_fit(state, X, y, *, kernel, sigma, lam, task, n_jobs, max_memory,
                        arguments):
    """Check this rank's shard and agree with the other ranks (one allgather).

    Every rank raises the same error when any rank's shard or arguments are bad, when the
    shards have different numbers of features or outputs, when ``arguments`` (a dict of the
    arguments that must match, by name) differ between ranks, or when there is no data at
    all.  Classification labels are encoded against the union of every rank's labels.
    """
    def local():
        n_threads = resolve_n_jobs(n_jobs)
        points = check_array(X, "X", min_samples=0)
        # The arguments' own checks first, so that a bad value names itself, not "differs".
        kernel_kind(kernel)
        _, lengthscales = check_sigma(sigma, points.shape[1])
        check_parameter("lam", lam)
        # The bandwidth is checked against all the data, as serially: its largest magnitude.
        scaled = np.abs(points) if lengthscales is None else np.abs(points) / lengthscales
        largest = float(scaled.max()) if scaled.size else 0.0
        classes = sums = None
        if task == "classification":
            classes = local_classes(check_targets(y, points.shape[0], "y", numeric=False))
        else:
            try:
                checked = check_targets(y, points.shape[0], "y")
            except ValueError:      # raised by prepare_fit below, after the checks of X
                checked = None
            if checked is not None:
                sums = exact_sums(checked.reshape(points.shape[0], 1 if checked.ndim == 1
                                                  else checked.shape[1]))
        outputs = np.shape(y)[1] if np.ndim(y) == 2 else 1
        return (points, n_threads), (points.shape, classes, outputs, arguments, largest, sums)

    out = state.run(local)
    entropy = int(np.random.SeedSequence().entropy % 2**63) if state.rank == 0 else None
    reports = state.agree((out[1], entropy) if out is not None else None)
    shapes, classes, outputs, fingerprints, largest, sums = zip(*(r[0] for r in reports))
    dims = [s[1] for s in shapes]
    if len(set(dims)) > 1:
        where = next(p for p, d in enumerate(dims) if d != dims[0])
        raise Agreed(ValueError(f"X has {dims[0]} features on rank 0 but {dims[where]} on rank "
                                f"{where}: every rank's shard needs the same columns"))
    if task != "classification" and len(set(outputs)) > 1:
        raise Agreed(ValueError(f"y has {outputs[0]} output(s) on rank 0 but other ranks have "
                                f"{sorted(set(outputs))}"))
    check_same_everywhere(list(fingerprints), state.label)
    offsets = offsets_of([s[0] for s in shapes])
    if offsets[-1] == 0:
        raise Agreed(ValueError(f"{state.label}: every rank's shard is empty; X needs at least "
                                "one row in all"))
    union = offset = None
    if task == "classification":
        union = local_classes(np.concatenate([c for c in classes if c is not None]))
    elif all(part is not None for part in sums):
        offset = total_of(sums).mean()
    points, n_threads = out[0]
    inputs = state.run(prepare_fit, points, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                       max_memory=max_memory, classes=union, min_samples=0,
                       largest=max(largest), offset=offset)
    state.agree()          # a shard that failed its checks (NaN in y, ...) stops every rank
    return ShardedFit(state, inputs, offsets, n_threads, reports[0][1])


def total_of(sums):
    """The exact sums (:class:`hkern._targets.ExactSums`) of every rank's rows, added in rank
    order (exactly: any order gives the same)."""
    total = sums[0]
    for part in sums[1:]:
        total = total + part
    return total


def exact_over_ranks(state, Y_local):
    """The sum of each column of the rows every rank holds (Y_local (n_local, k) here), the
    same bits on every rank and as ``exact_sums(Y).sum()`` of the concatenated rows (one
    allgather)."""
    sums = state.agree(state.run(lambda: exact_sums(Y_local)))
    return total_of(sums).sum()


def sum_over_ranks(state, local):
    """The sum over ranks of ``local()`` (an array of the same shape on every rank), added in
    rank order after one allgather, so every rank holds the same bits for a given layout.
    A rank whose ``local()`` fails (or failed before) makes every rank raise its error."""
    part = state.run(local)
    shape = None if part is None else np.shape(part)
    # The shape travels with the flag: a failed rank does not know it.
    sizes = state.comm.allgather(None if part is None else shape)
    if any(s is None for s in sizes):
        state.agree()
    send = np.ascontiguousarray(part, dtype=np.float64).reshape(-1)
    recv = np.empty((state.size, send.size))
    state.comm.Allgather(send, recv)
    total = recv[0].copy()
    for p in range(1, state.size):
        total += recv[p]
    return total.reshape(shape)


def gather_rows(state, offsets, X_local, indices):
    """The rows of the global data at sorted global ``indices`` (the same on every rank), each
    sent by the rank that owns it (one allgather); returns an (len(indices), d) array."""
    indices = np.asarray(indices, dtype=np.int64)
    bounds = np.searchsorted(indices, offsets)            # rank p owns indices[bounds[p]:...]
    lo, hi = bounds[state.rank], bounds[state.rank + 1]
    d = X_local.shape[1]
    mine = np.ascontiguousarray(X_local[indices[lo:hi] - offsets[state.rank]])
    out = np.empty((len(indices), d))
    counts = np.diff(bounds) * d
    state.comm.Allgatherv(mine, [out, counts])
    return out
