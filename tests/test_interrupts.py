"""Ctrl-C during a long compiled call (issue 31, item 2; the rule in doc/design.md).

hkern's own loops: a child interpreter starts a call that would take several seconds, the test
sends it SIGINT 1.5 s later, and the child must catch KeyboardInterrupt within 1 s of the signal
(the compiled loops check for signals between units of work of well under 0.1 s), then run a
smaller call of the same kind that must give the same bits as in this process, which was never
interrupted (no thread of the interrupted call is left running or has left state behind).

A single LAPACK call is not cut (as in NumPy and SciPy): it runs to its end, and the
KeyboardInterrupt is raised when it returns.

The only timed assertion is that 1 s bound, measured from the signal, with the child's clock
(the same machine's) read when the exception arrives.
"""
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from fresh_python import interrupt_child

import hkern
from hkern.datasets import load_uci, standardize

HERE = os.path.dirname(os.path.abspath(__file__))
# Seconds from the signal to the child's KeyboardInterrupt: the bound of issue 31 (1 s).
BOUND = 1.0
WAIT = 1.5

PRELUDE = """
import hashlib, sys, time
import numpy as np
import hkern
from hkern.datasets import load_uci, standardize

def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.float64).tobytes()).hexdigest()
"""

# Each case: (long call, small call returning an array), run with n_jobs=2; sized for a few
# seconds or more on this project's 2-core machines (a Gaussian kernel entry takes ~1.7 ns).
CASES = {
    # 6000 x 6000 entries at d = 4000: 2.9e11 flops of GEMM in the kernel tiles.
    "kernel_matrix": (
        "rng = np.random.default_rng(0); X = rng.standard_normal((6000, 4000))\n"
        "long = lambda: hkern.kernel_matrix(X, sigma=60.0, n_jobs=2)",
        "hkern.kernel_matrix(X[:300, :50], X[:200, :50], sigma=3.0, n_jobs=2)"),
    # 10^10 entries never stored: one fused K u pass.
    "kernel_matvec": (
        "rng = np.random.default_rng(0); X = rng.standard_normal((100000, 8))\n"
        "long = lambda: hkern.kernel_matvec(X, X, np.ones(100000), sigma=2.0, n_jobs=2)",
        "hkern.kernel_matvec(X[:2000], X[:3000], np.ones(3000), sigma=2.0, n_jobs=2)"),
    # The HCK factorisation (one compiled call) on 20 000 kin40k points.
    "fit_hierarchical": (
        "X, y, Xte, _, _ = standardize(*load_uci('kin40k', split=0))\n"
        "long = lambda: hkern.fit_hierarchical(X[:20000], y[:20000], r=1024, seed=0, n_jobs=2,"
        "sigma=1.0, lam=1e-2)",
        "hkern.fit_hierarchical(X[:3000], y[:3000], r=128, seed=0, n_jobs=2,"
        "sigma=1.0, lam=1e-2).predict(Xte[:200])"),
    # The tiled Cholesky of a 12 000 x 12 000 kernel matrix (5.8e11 flops).
    "fit_exact_cholesky": (
        "X, y, Xte, _, _ = standardize(*load_uci('kin40k', split=0))\n"
        "long = lambda: hkern.fit_exact(X[:12000], y[:12000], solver='direct', n_jobs=2,"
        "sigma=1.0, lam=1e-2)",
        "hkern.fit_exact(X[:1500], y[:1500], solver='direct', n_jobs=2,"
        "sigma=1.0, lam=1e-2).predict(Xte[:200])"),
    # PCG with its preconditioner on 20 000 points.
    "fit_exact_pcg": (
        "X, y, Xte, _, _ = standardize(*load_uci('kin40k', split=0))\n"
        "long = lambda: hkern.fit_exact(X[:20000], y[:20000], solver='pcg', seed=0, n_jobs=2,"
        "sigma=1.0, lam=1e-2)",
        "hkern.fit_exact(X[:2000], y[:2000], solver='pcg', seed=0, n_jobs=2, sigma=1.0, lam=1e-2)"
        ".predict(Xte[:200])"),
    # SLKL's coordinate descent: 8000 steps (compiled runs of up to 4096) with kernel columns
    # of 20 000 entries computed on the fly; 11.6 s uninterrupted on an idle machine (the
    # 5000-row case first sized here took 0.8 s there and finished before the signal).
    "fit_slkl": (
        "X, y, Xte, _, _ = standardize(*load_uci('kin40k', split=0))\n"
        "long = lambda: hkern.fit_slkl(X[:20000], y[:20000], r=1024, nu=1e-4, seed=0, "
        "n_jobs=2, tol=None, max_iter=8000, precompute_columns=False, sigma=1.0, lam=1.0)",
        "hkern.fit_slkl(X[:1000], y[:1000], r=128, seed=0, n_jobs=2,"
        "sigma=1.0, lam=1.0).predict(Xte[:200])"),
    # MEKA's basis blocks W = K(X_s, Z_s) F on two clusters of ~144 000 points (the 36 000
    # kin40k training points eight times, jittered), rank 512 each: 8.9 s uninterrupted on an
    # idle machine, fill_bases from ~3 s on (four times the points took 4.8 s, too close to
    # the signal at 4 s; rank 1024 put the signal in an eigendecomposition, one LAPACK call,
    # which runs to its end: test_ctrl_c_in_a_lapack_call_is_raised_when_it_returns).
    "meka": (
        "X, y, Xte, _, _ = standardize(*load_uci('kin40k', split=0))\n"
        "X4 = np.tile(X, (8, 1))\n"
        "X4 += 1e-3 * np.random.default_rng(0).standard_normal(X4.shape)\n"
        "long = lambda: hkern.meka(X4, 512, n_clusters=2, seed=0, n_jobs=2)",
        "hkern.fit_meka(X[:3000], y[:3000], 128, n_clusters=4, seed=0, n_jobs=2,"
        "sigma=1.0, lam=1e-2)"
        ".predict(Xte[:200])"),
}
# Seconds before the signal where 1.5 s would still be in Python code (the call's clustering
# and eigendecompositions), so that the signal lands in the compiled loop under test.
WAITS = {"meka": 4.0}


