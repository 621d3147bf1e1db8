"""Inputs and threads of HCK and the independent kernel (issue 16, defects 12, 6 and 7).

* Right-hand sides of the HCK model's solve / matvec / log_marginal_likelihood: complex values
  are refused (they silently lost their imaginary part), bad values and shapes are clear
  ValueErrors, inconvenient layouts (float32, Fortran order, strided, read-only, lists) give the
  same bits as a C-contiguous float64 array.
* Read-only inputs (np.load(mmap_mode="r"), pandas Series, read-only buffers of an unpickled
  model) are accepted.
* Every public computation runs inside thread_budget(n_jobs): BLAS, OpenMP and ARPACK threads
  follow n_jobs and OMP_NUM_THREADS, and results are bitwise identical for any n_jobs.
"""
import pickle
import textwrap

import numpy as np
import pytest
from fresh_python import run_python
from reliability_helpers import blas_threads_now, record_thread_budgets

import hkern


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    model = hkern.fit_hierarchical(X, y, r=16, sigma=0.8, seed=1, n_jobs=1, lam=1e-2)
    return X, y, model


# ----------------------------------------------------------------------------------------------
# Defect 12: complex and other bad right-hand sides
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["solve", "matvec", "log_marginal_likelihood"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_complex_right_hand_side_is_refused(fitted, method, dtype):
    X, y, m = fitted
    name = "y" if method == "log_marginal_likelihood" else "B"
    for B in ((y + 1j * y).astype(dtype), np.column_stack([y, 1j * y]).astype(dtype),
              (y + 0j).astype(dtype)):
        with pytest.raises(ValueError, match=rf"{name} is complex; .* real and imaginary parts "
                           "separately"):
            getattr(m, method)(B)


def test_real_and_imaginary_parts_separately(fitted):
    # what the error message recommends is right: the operator is real and linear
    X, y, m = fitted
    B = np.column_stack([y, X[:, 1]]) + 1j * np.column_stack([X[:, 2], -y])
    A = m.matvec(np.eye(len(y)))
    out = m.solve(B.real) + 1j * m.solve(B.imag)
    assert np.allclose(A @ out, B, rtol=0, atol=1e-10)


@pytest.mark.parametrize("method", ["solve", "matvec", "log_marginal_likelihood"])
def test_bad_right_hand_sides(fitted, method):
    X, y, m = fitted
    n = len(y)
    name = "y" if method == "log_marginal_likelihood" else "B"
    f = getattr(m, method)
    for bad, match in [
        (np.where(np.arange(n) == 7, np.nan, y), rf"{name} contains NaN \(first at index \[7\]"),
        (np.where(np.arange(n) == 3, -np.inf, y), rf"{name} contains infinity"),
        (np.full((n, 2), 1e200), rf"{name} has values up to 1e\+200"),
        (np.ones((n, 0)), rf"{name} has 0 outputs"),
        (np.array(["a"] * n), rf"{name} must be an array of real numbers"),
        (np.array([None] * n), rf"{name} contains NaN"),
        (np.ones(n + 1), rf"{name} must have shape \({n},\) or \({n}, k\)"),
        (np.ones((n, 2, 1)), rf"{name} must have shape"),
        (np.ones((1, n)), rf"{name} must have shape"),
        (3.0, rf"{name} must have shape"),
    ]:
        with pytest.raises(ValueError, match=match):
            f(bad)


@pytest.mark.parametrize("method", ["solve", "matvec", "log_marginal_likelihood"])
def test_right_hand_side_layouts_give_the_same_bits(fitted, method):
    X, y, m = fitted
    f = getattr(m, method)
    B = np.column_stack([y, X[:, 0], np.round(10 * X[:, 1])])
    ref = f(B)
    read_only = B.copy()
    read_only.flags.writeable = False
    wide = np.zeros((len(y), 6))
    wide[:, ::2] = B
    for variant in (np.asfortranarray(B), read_only, wide[:, ::2], B.tolist()):
        assert np.array_equal(f(variant), ref)
    as_int = np.round(10 * X[:, 1]).astype(np.int32)
    assert np.array_equal(f(as_int), f(as_int.astype(np.float64)))
    B32 = B.astype(np.float32)
    assert np.array_equal(f(B32), f(B32.astype(np.float64)))
    # 1-D in, 1-D out; (n, 1) in, (n, 1) out
    if method != "log_marginal_likelihood":
        assert f(y).shape == y.shape and f(y[:, None]).shape == (len(y), 1)
        assert np.array_equal(f(y), f(y[:, None])[:, 0])
    else:
        assert f(y) == f(y[:, None])


# ----------------------------------------------------------------------------------------------
# Defect 6: read-only inputs
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fit", [hkern.fit_hierarchical, hkern.fit_independent])
def test_read_only_inputs_are_accepted(fit, tmp_path):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 3))
    y = X[:, 0] - X[:, 1] ** 2
    np.save(tmp_path / "X.npy", X)
    X_map = np.load(tmp_path / "X.npy", mmap_mode="r")
    y_series = pd.Series(y)
    y_ro = y.copy()
    y_ro.flags.writeable = False
    kw = dict(r=16, sigma=0.7, seed=0, n_jobs=1)
    ref = fit(X, y, **kw)
    for Xa, ya in ((X_map, y), (X, y_series), (X_map, y_ro), (pd.DataFrame(X), y_series)):
        m = fit(Xa, ya, **kw)
        assert np.array_equal(m.predict(X_map), ref.predict(X))
        assert np.array_equal(m.dual_coef_, ref.dual_coef_)
    labels = pd.Series(np.where(y > 0, "up", "down"))
    clf = fit(X_map, labels, task="classification", **kw)
    assert set(clf.predict(X_map)) == {"up", "down"}


