"""The declared rules of hkern's arguments: one table that checks them and words their errors.

Every scalar argument of a public function has one rule here (:data:`PARAMETERS`): an interval
of reals or integers, a set of strings, True/False, or a union of these, with the bounds that
depend on the data (``r < n``) named in the rule.  :func:`check_parameter` applies it, and
every message comes from one template::

    <name> must be <what the rule accepts>, got <value>; <hint>

so an argument has one wording for each rule wherever it is checked, and the bad-input tests
are generated from the same table (``tests/test_parameter_rules.py``: every public function,
every argument, every kind of bad value).  Arguments whose check is more than a rule (arrays,
``sigma``, ``kernel``, ``n_jobs``, ``max_memory``, ``seed``, ``comm``) are listed in
:data:`CHECKED_ELSEWHERE` with the function that checks them, so the table covers every
argument.  Rules that join two arguments (``jitter < lam``, ``burn_in < n_iter``) are
intervals whose bound is a :class:`Bound` on the other argument.

This follows scikit-learn's ``_param_validation`` (constraints declared per parameter,
validated in one place), kept to what hkern's functions take.
"""
from __future__ import annotations

import math
import numbers
import operator

import numpy as np

__all__ = ["Bound", "Real", "Integer", "Options", "Boolean", "Nothing", "AnyOf", "PARAMETERS",
           "CHECKED_ELSEWHERE", "COLUMN_SELECTORS", "check_parameter", "choices_of", "rule_of"]


