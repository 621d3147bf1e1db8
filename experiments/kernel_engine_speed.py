"""Nanoseconds per kernel entry of the fused kernel-product engine (issue 19).

K(X, Z) u (``kernel_times``) and K(X, Z)^T (K(X, Z) u) in one pass (``kernel_normal_times``)
for the Gaussian kernel, n = 36 000 standard normal points, one right-hand side, d = 8 and 16,
Z the first m rows, one and two threads; each the median of three calls.

    python experiments/kernel_engine_speed.py
"""
from __future__ import annotations

import time

import numpy as np
from common import banner

from hkern.kernels._api import _kernel_matvec_trusted, _kernel_normal_times_trusted

GAUSSIAN, SIGMA, N = 0, 2.0, 36_000


def median_seconds(call, repeats=3):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    print(banner(), flush=True)
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
                    ns = median_seconds(lambda: product(threads)) / (N * m) * 1e9
                    print(f"d={d} m={m} {name} threads={threads}: {ns:.3f} ns/entry", flush=True)


if __name__ == "__main__":
    main()
