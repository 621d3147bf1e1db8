"""Ctrl-C during one long LAPACK call.

hkern's own loops check for signals between units of work (``Interrupt`` in ``_linalg.pxd``),
but a single LAPACK call (an eigendecomposition of the Nystrom landmarks, an SVD) cannot be cut:
at n = 8000 one ``dsyevr`` on one thread runs for minutes, and a signal waits for its end.
:func:`run_interruptibly` runs such a call on a worker thread while the calling thread waits in
steps of :data:`POLL_SECONDS`, so Python's signal handler runs and KeyboardInterrupt reaches
the caller at once.  The call itself cannot be stopped: it runs to its end on the worker, and
its result is dropped.  Nothing it touches is shared with the caller (it works on its own
copies), so the next call starts clean; it only shares the cores until the dropped call ends.

Small calls run directly: below :data:`SIZE_THRESHOLD` rows a call takes well under the 0.2 s
the project allows between checks, and a thread would cost more than it saves.
"""
from __future__ import annotations

import contextvars
import threading

__all__ = ["run_interruptibly", "SIZE_THRESHOLD", "POLL_SECONDS"]

# Matrices of fewer rows run directly: a single-threaded dsyevr at n = 512 takes about 0.05 s.
SIZE_THRESHOLD = 512
# How often the waiting thread lets the signal handlers run.
POLL_SECONDS = 0.05


def run_interruptibly(work, size, *args):
    """``work(*args)``, run where Ctrl-C can reach the caller within :data:`POLL_SECONDS`.

    ``work`` must release the GIL for its long part (a ``nogil`` LAPACK call) and must not
    write to anything the caller keeps: after a KeyboardInterrupt it goes on running on its
    own thread.  ``size`` (rows of the matrix) decides whether a thread is worth it; calls off
    the main thread, which receives no signals, run directly.
    """
    if size < SIZE_THRESHOLD or threading.current_thread() is not threading.main_thread():
        return work(*args)
    outcome = []

    def run():
        try:
            outcome.append((True, work(*args)))
        except BaseException as exc:    # handed to the caller below
            outcome.append((False, exc))

    context = contextvars.copy_context()
    worker = threading.Thread(target=context.run, args=(run,), name="hkern-lapack", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(POLL_SECONDS)       # a signal's KeyboardInterrupt is raised here
    done, value = outcome[0]
    if not done:
        raise value
    return value
