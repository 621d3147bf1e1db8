"""Thread budgets: one place that turns ``n_jobs`` into OpenMP and BLAS thread counts.

``n_jobs=None`` means "what this process may use": the smallest of the CPUs it may run on
(affinity mask and cgroup CPU quota), the OpenMP thread limit (``OMP_NUM_THREADS``, a
``threadpoolctl.threadpool_limits`` block) and the BLAS thread limit in force
(``OPENBLAS_NUM_THREADS``, threadpoolctl), as scikit-learn's ``_openmp_effective_n_threads``
does for OpenMP.  An explicit ``n_jobs`` is taken as asked up to the CPUs available (more threads
than CPUs only add overhead, and n_jobs=1000 under an address-space limit made libgomp abort
the interpreter: issue 31); negative values count back from the available CPUs.  It bounds BLAS
threads as well as OpenMP threads: every public function and
model method that computes runs inside one budget, declared by the :func:`budgeted` decorator;
its body reads the thread count for its OpenMP loops with :func:`budget_threads`.

BLAS threads and OpenMP threads must not multiply: code that calls BLAS on small blocks from
inside an OpenMP ``prange`` runs under ``blas_threads(1)``; large single BLAS calls get
``n_jobs`` BLAS threads instead.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import math
import operator
import os

from ._arguments import call_arguments
from ._openmp import openmp_max_threads

__all__ = ["resolve_n_jobs", "blas_threads", "thread_budget", "budgeted", "budget_threads",
           "available_cpus"]

_controller = None
# The thread count of the innermost budgeted call running in this context (None outside).
_current_budget = contextvars.ContextVar("hkern_thread_budget", default=None)


def _cgroup_cpu_quota(root="/sys/fs/cgroup"):
    """CPUs allowed by a cgroup CPU quota (v2 cpu.max or v1 cfs quota), or None."""
    try:
        with open(f"{root}/cpu.max") as fh:
            quota, period = fh.read().split()[:2]
        if quota != "max":
            return max(1, math.ceil(int(quota) / int(period)))
        return None
    except (OSError, ValueError):
        pass
    try:
        with open(f"{root}/cpu/cpu.cfs_quota_us") as fh:
            quota = int(fh.read())
        with open(f"{root}/cpu/cpu.cfs_period_us") as fh:
            period = int(fh.read())
        if quota > 0 and period > 0:
            return max(1, math.ceil(quota / period))
    except (OSError, ValueError):
        pass
    return None


def available_cpus() -> int:
    """CPUs this process may run on: the affinity mask, bounded by a cgroup CPU quota."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    quota = _cgroup_cpu_quota()
    return max(1, min(cpus, quota) if quota is not None else cpus)


def _blas_limit():
    """The largest thread count any loaded BLAS library is set to now (None if none found)."""
    counts = [lib.num_threads for lib in _get_controller().select(user_api="blas").lib_controllers]
    counts = [c for c in counts if isinstance(c, int) and c > 0]
    return max(counts) if counts else None


def resolve_n_jobs(n_jobs=None) -> int:
    """Number of threads for ``n_jobs``.

    None: the CPUs available (affinity, cgroup quota), bounded by the OpenMP and BLAS thread
    limits in force (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, threadpoolctl).  -1 means every
    available CPU, -k all but k-1; a positive int k means min(k, available CPUs).  Capping
    never changes a result: every computation gives the same bits for any thread count.

    Raises
    ------
    ValueError
        For 0, a non-integer or a bool.
    """
    if n_jobs is None:
        limit = min(available_cpus(), openmp_max_threads())
        blas = _blas_limit()
        return max(1, min(limit, blas) if blas is not None else limit)
    try:
        if isinstance(n_jobs, bool):
            raise TypeError
        n_jobs = operator.index(n_jobs)
    except TypeError:
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}; use "
                         "n_jobs=1 for one thread, n_jobs=-1 for every CPU or None to honour "
                         "OMP_NUM_THREADS and threadpoolctl limits") from None
    if n_jobs == 0:
        raise ValueError("n_jobs must be None or a non-zero integer, got 0; use n_jobs=1 for "
                         "one thread or n_jobs=-1 for all cores")
    if n_jobs < 0:
        return max(1, available_cpus() + 1 + n_jobs)
    # More threads than CPUs: no speed, and each thread reserves a stack; with thousands of
    # them under an address-space limit (ulimit -v) libgomp aborts the whole process.
    return min(n_jobs, available_cpus())


def _get_controller():
    global _controller
    if _controller is None:
        # Imported here so the BLAS libraries of numpy and scipy are loaded before the scan.
        import scipy.linalg  # noqa: F401  (loads scipy's BLAS, which hkern's cores call)
        from threadpoolctl import ThreadpoolController
        _controller = ThreadpoolController()
    return _controller


@contextlib.contextmanager
def blas_threads(n_threads: int):
    """Limit every loaded BLAS library to ``n_threads`` threads inside the block."""
    with _get_controller().limit(limits=int(n_threads), user_api="blas"):
        yield


@contextlib.contextmanager
def thread_budget(n_jobs):
    """Resolve ``n_jobs`` and hold every BLAS library to that many threads inside the block.

    Yields the thread count, for the OpenMP loops (``num_threads=``) of the block.  BLAS
    calls made directly through NumPy or SciPy inside the block (not only hkern's shim) are
    bounded by it.
    """
    n_threads = resolve_n_jobs(n_jobs)
    with blas_threads(n_threads):
        yield n_threads


def budgeted(func):
    """Decorator: run ``func`` inside ``thread_budget(n_jobs)``.

    ``n_jobs`` is the function's own ``n_jobs`` argument or, for a method without one, the
    object's ``n_jobs`` attribute.  Inside, every BLAS library is held to the budget and
    :func:`budget_threads` gives the thread count for OpenMP loops (``num_threads=``), so the
    function never resolves n_jobs itself.  A budgeted function called from another one sets
    its own budget for its duration (a model's method keeps the n_jobs it was fitted with).

    Examples
    --------
    >>> from hkern._threads import budgeted, budget_threads
    >>> @budgeted
    ... def count(n_jobs=None):
    ...     return budget_threads()
    >>> count(n_jobs=1)
    1
    """
    signature = inspect.signature(func)
    own_argument = "n_jobs" in signature.parameters

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if own_argument:
            n_jobs = call_arguments(signature, args, kwargs)["n_jobs"]
        else:
            n_jobs = args[0].n_jobs
        with in_budget(n_jobs):
            return func(*args, **kwargs)
    return wrapper


@contextlib.contextmanager
def in_budget(n_jobs):
    """The body of :func:`budgeted` as a context manager, for code that must resolve ``n_jobs``
    at a point of its own choosing (a fit on MPI checks it on every rank first); yields the
    thread count."""
    with thread_budget(n_jobs) as n_threads:
        token = _current_budget.set(n_threads)
        try:
            yield n_threads
        finally:
            _current_budget.reset(token)


def budget_threads() -> int:
    """The thread count of the :func:`budgeted` call this runs in (for ``num_threads=``)."""
    n_threads = _current_budget.get()
    if n_threads is None:
        raise RuntimeError("budget_threads() called outside a @budgeted function")
    return n_threads
