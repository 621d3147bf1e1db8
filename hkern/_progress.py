"""Progress of long calls through the ``logging`` logger named ``hkern``.

Every long call (the fits' hyperparameter selections, the iterative solvers, MEKA, the column
selections, GP-GRIEF) reports its steps through :func:`report` (or a :class:`Progress`), so
they read alike::

    [meka    0.4 s] k-means: 8 clusters of 1200 to 3100 points

Each line is an INFO record of the ``hkern`` logger.  ``verbose=True`` shows the call's lines
on standard output (a handler on that logger passes the records of verbose calls only); an
application that wants every call's progress configures logging as usual, for example
``logging.basicConfig(level=logging.INFO)`` or a handler on ``logging.getLogger("hkern")``.
When nobody listens, a call formats no line.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import time

from ._parameters import check_parameter

__all__ = ["LOGGER", "Progress", "listening", "live_status", "report"]

LOGGER = logging.getLogger("hkern")
_VERBOSE = "hkern_verbose"          # the record attribute that marks a verbose call's line


class _VerboseConsole(logging.Handler):
    """Writes the lines of calls made with ``verbose=True`` to the current ``sys.stdout`` (the
    one at each line, so redirections made after import, such as pytest's, are honoured)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.addFilter(lambda record: getattr(record, _VERBOSE, False))

    def emit(self, record):
        try:
            sys.stdout.write(self.format(record) + "\n")
            sys.stdout.flush()
        except Exception:                       # noqa: BLE001 (logging's own convention)
            self.handleError(record)


_CONSOLE = _VerboseConsole()
LOGGER.addHandler(_CONSOLE)


def listening(verbose):
    """Whether a line would reach anyone: ``verbose``, or a logging configuration that takes
    the ``hkern`` logger's INFO records (callers skip formatting a line otherwise)."""
    return bool(verbose) or LOGGER.isEnabledFor(logging.INFO)


def report(text, verbose):
    """One progress line: an INFO record of the ``hkern`` logger, shown on standard output
    when ``verbose``.  A verbose call's line is made even where the logger's level is above
    INFO (the default WARNING), since ``verbose`` asked for it; it then goes to the console
    handler alone, not to handlers of the root logger that did not ask for INFO (with
    ``logging.basicConfig()`` at its default level each line would show twice)."""
    enabled = LOGGER.isEnabledFor(logging.INFO)
    if verbose:
        record = LOGGER.makeRecord(LOGGER.name, logging.INFO, "hkern", 0, text, None, None,
                                   extra={_VERBOSE: True})
        if enabled:
            LOGGER.handle(record)
        else:
            _CONSOLE.handle(record)
    elif enabled:
        LOGGER.info(text)


class Progress:
    """``progress(text)`` reports ``[label  seconds s] text`` (:func:`report`).

    Parameters
    ----------
    label : str
        The call's name, at the start of every line.
    verbose : bool
        Checked (a ValueError naming ``verbose`` otherwise).
    """

    def __init__(self, label, verbose):
        self.label = label
        self.verbose = check_parameter("verbose", verbose)
        self.started = time.perf_counter()

    def elapsed(self):
        """Seconds since the call started (the time its lines show)."""
        return time.perf_counter() - self.started

    def __call__(self, text):
        if listening(self.verbose):
            report(f"[{self.label} {self.elapsed():6.1f} s] {text}", self.verbose)


class _LiveStatus(logging.Handler):
    """The latest line of the ``hkern`` logger on ``stream``: rewritten in place on a terminal,
    else one line at most every ``every`` seconds (a log file or CI gets the pace of a long fit
    without a line per iteration)."""

    def __init__(self, stream, every):
        super().__init__(logging.INFO)
        self.stream, self.every = stream, every
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last, self.shown = -float("inf"), False

    def emit(self, record):
        try:
            text = self.format(record)
            if self.tty:
                width = 120
                self.stream.write("\r" + text[:width].ljust(width))
                self.shown = True
            elif time.perf_counter() - self.last >= self.every:
                self.stream.write("  " + text + "\n")
                self.last = time.perf_counter()
            self.stream.flush()
        except Exception:                       # noqa: BLE001 (logging's own convention)
            self.handleError(record)

    def clear(self):
        """End the rewritten line (before other output)."""
        if self.shown:
            self.stream.write("\r" + " " * 120 + "\r")
            self.stream.flush()
            self.shown = False
        self.last = -float("inf")


@contextlib.contextmanager
def live_status(stream=None, every=5.0):
    """``with live_status() as status:`` shows every call's progress while it runs (the main
    job's live display): the ``hkern`` logger at INFO, its latest line on ``stream`` (standard
    error by default); ``status.clear()`` ends the line before other output.  The logger's
    level and handlers are restored on exit."""
    handler = _LiveStatus(stream or sys.stderr, every)
    level = LOGGER.level
    LOGGER.setLevel(logging.INFO)
    LOGGER.addHandler(handler)
    try:
        yield handler
    finally:
        handler.clear()
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(level)
