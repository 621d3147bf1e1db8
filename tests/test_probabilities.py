"""Class probabilities (issue 52, item 3): ``predict_proba`` of every classifier model and
estimator, the temperature calibration against its definition, seeds, the refusals, and
calibration on a problem whose class probabilities are known."""
import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn_cases import SUPERVISED, small

import hkern
from hkern._probabilities import (
    BETA_MAX,
    SOFTNESS_GRID,
    _nll,
    fit_calibration,
    fit_temperature,
    held_out_folds,
    soft_log_scores,
    softmax_probabilities,
    stratified_folds,
)

# every fit with task="classification", at numbers for sigma and lam (quick), and its size
FITS = {
    "exact": (hkern.fit_exact, {}),
    "exact_pcg": (hkern.fit_exact, {"solver": "pcg", "r": 20}),
    "nystrom": (hkern.fit_nystrom, {"r": 40}),
    "falkon": (hkern.fit_nystrom, {"r": 40, "solver": "pcg"}),
    "rff": (hkern.fit_rff, {"r": 100}),
    "hierarchical": (hkern.fit_hierarchical, {"r": 20}),
    "independent": (hkern.fit_independent, {"r": 20}),
    "meka": (hkern.fit_meka, {"r": 5, "n_clusters": 3}),
    "slkl": (hkern.fit_slkl, {"r": 30}),
    "slkl_unif": (hkern.fit_slkl_unif, {"r": 30}),
    "slkl_krrm": (hkern.fit_slkl_krrm, {"r": 30}),
}


