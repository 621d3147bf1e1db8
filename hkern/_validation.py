"""Input checks for every public function of hkern, in one place.

Everything a user passes is checked here, once, at the Python face; the compiled cores trust
their inputs.  Each problem raises a ``ValueError`` that names the argument and says how to fix
it.  Arrays that are merely in an inconvenient form (float32, integer, Fortran-ordered, strided)
are converted, never rejected.
"""
from __future__ import annotations

import gzip
import numbers
import os
import sys
import warnings

import numpy as np
from scipy import sparse

from ._parameters import Boolean, Integer, Options, Real, check_parameter

__all__ = [
    "check_array", "check_targets", "check_rhs", "check_X_y", "check_n_features", "check_positive",
    "check_nonnegative", "check_underflow", "check_sigma", "scale_inputs", "SIGMA_DOC",
    "document_sigma", "check_rank", "check_int", "check_seed",
    "check_choice", "check_bool", "read_csv",
]



# hkern's own source folder: warn_user's frames inside it are not the user's.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message, category):
    """``warnings.warn`` pointing at the user's line: the first caller outside hkern, however
    many of hkern's functions and decorators lie between (a fixed ``stacklevel`` points into
    whichever decorator happens to be innermost)."""
    frame, level = sys._getframe(1), 2      # stacklevel 2: warn_user's caller
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def _describe_nonfinite(arr, name):
    bad = ~np.isfinite(arr)
    first = np.unravel_index(np.argmax(bad), arr.shape)
    what = "NaN" if np.isnan(arr[first]) else "infinity"
    where = ", ".join(str(int(i)) for i in first)
    return (f"{name} contains {what} (first at index [{where}], {int(bad.sum())} non-finite "
            f"value(s) in all); remove or impute the non-finite values and call again")


# Largest accepted magnitude of an input or target value.  Squared norms and distances of
# larger values overflow double precision (1e150^2 = 1e300, 1.8e308 is the largest double), and
# every kernel depends only on X / sigma, so the fix for larger data is a common rescaling.
MAX_MAGNITUDE = 1e150


def _describe_too_large(arr, name, fix):
    big = np.abs(arr) > MAX_MAGNITUDE
    first = np.unravel_index(np.argmax(big), arr.shape)
    where = ", ".join(str(int(i)) for i in first)
    return (f"{name} has values up to {float(np.abs(arr).max()):.3g} in magnitude (first at index "
            f"[{where}]); hkern accepts |values| <= {MAX_MAGNITUDE:g}, beyond which squared "
            f"distances overflow double precision: {fix}")


def _check_values(arr, name, fix):
    """NaN/inf and the magnitude bound, by two reductions: no temporary the size of ``arr``
    (an explicit n x n kernel matrix passes through here)."""
    if arr.size == 0:
        return
    hi, lo = arr.max(), arr.min()          # NaN propagates through max/min
    if not (np.isfinite(hi) and np.isfinite(lo)):
        raise ValueError(_describe_nonfinite(arr, name))
    if max(float(hi), -float(lo)) > MAX_MAGNITUDE:    # float(): no cast of 1e150 to float32
        raise ValueError(_describe_too_large(arr, name, fix))


def _as_float_array(value, name, dtype=np.float64):
    if sparse.issparse(value):
        n, d = value.shape
        raise ValueError(
            f"{name} is a scipy.sparse matrix (shape {value.shape}, {value.nnz} stored entries); "
            "hkern's kernels read dense rows: pass "
            f"{name}.toarray() (a dense copy of {8 * n * d / 2**30:.3g} GiB), or reduce the "
            "features to a few hundred dense ones first (sklearn.decomposition.TruncatedSVD)")
    if np.iscomplexobj(value):
        raise ValueError(f"{name} has a complex dtype; hkern needs real numbers")
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers; it could not be converted "
                         f"to {np.dtype(dtype).name} ({exc})") from None
    return arr


