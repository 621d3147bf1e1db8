"""The model contract every method shares: the checked fit inputs and the fitted-model base."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._targets import TargetEncoding, encode_targets
from ._threads import resolve_n_jobs, thread_budget
from ._validation import check_array, check_bandwidth, check_n_features, check_positive
from .kernels import kernel_kind

__all__ = ["FitInputs", "KernelRidgeModel", "prepare_fit"]


@dataclass(frozen=True)
class FitInputs:
    """The arguments every kernel ridge fit shares, checked (see :func:`prepare_fit`).

    Attributes
    ----------
    X : ndarray (n, d)
        C-contiguous float64 inputs.
    Y : ndarray (n, k)
        C-contiguous float64 targets (one column per output, or the one-vs-rest encoding of
        class labels).
    encoding : hkern._targets.TargetEncoding
        How scores map back to y's form.
    kernel : str
        Canonical kernel name.
    kind : int
        The kernel's code in the compiled kernel engine.
    sigma, lam : float
        Checked bandwidth and ridge.
    """

    X: np.ndarray
    Y: np.ndarray
    encoding: TargetEncoding
    kernel: str
    kind: int
    sigma: float
    lam: float

    def model_params(self, n_jobs):
        """Keyword arguments of :class:`KernelRidgeModel` for a model fitted on these inputs."""
        return dict(kernel=self.kernel, kind=self.kind, sigma=self.sigma, lam=self.lam,
                    n_features=self.X.shape[1], encoding=self.encoding, n_jobs=n_jobs)


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


def prepare_fit(X, y, *, kernel, sigma, lam, task):
    """Validate the arguments every kernel ridge fit shares; returns a :class:`FitInputs`."""
    X = check_array(X, "X")
    Y, encoding = encode_targets(y, X.shape[0], task)
    name, kind = kernel_kind(kernel)
    sigma = check_bandwidth(sigma, X)
    lam = check_positive(lam, "lam", "the ridge regularisation must be positive (try 1e-3 to 1)")
    return FitInputs(X=X, Y=Y, encoding=encoding, kernel=name, kind=kind, sigma=sigma, lam=lam)
