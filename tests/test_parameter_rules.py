"""The bad-input tests generated from the declared parameter rules (hkern._parameters).

For every public function and every argument with a declared rule, each kind of value the
rule refuses (below and above its interval, NaN, a string, a bool, an unknown option) is
passed in an otherwise valid small call, and the call must raise the ValueError worded from
the table: one wording per argument and rule, wherever the check happens.  Every argument of
every public function must be in the table or say where else it is checked.
"""
import inspect
import math
from pathlib import Path

import numpy as np
import pytest

import hkern
from hkern import _parameters as P
from hkern.oasis.sharded import oasis_mpi

PUBLIC = [hkern.fit_exact, hkern.fit_nystrom, hkern.fit_rff, hkern.fit_hierarchical,
          hkern.fit_independent, hkern.fit_meka, hkern.fit_grief, hkern.fit_slkl,
          hkern.fit_slkl_unif, hkern.fit_slkl_krrm, hkern.meka, hkern.oasis,
          hkern.select_columns, oasis_mpi, hkern.kernel_matrix, hkern.kernel_diag,
          hkern.kernel_matvec]

N = 40
# A valid small call of each function (sigma and lam given: a bad argument must be refused
# before, and without, any selection).
GIVEN = {"sigma": 1.0, "lam": 0.1}
CALLS = {
    hkern.fit_exact: {"solver": "pcg", **GIVEN},      # where r, tol and max_iter are used
    hkern.fit_nystrom: {"r": 10, **GIVEN},
    hkern.fit_rff: {"r": 10, **GIVEN},
    hkern.fit_hierarchical: {"r": 8, **GIVEN},
    hkern.fit_independent: {"r": 8, **GIVEN},
    hkern.fit_meka: {"r": 4, "n_clusters": 2, **GIVEN},
    hkern.fit_grief: {"r": 10, "grid_size": 4, "max_iter": 2, "n_restarts": 0,
                      "init_subset": 20},
    hkern.fit_slkl: {"r": 10, "max_iter": 20, **GIVEN},
    hkern.fit_slkl_unif: {"r": 10, **GIVEN},
    hkern.fit_slkl_krrm: {"r": 10, **GIVEN},
    hkern.meka: {"r": 4, "n_clusters": 2},
    hkern.oasis: {"r": 10},
    hkern.select_columns: {"r": 10},
}
# Arguments that make sense only together: the bad value is passed with these.
TOGETHER = {
    (hkern.fit_grief, "signal_variance"): {"lengthscales": 1.0, "noise": 0.1},
    (hkern.fit_grief, "noise"): {"lengthscales": 1.0, "signal_variance": 1.0},
    (hkern.fit_grief, "burn_in"): {"inference": "type1", "n_iter": 50, "thin": 1},
    (hkern.fit_grief, "thin"): {"inference": "type1", "n_iter": 50, "burn_in": 10},
    (hkern.fit_grief, "n_iter"): {"inference": "type1", "burn_in": 0, "thin": 1},
}
# The rule that applies where it depends on another argument's default.
WHERE = {(hkern.meka, "threshold"): "fraction", (hkern.fit_meka, "threshold"): "fraction"}


def _data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(N, 3))
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=N)


def _signature(function):
    return inspect.signature(function).parameters


def _bad_values(rule, context):
    """Values the rule refuses, of every kind it can meet."""
    if isinstance(rule, P.AnyOf):
        values = [v for member in rule.rules for v in _bad_values(member, context)]
    elif isinstance(rule, (P.Real, P.Integer)):
        values = ["text", True]
        low, high = P._bound(rule.low, context), P._bound(rule.high, context)
        step = 0.5 if isinstance(rule, P.Real) else 1
        if low is not None:
            values.append(low if rule.closed in ("right", "neither") else low - step)
        if high is not None:
            values.append(high if rule.closed in ("left", "neither") else high + step)
        if isinstance(rule, P.Real):
            values += [math.nan, math.inf]
        else:
            values.append(1.5)
    elif isinstance(rule, P.Options):
        values = ["not-an-option", 1]
    elif isinstance(rule, P.Boolean):
        values = ["yes", 1]
    else:
        values = []
    seen, unique = set(), []
    for v in values:
        key = (type(v), repr(v))
        if key not in seen and not rule.accepts(v, context):
            seen.add(key)
            unique.append(v)
    return unique


def _context(function, options):
    defaults = {name: p.default for name, p in _signature(function).items()}
    values = {**defaults, **options}
    return {"n": N, "lam": values.get("lam"), "r": values.get("r"),
            "n_iter": values.get("n_iter"), "burn_in": values.get("burn_in")}


