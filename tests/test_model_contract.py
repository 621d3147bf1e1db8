"""One fitted-model contract (doc/conventions.md, "What a fit returns"): every object a fit or a
selection returns sits on one base, keeps as plain names only the four arguments every model
shares, ends every other value in ``_``, gives each shared name one meaning, and sets nothing
after construction.  Former names still read, with a FutureWarning.
"""
import inspect
import warnings

import numpy as np
import pytest

import hkern
from hkern._model import FittedModel, KernelRidgeModel, renamed
from hkern._targets import TargetEncoding

# The arguments a model keeps under their own names; everything else a model holds ends in "_".
ARGUMENTS = {"kernel", "sigma", "lam", "n_jobs"}
N, D, K = 150, 3, 2
SIGMA, LAM = 0.9, 2e-2


def _data(k=1):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(N, D))
    Y = np.column_stack([np.sin(X[:, 0]), np.cos(X[:, 1])])[:, :k]
    return X, Y[:, 0] if k == 1 else Y


# name -> (fit, keyword arguments at given sigma and lam): every function that returns a model.
FITS = {
    "exact": (hkern.fit_exact, {}),
    "exact_pcg": (hkern.fit_exact, dict(solver="pcg", r=20, seed=0)),
    "nystrom": (hkern.fit_nystrom, dict(r=20, seed=0)),
    "falkon": (hkern.fit_nystrom, dict(r=20, solver="pcg", seed=0)),
    "rff": (hkern.fit_rff, dict(r=20, seed=0)),
    "hierarchical": (hkern.fit_hierarchical, dict(r=12, seed=0)),
    "independent": (hkern.fit_independent, dict(r=12, seed=0)),
    "meka": (hkern.fit_meka, dict(r=5, n_clusters=2, seed=0)),
    "slkl": (hkern.fit_slkl, dict(r=20, nu=1e-3, seed=0)),
    "slkl_unif": (hkern.fit_slkl_unif, dict(r=20, seed=0)),
    "slkl_krrm": (hkern.fit_slkl_krrm, dict(r=20, seed=0)),
}


def _fitted(name, k=1, **extra):
    fit, kw = FITS[name]
    X, y = _data(k)
    return fit(X, y, **kw, sigma=SIGMA, lam=LAM, **extra)


def _others():
    """The returned objects that are not kernel ridge models."""
    X, y = _data()
    return {"grief": hkern.fit_grief(X, y, r=20, seed=0),
            "meka_approximation": hkern.meka(X, 5, n_clusters=2, sigma=SIGMA, seed=0),
            "meka_psd": hkern.meka(X, 5, n_clusters=2, sigma=SIGMA, seed=0, psd=True),
            "columns": hkern.select_columns(X, 10, sigma=SIGMA, seed=0),
            "columns_precomputed": hkern.select_columns(
                hkern.kernel_matrix(X, sigma=SIGMA), 10, kernel="precomputed", seed=0)}


def _public_attributes(model):
    return {a for a in vars(model) if not a.startswith("_")}


@pytest.mark.parametrize("name", FITS)
def test_kernel_ridge_models_keep_only_the_shared_arguments_without_an_underscore(name):
    model = _fitted(name)
    assert isinstance(model, KernelRidgeModel) and isinstance(model, FittedModel)
    attributes = _public_attributes(model)
    assert ARGUMENTS <= attributes
    assert {a for a in attributes - ARGUMENTS if not a.endswith("_")} == set()


def test_the_other_fitted_objects_sit_on_the_same_base_and_follow_the_same_rule():
    for name, obj in _others().items():
        assert isinstance(obj, FittedModel), name
        loose = {a for a in _public_attributes(obj) - ARGUMENTS if not a.endswith("_")}
        assert loose == set(), (name, loose)
        assert "n_jobs" in vars(obj) and "n_features_in_" in vars(obj), name


@pytest.mark.parametrize("k", [1, K])
@pytest.mark.parametrize("name", FITS)
def test_each_shared_name_has_one_meaning(name, k):
    model = _fitted(name, k=k, n_jobs=1)
    X, y = _data(k)
    # the arguments, as given
    assert model.kernel == "gaussian" and model.n_jobs == 1
    assert model.sigma == SIGMA and model.lam == LAM
    # the values a selection chooses, under scikit-learn's names, and how (None: given)
    assert model.sigma_ == SIGMA and model.lam_ == LAM and model.selection_ is None
    assert model.n_features_in_ == D
    assert isinstance(model.encoding_, TargetEncoding) and model.classes_ is None
    # coefficients: dual_coef_ over the points of a kernel expansion (the training points, or
    # X_fit_ where the model keeps the rows it was fitted on), coef_ over r features or landmarks
    if "dual_coef_" in dir(model):
        rows = len(model.X_fit_) if "X_fit_" in vars(model) else N
        assert model.dual_coef_.shape == (rows, k)
    if "coef_" in vars(model):
        assert model.coef_.ndim == 2 and model.coef_.shape[1] == k
    assert "dual_coef_" in dir(model) or "coef_" in vars(model)
    # iterations: one count per output where each output is solved on its own, one int where
    # one block solve serves every output (exact PCG, FALKON), None for a direct solver
    n_iter = getattr(model, "n_iter_", None)
    if name in ("exact_pcg", "falkon"):
        assert isinstance(n_iter, int) and n_iter == len(model.solver_trace_.residuals) - 1
    else:
        assert n_iter is None or np.shape(n_iter) == (k,)
    # points a model holds are (rows, d) arrays in the fit's coordinates
    for points in ("X_fit_", "landmarks_"):
        if points in vars(model):
            assert getattr(model, points).shape[1] == D
    assert model.predict(X[:4]).shape == np.shape(y[:4])


