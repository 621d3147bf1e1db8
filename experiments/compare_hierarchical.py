"""HCK acceptance measurements, side by side, in one process run.

    python experiments/compare_hierarchical.py [--quick]        # about 5 minutes on 2 cores

1. kin40k split 0 (X, y standardised with training statistics): sigma and lam tuned on a
   validation split carved from the training set (never the test set) for HCK (r = 256, 512),
   the independent kernel (same r) and Nystrom (r = 1024); test RMSE, fit and predict seconds.
2. The machine's dgemm rate (4096^3, 2 threads) and HCK's construction (HCKOperator) in GFLOP/s,
   counting only BLAS/LAPACK flops (kernel evaluations count as zero): the whole construction
   and its inversion phase alone (the arithmetic after the kernel blocks are instantiated, as
   the paper separates "instantiating A" from "matrix inversion"), with OpenMP over tree nodes
   + single-threaded BLAS against one thread over the nodes + threaded BLAS, for several r.
3. Synthetic data (hkern.datasets.make_regression, d = 8), r = 128: fit time for
   n = 125 000 ... 1 000 000 and peak memory against 1.5 (4 n r + n d) 8 bytes.

Prints markdown.  ``--quick`` skips the n = 10^6 fit and uses smaller grids.
"""
from __future__ import annotations

import argparse

import numpy as np
from common import (
    banner,
    best_time,
    blas_threads,
    load_standardized,
    resolve_n_jobs,
    rmse,
    timed_fit,
    tune,
    validation_split,
)
from hkern.hierarchical._hck import HCKOperator

import hkern
from hkern.datasets import make_regression
from hkern.hierarchical import _tree
from hkern.hierarchical.factor import build_tree

# ---------------------------------------------------------------------------------------------
# 1. Accuracy on kin40k
# ---------------------------------------------------------------------------------------------