@pytest.fixture(scope="module")
def labelled():
    """Three classes with string labels whose sorted order ("ant" < "bee" < "cat") is not the
    order of x_1 ("cat" left, "ant" middle, "bee" right)."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(240, 2))
    y = np.array(["cat", "ant", "bee"])[(X[:, 0] > -0.3).astype(int) + (X[:, 0] > 0.3)]
    X_test = np.column_stack([np.linspace(-0.9, 0.9, 7), np.zeros(7)])
    return X, y, X_test


@pytest.mark.parametrize("name", list(FITS))
def test_every_fit_gives_probabilities_in_the_order_of_classes(name, labelled):
    X, y, X_test = labelled
    fit, size = FITS[name]
    model = fit(X, y, task="classification", sigma=0.5, lam=1e-2, seed=0, n_jobs=1, **size)
    P = model.predict_proba(X_test)
    assert P.shape == (7, 3)
    assert model.classes_.tolist() == ["ant", "bee", "cat"]
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.all(P >= 0)
    # the most probable class is predict's, and it is the right one far from the boundaries
    assert np.array_equal(model.classes_[P.argmax(axis=1)], model.predict(X_test))
    assert model.classes_[P[0].argmax()] == "cat" and model.classes_[P[-1].argmax()] == "bee"
    cal = model.calibration_
    assert 0 < cal.beta_ <= BETA_MAX and cal.softness_ in SOFTNESS_GRID
    assert cal.n_calibration_ == len(y)          # 240 rows: every row scored out of fold
    np.testing.assert_allclose(P, softmax_probabilities(model.decision_function(X_test),
                                                        cal.beta_, softness=cal.softness_))


@pytest.mark.parametrize("cls", [c for c in SUPERVISED if c.__name__.endswith("Classifier")],
                         ids=lambda c: c.__name__)
def test_every_classifier_estimator(cls, labelled):
    X, y, X_test = labelled
    params = {"sigma": 0.5} if "sigma" in cls().get_params() else {}
    est = small(cls, random_state=0, **params).fit(X, y)
    P = est.predict_proba(X_test)
    assert P.shape == (7, 3) and est.classes_.tolist() == ["ant", "bee", "cat"]
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.array_equal(est.classes_[P.argmax(axis=1)], est.predict(X_test))
    np.testing.assert_allclose(est.predict_log_proba(X_test), np.log(P), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(P, est.model_.predict_proba(X_test))


def test_binary_estimator_probabilities_follow_decision_function(labelled):
    X, y, X_test = labelled
    est = hkern.sklearn.ExactClassifier(sigma=0.5, lam=1e-2).fit(X, y == "bee")
    P = est.predict_proba(X_test)
    assert est.classes_.tolist() == [False, True]
    d = est.decision_function(X_test)
    cal = est.model_.calibration_
    # for two classes (opposite scores s, -s; d = s) softmax(beta h(s)) is the logistic
    # function of beta (h(d) - h(-d)), increasing in d
    h = (soft_log_scores(d, cal.softness_) - soft_log_scores(-d, cal.softness_))
    np.testing.assert_allclose(P[:, 1], 1 / (1 + np.exp(-cal.beta_ * h)))
    assert np.all(np.diff(P[np.argsort(d), 1]) >= 0)


# ------------------------------------------------------------------ the calibrator itself

def _problem(seed=0, m=300, k=4, beta=2.5):
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(m, k))
    P = softmax_probabilities(S, beta)
    codes = np.array([rng.choice(k, p=p) for p in P])
    return S, codes


def test_negative_log_likelihood_and_its_derivative_by_their_definitions():
    S, codes = _problem()
    for beta in (0.0, 0.7, 3.0):
        value, grad = _nll(beta, S, codes)
        by_definition = -np.mean([np.log(np.exp(beta * s[c]) / np.exp(beta * s).sum())
                                  for s, c in zip(S, codes)])
        assert value == pytest.approx(by_definition, rel=1e-12)
        h = 1e-6
        fd = (_nll(beta + h, S, codes)[0] - _nll(beta - h, S, codes)[0]) / (2 * h)
        assert grad == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_fitted_temperature_is_the_brute_force_minimum():
    S, codes = _problem(seed=1)
    beta, loss = fit_temperature(S, codes)
    grid = np.linspace(0, 10, 100_001)
    losses = [np.mean(logsumexp(b * S, axis=1) - b * S[np.arange(len(codes)), codes])
              for b in grid[::100]]
    coarse = grid[::100][int(np.argmin(losses))]
    fine = grid[(grid > coarse - 0.02) & (grid < coarse + 0.02)]
    best = fine[np.argmin([_nll(b, S, codes)[0] for b in fine])]
    assert beta == pytest.approx(best, abs=1e-4)
    assert loss == pytest.approx(_nll(beta, S, codes)[0])
    assert loss <= _nll(best, S, codes)[0] + 1e-12


def test_temperature_bounds():
    S = np.array([[1.0, -1.0], [-1.0, 1.0]] * 5)
    codes = np.array([0, 1] * 5)            # separated: the likelihood grows without bound
    assert fit_temperature(S, codes)[0] == BETA_MAX
    assert fit_temperature(S, 1 - codes)[0] == pytest.approx(0.0, abs=1e-4)  # all wrong
    assert fit_temperature(np.zeros((0, 2)), np.zeros(0, dtype=int)) == (1.0, None)


def test_softmax_handles_large_scores():
    P = softmax_probabilities(np.array([[1000.0, 0.0, -1000.0]]), 10.0)
    assert np.array_equal(P, [[1.0, 0.0, 0.0]])
    L = softmax_probabilities(np.array([[1000.0, 0.0]]), 10.0, log=True)
    assert L[0, 0] == 0.0 and L[0, 1] == -10000.0


def test_soft_log_scores():
    s = np.linspace(-3, 3, 61)
    for eps in SOFTNESS_GRID:
        h = soft_log_scores(s, eps)
        assert np.all(np.diff(h) > 0)                      # strictly increasing: argmax kept
        dh = (soft_log_scores(1e-6, eps) - soft_log_scores(-1e-6, eps)) / 2e-6
        assert dh == pytest.approx(1.0, rel=1e-5)          # the scale of s at s = 0
    # small softness: log(1 + s) where 1 + s is clear of 0; large: s (up to a constant)
    np.testing.assert_allclose(soft_log_scores(s[s > -0.5], 1e-3), np.log1p(s[s > -0.5]),
                               atol=1e-12)
    h = soft_log_scores(s, 1e5)
    np.testing.assert_allclose(h - h[30], s, atol=1e-4)


def test_calibration_chooses_the_softness_of_the_largest_likelihood():
    rng = np.random.default_rng(2)
    S = rng.uniform(-1, 1, size=(3000, 1)) * np.array([[1.0, -1.0]])
    codes = (rng.random(3000) > (1 + S[:, 0]) / 2).astype(int)   # p_0 = (1 + s_0) / 2 exactly
    softness, beta, loss = fit_calibration(S, codes)
    assert softness == min(eps for eps in SOFTNESS_GRID if eps is not None)
    assert beta == pytest.approx(1.0, abs=0.1)
    for eps in SOFTNESS_GRID:
        assert loss <= fit_temperature(soft_log_scores(S, eps), codes)[1] + 1e-12


def test_stratified_folds():
    codes = np.array([0] * 50 + [1] * 12 + [2] * 3 + [3])
    folds = stratified_folds(codes, np.random.default_rng(0))
    assert folds[-1] == -1                           # a class of one row is never held out
    for fold in range(5):
        held = folds == fold
        assert set(codes[~held]) == {0, 1, 2, 3}     # every fold's fit sees every class
        assert np.sum(codes[held] == 0) == 10
    assert list(held_out_folds(9999)) == [0, 1, 2, 3, 4] and list(held_out_folds(10000)) == [0]


# ------------------------------------------------------------------ seeds and refusals

def test_same_seed_same_probabilities_for_any_n_jobs(labelled):
    X, y, X_test = labelled
    a = hkern.fit_nystrom(X, y, 40, sigma=0.5, lam=1e-2, task="classification", seed=5,
                          n_jobs=1)
    b = hkern.fit_nystrom(X, y, 40, sigma=0.5, lam=1e-2, task="classification", seed=5,
                          n_jobs=2)
    c = hkern.fit_nystrom(X, y, 40, sigma=0.5, lam=1e-2, task="classification", seed=6,
                          n_jobs=1)
    assert a.calibration_.beta_ == b.calibration_.beta_
    np.testing.assert_array_equal(a.predict_proba(X_test), b.predict_proba(X_test))
    assert c.calibration_.beta_ != a.calibration_.beta_    # another held-out fifth


def test_a_generator_seed_is_drawn_from(labelled):
    X, y, X_test = labelled
    fit = [hkern.fit_exact(X, y, sigma=0.5, lam=1e-2, task="classification",
                           seed=np.random.default_rng(9)) for _ in range(2)]
    assert fit[0].calibration_.beta_ == fit[1].calibration_.beta_


def test_regression_models_refuse_predict_proba(labelled):
    X, _, X_test = labelled
    model = hkern.fit_exact(X, X[:, 0], sigma=0.5, lam=1e-2)
    assert model.calibration_ is None
    with pytest.raises(ValueError, match="task='classification'"):
        model.predict_proba(X_test)
    assert not hasattr(hkern.sklearn.ExactRegressor(), "predict_proba")


def test_a_classifier_without_calibration_says_what_to_do(labelled):
    """The sharded fits (comm=) make no calibration; the fit under the calibrating decorator
    stands in for them here (the same model, calibration_ None)."""
    X, y, X_test = labelled
    # (fit_exact: runs_on_shards, then calibrates_probabilities, then the fit)
    model = hkern.fit_exact.__wrapped__.__wrapped__(X, y, sigma=0.5, lam=1e-2,
                                                    task="classification")
    assert model.calibration_ is None
    with pytest.raises(ValueError, match="fit without comm"):
        model.predict_proba(X_test)


def test_sharded_classifier_refuses_predict_proba():
    MPI = pytest.importorskip("mpi4py.MPI", reason="needs the optional extra hkern[mpi]")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 2))
    y = np.where(X[:, 0] > 0, "p", "n")
    model = hkern.fit_nystrom(X, y, 20, sigma=1.0, lam=1e-2, task="classification", seed=0,
                              solver="pcg", comm=MPI.COMM_SELF)
    with pytest.raises(ValueError, match="comm"):
        model.predict_proba(X)


# ------------------------------------------------------------------ calibrated on a known truth

def test_probabilities_match_known_class_probabilities():
    """Three classes with p(y | x) = softmax(W x) known: the fitted probabilities are within
    0.04 of the true ones in mean total variation over test points (the smoother's own error at
    n = 4000 in 2-D, about n^(-1/3) / 2 ~ 0.03; plain temperature scaling, softmax(beta s), is
    off by 0.06 here, and probabilities three times too sharp by more), and the labels drawn
    from the truth at those points agree with them to a calibration error the number of test
    points explains."""
    rng = np.random.default_rng(0)
    W = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])

    def draw(n):
        X = rng.normal(size=(n, 2))
        P = softmax_probabilities(X @ W.T, 1.0)
        u = rng.random(n)[:, None]
        return X, (u > np.cumsum(P, axis=1)).sum(axis=1), P
    X, y, _ = draw(4000)
    X_test, y_test, P_test = draw(4000)
    model = hkern.fit_exact(X, y, sigma=1.0, lam=1.0, task="classification", seed=0)
    P = model.predict_proba(X_test)
    error = np.mean(np.abs(P - P_test).sum(axis=1) / 2)
    cal = model.calibration_
    sharp = softmax_probabilities(model.decision_function(X_test), 3 * cal.beta_,
                                  softness=cal.softness_)
    assert error < 0.04
    assert np.mean(np.abs(sharp - P_test).sum(axis=1) / 2) > 0.06
    # the top-class confidence against the drawn labels, 10 bins
    conf, right = P.max(axis=1), (P.argmax(axis=1) == y_test)
    bins = np.minimum((conf * 10).astype(int), 9)
    ece = sum(np.mean(bins == b) * abs(right[bins == b].mean() - conf[bins == b].mean())
              for b in range(10) if np.any(bins == b))
    assert ece < 3 * np.sqrt(0.25 * 10 / len(y_test))         # ~0.075: sampling noise bound