def show(value):
    """A value as an error message shows it: numbers plainly (``0.5``, not
    ``np.float64(0.5)``), anything else by its repr."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or value is None:
        return repr(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    return repr(value)


class Bound:
    """A bound that depends on the data or on other arguments: ``Bound("n", "-", 1)`` is
    ``n - 1`` with ``n`` given to :func:`check_parameter` (``check_parameter("r", r, n=60)``);
    the message shows the expression and its value (``[1, n - 1 = 59]``).  Terms are names
    in the context or numbers, joined by "+" and "-"."""

    def __init__(self, *terms):
        self.terms = terms
        self.name = " ".join(str(t) for t in terms)

    def value(self, context):
        def term(t):
            if isinstance(t, str):
                if t not in context:
                    raise TypeError(f"the rule's bound {self.name!r} needs {t}= in "
                                    "check_parameter's context")
                return context[t]
            return t
        total = term(self.terms[0])
        for sign, t in zip(self.terms[1::2], self.terms[2::2]):
            value = term(t)
            if total is None or value is None:
                return None
            total = total + value if sign == "+" else total - value
        return total

    def __repr__(self):
        return f"Bound{self.terms!r}"


def _bound(bound, context):
    return bound.value(context) if isinstance(bound, Bound) else bound


def _bound_text(bound, context):
    if isinstance(bound, Bound):
        value = bound.value(context)
        return bound.name if value is None else f"{bound.name} = {show(value)}"
    return show(bound)


class Rule:
    """What one argument accepts.  ``accepts(value, context)``, ``convert(value)`` (the checked
    value in its plain Python type) and ``describe(context)`` (the words after "must be")."""

    def check(self, value, name, hint="", context=None):
        context = context or {}
        if not self.accepts(value, context):
            raise ValueError(message(name, self.describe(context), value, hint))
        return self.convert(value)

    def convert(self, value):
        return value

    def __or__(self, other):
        return AnyOf(self, other)


def message(name, accepted, value, hint=""):
    """The one wording of a refused argument."""
    return f"{name} must be {accepted}, got {show(value)}" + (f"; {hint}" if hint else "")


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


class _Interval(Rule):
    noun = ""

    def __init__(self, low=None, high=None, closed="both"):
        self.low, self.high, self.closed = low, high, closed

    def _within(self, value, context):
        low, high = _bound(self.low, context), _bound(self.high, context)
        left = self.closed in ("left", "both")
        right = self.closed in ("right", "both")
        if low is not None and not (value >= low if left else value > low):
            return False
        return high is None or (value <= high if right else value < high)

    def describe(self, context):
        low, high = self.low, self.high
        if low is None and high is None:
            return self.noun
        if high is None:
            return f"{self.noun} {'>=' if self.closed in ('left', 'both') else '>'} " \
                   f"{_bound_text(low, context)}"
        if low is None:
            return f"{self.noun} {'<=' if self.closed in ('right', 'both') else '<'} " \
                   f"{_bound_text(high, context)}"
        return (f"{self.noun} in {'[' if self.closed in ('left', 'both') else '('}"
                f"{_bound_text(low, context)}, {_bound_text(high, context)}"
                f"{']' if self.closed in ('right', 'both') else ')'}")


class Real(_Interval):
    """A finite real number in an interval (``closed``: "both", "left", "right", "neither")."""
    noun = "a real number"

    def accepts(self, value, context):
        return _is_real(value) and math.isfinite(value) and self._within(float(value), context)

    def convert(self, value):
        return float(value)


class Integer(_Interval):
    """An integer (Python or NumPy, not a bool) in a closed interval."""
    noun = "an integer"

    def accepts(self, value, context):
        try:
            if isinstance(value, (bool, np.bool_)):
                return False
            value = operator.index(value)
        except TypeError:
            return False
        return self._within(value, context)

    def convert(self, value):
        return operator.index(value)


class Options(Rule):
    """One of a fixed set of strings."""

    def __init__(self, *choices):
        self.choices = tuple(choices)

    def accepts(self, value, context):
        return isinstance(value, str) and value in self.choices

    def describe(self, context):
        if len(self.choices) == 1:
            return repr(self.choices[0])
        return "one of " + ", ".join(repr(c) for c in self.choices)


class Boolean(Rule):
    """True or False (NumPy booleans too); anything else is refused, not truth-tested (the
    string ``"no"`` would be true)."""

    def accepts(self, value, context):
        return isinstance(value, (bool, np.bool_))

    def convert(self, value):
        return bool(value)

    def describe(self, context):
        return "True or False"


class Nothing(Rule):
    """None."""

    def accepts(self, value, context):
        return value is None

    def describe(self, context):
        return "None"


class AnyOf(Rule):
    """Any of several rules (the first that accepts converts)."""

    def __init__(self, *rules):
        self.rules = rules

    def accepts(self, value, context):
        return any(rule.accepts(value, context) for rule in self.rules)

    def convert(self, value):
        # The value was accepted; the first rule of its type converts it (bounds ignored).
        for rule in self.rules:
            if rule.accepts(value, _ANY):
                return rule.convert(value)
        return value

    def describe(self, context):
        return " or ".join(rule.describe(context) for rule in self.rules)


class _AnyContext(dict):
    """Every bound read as absent (None): the rule then tests the type alone."""

    def __contains__(self, key):
        return True

    def __missing__(self, key):
        return None


_ANY = _AnyContext()


def _entry(rule, hint=""):
    return rule, hint


_CG_TOL = _entry(Real(0, 1, "neither"),
                 "the relative residual at which CG stops, e.g. 1e-3 (the default)")
_CG_MAX_ITER = _entry(Integer(1), "the most CG iterations, e.g. 1000 (the default)")
_SELECTION_TOL = _entry(Real(0), "selection stops once the largest diagonal of the residual "
                                 "K - C W^-1 C^T is at most tol (0: never)")
_SELECTION_RTOL = _entry(Real(0), "selection stops once that diagonal is at most rtol times "
                                  "the largest diagonal of K (0: never)")
_R = _entry(Integer(1), "the number of landmarks, centres, basis functions or features")

# The column selectors: how hkern chooses the columns (landmarks) of a Nystrom approximation,
# one set of names wherever it chooses them.  select_columns(method=name) runs one (and is
# where they are implemented); fit_nystrom(landmarks=name) and the Nystrom estimators choose
# their landmarks by one (or take row indices); fit_exact(solver="pcg", preconditioner=name)
# builds its Nystrom preconditioner F F^T + lam I on the columns one chooses (beside "hck",
# the hierarchical kernel, which chooses no columns).  The rules of those arguments, the
# Nystrom preconditioner kinds and hkern.oasis.SELECTORS are made from this table, and
# doc/parameters.md shows it (rules_markdown).
COLUMN_SELECTORS = {
    "oasis": "oASIS (Patel et al.): from ``init`` random columns, the column of the largest "
             "Schur-complement score Delta (the residual's diagonal), one at a time",
    "greedy": "diagonally pivoted partial Cholesky: the largest Delta from the start (oASIS "
              "with ``init=0``)",
    "rpcholesky": "randomly pivoted Cholesky (Chen, Epperly, Tropp, Webber): each pivot drawn "
                  "with probability proportional to Delta",
    "block_rpcholesky": "RPCholesky's distribution of pivots, found 128 candidates at a time "
                        "by rejection sampling and added in one GEMM-rate update (Epperly, "
                        "Tropp, Webber)",
    "uniform": "uniformly without replacement",
}

# name -> (rule, hint); "function.name" where one function gives the name its own meaning.
PARAMETERS = {
    # the shared arguments
    "lam": _entry(Real(0, None, "neither") | Options("auto"),
                  "the ridge regularisation (try 1e-3 to 1), or 'auto' to select it"),
    "task": _entry(Options("regression", "classification")),
    "verbose": _entry(Boolean()),
    "criterion": _entry(Options("auto", "likelihood", "holdout")),
    "r": _R,
    "select_columns.r": _entry(Integer(1, Bound("n")),
                               "r is the number of columns; a Nystrom approximation has at "
                               "most n"),
    # iterative solvers
    "tol": _CG_TOL,
    "max_iter": _CG_MAX_ITER,
    "fit_exact.r": _entry(Nothing() | Integer(1, Bound("n", "-", 1)),
                          "the rank of the PCG preconditioner, below n (at rank n solve "
                          "directly: solver='direct'); None chooses it"),
    "fit_exact.solver": _entry(Options("auto", "direct", "pcg")),
    "fit_exact.precision": _entry(Options("double", "mixed", "auto")),
    # the Nystrom preconditioners by the selector of their columns, and HCK's
    "fit_exact.preconditioner": _entry(Options(*COLUMN_SELECTORS, "hck")),
    "fit_nystrom.solver": _entry(Options("direct", "pcg")),
    "fit_nystrom.precision": _entry(Options("double", "mixed", "auto")),
    "fit_nystrom.rcond": _entry(Real(0, 1, "left"),
                                "the jitter on W's diagonal relative to its trace, e.g. 1e-11"),
    "fit_meka.solver": _entry(Options("direct", "pcg")),
    # HCK and the independent kernel
    "jitter": _entry(Nothing() | Real(0, Bound("lam"), "left"),
                     "the diagonal added to each node's landmark block, below lam; None "
                     "chooses it"),
    "leaf_size": _entry(Nothing() | Integer(1)),
    "partition": _entry(Options("random", "pca")),
    # MEKA
    "n_clusters": _entry(Integer(1, Bound("n")), "the number of clusters, at most n"),
    "landmarks_per_cluster": _entry(Nothing() | Integer(1)),
    "kmeans_iter": _entry(Integer(1)),
    "kmeans_sample": _entry(Integer(1)),
    "oversample": _entry(Real(0), "rho = 2 is the paper's choice"),
    "link_rcond": _entry(Real(0, 1, "neither"),
                         "a fraction of the largest singular value of a link, e.g. 1e-2"),
    "threshold": _entry(Real(0), "a cutoff on the kernel's value between clusters"),
    "fraction.threshold": _entry(Real(0, 1), "with threshold_kind='fraction' it is a fraction "
                                             "of the cluster pairs; use "
                                             "threshold_kind='absolute' for a kernel-value "
                                             "cutoff"),
    "threshold_kind": _entry(Options("fraction", "absolute")),
    "rank_policy": _entry(Options("uniform", "proportional", "spectral")),
    "psd": _entry(Boolean()),
    # column selection
    "method": _entry(Options(*COLUMN_SELECTORS)),
    "init": _entry(Integer(0, Bound("r")), "the random columns oASIS starts from, at most r"),
    "refresh": _entry(Integer(0)),
    "select_columns.tol": _SELECTION_TOL,
    "rtol": _SELECTION_RTOL,
    "gather": _entry(Boolean()),
    # SLKL
    "nu": _entry(Real(0, None, "neither"),
                 "the l1 penalty on the weights (try 1e-4 to 1; larger gives fewer landmarks)"),
    "mu": _entry(Real(0, None, "neither"), "the one weight of every candidate's rank-1 kernel"),
    "step": _entry(Options("exact", "newton", "paper")),
    "kkt_tol": _entry(Nothing() | Real(0, None, "neither")),
    "precompute_columns": _entry(Boolean()),
    "fit_slkl.tol": _entry(Nothing() | Real(0, None, "neither"),
                           "use tol=None to stop on max_iter or kkt_tol only"),
    "fit_slkl.max_iter": _entry(Nothing() | Integer(1), "None: 200 times the candidates"),
    # GP-GRIEF
    "fit_grief.max_iter": _entry(Integer(0), "L-BFGS-B iterations of each type-II search"),
    "inference": _entry(Options("type2", "type1")),
    "w_prior": _entry(Options("kernel", "unit")),
    "optimize": _entry(Boolean()),
    "optimize_subset": _entry(Nothing() | Integer(2)),
    "init_subset": _entry(Integer(2)),
    "n_restarts": _entry(Integer(0)),
    "n_iter": _entry(Integer(1)),
    "burn_in": _entry(Integer(0, Bound("n_iter", "-", 1)),
                      "burn_in must leave some iterations to keep"),
    "thin": _entry(Integer(1, Bound("n_iter", "-", "burn_in")),
                   "MALA keeps every thin-th of the iterations after burn-in, so a larger thin "
                   "keeps no sample; lower thin or raise n_iter"),
    "signal_variance": _entry(Nothing() | Real(0, None, "neither")),
    "noise": _entry(Nothing() | Real(0, None, "neither")),
}

# Arguments checked by a function of their own (more than one rule: arrays, or a value turned
# into something else), by where that check lives.
CHECKED_ELSEWHERE = {
    "X": "hkern._validation.check_array", "y": "hkern._validation.check_targets",
    "Y": "hkern._validation.check_array", "B": "hkern._validation.check_rhs",
    "sigma": "hkern._validation.check_sigma (and 'auto'/'ard' in hkern.hyperparameters)",
    "kernel": "hkern.kernels.kernel_kind", "n_jobs": "hkern._threads.resolve_n_jobs",
    "max_memory": "hkern._memory.resolve_max_memory", "seed": "hkern._validation.check_seed",
    "comm": "hkern._mpi.check_comm", "dtype": "hkern.kernels._api (float32 or float64)",
    "validation": "hkern.solvers.trace.check_validation",
    "candidates": "hkern.slkl._candidates", "grid_inputs": "hkern.grief.api (an array)",
    "lengthscales": "hkern.grief.api (one number or one per feature)",
    "grid_size": "hkern.grief.api (an int or one per feature)",
    "landmarks": "hkern.oasis.landmarks.check_landmarks (a column selector or row indices)",
}


# Functions whose arguments mean what another function's do (oASIS is one column selection).
SAME_AS = {"oasis": "select_columns", "oasis_mpi": "select_columns"}


def rule_of(name, where=None):
    """(rule, hint) of argument ``name`` of function ``where`` (its own meaning first)."""
    where = SAME_AS.get(where, where)
    if where is not None and f"{where}.{name}" in PARAMETERS:
        return PARAMETERS[f"{where}.{name}"]
    return PARAMETERS[name]


def choices_of(name, where=None):
    """The strings argument ``name`` (of function ``where``) accepts, as its rule declares
    them: the one list the code and the messages share."""
    rule, _ = rule_of(name, where)
    return rule.choices


def check_parameter(name, value, where=None, **context):
    """``value`` of argument ``name`` (of function ``where``) checked against its declared rule
    and returned in its plain type (float, int, bool, str or None); a ValueError in the one
    wording otherwise.  ``context`` gives the bounds the rule names (``n``, ``lam``, ...).

    Examples
    --------
    >>> check_parameter("tol", 1e-3)
    0.001
    >>> check_parameter("tol", 1.0)
    Traceback (most recent call last):
    ...
    ValueError: tol must be a real number in (0, 1), got 1.0; the relative residual at \
