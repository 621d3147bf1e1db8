"""Class probabilities of the one-vs-rest classifiers: a calibration of their scores on
out-of-fold rows.

Every ``fit_<method>(..., task="classification")`` fits kernel ridge regression on +-1
one-vs-rest targets and predicts the class of the largest score.  ``predict_proba`` maps the
score vector s (one entry per class) to probabilities

    p_j(x) = exp(beta h(s_j(x))) / sum_l exp(beta h(s_l(x))),

h a strictly increasing transform of softness eps (:func:`soft_log_scores`): for small eps
the log of 1 + s_j (the +-1 least-squares score estimates 2 p_j - 1, so at beta = 1 the
probabilities are proportional to 1 + s_j), for eps infinite s_j itself (temperature scaling).
eps (of :data:`SOFTNESS_GRID`) and beta >= 0 are those of the largest likelihood of held-out
labels: the fit deals each class's rows to five folds (drawn from its ``seed``), refits the
same method at the hyperparameters the full fit used without a fold's rows, and scores that
fold; below ``N_FOLDS * SPLIT_ROWS`` training rows every fold is held out in turn (five fits,
every row scored), from there one fold (one fit on four fifths).  The full fit's scores are
mapped by the eps and beta so chosen.  doc/design.md, "Class probabilities", gives the
measurements behind each choice (against Platt scaling per class, vector scaling, plain
temperature scaling, a Laplace GP classifier, the latent variance; one fold against five).

Two parameters shared by every class keep the argmax and, for two classes, the order of
``decision_function``: ``predict`` is the most probable class, as scikit-learn expects of a
classifier.  For a given eps the negative log-likelihood is convex in beta (a log-sum-exp of
linear functions, minus a linear one), so the bounded 1-D minimisation finds its minimum.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import time
import warnings

import numpy as np
from scipy import optimize
from scipy.special import expit, logsumexp

from ._arguments import call_arguments
from ._targets import encode_targets
from ._validation import check_array, check_seed

__all__ = ["ProbabilityCalibration", "calibrates_probabilities", "fit_temperature",
           "fit_calibration", "soft_log_scores", "SOFTNESS_GRID",
           "model_probabilities", "current_calibration",
           "softmax_probabilities", "stratified_folds", "held_out_folds", "N_FOLDS",
           "SPLIT_ROWS", "BETA_MAX"]

# The calibration's folds, and the held-out rows one fold must have for it to be enough: at
# fewer than N_FOLDS * SPLIT_ROWS training rows every fold is held out in turn (N_FOLDS fits at
# (N_FOLDS - 1) / N_FOLDS of the rows), from there one fold (one fit).
N_FOLDS = 5
SPLIT_ROWS = 2000
# The largest inverse temperature: the scores are of order 1 (+-1 targets), so beta = 50 already
# gives probabilities within exp(-50) of 0 or 1 at a score gap of 1; a held-out set that every
# class separates perfectly would otherwise push beta to infinity.
BETA_MAX = 50.0
# The softness values (eps of soft_log_scores; None: the scores themselves) the calibration
# chooses among by held-out likelihood.
SOFTNESS_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, None)
# The inverse temperature of a fit whose held-out part could not be fitted or scored (fewer
# than two held-out rows): the least-squares scores read as logits.
BETA_DEFAULT = 1.0

# The calibration of the classifier being fitted: each kernel ridge model made inside
# :func:`calibrating` is constructed with it (hkern._model.KernelRidgeModel), as with the
# selection record (hkern._model.recording_selection); the fit completes it before it returns.
_CALIBRATION = contextvars.ContextVar("hkern_calibration", default=None)
# The context's value inside the held-out fits: their models take no calibration, and a fit
# they call (fit_slkl_krrm calls fit_exact) calibrates nothing, as inside the full fit.
_HELD_OUT = object()


class ProbabilityCalibration:
    """The map from a classifier's one-vs-rest scores s to class probabilities,
    ``softmax(beta_ * h(s))`` with h of softness ``softness_`` (:func:`soft_log_scores`),
    fitted on out-of-fold scores of the training rows (hkern/_probabilities.py).

    A classifier's ``calibration_``: made by its fit as the model is constructed, and completed
    (its values set, once) before the fit returns, like the ``selection_`` record.

    Attributes
    ----------
    softness_ : float or None
        The softness eps of h (None: h(s) = s, temperature scaling).
    beta_ : float
        The inverse temperature, ``0 <= beta_ <= 50``.
    n_calibration_ : int
        The held-out rows ``softness_`` and ``beta_`` were fitted on: every training row below
        10 000 rows (five folds), a fifth of them from there (0: none could be held out; then
        ``beta_ = 1``, ``softness_`` None).
    log_loss_ : float or None
        The mean negative log-likelihood of those rows' labels at ``softness_`` and ``beta_``.
    seconds_ : float
        The time the held-out fits and the choice took (on top of the fit itself).

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = np.where(X[:, 0] > 0, "right", "left")
    >>> model = hkern.fit_exact(X, y, sigma=1.0, lam=0.1, task="classification", seed=0)
    >>> model.calibration_.n_calibration_
    300
    >>> P = model.predict_proba(X[:3])
    >>> bool(np.allclose(P.sum(axis=1), 1.0)), model.classes_.tolist()
    (True, ['left', 'right'])
    """

    def __init__(self):
        self.beta_ = None
        self.softness_ = None
        self.n_calibration_ = 0
        self.log_loss_ = None
        self.seconds_ = 0.0

    def _complete(self, softness, beta, n_calibration, log_loss, seconds):
        if self.beta_ is not None:
            raise RuntimeError("a ProbabilityCalibration is completed once, by its fit")
        self.softness_ = None if softness is None else float(softness)
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
        return softmax_probabilities(scores, self.beta_, log=log, softness=self.softness_)

    def __repr__(self):
        beta = "pending" if self.beta_ is None else f"{self.beta_:.4g}"
        softness = "" if self.softness_ is None else f"softness={self.softness_:g}, "
        return (f"ProbabilityCalibration({softness}beta={beta}, "
                f"n_calibration={self.n_calibration_})")


def soft_log_scores(scores, softness):
    """h(s): the log of a smooth max(1 + s, 0) of width ``softness`` (eps),
    log(eps log(1 + exp((1 + s) / eps))), divided by its slope at s = 0 so that every eps
    has the scale of s there; ``softness=None`` (eps infinite) is s itself.

    Strictly increasing in s, so ``softmax(beta h(s))`` keeps the order of the scores.  Small
    eps reads the +-1 least-squares scores as s_j = 2 p_j - 1 (at beta = 1, p_j is
    proportional to 1 + s_j where that is positive); large eps tends to s (temperature
    scaling).

    Examples
    --------
    >>> import numpy as np
    >>> s = np.array([-0.5, 0.0, 0.5])
    >>> np.round(soft_log_scores(s, 1e-3), 4).tolist()        # log(1 + s), slope 1 at 0
    [-0.6931, 0.0, 0.4055]
    >>> bool(np.allclose(soft_log_scores(s, 1e4) - soft_log_scores(np.zeros(1), 1e4), s,
    ...                  atol=1e-4))
    True
    """
    s = np.asarray(scores, dtype=np.float64)
    if softness is None:
        return s
    eps = float(softness)
    a = (1.0 + s) / eps
    # log(log(1 + e^a)): a below -30 (log1p(e^a) = e^a), log(a) + log1p(e^-a / a) above 30
    low, high = a < -30.0, a > 30.0
    mid = np.clip(a, -30.0, 30.0)
    value = np.where(low, a, np.where(high, np.log(np.maximum(a, 30.0)),
                                      np.log(np.logaddexp(0.0, mid))))
    slope = expit(1.0 / eps) / np.logaddexp(0.0, 1.0 / eps)     # d/ds log g at s = 0, times eps
    return (np.log(eps) + value) * eps / slope


def softmax_probabilities(scores, beta, log=False, softness=None):
    """softmax(beta * h(scores)) along each row (h: :func:`soft_log_scores`; with the default
    ``softness=None``, h(s) = s), computed without overflow (``log``: its logarithm, beta h
    minus the rows' log-sum-exp).

    Examples
    --------
    >>> import numpy as np
    >>> p = softmax_probabilities(np.array([[1.0, -1.0], [0.0, 0.0]]), 2.0)
    >>> np.round(p, 4).tolist()
    [[0.982, 0.018], [0.5, 0.5]]
    """
    z = beta * soft_log_scores(scores, softness)
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
    log-likelihood (None for no rows, where beta is :data:`BETA_DEFAULT`).

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


def fit_calibration(scores, codes, softness_grid=None):
    """(softness, beta, mean negative log-likelihood) of the largest held-out likelihood:
    beta by :func:`fit_temperature` on h(scores) for each softness of ``softness_grid``
    (default :data:`SOFTNESS_GRID`), the first of the best on a tie."""
    grid = SOFTNESS_GRID if softness_grid is None else softness_grid
    best = None
    for softness in grid:
        beta, loss = fit_temperature(soft_log_scores(scores, softness), codes)
        if loss is None:
            return None, beta, None
        if best is None or loss < best[2]:
            best = (softness, beta, loss)
    return best


def stratified_folds(codes, rng, n_folds=N_FOLDS):
    """The fold (0 .. n_folds - 1) of each row: each class's rows in an order drawn by ``rng``,
    dealt to the folds in turn, so every fold holds about 1 / n_folds of each class.  The row
    of a class of one row is in no fold (-1): held out, it would leave a fit without its
    class; every other class keeps a row in the training part of every fold."""
    folds = np.full(len(codes), -1, dtype=np.intp)
    for c in np.unique(codes):
        rows = np.flatnonzero(codes == c)
        if len(rows) > 1:
            folds[rng.permutation(rows)] = np.arange(len(rows)) % n_folds
    return folds


def held_out_folds(n):
    """The folds whose rows the calibration holds out at n training rows: all of them
    (every row scored out of fold) below ``N_FOLDS * SPLIT_ROWS`` rows, fold 0 alone (one
    fifth, at least SPLIT_ROWS rows) from there."""
    return range(N_FOLDS) if n < N_FOLDS * SPLIT_ROWS else range(1)


@contextlib.contextmanager
def calibrating(calibration):
    """Models made inside are constructed with ``calibration`` (None: with none)."""
    token = _CALIBRATION.set(calibration)
    try:
        yield calibration
    finally:
        _CALIBRATION.reset(token)


def current_calibration():
    """The calibration a kernel ridge model constructed now takes (None outside a fit, and in
    the calibration's own held-out fits)."""
    calibration = _CALIBRATION.get()
    return None if calibration is _HELD_OUT else calibration


def _holdout_fit_arguments(arguments, model, train, n, seed, holdout_rows=None):
    """The arguments of the calibration's fit on the rows ``train`` of the user's n: the full
    fit's sigma and lam, sizes capped below its rows (``holdout_rows``: the fit's own rule, as
    for its hold-out hyperparameter criterion), row indices renumbered, no validation record
    or printing."""
    m = len(train)
    X = np.asarray(arguments["X"])
    y = np.asarray(arguments["y"])
    a = dict(arguments, X=X[train], y=y[train], sigma=model.sigma, lam=model.lam, seed=seed)
    for name in ("validation",):
        if name in a:
            a[name] = None
    if "verbose" in a:
        a["verbose"] = False
    if holdout_rows is not None:
        a = holdout_rows(a, n, train)
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


def calibrates_probabilities(fit=None, *, holdout_rows=None):
    """Decorator of a ``fit_<method>`` with ``task``: a classification fit returns a model
    whose ``calibration_`` gives ``predict_proba`` (module docstring).

    ``holdout_rows(arguments, n, rows)``: the fit's arguments on the rows ``rows`` of the
    user's n, its sizes capped (the function the fit gives
    :func:`hkern.hyperparameters.selects_hyperparameters` for its hold-out criterion); without
    it an int ``r`` is capped at one less than the rows and given ``landmarks`` renumbered.

    Put it inside :func:`hkern._sharded.runs_on_shards` (a sharded fit's model has no
    calibration, and its ``predict_proba`` says so) and outside
    :func:`hkern.hyperparameters.selects_hyperparameters`: the held-out fit reuses the
    hyperparameters the full fit chose, without a second selection.
    """
    if fit is None:
        return functools.partial(calibrates_probabilities, holdout_rows=holdout_rows)
    signature = inspect.signature(fit)

    @functools.wraps(fit)
    def wrapper(*args, **kwargs):
        arguments = call_arguments(signature, args, kwargs)
        if arguments.get("task") != "classification" or _CALIBRATION.get() is not None:
            return fit(**arguments)      # regression, or a fit called inside a calibrated one
        return _calibrated_fit(fit, arguments, holdout_rows)
    wrapper.__signature__ = signature
    return wrapper


def _calibrated_fit(fit, arguments, holdout_rows=None):
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
    folds = stratified_folds(codes, rng)
    scores, held = [], []
    for fold in held_out_folds(n):
        rows = np.flatnonzero(folds == fold)
        fold_seed = int(rng.integers(2 ** 31))
        if len(rows) == 0:
            continue
        train = np.flatnonzero(folds != fold)
        a = _holdout_fit_arguments(arguments, model, train, n, fold_seed, holdout_rows)
        # its warnings (a ConvergenceWarning, r reduced to the rows) repeat the full fit's
        with calibrating(_HELD_OUT), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            part = fit(**a)
        scores.append(_aligned_scores(part, X[rows], model.classes_))
        held.append(rows)
    softness, beta, loss = None, BETA_DEFAULT, None
    held = np.concatenate(held) if held else np.zeros(0, dtype=np.intp)
    if len(held) >= 2:
        softness, beta, loss = fit_calibration(np.concatenate(scores), codes[held])
    calibration._complete(softness, beta, len(held) if loss is not None else 0, loss,
                          time.perf_counter() - start)
    return model


def _aligned_scores(model, X, classes):
    """The one-vs-rest scores of ``model`` at X in the columns of ``classes`` (the held-out
    fit keeps every class: :func:`stratified_folds`)."""
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
