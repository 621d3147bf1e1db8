"""float32 inputs: every kernel ridge fit reads a float32 X as it is, with no float64 copy
beyond the one its arithmetic reads (hkern._model.prepare_fit), and its model is bitwise the
model of X.astype(np.float64), whatever the solver, precision, sigma or selection.

A path that let float32 data into the engine would compute in single precision (the engine
follows its inputs' dtype) and change the bits; one that widened X twice would show in the
memory test."""
import tracemalloc
import warnings

import numpy as np
import pytest

import hkern
from hkern._model import prepare_fit
from hkern._validation import check_array, scale_inputs
from hkern.kernels._api import (
    KERNELS,
    _kernel_normal_times_trusted,
    _kernel_normal_times_widened,
    _widened_rows_bytes,
)
from hkern.solvers import falkon_bytes

N, D = 160, 3
SIGMAS = {"scalar": dict(sigma=1.3, lam=1e-2),
          "lengthscales": dict(sigma=np.array([0.9, 1.6, 2.2]), lam=1e-2)}
SELECTIONS = {"ard": dict(sigma="ard", lam="auto"), "auto": dict(sigma="auto", lam="auto")}

FITS = {
    "exact direct": (hkern.fit_exact, dict(solver="direct")),
    "exact pcg double": (hkern.fit_exact, dict(solver="pcg", precision="double", r=40)),
    "exact pcg mixed": (hkern.fit_exact, dict(solver="pcg", precision="mixed", r=40,
                                               tol=1e-3)),
    "exact pcg auto": (hkern.fit_exact, dict(solver="pcg", r=40)),
    "nystrom direct": (hkern.fit_nystrom, dict(r=40)),
    "nystrom pcg double": (hkern.fit_nystrom, dict(r=40, solver="pcg", precision="double")),
    "nystrom pcg auto": (hkern.fit_nystrom, dict(r=40, solver="pcg")),
    "nystrom pcg mixed": (hkern.fit_nystrom, dict(r=40, solver="pcg", precision="mixed")),
    "hierarchical": (hkern.fit_hierarchical, dict(r=16)),
    "independent": (hkern.fit_independent, dict(r=16)),
    "rff": (hkern.fit_rff, dict(r=64)),
    "meka": (hkern.fit_meka, dict(r=8, n_clusters=3)),
    "slkl": (hkern.fit_slkl, dict(r=16)),
    "slkl_unif": (hkern.fit_slkl_unif, dict(r=16)),
    "slkl_krrm": (hkern.fit_slkl_krrm, dict(r=16)),
}


def data(task="regression", n=N, d=D, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] * X[:, 2] + 0.05 * rng.normal(size=n)
    if task == "classification":
        y = np.where(y > 0, "up", "down")
    return X, y


def assert_same_model(fit, X32, y, X_new, **kwargs):
    """The fit of float32 X and of its float64 widening: the same predictions, bit for bit."""
    single = fit(X32, y, seed=0, **kwargs)
    double = fit(X32.astype(np.float64), y, seed=0, **kwargs)
    np.testing.assert_array_equal(single.predict(X_new), double.predict(X_new))
    if single.encoding_.task == "regression":
        assert single.predict(X_new).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(single.sigma_), np.asarray(double.sigma_))
    assert single.lam_ == double.lam_
    return single


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("sigma", SIGMAS)
@pytest.mark.parametrize("fit", FITS)
def test_float32_fit_is_the_fit_of_its_float64_widening(fit, sigma):
    X, y = data()
    X_new = data(seed=1)[0][:25]
    function, kwargs = FITS[fit]
    assert_same_model(function, X, y, X_new, **kwargs, **SIGMAS[sigma])


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("selection", SELECTIONS)
@pytest.mark.parametrize("fit", ["exact direct", "exact pcg auto", "nystrom direct",
                                 "nystrom pcg auto", "hierarchical", "rff"])
