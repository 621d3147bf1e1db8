"""The model contract every method shares: the checked fit inputs, the root of every fitted
model and the base of the kernel ridge models."""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

import numpy as np

from ._gp import ProfiledRidge
from ._memory import check_memory
from ._parameters import check_parameter
from ._probabilities import current_calibration, model_probabilities
from ._targets import TargetEncoding, encode_targets
from ._threads import budgeted
from ._validation import (
    check_array,
    check_n_features,
    check_sigma,
    check_underflow,
    scale_inputs,
    warn_user,
)
from .kernels import kernel_kind

__all__ = ["FitInputs", "FittedModel", "KernelRidgeModel", "alias", "format_sigma",
           "prepare_fit", "prepare_sigma", "recording_selection", "renamed", "scaled_copy_bytes"]


# The record of the hyperparameter selection running in this context (hkern.hyperparameters),
# which every kernel ridge model fitted inside it keeps as ``selection_`` from its construction.
_SELECTION = contextvars.ContextVar("hkern_selection", default=None)


@contextlib.contextmanager
def recording_selection(record):
    """Fit the selection's candidates and its final model inside this context: each
    :class:`KernelRidgeModel` made there is constructed with ``selection_ = record`` (the record
    is completed before the selection returns its model).  Nothing is set on a model after
    construction (doc/conventions.md), and the fits need no argument for it."""
    token = _SELECTION.set(record)
    try:
        yield record
    finally:
        _SELECTION.reset(token)


class renamed:  # lower case: it is used like ``property``
    """A former attribute name, kept for one release: reading it warns and gives the new one.

    Fitted values end in ``_`` (doc/conventions.md); the models that had fitted values without
    it (``HierarchicalKRR.r``, ``ColumnSelection.indices``, ...) declare the old name as
    ``r = renamed("r_")`` so that code written against it keeps working, with a FutureWarning.

    Examples
    --------
    >>> import warnings
    >>> class Fitted:
    ...     r = renamed("r_")
    ...     def __init__(self):
    ...         self.r_ = 3
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     value = Fitted().r
    >>> value, caught[0].category.__name__
    (3, 'FutureWarning')
    """

    def __init__(self, new):
        self.new = new

    def __set_name__(self, owner, name):
        self.old = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        warn_user(f"{type(obj).__name__}.{self.old} is now {self.new} (fitted values end in "
                  "'_'); the old name will be removed in a future release", FutureWarning)
        return getattr(obj, self.new)


class alias:  # lower case: it is used like ``property``
    """A second name of an attribute the object stores once: ``sigma_ = alias("sigma")`` reads
    ``sigma``, the same object (read-only: the stored attribute is the one value).

    Examples
    --------
    >>> class Fitted:
    ...     sigma_ = alias("sigma")
    ...     def __init__(self):
    ...         self.sigma = [1.5]
    >>> model = Fitted()
    >>> model.sigma_ is model.sigma
    True
    """

    def __init__(self, name):
        self.name = name
        self.__doc__ = f"The model's ``{name}``: the same value under another name."

    def __set_name__(self, owner, name):
        self.alias_name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        return getattr(obj, self.name)

    def __set__(self, obj, value):
        raise AttributeError(f"{self.alias_name} is {self.name}, which the model keeps; it is "
                             "not set after the fit")


