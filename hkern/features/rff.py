"""The random Fourier feature map z(x) = sqrt(2/r) cos(Omega x + b) (Rahimi and Recht), which
the model, its fit and the scikit-learn transformer evaluate, and the check that its phases
stay finite."""
from __future__ import annotations

import numpy as np

from .. import _linalg

__all__ = ["check_phases", "rff_features"]


def rff_features(X, frequencies, offsets, n_threads):
    """z(X) = sqrt(2 / r) cos(X Omega^T + b), (m, r), for the rows of X (m, d).

    Call :func:`check_phases` first: phases that overflow would give NaN features.
    """
    features = _linalg.matmul(X, frequencies, trans_b=True, n_threads=n_threads)
    features += offsets                     # the phases, turned into features in place
    np.cos(features, out=features)
    features *= np.sqrt(2.0 / frequencies.shape[0])
    return features


def check_phases(X, frequencies):
    """Refuse when |Omega x| can overflow (fit or predict): the cosines would be NaN.

    Phases far beyond 2 pi are valid (the features decorrelate, as the kernel does at such
    sigma); only an infinite phase is not.  |omega . x| <= max|x| * ||omega||_1.
    """
    # max |x| from X's largest and smallest entries: no n x d temporary (X may be a memory map)
    largest = max(abs(float(X.max(initial=0.0))), abs(float(X.min(initial=0.0))))
    with np.errstate(over="ignore"):
        bound = largest * np.abs(frequencies).sum(axis=1).max(initial=0.0)
    if not np.isfinite(bound) or bound > 1e300:
        raise ValueError(
            "sigma is too small next to X for random Fourier features: the phases Omega x "
            "overflow double precision; increase sigma or divide X (and sigma) by a common "
            "factor")
