"""How the deprecated modules of :mod:`hkern.baselines` hand out the names that moved.

hkern's main fits were in ``hkern.baselines`` and now have packages named for their method
(:mod:`hkern.exact`, :mod:`hkern.nystrom`, :mod:`hkern.features`); their selection views moved
to :mod:`hkern.hyperparameters`, their landmarks to :mod:`hkern.oasis.landmarks`.  Each former
module keeps its names for code written against it: reading one gives the object itself and
warns once, with a DeprecationWarning naming its new path.
"""
from __future__ import annotations

import warnings

__all__ = ["forward"]


def forward(old, namespace, moved, gone=None):
    """``(__getattr__, __dir__)`` for the former module named ``old`` whose globals are
    ``namespace``.

    ``moved`` maps each former name to ``(new module path, object)``: the first read of the
    name warns, naming the new path, returns the object and keeps it in ``namespace``, so that
    later reads (and the second look-up ``from old import name`` makes) find it without a
    second warning.  ``gone`` maps former names with no successor of the same signature to
    the message of their AttributeError.
    """
    def __getattr__(name):
        if name in moved:
            home, value = moved[name]
            warnings.warn(f"{old}.{name} is deprecated: it is now {home}.{name} (the main fits "
                          "have packages named for their method: hkern.exact, hkern.nystrom, "
                          "hkern.features); import it from there, as the old path will be "
                          "removed in a future release", DeprecationWarning, stacklevel=2)
            namespace[name] = value
            return value
        if gone and name in gone:
            raise AttributeError(f"{old}.{name} is gone: {gone[name]}")
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    def __dir__():
        return sorted({n for n in namespace if n.startswith("__")} | set(moved))

    return __getattr__, __dir__
