"""Peak resident memory of a block of code, for the main job and the benchmarks."""
from __future__ import annotations

import contextlib
import ctypes
import tracemalloc

__all__ = ["peak_memory"]


def _status_kib(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1])
    raise OSError(key)


def _release_free_memory():
    """Hand memory freed earlier back to the OS (glibc), so it is not silently reused inside
    the next measurement and the baseline is what is really in use."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_peak_rss():
    # Writing "5" to clear_refs resets the process's peak RSS (VmHWM) to its current RSS (Linux).
    _release_free_memory()
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


class PeakMemory:
    """Result of :func:`peak_memory`: ``bytes`` (peak above the starting point) and ``source``."""

    def __init__(self):
        self.bytes = 0
        self.source = ""


@contextlib.contextmanager
def peak_memory():
    """Measure the peak memory used inside the block, above what was in use at its start.

    On Linux this is the resident set size (VmHWM after resetting it), which counts everything:
    NumPy arrays, BLAS buffers, the compiled cores' workspaces.  Elsewhere it falls back to
    tracemalloc, which sees only allocations made through Python's allocators (NumPy arrays
    included).
    """
    result = PeakMemory()
    try:
        _reset_peak_rss()
        start = _status_kib("VmRSS")
        use_rss = True
    except OSError:
        use_rss = False
        tracemalloc.start()
        tracemalloc.reset_peak()
        start_bytes = tracemalloc.get_traced_memory()[0]
    try:
        yield result
    finally:
        if use_rss:
            result.bytes = max(0, _status_kib("VmHWM") - start) * 1024
            result.source = "peak RSS"
        else:
            result.bytes = max(0, tracemalloc.get_traced_memory()[1] - start_bytes)
            result.source = "tracemalloc peak"
            tracemalloc.stop()
