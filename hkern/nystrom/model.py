"""The Nystrom kernel ridge model: :class:`NystromKRR`, which :func:`hkern.fit_nystrom`
returns (by its direct solver, FALKON, or FALKON on MPI shards)."""
from __future__ import annotations

from .._gp import MarginalLikelihood
from .._model import KernelRidgeModel
from .._threads import budget_threads
from ..kernels._api import _kernel_matvec_trusted

__all__ = ["NystromKRR"]


class NystromKRR(MarginalLikelihood, KernelRidgeModel):
    """Nystrom KRR: f(x) = k(x, Z) beta for landmarks Z.

    Attributes
    ----------
    landmarks_ : ndarray (r, d)
        The landmark points Z.
    landmark_indices_ : ndarray (r,)
        Their row indices in the training X.
    coef_ : ndarray (r, k)
        beta.
    rank_ : int
        The number of landmarks (the features' dimension).
    jitter_ : float
        What was added to K(Z, Z)'s diagonal before its Cholesky factorisation (``rcond``).
    n_iter_ : int or None
        Conjugate-gradient iterations (``solver="pcg"``); None for the direct solver.
    solver_trace_ : hkern.solvers.SolverTrace or None
        Per-iteration residuals, seconds and validation errors of ``solver="pcg"``.

    Examples
    --------
    Returned by :func:`fit_nystrom`; predictions are k(x, Z) beta:

    >>> import numpy as np
    >>> import hkern
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(500, 3)), rng.normal(size=500)
    >>> model = hkern.fit_nystrom(X, y, r=50, sigma=1.0, lam=1e-2, seed=0)
    >>> model.landmarks_.shape
    (50, 3)
    >>> K = hkern.kernel_matrix(X[:5], model.landmarks_, sigma=1.0)
    >>> bool(np.allclose(model.predict(X[:5]), K @ model.coef_[:, 0]))
    True
    """

    def __init__(self, landmarks, indices, coef, rank, n_iter=None, solver_trace=None,
                 jitter=0.0, **kw):
        super().__init__(**kw)
        self.landmarks_ = landmarks
        self.landmark_indices_ = indices
        self.coef_ = coef
        self.rank_ = rank
        self.jitter_ = jitter
        self.n_iter_ = n_iter
        self.solver_trace_ = solver_trace

    def _scores(self, X):
        return _kernel_matvec_trusted(self._kind, self._bandwidth, X, self.landmarks_, self.coef_,
                                      budget_threads())
