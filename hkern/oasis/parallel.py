"""Deprecated: the former name of :mod:`hkern.oasis.sharded` (oASIS-P), whose command line is
now ``python -m hkern.oasis``.  Importing it warns; ``python -m hkern.oasis.parallel`` still
runs the command line."""
import sys
import warnings

from .sharded import *  # noqa: F403
from .sharded import __all__  # noqa: F401

warnings.warn("hkern.oasis.parallel is renamed hkern.oasis.sharded (the MPI code of hkern is "
              "named 'sharded' throughout), and its command line is `python -m hkern.oasis`",
              DeprecationWarning, stacklevel=2)

if __name__ == "__main__":
    from .__main__ import main
    sys.exit(main())
