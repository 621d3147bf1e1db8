"""The small result object shared by the kernel ridge models."""
from __future__ import annotations

import numpy as np

from .._threads import resolve_n_jobs, thread_budget
from .._validation import check_n_features

__all__ = ["KernelRidgeModel"]


class KernelRidgeModel:
    """A fitted kernel ridge model: ``predict`` and ``decision_function`` on new inputs.

    Subclasses implement ``_scores(X)`` for validated inputs, returning an (m, k) array.

    Attributes
    ----------
    kernel : str
        Canonical kernel name.
    sigma, lam : float
        Kernel bandwidth and ridge regularisation used in the fit.
    n_features_in_ : int
        Number of input features seen at fit time.
    encoding_ : hkern._targets.TargetEncoding
        How scores map back to ``y``'s form (class labels for classification).
    """

    def __init__(self, *, kernel, kind, sigma, lam, n_features, encoding, n_jobs):
        self.kernel = kernel
        self._kind = kind
        self.sigma = sigma
        self.lam = lam
        self.n_features_in_ = n_features
        self.encoding_ = encoding
        self.n_jobs = n_jobs

    @property
    def classes_(self):
        """Class labels (classification) or None."""
        return self.encoding_.classes

    def _threads(self):
        return resolve_n_jobs(self.n_jobs)

    def _scores(self, X):  # pragma: no cover - abstract
        raise NotImplementedError

    def _checked_scores(self, X):
        X = check_n_features(X, self.n_features_in_)
        with thread_budget(self.n_jobs):
            return self._scores(X)

    def decision_function(self, X):
        """Raw scores: regression outputs, or one-vs-rest scores (m, n_classes)."""
        return self.encoding_.scores(self._checked_scores(X))

    def predict(self, X):
        """Predicted outputs (regression) or class labels (classification) for X (m, d)."""
        return self.encoding_.decode(self._checked_scores(X))

    @property
    def nbytes(self):
        """Bytes held by the model's arrays."""
        return int(sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray)))

    def __repr__(self):
        return (f"{type(self).__name__}(kernel={self.kernel!r}, sigma={self.sigma:g}, "
                f"lam={self.lam:g}, task={self.encoding_.task!r})")


def prepare_fit(X, y, kernel, sigma, lam, task):
    """Validate the arguments every kernel ridge fit shares.

    Returns (X, Y, encoding, kernel_name, kind, sigma, lam) with X (n, d) and Y (n, k) as
    C-contiguous float64.
    """
    from .._targets import encode_targets
    from .._validation import check_array, check_bandwidth, check_positive
    from ..kernels import kernel_kind

    X = check_array(X, "X")
    Y, encoding = encode_targets(y, X.shape[0], task)
    name, kind = kernel_kind(kernel)
    sigma = check_bandwidth(sigma, X)
    lam = check_positive(lam, "lam", "the ridge regularisation must be positive (try 1e-3 to 1)")
    return X, Y, encoding, name, kind, sigma, lam
