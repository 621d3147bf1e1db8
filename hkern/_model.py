"""The model contract every method shares: the checked fit inputs, the root of every fitted
model and the base of the kernel ridge models."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._targets import TargetEncoding, encode_targets
from ._threads import budgeted
from ._validation import check_array, check_bandwidth, check_n_features, check_positive
from .kernels import kernel_kind

__all__ = ["FitInputs", "FittedModel", "KernelRidgeModel", "prepare_fit"]


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


class FittedModel:
    """The root of every fitted model: the kernel ridge models, MEKA's approximation and GRIEF's
    Gaussian process.

    What they all have: the thread budget their methods run in, ``n_jobs`` (the
    :func:`hkern._threads.budgeted` decorator on a computing method reads it), the number of
    input features they were fitted on, against which new inputs are checked (``_check_X``),
    and a repr of the settings that tell one fit from another.  Models are plain objects of
    NumPy arrays (HCK's compiled operator pickles itself), so they pickle as they are.

    Subclasses call ``super().__init__(n_features=..., n_jobs=...)`` and implement
    ``_repr_fields()``.

    Attributes
    ----------
    n_features_in_ : int
        Number of input features seen at fit time.
    n_jobs : int or None
        The thread budget (OpenMP and BLAS) of the model's methods, the fit's ``n_jobs``; it may
        be changed after the fit.  Results are bitwise identical for any value.
    """

    def __init__(self, *, n_features, n_jobs):
        self.n_features_in_ = n_features
        self.n_jobs = n_jobs

    def _check_X(self, X):
        """New inputs X: finite, 2-D with the fitted number of features, as C-contiguous float64
        (float32, Fortran-ordered and read-only arrays are converted)."""
        return check_n_features(X, self.n_features_in_)

    def _repr_fields(self):  # pragma: no cover - abstract
        """The settings the repr shows, as {name: text}."""
        raise NotImplementedError

    def __repr__(self):
        fields = ", ".join(f"{name}={text}" for name, text in self._repr_fields().items())
        return f"{type(self).__name__}({fields})"


class KernelRidgeModel(FittedModel):
    """A fitted kernel ridge model: ``predict`` and ``decision_function`` on new inputs.

    Subclasses implement ``_scores(X)`` for validated inputs, returning an (m, k) array; it runs
    in the model's thread budget (read the thread count with
    :func:`hkern._threads.budget_threads`).

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
    n_jobs : int or None
        The thread budget of the model's methods (see :class:`FittedModel`).
    """

    def __init__(self, *, kernel, kind, sigma, lam, n_features, encoding, n_jobs):
        super().__init__(n_features=n_features, n_jobs=n_jobs)
        self.kernel = kernel
        self._kind = kind
        self.sigma = sigma
        self.lam = lam
        self.encoding_ = encoding

    @property
    def classes_(self):
        """Class labels (classification) or None."""
        return self.encoding_.classes

    def _scores(self, X):  # pragma: no cover - abstract
        raise NotImplementedError

    @budgeted
    def _checked_scores(self, X):
        return self._scores(self._check_X(X))

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

    def _repr_fields(self):
        return {"kernel": repr(self.kernel), "sigma": f"{self.sigma:g}", "lam": f"{self.lam:g}",
                "task": repr(self.encoding_.task)}


def prepare_fit(X, y, *, kernel, sigma, lam, task):
    """Validate the arguments every kernel ridge fit shares; returns a :class:`FitInputs`."""
    X = check_array(X, "X")
    Y, encoding = encode_targets(y, X.shape[0], task)
    name, kind = kernel_kind(kernel)
    sigma = check_bandwidth(sigma, X)
    lam = check_positive(lam, "lam", "the ridge regularisation must be positive (try 1e-3 to 1)")
    return FitInputs(X=X, Y=Y, encoding=encoding, kernel=name, kind=kind, sigma=sigma, lam=lam)
