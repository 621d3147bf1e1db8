"""Standardisation at an exact power-of-two scale: what GRIEF's inputs and targets go through
before the model sees them."""
from __future__ import annotations

import numpy as np

__all__ = ["Standardiser"]


class Standardiser:
    """Column means and standard deviations, computed at an exact power-of-two scale.

    Each column is multiplied by 2^k with its largest magnitude in [0.5, 1) when that magnitude
    is outside [2^-100, 2^100] (k = 0 otherwise, so ordinary data are treated exactly as
    ``(A - A.mean(0)) / A.std(0)``).  Multiplying by a power of two is exact, and it keeps the
    squares inside the statistics from underflowing (columns near 1e-300 had std 0 and were
    taken for constant) or overflowing.  Constant columns are found exactly (max == min): the
    rounding of a mean could give a constant column such as 3e100 a standard deviation of 1e84.

    Attributes
    ----------
    active : ndarray of int
        The non-constant columns (every column with ``keep_constant``: a constant one then gets
        k = 0 and standard deviation 1).
    mean_, std_ : ndarray
        Per active column, in the caller's units.
    """

    SAFE = (2.0**-100, 2.0**100)

    def __init__(self, A, keep_constant=False):
        high, low = A.max(axis=0), A.min(axis=0)
        constant = high == low
        self.active = np.arange(A.shape[1]) if keep_constant else np.flatnonzero(~constant)
        top = np.maximum(high, -low)[self.active]
        constant = constant[self.active]
        safe = constant | ((top >= self.SAFE[0]) & (top <= self.SAFE[1]))
        self.k = np.where(safe, 0, np.clip(-np.frexp(top)[1], -1022, 1023)).astype(np.intc)
        # C order: A[:, active] is Fortran-ordered, and the column sums would then be taken in
        # another order than A.mean(axis=0) takes them.
        scaled = np.ldexp(A[:, self.active], self.k, order="C")
        self.mean_s = scaled.mean(axis=0)
        self.std_s = np.where(constant, 1.0, scaled.std(axis=0))
        self.mean_ = np.ldexp(self.mean_s, -self.k)
        self.std_ = np.ldexp(self.std_s, -self.k)

    def transform(self, A):
        """(2^k A[:, active] - mean) / std (scaled statistics), C-contiguous."""
        Z = np.ldexp(A[:, self.active], self.k, order="C")
        Z -= self.mean_s
        Z /= self.std_s
        return np.ascontiguousarray(Z)