def _reads_as_float32(X):
    """NumPy reads ``X`` as a float32 array (without converting a list or an integer array)."""
    dtype = getattr(X, "dtype", None)
    if dtype is None and hasattr(X, "dtypes"):          # a DataFrame: every column float32
        dtypes = set(map(str, X.dtypes))
        return dtypes == {"float32"}
    return dtype == np.float32


def check_array(X, name="X", *, ensure_2d=True, min_samples=1, dtype=np.float64,
                keep_float32=False):
    """Return ``X`` as a C-contiguous float64 (or ``dtype``) array after checking it.

    Parameters
    ----------
    X : array_like
        The input.  float32, integer, boolean, Fortran-ordered and strided arrays are converted.
    name : str
        The argument's name, used in error messages.
    ensure_2d : bool
        Require a 2-D array of shape (n_samples, n_features).
    min_samples : int
        Smallest acceptable number of rows.
    dtype : numpy dtype
        float64 (default), or float32 for the single-precision kernel engine: pass it only for
        input that is float32 already (a float64 array would be rounded before its magnitude
        is checked).
    keep_float32 : bool
        Return a float32 array (a NumPy array, or anything NumPy reads as one, such as a
        DataFrame of float32 columns) as float32 instead of widening it, for callers that widen
        it only where float64 arithmetic reads it (:func:`hkern._model.prepare_fit`): every
        float32 value is exactly a float64 one, so the results are those of the float64 copy,
        without the copy.

    Raises
    ------
    ValueError
        For a complex or non-numeric dtype, the wrong number of dimensions, too few samples,
        zero features, NaN/infinite values, or values above ``MAX_MAGNITUDE`` (1e150) in
        magnitude.
    """
    if keep_float32 and _reads_as_float32(X):
        dtype = np.float32
    arr = _as_float_array(X, name, dtype)
    if ensure_2d:
        if arr.ndim == 1:
            raise ValueError(
                f"{name} must be 2-D with shape (n_samples, n_features); got a 1-D array of shape "
                f"{arr.shape}. Use {name}.reshape(-1, 1) for one feature or {name}.reshape(1, -1) "
                "for one sample")
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D with shape (n_samples, n_features); got "
                             f"{arr.ndim} dimension(s), shape {arr.shape}")
        if arr.shape[1] == 0:
            raise ValueError(f"{name} has 0 features (shape {arr.shape}); at least 1 is required")
    if arr.shape[0] < min_samples:
        raise ValueError(f"{name} has {arr.shape[0]} sample(s) (shape {arr.shape}); at least "
                         f"{min_samples} required")
    _check_values(arr, name, f"divide {name} by a common factor (and sigma by the same factor: "
                  "the kernels depend on X / sigma only), or standardise it")
    return np.ascontiguousarray(arr)