def test_float32_selection_is_the_selection_of_its_float64_widening(fit, selection):
    """The hyperparameter selections (the direct one's subsample GP and hold-out fits, the
    iterative one's candidates) read the float32 rows as the fits do."""
    X, y = data(n=300)
    function, kwargs = FITS[fit]
    if fit == "nystrom pcg auto" and selection == "auto":
        kwargs = dict(kwargs, landmarks="rpcholesky")   # centres chosen again per bandwidth
    assert_same_model(function, X, y, X[:30], **kwargs, **SELECTIONS[selection])


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("fit", ["exact pcg auto", "nystrom direct", "hierarchical"])
def test_float32_classification(fit):
    X, y = data("classification")
    function, kwargs = FITS[fit]
    model = assert_same_model(function, X, y, X[:40], task="classification", **kwargs,
                              **SIGMAS["lengthscales"])
    assert set(model.predict(X[:40])) <= {"up", "down"}


def test_pandas_float32_frame_is_read_as_float32():
    pd = pytest.importorskip("pandas")
    X, y = data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    assert check_array(frame, keep_float32=True).dtype == np.float32
    mixed = frame.astype({"a": np.float64})
    assert check_array(mixed, keep_float32=True).dtype == np.float64
    assert_same_model(hkern.fit_nystrom, frame, y, X[:20], r=30, **SIGMAS["scalar"])


@pytest.mark.parametrize("form", ["list", "int", "float64", "float16"])
def test_keep_float32_widens_everything_else(form):
    X = np.arange(12).reshape(6, 2)
    given = {"list": X.tolist(), "int": X, "float64": X.astype(np.float64),
             "float16": X.astype(np.float16)}[form]
    out = check_array(given, keep_float32=True)
    assert out.dtype == np.float64 and np.array_equal(out, X)


