"""Nanoseconds per kernel entry of the fused kernel-product engine (issue 19).

K(X, Z) u (``kernel_times``) and K(X, Z)^T (K(X, Z) u) in one pass (``kernel_normal_times``)
for the Gaussian kernel, n = 36 000 standard normal points, one right-hand side, d = 8 and 16,
Z the first m rows, one and two threads; each the median of three calls.

The limit it is compared with: a Gaussian entry needs one exponential and the 2 d flops of its
squared distance, so no engine beats t_exp / 2 + 2 d / R on two cores, with t_exp NumPy's
vectorised exp per element on one core (an L2-resident array, AVX-512 code) and R the dgemm
rate of both cores (a 4096^3 product), each the fastest of several runs (a limit is the best
rate seen; the products are medians).  The script prints that bound and the ratio to it.

    python experiments/kernel_engine_speed.py
"""
from __future__ import annotations

import time

import numpy as np
from common import banner

from hkern.kernels._api import _kernel_matvec_trusted, _kernel_normal_times_trusted

GAUSSIAN, SIGMA, N = 0, 2.0, 36_000


def seconds(call, repeats=3, best=False):
    """Median (or, for a limit, the fastest) of ``repeats`` timed calls."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return float(np.min(times) if best else np.median(times))


def exp_seconds_per_element():
    """NumPy's exp on one core, per element, on an array that stays in L2 (32 768 doubles)."""
    from threadpoolctl import threadpool_limits
    x = -np.random.default_rng(1).random(32_768) * 10
    out = np.empty_like(x)
    with threadpool_limits(1):
        return seconds(lambda: [np.exp(x, out=out) for _ in range(200)], 7, best=True) / (
            200 * x.size)


def dgemm_flops_per_second():
    a = np.random.default_rng(2).standard_normal((4096, 4096))
    return 2 * 4096**3 / seconds(lambda: a @ a, 5, best=True)


def main():
    print(banner(), flush=True)
    t_exp, rate = exp_seconds_per_element(), dgemm_flops_per_second()
    print(f"exp: {t_exp * 1e9:.3f} ns per element on one core; dgemm: {rate / 1e9:.0f} GFLOP/s "
          "on all cores", flush=True)
    limit = {d: (t_exp / 2 + 2 * d / rate) * 1e9 for d in (8, 16)}
    for d, ns in limit.items():
        print(f"d={d}: limit {ns:.3f} ns/entry on two cores", flush=True)
    rng = np.random.default_rng(0)
    for d in (8, 16):
        X = rng.standard_normal((N, d))
        for m in (2048, 8192, N):
            Z = X[:m].copy()
            u = rng.standard_normal((m, 1))
            products = {
                "K u": lambda t: _kernel_matvec_trusted(GAUSSIAN, SIGMA, X, Z, u, t),
                "K^T (K u)": lambda t: _kernel_normal_times_trusted(GAUSSIAN, SIGMA, X, Z, u,
                                                                    None, t)}
            for name, product in products.items():
                for threads in (1, 2):
                    ns = seconds(lambda: product(threads)) / (N * m) * 1e9
                    ratio = f" ({ns / limit[d]:.2f} x the limit)" if threads == 2 else ""
                    print(f"d={d} m={m} {name} threads={threads}: {ns:.3f} ns/entry{ratio}",
                          flush=True)


if __name__ == "__main__":
    main()
