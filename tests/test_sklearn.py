"""hkern.sklearn: the estimators are their fit functions, in scikit-learn's form.

scikit-learn's own estimator checks are in test_sklearn_checks.py; here: the estimator fits
exactly the function's model, its parameters are the function's, the feature maps are the
methods' own, GridSearchCV, pickling, clone, random_state, n_jobs, and that ``import hkern``
does not need scikit-learn.
"""
import inspect
import pickle

import numpy as np
import pytest
from fresh_python import run_python
from sklearn.base import clone
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn_cases import ESTIMATORS, FUNCTIONS, SUPERVISED, TRANSFORMERS, small

import hkern
from hkern import sklearn as hs


def name(cls):
    return cls.__name__


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.uniform(-1, 1, size=(200, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=200)
    labels = np.array(["a", "b", "c"])[(X[:, 0] > -0.3).astype(int) + (X[:, 0] > 0.3)]
    X_test = rng.uniform(-1, 1, size=(50, 3))
    return X, y, labels, X_test


def targets(cls, data):
    X, y, labels, _ = data
    return labels if cls.__name__.endswith("Classifier") else y


def quick(cls, **params):
    """A quick instance for the 200-point problem: sigma=1 suits its 3 features in [-1, 1]."""
    if "sigma" in cls().get_params():
        params.setdefault("sigma", 1.0)
    return small(cls, **params)


# ---------------------------------------------------------------- import

def test_import_hkern_does_not_import_sklearn():
    out = run_python("""
        import sys
        import hkern
        print(sorted(m for m in sys.modules if m.split(".")[0] == "sklearn"
                     or m == "hkern.sklearn"))
        import hkern.sklearn
        print("sklearn" in sys.modules)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "True"]


# ---------------------------------------------------------------- parameters

@pytest.mark.parametrize("cls", ESTIMATORS, ids=name)
def test_parameters_are_the_functions_keyword_arguments(cls):
    """Same names, order, kinds and defaults, random_state in seed's place; only the
    arguments the estimator fixes (task, MEKA's psd) or a feature map does not use are left
    out.  Where the function has no default (MEKA's r and n_clusters) the estimator has one."""
    function, hidden = FUNCTIONS[cls]
    expected = [p.replace(name="random_state") if p.name == "seed" else p
                for p in inspect.signature(function).parameters.values()
                if p.name not in {"X", "y"} | hidden]
    actual = list(inspect.signature(cls).parameters.values())
    assert [(p.name, p.kind) for p in actual] == [(p.name, p.kind) for p in expected]
    for mine, theirs in zip(actual, expected):
        if theirs.default is inspect.Parameter.empty:
            assert mine.default is not inspect.Parameter.empty
        elif cls in TRANSFORMERS and mine.name == "sigma":
            # A feature map sees no targets to select a bandwidth by (doc/conventions.md).
            assert mine.default == 1.0
        else:
            assert mine.default == theirs.default, mine.name


@pytest.mark.parametrize("cls", ESTIMATORS, ids=name)
def test_init_stores_parameters_as_given(cls):
    marker = object()
    params = {p: marker for p in cls().get_params()}
    est = cls(**params)
    assert all(v is marker for v in est.get_params().values())


# ---------------------------------------------------------------- the estimator is the function

def function_model(cls, X, y, seed, **params):
    """What the estimator should have fitted: its function called directly."""
    function, _ = FUNCTIONS[cls]
    if "random_state" in cls().get_params():
        params["seed"] = seed
    if cls is not hs.GriefRegressor:
        params["task"] = "classification" if cls.__name__.endswith("Classifier") else "regression"
    return function(X, y, **params)


@pytest.mark.parametrize("cls", SUPERVISED, ids=name)
def test_estimator_fits_the_functions_model(cls, data):
    X, _, _, X_test = data
    y = targets(cls, data)
    est = quick(cls, random_state=3).fit(X, y)
    params = {k: v for k, v in est.get_params().items() if k != "random_state"}
    model = function_model(cls, X, y, 3, **params)
    assert np.array_equal(est.predict(X_test), model.predict(X_test))
    assert np.array_equal(est.predict(X_test), est.model_.predict(X_test))
    assert est.n_features_in_ == 3
    if cls.__name__.endswith("Classifier"):
        assert np.array_equal(est.classes_, ["a", "b", "c"])


@pytest.mark.parametrize("cls", [c for c in SUPERVISED
                                 if c.__name__.endswith("Regressor") and c._multi_output],
                         ids=name)
def test_multi_output_regression_is_one_fit(cls, data):
    X, y, _, X_test = data
    Y = np.column_stack([y, 1 - 2 * y])
    est = quick(cls, random_state=0).fit(X, Y)
    params = {k: v for k, v in est.get_params().items() if k != "random_state"}
    expected = function_model(cls, X, Y, 0, **params).predict(X_test)
    assert est.predict(X_test).shape == (50, 2)
    assert np.array_equal(est.predict(X_test), expected)


def test_hkern_errors_reach_the_user(data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="r must be an integer >= 1"):
        hs.HierarchicalRegressor(r=0).fit(X[:20], y[:20])
    with pytest.warns(UserWarning, match="r=50 is larger than n - 1 = 19"):
        assert hs.HierarchicalRegressor(r=50).fit(X[:20], y[:20]).model_.r_ == 19
    with pytest.raises(ValueError, match="sigma must be a real number > 0"):
        hs.NystromRegressor(r=10, sigma=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="random_state|RandomState"):
        hs.RFFRegressor(r=10, random_state="zero").fit(X, y)
    with pytest.raises(ValueError, match="landmarks must be one of"):
        hs.NystromTransformer(landmarks="kmeans").fit(X)
    with pytest.raises(ValueError, match="phases Omega x overflow"):
        hs.RFFTransformer(r=5, sigma=1e-300).fit_transform(X * 1e150)


# ---------------------------------------------------------------- classifiers

@pytest.mark.parametrize("cls", [c for c in SUPERVISED if c.__name__.endswith("Classifier")],
                         ids=name)
def test_classifier_scores(cls, data):
    X, _, labels, X_test = data
    multi = quick(cls, random_state=0).fit(X, labels)
    scores = multi.decision_function(X_test)
    assert scores.shape == (50, 3)
    assert np.array_equal(multi.classes_[np.argmax(scores, axis=1)], multi.predict(X_test))
    assert np.array_equal(scores, multi.model_.decision_function(X_test))
    binary = np.where(labels == "a", "a", "not a")
    two = quick(cls, random_state=0).fit(X, binary)
    score = two.decision_function(X_test)
    full = two.model_.decision_function(X_test)
    assert score.shape == (50,)
    assert np.array_equal(score, (full[:, 1] - full[:, 0]) / 2)
    assert np.array_equal(np.where(score > 0, "not a", "a"), two.predict(X_test))


def test_binary_score_is_the_second_class_score_for_one_linear_solve(data):
    X, _, labels, X_test = data
    clf = hs.ExactClassifier(n_jobs=1).fit(X, labels == "a")
    full = clf.model_.decision_function(X_test)
    assert np.array_equal(full[:, 0], -full[:, 1])
    assert np.array_equal(clf.decision_function(X_test), full[:, 1])


# ---------------------------------------------------------------- the GP regressors' spread

@pytest.mark.parametrize("estimator", [hs.ExactRegressor, hs.HierarchicalRegressor,
                                       hs.IndependentRegressor, hs.GriefRegressor])
def test_gp_regressors_give_the_models_posterior_std(data, estimator):
    X, y, _, X_test = data
    gp = quick(estimator, random_state=0).fit(X, y)
    mean, std = gp.predict(X_test, return_std=True)
    assert np.array_equal(mean, gp.predict(X_test))
    expected_mean, expected_std = gp.model_.predict(X_test, return_std=True)
    assert np.array_equal(mean, expected_mean) and np.array_equal(std, expected_std)
    assert std.shape == (len(X_test),) and np.all(std > 0)


# ---------------------------------------------------------------- feature maps

def test_nystrom_transformer_draws_the_functions_landmarks(data):
    X, y, _, _ = data
    for landmarks in ("uniform", "greedy", "rpcholesky"):
        phi = hs.NystromTransformer(r=20, landmarks=landmarks, random_state=5).fit(X)
        model = hkern.fit_nystrom(X, y, r=20, landmarks=landmarks, sigma=1.0, lam=1e-2,
                                  seed=5)
        assert np.array_equal(phi.landmark_indices_, model.landmark_indices_)
        assert np.array_equal(phi.landmarks_, model.landmarks_)
    given = np.array([3, 1, 40])
    phi = hs.NystromTransformer(landmarks=given).fit(X)
    assert np.array_equal(phi.landmark_indices_, [1, 3, 40])


def test_nystrom_features_give_the_nystrom_kernel(data):
    X, _, _, X_test = data
    phi = hs.NystromTransformer(r=30, sigma=0.8, random_state=0).fit(X)
    Z = phi.landmarks_
    K_xz = hkern.kernel_matrix(X_test, Z, sigma=0.8)
    W = hkern.kernel_matrix(Z, sigma=0.8)
    assert phi.jitter_ == pytest.approx(1e-11 * np.trace(W), rel=1e-14)
    nystrom = K_xz @ np.linalg.solve(W + phi.jitter_ * np.eye(30), K_xz.T)
    F = phi.transform(X_test)
    assert np.abs(F @ F.T - nystrom).max() < 1e-8


def test_rff_transformer_draws_the_functions_features(data):
    X, y, _, X_test = data
    z = hs.RFFTransformer(r=40, kernel="matern32", sigma=0.7, random_state=2).fit(X)
    model = hkern.fit_rff(X, y, r=40, kernel="matern32", sigma=0.7, seed=2)
    assert np.array_equal(z.frequencies_, model.frequencies_)
    assert np.array_equal(z.offsets_, model.offsets_)
    expected = np.sqrt(2 / 40) * np.cos(X_test @ model.frequencies_.T + model.offsets_)
    assert np.abs(z.transform(X_test) - expected).max() < 1e-12


def test_meka_features_give_the_meka_approximation(data):
    X, _, _, _ = data
    phi = hs.MekaTransformer(r=8, n_clusters=4, random_state=1).fit(X)
    G = hkern.meka(X, r=8, n_clusters=4, psd=True, seed=1)
    assert np.array_equal(phi.approximation_.L_, G.L_)
    F = phi.transform(X)
    dense = G.to_dense()
    assert np.abs(F @ F.T - dense).max() < 1e-10 * np.abs(dense).max()


@pytest.mark.parametrize("cls, params", [
    (hs.NystromTransformer, {"r": 30}),
    (hs.RFFTransformer, {"r": 60}),
    (hs.RFFTransformer, {"r": 300}),          # more features than samples: the dual solve
    (hs.MekaTransformer, {"r": 8, "n_clusters": 4}),
], ids=["nystrom", "rff", "rff-dual", "meka"])
def test_ridge_on_the_features_is_the_regressor(cls, params, data):
    """KRR on the approximate kernel is y's mean plus ridge regression of y minus it on its
    features (no intercept: the features are not centred)."""
    X, y, _, X_test = data
    lam = 1e-2
    regressor = getattr(hs, cls.__name__.replace("Transformer", "Regressor"))
    features = make_pipeline(cls(sigma=0.8, random_state=4, **params),
                             Ridge(alpha=lam, fit_intercept=False, solver="cholesky"))
    expected = regressor(sigma=0.8, lam=lam, random_state=4, **params).fit(X, y).predict(X_test)
    got = y.mean() + features.fit(X, y - y.mean()).predict(X_test)
    assert np.linalg.norm(got - expected) < 1e-8 * np.linalg.norm(expected)


@pytest.mark.parametrize("cls", TRANSFORMERS, ids=name)
def test_transformer_in_a_pipeline_with_feature_names(cls, data):
    pd = pytest.importorskip("pandas")
    X, y, _, X_test = data
    frame = pd.DataFrame(X, columns=["u", "v", "w"])
    pipe = make_pipeline(StandardScaler(), quick(cls, random_state=0)).set_output(
        transform="pandas")
    out = pipe.fit_transform(frame)
    prefix = cls.__name__.lower()
    assert list(out.columns) == [f"{prefix}{i}" for i in range(out.shape[1])]
    assert np.array_equal(out.to_numpy(), pipe.transform(frame).to_numpy())


# ---------------------------------------------------------------- model selection

@pytest.mark.parametrize("cls", [c for c in SUPERVISED if "lam" in c().get_params()], ids=name)
def test_grid_search_over_sigma_and_lam(cls, data):
    X, _, _, X_test = data
    y = targets(cls, data)
    grid = {"sigma": [0.5, 2.0], "lam": [1e-3, 1e-1]}
    search = GridSearchCV(quick(cls, random_state=0), grid, cv=3).fit(X, y)
    best = search.best_estimator_
    assert {k: best.get_params()[k] for k in grid} == search.best_params_
    assert np.array_equal(search.predict(X_test),
                          clone(best).fit(X, y).predict(X_test))


def test_grid_search_chooses_what_the_functions_choose(data):
    """The search over HCK's sigma and lam picks the pair with the best mean R^2 over the
    folds, computed here by calling fit_hierarchical on the same folds."""
    X, y, _, _ = data
    grid = {"sigma": [0.3, 1.0, 3.0], "lam": [1e-3, 1e-1]}
    folds = list(KFold(3).split(X))
    search = GridSearchCV(hs.HierarchicalRegressor(r=16, random_state=0), grid,
                          cv=folds).fit(X, y)

    def r2(sigma, lam, train, test):
        model = hkern.fit_hierarchical(X[train], y[train], r=16, sigma=sigma, lam=lam, seed=0)
        residual = y[test] - model.predict(X[test])
        return 1 - residual @ residual / np.sum((y[test] - y[test].mean()) ** 2)

    means = {(s, lam): np.mean([r2(s, lam, tr, te) for tr, te in folds])
             for s in grid["sigma"] for lam in grid["lam"]}
    sigma, lam = max(means, key=means.get)
    assert search.best_params_ == {"sigma": sigma, "lam": lam}
    assert search.best_score_ == pytest.approx(means[sigma, lam], rel=1e-12)


# ---------------------------------------------------------------- pickle, clone

@pytest.mark.parametrize("cls", ESTIMATORS, ids=name)
def test_pickle_round_trip(cls, data):
    X, _, _, X_test = data
    est = quick(cls, random_state=0).fit(X, targets(cls, data))
    again = pickle.loads(pickle.dumps(est))
    method = "transform" if cls in TRANSFORMERS else "predict"
    assert np.array_equal(getattr(again, method)(X_test), getattr(est, method)(X_test))
    assert again.get_params() == est.get_params()


@pytest.mark.parametrize("cls", ESTIMATORS, ids=name)
def test_clone_is_unfitted_with_the_same_parameters(cls, data):
    X, _, _, _ = data
    est = quick(cls, random_state=0).fit(X, targets(cls, data))
    copy = clone(est)
    assert copy.get_params() == est.get_params()
    assert not [a for a in vars(copy) if a.endswith("_")]


# ---------------------------------------------------------------- random_state and n_jobs

@pytest.mark.parametrize("cls", [c for c in ESTIMATORS if "random_state" in c().get_params()],
                         ids=name)
def test_random_state_the_scikit_learn_way(cls, data):
    X, _, _, X_test = data
    y = targets(cls, data)
    method = "transform" if cls in TRANSFORMERS else "predict"

    # Exact KRR draws only the subsample of a hyperparameter selection.
    selects = {"sigma": "auto"} if name(cls).startswith("Exact") else {}

    def fitted(random_state):
        return getattr(quick(cls, random_state=random_state, **selects).fit(X, y),
                       method)(X_test)

    assert np.array_equal(fitted(11), fitted(11))
    assert np.array_equal(fitted(np.random.RandomState(11)), fitted(np.random.RandomState(11)))
    np.random.seed(11)
    first = fitted(None)
    np.random.seed(11)
    assert np.array_equal(first, fitted(None))
    if selects:
        return      # the data are smaller than the subsample: every point is used, in any order
    shared = np.random.RandomState(0)
    est = quick(cls, random_state=shared)
    a = getattr(est.fit(X, y), method)(X_test)
    b = getattr(est.fit(X, y), method)(X_test)
    # a RandomState passed as random_state is consumed: a second fit draws anew
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=name)
def test_same_answer_for_any_n_jobs(cls, data):
    X, _, _, X_test = data
    y = targets(cls, data)
    method = "transform" if cls in TRANSFORMERS else "predict"
    one = getattr(quick(cls, random_state=0, n_jobs=1).fit(X, y), method)(X_test)
    two = getattr(quick(cls, random_state=0, n_jobs=2).fit(X, y), method)(X_test)
    assert np.array_equal(one, two)