def _is_missing_label(value):
    """None, NaN/inf floats, and pandas' NA / NaT markers (matched by type name: no import)."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return not np.isfinite(value)
    return type(value).__name__ in ("NAType", "NaTType")


def check_targets(y, n_samples, name="y", *, numeric=True, x_name="X"):
    """Check a target vector (n,) or matrix (n, n_outputs) against ``n_samples`` rows (of the
    inputs called ``x_name`` in the messages).

    With ``numeric=False`` (class labels) the values are returned as a 1-D array of any dtype.
    """
    if numeric:
        arr = _as_float_array(y, name)
    else:
        arr = np.asarray(y)
    if arr.ndim == 0 or arr.ndim > 2 or (not numeric and arr.ndim != 1):
        expected = "(n_samples,)" if not numeric else "(n_samples,) or (n_samples, n_outputs)"
        raise ValueError(f"{name} must have shape {expected}; got shape {arr.shape}")
    if arr.shape[0] != n_samples:
        raise ValueError(f"{name} has {arr.shape[0]} rows but {x_name} has {n_samples} samples; "
                         "they must have the same length")
    if arr.ndim == 2 and arr.shape[1] == 0:
        raise ValueError(f"{name} has 0 outputs (shape {arr.shape})")
    if numeric:
        _check_values(arr, name, f"divide {name} by a common factor and multiply the predictions "
                      "by it")
    if not numeric and arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError(_describe_nonfinite(arr, name))
    if not numeric and arr.dtype.kind == "O":
        missing = np.array([_is_missing_label(v) for v in arr], dtype=bool)
        if missing.any():
            first = int(np.argmax(missing))
            raise ValueError(f"{name} contains a missing label ({arr[first]!r} first at index "
                             f"[{first}], {int(missing.sum())} in all); remove those samples or "
                             "give them a label")
    return np.ascontiguousarray(arr)


def check_rhs(B, n_rows, name="B", *, dtype=np.float64):
    """A right-hand side (n_rows,) or (n_rows, k) for a matvec or solve: C-contiguous float64
    (or ``dtype``, as in :func:`check_array`).

    Complex values are refused (not cast, which would drop the imaginary part); NaN/inf and
    values above ``MAX_MAGNITUDE`` are refused as for inputs.
    """
    arr = _as_float_array(B, name, dtype)
    if arr.ndim not in (1, 2) or arr.shape[0] != n_rows:
        raise ValueError(f"{name} must have shape ({n_rows},) or ({n_rows}, k); got {arr.shape}")
    _check_values(arr, name, f"divide {name} by a common factor and multiply the result by it")
    return np.ascontiguousarray(arr)


def check_X_y(X, y, *, numeric_y=True):
    """Check training inputs and targets together; returns converted copies."""
    X = check_array(X, "X")
    y = check_targets(y, X.shape[0], "y", numeric=numeric_y)
    return X, y


def check_n_features(X, n_features, name="X"):
    """Check prediction inputs against the number of features seen at fit time."""
    X = check_array(X, name)
    if X.shape[1] != n_features:
        raise ValueError(f"{name} has {X.shape[1]} features, but the model was fitted with "
                         f"{n_features} features")
    return X


def check_positive(value, name, hint=""):
    """A finite float > 0 (the wording of :mod:`hkern._parameters`)."""
    return Real(0, None, "neither").check(value, name, hint)


def check_underflow(bandwidth, *arrays):
    """The data a kernel of ``bandwidth`` will scale, checked against it; the bandwidth itself
    is :func:`check_sigma`'s, which checked it (the one check of sigma).

    Every bandwidth > 0 is computed correctly for data within the magnitude bound, with one
    exception this refuses: data whose largest magnitude is below 1e-152 together with a
    bandwidth small enough that their ratio matters.  Squared norms of such data underflow
    double precision (from about 1e-154), so distances would read as 0 while
    ||x - y|| / sigma is not negligible.
    """
    largest = max((max(float(a.max()), -float(a.min())) for a in arrays if a.size), default=0.0)
    if 0.0 < largest < 1e-152 and largest / bandwidth > 1e-8:
        raise ValueError(
            f"the data's largest magnitude is {largest:.3g} with sigma={bandwidth:.3g}: squared "
            "distances of values below 1e-152 underflow double precision. The kernels depend on "
            "X / sigma only: multiply X and sigma by a common factor (e.g. 1e150)")


# The one wording of ``sigma`` in the numpydoc of every public function that takes it.
SIGMA_DOC = """sigma : float or array_like of shape (d,)
        Kernel bandwidth (lengthscale), > 0; or one lengthscale per feature (ARD), all finite
        and > 0: the kernel is then the isotropic one with bandwidth 1 on ``X / sigma``."""


def document_sigma(func):
    """Decorator: the line ``{sigma}`` of ``func``'s docstring becomes :data:`SIGMA_DOC` (put it
    below ``@budgeted``, which copies the docstring)."""
    if func.__doc__:
        func.__doc__ = func.__doc__.replace("{sigma}", SIGMA_DOC)
    return func


def check_sigma(sigma, n_features):
    """The kernel's lengthscales: ``(bandwidth, lengthscales)``.

    A scalar ``sigma`` is the isotropic bandwidth, checked as by :func:`check_positive`, and
    comes back as ``(sigma, None)``.  A 1-D array of ``n_features`` finite values > 0 is one
    lengthscale per feature (automatic relevance determination): k(x, z) is the isotropic kernel
    with bandwidth 1 at ``x / sigma, z / sigma``, so it comes back as ``(1.0, lengthscales)``
    and the inputs are divided by the lengthscales once (:func:`scale_inputs`) before any kernel
    is evaluated.  Anything else (strings, other shapes) is refused with a ValueError.
    """
    accepted = (f"sigma must be a real number > 0 (one bandwidth for every feature) or a 1-D "
                f"array of {n_features} lengthscales > 0 (one per feature of X)")
    if isinstance(sigma, (str, bytes)):
        raise ValueError(f"{accepted}; got the string {sigma!r}")
    if isinstance(sigma, np.ndarray) and sigma.ndim == 0:
        sigma = sigma[()]
    if not isinstance(sigma, (np.ndarray, list, tuple)):
        if isinstance(sigma, (numbers.Real, np.number, np.bool_)):
            return check_positive(sigma, "sigma", "the kernel bandwidth must be positive"), None
        raise ValueError(f"{accepted}; got {sigma!r}")
    arr = _as_float_array(sigma, "sigma")
    if arr.ndim != 1 or arr.shape[0] != n_features:
        raise ValueError(f"{accepted}; got an array of shape {arr.shape} (X has {n_features} "
                         f"feature(s)). Pass a scalar, or an array of shape ({n_features},)")
    if not np.isfinite(arr).all():
        bad = int(np.argmax(~np.isfinite(arr)))
        raise ValueError(f"sigma's lengthscales must be finite; sigma[{bad}] = {arr[bad]}. An "
                         "infinite lengthscale ignores its feature (GRIEF reports one for a "
                         "constant column): drop that column from X instead")
    if not (arr > 0).all():
        bad = int(np.argmax(~(arr > 0)))
        raise ValueError(f"sigma's lengthscales must be > 0; sigma[{bad}] = {arr[bad]}. A "
                         "feature that should not matter needs a large lengthscale, not 0")
    arr = arr.copy()        # the caller's array may change after the fit: keep our own
    arr.flags.writeable = False
    return 1.0, arr


def scale_inputs(X, lengthscales, name="X"):
    """``X / lengthscales`` as a C-contiguous float64 array, or ``X`` itself when they are None
    (widened to float64 if it is float32: the engine's float64 input either way).

    The scalar path returns the very array it was given (no division by ones), so results
    with a scalar sigma are bitwise those of a build without lengthscales.  Scaled values
    are checked against the magnitude bound (a tiny lengthscale can push them over it).
    """
    if lengthscales is None:
        return np.ascontiguousarray(X, dtype=np.float64)
    # In float64 whatever X's type (float32 X / float64 lengthscales is float64 in NumPy, but
    # float32 lengthscales would keep it float32): the scaled copy is what the engine reads.
    scaled = np.ascontiguousarray(np.divide(X, lengthscales, dtype=np.float64))
    _check_values(scaled, f"{name} / sigma",
                  "the lengthscales in sigma are too small for these inputs: rescale X or "
                  "choose larger lengthscales")
    return scaled


def check_nonnegative(value, name, hint=""):
    """A finite float >= 0."""
    return Real(0).check(value, name, hint)


def check_int(value, name, *, low=None, high=None, hint=""):
    """An integer in [low, high] (either bound may be None)."""
    return Integer(low, high).check(value, name, hint)


def check_rank(r, n_samples, name="r", *, largest=None, what=None):
    """A rank / number of landmarks / features: an integer >= 1, reduced with a warning to
    ``largest`` (default ``n_samples``) when above it, as scikit-learn's ``Nystroem`` reduces
    ``n_components`` (a default r of 256 or 1024 then works on a small data set, and in
    scikit-learn's checks).  ``what`` names the bound in the warning."""
    r = check_parameter(name, r)
    largest = n_samples if largest is None else largest
    if r > largest:
        bound = what or f"the number of training samples n={n_samples}"
        warn_user(f"{name}={r} is larger than {bound}; using {name}={largest}", UserWarning)
        return largest
    return r


def check_row_indices(indices, n_samples, name):
    """A non-empty 1-D array of distinct integer row indices into n_samples rows, sorted (intp)."""
    idx = np.asarray(indices)
    if idx.ndim != 1 or idx.size == 0 or idx.dtype.kind not in "iu":
        raise ValueError(f"{name} must be a non-empty 1-D array of integer row indices of X; "
                         f"got {idx.dtype} array of shape {idx.shape}")
    if idx.min() < 0 or idx.max() >= n_samples:
        raise ValueError(f"{name} must index rows of X: values in [0, {n_samples}), got "
                         f"[{idx.min()}, {idx.max()}]")
    if len(np.unique(idx)) != len(idx):
        raise ValueError(f"{name} contains repeated indices; each row may appear once")
    return np.sort(idx).astype(np.intp)


def check_seed(seed, name="seed"):
    """A ``numpy.random.Generator`` from None, an int, or a Generator (used as is)."""
    if seed is None:
        return np.random.default_rng()
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (numbers.Integral, np.integer)) and not isinstance(seed, bool):
        if seed < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {seed}")
        return np.random.default_rng(int(seed))
    raise ValueError(f"{name} must be None, a non-negative int or a numpy.random.Generator, "
                     f"got {seed!r}")


def check_bool(value, name):
    """True or False (numpy booleans included); anything else is refused, not truth-tested
    (``"no"`` would be true)."""
    return Boolean().check(value, name)


def check_choice(value, name, choices):
    """One of a fixed set of strings."""
    return Options(*choices).check(value, name)


# One set of solver names for every fit: "direct" factorises, "pcg" iterates (conjugate
# gradients, preconditioned where the method has a preconditioner), "auto" lets the fit
# choose.  fit_exact called "direct" "cholesky" and fit_meka called "pcg" "cg": those former
# names are still accepted by those fits, with a FutureWarning.


def check_solver(solver, where, former=None):
    """``solver`` of the fit ``where`` checked against its declared choices
    (:mod:`hkern._parameters`); a ``former`` name ({old: new}) is replaced by today's with a
    FutureWarning."""
    if former and isinstance(solver, str) and solver in former:
        new = former[solver]
        warn_user(f"solver={solver!r} is now called solver={new!r} (one set of solver names for "
                  "every fit: 'direct', 'pcg', 'auto'); the old name will be removed",
                  FutureWarning)
        return new
    return check_parameter("solver", solver, where)


def read_csv(path):
    """A comma-separated numeric file (``.gz`` read through gzip) as a 2-D float array, or a
    ValueError naming the file and the first bad line.

    numpy.loadtxt reads it when the file is well formed; when it fails, its message counts rows
    of data (not lines of the file) and does not name the file ("the number of columns changed
    from 9 to 8 at row 5"), so the file is scanned once more, line by line, for the first line
    whose number of values differs from the first data line's or holding a value that is not a
    number.  Blank lines and lines starting with '#' are skipped, as loadtxt skips them.
    """
    try:
        return np.loadtxt(path, delimiter=",", ndmin=2)
    except ValueError as exc:
        problem = _first_bad_csv_line(path)
        raise ValueError(f"{path}: {problem or exc}") from None


def _first_bad_csv_line(path):
    """Where a comma-separated numeric file goes wrong, as a message, or None."""
    opener = gzip.open if str(path).endswith(".gz") else open
    width = first = None
    with opener(path, "rt") as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            fields = text.split(",")
            if width is None:
                width, first = len(fields), lineno
            elif len(fields) != width:
                return (f"line {lineno} has {len(fields)} comma-separated values but line "
                        f"{first} has {width}; every row needs the same number of values")
            for column, field in enumerate(fields, start=1):
                try:
                    float(field)
                except ValueError:
                    return (f"line {lineno}, value {column}: {field.strip()!r} is not a number; "
                            "every value must be a number")
    return None
