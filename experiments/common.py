"""The one helper module of the comparison and reproduction scripts in experiments/.

One place for:

* where things go: ``RESULTS`` (raw records the scripts keep), ``PAGES`` (the results pages of
  the docs) and ``FIGURES`` (their plots);
* data: :func:`load_split` (a UCI split in original units) and :func:`load_standardized`; every
  set but the bundled kin40k is read from ``$HKERN_DATA``, exactly as
  :func:`hkern.datasets.load_uci` reads it (it raises a ValueError naming HKERN_DATA when the
  variable is unset), never from a folder outside the repository;
* errors: :func:`mse`, :func:`rmse` and :func:`relative_error`;
* timing: :func:`best_time` (best of k calls) and :func:`timed_fit` (one call with its peak
  memory);
* tuning: :func:`validation_split` (carved from the training set, never the test set) and
  :func:`tune` (grid search on it);
* pages: :func:`markdown_table`, :func:`machine_note` / :func:`command_line` (provenance),
  :func:`banner`, :func:`code_version`, :func:`pyplot` (matplotlib is optional).

It is also the one place the scripts take hkern's private helpers from (``blas_threads``,
``resolve_n_jobs``, ``peak_memory``, ``available_memory``, :func:`nystrom_features_of`): a
rename inside hkern touches this file only.  The asv
suite (asv_bench/benchmarks/) does not import it: asv runs its benchmarks in their own
processes, from their own folder.
"""
from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import hkern
from hkern._memory import available_memory, peak_memory
from hkern._threads import blas_threads, resolve_n_jobs
from hkern.datasets import load_uci, standardize

__all__ = ["ROOT", "RESULTS", "PAGES", "FIGURES", "available_memory", "blas_threads",
           "resolve_n_jobs", "load_split", "load_standardized", "mse", "rmse", "relative_error",
           "best_time",
           "timed_fit", "validation_split", "tune", "markdown_table", "machine_note",
           "command_line", "banner", "code_version", "pyplot", "nystrom_features_of"]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"            # raw records the scripts keep (.json, .jsonl)
PAGES = ROOT / "doc" / "results"      # the results pages
FIGURES = PAGES / "figures"           # their plots


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

def load_split(name, split=0):
    """UCI split ``split`` of ``name`` in original units: X_train, y_train, X_test, y_test.

    kin40k is bundled; every other set is read from $HKERN_DATA (the folder holding
    ``<name>/data.csv.gz``, or its parent), as :func:`hkern.datasets.load_uci` does.
    """
    return load_uci(name, split=split)


def load_standardized(name, split=0):
    """:func:`load_split`, X and y standardised with training statistics.

    Returns X_train, y_train, X_test, y_test, y_scale (see hkern.datasets.standardize).
    """
    return standardize(*load_split(name, split))


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

def mse(a, b):
    """Mean squared difference of two vectors (any shapes with the same number of entries)."""
    a, b = np.asarray(a, dtype=float).reshape(-1), np.asarray(b, dtype=float).reshape(-1)
    return float(np.mean((a - b) ** 2))


def rmse(a, b):
    """Root mean squared difference: ``sqrt(mse(a, b))``."""
    return float(np.sqrt(mse(a, b)))


def relative_error(estimate, exact):
    """||estimate - exact|| / ||exact||: the 2-norm for vectors, the Frobenius norm for
    matrices (a kernel approximation against the dense kernel matrix)."""
    estimate, exact = np.asarray(estimate, dtype=float), np.asarray(exact, dtype=float)
    return float(np.linalg.norm(estimate - exact) / np.linalg.norm(exact))


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------

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
        elapsed, result = best_time(fn)
    return elapsed, mem.bytes, result


# ---------------------------------------------------------------------------------------------
# Tuning on a validation split of the training set
# ---------------------------------------------------------------------------------------------

def validation_split(n_train, n_fit_max=None, n_val_max=None, seed=0, sort=True):
    """Indices (fit, val) into the training set: val is 20% of it (at most ``n_val_max``), fit
    is drawn from the other 80% (at most ``n_fit_max``).  The test set is never touched.

    ``sort=False`` keeps both in the order of the seeded permutation (the order the fitted
    rows are passed in matters for the seeded landmark draws: compare_baselines.py,
    compare_hierarchical.py and compare_slkl.py were measured that way).
    """
    perm = np.random.default_rng(seed).permutation(n_train)
    n_val = n_train // 5
    val, fit = perm[:n_val], perm[n_val:]
    if n_val_max is not None:
        val = val[:n_val_max]
    if n_fit_max is not None:
        fit = fit[:n_fit_max]
    return (np.sort(fit), np.sort(val)) if sort else (fit, val)


def tune(fit, X, y, fit_idx, val_idx, grid, score=rmse):
    """Grid search on the validation split.

    ``fit(X, y, **params)`` returns an object with ``predict``; ``grid`` is a list of dicts;
    ``score(prediction, target)`` is minimised (first of equal scores wins).  Returns (best
    params, its validation score, {tuple(params.items()): score}).
    """
    scores = {}
    for params in grid:
        model = fit(X[fit_idx], y[fit_idx], **params)
        scores[tuple(params.items())] = score(model.predict(X[val_idx]), y[val_idx])
    best = min(scores, key=scores.get)
    return dict(best), scores[best], scores


# ---------------------------------------------------------------------------------------------
# Pages and provenance
# ---------------------------------------------------------------------------------------------

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


def banner():
    """The first line the printing scripts write: hkern's version and the threads it uses."""
    return f"hkern {hkern.__version__}, {resolve_n_jobs(None)} threads"


def code_version():
    """hkern's version and the last commit that changed hkern/ (with '+dirty' for uncommitted
    changes there): records with the same value ran the same library code."""
    git = ["git", "-C", str(ROOT)]
    try:
        head = subprocess.run(git + ["log", "-1", "--format=%h", "--", "hkern"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(git + ["status", "--porcelain", "--", "hkern"],
                               capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return hkern.__version__
    return f"{hkern.__version__} {head}{'+dirty' if dirty else ''}"


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


def nystrom_features_of(model, X):
    """phi(X) = L^{-1} k(Z, X) of a fitted Nystrom model (its private features, for a variance
    form hkern does not offer)."""
    return model._features(model._check_X(X), resolve_n_jobs(None))
