"""The docstring sections every estimator shares, written once.

Each estimator's own docstring holds its summary, its Examples and what else is its own (a
transformer's fitted arrays under Attributes); :func:`documented` adds the Parameters section
(its function's parameters, ``random_state`` and ``n_jobs``) and the shared Attributes
(``model_``, ``classes_``, ``n_features_in_``, ``feature_names_in_``).  The method-specific
words come from the class: ``_fit_function`` and its ``_doc`` dictionary (``model``: the
fitted model's class, ``draws``: what ``random_state`` drives, ``size``: a note on the
parameters, ``attributes``: further fitted attributes, ``function``: the function named, for
a transformer that calls none).
"""
from __future__ import annotations

import inspect
import textwrap

__all__ = ["documented"]

_PARAMETERS = """\
Parameters
----------
{names}
{description}
"""
_RANDOM_STATE = """\
random_state : int, RandomState instance or None, default=None
{description}
"""
_N_JOBS = """\
n_jobs : int or None, default=None
    Threads; None: the CPUs available (not one, as in scikit-learn).  Results are
    identical for any value.
"""
_ATTRIBUTES = """\
Attributes
----------
{model}{classes}{attributes}n_features_in_ : int
    Number of features seen in fit.
feature_names_in_ : ndarray of str
    Column names seen in fit, when X had string column names.
"""
_MODEL = """\
model_ : {model}
    The fitted model, what :func:`hkern.{function}` returns.
"""
_SELECTED = """\
sigma_ : float or ndarray (n_features,)
    The bandwidth or lengthscales of the fit (the ones ``sigma="auto"`` or ``"ard"`` chose).
lam_ : float
    The ridge of the fit (the one ``lam="auto"`` chose).
selection_ : hkern.HyperparameterSelection or None
    How they were chosen; None when both were given.
"""
_CLASSES = """\
classes_ : ndarray (n_classes,)
    The sorted class labels, the column order of ``decision_function`` and
    ``predict_proba`` (the scores mapped to probabilities by ``model_.calibration_``, fitted
    on out-of-fold scores of the training rows).
"""


def _entry(text):
    """A parameter's description, indented and wrapped as numpydoc writes it."""
    return textwrap.fill(text, width=92, initial_indent="    ", subsequent_indent="    ")


def _split(doc):
    """(text before the first section, {section title: its body})."""
    lines = inspect.cleandoc(doc).splitlines()
    starts = [i for i in range(len(lines) - 1)
              if lines[i].strip() and set(lines[i + 1].strip()) == {"-"}
              and len(lines[i + 1].strip()) == len(lines[i].strip())]
    head = "\n".join(lines[:starts[0]] if starts else lines).rstrip()
    sections = {}
    for k, i in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        sections[lines[i].strip()] = "\n".join(lines[i + 2:end]).strip("\n") + "\n"
    return head, sections


def _parameters(cls, doc, function):
    parameters = inspect.signature(cls).parameters
    names = [n for n in parameters if n not in ("random_state", "n_jobs")]
    size = f": {doc['size']}" if doc.get("size") else ""
    text = _PARAMETERS.format(names=", ".join(names), description=_entry(
        f"As in :func:`hkern.{function}` (same names and defaults){size}."))
    if "random_state" in parameters:
        text += _RANDOM_STATE.format(description=_entry(
            f"{doc['draws']}.  An int is the function's ``seed``; None (numpy's global state) "
            "and a RandomState give a seed drawn from them."))
    return text + _N_JOBS


def documented(cls):
    """Class decorator: the shared numpydoc sections, put into ``cls.__doc__``.

    Parameters and Attributes come first after the summary; the class's own Attributes
    entries (a transformer's fitted arrays) go between the shared ones, its other sections
    (See Also, Examples) follow.
    """
    doc = cls._doc
    function = doc.get("function", getattr(cls._fit_function, "__name__", None))
    head, sections = _split(cls.__doc__)
    model = _MODEL.format(model=doc["model"], function=function) if "model" in doc else ""
    classes = _CLASSES if hasattr(cls, "decision_function") else ""
    selected = _SELECTED if "model" in doc and function != "fit_grief" else ""
    attributes = selected + doc.get("attributes", "") + sections.pop("Attributes", "")
    parts = [head, _parameters(cls, doc, function),
             _ATTRIBUTES.format(model=model, classes=classes, attributes=attributes)]
    parts += [f"{title}\n{'-' * len(title)}\n{body}" for title, body in sections.items()]
    cls.__doc__ = "\n\n".join(part.rstrip("\n") for part in parts) + "\n"
    return cls
