"""Targets: regression outputs and one-vs-rest class encodings, shared by every method.

Every solver works on a 2-D target matrix Y (n, k), so multi-output regression and all classes of
a classifier are fitted by one solve with k right-hand sides.

Regression targets are centred: every fit models y as a constant mean per output column plus a
zero-mean Gaussian process, the mean estimated by the training mean of the column
(:func:`exact_mean`, the correctly rounded mean, so that it is the same bits for any thread
count and any split of the rows over MPI ranks).  The solvers see y minus that mean
(``TargetEncoding.offset``), and predictions add it back.  The generalised least-squares mean
1^T A^{-1} y / 1^T A^{-1} 1 would cost every fit a second solve (and a log-determinant
correction in the likelihood) for a difference of order 1/n of the targets' spread; the
training mean is what scikit-learn's ``GaussianProcessRegressor(normalize_y=True)`` and
hkern's GRIEF use too.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ._parameters import check_parameter, choices_of
from ._validation import check_targets

__all__ = ["ExactSums", "TargetEncoding", "encode_targets", "exact_mean", "exact_sums",
           "on_target_grid", "target_scale"]

TASKS = choices_of("task")


@dataclass(frozen=True)
class TargetEncoding:
    """How fitted scores map back to what the user passed as ``y``.

    Attributes
    ----------
    task : {"regression", "classification"}
    classes : ndarray or None
        Sorted class labels (classification only); column j of the scores belongs to classes[j].
    squeeze : bool
        True when y was 1-D regression targets, so predictions are 1-D as well.
    offset : ndarray (k,) or None
        Regression: the constant mean of each output column (the training mean), which the
        fitted targets Y had subtracted and predictions add back; None for classification.
    """

    task: str
    classes: np.ndarray | None
    squeeze: bool
    offset: np.ndarray | None = None

    @property
    def n_outputs(self) -> int:
        return len(self.classes) if self.classes is not None else 1

    def decode(self, scores):
        """Scores (m, k) -> labels (classification) or outputs of y's shape (regression)."""
        if self.task == "classification":
            return self.classes[np.argmax(scores, axis=1)]
        return self.scores(scores)

    def scores(self, scores):
        """Scores (m, k) of the centred targets -> the user's outputs: plus the mean, flattened
        to (m,) for 1-D regression targets (classification: the scores as they are)."""
        if self.offset is not None:
            scores = scores + self.offset
        return scores[:, 0] if self.squeeze else scores

    def centre(self, Y):
        """Targets Y (m, k) in the user's units, minus the training mean: what the scores of
        the centred fit are compared with (regression; classification: Y as it is)."""
        return Y if self.offset is None else Y - self.offset


def encode_targets(y, n_samples, task="regression", classes=None, offset=None):
    """Check ``y`` and return (Y, encoding) with Y a C-contiguous float64 (n, k) matrix.

    For regression Y is y minus the mean of each column, ``encoding.offset``: ``offset`` when
    given (e.g. the mean of every MPI rank's targets, or of the training targets for a
    validation set), else :func:`exact_mean` of y.  For classification Y[i, j] = +1 if
    y[i] == classes[j] else -1 (one-vs-rest), for every class, binary problems included, so
    prediction is an argmax over columns.  ``classes`` (sorted,
    e.g. the union of every MPI rank's labels) fixes the columns; by default they are y's
    own labels.
    """
    check_parameter("task", task)
    if task == "regression":
        y = check_targets(y, n_samples, "y")
        squeeze = y.ndim == 1
        # (reshape(0, -1) is ambiguous: an empty MPI shard keeps y's number of outputs)
        Y = y.reshape(n_samples, 1 if squeeze else y.shape[1]).astype(np.float64)
        if offset is None:
            offset = exact_mean(Y)
        offset = np.asarray(offset, dtype=np.float64).reshape(Y.shape[1])
        Y -= offset
        return np.ascontiguousarray(Y), TargetEncoding(task, None, squeeze, offset)
    y = check_targets(y, n_samples, "y", numeric=False)
    if classes is None:
        classes = local_classes(y)
    classes = np.asarray(classes)
    if len(classes) < 2:
        raise ValueError(f"y has a single class ({classes[0]!r}) but task='classification' needs "
                         "at least 2 classes; check the labels or use task='regression'")
    codes = np.searchsorted(classes, y) if n_samples else np.zeros(0, dtype=np.intp)
    Y = -np.ones((n_samples, len(classes)))
    Y[np.arange(n_samples), codes.ravel()] = 1.0
    return Y, TargetEncoding(task, classes, False)


def local_classes(y):
    """The sorted distinct labels of checked class labels ``y``."""
    try:
        return np.unique(y)
    except TypeError as exc:       # e.g. a mix of strings and numbers, which cannot be sorted
        kinds = sorted({type(v).__name__ for v in y})
        raise ValueError(f"y has class labels of types {kinds} that cannot be compared ({exc}); "
                         "give every label the same type, e.g. y.astype(str)") from None


# A hyperparameter selection sees y / rms(y) rounded to a grid of 2^-30 (absolute: 1e-9 of y's
# scale, far below what any criterion resolves).  For c * y the quotient differs from y's only
# by rounding (c * y is itself rounded), which lands on the same grid point unless within a few
# ulp of a grid boundary; so the selection runs on the same bits and chooses the same values.
# Without the grid, rounding-level changes of y moved an L-BFGS or parabolic-search end point
# by 1e-6 to 1e-4 (issue 31, item 3: a selection's y-scale law).
TARGET_GRID = 2.0 ** -30


