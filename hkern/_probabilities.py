"""Class probabilities of the one-vs-rest classifiers: temperature scaling of their scores.

Every ``fit_<method>(..., task="classification")`` fits kernel ridge regression on +-1
one-vs-rest targets and predicts the class of the largest score.  ``predict_proba`` maps the
score vector s (one entry per class) to probabilities by a softmax at one inverse temperature
beta >= 0,

    p_j(x) = exp(beta s_j(x)) / sum_l exp(beta s_l(x)),

with beta fitted by the multinomial log-likelihood of held-out rows: the fit holds out a
stratified fifth of the training rows (drawn from its ``seed``), fits the same method with the
hyperparameters the full fit used on the other four fifths, and chooses beta on the held-out
scores.  The full fit's scores are then scaled by that beta (doc/design.md, "Class
probabilities", measures this one split against five folds and against the alternatives:
Platt scaling per class, vector scaling).  One parameter keeps the argmax and, for two classes,
the order of ``decision_function``: ``predict`` is the most probable class, as scikit-learn
expects of a classifier.

The negative log-likelihood is convex in beta (a log-sum-exp of linear functions, minus a
linear one), so the bounded 1-D minimisation finds its one minimum.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import time

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from ._arguments import call_arguments
from ._targets import encode_targets
from ._validation import check_array, check_seed

__all__ = ["ProbabilityCalibration", "calibrates_probabilities", "fit_temperature",
           "model_probabilities", "current_calibration",
           "softmax_probabilities", "HOLDOUT_FRACTION", "BETA_MAX"]

# The share of each class's training rows the calibration holds out.
HOLDOUT_FRACTION = 0.2
# The largest inverse temperature: the scores are of order 1 (+-1 targets), so beta = 50 already
# gives probabilities within exp(-50) of 0 or 1 at a score gap of 1; a held-out set that every
# class separates perfectly would otherwise push beta to infinity.
BETA_MAX = 50.0
# The inverse temperature of a fit whose held-out part could not be fitted or scored (fewer
# than two held-out rows): the least-squares scores read as logits.
BETA_DEFAULT = 1.0

# The calibration of the classifier being fitted: each kernel ridge model made inside
# :func:`calibrating` is constructed with it (hkern._model.KernelRidgeModel), as with the
# selection record (hkern._model.recording_selection); the fit completes it before it returns.
_CALIBRATION = contextvars.ContextVar("hkern_calibration", default=None)


class ProbabilityCalibration:
    """The map from a classifier's one-vs-rest scores to class probabilities:
    ``softmax(beta_ * scores)`` (module docstring).

    Made by the fit (``model.calibration_``), completed before the fit returns.

    Attributes
    ----------
    beta_ : float
        The inverse temperature, 0 <= beta_ <= :data:`BETA_MAX`.
    n_calibration_ : int
        The held-out rows beta_ was fitted on (0: none could be held out, beta_ is
        :data:`BETA_DEFAULT`).
    log_loss_ : float or None
        The mean negative log-likelihood of those rows at beta_.
    seconds_ : float
        The time the held-out fit and the choice of beta_ took.
    """

    def __init__(self):
        self.beta_ = None
        self.n_calibration_ = 0
        self.log_loss_ = None
        self.seconds_ = 0.0

    def _complete(self, beta, n_calibration, log_loss, seconds):
        if self.beta_ is not None:
            raise RuntimeError("a ProbabilityCalibration is completed once, by its fit")
        self.beta_ = float(beta)
        self.n_calibration_ = int(n_calibration)
        self.log_loss_ = None if log_loss is None else float(log_loss)
        self.seconds_ = float(seconds)

    def probabilities(self, scores, log=False):
        """Class probabilities (m, k) of one-vs-rest scores (m, k): rows sum to 1 (``log``:
        their logarithms)."""
        if self.beta_ is None:
            raise ValueError("this model's probability calibration was never completed (it was "
                             "made inside a fit that did not return); refit the model")
        return softmax_probabilities(scores, self.beta_, log=log)

    def __repr__(self):
        beta = "pending" if self.beta_ is None else f"{self.beta_:.4g}"
        return f"ProbabilityCalibration(beta={beta}, n_calibration={self.n_calibration_})"


def softmax_probabilities(scores, beta, log=False):
    """softmax(beta * scores) along each row, computed without overflow (``log``: its
    logarithm, beta * scores minus the rows' log-sum-exp).

    Examples
    --------
    >>> import numpy as np
    >>> p = softmax_probabilities(np.array([[1.0, -1.0], [0.0, 0.0]]), 2.0)
    >>> np.round(p, 4).tolist()
    [[0.982, 0.018], [0.5, 0.5]]
    """
    z = beta * np.asarray(scores, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    total = e.sum(axis=1, keepdims=True)
    return z - np.log(total) if log else e / total


def _nll(beta, scores, codes):
    """Mean negative log-likelihood of the labels ``codes`` under softmax(beta * scores), and its
    derivative in beta."""
    z = beta * scores
    lse = logsumexp(z, axis=1)
    rows = np.arange(len(codes))
    value = float(np.mean(lse - z[rows, codes]))
    p = np.exp(z - lse[:, None])
    grad = float(np.mean(np.sum(p * scores, axis=1) - scores[rows, codes]))
    return value, grad


def fit_temperature(scores, codes):
    """The inverse temperature beta in [0, BETA_MAX] of the largest likelihood of the labels
    ``codes`` (column indices) under softmax(beta * scores), and that mean negative
    log-likelihood.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> s = rng.normal(size=(4000, 1)) * np.array([[1.0, -1.0]])
    >>> p1 = 1 / (1 + np.exp(-2 * 3.0 * s[:, 0]))       # true beta: 3
    >>> codes = (rng.random(4000) > p1).astype(int)
    >>> beta, _ = fit_temperature(s, codes)
    >>> bool(abs(beta - 3.0) < 0.3)
    True
    """
    scores = np.asarray(scores, dtype=np.float64)
    codes = np.asarray(codes, dtype=np.intp)
    if len(codes) == 0:
        return BETA_DEFAULT, None
    # convex in beta: the derivative at BETA_MAX < 0 means the minimum is at the bound
    if _nll(BETA_MAX, scores, codes)[1] <= 0:
        return BETA_MAX, _nll(BETA_MAX, scores, codes)[0]
    result = optimize.minimize_scalar(lambda b: _nll(b, scores, codes)[0], bounds=(0.0, BETA_MAX),
                                      method="bounded", options={"xatol": 1e-6})
    return float(result.x), float(result.fun)


def stratified_holdout(codes, rng, fraction=HOLDOUT_FRACTION):
    """(train rows, held-out rows), both sorted: floor(fraction * count) of each class's rows
    held out, drawn by ``rng`` (a class of fewer than 1 / fraction rows stays whole in the
    training part, so that it keeps every class)."""
    held = []
    for c in np.unique(codes):
        rows = np.flatnonzero(codes == c)
        take = int(np.floor(fraction * len(rows)))
        if take:
            held.append(rng.choice(rows, size=take, replace=False))
    held = np.sort(np.concatenate(held)) if held else np.zeros(0, dtype=np.intp)
    train = np.setdiff1d(np.arange(len(codes)), held)
    return train, held


@contextlib.contextmanager
def calibrating(calibration):
    """Models made inside are constructed with ``calibration`` (None: with none)."""
    token = _CALIBRATION.set(calibration)
    try:
        yield calibration
    finally:
        _CALIBRATION.reset(token)


def current_calibration():
    """The calibration a kernel ridge model constructed now takes (None outside a fit)."""
    return _CALIBRATION.get()


def _holdout_fit_arguments(arguments, model, train, n, seed):
    """The arguments of the calibration's fit on the rows ``train`` of the user's n: the full
    fit's sigma and lam, sizes capped below its rows, row indices renumbered, no validation
    record or printing."""
    from .hyperparameters.robust import holdout_arguments  # (imports the fits' modules)

    m = len(train)
    X = np.asarray(arguments["X"])
    y = np.asarray(arguments["y"])
    a = dict(arguments, X=X[train], y=y[train], sigma=model.sigma, lam=model.lam, seed=seed)
    for name in ("validation",):
        if name in a:
            a[name] = None
    if "verbose" in a:
        a["verbose"] = False
    a.pop("__fit__")
    a = holdout_arguments(_registered(arguments["__fit__"]), a, n, train)
    if isinstance(a.get("r"), (int, np.integer)) and a["r"] >= m:
        a["r"] = m - 1
    landmarks = a.get("landmarks")
    if landmarks is not None and not isinstance(landmarks, str):
        at = np.minimum(np.searchsorted(train, landmarks), m - 1)
        inside = train[at] == np.asarray(landmarks)
        a["landmarks"] = at[inside].astype(np.intp) if inside.any() else "uniform"
        if not inside.any():
            a["r"] = min(len(landmarks), m)
    return a


def _registered(fit):
    """The function under ``fit``'s decorators that registered its hold-out arguments
    (:func:`hkern.hyperparameters.robust.register_holdout_rows`), or ``fit``."""
    from .hyperparameters.robust import _HOLDOUT_ROWS

    while fit not in _HOLDOUT_ROWS and hasattr(fit, "__wrapped__"):
        fit = fit.__wrapped__
    return fit


def calibrates_probabilities(fit):
    """Decorator of a ``fit_<method>`` with ``task``: a classification fit returns a model
    whose ``calibration_`` gives ``predict_proba`` (module docstring).

    Put it inside :func:`hkern._sharded.runs_on_shards` (a sharded fit's model has no
    calibration, and its ``predict_proba`` says so) and outside
    :func:`hkern.hyperparameters.selects_hyperparameters`: the held-out fit reuses the
    hyperparameters the full fit chose, without a second selection.
    """
    signature = inspect.signature(fit)

    @functools.wraps(fit)
    def wrapper(*args, **kwargs):
        arguments = call_arguments(signature, args, kwargs)
        if arguments.get("task") != "classification":
            with calibrating(None):
                return fit(**arguments)
        return _calibrated_fit(fit, arguments)
    wrapper.__signature__ = signature
    return wrapper


def _calibrated_fit(fit, arguments):
    seed = arguments.get("seed")
    calibration = ProbabilityCalibration()
    with calibrating(calibration):
        model = fit(**arguments)
    start = time.perf_counter()
    # The split and the held-out fit draw from a stream of the fit's seed of their own.
    if seed is None or isinstance(seed, np.random.Generator):
        base = int(check_seed(seed).integers(2 ** 63))
    else:
        check_seed(seed)
        base = int(seed)
    rng = np.random.default_rng(np.random.SeedSequence([base, 0x70726F62]))
    X = check_array(arguments["X"], "X", keep_float32=True)
    Y, _ = encode_targets(arguments["y"], X.shape[0], "classification",
                          classes=model.classes_)
    codes = np.argmax(Y, axis=1)
    n = len(codes)
    train, held = stratified_holdout(codes, rng)
    beta, loss = BETA_DEFAULT, None
    if len(held) >= 2:
        holdout_seed = int(rng.integers(2 ** 31))
        a = _holdout_fit_arguments(dict(arguments, __fit__=fit), model, train, n, holdout_seed)
        with calibrating(None):
            part = fit(**a)
        scores = _aligned_scores(part, X[held], model.classes_)
        beta, loss = fit_temperature(scores, codes[held])
    calibration._complete(beta, len(held) if loss is not None else 0, loss,
                          time.perf_counter() - start)
    return model


def _aligned_scores(model, X, classes):
    """The one-vs-rest scores of ``model`` at X in the columns of ``classes`` (the held-out
    fit keeps every class: :func:`stratified_holdout`)."""
    scores = model._checked_scores(X)
    if len(model.classes_) != len(classes) or np.any(model.classes_ != classes):
        raise AssertionError("the calibration's held-out fit lost a class")  # pragma: no cover
    return scores


def model_probabilities(model, X, log=False):
    """``model.predict_proba(X)`` of a kernel ridge model (``log``: its logarithm, computed as
    a log-softmax): a ValueError naming the fix for a regression model and for a classifier
    fitted without a calibration (on MPI shards)."""
    name = type(model).__name__
    if model.encoding_.task != "classification":
        raise ValueError(f"predict_proba is defined for classifiers, but this {name} was "
                         "fitted with task='regression'; refit with task='classification' "
                         "(class labels as y), or use predict for the regression outputs")
    if model.calibration_ is None:
        raise ValueError(f"this {name} has no probability calibration: it was fitted on data "
                         "sharded over MPI ranks (comm=), where the held-out fit that chooses "
                         "the calibration does not run; fit without comm (in one process) for "
                         "predict_proba, or use decision_function for the one-vs-rest scores")
    return model.calibration_.probabilities(model._checked_scores(X), log=log)
