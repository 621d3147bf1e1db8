"""The calling convention every public function follows, checked on the signatures.

``fit_<method>(X, y, r, *, kernel, sigma, lam, task, seed, n_jobs, <options>, max_memory)``:
the data and the size argument ``r`` are the only positional parameters; one name for the
iteration limit (``max_iter``) and the tolerance (``tol``); no ``**options`` hiding parameters
from ``help()``.
"""
import inspect

import pytest

import hkern
from hkern.oasis.sharded import oasis_mpi

# function: its positional parameters, in order (everything else keyword-only)
POSITIONAL = {
    hkern.kernel_matrix: ["X", "Y"],
    hkern.kernel_diag: ["X"],
    hkern.kernel_matvec: ["X", "Y", "B"],
    hkern.fit_exact: ["X", "y"],
    hkern.fit_nystrom: ["X", "y", "r"],
    hkern.fit_rff: ["X", "y", "r"],
    hkern.fit_hierarchical: ["X", "y", "r"],
    hkern.fit_independent: ["X", "y", "r"],
    hkern.fit_meka: ["X", "y", "r"],
    hkern.fit_grief: ["X", "y", "r"],
    hkern.fit_slkl: ["X", "y", "r"],
    hkern.fit_slkl_unif: ["X", "y", "r"],
    hkern.fit_slkl_krrm: ["X", "y", "r"],
    hkern.meka: ["X", "r"],
    hkern.oasis: ["X", "r"],
    hkern.select_columns: ["X", "r"],
    oasis_mpi: ["X", "r"],
}
FUNCTIONS = list(POSITIONAL)
IDS = [f.__name__ for f in FUNCTIONS]
# The shared keywords, in the order help() shows them, where a function has them.
SHARED_ORDER = ["kernel", "sigma", "lam", "task", "seed", "n_jobs"]
# Keywords that complete the size or choose the algorithm come before the shared ones.
LEADING = {"n_clusters", "method"}


def parameters(function):
    return inspect.signature(function).parameters