which CG stops, e.g. 1e-3 (the default)
    """
    rule, hint = rule_of(name, where)
    return rule.check(value, name, hint, context)


def rules_markdown():
    """The table as the documentation shows it (doc/parameters.md is this text; a test keeps
    them equal): one row per argument, with what it accepts and the hint of its message."""
    rows = ["| argument | must be | hint |", "|---|---|---|"]
    for key in sorted(PARAMETERS, key=lambda k: (k.split(".")[-1], "." in k, k)):
        rule, hint = PARAMETERS[key]
        where, _, name = key.rpartition(".")
        if where:
            name += " (with threshold_kind='fraction')" if where == "fraction" else \
                f" (of {where})"
        rows.append(f"| `{name}` | {rule.describe(_ANY)} | {hint} |")
    rows += ["", "Checked by a function of their own:", ""]
    rows += [f"* `{name}`: {where}" for name, where in sorted(CHECKED_ELSEWHERE.items())]
    rows += ["", "The column selectors, one set of names for `select_columns(method=...)`, "
             "`fit_nystrom(landmarks=...)` and the Nystrom preconditioners of "
             "`fit_exact(preconditioner=...)`:", "", "| selector | how it chooses the columns |",
             "|---|---|"]
    rows += [f"| `{name}` | {how.replace('``', '`')} |"
             for name, how in COLUMN_SELECTORS.items()]
    return "\n".join(rows) + "\n"
