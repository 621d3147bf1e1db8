"""What keeps ``sigma="auto"``, ``sigma="ard"`` and ``lam="auto"`` sane on awkward data.

The selection (:mod:`hkern.hyperparameters.select`) learns a start on a standardised subsample
and refines it on all the data.  Three kinds of data broke it:

* **An outlying row.**  Standardising by the mean and the standard deviation lets one row set
  the scale: with ``X[0, 1] = 1e6`` among 60 standard normal rows the common scale of
  ``sigma="auto"`` was 7.4e4, every other row sat at the origin, the start was a bandwidth of
  1.3e5 and the fit predicted the mean (test RMSE 0.66 against 0.11).  :func:`feature_scales`
  uses the median and the interquartile range instead.
* **Constant, nearly constant and few-valued features.**  The standard deviation of a constant
  column is rounding noise (1e-18 on elevators' features 14 and 16, which a 500-row subsample
  sees as constant), not zero, so the lengthscale in X's units came out at 2e-17.  The robust
  spread of a column with at least half its rows at one value is the typical size of the other
  rows' departures from it, and a column with a single value is flagged constant.
* **Lengthscales the data cannot resolve.**  Below a quarter of the typical spacing of a
  feature's distinct values its kernel factor between neighbouring values is at most
  exp(-8) = 3e-4: every shorter lengthscale is the same "equal or not" kernel, so nothing in
  the data chooses among them.  Above the exact GP's switched-off value,
  ``OFF_FACTOR * sqrt(d)`` robust spreads (:mod:`hkern.hyperparameters.exact_gp`), the factor
  is within 1 - 0.08 / d of one over the bulk of the data: the feature no longer measures
  similarity but, times a large signal variance, adds a smooth trend that grows without bound
  beyond the data.  :class:`LengthscaleBounds` holds every selected lengthscale in between; a
  constant feature gets the switched-off value (the data say nothing about it).  Measured with
  fit_nystrom (r = 512, split 0, seed 0): on keggundirected the unbounded lengthscales (up to
  1400 standard deviations) made two test points beyond the training range err by 15 standard
  deviations of y, test RMSE 0.289, 0.125 bounded (0.117 and 0.118 without those two points);
  on elevators, where the trends help, the bound costs 3% (0.377 against 0.365), and ARD stays
  ahead of one bandwidth (0.382).  pol (0.169 to 0.164) and kin40k (0.298) do not suffer.

and, for the targets, :func:`check_targets_vary`: a constant y has no scale to profile, so every
candidate's likelihood was -inf and the search failed with ``KeyError: 'point'``.  For the
hold-out criterion, :func:`holdout_arguments` lets a fit adapt the arguments that count rows to
the part of the data its hold-out fits see.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .exact_gp import BOUNDS, OFF_FACTOR

__all__ = ["FeatureScales", "LengthscaleBounds", "feature_scales", "statistics_rows",
           "clip_lengthscales", "check_targets_vary", "holdout_arguments",
           "register_holdout_rows", "repeated_candidate"]

# The statistics of each feature come from at most this many rows (every k-th row beyond it:
# deterministic, and drawing nothing from the selection's generator keeps its subsample and
# hold-out draws).  Their cost, a sort of each column, is then at most that of a few hundred
# kernel rows; a subsample of 100 000 rows gives quartiles to about 0.5% of the spread.
_STATS_ROWS = 100_000
# The interquartile range of a normal distribution in standard deviations: a robust spread is
# then the standard deviation for normal features.
_IQR_NORMAL = 1.3489795003921634
# A spread below this fraction of the feature's largest magnitude is rounding noise (a constant
# column after a shift and scaling by floating point: 1e-18 next to 1e-2 on elevators).
_ROUNDING = 1e-12
# The smallest lengthscale, in typical spacings of a feature's distinct values: a quarter makes
# neighbouring values' kernel factor exp(-8) = 3e-4, as good as unrelated.
_RESOLUTION_FRACTION = 0.25
# ... and in robust spreads: the exact GP's own lower bound (its BOUNDS["log_ls"], standardised
# inputs), so that the search on all the data does not go below what the start could reach.
_SMALLEST_RELATIVE = float(np.exp(BOUNDS["log_ls"][0]))


@dataclass(frozen=True)
class LengthscaleBounds:
    """The lengthscales the data can resolve: ``lower <= sigma <= upper``.

    Attributes
    ----------
    lower, upper : ndarray (d,) for ``"ard"``, float for ``"auto"``
        In X's units; ``lower == upper`` for a constant feature (its switched-off value).
    """

    lower: object
    upper: object

    def clip(self, sigma):
        """``sigma`` (a bandwidth or d lengthscales) held within the bounds; a float stays a
        float and values already within the bounds are returned unchanged, bit for bit."""
        if np.ndim(sigma) == 0:
            return float(min(max(float(sigma), self.lower), self.upper))
        return np.minimum(np.maximum(np.asarray(sigma, dtype=float), self.lower), self.upper)


@dataclass(frozen=True)
class FeatureScales:
    """Robust location, spread and resolution of each feature of X.

    Attributes
    ----------
    centre : ndarray (d,)
        The median.
    spread : ndarray (d,)
        The interquartile range / 1.349 (the standard deviation for a normal feature); for a
        feature with at least half its rows at the median (binary, mostly constant), where that
        is 0, the median distance of the other rows from it; 1 for a constant feature.
    constant : ndarray of bool (d,)
        One value in every row (to rounding: a spread below 1e-12 of the largest magnitude).
    resolution : ndarray (d,)
        The median spacing of the feature's sorted distinct values (0 for a constant feature).
    """

    centre: np.ndarray
    spread: np.ndarray
    constant: np.ndarray
    resolution: np.ndarray

    @property
    def common(self):
        """One spread for an isotropic kernel: the root mean square of the non-constant
        features' spreads over all d features (the typical distance of X's own geometry is
        sqrt(2 d) of it); 1 when every feature is constant."""
        spread = np.where(self.constant, 0.0, self.spread)
        common = float(np.sqrt(np.mean(spread ** 2)))
        return common if common > 0 else 1.0

    def bounds(self, sigma_mode):
        """:class:`LengthscaleBounds` for ``sigma_mode`` ``"ard"`` (one per feature) or
        ``"auto"`` (one bandwidth); None for a given sigma (the user's value is not
        bounded)."""
        d = len(self.spread)
        off = OFF_FACTOR * math.sqrt(d)
        if sigma_mode == "ard":
            lower = np.maximum(_RESOLUTION_FRACTION * self.resolution,
                               _SMALLEST_RELATIVE * self.spread)
            upper = off * self.spread
            # A constant feature: switched off, at the scale of the others (its own is unknown).
            upper = np.where(self.constant, off * self.common, upper)
            lower = np.where(self.constant, upper, lower)
            return LengthscaleBounds(lower, upper)
        if sigma_mode == "auto":
            upper = off * self.common
            varying = ~self.constant
            # One bandwidth resolves what its finest feature resolves.
            finest = (float(np.min(_RESOLUTION_FRACTION * self.resolution[varying]))
                      if varying.any() else upper)
            lower = min(max(finest, _SMALLEST_RELATIVE * self.common), upper)
            return LengthscaleBounds(lower, upper)
        return None


def _column_scales(column):
    """(centre, spread, constant, resolution) of one feature (see :class:`FeatureScales`)."""
    q1, centre, q3 = np.percentile(column, [25.0, 50.0, 75.0])
    values = np.unique(column)
    resolution = float(np.median(np.diff(values))) if len(values) > 1 else 0.0
    spread = (q3 - q1) / _IQR_NORMAL
    if spread == 0.0:
        # At least half the rows at the median: the others' typical departure is the scale
        # (1 for a 0/1 feature; a few distant rows of a nearly constant one set it alone).
        departures = np.abs(column[column != centre] - centre)
        spread = float(np.median(departures)) if departures.size else 0.0
    top = float(np.max(np.abs(column))) if column.size else 0.0
    constant = len(values) == 1 or spread <= _ROUNDING * top
    if constant:
        spread, resolution = 1.0, 0.0
    return float(centre), float(spread), bool(constant), resolution


def statistics_rows(n):
    """The rows of n whose statistics :func:`feature_scales` computes: all of them up to
    100 000, every k-th one beyond (a slice, or the same rows as indices on shards)."""
    return np.arange(0, n, 1 if n <= _STATS_ROWS else -(-n // _STATS_ROWS))


def feature_scales(X):
    """:class:`FeatureScales` of the checked inputs ``X`` (n, d).

    Computed on at most 100 000 rows (:func:`statistics_rows`).
    """
    n = X.shape[0]
    rows = X if n <= _STATS_ROWS else X[:: -(-n // _STATS_ROWS)]
    centre, spread, constant, resolution = (np.array(v) for v in zip(
        *(_column_scales(np.ascontiguousarray(rows[:, j], dtype=np.float64))
          for j in range(X.shape[1]))))
    return FeatureScales(centre.astype(float), spread.astype(float), constant.astype(bool),
                         resolution.astype(float))


def clip_lengthscales(sigma, bounds):
    """``sigma`` within ``bounds`` (:meth:`LengthscaleBounds.clip`); unchanged for None."""
    return sigma if bounds is None else bounds.clip(sigma)


def repeated_candidate(candidates, sigma, lam):
    """Index of the candidate evaluated at ``sigma`` and ``lam`` already, or None.

    Clipped to the bounds, several points of the search's log scale g are one sigma (the
    search steps past a bound, and the parabola's vertex lies beyond it): each would be one
    more fit of the same model.  ``lam`` None matches any lam: a fit that profiles the ridge
    chooses the same one for the same sigma.
    """
    for i, c in enumerate(candidates):
        if (lam is None or c.lam == lam) and np.array_equal(c.sigma, sigma):
            return i
    return None


class ZeroTargets(ValueError):
    """Every regression target is constant (zero once the fit's mean is subtracted): there is
    nothing to select by.  The selecting fits catch it and fit at :data:`ZERO_TARGET_VALUES`
    with a warning (the model predicts the constant, the right answer, whatever the kernel),
    since a default call must not fail on valid data."""


# (sigma, lam) for constant targets, where any value gives the same predictions (the constant).
ZERO_TARGET_VALUES = (1.0, 1e-2)


def check_targets_vary(Y, task):
    """Refuse regression targets with a constant column, which no kernel explains better than
    another: :class:`ZeroTargets` when every column is, a ValueError when some are.

    Y is what the selection fits: y minus its mean (:mod:`hkern._targets`), so a constant
    column is a column of zeros; the fits without a mean (SLKL) pass y itself, whose zeros are
    refused alike.  The likelihood criterion profiles y's scale out, and zeros have none (every
    candidate's value is -inf); the hold-out criterion would choose among equal errors of 0.
    A single differing value is selected as any other targets.

    Parameters
    ----------
    Y : ndarray (n, k)
        The encoded targets.
    task : {"regression", "classification"}
        Classification targets are +-1, never zero.
    """
    if task != "regression" or Y.size == 0:
        return
    zero = ~np.any(Y != 0.0, axis=0)
    if not zero.any():
        return
    which, there = ("y is", "") if zero.all() else (f"y[:, {int(np.argmax(zero))}] is", " there")
    message = (f"{which} constant: sigma='auto'/'ard' and lam='auto' choose the kernel and "
               "ridge that best explain y's variation, and every choice explains a constant "
               "equally well; pass numbers for sigma and lam (the model then predicts the "
               f"constant{there}), or check y")
    raise ZeroTargets(message) if zero.all() else ValueError(message)


# fit -> its holdout_rows (selects_hyperparameters); a fit without one is absent.
_HOLDOUT_ROWS = {}


def register_holdout_rows(fit, holdout_rows):
    """Remember ``fit``'s ``holdout_rows`` (see :func:`holdout_arguments`); None forgets it."""
    if holdout_rows is None:
        _HOLDOUT_ROWS.pop(fit, None)
    else:
        _HOLDOUT_ROWS[fit] = holdout_rows


def holdout_arguments(fit, arguments, n, rows):
    """The arguments of ``fit`` on the hold-out criterion's training part.

    The hold-out fits see ``len(rows)`` of the user's n rows, so a size valid for all of them
    (SLKL's r <= n) could be refused there, with a message about a number of rows the user never
    passed.  The fit's ``holdout_rows`` checks such sizes against n, with the fit's own message,
    and caps them at ``len(rows)``; a fit without one gets ``arguments`` unchanged.

    Parameters
    ----------
    fit : callable
        The undecorated fit.
    arguments : dict
        Its arguments, X and y already restricted to ``rows``.
    n : int
        The rows the user passed.
    rows : ndarray of int, sorted
        The rows of the training part.
    """
    adapt = _HOLDOUT_ROWS.get(fit)
    return arguments if adapt is None else adapt(arguments, n, rows)
