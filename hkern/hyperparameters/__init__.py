"""Hyperparameter selection: ``sigma="auto"``, ``sigma="ard"`` and ``lam="auto"`` for every
kernel ridge fit (:mod:`hkern.hyperparameters.select`), the exact GP that starts it
(:mod:`hkern.hyperparameters.exact_gp`), the staged search of the iterative solvers
(:mod:`hkern.hyperparameters.iterative`) with the iterative fits' views of it (exact PCG's,
FALKON's, FALKON's on MPI shards), and the record a selection leaves on the model."""
from .edges import SelectionWarning
from .record import Candidate, HyperparameterSelection
from .select import selection_modes, selects_hyperparameters

__all__ = ["Candidate", "HyperparameterSelection", "SelectionWarning", "selects_hyperparameters",
           "selection_modes"]