def test_float32_checks_are_the_float64_checks():
    X = np.ones((4, 2), dtype=np.float32)
    X[1, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        check_array(X, keep_float32=True)
    X = np.ones((4, 2), dtype=np.float32)[:, ::2]       # strided: made contiguous, float32
    out = check_array(X, keep_float32=True)
    assert out.dtype == np.float32 and out.flags.c_contiguous


@pytest.mark.parametrize("sigma", SIGMAS)
def test_prepare_fit_makes_one_float64_copy(sigma):
    """The fit's inputs are float64, made from the float32 X in one step: its peak traced
    allocation is the one n x d float64 array (plus targets), where widening first and
    scaling after held two."""
    X, y = data(n=20000, d=20)
    args = dict(kernel="gaussian", task="regression", **SIGMAS[sigma])
    if sigma == "lengthscales":
        args["sigma"] = np.linspace(0.5, 2.0, 20)
    tracemalloc.start()
    inputs = prepare_fit(X, y, **args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert inputs.X.dtype == np.float64 and inputs.X.flags.c_contiguous
    copy = 8 * X.size
    targets = 8 * len(y) * 3            # y, its encoding and a contiguous copy, at most
    assert copy <= peak <= copy + targets, (peak, copy)
    assert inputs.scaled_bytes == copy
    np.testing.assert_array_equal(
        inputs.X, scale_inputs(X.astype(np.float64), inputs.lengthscales))


def test_float64_input_is_not_copied_for_a_scalar_sigma():
    X, y = data()
    X64 = X.astype(np.float64)
    inputs = prepare_fit(X64, y, kernel="gaussian", task="regression", sigma=1.0, lam=0.1)
    assert inputs.X is X64 and inputs.scaled_bytes == 0


def test_memory_limit_counts_the_widened_copy():
    X, y = data(n=1000, d=8)
    with pytest.raises(hkern.MemoryLimitError, match="the float32 inputs in float64"):
        hkern.fit_nystrom(X, y, 10, sigma=1.0, lam=0.1, max_memory=8 * X.size - 1)


def test_mixed_solves_read_a_float32_X_as_it_is(monkeypatch):
    """With a scalar sigma, the float32 operand of a mixed solve is the user's float32 X
    itself (X rounded to float32 exactly): no 4 n d byte copy next to the float64 one."""
    from hkern.solvers import exact_pcg, falkon
    X, y = data(n=400)
    seen = []
    original = falkon.FalkonSystem.__init__

    def spy_falkon(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if self.mixed:
            seen.append(self.X32)
    monkeypatch.setattr(falkon.FalkonSystem, "__init__", spy_falkon)
    hkern.fit_nystrom(X, y, 40, solver="pcg", precision="mixed", sigma=1.3, lam=1e-2, seed=0)
    assert seen and all(np.shares_memory(X32, X) for X32 in seen)

    operands = []

    class SpySystem(exact_pcg.KernelSystem):
        def __init__(self, kind, bandwidth, X_, *args, **kwargs):
            operands.append(X_)
            super().__init__(kind, bandwidth, X_, *args, **kwargs)
    monkeypatch.setattr(exact_pcg, "KernelSystem", SpySystem)
    hkern.fit_exact(X, y, solver="pcg", precision="mixed", r=40, sigma=1.3, lam=1e-2, seed=0)
    single = [A for A in operands if A.dtype == np.float32]
    assert single and all(np.shares_memory(A, X) for A in single)
    # ... and with lengthscales, X / sigma rounded to float32 (not X) is the operand
    operands.clear()
    hkern.fit_exact(X, y, solver="pcg", precision="mixed", r=40, sigma=SIGMAS["lengthscales"]
                    ["sigma"], lam=1e-2, seed=0)
    single = [A for A in operands if A.dtype == np.float32]
    assert single and not any(np.shares_memory(A, X) for A in single)


@pytest.mark.parametrize("n,m,shift,kernel,threads", [
    (5000, 300, 0.0, "gaussian", 2), (777, 64, 50.0, "gaussian", 1), (3, 10, 0.0, "laplace", 2),
    (9000, 100, 40.0, "matern32", 2), (9000, 100, 0.0, "imq", 3), (20000, 1024, 0.0,
                                                                    "gaussian", 2)])
def test_widened_normal_pass_is_the_float64_pass_bit_for_bit(n, m, shift, kernel, threads):
    """FALKON's float64 pass over a float32 X kept as it is (widened a group of slabs at a
    time, shifted where the engine shifts far-off data) against the pass over X's float64
    copy: the same bits, for U, V and both."""
    rng = np.random.default_rng(n)
    X = (rng.normal(size=(n, 4)) + shift).astype(np.float32)
    Z = X[rng.choice(n, min(m, n), replace=False)].astype(np.float64)
    U = rng.normal(size=(Z.shape[0], 2))
    V = rng.normal(size=(n, 2))
    for u, v in [(U, None), (None, V), (U, V)]:
        got = _kernel_normal_times_widened(KERNELS[kernel], 1.3, X, Z, u, v, threads)
        want = _kernel_normal_times_trusted(KERNELS[kernel], 1.3, X.astype(np.float64), Z, u,
                                            v, threads)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("precision", ["double", "mixed"])
def test_falkon_keeps_a_float32_X_without_a_float64_copy(precision):
    """FALKON with a scalar sigma holds no n x d float64 array of a float32 X (a group of
    slabs at a time, about 1/8 of it on 2 threads); its peak estimate covers the traced peak."""
    rng = np.random.default_rng(0)
    n, d, r = 20000, 64, 64
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.sin(X[:, 0])
    kwargs = dict(solver="pcg", precision=precision, sigma=8.0, lam=1e-3, seed=0, n_jobs=2)
    tracemalloc.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # a mixed answer's float64-model residual
        model = hkern.fit_nystrom(X, y, r, **kwargs)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 0.4 * 8 * n * d, peak
    assert peak <= falkon_bytes(n, r, d, 1, 2, precision, np.float32)
    assert _widened_rows_bytes(n, r, d, 2) <= 8 * n * d // 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = hkern.fit_nystrom(X.astype(np.float64), y, r, **kwargs)
    np.testing.assert_array_equal(model.predict(X[:50]), reference.predict(X[:50]))
