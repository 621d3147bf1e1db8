"""What the serial and the sharded fit_nystrom check alike (:mod:`hkern.nystrom.api`,
:mod:`hkern.nystrom.sharded`): the solver names and the precision.  Their landmarks are checked
and drawn by column selection (:mod:`hkern.oasis.landmarks`)."""
from __future__ import annotations

from .._parameters import check_parameter, choices_of

__all__ = ["NYSTROM_SOLVERS", "check_precision"]

NYSTROM_SOLVERS = choices_of("solver", "fit_nystrom")


def check_precision(precision, solver, sharded=False):
    """``precision`` checked: "mixed" is FALKON's, on one process."""
    check_parameter("precision", precision, "fit_nystrom")
    if precision == "mixed" and solver != "pcg":
        raise ValueError("precision='mixed' is FALKON's (solver='pcg'); the direct solver "
                         "computes in double precision: pass precision='auto' or 'double'")
    if precision == "mixed" and sharded:
        raise ValueError("fit_nystrom on sharded data (comm=...) runs FALKON in double "
                         "precision: pass precision='auto' or 'double'")
