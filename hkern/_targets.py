"""Targets: regression outputs and one-vs-rest class encodings, shared by every method.

Every solver works on a 2-D target matrix Y (n, k), so multi-output regression and all classes of
a classifier are fitted by one solve with k right-hand sides.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._parameters import check_parameter, choices_of
from ._validation import check_targets

__all__ = ["TargetEncoding", "encode_targets", "on_target_grid", "target_scale"]

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
    """

    task: str
    classes: np.ndarray | None
    squeeze: bool

    @property
    def n_outputs(self) -> int:
        return len(self.classes) if self.classes is not None else 1

    def decode(self, scores):
        """Scores (m, k) -> labels (classification) or outputs of y's shape (regression)."""
        if self.task == "classification":
            return self.classes[np.argmax(scores, axis=1)]
        return scores[:, 0] if self.squeeze else scores

    def scores(self, scores):
        """Scores (m, k), flattened to (m,) for 1-D regression targets."""
        return scores[:, 0] if self.squeeze else scores


def encode_targets(y, n_samples, task="regression", classes=None):
    """Check ``y`` and return (Y, encoding) with Y a C-contiguous float64 (n, k) matrix.

    For classification Y[i, j] = +1 if y[i] == classes[j] else -1 (one-vs-rest), for every class,
    binary problems included, so prediction is an argmax over columns.  ``classes`` (sorted,
    e.g. the union of every MPI rank's labels) fixes the columns; by default they are y's
    own labels.
    """
    check_parameter("task", task)
    if task == "regression":
        y = check_targets(y, n_samples, "y")
        squeeze = y.ndim == 1
        # (reshape(0, -1) is ambiguous: an empty MPI shard keeps y's number of outputs)
        Y = np.ascontiguousarray(y.reshape(n_samples, 1 if squeeze else y.shape[1]))
        return Y, TargetEncoding(task, None, squeeze)
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
    """The sum of (Y / largest)^2 (0.0 for no entries)."""
    return float(np.sum(np.square(np.asarray(Y) / largest))) if np.size(Y) else 0.0


def on_target_grid(Y, scale):
    """Y / scale rounded to TARGET_GRID: the targets a selection's criteria see."""
    return np.round(np.asarray(Y, dtype=float) / scale / TARGET_GRID) * TARGET_GRID
