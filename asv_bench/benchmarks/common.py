"""What several benchmark modules share: the kin40k data, the test RMSE, the timing settings.

asv also imports this module looking for benchmarks; it defines none (no ``time_``,
``peakmem_`` or ``track_`` names).
"""
import functools
import os

import numpy as np

from hkern.datasets import load_uci, standardize

# HKERN_ASV_SMOKE=1 (set by .ci/run): each parametrised benchmark runs at the first value of
# each of its parameters only.  CI checks that the suite imports and runs, not the timings, and
# the full grids took most of its 14 minutes of asv.
SMOKE = os.environ.get("HKERN_ASV_SMOKE") == "1"


def grid(params):
    """A benchmark's ``params`` (one list, or a tuple of lists), cut to the first value of each
    parameter in a smoke run (:data:`SMOKE`)."""
    if not SMOKE:
        return params
    if isinstance(params, tuple):
        return tuple(values[:1] for values in params)
    return params[:1]


@functools.lru_cache(maxsize=None)
def kin40k():
    """Standardised kin40k split 0 (bundled): X_train (36000, 8), y_train, X_test (4000, 8),
    y_test; y in units of its training standard deviation."""
    X_train, y_train, X_test, y_test, _ = standardize(*load_uci("kin40k", split=0))
    return X_train, y_train, X_test, y_test


def model_rmse(model, X, y):
    """RMSE of ``model.predict(X)`` against ``y``."""
    return float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))


class SlowFit:
    """Timing settings of benchmarks whose one call takes seconds: one call per sample, one
    round, at most three samples (subclasses widen ``repeat`` or ``timeout``)."""

    number = 1
    repeat = (1, 3, 20.0)  # at least 1, at most 3 samples, stop after ~20 s
    min_run_count = 1
    warmup_time = 0.0
    rounds = 1
    timeout = 180


class Quick:
    """Timing settings of benchmarks whose one call takes milliseconds to a second: one call per
    sample, 3 to 10 samples."""

    number = 1
    repeat = (3, 10, 10.0)
    warmup_time = 0.0
    timeout = 120
