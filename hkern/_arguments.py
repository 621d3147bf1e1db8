"""One binding of a public call's arguments, shared by the decorators around a fit.

A fit such as ``fit_hierarchical`` sits under three decorators (MPI shards, hyperparameter
selection, thread budget), and each needs the call's arguments by name.  The outermost binds
the user's call once (:func:`call_arguments`) and calls the next layer with every argument by
keyword; each inner layer recognises such a complete call and reads it as it is, without
binding again.
"""
from __future__ import annotations

__all__ = ["call_arguments"]


def call_arguments(signature, args, kwargs):
    """The call's arguments by name, defaults applied, as a dict.

    A call that already names every parameter of ``signature`` by keyword (an outer
    decorator's) is taken as it is; any other call is bound to ``signature`` (a TypeError for
    a call the function would refuse).

    Examples
    --------
    >>> import inspect
    >>> def fit(X, y, r=8, *, lam=0.1):
    ...     pass
    >>> call_arguments(inspect.signature(fit), (1, 2), {"lam": 1.0})
    {'X': 1, 'y': 2, 'r': 8, 'lam': 1.0}
    """
    if not args and kwargs.keys() == signature.parameters.keys():
        return kwargs
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)
