"""Kernel ridge regression on random features: :func:`fit_rff` (random Fourier features,
Rahimi and Recht) and its model :class:`RFFKRR`."""
from .api import RFFKRR, fit_rff

__all__ = ["fit_rff", "RFFKRR"]
