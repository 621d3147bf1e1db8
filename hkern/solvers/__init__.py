"""Iterative solvers for kernel ridge systems: block preconditioned CG, its preconditioners and
the system operators (issue 19; see doc/solvers.md)."""
from .cg import CGResult, ConvergenceWarning, block_pcg
from .operators import KernelSystem
from .preconditioners import NystromPreconditioner

__all__ = ["CGResult", "ConvergenceWarning", "KernelSystem", "NystromPreconditioner", "block_pcg"]
