"""Exact kernel ridge regression: :func:`fit_exact` (a Cholesky factorisation, or preconditioned
conjugate gradients on the n x n system) and its model :class:`ExactKRR`, the reference every
approximation is measured against."""
from .api import fit_exact
from .model import ExactKRR

__all__ = ["fit_exact", "ExactKRR"]
