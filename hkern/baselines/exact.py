"""Deprecated: now :mod:`hkern.exact` (``fit_exact``, ``ExactKRR``; the solver names in
:mod:`hkern.exact.api`) and, for its selection's view,
:mod:`hkern.hyperparameters.exact_pcg_problem`.  Reading a former name warns once and gives
the same object (:mod:`hkern.baselines`)."""
from ..exact import api as _api
from ..exact import model as _model
from ..hyperparameters import exact_pcg_problem as _problem
from ._moved import forward

# Served by __getattr__ (a star import warns for each).
__all__ = ["fit_exact", "ExactKRR", "SOLVERS"]

__getattr__, __dir__ = forward(__name__, globals(), {
    "fit_exact": ("hkern.exact", _api.fit_exact),
    "ExactKRR": ("hkern.exact", _model.ExactKRR),
    "SOLVERS": ("hkern.exact.api", _api.SOLVERS),
    "FORMER_SOLVERS": ("hkern.exact.api", _api.FORMER_SOLVERS),
    "AUTO_CHOLESKY_MAX_N": ("hkern.exact.api", _api.AUTO_CHOLESKY_MAX_N),
    "ExactPCGProblem": ("hkern.hyperparameters.exact_pcg_problem", _problem.ExactPCGProblem),
}, gone={
    "PRECONDITIONERS": "fit_exact finds its preconditioner kinds by name in the registry of "
                       "hkern.solvers.preconditioners (registered_preconditioners(), "
                       "preconditioner_kind(name))",
})