@dataclass(frozen=True)
class FitInputs:
    """The arguments every kernel ridge fit shares, checked (see :func:`prepare_fit`).

    Attributes
    ----------
    X : ndarray (n, d)
        C-contiguous float64 inputs, divided by the lengthscales when ``sigma`` is an array:
        every kernel evaluation of the fit uses these and ``bandwidth``.  float32 only for a
        fit that asked for it (``prepare_fit(keep_float32=True)``; a float32 X and a scalar
        sigma), which widens what its float64 arithmetic reads itself.
    Y : ndarray (n, k)
        C-contiguous float64 targets (one column per output, or the one-vs-rest encoding of
        class labels).
    encoding : hkern._targets.TargetEncoding
        How scores map back to y's form.
    kernel : str
        Canonical kernel name.
    kind : int
        The kernel's code in the compiled kernel engine.
    sigma : float or ndarray (d,)
        The checked ``sigma`` as the user gave it: a bandwidth, or one lengthscale per feature
        (a read-only copy).
    bandwidth : float
        The bandwidth the kernel engine uses on ``X``: ``sigma``, or 1.0 for lengthscales.
    lengthscales : ndarray (d,) or None
        The per-feature lengthscales new inputs are divided by, or None for a scalar sigma.
    lam : float
        Checked ridge.
    single : ndarray (n, d) or None
        The user's float32 X (C-contiguous) with a scalar sigma, and None otherwise (with
        lengthscales the scaled copy is made from a float32 X directly): X itself when the fit
        asked to keep it (``prepare_fit(keep_float32=True)``), else X is its float64 copy.
        Exactly X rounded to float32, which a mixed-precision solve's float32 kernel products
        read as it is (:meth:`float32_X`).
    """

    X: np.ndarray
    Y: np.ndarray
    encoding: TargetEncoding
    kernel: str
    kind: int
    sigma: object
    bandwidth: float
    lengthscales: object
    lam: float
    single: object = None

    def float32_X(self):
        """X in float32 for the single-precision engine: the user's float32 X itself when X
        was widened from it (no copy), else X rounded to float32 (a copy, 4 n d bytes)."""
        return self.single if self.single is not None else self.X.astype(np.float32)

    @property
    def scaled_bytes(self):
        """Bytes of the copy of X that ``prepare_fit`` made, scaled by the lengthscales or
        widened from float32 (0 for a scalar sigma and a float64 X, or a float32 X kept as it
        is): part of the fit's memory, which every fit adds to its peak estimate."""
        if self.single is not None and self.X is not self.single:
            return 8 * self.X.shape[0] * self.X.shape[1]
        return scaled_copy_bytes(self.X, self.lengthscales)

    def model_params(self, n_jobs, lam=None):
        """Keyword arguments of :class:`KernelRidgeModel` for a model fitted on these inputs
        (``lam``: the ridge the fit chose, when it was given a :class:`hkern._gp.ProfiledRidge`)."""
        lam = self.lam if lam is None else lam
        return dict(kernel=self.kernel, kind=self.kind, sigma=self.sigma,
                    bandwidth=self.bandwidth, lam=lam, n_features=self.X.shape[1],
                    encoding=self.encoding, n_jobs=n_jobs, lengthscales=self.lengthscales)


