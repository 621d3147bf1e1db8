"""Baselines every method is measured against: exact KRR, Nystrom KRR, random Fourier features."""
from ._iterative import SolverTrace
from .exact import ExactKRR, fit_exact
from .nystrom import fit_nystrom
from .nystrom_model import NystromKRR
from .rff import RFFKRR, fit_rff

__all__ = ["fit_exact", "fit_nystrom", "fit_rff", "ExactKRR", "NystromKRR", "RFFKRR",
           "SolverTrace"]
