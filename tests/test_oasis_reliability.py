"""oASIS and the column selectors on hard inputs (issue 16): read-only and memory-mapped
arrays (defect 6), extreme but accepted magnitudes (defect 9), the memory guard (defect 11),
thread budgets and determinism for any n_jobs (defects 5, 7, 8)."""
import textwrap
import time

import numpy as np
import pytest
import threadpoolctl
from fresh_python import run_python
from memory_probe import assert_estimate_close
from oracles import KERNELS
from reliability_helpers import blas_threads_now, read_only, record_blas_threads

import hkern
from hkern._memory import MemoryLimitError, peak_memory
from hkern.oasis import api

METHODS = ("oasis", "greedy", "rpcholesky", "uniform")
ADAPTIVE = ("oasis", "greedy", "rpcholesky")
ATTRS = ("indices_", "C_", "W_inv_", "scores_", "F_")


def assert_same(a, b):
    for attr in ATTRS:
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr), err_msg=attr)


@pytest.fixture(scope="module")
def points():
    return np.random.default_rng(3).normal(size=(300, 3))


@pytest.fixture(scope="module")
def gram(points):
    return hkern.kernel_matrix(points, sigma=0.7)


# ------------------------------------------------------------------ read-only inputs (defect 6)


@pytest.mark.parametrize("method", METHODS)
def test_memory_mapped_points(tmp_path, points, method):
    """BUG (issue 16, defect 6): np.load(..., mmap_mode="r") X gave "buffer source array is
    read-only" in the compiled core (oasis, greedy, rpcholesky)."""
    np.save(tmp_path / "X.npy", points)
    X = np.load(tmp_path / "X.npy", mmap_mode="r")
    ref = hkern.select_columns(points, 25, method=method, sigma=0.7, seed=1)
    assert_same(hkern.select_columns(X, 25, method=method, sigma=0.7, seed=1), ref)
    assert_same(hkern.select_columns(read_only(points), 25, method=method, sigma=0.7, seed=1),
                ref)


@pytest.mark.parametrize("method", METHODS)
def test_memory_mapped_precomputed(tmp_path, gram, method):
    np.save(tmp_path / "G.npy", gram)
    G = np.load(tmp_path / "G.npy", mmap_mode="r")
    ref = hkern.select_columns(gram, 25, method=method, kernel="precomputed", seed=1)
    assert_same(hkern.select_columns(G, 25, method=method, kernel="precomputed", seed=1), ref)
    assert_same(hkern.select_columns(read_only(gram), 25, method=method, kernel="precomputed",
                                     seed=1), ref)


def test_read_only_one_by_one_precomputed():
    """n = 1: the diagonal of a 1 x 1 read-only matrix is itself contiguous and read-only."""
    sel = hkern.select_columns(read_only(np.array([[4.0]])), 1, method="greedy",
                               kernel="precomputed")
    assert sel.indices_.tolist() == [0] and sel.W_inv_.tolist() == [[0.25]]


def test_read_only_non_contiguous_and_float32(points):
    ref = hkern.oasis(points, 20, sigma=0.7, seed=2)
    wide = np.zeros((300, 6))
    wide[:, ::2] = points
    strided = read_only(wide)[:, ::2]
    assert_same(hkern.oasis(strided, 20, sigma=0.7, seed=2), ref)
    f32 = read_only(points.astype(np.float32))
    sel = hkern.oasis(f32, 20, sigma=0.7, seed=2)
    assert_same(sel, hkern.oasis(f32.astype(np.float64), 20, sigma=0.7, seed=2))


def test_read_only_points_in_oasis_mpi(points):
    """oASIS-P in one process (no mpiexec) reads its block of rows through the same core."""
    pytest.importorskip("mpi4py", reason="oASIS-P needs the optional extra hkern[mpi]")
    from hkern.oasis.sharded import oasis_mpi
    assert_same(oasis_mpi(read_only(points), 20, sigma=0.7, seed=2),
                hkern.oasis(points, 20, sigma=0.7, seed=2))


# ------------------------------------------------------------------ extreme magnitudes (defect 9)


