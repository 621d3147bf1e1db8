"""Deprecated: now :mod:`hkern.nystrom.sharded` (``fit_nystrom_sharded``) and, for its
selection's view, :mod:`hkern.hyperparameters.sharded_nystrom_problem`.  Reading a former name
warns once and gives the same object (:mod:`hkern.baselines`)."""
from ..hyperparameters import sharded_nystrom_problem as _problem
from ..nystrom import sharded as _sharded
from ._moved import forward

# Served by __getattr__ (a star import warns for each).
__all__ = ["ShardedNystromProblem", "fit_nystrom_sharded"]

__getattr__, __dir__ = forward(__name__, globals(), {
    "fit_nystrom_sharded": ("hkern.nystrom.sharded", _sharded.fit_nystrom_sharded),
    "ShardedNystromProblem": ("hkern.hyperparameters.sharded_nystrom_problem",
                              _problem.ShardedNystromProblem),
})