class FittedModel:
    """The root of every fitted model: the kernel ridge models, MEKA's approximation and GRIEF's
    Gaussian process.

    What they all have: the thread budget their methods run in, ``n_jobs`` (the
    :func:`hkern._threads.budgeted` decorator on a computing method reads it), the number of
    input features they were fitted on, against which new inputs are checked (``_check_X``,
    which also divides them by the fit's per-feature lengthscales, if any, so that every
    method's ``_scores`` sees inputs in the coordinates it was fitted in), and a repr of the
    settings that tell one fit from another.  Models are plain objects of NumPy arrays (HCK's
    compiled operator pickles itself), so they pickle as they are.

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

    # Per-feature lengthscales new inputs are divided by; the class default None (no scaling)
    # stands for models fitted with a scalar sigma and for GRIEF, which scales its own inputs.
    _lengthscales = None

    def __init__(self, *, n_features, n_jobs, lengthscales=None):
        self.n_features_in_ = n_features
        self.n_jobs = n_jobs
        if lengthscales is not None:
            self._lengthscales = lengthscales

    def _check_X(self, X):
        """New inputs X: finite, 2-D with the fitted number of features, as C-contiguous float64
        (float32, Fortran-ordered and read-only arrays are converted), divided by the fit's
        lengthscales when sigma was an array."""
        return scale_inputs(check_n_features(X, self.n_features_in_), self._lengthscales)

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
    sigma : float or ndarray (d,)
        Kernel bandwidth, or per-feature lengthscales, used in the fit.  With lengthscales,
        fitted attributes that hold input points (``X_fit_``, ``landmarks_``, ...) are in the
        scaled coordinates ``X / sigma``.
    lam : float
        Ridge regularisation used in the fit.
    sigma_, lam_ : float or ndarray (d,), float
        ``sigma`` and ``lam`` themselves (the same objects, stored once) under the names
        scikit-learn gives fitted values: the ones a selection (``sigma="auto"``/``"ard"``,
        ``lam="auto"``) chose.
    selection_ : hkern.HyperparameterSelection or None
        How they were chosen (criterion, every candidate, seconds); None when both were given.
    n_features_in_ : int
        Number of input features seen at fit time.
    encoding_ : hkern._targets.TargetEncoding
        How scores map back to ``y``'s form (class labels for classification).
    y_mean_ : ndarray (k,) or None
        Regression: the constant mean of each output, the training mean of y (hkern._targets);
        the fit solved for y minus it, and predictions add it back.  None for a classifier.
    signal_variance_ : ndarray (k,) or None
        Regression: the Gaussian process's signal variance s2 of each output, in the units of
        y squared: its maximum-likelihood value (y - mu)^T A^{-1} (y - mu) / n at the fitted
        kernel and lam (hkern._gp), the scale of ``predict``'s standard deviation.  None for a
        classifier, and for the fits that are not a Gaussian process (MEKA, SLKL).
    noise_ : ndarray (k,) or None
        Regression: the noise variance of each output, ``signal_variance_ * lam``, in the units
        of y squared (what ``include_noise=True`` adds).  None where ``signal_variance_`` is.
    n_jobs : int or None
        The thread budget of the model's methods (see :class:`FittedModel`).
    """

    # Why the model has no predictive distribution (the fits that are GP posteriors override
    # predict with hkern._gp.GaussianProcessKRR's).
    _NO_VARIANCE = "it is not the posterior of a Gaussian process"

    # The fitted values under scikit-learn's names: sigma and lam, stored once.
    sigma_ = alias("sigma")
    lam_ = alias("lam")

    def __init__(self, *, kernel, kind, sigma, bandwidth, lam, n_features, encoding, n_jobs,
                 lengthscales=None, evidence=None):
        super().__init__(n_features=n_features, n_jobs=n_jobs, lengthscales=lengthscales)
        # An hkern._gp.Evidence from the fits whose target covariance A = K + lam I they solve
        # exactly (exact KRR, HCK, the independent kernel, Nystrom, random features): their
        # log marginal likelihood and the criterion of their hyperparameter selection; None
        # for the others.
        self._evidence = evidence
        self.kernel = kernel
        self._kind = kind
        self.sigma = sigma
        # The kernel engine's bandwidth on (scaled) inputs, as the fit's inputs hold it
        # (FitInputs.bandwidth: sigma, or 1 when sigma holds lengthscales).
        self._bandwidth = bandwidth
        self.lam = lam
        self.encoding_ = encoding
        # Per output, an array with one entry per output (also for 1-D y, as every
        # per-output value: doc/conventions.md).
        regression = encoding.task == "regression"
        self.y_mean_ = encoding.offset.copy() if regression else None
        s2 = evidence.signal_variance() if evidence is not None and regression else None
        self.signal_variance_ = s2
        self.noise_ = None if s2 is None else s2 * lam
        # How sigma and lam were chosen (hkern.hyperparameters.HyperparameterSelection): the
        # record of the selection this model is fitted in, None outside one.
        self.selection_ = _SELECTION.get()
        # Classifiers: the map of their scores to class probabilities (hkern._probabilities),
        # made by the fit like the selection record; None for regression and sharded fits.
        self.calibration_ = current_calibration() if encoding.task == "classification" else None

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

    def predict(self, X, *, return_std=False, return_cov=False, **kwargs):
        """Predicted outputs (regression) or class labels (classification) for X (m, d).

        ``return_std`` and ``return_cov`` raise a ValueError saying why this model has no
        predictive distribution (the Gaussian-process models have them)."""
        if return_std or return_cov:
            raise ValueError(f"{type(self).__name__} has no predictive standard deviation: "
                             f"{self._NO_VARIANCE}; fit_exact, fit_nystrom, fit_rff and "
                             "fit_hierarchical give one")
        if kwargs:
            raise TypeError(f"predict() got unexpected keyword arguments {sorted(kwargs)}")
        return self.encoding_.decode(self._checked_scores(X))

    def predict_proba(self, X):
        """Class probabilities (m, n_classes) for X (m, d), columns in the order of
        ``classes_``, each row summing to 1: softmax(beta * scores) with the inverse
        temperature the fit chose on held-out rows (:class:`hkern.ProbabilityCalibration`,
        ``calibration_``).  Classification only."""
        return model_probabilities(self, X)

    @property
    def nbytes(self):
        """Bytes held by the model's arrays."""
        return int(sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray)))

    def _repr_fields(self):
        return {"kernel": repr(self.kernel), "sigma": format_sigma(self.sigma),
                "lam": f"{self.lam:g}", "task": repr(self.encoding_.task)}