def assert_finite(sel):
    for attr in ("C_", "W_inv_", "F_"):
        assert np.isfinite(getattr(sel, attr)).all(), attr


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("method", METHODS)
def test_tiny_sigma_gives_the_identity(points, kernel, method):
    """sigma = 1e-300: K = I (distinct points).  Every column has score 1, C = I[:, idx],
    W^{-1} = I and F = C."""
    sel = hkern.select_columns(points, 15, method=method, kernel=kernel, sigma=1e-300, seed=0)
    assert_finite(sel)
    assert len(sel) == 15 and len(set(sel.indices_.tolist())) == 15
    if method != "uniform":
        adaptive_scores = sel.scores_[1:] if method == "oasis" else sel.scores_
        assert (adaptive_scores == 1.0).all()
    if method == "greedy":              # ties go to the smallest row
        assert sel.indices_.tolist() == list(range(15))
    I = np.eye(300)[:, sel.indices_]
    np.testing.assert_array_equal(sel.C_, I)
    np.testing.assert_array_equal(sel.W_inv_, np.eye(15))
    np.testing.assert_array_equal(sel.F_, I)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("method", METHODS)
def test_huge_sigma_gives_all_ones(points, kernel, method):
    """sigma = 1e300: K = ones (rank 1).  The adaptive methods stop after one column (the
    next best score is 0, below the numerical floor); uniform sampling of more than one
    column has a singular W and says so."""
    if method == "uniform":
        with pytest.raises(ValueError, match="singular W.*sigma far above the spread"):
            hkern.select_columns(points, 5, method=method, kernel=kernel, sigma=1e300, seed=0)
        sel = hkern.select_columns(points, 1, method=method, kernel=kernel, sigma=1e300, seed=0)
    else:
        sel = hkern.select_columns(points, 5, method=method, kernel=kernel, sigma=1e300, seed=0)
    assert len(sel) == 1
    assert_finite(sel)
    np.testing.assert_array_equal(sel.C_, np.ones((300, 1)))
    np.testing.assert_array_equal(sel.W_inv_, [[1.0]])
    np.testing.assert_array_equal(sel.approximation(), np.ones((300, 300)))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("scale", [1e149, 1e-150])
def test_data_and_sigma_scaled_together(kernel, method, scale):
    """Data and sigma both near 1e149 or 1e-150: the kernel depends on X / sigma only, so the
    selection is that of the unscaled problem (same columns, the same numbers to round-off)."""
    X = np.random.default_rng(7).normal(size=(60, 3))
    ref = hkern.select_columns(X, 12, method=method, kernel=kernel, sigma=0.8, seed=2)
    sel = hkern.select_columns(X * scale, 12, method=method, kernel=kernel, sigma=0.8 * scale,
                               seed=2)
    assert_finite(sel)
    np.testing.assert_array_equal(sel.indices_, ref.indices_)
    np.testing.assert_allclose(sel.C_, ref.C_, rtol=0, atol=1e-13)
    np.testing.assert_allclose(sel.F_, ref.F_, rtol=0, atol=1e-13)
    np.testing.assert_allclose(sel.W_inv_, ref.W_inv_, rtol=0,
                               atol=1e-12 * np.abs(ref.W_inv_).max())


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("scale", [1e-150, 1e149])
def test_precomputed_scaled(gram, method, scale):
    """An explicit matrix times 1e-150 or 1e149: the same columns, scores scaled."""
    ref = hkern.select_columns(gram, 20, method=method, kernel="precomputed", seed=4)
    sel = hkern.select_columns(gram * scale, 20, method=method, kernel="precomputed", seed=4)
    assert_finite(sel)
    np.testing.assert_array_equal(sel.indices_, ref.indices_)
    np.testing.assert_allclose(sel.scores_, ref.scores_ * scale, rtol=1e-12)
    np.testing.assert_allclose(sel.W_inv_ * scale, ref.W_inv_, rtol=1e-9,
                               atol=1e-12 * np.abs(ref.W_inv_).max())


@pytest.mark.parametrize("method", METHODS)
def test_precomputed_near_the_smallest_doubles_is_refused(method):
    """BUG: an explicit matrix with subnormal entries (1e-310 I) returned W^{-1} = inf.
    1 / Delta overflows there; a clear error says how to rescale."""
    with pytest.raises(ValueError, match="W\\^\\{-1\\} overflows.*multiply X by a common factor"):
        hkern.select_columns(1e-310 * np.eye(10), 5, method=method, kernel="precomputed",
                             seed=0)


