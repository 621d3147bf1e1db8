"""Deprecated: the former home of hkern's main fits, which now have packages named for their
method: :mod:`hkern.exact` (``fit_exact``, ``ExactKRR``), :mod:`hkern.nystrom`
(``fit_nystrom``, ``NystromKRR``) and :mod:`hkern.features` (``fit_rff``, ``RFFKRR``);
``SolverTrace`` is :class:`hkern.solvers.SolverTrace`.  The names and the former submodules
(``hkern.baselines.exact``, ``.nystrom``, ``.nystrom_model``, ``.nystrom_sharded``, ``.rff``)
still work: reading a name warns once with a DeprecationWarning naming its new path, and
gives the same object.  The fits are also ``hkern.fit_exact`` and so on, as before."""
from ..exact import ExactKRR as _ExactKRR
from ..exact import fit_exact as _fit_exact
from ..features import RFFKRR as _RFFKRR
from ..features import fit_rff as _fit_rff
from ..nystrom import NystromKRR as _NystromKRR
from ..nystrom import fit_nystrom as _fit_nystrom
from ..solvers import SolverTrace as _SolverTrace
from ._moved import forward

# Served by __getattr__ (a star import warns for each).
__all__ = ["fit_exact", "fit_nystrom", "fit_rff", "ExactKRR", "NystromKRR", "RFFKRR",
           "SolverTrace"]

__getattr__, __dir__ = forward(__name__, globals(), {
    "fit_exact": ("hkern.exact", _fit_exact),
    "ExactKRR": ("hkern.exact", _ExactKRR),
    "fit_nystrom": ("hkern.nystrom", _fit_nystrom),
    "NystromKRR": ("hkern.nystrom", _NystromKRR),
    "fit_rff": ("hkern.features", _fit_rff),
    "RFFKRR": ("hkern.features", _RFFKRR),
    "SolverTrace": ("hkern.solvers", _SolverTrace),
})
