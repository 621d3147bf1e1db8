"""Iterative solvers for kernel ridge systems: block preconditioned CG, its preconditioners and
the system operators, FALKON, exact KRR by PCG (:mod:`.exact_pcg`) and the record of an
iterative solve (:mod:`.trace`); see doc/solvers.md.  The fits that build models on them are in
:mod:`hkern.exact` and :mod:`hkern.nystrom`."""
from .cg import CGResult, ConvergenceWarning, block_pcg
from .falkon import FalkonSystem, falkon_bytes, solve_falkon
from .operators import KernelSystem
from .preconditioners import (
    NystromPreconditioner,
    Preconditioner,
    PreconditionerKind,
    preconditioner_kind,
    register_preconditioner,
)
from .trace import SolverTrace

__all__ = ["CGResult", "ConvergenceWarning", "FalkonSystem", "KernelSystem",
           "NystromPreconditioner", "Preconditioner", "PreconditionerKind", "SolverTrace",
           "block_pcg", "falkon_bytes", "preconditioner_kind", "register_preconditioner",
           "solve_falkon"]