def test_zero_matrix():
    """G = 0: greedy returns no columns (G~ = 0 = G); random initial columns cannot give a
    non-singular W, which the message says."""
    sel = hkern.select_columns(np.zeros((6, 6)), 3, method="greedy", kernel="precomputed")
    assert len(sel) == 0 and sel.C_.shape == (6, 0)
    with pytest.raises(ValueError, match="singular W.*zero matrix"):
        hkern.oasis(np.zeros((6, 6)), 3, kernel="precomputed", seed=0)


# ------------------------------------------------------------------ memory guard (defect 11)


DATA = "import numpy as np\nX = np.random.default_rng(0).normal(size=(200_000, 3))"
GRAM = ("import numpy as np\nX = np.random.default_rng(0).normal(size=({n}, 2))\n"
        "G = hkern.kernel_matrix(X, sigma=0.01)")


@pytest.mark.parametrize("method", METHODS)
def test_memory_estimate_matches_peak(method):
    """n = 200 000, l = 64: the core's panels and F (adaptive, 200 MiB) or C, its transposed
    copy and F (uniform, 300 MiB).  Observed estimate / peak RSS: 1.00 for every method."""
    assert_estimate_close(DATA, f"hkern.select_columns(X, 64, method={method!r}, sigma=0.3, "
                                "seed=0, n_jobs=1)")


def test_memory_estimate_oasis_entry_point():
    assert_estimate_close(DATA, "hkern.oasis(X, 100, sigma=0.3, seed=0, n_jobs=1)")


@pytest.mark.parametrize("n,ell,method", [(2000, 1500, "oasis"), (4000, 50, "greedy"),
                                          (3000, 2000, "uniform")])
def test_memory_estimate_precomputed(n, ell, method):
    """kernel="precomputed": the selection's arrays (n = 2000, l = 1500: F and W^{-1}'s
    workspaces dominate) or the validation's n x n temporary (n = 4000, l = 50).  Observed
    ratio 0.88 (glibc keeps ~9 MiB of freed heap; tracemalloc's peak equals the estimate)
    .. 1.06 (uniform; 0.98 in another run).  One thread: the estimate does not depend on it,
    and 2 threads on a loaded 2-core machine spend most of 1500 steps in OpenMP barriers."""
    assert_estimate_close(GRAM.format(n=n), f"hkern.select_columns(G, {ell}, method={method!r}, "
                                            "kernel='precomputed', seed=0, n_jobs=1)")


def test_memory_estimate_oasis_mpi_one_process():
    """oASIS-P on one rank with gather: its rows' C and F plus the gathered C and F
    (observed ratio 0.92)."""
    pytest.importorskip("mpi4py", reason="oASIS-P needs the optional extra hkern[mpi]")
    assert_estimate_close("import numpy as np\nfrom hkern.oasis.sharded import oasis_mpi\n"
                          "X = np.random.default_rng(0).normal(size=(100_000, 3))",
                          "oasis_mpi(X, 64, sigma=0.3, seed=0, n_jobs=1)")


@pytest.mark.parametrize("method", METHODS)
def test_too_many_columns_fail_before_allocating(method):
    """n = 2e6 rows of 1 feature (16 MB) and r = 1e6 columns: about 3e13 bytes, refused in
    milliseconds, before anything large is allocated, naming the argument to change."""
    X = np.zeros((2_000_000, 1))
    start = time.monotonic()
    with peak_memory() as peak:
        with pytest.raises(MemoryLimitError, match="select_columns.*n=2000000.*choose a smaller "
                                                   "r"):
            hkern.select_columns(X, 1_000_000, method=method)
    assert time.monotonic() - start < 2
    assert peak.bytes < 100 * 2**20       # validation's O(n d) temporaries only


@pytest.mark.parametrize("method", METHODS)
def test_max_memory_argument(points, gram, method):
    with pytest.raises(MemoryLimitError, match="max_memory argument.*smaller r"):
        hkern.select_columns(points, 20, method=method, max_memory=10_000)
    with pytest.raises(MemoryLimitError, match="max_memory argument"):
        hkern.select_columns(gram, 20, method=method, kernel="precomputed", max_memory=10_000)
    with pytest.raises(MemoryLimitError):
        hkern.oasis(points, 20, max_memory=10_000)
    need = api.selection_peak_bytes(300, 20, method)
    assert len(hkern.select_columns(points, 20, method=method, max_memory=need, seed=0)) == 20
    for bad in (0, -1, "x", True):
        with pytest.raises(ValueError, match="max_memory must be None"):
            hkern.select_columns(points, 20, method=method, max_memory=bad)


