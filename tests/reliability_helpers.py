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


def record_blas_threads(monkeypatch, targets):
    """Wrap each (module, name) so that the BLAS thread limit in force at every call is logged.

    This reads the limit where the work happens, so it does not depend on the machine's load
    (a CPU-time / wall-time ratio does: on a busy shared machine a 2-thread run can show a
    ratio near 1).
    """
    seen = []
    for module, name in targets:
        original = getattr(module, name)

        def wrapper(*args, __original=original, **kwargs):
            seen.append(blas_threads_now())
            return __original(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)
    return seen


@st.composite
def hostile_data(draw):
    """Small data of any accepted magnitude, with duplicates and constant columns."""
    n = draw(st.integers(1, 40))
    d = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if draw(st.booleans()):
        X = X[rng.integers(max(1, n // 4), size=n)]            # duplicated rows
    if draw(st.booleans()):
        X[:, rng.integers(d)] = 3.0                             # a constant column
    magnitude = 10.0 ** draw(st.integers(-150, 149))
    return X * magnitude, magnitude, rng
