"""Issue 31's bugs, each against its reference: the exact message's key phrase, a dense
computation, or the fit at known-good settings.  (Items on SLKL's scale are in
tests/test_slkl_reliability.py and tests/test_scale_equivariance.py.)
"""
import os

import numpy as np
import pytest
from fresh_python import run_python

import hkern


@pytest.fixture(scope="module")
def issue_data():
    """The issue's P: n = 60, d = 3."""
    r = np.random.default_rng(0)
    X = r.normal(size=(60, 3))
    y = np.sin(X[:, 0]) + 0.1 * r.normal(size=60)
    return X, y


# ------------------------------------------------------------- bug 2: comm not a communicator

NOT_COMMUNICATORS = ["world", 3, object()]


@pytest.mark.parametrize("comm", NOT_COMMUNICATORS, ids=["str", "int", "object"])
@pytest.mark.parametrize("fit", ["hierarchical", "nystrom_pcg", "oasis_mpi"])
def test_comm_must_be_a_communicator(issue_data, fit, comm):
    """fit_hierarchical(X, y, 8, comm="world") raised AttributeError: 'str' object has no
    attribute 'Get_size'.  Every comm that is not an mpi4py communicator (nor None) is a
    ValueError naming comm."""
    pytest.importorskip("mpi4py")
    from hkern.oasis.sharded import oasis_mpi
    X, y = issue_data
    calls = {
        "hierarchical": lambda: hkern.fit_hierarchical(X, y, 8, comm=comm),
        "nystrom_pcg": lambda: hkern.fit_nystrom(X, y, 8, solver="pcg", comm=comm),
        "oasis_mpi": lambda: oasis_mpi(X, 5, comm=comm),
    }
    with pytest.raises(ValueError, match="comm must be an mpi4py intracommunicator, got "
                                         + type(comm).__name__):
        calls[fit]()


def test_comm_null_is_refused(issue_data):
    pytest.importorskip("mpi4py")
    from mpi4py import MPI
    X, y = issue_data
    null = MPI.COMM_SELF.Split(MPI.UNDEFINED)          # what a rank outside a split receives
    assert null == MPI.COMM_NULL
    with pytest.raises(ValueError, match="comm is MPI.COMM_NULL"):
        hkern.fit_hierarchical(X, y, 8, comm=null)


def test_comm_self_still_fits(issue_data):
    """A real communicator passes the check: COMM_SELF gives the serial fit."""
    pytest.importorskip("mpi4py")
    from mpi4py import MPI
    X, y = issue_data
    ref = hkern.fit_hierarchical(X, y, 8, sigma=1.0, seed=0)
    model = hkern.fit_hierarchical(X, y, 8, sigma=1.0, seed=0, comm=MPI.COMM_SELF)
    assert np.array_equal(model.predict(X), ref.predict(X))


# ------------------------------------------------------------- bug 3: kernel_pca on shards

def test_kernel_pca_on_shards_says_it_is_not_available(issue_data):
    """ShardedHierarchicalKRR.kernel_pca raised AttributeError; now NotImplementedError saying
    it is not available on shards and what to do, for any arguments.  The serial fit of the
    same data (what the message points to) has it and agrees with the dense reference."""
    pytest.importorskip("mpi4py")
    from mpi4py import MPI
    X, y = issue_data
    sharded = hkern.fit_hierarchical(X, y, 8, sigma=1.0, seed=0, comm=MPI.COMM_SELF)
    for args in [(), (3,), (3, 1), ("bad",)]:
        with pytest.raises(NotImplementedError,
                           match="kernel_pca is not available on a model fitted on shards.*"
                                 "fit there without comm"):
            sharded.kernel_pca(*args)
    serial = hkern.fit_hierarchical(X, y, 8, sigma=1.0, seed=0)
    values, _ = serial.kernel_pca(3)
    n = len(y)
    K = serial.matvec(np.eye(n)) - serial.lam * np.eye(n)
    C = np.eye(n) - 1.0 / n
    ref = np.linalg.eigvalsh(C @ K @ C)[::-1][:3]
    assert np.allclose(values, ref, rtol=1e-8, atol=1e-10 * ref[0])


# ------------------------------------------------------------- bug 4: indefinite explicit matrix

ADAPTIVE = ["oasis", "greedy", "rpcholesky", "block_rpcholesky", "uniform"]


@pytest.mark.parametrize("method", ADAPTIVE)
def test_indefinite_matrix_is_refused(method):
    """K = I - 0.5 * ones (n = 60, smallest eigenvalue 1 - n/2 = -29) returned 1 column without
    complaint: every score is 0 after one column.  The residual G - G~ is then 0 on its
    diagonal and -1 off it, which no PSD matrix leaves."""
    n = 60
    K = np.eye(n) - 0.5 * np.ones((n, n))
    assert np.linalg.eigvalsh(K)[0] == pytest.approx(1 - n / 2)
    with pytest.raises(ValueError, match="not positive semidefinite"):
        hkern.select_columns(K, 10, method=method, kernel="precomputed", seed=0)
    if method == "oasis":
        with pytest.raises(ValueError, match="not positive semidefinite"):
            hkern.oasis(K, 10, kernel="precomputed", seed=0)


