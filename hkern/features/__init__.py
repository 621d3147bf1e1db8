"""Kernel ridge regression on random features: :func:`fit_rff` (random Fourier features,
Rahimi and Recht) and its model :class:`RFFKRR`."""
from .api import fit_rff
from .model import RFFKRR

__all__ = ["fit_rff", "RFFKRR"]
