"""Deprecated: the Nystrom model is now :class:`hkern.nystrom.NystromKRR`, the fits' shared
checks :mod:`hkern.nystrom.checks`, and the landmarks' check and uniform draw
:mod:`hkern.oasis.landmarks`.  Reading a former name warns once and gives the same object
(:mod:`hkern.baselines`)."""
from ..nystrom import checks as _checks
from ..nystrom import model as _model
from ..oasis import landmarks as _landmarks
from ._moved import forward

# Served by __getattr__ (a star import warns for each).
__all__ = ["NYSTROM_SOLVERS", "NystromKRR", "check_landmarks", "check_precision",
           "uniform_landmarks"]

__getattr__, __dir__ = forward(__name__, globals(), {
    "NystromKRR": ("hkern.nystrom", _model.NystromKRR),
    "NYSTROM_SOLVERS": ("hkern.nystrom.checks", _checks.NYSTROM_SOLVERS),
    "check_precision": ("hkern.nystrom.checks", _checks.check_precision),
    "check_landmarks": ("hkern.oasis.landmarks", _landmarks.check_landmarks),
    "uniform_landmarks": ("hkern.oasis.landmarks", _landmarks.uniform_landmarks),
})
