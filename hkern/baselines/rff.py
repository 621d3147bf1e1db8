"""Deprecated: now :mod:`hkern.features` (``fit_rff``, ``RFFKRR``; the memory plan in
:mod:`hkern.features.api`, the feature map in :mod:`hkern.features.rff`).  Reading a former
name warns once and gives the same object (:mod:`hkern.baselines`)."""
from ..features import api as _api
from ..features import model as _model
from ..features import rff as _rff
from ._moved import forward

# Served by __getattr__ (a star import warns for each).
__all__ = ["fit_rff", "RFFKRR", "rff_peak_bytes", "rff_features", "check_phases"]

__getattr__, __dir__ = forward(__name__, globals(), {
    "fit_rff": ("hkern.features", _api.fit_rff),
    "RFFKRR": ("hkern.features", _model.RFFKRR),
    "rff_peak_bytes": ("hkern.features.api", _api.rff_peak_bytes),
    "rff_features": ("hkern.features.rff", _rff.rff_features),
    "check_phases": ("hkern.features.rff", _rff.check_phases),
})