def test_max_memory_is_the_last_parameter():
    import inspect
    for fn in (hkern.oasis, hkern.select_columns):
        assert list(inspect.signature(fn).parameters)[-1] == "max_memory"


# ------------------------------------------------------------------ threads (defects 5, 7, 8)


@pytest.mark.parametrize("method", METHODS)
def test_explicit_n_jobs_bounds_blas(monkeypatch, points, method):
    """Every selector runs inside thread_budget(n_jobs): BLAS calls made while it computes
    (here: when C is formed) see n_jobs threads, even under a wider threadpoolctl limit."""
    seen = record_blas_threads(monkeypatch, [(api, "_columns")])
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        hkern.select_columns(points, 10, method=method, sigma=0.7, seed=0, n_jobs=1)
    assert seen and set(seen) == {1}


def test_column_selection_products_run_in_its_thread_budget(monkeypatch, points):
    """R and approximation() are BLAS products: bounded by the selection's n_jobs."""
    sel = hkern.oasis(points, 10, sigma=0.7, seed=0, n_jobs=1)
    assert sel.n_jobs == 1
    seen = []

    class Probe(np.ndarray):
        def __matmul__(self, other):
            seen.append(blas_threads_now())
            return np.asarray(self) @ np.asarray(other)
    sel.W_inv_ = sel.W_inv_.view(Probe)
    sel.C_ = sel.C_.view(Probe)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        R = sel.R_
        G = sel.approximation()
    assert seen and set(seen) == {1}
    np.testing.assert_allclose(np.asarray(G), np.asarray(sel.C_) @ np.asarray(R), atol=1e-12)


def test_approximation_memory_guard(points):
    sel = hkern.oasis(points, 10, sigma=0.7, seed=0)
    with pytest.raises(MemoryLimitError, match="approximation with n=300.*use the factors"):
        sel.approximation(max_memory=300 * 300 * 8)
    assert sel.approximation(max_memory=2 * 300 * 300 * 8).shape == (300, 300)


def test_n_jobs_none_honours_omp_num_threads():
    """n_jobs=None under OMP_NUM_THREADS=1: the core's loops get one thread, BLAS one too."""
    code = textwrap.dedent("""
        import numpy as np, threadpoolctl, hkern
        from hkern.oasis import api
        threads = []
        class Core(api.OasisCore):
            def recompute_delta(self, n_threads=1):
                threads.append(n_threads)
                return super().recompute_delta(n_threads)
        api.OasisCore = Core
        X = np.random.default_rng(0).normal(size=(200, 2))
        for method in ("oasis", "greedy", "rpcholesky"):
            hkern.select_columns(X, 5, method=method, seed=0)
        blas = [lib["num_threads"] for lib in threadpoolctl.threadpool_info()
                if lib["user_api"] == "blas"]
        print(sorted(set(threads)), max(blas))
    """)
    out = run_python(code, env={"OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[1]", "1"]


@pytest.mark.parametrize("method", METHODS)
def test_same_bits_for_any_n_jobs_precomputed(gram, method):
    """Reproducible: the same seed gives the same selection bit for bit for n_jobs 1, 2 and
    None from an explicit matrix, F included (from data: test_oasis.py TestReproducibility,
    across the chunks of the pivot reduction)."""
    ref = hkern.select_columns(gram, 40, method=method, kernel="precomputed", seed=5, n_jobs=1)
    for n_jobs in (2, None):
        assert_same(hkern.select_columns(gram, 40, method=method, kernel="precomputed", seed=5,
                                         n_jobs=n_jobs), ref)


@pytest.mark.parametrize("n_jobs", [0, 1.5, "x", True])
def test_bad_n_jobs(points, n_jobs):
    for method in METHODS:
        with pytest.raises(ValueError, match="n_jobs must be None or a non-zero integer"):
            hkern.select_columns(points, 5, method=method, n_jobs=n_jobs)
