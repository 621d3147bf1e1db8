"""ARD only where it pays: the exact kernel ridge's leave-one-out error on a subsample, the
second test a per-feature end of a ``sigma="ard"`` selection by the profiled likelihood must
pass against the isotropic end.

The likelihood compares the two ends first.  A hold-out criterion needs no second test (it
already scores both ends on rows the fit did not see), so the check applies to the likelihood
only.  On energy (d = 8, 692 rows) the likelihood preferred the per-feature lengthscales
by 220 to 260 nats on every one of its ten splits, and they predicted the test rows 4 to 5%
worse (results/ard_against_isotropic.json, the ten splits pooled): the design's grid of
building shapes lets d - 1 extra lengthscales fit the training targets without generalising.
The leave-one-out error, which scores each row by a fit that did not see it, ranked the two
ends as the test rows did on all ten splits of energy and on split 0 of kin40k, pol,
elevators, keggundirected, concrete and protein (doc/hyperparameters.md).

For kernel ridge regression with A = K + lam I and alpha = A^{-1} y, the residual of row i
left out is alpha_i / (A^{-1})_ii (the closed form of Wahba's leave-one-out), so one Cholesky
factorisation (LAPACK dpotrf) and its inverse (dpotri) give all m residuals in O(m^3).
"""
from __future__ import annotations

import math
import time

import numpy as np
from scipy.linalg import lapack

from .._memory import check_memory
from .._targets import on_target_grid, target_scale
from ..kernels import kernel_matrix

__all__ = ["LOO_ROWS", "keeps_per_feature", "leave_one_out_mse", "per_feature_check"]

# Rows of the subsample: O(m^3 / 3) twice (dpotrf, dpotri) per end, a median of 0.15 s at
# 2000 rows and d = 8 on two cores, with 2 m^2 doubles (64 MB).  Where the ends differ by what a
# subsample of 2000 rows cannot see, they predict within the noise of each other.
LOO_ROWS = 2000


def leave_one_out_mse(X, Y, sigma, lam, kernel, n_threads=None):
    """Mean squared leave-one-out residual of kernel ridge with (sigma, lam) on X, Y (centred
    by their mean, the model's constant mean), over rows and columns; inf where K + lam I is
    not positive definite in floating point.

    Parameters
    ----------
    X : ndarray (m, d)
    Y : ndarray (m, k)
    sigma : float or ndarray (d,)
    lam : float
    kernel : str

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); Y = np.sin(X[:, :1]) + 0.1 * rng.normal(size=(200, 1))
    >>> leave_one_out_mse(X, Y, 1.0, 1e-2, "gaussian") < leave_one_out_mse(X, Y, 0.05, 1e-2,
    ...                                                                 "gaussian")
    True
    """
    A = kernel_matrix(X, kernel=kernel, sigma=sigma, n_jobs=n_threads)
    A[np.diag_indices_from(A)] += lam
    Yc = Y - Y.mean(axis=0)
    factor, info = lapack.dpotrf(A, lower=1, overwrite_a=1)
    if info != 0:
        return math.inf
    alpha, info = lapack.dpotrs(factor, Yc, lower=1)
    inverse, info2 = lapack.dpotri(factor, lower=1, overwrite_c=1)
    if info != 0 or info2 != 0:
        return math.inf
    diagonal = np.diag(inverse)
    if np.any(diagonal <= 0) or not np.all(np.isfinite(diagonal)):
        return math.inf
    return float(np.mean(np.square(alpha / diagonal[:, None])))


def keeps_per_feature(data, kernel, per_feature, isotropic, seed, max_memory):
    """(keep, (per-feature mse, isotropic mse), rows): whether the per-feature end
    ``per_feature`` (a Candidate) predicts left-out rows of a random subsample of ``data``
    (a :class:`~hkern.hyperparameters.rows.SelectionRows`) at least as well as the isotropic
    end ``isotropic``.  The subsample is drawn from ``seed`` alone, the same rows for both
    ends (and on every MPI rank); its targets on the selection's grid, so c * y keeps the same
    end."""
    m = min(data.n, LOO_ROWS)
    check_memory(2 * 8 * m * m, max_memory,
                 what=f"the leave-one-out check of sigma='ard' on {m} rows",
                 fix="pass sigma='auto' or numbers for sigma")
    rows = np.sort(np.random.default_rng([seed, 2]).permutation(data.n)[:m])
    X, Y = data.rows(rows)
    Y = on_target_grid(Y, target_scale(Y))
    X = np.asarray(X, dtype=float)
    errors = tuple(leave_one_out_mse(X, Y, end.sigma, end.lam, kernel)
                   for end in (per_feature, isotropic))
    return errors[0] <= errors[1], errors, m


def per_feature_check(record, say, data, kernel, seed, max_memory):
    """The ``keep_per_feature`` of :func:`hkern.hyperparameters.search.best_of_origins` for one
    selection: :func:`keeps_per_feature`, its errors and seconds on ``record``, a line to
    ``say``."""
    def keep(per_feature, isotropic):
        t0 = time.perf_counter()
        kept, errors, rows = keeps_per_feature(data, kernel, per_feature, isotropic, seed,
                                               max_memory)
        record.leave_one_out, record.leave_one_out_rows = errors, rows
        record.leave_one_out_seconds = time.perf_counter() - t0
        say(f"leave-one-out on {rows} rows: per feature {errors[0]:.6g}, one bandwidth "
            f"{errors[1]:.6g}: keeps {'per feature' if kept else 'one bandwidth'}")
        return kept
    return keep