def _cases():
    for function, call in CALLS.items():
        for name in _signature(function):
            if name in ("X", "y") or name in P.CHECKED_ELSEWHERE or \
                    f"{function.__name__}.{name}" in P.CHECKED_ELSEWHERE:
                continue
            options = {**call, **TOGETHER.get((function, name), {})}
            rule, hint = P.rule_of(name, WHERE.get((function, name), function.__name__))
            for value in _bad_values(rule, _context(function, options)):
                yield pytest.param(function, name, value, options,
                                   id=f"{function.__name__}-{name}={value!r}")


@pytest.mark.parametrize("function", PUBLIC, ids=lambda f: f.__name__)
def test_every_argument_has_a_declared_rule(function):
    for name in _signature(function):
        qualified = f"{P.SAME_AS.get(function.__name__, function.__name__)}.{name}"
        assert name in P.PARAMETERS or qualified in P.PARAMETERS or name in \
            P.CHECKED_ELSEWHERE or f"{function.__name__}.{name}" in P.CHECKED_ELSEWHERE, \
            f"{function.__name__}({name}=...) has no declared rule"


@pytest.mark.parametrize("function, name, value, options", list(_cases()))
def test_a_refused_value_gets_the_declared_message(function, name, value, options):
    X, y = _data()
    args = (X,) if "y" not in _signature(function) else (X, y)
    options = {**options, name: value}
    rule, hint = P.rule_of(name, WHERE.get((function, name), function.__name__))
    expected = P.message(name, rule.describe(_context(function, options)), value, hint)
    with pytest.raises(ValueError) as caught:
        function(*args, **options)
    assert str(caught.value) == expected


def test_the_declared_choices_are_the_ones_the_code_knows():
    from hkern.exact.api import FORMER_SOLVERS, SOLVERS
    from hkern.hierarchical import _tree
    from hkern.meka import krr
    from hkern.meka._build import RANK_POLICIES, THRESHOLD_KINDS
    from hkern.nystrom.checks import NYSTROM_SOLVERS
    from hkern.oasis.api import SELECTORS
    from hkern.slkl.api import STEPS
    from hkern.solvers.preconditioners import registered_preconditioners
    from hkern.solvers.trace import PRECISIONS
    choices = {name: set(P.rule_of(name.split(".")[-1], name.split(".")[0]
                                   if "." in name else None)[0].choices)
               for name in ("fit_exact.solver", "fit_exact.preconditioner",
                            "fit_exact.precision", "fit_nystrom.solver", "fit_meka.solver",
                            "partition", "rank_policy", "threshold_kind", "method", "step")}
    assert choices["fit_exact.solver"] == set(SOLVERS)
    assert not set(FORMER_SOLVERS) & set(SOLVERS)
    assert choices["fit_exact.preconditioner"] == set(registered_preconditioners())
    assert choices["fit_exact.precision"] == set(PRECISIONS)
    assert choices["fit_nystrom.solver"] == set(NYSTROM_SOLVERS)
    assert choices["fit_meka.solver"] == set(krr.SOLVERS)
    assert choices["partition"] == set(_tree.PARTITIONS)
    assert choices["rank_policy"] == set(RANK_POLICIES)
    assert choices["threshold_kind"] == set(THRESHOLD_KINDS)
    assert choices["method"] == set(SELECTORS)
    # One set of selector names: select_columns' methods, the Nystrom preconditioners.
    from hkern.solvers.exact_pcg import NYSTROM_PRECONDITIONERS
    assert choices["method"] == set(P.COLUMN_SELECTORS) == set(NYSTROM_PRECONDITIONERS)
    assert choices["fit_exact.preconditioner"] == set(P.COLUMN_SELECTORS) | {"hck"}
    assert choices["step"] == set(STEPS)


def test_one_template_words_every_rule():
    assert P.check_parameter("lam", 0.5) == 0.5 and P.check_parameter("lam", "auto") == "auto"
    assert type(P.check_parameter("max_iter", np.int64(3))) is int
    assert type(P.check_parameter("tol", np.float32(0.25))) is float
    with pytest.raises(ValueError, match=r"^r must be None or an integer in \[1, n - 1 = 9\], "
                                         r"got 10; "):
        P.check_parameter("r", 10, "fit_exact", n=10)
    with pytest.raises(ValueError, match=r"^jitter must be None or a real number in "
                                         r"\[0, lam = 0\.01\), got 0\.01; "):
        P.check_parameter("jitter", np.float64(0.01), lam=0.01)
    with pytest.raises(ValueError, match=r"^verbose must be True or False, got 'no'$"):
        P.check_parameter("verbose", "no")
    with pytest.raises(ValueError, match=r"^thin must be an integer in "
                                         r"\[1, n_iter - burn_in = 5\], got 6; "):
        P.check_parameter("thin", 6, n_iter=10, burn_in=5)


def test_the_documented_table_is_the_declared_one():
    page = (Path(__file__).resolve().parents[1] / "doc" / "parameters.md").read_text()
    assert page.endswith(P.rules_markdown()), "regenerate doc/parameters.md's table"
