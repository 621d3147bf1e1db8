"""Helpers shared by the comparison and reproduction scripts in experiments/.

One place for: timing (best of k), RMSE, the validation split carved from the training set,
grid tuning on it, loading a standardised UCI split, markdown tables, the machine line every
results page starts with, and the optional matplotlib import.  The asv suite in benchmarks/
does not import this module (asv runs benchmarks in their own processes).
"""
from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from hkern._memory import peak_memory
from hkern._threads import resolve_n_jobs
from hkern.datasets import load_uci, standardize

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"            # raw records the scripts write (.json, .jsonl)
PAGES = ROOT / "doc" / "results"      # the results pages
FIGURES = PAGES / "figures"           # their plots


def best_time(fn, repeats=1):
    """Fastest of ``repeats`` calls of ``fn``: (seconds, that call's result)."""
    best, out = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        if elapsed < best:
            best, out = elapsed, result
    return best, out


def timed_fit(fn):
    """Call ``fn`` once: (seconds, peak RSS bytes above the start, result)."""
    with peak_memory() as mem:
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
    return elapsed, mem.bytes, result


def rmse(a, b):
    a, b = np.asarray(a, dtype=float).reshape(-1), np.asarray(b, dtype=float).reshape(-1)
    return float(np.sqrt(np.mean((a - b) ** 2)))


def raw_split(name, split=0):
    """UCI split ``split`` of ``name`` in original units: X_train, y_train, X_test, y_test.

    kin40k is bundled; every other set is read from $HKERN_DATA, as :func:`hkern.datasets.load_uci`
    does (a ValueError naming HKERN_DATA when it is unset).
    """
    return load_uci(name, split=split)


def load_standardized(name, split=0):
    """:func:`raw_split`, X and y standardised with training statistics.

    Returns X_train, y_train, X_test, y_test, y_scale (see hkern.datasets.standardize).
    """
    return standardize(*raw_split(name, split))


def validation_split(n_train, n_fit_max=None, n_val_max=None, seed=0):
    """Indices (fit, val) into the training set: val is 20% of it (at most ``n_val_max``), fit
    is drawn from the other 80% (at most ``n_fit_max``).  The test set is never touched."""
    perm = np.random.default_rng(seed).permutation(n_train)
    n_val = n_train // 5
    val, fit = perm[:n_val], perm[n_val:]
    if n_val_max is not None:
        val = val[:n_val_max]
    if n_fit_max is not None:
        fit = fit[:n_fit_max]
    return np.sort(fit), np.sort(val)


def tune(fit, X, y, fit_idx, val_idx, grid):
    """Grid search on the validation split.

    ``fit(X, y, **params)`` returns an object with ``predict``; ``grid`` is a list of dicts.
    Returns (best params, its validation RMSE, {tuple(params.items()): RMSE}).
    """
    scores = {}
    for params in grid:
        model = fit(X[fit_idx], y[fit_idx], **params)
        scores[tuple(params.items())] = rmse(model.predict(X[val_idx]), y[val_idx])
    best = min(scores, key=scores.get)
    return dict(best), scores[best], scores


def markdown_table(header, rows, align=None):
    """A markdown table; ``align`` is one of "l"/"r" per column (default: first left, rest
    right)."""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    lines = ["| " + " | ".join(map(str, header)) + " |",
             "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)


def machine_note(command):
    """The paragraph every generated page starts with: command, machine, threads, date."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    threads = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
               if k in os.environ}
    import hkern
    return (f"Produced by `{command}` on {datetime.date.today().isoformat()}: "
            f"{resolve_n_jobs(None)}-core {cpu} VM ({platform.system()}, Python "
            f"{platform.python_version()}, hkern {hkern.__version__}), "
            f"thread settings {threads or 'default (every core)'}.  The machine was shared "
            "with other jobs while this ran, so times can be off by up to 2x; errors and "
            "memory are not affected.")


def command_line():
    """How this script was invoked, for the page's provenance line."""
    env = " ".join(f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
                   if k in os.environ)
    cmd = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    return f"{env} {cmd}".strip()


def pyplot():
    """matplotlib.pyplot with the non-interactive backend, or None if matplotlib is missing
    (plots are optional: the tables are written either way)."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: skipping the plots (pip install 'hkern[docs]')")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
