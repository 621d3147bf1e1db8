"""Nystrom kernel ridge regression: :func:`fit_nystrom` (the ridge in Nystrom features, or
FALKON's preconditioned conjugate gradients, also on data sharded over MPI ranks) and its model
:class:`NystromKRR`.  The landmarks come from column selection (:mod:`hkern.oasis.landmarks`)."""
from .api import fit_nystrom
from .model import NystromKRR

__all__ = ["fit_nystrom", "NystromKRR"]