def _child_code(setup, small, after=""):
    return PRELUDE + setup + textwrap.dedent(f"""
        print("start", flush=True)
        try:
            long()
            print("finished", flush=True)
        except KeyboardInterrupt:
            print("caught", repr(time.time()), flush=True)
        print("digest", digest({small}), flush=True)
        """) + after


def _digest(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.float64).tobytes()).hexdigest()


def _small_here(name):
    """The small call of a case in this (never interrupted) process."""
    rng = np.random.default_rng(0)
    if name == "kernel_matrix":
        X = rng.standard_normal((6000, 4000))
        return hkern.kernel_matrix(X[:300, :50], X[:200, :50], sigma=3.0, n_jobs=2)
    if name == "kernel_matvec":
        X = rng.standard_normal((100000, 8))
        return hkern.kernel_matvec(X[:2000], X[:3000], np.ones(3000), sigma=2.0, n_jobs=2)
    X, y, Xte, _, _ = standardize(*load_uci("kin40k", split=0))
    if name == "fit_hierarchical":
        return hkern.fit_hierarchical(X[:3000], y[:3000], r=128, seed=0,
                                      n_jobs=2, sigma=1.0, lam=1e-2).predict(Xte[:200])
    if name == "fit_slkl":
        return hkern.fit_slkl(X[:1000], y[:1000], r=128, seed=0, n_jobs=2, sigma=1.0,
                              lam=1.0).predict(Xte[:200])
    if name == "meka":
        return hkern.fit_meka(X[:3000], y[:3000], 128, n_clusters=4, seed=0,
                              n_jobs=2, sigma=1.0, lam=1e-2).predict(Xte[:200])
    if name == "fit_exact_cholesky":
        return hkern.fit_exact(X[:1500], y[:1500], solver="direct", n_jobs=2, sigma=1.0,
                               lam=1e-2).predict(Xte[:200])
    return hkern.fit_exact(X[:2000], y[:2000], solver="pcg", seed=0, n_jobs=2, sigma=1.0,
                           lam=1e-2).predict(Xte[:200])


