"""Deprecated: now :mod:`hkern.nystrom` (``fit_nystrom``; the feature map and the memory plan
in :mod:`hkern.nystrom.api`) and, for its selection's view,
:mod:`hkern.hyperparameters.nystrom_pcg_problem`.  Reading a former name warns once and gives
the same object (:mod:`hkern.baselines`)."""
from ..hyperparameters import nystrom_pcg_problem as _problem
from ..nystrom import api as _api
from ._moved import forward

# Served by __getattr__ (a star import warns for each).
__all__ = ["fit_nystrom", "nystrom_feature_map", "nystrom_peak_bytes", "check_rcond"]

__getattr__, __dir__ = forward(__name__, globals(), {
    "fit_nystrom": ("hkern.nystrom", _api.fit_nystrom),
    "nystrom_feature_map": ("hkern.nystrom.api", _api.nystrom_feature_map),
    "nystrom_peak_bytes": ("hkern.nystrom.api", _api.nystrom_peak_bytes),
    "check_rcond": ("hkern.nystrom.api", _api.check_rcond),
    "NystromPCGProblem": ("hkern.hyperparameters.nystrom_pcg_problem",
                          _problem.NystromPCGProblem),
}, gone={
    "draw_landmarks": "landmarks are column selection, drawn by "
                      "hkern.oasis.landmarks.draw_landmarks on a fit's checked inputs (it takes "
                      "the kernel's engine code and bandwidth); on your own data call "
                      "hkern.select_columns(X, r, method=...)",
})
