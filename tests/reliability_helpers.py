"""Helpers shared by the reliability tests: read-only inputs, BLAS thread probes and hostile-input
strategies."""
import numpy as np
import threadpoolctl
from hypothesis import strategies as st


def read_only(a):
    """A read-only copy of ``a``."""
    a = np.array(a)
    a.flags.writeable = False
    return a


def blas_threads_now():
    return max(lib["num_threads"] for lib in threadpoolctl.threadpool_info()
               if lib["user_api"] == "blas")


def record_calls(monkeypatch, targets, record):
    """Wrap each (module, name): every call first appends ``record(*args, **kwargs)`` to the
    returned list, then runs the original."""
    seen = []
    for module, name in targets:
        original = getattr(module, name)

        def wrapper(*args, __original=original, **kwargs):
            seen.append(record(*args, **kwargs))
            return __original(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)
    return seen


def record_blas_threads(monkeypatch, targets):
    """Wrap each (module, name) so that the BLAS thread limit in force at every call is logged.

    This reads the limit where the work happens, so it does not depend on the machine's load
    (a CPU-time / wall-time ratio does: on a busy shared machine a 2-thread run can show a
    ratio near 1).
    """
    return record_calls(monkeypatch, targets, lambda *args, **kwargs: blas_threads_now())


def record_thread_budgets(monkeypatch):
    """Log the n_jobs of every thread budget opened: by the ``budgeted`` decorator (which opens
    ``hkern._threads.thread_budget``) and by any hkern module that opens a ``thread_budget``
    block itself (it holds its own reference to the function, wrapped here as well)."""
    import sys

    import hkern._threads
    targets = [(module, "thread_budget") for name, module in list(sys.modules.items())
               if (name == "hkern" or name.startswith("hkern."))
               and getattr(module, "thread_budget", None) is hkern._threads.thread_budget]
    return record_calls(monkeypatch, targets, lambda n_jobs: n_jobs)


@st.composite
def hostile_data(draw, min_n=1, max_n=40):
    """Small data of any accepted magnitude, with duplicates and constant columns.

    Returns (X, magnitude, rng): X = magnitude * (standard normal rows, possibly drawn with
    repeats from the first n/3 or n/4 of them, possibly with one column set to 3, 0, 1 or
    -3e-7), n in [min_n, max_n], 1 to 4 columns, magnitude 1e-150 .. 1e149, and the Generator
    that made them (for targets and options drawn alike).
    """
    n = draw(st.integers(min_n, max_n))
    d = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if draw(st.booleans()):                                     # duplicated rows
        X = X[rng.integers(max(1, n // draw(st.sampled_from([4, 3]))), size=n)]
    if draw(st.booleans()):                                     # a constant column
        X[:, rng.integers(d)] = draw(st.sampled_from([3.0, 0.0, 1.0, -3e-7]))
    magnitude = 10.0 ** draw(st.integers(-150, 149))
    return X * magnitude, magnitude, rng