@pytest.mark.parametrize("name", sorted(CASES))
def test_ctrl_c_stops_the_call_and_the_next_call_works(name):
    setup, small = CASES[name]
    lines, sent, out, err = interrupt_child(_child_code(setup, small),
                                            wait=WAITS.get(name, WAIT))
    assert "caught" in lines, f"the call was not interrupted: {out!r} {err[-2000:]!r}"
    latency = float(lines["caught"]) - sent
    assert latency < BOUND, f"KeyboardInterrupt came {latency:.2f} s after SIGINT"
    assert lines["digest"] == _digest(_small_here(name))


def test_ctrl_c_in_a_lapack_call_is_raised_when_it_returns():
    """One LAPACK call (dsyevd of order 4000 on one thread, several seconds) is not cut: the
    SIGINT at 1.5 s lets it finish (A, worked on in place, holds the eigenvectors: orthonormal
    rows that diagonalise the matrix), and the KeyboardInterrupt is raised when it returns,
    before hkern hands back a result; the next call gives the same bits as here."""
    setup = textwrap.dedent("""
        from hkern import _linalg
        rng = np.random.default_rng(0); A0 = rng.standard_normal((4000, 4000)); A0 += A0.T
        A = A0.copy()
        started = time.time()
        long = lambda: _linalg.eigh(A, overwrite_a=True)
        """)
    small = "_linalg.eigh(A0[:300, :300])[1]"
    check = textwrap.dedent("""
        V = A.T
        print("orthonormal", bool(np.abs(V.T @ V - np.eye(4000)).max() < 1e-10), flush=True)
        D = V.T @ A0 @ V
        off = np.abs(D - np.diag(np.diag(D))).max() / np.abs(A0).max()
        print("diagonalises", bool(off < 1e-10), flush=True)
        """)
    lines, sent, out, err = interrupt_child(_child_code(setup, small, check), wait=WAIT)
    assert "caught" in lines, f"no KeyboardInterrupt: {out!r} {err[-2000:]!r}"
    assert lines["orthonormal"] == "True" and lines["diagonalises"] == "True", out
    from hkern import _linalg
    A0 = np.random.default_rng(0).standard_normal((4000, 4000))
    A0 += A0.T
    assert lines["digest"] == _digest(_linalg.eigh(A0[:300, :300])[1])


def _running(pid):
    """True while process pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return f.read().split("State:")[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


# Seconds within which SIGINT must end mpiexec and every rank.
MPI_BOUND = 5.0


@pytest.mark.parametrize("target", ["every rank", "rank 1"])
def test_ctrl_c_ends_every_mpi_rank(target, tmp_path):
    """SIGINT to mpiexec's process group (Ctrl-C in a terminal: every rank and mpiexec get it),
    or to one rank while the other works on or waits in a collective: the interrupted rank
    reports and calls comm.Abort (hkern._mpi.every_rank_stops), and no process is left."""
    pytest.importorskip("mpi4py", reason="needs the optional extra hkern[mpi]")
    from mpi_records import ENV, MPIEXEC
    if MPIEXEC is None:
        pytest.skip("mpiexec not found (install hkern[mpi])")
    child = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable,
                              os.path.join(HERE, "mpi_interrupt_run.py"), str(tmp_path)],
                             cwd=HERE, env=ENV, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    starts = [tmp_path / f"start-{rank}" for rank in (0, 1)]
    try:
        deadline = time.monotonic() + 60
        while not all(f.exists() and f.read_text() for f in starts):
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()
            time.sleep(0.05)
        pids = [int(f.read_text()) for f in starts]
        time.sleep(WAIT)
        sent = time.monotonic()
        if target == "every rank":
            os.killpg(child.pid, signal.SIGINT)
        else:
            os.kill(pids[1], signal.SIGINT)
        out, err = child.communicate(timeout=60)
        while any(_running(pid) for pid in pids) and time.monotonic() - sent < 30:
            time.sleep(0.05)
        ended = time.monotonic() - sent
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    assert not list(tmp_path.glob("finished-*")), "the fit was not interrupted"
    assert child.returncode != 0
    assert not any(_running(pid) for pid in pids), "a rank is still running"
    assert ended < MPI_BOUND, f"the ranks ended {ended:.2f} s after SIGINT"
