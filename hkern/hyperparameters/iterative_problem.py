"""The view of an iterative fit that its hyperparameter selection works on: what exact PCG's
and FALKON's views share (:class:`SelectionProblem`, the base of
:class:`hkern.hyperparameters.iterative.IterativeProblem`'s implementations in
:mod:`.exact_pcg_problem`, :mod:`.nystrom_pcg_problem` and :mod:`.sharded_nystrom_problem`), and
the early stop of a clearly losing candidate (:class:`LosingCandidate`)."""
from __future__ import annotations

import numpy as np

from .._model import prepare_fit
from .._targets import encode_targets, on_target_grid, target_scale
from .._validation import scale_inputs
from ..kernels._api import _kernel_matvec_trusted

__all__ = ["LosingCandidate", "SelectionProblem", "geometric_limit", "stop_when_losing"]


# When a candidate of the iterative hyperparameter selection is clearly losing (see
# SelectionProblem.losing_stopper).  On kin40k a bandwidth 0.64x the best took 227 s to reach
# a hold-out error 2.1x the best's.
LOSING_FACTOR = 1.5
LOSING_MIN_ITER = 10
LOSING_WINDOW = 5
LOSING_PROGRESS = 0.05
# ... or when the error's geometric extrapolation over the last two windows (each window's fall
# at most this fraction of the one before) ends above LOSING_FACTOR times the best.  On kin40k
# (2026-11-27, AVX-512) the candidate at half the chosen bandwidth fell 0.0226, 0.0136,
# 0.0112, 0.0103 at iterations 40, 45, 50 and 58 (its CG's end): still falling 17% a window,
# so the first rule never fired, while at iteration 45 the extrapolation gave 0.0096, above
# 1.5 times the best's 0.0048 (13 iterations, 4 s, saved).
LOSING_RATIO = 0.5


def geometric_limit(first, second, third):
    """Where a sequence sampled at three equal steps heads if each step's fall is the last
    one's ratio q of the one before (Aitken's extrapolation): third - fall q / (1 - q).  -inf
    (no claim) unless both falls are positive and q is at most LOSING_RATIO."""
    if first is None or not first > second > third:
        return -np.inf
    q = (second - third) / (first - second)
    return third - (second - third) * q / (1 - q) if q <= LOSING_RATIO else -np.inf


class LosingCandidate(Exception):
    """Raised inside CG when a selection's candidate is clearly losing; ``mse`` its hold-out
    error then (an upper bound of where it was heading, far above the best)."""

    def __init__(self, mse):
        super().__init__(mse)
        self.mse = mse


def as_columns(y):
    """y (n,) or (n, k) as an (n, k) array (n may be 0: a rank's empty shard)."""
    return y.reshape(len(y), 1 if y.ndim == 1 else y.shape[1])


def stop_when_losing(mse, best_mse):
    """An ``error`` for :func:`hkern.solvers.trace.traced_pcg` that raises
    :class:`LosingCandidate` once a candidate is clearly losing: after LOSING_MIN_ITER
    iterations, its hold-out error ``mse(coef)`` is above LOSING_FACTOR times the best
    candidate's ``best_mse``, and either fell by less than LOSING_PROGRESS of itself over the
    last LOSING_WINDOW iterations (CG's iterates approach the solution monotonically in the
    A-norm, so such a candidate ends far behind) or falls geometrically towards a limit above
    that (:func:`geometric_limit`).  Checked every LOSING_WINDOW iterations, at one product with
    the held-out rows each (on MPI ranks a collective, at the same iterations on every rank)."""
    history = []

    def error(coef):
        history.append(None)
        it = len(history) - 1           # 0: the start
        if best_mse is None or it < LOSING_MIN_ITER or it % LOSING_WINDOW:
            return np.nan
        now = history[it] = mse(coef)
        before = history[it - LOSING_WINDOW]
        if now > LOSING_FACTOR * best_mse and before is not None and (
                before - now < LOSING_PROGRESS * now or geometric_limit(
                    history[it - 2 * LOSING_WINDOW], before, now) > LOSING_FACTOR * best_mse):
            raise LosingCandidate(now)
        return now
    return error


