"""Regression tracking that does not cry wolf: hkern's time as a ratio to a reference job timed
beside it in the same process (issue 32, item 5).

A plain ``time_`` benchmark changes with the machine's load. On 2 cores one other job can make
a run 1.1x to 2.6x slower, so ``asv continuous --factor 1.1`` flagged 10 benchmarks between two
commits that changed no compiled code. Two things make these robust:

* **CPU time of one thread.** Each call runs with ``n_jobs=1`` and is timed by the process's
  user CPU time, which counts the work done, not the time spent waiting for a core that another
  job holds, nor the kernel's time in page faults (which depends on what the allocator kept).
  Wall time on 2 threads is not robust: an OpenMP or BLAS thread whose partner is descheduled
  spins, and the ratios of a first version on 2 threads ranged 1.4x to 3.6x while the test
  suite ran beside them.
* **A ratio to a reference.** Each sample is ``cpu(hkern) / cpu(reference)``. The reference is
  a fixed job that hkern's code cannot change: a NumPy/OpenBLAS matrix product on one thread.
  Reference and hkern are timed alternately (reference, hkern, reference) and the benchmark
  reports the median over ``ROUNDS`` rounds, so what the other job does to the caches, the
  memory bandwidth and the clock speed reaches both.

A slower hkern raises the ratio; a slower or busier machine changes both times alike. The
multi-threaded timings stay in the ``time_`` benchmarks of the other modules.

Each ``track_`` value is that median ratio (unit: "ratio"). The command that catches
regressions, and what it gave on this project's machine, are in ``asv_bench/README.md``
("Catching regressions").
"""
import resource
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

import hkern

from .common import SMOKE, kin40k

# Rounds of (reference, hkern, reference) per benchmark; one in the CI smoke run.
ROUNDS = 1 if SMOKE else 15
N_JOBS = 1
SIGMA = 1.41
LAM = 1e-2