def test_a_selection_is_recorded_at_construction():
    X, y = _data()
    model = hkern.fit_hierarchical(X, y, r=12, seed=0)
    record = model.selection_
    assert isinstance(record, hkern.HyperparameterSelection)
    assert model.sigma_ is model.sigma and model.lam_ == model.lam
    chosen = record.candidates[record.best]
    assert np.array_equal(chosen.sigma, model.sigma) and chosen.lam == model.lam
    # a model fitted outside a selection, after one, has none
    assert hkern.fit_hierarchical(X, y, r=12, sigma=SIGMA, lam=LAM, seed=0).selection_ is None


# Where hkern assigns to an attribute of an object other than ``self`` (module, object name):
# none of them is a model.  Records, solver results, MPI states and scikit-learn tags are filled
# in by the code that made them; dunder metadata and array flags are not state.
OTHER_OBJECTS_ASSIGNED = {
    ("_memory.py", "result"),                   # a memory-estimate record
    ("solvers/cg.py", "result"),                # the CG result being built
    ("hierarchical/sharded.py", "state"),       # the MPI rank state's failure slot
    ("hyperparameters/select.py", "record"),    # the selection record, completed at the end
    ("hyperparameters/iterative.py", "record"),
    ("hyperparameters/subsample.py", "record"),
    ("hyperparameters/search.py", "record"),
    ("hyperparameters/leave_one_out.py", "record"),
    # a selection candidate's state: its factor freed
    ("hyperparameters/exact_pcg_problem.py", "x0"),
    ("hyperparameters/sharded_exact_problem.py", "x0"),
    ("solvers/falkon.py", "other"),             # a FALKON system copied onto other rows
}


def test_nothing_is_set_on_a_model_after_construction():
    import ast
    from pathlib import Path
    root = Path(hkern.__file__).parent
    found = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            else:
                continue
            for target in targets:
                for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                            and t.value.id not in ("self", "cls")
                            and not t.attr.startswith("__") and t.attr != "writeable"):
                        found.add((path.relative_to(root).as_posix(), t.value.id))
    assert found == OTHER_OBJECTS_ASSIGNED


# class -> {former name: new name}
FORMER_NAMES = {
    hkern.HierarchicalKRR: {"r": "r_", "jitter": "jitter_"},
    hkern.SlklModel: {"nu": "nu_"},
    hkern.GriefGP: {"inference": "inference_"},
    hkern.MekaApproximation: {"psd": "psd_"},
    hkern.ColumnSelection: {"indices": "indices_", "C": "C_", "W_inv": "W_inv_",
                            "scores": "scores_", "F": "F_", "R": "R_", "method": "method_",
                            "row_offset": "row_offset_", "rank": "comm_rank_",
                            "size": "comm_size_"},
}


def test_former_names_are_declared_on_their_classes():
    declared = {cls: {name: value.new for name, value in vars(cls).items()
                      if isinstance(value, renamed)} for cls in FORMER_NAMES}
    assert declared == FORMER_NAMES


def test_former_names_read_the_new_value_with_a_future_warning():
    X, y = _data()
    objects = {hkern.HierarchicalKRR: _fitted("hierarchical"), hkern.SlklModel: _fitted("slkl"),
               **{type(o): o for o in _others().values()}}
    for cls, names in FORMER_NAMES.items():
        obj = objects[cls]
        for old, new in names.items():
            with pytest.warns(FutureWarning, match=rf"{cls.__name__}\.{old} is now {new}"):
                value = getattr(obj, old)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                expected = getattr(obj, new)
            if isinstance(expected, np.ndarray):
                assert np.array_equal(value, expected, equal_nan=True), (cls, old)
            else:
                assert value == expected, (cls, old)


def test_column_selection_counts_features_and_mpi_ranks_apart():
    objects = _others()
    serial, precomputed = objects["columns"], objects["columns_precomputed"]
    assert serial.n_features_in_ == D and precomputed.n_features_in_ is None
    assert (serial.comm_rank_, serial.comm_size_, serial.row_offset_) == (0, 1, 0)
    assert len(serial) == len(serial.indices_) == serial.C_.shape[1] == 10
    assert np.allclose(serial.C_ @ serial.R_, serial.approximation())


def test_every_likelihood_has_one_signature():
    for cls in (hkern.ExactKRR, hkern.HierarchicalKRR, hkern.IndependentKRR, hkern.NystromKRR,
                hkern.RFFKRR, hkern.GriefGP):
        params = inspect.signature(cls.log_marginal_likelihood).parameters
        assert list(params) == ["self", "y", "max_memory"], cls
        assert params["y"].default is None and params["max_memory"].default is None, cls
        assert params["max_memory"].kind is inspect.Parameter.KEYWORD_ONLY, cls
