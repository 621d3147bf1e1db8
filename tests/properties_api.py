"""Property-based tests over hkern's public API (issue 16, "keep it fixed").

Random shapes, dtypes, layouts, magnitudes (1e-150..1e150), duplicated rows, constant columns,
read-only and non-contiguous inputs and extreme bandwidths: every call either returns finite
results of the right shape or raises ValueError (hkern.MemoryLimitError is one); never another
exception type, never a crash.

Run by tests/test_properties.py in a separate interpreter (so a crash is reported as a failing
test with its output, not the end of the test run); run directly with
``pytest tests/properties_api.py``.  ``HKERN_HYPOTHESIS_EXAMPLES`` sets the number of examples
per property (default 100, about a minute; use thousands for a deeper search).
"""
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import KERNELS

import hkern

EXAMPLES = int(os.environ.get("HKERN_HYPOTHESIS_EXAMPLES", "100"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------

@st.composite
def arrays(draw, n=None, d=None, min_n=1, max_n=24, max_d=4):
    """X (n, d) with a random magnitude, dtype, layout, duplicates and constant columns."""
    n = draw(st.integers(min_n, max_n)) if n is None else n
    d = draw(st.integers(1, max_d)) if d is None else d
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    exponent = draw(st.sampled_from([0, 0, 0, -150, -100, -20, 20, 100, 149]))
    X = rng.normal(size=(n, d)) * 10.0 ** exponent
    if draw(st.booleans()):
        X += draw(st.sampled_from([0.0, 1e3, -1e6])) * 10.0 ** exponent   # far from the origin
    if n > 1 and draw(st.booleans()):
        X[rng.integers(0, n, size=max(1, n // 3))] = X[0]                   # duplicated rows
    if draw(st.booleans()):
        X[:, rng.integers(0, d)] = draw(st.sampled_from([0.0, 1.0, -7.5]))  # a constant column
    return convert(draw, X)


def convert(draw, X):
    """The same values in an awkward but valid form."""
    form = draw(st.sampled_from(["c", "fortran", "strided", "read-only", "float32", "list"]))
    if form == "fortran":
        return np.asfortranarray(X)
    if form == "strided":
        wide = np.repeat(X, 2, axis=-1) if X.ndim == 2 else np.repeat(X, 2)
        return wide[:, ::2] if X.ndim == 2 else wide[::2]
    if form == "read-only":
        X = X.copy()
        X.flags.writeable = False
        return X
    if form == "float32":
        with np.errstate(over="ignore", under="ignore"):
            X32 = X.astype(np.float32)
        return X32 if np.isfinite(X32).all() else X
    if form == "list":
        return X.tolist()
    return X


@st.composite
def targets(draw, n, task="regression"):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if task == "classification":
        n_classes = draw(st.integers(2, 3))
        labels = np.array(["a", "b", "c"][:n_classes])
        y = labels[np.arange(n) % n_classes]     # every class present
        return y[rng.permutation(n)]
    scale = 10.0 ** draw(st.sampled_from([0, 0, -150, -50, 50, 149]))
    y = rng.normal(size=n) * scale
    if draw(st.booleans()):
        y[:] = y[0]                              # constant targets
    return convert(draw, y)


sigmas = st.sampled_from([1.0, 0.3, 3.0, 1e-300, 1e-150, 1e-20, 1e20, 1e150, 1e300])
small_sigmas = st.sampled_from([1.0, 0.5, 2.0, 1e-150, 1e150])
lams = st.sampled_from([1e-2, 1.0, 1e-8, 1e3])
kernels = st.sampled_from(KERNELS)
n_jobs = st.sampled_from([1, 2, None, -1])


# ---------------------------------------------------------------------------------------------
# The contract
# ---------------------------------------------------------------------------------------------

def returns_or_refuses(fn, *args, **kwargs):
    """fn's result, or None when it raised ValueError; any other exception fails the test.

    Numerical warnings are errors here: a RuntimeWarning (overflow, invalid value) or a
    ComplexWarning is a silent wrong result waiting to happen.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        try:
            return fn(*args, **kwargs)
        except ValueError:
            return None


def assert_finite(a, shape=None):
    a = np.asarray(a)
    if a.dtype.kind in "fc":
        assert np.isfinite(a).all(), f"non-finite values in a result of shape {a.shape}"
    if shape is not None:
        assert a.shape == shape, f"shape {a.shape}, expected {shape}"


def n_rows(X):
    return len(X)


def check_predictions(model, X, y_shape_tail=(), task="regression"):
    """predict (and decision_function) on the training inputs: finite, of the right shape."""
    pred = returns_or_refuses(model.predict, X)
    if pred is None:
        raise AssertionError("predict refused the training inputs the model was fitted on")
    if task == "classification":
        assert pred.shape == (n_rows(X),)
        assert set(np.asarray(pred).tolist()) <= set(model.classes_.tolist())
    else:
        assert_finite(pred, (n_rows(X),) + y_shape_tail)
    return pred


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), kernel=kernels, sigma=sigmas, jobs=n_jobs)
def test_kernel_matrix(data, kernel, sigma, jobs):
    X = data.draw(arrays())
    Y = data.draw(arrays(d=np.asarray(X).shape[1]))
    K = returns_or_refuses(hkern.kernel_matrix, X, Y, kernel=kernel, sigma=sigma, n_jobs=jobs)
    if K is not None:
        assert_finite(K, (n_rows(X), n_rows(Y)))
        # At most a few roundings above 1; float32 roundings when X and Y both came as float32
        # (the single-precision engine).
        above = 1e-12 if K.dtype == np.float64 else 4 * np.finfo(np.float32).eps
        assert (K >= 0).all() and (K <= 1 + above).all()
    Kxx = returns_or_refuses(hkern.kernel_matrix, X, kernel=kernel, sigma=sigma)
    if Kxx is not None:
        np.testing.assert_array_equal(np.diag(Kxx), 1.0)


@SETTINGS
@given(data=st.data(), kernel=kernels, sigma=sigmas, k=st.integers(0, 3))
def test_kernel_matvec(data, kernel, sigma, k):
    X = data.draw(arrays())
    Y = data.draw(arrays(d=np.asarray(X).shape[1]))
    B = data.draw(targets(n_rows(Y)))
    if k:
        B = np.column_stack([np.asarray(B)] * k)
    out = returns_or_refuses(hkern.kernel_matvec, X, Y, B, kernel=kernel, sigma=sigma)
    if out is not None:
        assert_finite(out, (n_rows(X),) + np.asarray(B).shape[1:])


# ---------------------------------------------------------------------------------------------
# Fits with a size argument r (landmarks, features, leaf size)
# ---------------------------------------------------------------------------------------------

def _fit_exact(X, y, r, **kw):
    return hkern.fit_exact(X, y, **kw)


def _fit_nystrom(method):
    def fit(X, y, r, seed, **kw):
        return hkern.fit_nystrom(X, y, r=r, landmarks=method, seed=seed, **kw)
    return fit


def _fit_rff(X, y, r, seed, **kw):
    return hkern.fit_rff(X, y, r=r, seed=seed, **kw)


def _fit_hck(X, y, r, seed, **kw):
    return hkern.fit_hierarchical(X, y, r=r, seed=seed, **kw)


def _fit_independent(X, y, r, seed, **kw):
    return hkern.fit_independent(X, y, r=r, seed=seed, **kw)


def _fit_meka(X, y, r, seed, **kw):
    return hkern.fit_meka(X, y, r, n_clusters=min(2, n_rows(X)), seed=seed, **kw)


def _fit_slkl(X, y, r, seed, **kw):
    return hkern.fit_slkl(X, y, r=r, nu=1e-2, seed=seed, max_iter=200, **kw)


def _fit_slkl_unif(X, y, r, seed, **kw):
    return hkern.fit_slkl_unif(X, y, r=r, seed=seed, **kw)


def _fit_slkl_krrm(X, y, r, seed, **kw):
    return hkern.fit_slkl_krrm(X, y, r=r, seed=seed, **kw)


RIDGE_FITS = {
    "exact": lambda X, y, r, seed, **kw: _fit_exact(X, y, r, **kw),
    "nystrom_uniform": _fit_nystrom("uniform"),
    "nystrom_oasis": _fit_nystrom("oasis"),
    "nystrom_greedy": _fit_nystrom("greedy"),
    "nystrom_rpcholesky": _fit_nystrom("rpcholesky"),
    "rff": _fit_rff,
    "hierarchical": _fit_hck,
    "independent": _fit_independent,
    "meka": _fit_meka,
    "slkl": _fit_slkl,
    "slkl_unif": _fit_slkl_unif,
    "slkl_krrm": _fit_slkl_krrm,
}
# RFF has no spectral sampler for the inverse multiquadric; that refusal is a ValueError too.


@pytest.mark.parametrize("name", sorted(RIDGE_FITS))
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_fit(name, task):
    @SETTINGS
    @given(data=st.data(), kernel=kernels, sigma=sigmas, lam=lams, jobs=n_jobs,
           r=st.integers(1, 12), seed=st.integers(0, 2**31))
    def prop(data, kernel, sigma, lam, jobs, r, seed):
        X = data.draw(arrays(min_n=2 if task == "classification" else 1))
        y = data.draw(targets(n_rows(X), task))
        kw = dict(kernel=kernel, sigma=sigma, lam=lam, task=task, n_jobs=jobs)
        model = returns_or_refuses(RIDGE_FITS[name], X, y, r, seed, **kw)
        if model is None:
            return
        check_predictions(model, X, task=task)
        X_new = data.draw(arrays(d=np.asarray(X).shape[1]))
        pred = returns_or_refuses(model.predict, X_new)
        if pred is not None and task == "regression":
            assert_finite(pred, (n_rows(X_new),))

    prop()


# ---------------------------------------------------------------------------------------------
# HCK's operators, column selection, MEKA, GRIEF
# ---------------------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), kernel=kernels, sigma=small_sigmas, lam=lams, r=st.integers(1, 8),
       k=st.integers(0, 2), seed=st.integers(0, 2**31))
def test_hierarchical_operators(data, kernel, sigma, lam, r, k, seed):
    X = data.draw(arrays(min_n=3))
    y = data.draw(targets(n_rows(X)))
    model = returns_or_refuses(hkern.fit_hierarchical, X, y, r=r, kernel=kernel, sigma=sigma,
                               lam=lam, seed=seed)
    if model is None:
        return
    B = data.draw(targets(n_rows(X)))
    if k:
        B = np.column_stack([np.asarray(B)] * k)
    shape = np.asarray(B).shape
    for method in (model.matvec, model.solve):
        out = returns_or_refuses(method, B)
        if out is not None:
            assert_finite(out, shape)
    assert np.isfinite(model.logdet())
    lml = returns_or_refuses(model.log_marginal_likelihood, y)
    assert lml is None or np.isfinite(lml)


@SETTINGS
@given(data=st.data(), kernel=kernels, sigma=sigmas, n_columns=st.integers(1, 10),
       method=st.sampled_from(["oasis", "greedy", "rpcholesky", "uniform"]),
       seed=st.integers(0, 2**31), jobs=n_jobs)
def test_select_columns(data, kernel, sigma, n_columns, method, seed, jobs):
    X = data.draw(arrays())
    sel = returns_or_refuses(hkern.select_columns, X, n_columns, method=method, kernel=kernel,
                             sigma=sigma, seed=seed, n_jobs=jobs)
    if sel is None:
        return
    k = len(sel.indices_)
    assert 1 <= k <= n_columns
    assert len(set(np.asarray(sel.indices_).tolist())) == k
    assert_finite(sel.C_, (n_rows(X), k))
    assert_finite(sel.F_, (n_rows(X), k))
    assert_finite(sel.W_inv_, (k, k))


@SETTINGS
@given(data=st.data(), kernel=kernels, sigma=sigmas, rank=st.integers(1, 4),
       n_clusters=st.integers(1, 3), seed=st.integers(0, 2**31), psd=st.booleans())
def test_meka(data, kernel, sigma, rank, n_clusters, seed, psd):
    X = data.draw(arrays())
    approx = returns_or_refuses(hkern.meka, X, rank, n_clusters=n_clusters, kernel=kernel,
                                sigma=sigma, seed=seed, psd=psd)
    if approx is None:
        return
    v = np.ones(n_rows(X))
    assert_finite(approx.matvec(v), (n_rows(X),))
    feats = returns_or_refuses(approx.features, X)
    if feats is not None:
        labels, blocks = feats
        assert_finite(labels, (n_rows(X),))
        assert sum(len(rows) for rows, _ in blocks) == n_rows(X)
        for rows, w in blocks:
            assert_finite(w)
            assert w.shape[0] == len(rows)


@settings(max_examples=max(5, EXAMPLES // 3), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(data=st.data(), p=st.integers(1, 30), grid_size=st.integers(2, 5),
       inference=st.sampled_from(["type2", "type2", "type1"]), seed=st.integers(0, 2**31))
def test_grief(data, p, grid_size, inference, seed):
    X = data.draw(arrays(min_n=2, max_n=20, max_d=3))
    y = data.draw(targets(n_rows(X)))
    extra = dict(n_iter=60, burn_in=10, thin=5) if inference == "type1" else dict(max_iter=15)
    model = returns_or_refuses(hkern.fit_grief, X, y, r=p, grid_size=grid_size,
                               inference=inference, seed=seed, init_subset=50, n_restarts=0,
                               **extra)
    if model is None:
        return
    mean, std = model.predict(X, return_std=True)
    assert_finite(mean, (n_rows(X),))
    assert_finite(std, (n_rows(X),))
    assert (std >= 0).all()
    assert np.isfinite(model.log_marginal_likelihood())