def accuracy(quick):
    X_train, y_train, X_test, y_test, _ = load_standardized("kin40k")
    fit, val = validation_split(len(y_train), seed=0, sort=False)
    sigmas = (1.0, 1.5, 2.0) if quick else (0.75, 1.0, 1.5, 2.0, 3.0)
    lams = (1e-3, 1e-2) if quick else (1e-3, 1e-2, 1e-1)
    methods = [("hck", 256), ("hck", 512), ("independent", 256), ("independent", 512),
               ("nystrom", 1024)]
    fits = {"hck": hkern.fit_hierarchical, "independent": hkern.fit_independent,
            "nystrom": hkern.fit_nystrom}
    print("## 1. kin40k split 0: test RMSE with validation-tuned sigma, lam\n")
    print(f"Grid sigma in {sigmas}, lam in {lams}; validation = {len(val)} of the "
          f"{len(y_train)} training points, models fitted on the other {len(fit)}.\n")
    print("| method | r | sigma | lam | validation RMSE | test RMSE | fit s | predict s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    grid = [dict(sigma=sigma, lam=lam) for sigma in sigmas for lam in lams]
    for name, r in methods:
        best, val_rmse, _ = tune(lambda X, y, **p: fits[name](X, y, r=r, seed=0, **p),
                                 X_train, y_train, fit, val, grid)
        sigma, lam = best["sigma"], best["lam"]
        t_fit, model = best_time(
            lambda: fits[name](X_train, y_train, r=r, sigma=sigma, lam=lam, seed=0))
        t_pred, pred = best_time(lambda: model.predict(X_test))
        print(f"| {name} | {r} | {sigma:g} | {lam:g} | {val_rmse:.4f} | "
              f"{rmse(pred, y_test):.4f} | {t_fit:.2f} | {t_pred:.3f} |")
    print()


# ---------------------------------------------------------------------------------------------
# 2. GFLOP/s of the inversion phase, and how to spend the threads
# ---------------------------------------------------------------------------------------------

def dgemm_rate(n_threads):
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((4096, 4096)), rng.standard_normal((4096, 4096))
    with blas_threads(n_threads):
        A @ B
        t, _ = best_time(lambda: A @ B, 3)
    return 2 * 4096**3 / t / 1e9


def gflops(quick):
    n_threads = resolve_n_jobs(None)
    peak = dgemm_rate(n_threads)
    print(f"## 2. Inversion phase GFLOP/s (n = {200_000 if not quick else 100_000}, d = 8)\n")
    print(f"Machine dgemm (4096 x 4096 x 4096, {n_threads} threads, OpenBLAS through NumPy): "
          f"**{peak:.1f} GFLOP/s**; one thread: {dgemm_rate(1):.1f} GFLOP/s.\n")
    print("Construction = HCKOperator: kernel blocks instantiated into the factor buffers (the "
          "first touch of the factor memory included), then the inversion phase: Cholesky "
          "factors, Woodbury factors and log-determinant (HCKOperator.construction_seconds "
          "times the two phases).  Flops: BLAS/LAPACK only, counted from the node sizes "
          "(HCKOperator.construction_flops).  Best of 3 by construction time (this VM's "
          "page-fault cost varies run to run by up to 2x).\n")
    print("| r | depth | GFLOP | construction s | instantiate s | inversion s | inversion GFLOP/s "
          "| % of dgemm | construction GFLOP/s | % of dgemm | 1 thread over nodes, threaded "
          "BLAS: construction s | inversion GFLOP/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    n = 100_000 if quick else 200_000
    X, _ = make_regression(n, d=8, seed=1)
    for r in (64, 128, 256, 512):
        X_tree, tree = build_tree(X, r, None, "random", np.random.default_rng(0), n_threads)
        depth = tree["depth"]
        uniforms = np.random.default_rng(1).random(((1 << depth) - 1, r))
        lm_off, lm = _tree.select_landmarks(tree["start"], tree["count"], depth, r, uniforms,
                                            n_threads)
        def build(omp, blas):
            with blas_threads(blas):
                return HCKOperator(X_tree, depth, tree["start"], tree["count"], lm_off, lm, 0,
                                   1.0, 1e-2, 1e-8, omp)

        t_nodes, op = best_time(lambda: build(n_threads, 1), 3)
        t_blas, op_blas = best_time(lambda: build(1, n_threads), 3)
        phases, phases_blas = op.construction_seconds, op_blas.construction_seconds
        flops = op.construction_flops() / 1e9
        inv_rate = flops / phases["invert"]
        print(f"| {r} | {depth} | {flops:.1f} | {t_nodes:.2f} | {phases['instantiate']:.2f} | "
              f"{phases['invert']:.2f} | {inv_rate:.1f} | {100 * inv_rate / peak:.0f}% | "
              f"{flops / t_nodes:.1f} | {100 * flops / t_nodes / peak:.0f}% | {t_blas:.2f} | "
              f"{flops / phases_blas['invert']:.1f} |")
    print()


# ---------------------------------------------------------------------------------------------
# 3. Scaling in n and memory
# ---------------------------------------------------------------------------------------------

def scaling(quick):
    sizes = (125_000, 250_000, 500_000) + (() if quick else (1_000_000,))
    r, d = 128, 8
    print(f"## 3. Fit time and peak memory against n (r = {r}, d = {d}, synthetic)\n")
    print("Peak = resident memory above the level before the fit (the data X, y already "
          "allocated); bound = 1.5 (4 n r + n d) 8 bytes.\n")
    print("| n | depth | fit s | ratio to n = 125 000 | peak GiB | bound GiB | model GiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    first = None
    for n in sizes:
        X, y = make_regression(n, d=d, seed=0)
        t, peak, model = timed_fit(lambda: hkern.fit_hierarchical(X, y, r=r, sigma=1.0,
                                                                  lam=1e-2, seed=0))
        first = first or t
        bound = 1.5 * (4 * n * r + n * d) * 8
        print(f"| {n} | {model.depth_} | {t:.2f} | {t / first:.2f} | {peak / 2**30:.2f} | "
              f"{bound / 2**30:.2f} | {model.nbytes / 2**30:.2f} |")
        del model
    print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller grids, no n = 10^6 fit")
    parser.add_argument("--part", choices=("all", "accuracy", "gflops", "scaling"), default="all")
    args = parser.parse_args()
    print(banner() + "\n")
    if args.part in ("all", "accuracy"):
        accuracy(args.quick)
    if args.part in ("all", "gflops"):
        gflops(args.quick)
    if args.part in ("all", "scaling"):
        scaling(args.quick)