@pytest.mark.parametrize("function", FUNCTIONS, ids=IDS)
def test_only_data_and_size_are_positional(function):
    params = parameters(function)
    positional = [name for name, p in params.items()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert positional == POSITIONAL[function]
    assert all(p.kind == p.KEYWORD_ONLY for name, p in params.items()
               if name not in positional)


@pytest.mark.parametrize("function", FUNCTIONS, ids=IDS)
def test_no_hidden_options(function):
    kinds = {p.kind for p in parameters(function).values()}
    assert inspect.Parameter.VAR_KEYWORD not in kinds
    assert inspect.Parameter.VAR_POSITIONAL not in kinds


@pytest.mark.parametrize("function", FUNCTIONS, ids=IDS)
def test_one_spelling_per_meaning(function):
    names = set(parameters(function))
    assert not names & {"maxiter", "n_iter_max", "rank", "p", "n_columns", "n_candidates"}


@pytest.mark.parametrize("function", FUNCTIONS, ids=IDS)
def test_shared_keywords_come_first_in_one_order_and_max_memory_last(function):
    names = list(parameters(function))
    shared = [n for n in names if n in SHARED_ORDER]
    assert shared == [n for n in SHARED_ORDER if n in shared]
    keyword = [n for n in names[len(POSITIONAL[function]):] if n not in LEADING]
    assert keyword[:len(shared)] == shared
    if "max_memory" in names:
        assert names[-1] == "max_memory"
    if function.__name__.startswith("fit_"):
        assert {"seed", "n_jobs", "max_memory"} <= set(names) or function is hkern.fit_exact


@pytest.mark.parametrize("function", [hkern.fit_exact, hkern.fit_nystrom, hkern.fit_rff,
                                      hkern.fit_hierarchical, hkern.fit_independent,
                                      hkern.fit_meka, hkern.fit_slkl, hkern.fit_slkl_unif,
                                      hkern.fit_slkl_krrm],
                         ids=lambda f: f.__name__)
def test_same_defaults_where_the_meaning_is_the_same(function):
    # Every fit selects its lengthscales and ridge unless given numbers (doc/conventions.md).
    params = parameters(function)
    assert params["kernel"].default == "gaussian"
    assert params["sigma"].default == "ard"
    assert params["lam"].default == "auto"
    assert params["task"].default == "regression"
    if "seed" in params:                   # fit_exact draws nothing
        assert params["seed"].default is None
    assert params["n_jobs"].default is None


@pytest.mark.parametrize("function", [hkern.fit_exact, hkern.fit_nystrom, hkern.fit_meka],
                         ids=lambda f: f.__name__)
def test_one_cg_stopping_rule(function):
    # tol is CG's relative residual and max_iter its iteration limit in all three (exact PCG,
    # FALKON, MEKA's CG): one default, measured in doc/solvers.md ("One tolerance").
    params = parameters(function)
    assert params["tol"].default == 1e-3 and params["max_iter"].default == 1000


def test_grief_learns_what_sigma_and_lam_stand_for_and_says_so():
    # issue 33, item 2: fit_grief has no sigma, lam or task, for a reason its help() gives.
    params = parameters(hkern.fit_grief)
    assert not {"sigma", "lam", "task"} & set(params)
    assert {"lengthscales", "signal_variance", "noise", "optimize"} <= set(params)
    doc = " ".join(hkern.fit_grief.__doc__.split())
    assert "takes no ``sigma``, ``lam`` or ``task``" in doc and "regression" in doc


def _warned_here(call, category):
    """The warnings of ``call()`` of ``category``, checked to point at this file's line."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    found = [w for w in caught if issubclass(w.category, category)]
    assert found, f"no {category.__name__}"
    assert {w.filename for w in found} == {__file__}, [(w.filename, w.lineno) for w in found]
    return found


@pytest.mark.parametrize("fit, size", [(hkern.fit_hierarchical, 8), (hkern.fit_nystrom, 10),
                                        (hkern.fit_exact, None), (hkern.fit_slkl, 10)])
def test_a_call_is_bound_once_through_every_decorator(fit, size, monkeypatch):
    """runs_on_shards, selects_hyperparameters and budgeted each read the call's arguments;
    the outermost binds them and the others read its complete keyword call."""
    calls = []
    real = inspect.Signature.bind

    def counting(self, *args, **kwargs):
        calls.append(tuple(self.parameters))
        return real(self, *args, **kwargs)
    monkeypatch.setattr(inspect.Signature, "bind", counting)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.sin(X[:, 0])
    args = (X, y) if size is None else (X, y, size)
    fit(*args, sigma=1.0, lam=0.1, seed=0)
    assert len([c for c in calls if "X" in c]) == 1, calls


def test_warnings_point_at_the_users_line():
    # However many decorators a fit has (fit_hierarchical: shards, selection, thread budget),
    # a warning names the line that called it (hkern._validation.warn_user).
    import numpy as np
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    _warned_here(lambda: hkern.fit_hierarchical(X, y, r=100, sigma=1.0, lam=0.1), UserWarning)
    _warned_here(lambda: hkern.fit_nystrom(X, y, r=100, sigma=1.0, lam=0.1), UserWarning)
    _warned_here(lambda: hkern.fit_hierarchical(X, np.zeros(40), r=8), UserWarning)
    _warned_here(lambda: hkern.fit_exact(X, y, solver="pcg", max_iter=1, sigma=0.3, lam=1e-6,
                                         tol=1e-10), hkern.ConvergenceWarning)
    _warned_here(lambda: hkern.fit_exact(X, y, solver="cholesky", sigma=1.0, lam=0.1),
                 FutureWarning)
    model = hkern.fit_hierarchical(X, y, r=8, sigma=1.0, lam=0.1)
    _warned_here(lambda: model.r, FutureWarning)


# The calls that are not long (one kernel pass, no search): the rest report their steps.
QUICK = {hkern.kernel_matrix, hkern.kernel_diag, hkern.kernel_matvec}


@pytest.mark.parametrize("function", [f for f in FUNCTIONS if f not in QUICK], ids=lambda f:
                         f.__name__)
def test_every_long_call_takes_verbose(function):
    assert parameters(function)["verbose"].default is False


def test_verbose_prints_one_line_per_step(capsys):
    import numpy as np
    X = np.random.default_rng(0).normal(size=(300, 2))
    y = np.sin(X[:, 0])
    for call, label, steps in [
            (lambda v: hkern.meka(X, 5, n_clusters=3, seed=0, psd=True, verbose=v), "meka", 4),
            (lambda v: hkern.select_columns(X, 20, seed=0, verbose=v), "select_columns", 2),
            (lambda v: hkern.oasis(X, 20, seed=0, verbose=v), "select_columns", 2),
            (lambda v: hkern.fit_meka(X, y, 5, n_clusters=3, sigma=1.0, lam=1e-2, seed=0,
                                      verbose=v), "fit_meka", 4),
            (lambda v: hkern.fit_grief(X, y, r=20, grid_size=5, max_iter=5, seed=0,
                                       init_subset=100, verbose=v), "fit_grief", 3)]:
        call(False)
        assert capsys.readouterr().out == ""
        call(True)
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) == steps and all(line.startswith(f"[{label} ") for line in lines)
        with pytest.raises(ValueError, match="verbose must be True or False"):
            call("yes")


def test_positional_use_beyond_the_size_is_refused():
    import numpy as np
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(TypeError):
        hkern.fit_nystrom(X, X[:, 0], 5, "gaussian")
    with pytest.raises(TypeError):
        hkern.meka(X, 2, 2)


# ================================================================ per-output values
# What a fit returns, checked on fitted models (the sections above check signatures): every
# value with one entry per output -- an output being a column of y or a one-vs-rest class --
# is an ndarray whose last axis has one entry per output, also for a single output; a 1-D y
# and the same y as one column give models of the same layout (nothing squeezed for k = 1).

import numpy as np  # noqa: E402  (this section's own imports, kept beside the section)
from problems import smooth_regression  # noqa: E402

# Attributes that hold one entry (or column) per output wherever a model has them.
PER_OUTPUT = ("dual_coef_", "coef_", "weights_", "objective_", "n_iter_", "converged_",
              "y_mean_", "signal_variance_", "noise_")
# (fit function, its size and options) for every fit that takes several outputs
MULTI_OUTPUT_FITS = {
    "fit_exact": (hkern.fit_exact, {}),
    "fit_nystrom": (hkern.fit_nystrom, {"r": 20}),
    "fit_rff": (hkern.fit_rff, {"r": 20}),
    "fit_hierarchical": (hkern.fit_hierarchical, {"r": 16}),
    "fit_independent": (hkern.fit_independent, {"r": 16}),
    "fit_slkl": (hkern.fit_slkl, {"r": 20}),
    "fit_slkl_unif": (hkern.fit_slkl_unif, {"r": 20}),
    "fit_slkl_krrm": (hkern.fit_slkl_krrm, {"r": 20}),
    "fit_meka": (hkern.fit_meka, {"r": 5, "n_clusters": 3}),
    "fit_meka-pcg": (hkern.fit_meka, {"r": 5, "n_clusters": 3, "solver": "pcg"}),
}
# GP-GRIEF fits one output only.
ALL_FITS = {**MULTI_OUTPUT_FITS, "fit_grief": (hkern.fit_grief, {"r": 20})}
def _cases(fits):
    return [pytest.param(fit, options, id=name) for name, (fit, options) in fits.items()]


@pytest.fixture(scope="module")
def two_outputs():
    X, y, _ = smooth_regression(np.random.default_rng(17), n=150)
    return X, np.column_stack([y, np.cos(2 * X[:, 1])])


def _fitted(fit, options, X, y):
    seed = {"seed": 0} if "seed" in parameters(fit) else {}
    return fit(X, y, **options, **seed)


def _layout(value):
    """Type and shape of a fitted value (of each item of a list or tuple)."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.shape, value.dtype.kind)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_layout(item) for item in value))
    return type(value).__name__


def _fitted_layouts(model):
    return {name: _layout(value) for name, value in vars(model).items()
            if name.endswith("_") and not name.startswith("_")}


@pytest.mark.parametrize("fit, options", _cases(ALL_FITS))
def test_one_output_is_not_squeezed(fit, options, two_outputs):
    X, Y = two_outputs
    vector = _fitted(fit, options, X, Y[:, 0])
    column = _fitted(fit, options, X, Y[:, :1])
    assert _fitted_layouts(vector) == _fitted_layouts(column)


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("fit, options",
                         _cases(MULTI_OUTPUT_FITS))
def test_per_output_values_are_arrays_with_one_entry_per_output(fit, options, k, two_outputs):
    X, Y = two_outputs
    model = _fitted(fit, options, X, Y[:, 0] if k == 1 else Y)
    found = [name for name in PER_OUTPUT if getattr(model, name, None) is not None]
    assert found, "a kernel ridge model has coefficients"
    for name in found:
        value = getattr(model, name)
        assert isinstance(value, np.ndarray), (name, type(value))
        assert value.ndim >= 1 and value.shape[-1] == k, (name, value.shape)


def test_per_output_values_of_a_classifier_have_one_entry_per_class(two_outputs):
    X, Y = two_outputs
    labels = np.digitize(Y[:, 0], np.quantile(Y[:, 0], [1 / 3, 2 / 3]))     # three classes
    model = hkern.fit_slkl(X, labels, r=20, task="classification", seed=0)
    found = [name for name in PER_OUTPUT if getattr(model, name, None) is not None]
    assert found == ["coef_", "weights_", "objective_", "n_iter_", "converged_"]
    # (a classifier has no mean, signal or noise variance: they are None)
    assert model.y_mean_ is None and model.signal_variance_ is None and model.noise_ is None
    for name in found:
        assert getattr(model, name).shape[-1] == 3, name


@pytest.mark.parametrize("fit, former, new, kw", [
    (hkern.fit_exact, "cholesky", "direct", {}),
    (hkern.fit_meka, "cg", "pcg", {"r": 5, "n_clusters": 3}),
])
def test_former_solver_names_warn_and_give_the_same_model(fit, former, new, kw):
    """One set of solver names ("direct", "pcg", "auto"): the names fit_exact and fit_meka used
    before still work, with a FutureWarning naming today's, and fit the same model."""
    X, y = hkern.datasets.make_regression(80, 3, seed=2)
    with pytest.warns(FutureWarning, match=f"solver='{former}' is now called solver='{new}'"):
        old = fit(X, y, solver=former, seed=0, **kw)
    today = fit(X, y, solver=new, seed=0, **kw)
    assert np.array_equal(old.predict(X), today.predict(X))


@pytest.mark.parametrize("fit, kw", [(hkern.fit_nystrom, {"r": 10}),
                                     (hkern.fit_exact, {}), (hkern.fit_meka, {"r": 5,
                                                                            "n_clusters": 3})])
def test_solver_names_are_one_set(fit, kw):
    """Every fit's solver names are among "direct", "pcg" and "auto"; an unknown one is an error
    listing the fit's own."""
    X, y = hkern.datasets.make_regression(40, 2, seed=2)
    with pytest.raises(ValueError, match="solver must be one of 'direct', 'pcg'|solver must be "
                                         "one of 'auto', 'direct', 'pcg'"):
        fit(X, y, solver="lsqr", **kw)