def test_read_only_right_hand_sides_and_series(fitted):
    pd = pytest.importorskip("pandas")
    X, y, m = fitted
    ys = pd.Series(y)
    assert np.array_equal(m.solve(ys), m.solve(y))
    assert np.array_equal(m.matvec(ys), m.matvec(y))
    assert m.log_marginal_likelihood(ys) == m.log_marginal_likelihood(y)


@pytest.mark.parametrize("fit", [hkern.fit_hierarchical, hkern.fit_independent])
def test_model_unpickled_from_read_only_buffers(fit):
    # Pickle protocol 5 with out-of-band buffers hands the arrays back as read-only views (as
    # when a model is loaded from shared or memory-mapped storage); the HCK operator's factors
    # are const memoryviews, so this works without a copy.
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 3))
    y = np.cos(X[:, 0])
    m = fit(X, y, r=16, sigma=0.7, seed=0, n_jobs=1)
    buffers = []
    data = pickle.dumps(m, protocol=5, buffer_callback=buffers.append)
    assert buffers
    frozen = [memoryview(bytes(b.raw())) for b in buffers]      # read-only
    copy = pickle.loads(data, buffers=frozen)
    assert np.array_equal(copy.predict(X), m.predict(X))
    if hasattr(m, "solve"):
        assert np.array_equal(copy.solve(y), m.solve(y))
        assert np.array_equal(copy.matvec(y), m.matvec(y))
        assert copy.log_marginal_likelihood(y) == m.log_marginal_likelihood(y)
        assert np.array_equal(copy.kernel_pca(2)[0], m.kernel_pca(2)[0])


