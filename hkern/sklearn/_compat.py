"""What differs between the scikit-learn versions hkern supports (1.3 to the current one).

scikit-learn 1.6 replaced the estimator method ``_validate_data`` by the function
``sklearn.utils.validation.validate_data`` and the ``_more_tags`` dictionaries by the
``__sklearn_tags__`` dataclasses.  The estimators call :func:`validate_data` below and define
both tag methods (each version reads its own).
"""
from __future__ import annotations

try:
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:        # scikit-learn < 1.6: the same checks as an estimator method
    _validate_data = None

__all__ = ["validate_data"]


def validate_data(estimator, X="no_validation", y="no_validation", **check_params):
    """scikit-learn's input validation for ``estimator``: checks X (and y), converts them to
    arrays, and sets (``reset=True``) or checks ``n_features_in_`` and ``feature_names_in_``."""
    if _validate_data is None:
        return estimator._validate_data(X, y, **check_params)
    return _validate_data(estimator, X, y, **check_params)