@pytest.mark.parametrize("method", ADAPTIVE)
def test_negative_two_by_two_minor_is_refused(method):
    """A PSD matrix with one pair of entries raised past sqrt(G_ii G_jj): indefinite, found in
    the O(n^2) validation whatever columns the selection would have picked."""
    A = np.random.default_rng(1).normal(size=(40, 40))
    G = A @ A.T
    G[0, 1] = G[1, 0] = 3 * G[0, 0]
    assert np.linalg.eigvalsh(G)[0] < -1
    with pytest.raises(ValueError, match="not positive semidefinite.*2 x 2 principal minor"):
        hkern.select_columns(G, 10, method=method, kernel="precomputed", seed=0)


@pytest.mark.parametrize("method", ["oasis", "greedy", "rpcholesky", "block_rpcholesky"])
def test_low_rank_psd_matrix_still_selects(method):
    """A PSD matrix of rank 5 (n = 60, duplicate rows included): the adaptive methods stop at
    5 columns without complaint and G~ equals G (the dense reference)."""
    B = np.random.default_rng(2).normal(size=(60, 5))
    B[7] = B[3]
    G = B @ B.T
    sel = hkern.select_columns(G, 10, method=method, kernel="precomputed", seed=0)
    assert len(sel.indices_) == 5
    assert np.abs(sel.approximation() - G).max() <= 1e-10 * np.abs(G).max()


def test_precomputed_kernel_matrix_selects_as_the_points(issue_data):
    """The checks change no selection: a kernel matrix passed as precomputed gives the
    columns the points give."""
    X, _ = issue_data
    K = hkern.kernel_matrix(X, sigma=1.0)
    for method in ["oasis", "greedy", "rpcholesky"]:
        a = hkern.select_columns(X, 20, method=method, sigma=1.0, seed=0)
        b = hkern.select_columns(K, 20, method=method, kernel="precomputed", seed=0)
        assert np.array_equal(a.indices_, b.indices_)


# ------------------------------------------------------------- bug 6: n_jobs beyond the CPUs

def test_n_jobs_is_capped_at_the_cpus():
    """n_jobs=k resolves to min(k, the CPUs the process may use)."""
    from hkern._threads import available_cpus, resolve_n_jobs
    cpus = available_cpus()
    assert 1 <= cpus <= len(os.sched_getaffinity(0))
    assert resolve_n_jobs(1000) == cpus
    assert resolve_n_jobs(cpus) == cpus and resolve_n_jobs(1) == 1


def test_n_jobs_1000_under_an_address_space_limit():
    """n_jobs=1000 under ulimit -v (3 GiB) killed the interpreter with 'libgomp: Thread creation
    failed'.  Now the fit runs, in a fresh interpreter so a crash fails only this test, and
    gives the n_jobs=1 fit's predictions bit for bit."""
    out = run_python("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
        import numpy as np, hkern
        r = np.random.default_rng(0)
        X = r.normal(size=(2000, 3))
        y = np.sin(X[:, 0])
        a = hkern.fit_hierarchical(X, y, 32, sigma=1.0, seed=0, n_jobs=1000)
        b = hkern.fit_hierarchical(X, y, 32, sigma=1.0, seed=0, n_jobs=1)
        print("same", np.array_equal(a.predict(X), b.predict(X)))
    """)
    assert out.returncode == 0, out.stderr
    assert "Thread creation failed" not in out.stderr
    assert out.stdout.split() == ["same", "True"]


# ------------------------------------------------------------- bug 5: ragged CSV files

def _write_gz(path, text):
    import gzip
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        fh.write(text)


def test_load_uci_ragged_csv_names_the_file_and_line(tmp_path):
    """numpy's raw 'the number of columns changed from 3 to 2 at row 3' (rows of data, no file
    name) became a ValueError naming the file and the line of the file (comments and blank
    lines counted, as an editor counts them)."""
    folder = tmp_path / "uci" / "ragged"
    _write_gz(folder / "data.csv.gz", "1,2,3\n4,5,6\n# a comment\n\n7,8\n")
    _write_gz(folder / "test_mask.csv.gz", "0\n1\n0\n")
    path = folder / "data.csv.gz"
    with pytest.raises(ValueError) as info:
        hkern.datasets.load_uci("ragged", data_dir=tmp_path)
    assert str(info.value) == (f"{path}: line 5 has 2 comma-separated values but line 1 has 3; "
                               "every row needs the same number of values")
    _write_gz(path, "1,2,3\n4,five,6\n7,8,9\n")
    with pytest.raises(ValueError, match=r"data.csv.gz: line 2, value 2: 'five' is not a number"):
        hkern.datasets.load_uci("ragged", data_dir=tmp_path)


def test_read_csv_reads_what_loadtxt_reads(tmp_path):
    """A well-formed file: exactly numpy.loadtxt's array (the fast path)."""
    from hkern._validation import read_csv
    path = tmp_path / "ok.csv"
    path.write_text("# header\n1.5,2,-3e4\n\n4,nan,6\n")
    ref = np.loadtxt(path, delimiter=",", ndmin=2)
    got = read_csv(path)
    assert got.shape == (2, 3) and np.array_equal(got, ref, equal_nan=True)