class SelectionProblem:
    """What the two iterative fits' views for the hyperparameter selection share
    (:class:`hkern.hyperparameters.iterative.IterativeProblem`): the checked data, the fit's
    inputs on some rows at candidate values, and the hold-out error of coefficients."""

    # The fit reads a float32 X with a scalar sigma as it is (prepare_fit's keep_float32).
    keeps_float32 = False

    def __init__(self, arguments, X, encoding, tol, max_iter):
        self.a, self.X, self.tol, self.max_iter = arguments, X, tol, max_iter
        self.y = np.asarray(arguments["y"])
        self.classes = encoding.classes
        # The targets centred by the mean of all of them (the fit's encoding: on MPI shards,
        # of every rank's), which the candidates fit on a grid.
        self.y_centred = None if self.classes is not None else \
            encoding.centre(as_columns(self.y)).reshape(self.y.shape)
        self.set_target_scale(target_scale(self.y_centred) if self.classes is None else 1.0)

    def set_target_scale(self, scale):
        """The candidates fit (y - mean) / ``scale`` on a grid (hkern._targets.on_target_grid:
        a y + b then gives the same candidates, so the same choice); the final fit fits y, its
        warm start times ``scale``.  Classification: labels, scale 1."""
        self.y_scale = scale
        self.y_candidates = self.y if self.classes is not None else \
            on_target_grid(self.y_centred, scale)

    def to_user_units(self, value, criterion):
        """A candidate's criterion value (of the candidates' targets) for the user's y: minus a
        mean squared error times scale^2; a log likelihood of k outputs at n rows minus
        n k log(scale)."""
        if not np.isfinite(value) or self.y_scale == 1.0:
            return value
        if criterion == "holdout":
            return value * self.y_scale ** 2
        k = 1 if self.y.ndim == 1 else self.y.shape[1]
        return value - self.X.shape[0] * k * float(np.log(self.y_scale))

    def _inputs(self, rows, sigma, lam, final=False):
        """The fit's checked inputs on ``rows`` (None: all) at (sigma, lam): of the candidates'
        targets, or with ``final`` of the user's."""
        y = self.y if final else self.y_candidates
        X, y = (self.X, y) if rows is None else (self.X[rows], y[rows])
        return prepare_fit(X, y, kernel=self.a["kernel"], sigma=sigma, lam=lam,
                           task=self.a["task"], max_memory=self.a["max_memory"],
                           classes=self.classes, keep_float32=self.keeps_float32)

    def final_start(self, x0):
        """A candidate's coefficients (or FALKON's beta) as the final fit's warm start, in the
        user's units of y."""
        return None if x0 is None else x0 * self.y_scale

    def losing_stopper(self, inputs, held, centres, best_mse, n_threads):
        """An ``error`` for :func:`hkern.solvers.trace.traced_pcg` that raises
        :class:`LosingCandidate` once a candidate is clearly losing (:func:`stop_when_losing`
        of its hold-out error on the rows ``held``)."""
        return stop_when_losing(
            lambda coef: self.held_out_mse(inputs, held, centres, coef, n_threads), best_mse)

    def held_out_mse(self, inputs, held, centres, coef, n_threads):
        """Mean squared error of the scores k(x, centres) coef on the rows ``held`` against
        their encoded targets (one-vs-rest +-1 for classification)."""
        total, count = self.held_out_sums(inputs, held, centres, coef, n_threads)
        return float(total / count)

    def held_out_sums(self, inputs, held, centres, coef, n_threads):
        """(sum of squared errors, entries) of :meth:`held_out_mse` (0, 0 without rows)."""
        if len(held) == 0:
            return 0.0, 0
        X_held = scale_inputs(self.X[held], inputs.lengthscales)   # float64, as the fit's
        scores = self.scores(inputs, X_held, centres, coef, n_threads)
        return self.squared_errors(inputs, self.y_candidates[held], scores)

    def scores(self, inputs, X_held, centres, coef, n_threads):
        """The fit's scores k(X_held, centres) coef."""
        return _kernel_matvec_trusted(inputs.kind, inputs.bandwidth, X_held, centres, coef,
                                      n_threads)

    def squared_errors(self, inputs, y_held, scores):
        """(sum of squared errors, entries) of ``scores`` against the candidates' targets
        ``y_held`` encoded."""
        m = len(y_held)
        if self.classes is not None:
            target, _ = encode_targets(y_held, m, self.a["task"], self.classes)
        else:       # the candidate's scores are of its centred targets
            target = inputs.encoding.centre(as_columns(np.asarray(y_held)))
        return float(np.sum((scores - target) ** 2)), scores.size
