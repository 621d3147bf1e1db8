"""``verbose=True``: one line per step of a long call, with the seconds since it started.

Every long call (the fits' hyperparameter selections, MEKA, the column selections, GP-GRIEF)
prints its steps through :class:`Progress`, so they read alike::

    [meka    0.4 s] k-means: 8 clusters of 1200 to 3100 points
"""
from __future__ import annotations

import time

from ._parameters import check_parameter

__all__ = ["Progress"]


class Progress:
    """``progress(text)`` prints ``[label  seconds s] text`` when ``verbose`` is true.

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
        if self.verbose:
            print(f"[{self.label} {self.elapsed():6.1f} s] {text}", flush=True)
