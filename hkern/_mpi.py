"""What every fit on MPI shares: the communicator, the layout of the sharded rows, and errors
that end every rank together (doc/mpi.md).

Sharded data: each rank passes only its own rows; the global data set is the concatenation of
the ranks' rows in rank order, so rank p owns the global rows ``offsets[p]:offsets[p + 1]``
(:func:`offsets_of` the row counts, from one allgather).  Shards may be uneven or empty.

Errors end every rank together, never one rank while the others wait in a collective:

* what can go wrong on one rank only (bad arguments or data, a memory limit, a failure inside
  the rank's local work) is held by :class:`RankState` until the next collective the ranks make
  anyway (:meth:`RankState.agree`), and there every rank raises the same exception, naming the
  rank where it happened;
* what is decided from exchanged numbers is raised by every rank at the same step
  (:class:`Agreed`);
* anything else (an interrupt, an error inside MPI itself) prints the message and the traceback
  to stderr and calls ``comm.Abort(1)`` (:func:`every_rank_stops`), which ends every rank with a
  non-zero exit.

mpi4py is imported only here, and only when a fit is given a communicator.
"""
from __future__ import annotations

import contextlib
import pickle
import sys
import time
import traceback

import numpy as np

# Seconds between printing the message of a failed rank and comm.Abort.  MPICH's mpiexec exits as
# soon as the abort reaches it, dropping output its proxies have not forwarded yet: once in CI,
# with 2 busy cores, the message, the traceback and MPICH's own abort line all vanished.
ABORT_GRACE_SECONDS = 1.0

__all__ = ["Agreed", "RankState", "block_layout", "check_comm", "check_same_everywhere",
           "every_rank_stops", "get_mpi", "offsets_of", "resolve_comm"]


def get_mpi():
    """mpi4py's MPI module, or an ImportError saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("hkern on MPI needs mpi4py and an MPI runtime: "
                          "pip install 'hkern[mpi]'") from None
    return MPI


def check_comm(comm, none_means="comm=None to fit this process's data alone"):
    """``comm`` if it is a usable mpi4py intracommunicator, else a ValueError naming comm.

    Anything else would fail later with an AttributeError from deep inside the fit (a string
    has no Get_size); MPI.COMM_NULL would make the first collective fail inside MPI.
    ``none_means`` completes the message: what passing None does instead.
    """
    hint = f"pass an mpi4py communicator such as mpi4py.MPI.COMM_WORLD, or {none_means}"
    try:
        MPI = get_mpi()
    except ImportError:
        raise ValueError(f"comm={comm!r} needs mpi4py and an MPI runtime "
                         f"(pip install 'hkern[mpi]'); {hint}") from None
    if not isinstance(comm, MPI.Intracomm):
        raise ValueError(f"comm must be an mpi4py intracommunicator, got "
                         f"{type(comm).__name__} {comm!r}; {hint}")
    if comm == MPI.COMM_NULL:
        raise ValueError(f"comm is MPI.COMM_NULL, which no rank belongs to; {hint}")
    return comm


def resolve_comm(comm):
    """``comm`` checked (:func:`check_comm`), or MPI.COMM_WORLD for None."""
    if comm is None:
        return get_mpi().COMM_WORLD
    return check_comm(comm, none_means="comm=None for MPI.COMM_WORLD")


def block_layout(n, size):
    """Row offsets (size + 1,) of contiguous blocks: n // size rows each, the first n % size
    ranks one more (ranks beyond n get no rows when n < size)."""
    counts = np.full(size, n // size, dtype=np.int64)
    counts[: n % size] += 1
    return offsets_of(counts)


def offsets_of(counts):
    """Offsets (len(counts) + 1,) of consecutive blocks of the given sizes."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=offsets[1:])
    return offsets


# ------------------------------------------------------------------ every rank stops together


class Agreed(Exception):
    """Carries an exception that every rank raises at the same point; :func:`every_rank_stops`
    unwraps it."""

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


class RankState:
    """This rank's first local failure, held until the next collective (running more local
    work after a failure would only fail again, so :meth:`run` then does nothing).

    Parameters
    ----------
    comm : mpi4py communicator
    label : str
        The call's name, for the messages (e.g. ``"fit_nystrom"``).
    """

    def __init__(self, comm, label):
        self.comm = comm
        self.label = label
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
            raise Agreed(self.failure)
        where, (cls, message) = failed[0]
        error = cls(f"{message} [raised on rank {where} of {self.size}; {self.label} stopped "
                    "on every rank]")
        raise Agreed(error, cause=self.failure if where == self.rank else None)


def check_same_everywhere(fingerprints, label, hints=None):
    """Raise (on every rank: ``fingerprints`` are every rank's, from :meth:`RankState.agree`)
    a ValueError naming the arguments whose values differ between ranks."""
    differ = [name for name in fingerprints[0]
              if any(f[name] != fingerprints[0][name] for f in fingerprints[1:])]
    if differ:
        extra = "".join(f" ({name}: {hints[name]})" for name in differ
                        if hints and name in hints)
        raise Agreed(ValueError(
            f"{label} must be called with the same arguments on every rank; these differ "
            f"between ranks: {', '.join(differ)}" + extra))


@contextlib.contextmanager
def every_rank_stops(comm, label):
    """Raise agreed errors; end every rank with comm.Abort on anything else (size > 1)."""
    try:
        yield
    except Agreed as agreed:
        raise agreed.error from agreed.cause
    except BaseException as exc:
        if comm.Get_size() == 1:
            raise
        print(f"hkern {label}: rank {comm.Get_rank()} of {comm.Get_size()} failed with "
              f"{type(exc).__name__}: {exc}; aborting every rank (comm.Abort)", file=sys.stderr,
              flush=True)
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        try:
            time.sleep(ABORT_GRACE_SECONDS)   # let mpiexec forward the message before it exits
        except KeyboardInterrupt:             # a second Ctrl-C must not skip the Abort
            pass
        comm.Abort(1)
        raise    # pragma: no cover - Abort does not return