# ----------------------------------------------------------------------------------------------
# Defect 7: threads
# ----------------------------------------------------------------------------------------------
def test_n_jobs_bitwise_identical_everywhere():
    # depth 5 > the core's split level, more than 1024 test points in a leaf (the chunked
    # prediction loops), classification and several outputs.
    rng = np.random.default_rng(4)
    X = rng.uniform(-1, 1, size=(700, 3))
    Y = np.column_stack([np.sin(3 * X[:, 0]), X[:, 1]])
    labels = np.array(["a", "b", "c"])[np.digitize(X[:, 0], [-0.3, 0.3])]
    Xq = rng.uniform(-1, 1, size=(3000, 3))
    B = rng.normal(size=(700, 4))
    for fit in (hkern.fit_hierarchical, hkern.fit_independent):
        for target, task in ((Y, "regression"), (labels, "classification")):
            kw = dict(r=16, sigma=0.5, seed=3, task=task)
            m1, m2 = fit(X, target, n_jobs=1, **kw), fit(X, target, n_jobs=2, **kw)
            assert np.array_equal(m1.dual_coef_, m2.dual_coef_)
            assert np.array_equal(m1.decision_function(Xq), m2.decision_function(Xq))
            assert np.array_equal(m1.predict(Xq), m2.predict(Xq))
            assert m1.logdet() == m2.logdet()
            if fit is hkern.fit_hierarchical and task == "regression":
                assert np.array_equal(m1.solve(B), m2.solve(B))
                assert np.array_equal(m1.matvec(B), m2.matvec(B))
                assert m1.log_marginal_likelihood(Y) == m2.log_marginal_likelihood(Y)
                v1, V1 = m1.kernel_pca(3)
                v2, V2 = m2.kernel_pca(3)
                assert np.array_equal(v1, v2) and np.array_equal(V1, V2)


@pytest.mark.parametrize("n_jobs", [1, 2, None])
def test_kernel_pca_runs_arpack_with_one_blas_thread(fitted, monkeypatch, n_jobs):
    # ARPACK's vector operations were left to every BLAS thread whatever n_jobs; they run on
    # one (so the eigenpairs are the same bits for any n_jobs) while the matvecs use n_jobs
    # OpenMP threads.
    import scipy.sparse.linalg
    X, y, _ = fitted
    m = hkern.fit_hierarchical(X, y, r=16, sigma=0.8, seed=1, n_jobs=n_jobs, lam=1e-2)
    seen = []
    real_eigsh = scipy.sparse.linalg.eigsh

    def eigsh(*args, **kwargs):
        seen.append(blas_threads_now())
        return real_eigsh(*args, **kwargs)

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", eigsh)
    m.kernel_pca(2)
    assert seen == [1]


def test_public_calls_run_inside_their_thread_budget(fitted, monkeypatch):
    # Every public computation enters one thread budget with the model's (or the call's)
    # n_jobs: the fits and operators in hierarchical/ (api.py, models.py), predictions in the
    # shared model base.
    X, y, _ = fitted
    calls = record_thread_budgets(monkeypatch)
    m = hkern.fit_hierarchical(X, y, r=16, seed=0, n_jobs=2, sigma=1.0, lam=1e-2)
    ind = hkern.fit_independent(X, y, r=16, seed=0, n_jobs=2, sigma=1.0, lam=1e-2)
    assert calls == [2, 2]
    for call in (lambda: m.predict(X), lambda: m.decision_function(X), lambda: m.solve(y),
                 lambda: m.matvec(y), lambda: m.log_marginal_likelihood(y),
                 lambda: m.kernel_pca(2), lambda: ind.predict(X)):
        calls.clear()
        call()
        assert calls == [2]


def test_n_jobs_none_honours_omp_num_threads():
    # One thread under OMP_NUM_THREADS=1: CPU time about equal to wall time for a fit and its
    # predictions (two threads on two cores would give up to 2x).
    code = textwrap.dedent("""
        import time, numpy as np, hkern
        rng = np.random.default_rng(0)
        X = rng.normal(size=(60000, 3)); y = np.sin(X[:, 0])
        hkern.fit_hierarchical(X[:2000], y[:2000], r=32, seed=0, sigma=1.0, lam=1e-2)     # warm up
        w, c = time.perf_counter(), time.process_time()
        m = hkern.fit_hierarchical(X, y, r=128, seed=0, sigma=1.0, lam=1e-2)
        m.predict(X); m.solve(y)
        hkern.fit_independent(X, y, r=256, seed=0, sigma=1.0, lam=1e-2).predict(X)
        print((time.process_time() - c) / (time.perf_counter() - w))
    """)
    out = run_python(code, env={"OMP_NUM_THREADS": "1"}, drop_env=("OPENBLAS_NUM_THREADS",),
                     timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ratio = float(out.stdout.strip().splitlines()[-1])
    assert ratio < 1.25, f"CPU / wall time {ratio:.2f} under OMP_NUM_THREADS=1"
