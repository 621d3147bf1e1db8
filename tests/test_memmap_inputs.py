"""A memory-mapped X (numpy.memmap, or np.load(..., mmap_mode="r")) is read where it lies: the
fits that read X by row blocks give bitwise the model of the same X in memory, and FALKON and
random features allocate nothing near X's size on top of it (issue 54)."""
import tracemalloc

import numpy as np
import pytest

import hkern


def problem(n, d=8, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(dtype)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y


def mapped(tmp_path, X):
    path = tmp_path / "X.npy"
    np.save(path, X)
    return np.load(path, mmap_mode="r")


FITS = {
    "falkon": lambda X, y: hkern.fit_nystrom(X, y, 64, solver="pcg", sigma=2.0, lam=1e-3,
                                             seed=0),
    "nystrom": lambda X, y: hkern.fit_nystrom(X, y, 64, sigma=2.0, lam=1e-3, seed=0),
    "exact_pcg": lambda X, y: hkern.fit_exact(X, y, solver="pcg", sigma=2.0, lam=1e-3, seed=0),
    "exact_direct": lambda X, y: hkern.fit_exact(X, y, sigma=2.0, lam=1e-3),
    "rff": lambda X, y: hkern.fit_rff(X, y, 128, sigma=2.0, lam=1e-3, seed=0),
    "hck": lambda X, y: hkern.fit_hierarchical(X, y, 32, sigma=2.0, lam=1e-3, seed=0),
    "independent": lambda X, y: hkern.fit_independent(X, y, 32, sigma=2.0, lam=1e-3, seed=0),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(FITS))
def test_memory_mapped_x_gives_the_in_memory_model(tmp_path, name, dtype):
    X, y = problem(1500, dtype=dtype)
    Xm = mapped(tmp_path, X)
    assert isinstance(Xm, np.memmap) and not Xm.flags.writeable
    in_memory = FITS[name](X, y)
    from_map = FITS[name](Xm, y)
    Xt = problem(200, seed=1)[0]
    np.testing.assert_array_equal(from_map.predict(Xt), in_memory.predict(Xt))
    test_map = tmp_path / "test"
    test_map.mkdir()
    np.testing.assert_array_equal(from_map.predict(mapped(test_map, Xt)),
                                  in_memory.predict(Xt))


def traced_peak(fit, X, y):
    tracemalloc.start()
    try:
        fit(X, y)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", ["falkon", "rff"])
def test_a_memory_mapped_x_is_streamed_not_copied(tmp_path, name):
    """Twice the rows of a memory-mapped X add far less than X's growth to the fit's traced
    allocations (NumPy's and the engine's arrays): X is read from the map block by block,
    never copied whole, and what grows with n is the n-vectors of y (d = 32, so that X's
    growth stands well above theirs)."""
    X, y = problem(200_000, d=32)
    Xm = mapped(tmp_path, X)
    del X
    half = Xm.shape[0] // 2
    FITS[name](Xm[:2000], y[:2000])          # warm: imports and first calls allocate too
    growth = traced_peak(FITS[name], Xm, y) - traced_peak(FITS[name], Xm[:half], y[:half])
    assert growth < 0.5 * Xm[half:].nbytes, (growth, Xm[half:].nbytes)


@pytest.mark.parametrize("name", ["falkon", "rff"])
def test_traced_peak_within_the_fits_own_estimate(tmp_path, name):
    """On a memory-mapped X the fit's traced allocations stay within the estimate it passed
    to its memory guard, and so does predict's: one block of rows at a
    time (the next block's features are made after the last one is freed), and no temporary
    of X's size (the phase check reads X's largest and smallest entries), and the centred
    targets counted (the exact sum of y runs in blocks of 1 MiB)."""
    from hkern._memory import recorded_estimates
    X, y = problem(200_000, d=32)
    Xm = mapped(tmp_path, X)
    del X
    FITS[name](Xm[:2000], y[:2000])          # warm: imports and first calls allocate too
    with recorded_estimates() as estimates:
        peak = traced_peak(FITS[name], Xm, y)
    need = max(bytes_ for _, bytes_ in estimates)
    python_objects = 2**20          # the model, its attributes, the interpreter's own
    assert peak <= need + python_objects, (peak, need)
    model = FITS[name](Xm, y)
    tracemalloc.start()
    try:
        model.predict(Xm)
        predict_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert predict_peak <= need + python_objects, (predict_peak, need)
