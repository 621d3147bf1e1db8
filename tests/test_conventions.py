"""The calling convention every public function follows, checked on the signatures.

``fit_<method>(X, y, r, *, kernel, sigma, lam, task, seed, n_jobs, <options>, max_memory)``:
the data and the size argument ``r`` are the only positional parameters; one name for the
iteration limit (``max_iter``) and the tolerance (``tol``); no ``**options`` hiding parameters
from ``help()``.
"""
import inspect

import pytest

import hkern
from hkern.oasis.parallel import oasis_mpi

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
                                      hkern.fit_meka],
                         ids=lambda f: f.__name__)
def test_same_defaults_where_the_meaning_is_the_same(function):
    params = parameters(function)
    assert params["kernel"].default == "gaussian"
    assert params["sigma"].default == 1.0
    assert params["lam"].default == 1e-2
    assert params["task"].default == "regression"
    if "seed" in params:                   # fit_exact draws nothing
        assert params["seed"].default is None
    assert params["n_jobs"].default is None


def test_positional_use_beyond_the_size_is_refused():
    import numpy as np
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(TypeError):
        hkern.fit_nystrom(X, X[:, 0], 5, "gaussian")
    with pytest.raises(TypeError):
        hkern.meka(X, 2, 2)
