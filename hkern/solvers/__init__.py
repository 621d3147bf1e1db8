"""Iterative solvers for kernel ridge systems: block preconditioned CG, its preconditioners and
the system operators (issue 19; see doc/solvers.md)."""
from .cg import CGResult, ConvergenceWarning, block_pcg
from .falkon import FalkonSystem, falkon_bytes
from .operators import KernelSystem
from .preconditioners import NystromPreconditioner

__all__ = ["CGResult", "ConvergenceWarning", "FalkonSystem", "KernelSystem",
           "NystromPreconditioner", "block_pcg", "falkon_bytes"]