def test_oasis_command_line_ragged_csv(tmp_path):
    """python -m hkern.oasis on a ragged CSV: the usage error names the file and line."""
    pytest.importorskip("mpi4py")
    import subprocess
    import sys
    path = tmp_path / "X.csv"
    path.write_text("1,2,3\n4,5,6\n7,8\n")
    out = subprocess.run([sys.executable, "-m", "hkern.oasis", str(path), "--r", "2"],
                         capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(__file__))
    assert out.returncode == 2
    assert (f"{path}: line 3 has 2 comma-separated values but line 1 has 3" in out.stderr), \
        out.stderr
    assert "number of columns changed" not in out.stderr


# ------------------------------------------------------------- bug 7: kernel_pca at large k

@pytest.fixture(scope="module")
def pca_model():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 3))
    y = np.sin(X[:, 0])
    model = hkern.fit_hierarchical(X, y, r=16, sigma=1.0, lam=1e-2, seed=0)
    n = len(y)
    K = model.matvec(np.eye(n)) - model.lam * np.eye(n)        # K_hier, from its definition
    K = (K + K.T) / 2
    C = np.eye(n) - 1.0 / n
    values, vectors = np.linalg.eigh(C @ K @ C)
    return model, values[::-1], vectors[:, ::-1]


def _refuse(name):
    def refuse(*args, **kwargs):
        raise AssertionError(f"{name} should not run here")
    return refuse


def test_kernel_pca_dense_path_equals_the_dense_reference(pca_model, monkeypatch):
    """k >= n / 8 takes the dense eigensolver (Lanczos took 182 s for k = 1000 at n = 3000):
    the eigenpairs of C K_hier C from numpy's eigh of the n x n matrix."""
    model, ref_values, ref_vectors = pca_model
    from hkern.hierarchical.models import HierarchicalKRR
    monkeypatch.setattr(HierarchicalKRR, "_pca_lanczos", _refuse("Lanczos"))
    k = 100                                                     # n / 8 = 50
    values, vectors = model.kernel_pca(k)
    assert values.shape == (k,) and vectors.shape == (400, k)
    assert np.all(np.diff(values) <= 0)
    assert np.abs(values - ref_values[:k]).max() <= 1e-10 * ref_values[0]
    assert np.allclose(np.linalg.norm(vectors, axis=0), 1.0, atol=1e-12)
    # leading eigenvectors (well separated eigenvalues) agree up to sign
    cos = np.abs(np.einsum("ij,ij->j", vectors[:, :5], ref_vectors[:, :5]))
    assert np.all(cos >= 1 - 1e-8), cos
    # the same bits for any n_jobs
    model.n_jobs = 2
    values2, vectors2 = model.kernel_pca(k)
    model.n_jobs = None
    assert np.array_equal(values, values2) and np.array_equal(vectors, vectors2)


def test_kernel_pca_lanczos_below_the_crossover(pca_model, monkeypatch):
    """Below n / 8 components Lanczos runs (on one thread for this small n r) and agrees with
    the dense reference."""
    model, ref_values, _ = pca_model
    from hkern.hierarchical.models import HierarchicalKRR
    monkeypatch.setattr(HierarchicalKRR, "_pca_dense", _refuse("the dense eigensolver"))
    values, _ = model.kernel_pca(49)
    assert np.abs(values - ref_values[:49]).max() <= 1e-10 * ref_values[0]


def test_kernel_pca_falls_back_to_lanczos_without_memory(pca_model, monkeypatch):
    """When the n x n matrix does not fit in the memory available, Lanczos instead."""
    model, ref_values, _ = pca_model
    import hkern.hierarchical.models as api
    monkeypatch.setattr(api, "resolve_max_memory", lambda max_memory: 1 << 20)
    monkeypatch.setattr(api.HierarchicalKRR, "_pca_dense", _refuse("the dense eigensolver"))
    values, _ = model.kernel_pca(60)
    assert np.abs(values - ref_values[:60]).max() <= 1e-10 * ref_values[0]
