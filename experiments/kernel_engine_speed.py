"""Nanoseconds per kernel entry of the fused kernel-product engine, float64 and float32 (issues
19 and 32).

K(X, Z) u (``kernel_times``) and K(X, Z)^T (K(X, Z) u) in one pass (``kernel_normal_times``)
for the Gaussian kernel, n = 36 000 standard normal points, one right-hand side, d = 8, 16 and
32, Z the first m rows, one and two threads (each compared with the limit on as many cores).
Each product runs in double and in single precision (the same points rounded to float32)
alternately, three rounds, so that both see the same load; each figure is the median of its
three calls and the float32 / float64 ratio is the ratio of the medians.

The limit each is compared with: a Gaussian entry needs one exponential and the 2 d flops of
its squared distance, so no engine beats t_exp / 2 + 2 d / R on two cores, with t_exp the time
of one exponential per element on one core and R the GEMM rate of both cores (a 4096^3 dgemm or
sgemm), each the fastest of several runs (a limit is the best rate seen; the products are
medians).  t_exp is the faster of NumPy's exp and hkern's own vectorised Gaussian map (the
engine's exponential, hk_exp_core / hk_expf_core) on an L2-resident array of 32 768 elements,
each in its precision: NumPy's float64 exp is vectorised only with AVX-512, so on a machine
without it NumPy's rate would be no limit at all.  The script prints both rates, the bound and
the ratio to it.

    python experiments/kernel_engine_speed.py [--dims 8 16 32] [--sizes 2048 8192 36000]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from common import banner

from hkern.kernels import _kernels
from hkern.kernels._api import _kernel_matvec_trusted, _kernel_normal_times_trusted

GAUSSIAN, SIGMA, N = 0, 2.0, 36_000
PRECISIONS = {"float64": np.float64, "float32": np.float32}


def seconds(call, repeats=3, best=False):
    """Median (or, for a limit, the fastest) of ``repeats`` timed calls."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return float(np.min(times) if best else np.median(times))


def exp_seconds_per_element(dtype):
    """(NumPy's exp, hkern's Gaussian map) on one core, per element, on an array that stays in
    L2 (32 768 elements of ``dtype``), each the fastest of seven runs of 200 calls."""
    from threadpoolctl import threadpool_limits
    x = (-np.random.default_rng(1).random(32_768) * 10).astype(dtype)
    out = np.empty_like(x)
    s = (np.random.default_rng(1).random(32_768) * 10).astype(dtype)
    with threadpool_limits(1):
        numpy_exp = seconds(lambda: [np.exp(x, out=out) for _ in range(200)], 7, best=True)
    # In place, 200 times: after the first call the values are kernel values in (0, 1], whose
    # map takes the same branch-free path (no entry needs the scalar fix-up).
    own = seconds(lambda: [_kernels.map_values(GAUSSIAN, s, True) for _ in range(200)], 7,
                  best=True)
    return numpy_exp / (200 * x.size), own / (200 * x.size)


def gemm_flops_per_second(dtype, threads=None):
    """GEMM rate of a 4096^3 product, on all cores or on ``threads``."""
    from threadpoolctl import threadpool_limits
    a = np.random.default_rng(2).standard_normal((4096, 4096)).astype(dtype)
    with threadpool_limits(threads):
        return 2 * 4096**3 / seconds(lambda: a @ a, 5, best=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2048, 8192, N])
    args = parser.parse_args()
    print(banner(), flush=True)
    with open("/proc/loadavg") as f:     # another job on the machine shows here
        print("load average at the start:", " ".join(f.read().split()[:3]), flush=True)
    limit, limit1 = {}, {}
    for name, dtype in PRECISIONS.items():
        numpy_exp, own_exp = exp_seconds_per_element(dtype)
        t_exp, rate = min(numpy_exp, own_exp), gemm_flops_per_second(dtype)
        rate1 = gemm_flops_per_second(dtype, 1)
        print(f"{name}: exp {numpy_exp * 1e9:.3f} ns per element (NumPy), {own_exp * 1e9:.3f} "
              f"(hkern's map) on one core; gemm {rate / 1e9:.0f} GFLOP/s on all cores, "
              f"{rate1 / 1e9:.0f} on one", flush=True)
        for d in args.dims:
            # two cores; and one core (the one-thread runs: on a loaded machine one thread is
            # likelier than two to get a whole core, so that ratio is the fairer one there)
            limit[name, d] = (t_exp / 2 + 2 * d / rate) * 1e9
            limit1[name, d] = (t_exp + 2 * d / rate1) * 1e9
            print(f"{name} d={d}: limit {limit[name, d]:.3f} ns/entry on two cores, "
                  f"{limit1[name, d]:.3f} on one", flush=True)
    rng = np.random.default_rng(0)
    for d in args.dims:
        X64 = rng.standard_normal((N, d))
        X32 = X64.astype(np.float32)
        for m in args.sizes:
            u = rng.standard_normal((m, 1))
            data = {"float64": (X64, X64[:m].copy()), "float32": (X32, X32[:m].copy())}
            products = {
                "K u": lambda X, Z, t: _kernel_matvec_trusted(GAUSSIAN, SIGMA, X, Z, u, t),
                "K^T (K u)": lambda X, Z, t: _kernel_normal_times_trusted(GAUSSIAN, SIGMA, X, Z,
                                                                          u, None, t)}
            for pname, product in products.items():
                for threads in (1, 2):
                    times = {name: [] for name in PRECISIONS}
                    for _ in range(3):      # interleaved: both precisions see the same load
                        for name in PRECISIONS:
                            X, Z = data[name]
                            times[name].append(seconds(lambda: product(X, Z, threads), 1))
                    ns = {name: float(np.median(t)) / (N * m) * 1e9
                          for name, t in times.items()}
                    line = f"d={d} m={m} {pname} threads={threads}:"
                    for name in PRECISIONS:
                        lim = limit[name, d] if threads == 2 else limit1[name, d]
                        line += (f" {name} {ns[name]:.3f} ns/entry ({ns[name] / lim:.2f} x its "
                                 "limit);")
                    line += f" float32/float64 {ns['float32'] / ns['float64']:.2f}"
                    print(line, flush=True)


if __name__ == "__main__":
    main()
