"""Memory: the guard every large allocation passes first, and peak-RSS measurement.

The guard: every public function that allocates more than O(n d) estimates its peak memory
from the problem's sizes and calls :func:`check_memory` before allocating anything large.
Above ``max_memory`` it raises :class:`MemoryLimitError` (a ``ValueError`` and a
``MemoryError``) that says how much is needed and which argument to change.  The one default,
``max_memory=None``, is the memory available to the process when the call starts: the
kernel's ``MemAvailable``, or the room left under a cgroup memory limit if that is smaller.

The measurement: :func:`peak_memory`, peak resident set size of a block of code, used by the
main job, the benchmarks and the tests that hold each estimate against what a call really uses.
"""
from __future__ import annotations

import contextlib
import ctypes
import numbers
import tracemalloc

__all__ = ["peak_memory", "MemoryLimitError", "available_memory", "resolve_max_memory",
           "check_memory", "format_bytes", "recorded_estimates"]

_GIB = 2**30


class MemoryLimitError(ValueError, MemoryError):
    """A call would need more memory than ``max_memory`` allows; raised before allocating.

    Both a ``ValueError`` (a bad combination of arguments) and a ``MemoryError``.  The message
    says how much the call needs and which argument to change.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> X = np.zeros((100_000, 3))
    >>> try:
    ...     hkern.kernel_matrix(X, max_memory=2**30)
    ... except hkern.MemoryLimitError as exc:
    ...     print(str(exc)[:57])
    kernel_matrix of shape (100000, 100000) needs about 74.51
    """


def format_bytes(n_bytes):
    """Bytes as a short human string (GiB above 1 GiB, else MiB)."""
    if n_bytes >= _GIB:
        return f"{n_bytes / _GIB:.2f} GiB"
    return f"{n_bytes / 2**20:.1f} MiB"


def _meminfo_bytes(key):
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(key)


def _cgroup_room():
    """Bytes left under a cgroup memory limit (v2 memory.max or v1 limit_in_bytes), or None."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file) as fh:
                limit = fh.read().strip()
            if limit == "max":
                return None
            with open(usage_file) as fh:
                usage = int(fh.read())
            limit = int(limit)
            if limit >= 2**60:       # cgroup v1 writes "no limit" as a huge number
                return None
            return max(0, limit - usage)
        except (OSError, ValueError):
            continue
    return None


def available_memory():
    """Bytes the process can still allocate: MemAvailable, or the cgroup room if smaller.

    Where neither can be read (not Linux), the physical memory size from ``os.sysconf``.
    """
    try:
        room = _meminfo_bytes("MemAvailable")
    except OSError:
        import os
        try:
            room = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return 2**62
    cgroup = _cgroup_room()
    return min(room, cgroup) if cgroup is not None else room


def resolve_max_memory(max_memory):
    """``max_memory`` in bytes: None -> :func:`available_memory`; else a number > 0."""
    if max_memory is None:
        return available_memory()
    if isinstance(max_memory, bool) or not isinstance(max_memory, numbers.Real) or \
            not max_memory > 0:
        raise ValueError(f"max_memory must be None (the memory available now) or a number of "
                         f"bytes > 0, e.g. 8 * 2**30 for 8 GiB; got {max_memory!r}")
    return max_memory


_estimate_log = None


@contextlib.contextmanager
def recorded_estimates():
    """Collect every (what, need) passed to :func:`check_memory` inside the block, in call
    order (the tests hold each estimate against the peak RSS measured around the call)."""
    global _estimate_log
    outer, _estimate_log = _estimate_log, []
    try:
        yield _estimate_log
    finally:
        _estimate_log = outer


def check_memory(need, max_memory, *, what, fix):
    """Raise :class:`MemoryLimitError` if ``need`` bytes exceed ``max_memory``.

    Parameters
    ----------
    need : int
        Estimated peak bytes of the call (its formula is stated where it is computed).
    max_memory : int, float or None
        The caller's ``max_memory`` argument (None: the memory available now).
    what : str
        What needs the memory, e.g. ``"fit_nystrom with n=2000000, r=4096"``.
    fix : str
        Which argument to change, e.g. ``"choose a smaller r"``.

    Returns
    -------
    int
        The limit that was applied, in bytes.
    """
    limit = resolve_max_memory(max_memory)
    if _estimate_log is not None:
        _estimate_log.append((what, int(need)))
    if need > limit:
        source = ("the memory available now" if max_memory is None
                  else "the max_memory argument")
        raise MemoryLimitError(
            f"{what} needs about {format_bytes(need)} at its peak, more than max_memory="
            f"{format_bytes(limit)} ({source}); {fix}, or pass a larger max_memory (bytes) if "
            "the machine has the memory")
    return limit


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