def cpu_seconds():
    """User CPU seconds of this process so far (every thread)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


class _Reference:
    """The reference job: C = A A for A (n, n) on N_JOBS BLAS threads.  n is fixed per
    benchmark (a ratio is only comparable between runs with the same reference), chosen so
    that the product takes about as long as the hkern call it is set against, and both see the
    same moments of load."""

    def __init__(self, n):
        self._limits = threadpool_limits(limits=N_JOBS, user_api="blas")
        self._A = np.random.default_rng(0).standard_normal((n, n))
        self._C = np.empty_like(self._A)

    def __call__(self):
        np.matmul(self._A, self._A, out=self._C)

    def close(self):
        self._limits.restore_original_limits()


def interleaved_ratio(call, reference, rounds=ROUNDS):
    """Median over ``rounds`` of cpu(call) / mean(cpu(reference) just before and after)."""
    ratios = []
    for _ in range(rounds):
        t0 = cpu_seconds()
        reference()
        t1 = cpu_seconds()
        call()
        t2 = cpu_seconds()
        reference()
        t3 = cpu_seconds()
        ratios.append((t2 - t1) / (0.5 * ((t1 - t0) + (t3 - t2))))
    return float(np.median(ratios))


class _RatioBenchmark:
    """Timing settings: one process, the rounds inside the benchmark itself."""

    unit = "ratio"
    processes = 1
    timeout = 600

    # {benchmark name: rows of its reference product}, set by subclasses.
    reference_sizes = {}

    def _calls(self):
        """{benchmark name: the hkern call it times}; set up by subclasses."""
        raise NotImplementedError

    def setup(self):
        warnings.simplefilter("ignore")          # fixed iteration counts: ConvergenceWarning
        self.calls = self._calls()
        self.reference = {name: _Reference(self.reference_sizes[name]) for name in self.calls}
        for name, call in self.calls.items():    # warm: first-touch pages, imports
            call()
            self.reference[name]()

    def teardown(self):
        for reference in self.reference.values():
            reference.close()

    def _ratio(self, name):
        return interleaved_ratio(self.calls[name], self.reference[name])


class KernelEngine(_RatioBenchmark):
    """The fused Gaussian K u (20 000 x 4 000 entries never stored, d = 8) and a stored
    2 000 x 2 000 kernel matrix, on kin40k points."""

    reference_sizes = {"matvec": 1600, "matrix": 1000}

    def _calls(self):
        X = kin40k()[0]
        u = np.ones((4000, 1))
        out = np.empty((2000, 2000))

        def matvec():
            hkern.kernel_matvec(X[:20000], X[:4000], u, sigma=SIGMA, n_jobs=N_JOBS)

        def matrix():
            out[:] = hkern.kernel_matrix(X[:2000], sigma=SIGMA, n_jobs=N_JOBS)

        return {"matvec": matvec, "matrix": matrix}

    def track_kernel_matvec(self):
        return self._ratio("matvec")

    def track_kernel_matrix(self):
        return self._ratio("matrix")


class Solvers(_RatioBenchmark):
    """Fixed-work iterative fits on kin40k (tol far below reach, so every fit runs max_iter
    iterations): exact PCG on 4 000 points and FALKON with 1 024 centres on 10 000 points,
    5 iterations each."""

    reference_sizes = {"pcg": 2000, "falkon": 1600}

    def _calls(self):
        X, y = kin40k()[:2]

        def pcg():
            hkern.fit_exact(X[:4000], y[:4000], solver="pcg", sigma=SIGMA, lam=LAM, tol=1e-14,
                            max_iter=5, seed=0, n_jobs=N_JOBS)

        def falkon():
            hkern.fit_nystrom(X[:10000], y[:10000], 1024, solver="pcg", sigma=SIGMA, lam=LAM,
                              tol=1e-14, max_iter=5, seed=0, n_jobs=N_JOBS)

        return {"pcg": pcg, "falkon": falkon}

    def track_exact_pcg(self):
        return self._ratio("pcg")

    def track_falkon(self):
        return self._ratio("falkon")


class Hierarchical(_RatioBenchmark):
    """HCK on kin40k: the fit (8 000 points, r = 128) and a solve with 4 right-hand sides on
    the fitted model."""

    reference_sizes = {"fit": 1300, "solve": 650}

    def _calls(self):
        X, y = kin40k()[:2]
        model = hkern.fit_hierarchical(X[:8000], y[:8000], r=128, sigma=SIGMA, lam=LAM, seed=0,
                                       n_jobs=N_JOBS)
        B = np.random.default_rng(0).standard_normal((8000, 4))

        def fit():
            hkern.fit_hierarchical(X[:8000], y[:8000], r=128, sigma=SIGMA, lam=LAM, seed=0,
                                   n_jobs=N_JOBS)

        def solve():
            model.solve(B)

        return {"fit": fit, "solve": solve}

    def track_hck_fit(self):
        return self._ratio("fit")

    def track_hck_solve(self):
        return self._ratio("solve")


class SinglePrecision(_RatioBenchmark):
    """The single-precision engine and the mixed-precision solver it serves: the fused float32
    Gaussian K u (36 000 x 12 000 entries never stored, d = 8) and FALKON in mixed precision
    (1 024 centres on 20 000 points, 5 iterations: the float32 factor pair, the fused float32
    passes over C, the double-arithmetic solves of float32 triangles), on kin40k points."""

    reference_sizes = {"matvec": 1500, "falkon": 1500}

    def _calls(self):
        X, y = kin40k()[:2]
        X32 = X.astype(np.float32)
        u = np.ones(12000)

        def matvec():
            hkern.kernel_matvec(X32, X32[:12000], u, sigma=SIGMA, n_jobs=N_JOBS)

        def falkon():
            hkern.fit_nystrom(X[:20000], y[:20000], 1024, solver="pcg", precision="mixed",
                              sigma=SIGMA, lam=LAM, tol=1e-14, max_iter=5, seed=0,
                              n_jobs=N_JOBS)

        return {"matvec": matvec, "falkon": falkon}

    def track_kernel_matvec_float32(self):
        return self._ratio("matvec")

    def track_falkon_mixed(self):
        return self._ratio("falkon")