def format_sigma(sigma):
    """sigma for a repr: ``1.5``, or the lengthscales as ``[0.5, 2, ...]`` (at most 6 shown)."""
    if np.ndim(sigma) == 0:
        return f"{sigma:g}"
    shown = ", ".join(f"{v:g}" for v in sigma[:6])
    return f"[{shown}{', ...' if len(sigma) > 6 else ''}]"


def scaled_copy_bytes(X, lengthscales):
    """Bytes of the copy of X divided by the lengthscales (0 when there are none): a fit's
    peak estimate adds them, since the copy lives as long as the fit."""
    return 0 if lengthscales is None else 8 * X.shape[0] * X.shape[1]


def prepare_sigma(X, sigma, max_memory=None, largest=None, widen=True):
    """``(scaled X, sigma, bandwidth, lengthscales)`` from checked inputs X and the user's sigma.

    The scaled copy of X (8 n d bytes, only for lengthscales), or the float64 copy of a float32
    X (for a scalar sigma), is checked against ``max_memory`` before it is made: the returned X
    is float64 either way (``widen=False``: a float32 X with a scalar sigma is returned as it
    is).  ``largest``: the largest magnitude of the scaled data the bandwidth is checked
    against, when X is one MPI rank's shard of it.
    """
    bandwidth, lengthscales = check_sigma(sigma, X.shape[1])
    n, d = X.shape
    if lengthscales is not None:
        check_memory(8 * n * d, max_memory, what=f"the inputs divided by the lengthscales "
                     f"(n={n}, d={d})", fix="pass fewer samples or raise max_memory")
        X = scale_inputs(X, lengthscales)        # float64, straight from a float32 X
    elif X.dtype != np.float64 and widen:
        check_memory(8 * n * d, max_memory, what=f"the float32 inputs in float64 (n={n}, d={d})",
                     fix="pass fewer samples or raise max_memory")
        X = X.astype(np.float64)
    check_underflow(bandwidth, X if largest is None else np.array([largest]))
    return X, (bandwidth if lengthscales is None else lengthscales), bandwidth, lengthscales


def prepare_fit(X, y, *, kernel, sigma, lam, task, max_memory=None, profiles_ridge=False,
                classes=None, min_samples=1, largest=None, keep_float32=False, offset=None):
    """Validate the arguments every kernel ridge fit shares; returns a :class:`FitInputs`.

    ``profiles_ridge``: the fit accepts a :class:`hkern._gp.ProfiledRidge` for ``lam`` (it
    chooses the ridge itself; the hyperparameter selection asks the fits that can).
    ``classes``, ``min_samples``, ``largest`` and ``offset``: for one MPI rank's shard of the
    data (hkern._sharded), the class labels of every rank, 0 (a shard may be empty), the
    largest magnitude of every rank's (scaled) data, which the bandwidth is checked against,
    and the mean of every rank's regression targets, which the targets are centred by
    (:func:`hkern._targets.encode_targets`).

    A per-feature ``sigma`` is applied here, once: the returned X is ``X / sigma`` and the
    bandwidth 1, so the methods need not know about lengthscales.

    A float32 X is read as it is: divided by the lengthscales straight into the float64 copy
    the fit uses, or (scalar sigma) widened once, so that it costs the fit no more memory than
    a float64 X (before, its float64 conversion came on top of the scaled copy), and the fit is
    bitwise the fit of ``X.astype(np.float64)``.  ``keep_float32``: a fit whose float64
    arithmetic reads X in blocks it widens itself (FALKON,
    :func:`hkern.kernels._api._kernel_normal_times_widened`) gets a float32 X with a scalar
    sigma as it is, X float32 in the returned inputs, and no float64 copy at all.
    """
    X = check_array(X, "X", min_samples=min_samples, keep_float32=True)
    single = X if X.dtype == np.float32 else None
    Y, encoding = encode_targets(y, X.shape[0], task, classes, offset)
    name, kind = kernel_kind(kernel)
    X, sigma, bandwidth, lengthscales = prepare_sigma(X, sigma, max_memory, largest,
                                                      widen=not keep_float32)
    if not (profiles_ridge and isinstance(lam, ProfiledRidge)):
        lam = check_parameter("lam", lam)
    return FitInputs(X=X, Y=Y, encoding=encoding, kernel=name, kind=kind, sigma=sigma,
                     bandwidth=bandwidth, lengthscales=lengthscales, lam=lam,
                     single=single if lengthscales is None else None)