def target_scale(Y, largest=None, sum_of_squares=None, count=None):
    """The root mean square of Y (1.0 if Y is all zeros), without overflow at 1e200.

    On shards, pass the global ``largest`` |Y| and the global ``sum_of_squares`` of
    Y / largest and ``count`` of entries (:func:`scaled_squares` on each shard, reduced); Y is
    then unused."""
    if largest is None:
        largest = float(np.max(np.abs(Y))) if np.size(Y) else 0.0
        if largest > 0:
            sum_of_squares, count = scaled_squares(Y, largest), np.size(Y)
    if largest == 0:
        return 1.0
    return largest * float(np.sqrt(sum_of_squares / count))


def scaled_squares(Y, largest):
    """The sum of (Y / largest)^2 (0.0 for no entries), correctly rounded: the same bits for
    any order or split of the entries (:func:`squares_sums` on each shard, added)."""
    return float(squares_sums(Y, largest).sum()[0]) if np.size(Y) else 0.0


def squares_sums(Y, largest):
    """:class:`ExactSums` of (Y / largest)^2 over all of Y's entries (one column)."""
    return exact_sums(np.square(np.asarray(Y, dtype=np.float64) / largest).reshape(-1, 1))


def on_grid(values, spacing):
    """``values`` rounded to the nearest multiple of ``spacing``, a power of two: numbers that
    agree on every bit a grid that coarse keeps round to the same numbers (the targets of a
    selection, CG's right-hand sides and warm starts; the caller chooses the spacing)."""
    return np.round(values / spacing) * spacing


def power_of_two_at_most(bound):
    """The largest power of two <= ``bound`` (> 0), the spacing of a grid finer than bound."""
    return 2.0 ** np.floor(np.log2(bound))


def on_target_grid(Y, scale):
    """Y / scale rounded to TARGET_GRID: the targets a selection's criteria see."""
    return on_grid(np.asarray(Y, dtype=float) / scale, TARGET_GRID)


# Exact sums.  A float64 x is m 2^(e - 53) with m = frexp's mantissa times 2^53, an integer
# below 2^53, split as hi 2^27 + lo with |hi| < 2^26 and 0 <= lo < 2^27; per exponent, np.bincount
# adds the halves in float64, exactly while a sum stays below 2^53, i.e. for up to 2^26 rows at
# a time (_EXACT_ROWS).  The sums are combined as Python integers, so the total is exact: the
# same for any order of the rows, any thread count and any split over MPI ranks.
_EXACT_ROWS = 1 << 25
_EXPONENTS = 2100           # frexp's exponents of finite float64 run from -1073 to 1024
_EXPONENT_BASE = 1075


@dataclass(frozen=True)
class ExactSums:
    """The exact column sums of a float64 matrix and its number of rows: column j's sum is
    ``numerators[j] * 2.0 ** exponent``, a Python integer times a power of two.  ``+`` adds
    two (another shard's rows) exactly."""

    numerators: tuple
    exponent: int
    count: int

    def __add__(self, other):
        low = min(self.exponent, other.exponent)
        numerators = tuple((a << (self.exponent - low)) + (b << (other.exponent - low))
                           for a, b in zip(self.numerators, other.numerators))
        return ExactSums(numerators, low, self.count + other.count)

    def sum(self):
        """The sums of the columns, each correctly rounded to float64."""
        return np.array([float(Fraction(a << self.exponent) if self.exponent >= 0
                               else Fraction(a, 1 << -self.exponent))
                         for a in self.numerators])

    def mean(self):
        """The means of the columns, each correctly rounded to float64 (0.0 without rows)."""
        if self.count == 0:
            return np.zeros(len(self.numerators))
        return np.array([float(Fraction(a << self.exponent, self.count) if self.exponent >= 0
                               else Fraction(a, self.count << -self.exponent))
                         for a in self.numerators])


def exact_sums(Y):
    """:class:`ExactSums` of the finite float64 matrix Y (n, k)."""
    Y = np.asarray(Y, dtype=np.float64)
    n, k = Y.shape
    numerators = [0] * k
    # Blocks of at most _EXACT_ROWS rows and about 1 MiB: the pass makes about eight arrays of
    # a block's size, 9 MiB at its peak (at 4 MiB blocks, 33 MiB: above what random features
    # on 10^6 rows allocate once their centred targets are made).
    rows = max(1, min(_EXACT_ROWS, (1 << 20) // (8 * max(k, 1))))
    for start in range(0, n, rows):
        block = Y[start:start + rows]
        mantissa, exponent = np.frexp(block)
        m = (mantissa * 2.0 ** 53).astype(np.int64)
        halves = ((m >> 27).astype(np.float64), (m & ((1 << 27) - 1)).astype(np.float64))
        # One bincount over every column: column j's exponents counted from j _EXPONENTS.
        index = (exponent + _EXPONENT_BASE + _EXPONENTS * np.arange(k)).ravel()
        for half, shift in zip(halves, (27, 0)):
            per_exponent = np.bincount(index, weights=half.ravel(), minlength=k * _EXPONENTS)
            for i in np.flatnonzero(per_exponent):
                j, e = divmod(int(i), _EXPONENTS)
                numerators[j] += int(per_exponent[i]) << (e + shift)
    # Column j's sum is numerators[j] 2^(-_EXPONENT_BASE - 53).
    return ExactSums(tuple(numerators), -_EXPONENT_BASE - 53, n)


def exact_mean(Y):
    """The mean of each column of the finite float64 matrix Y (n, k), correctly rounded: the
    same bits for any order or split of the rows (0.0 for no rows).

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([[1e16], [1.0], [-1e16], [1.0]])
    >>> exact_mean(y), y.mean(axis=0)
    (array([0.5]), array([0.]))
    """
    return exact_sums(Y).mean()
