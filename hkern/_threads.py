"""Thread budgets: one place that turns ``n_jobs`` into OpenMP and BLAS thread counts.

BLAS threads and OpenMP threads must not multiply: code that calls BLAS on small blocks from
inside an OpenMP ``prange`` runs under ``blas_threads(1)``; large single BLAS calls get
``n_jobs`` BLAS threads instead.
"""
from __future__ import annotations

import contextlib
import operator
import os

__all__ = ["resolve_n_jobs", "blas_threads"]

_controller = None


def resolve_n_jobs(n_jobs=None) -> int:
    """Number of threads for ``n_jobs``.

    None or -1 means every available core; a negative value -k means all but k-1 cores;
    a positive int is taken as is.
    """
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    if n_jobs is None:
        return available
    try:
        if isinstance(n_jobs, bool):
            raise TypeError
        n_jobs = operator.index(n_jobs)
    except TypeError:
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}") from None
    if n_jobs == 0:
        raise ValueError("n_jobs must be None or a non-zero integer, got 0; use n_jobs=1 for "
                         "one thread or n_jobs=-1 for all cores")
    if n_jobs < 0:
        return max(1, available + 1 + n_jobs)
    return n_jobs


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
