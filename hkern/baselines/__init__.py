"""Baselines every method is measured against: exact KRR, Nystrom KRR, random Fourier features."""
# SolverTrace, the record of an iterative fit, lives with the solvers; kept here too, where
# it was first exported.
from ..solvers.trace import SolverTrace
from .exact import ExactKRR, fit_exact
from .nystrom import fit_nystrom
from .nystrom_model import NystromKRR
from .rff import RFFKRR, fit_rff

__all__ = ["fit_exact", "fit_nystrom", "fit_rff", "ExactKRR", "NystromKRR", "RFFKRR",
           "SolverTrace"]
