"""MEKA acceptance measurements, side by side, in one process (prints markdown).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        python experiments/compare_meka.py [table7|synthetic|krr] [--n 500000]

1. table7: the paper's Table 7 trend on standardised UCI sets: relative error
   ||G - G~||_F / ||G||_F (2000 sampled rows) of MEKA (c = 10 clusters, k = 64 per cluster),
   uniform Nystrom and k-means Nystrom at equal memory (Nystrom rank r = MEKA's stored numbers
   / n, the paper's memory count n k + (ck)^2 vs n r).
2. synthetic: time and memory for MEKA to reach 10% relative error versus uniform Nystrom,
   on n = 500000 points of two synthetic sets (uniform cube: hkern.datasets.make_regression;
   clustered: a 20-component Gaussian mixture).  Each method walks up a fixed ladder of
   sizes and stops at the first below 10% (error on 500 sampled rows).
3. krr: test RMSE of fit_meka and fit_nystrom at equal memory on kin40k, protein and
   elevators (sigma, lam chosen per method on a validation split of the training set).

Every set but kin40k is read from $HKERN_DATA.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
from common import best_time, load_standardized, rmse, tune
from scipy.cluster.vq import kmeans2

import hkern
from hkern.datasets import make_regression
from hkern.kernels._api import _kernel_matrix_trusted
from hkern.nystrom.api import nystrom_feature_map

SETS = ("kin40k", "protein", "keggundirected", "pol", "elevators")
CHUNK = 256     # rows of the exact kernel formed at a time by NystromApprox.rel_error


# ---------------------------------------------------------------------------------------------
# The Nystrom baselines, built the paper's way (uniform landmarks, k-means landmarks), with the
# row-sampled error MEKA's rel_error uses
# ---------------------------------------------------------------------------------------------

class NystromApprox:
    """K ~ Phi Phi^T with Phi = K(X, Z) M, M M^T = K(Z, Z)^+ (eigenvalues <= 1e-12 max dropped).

    ``seconds`` is the construction time (landmarks + Phi); ``n_stored`` = n r numbers, the
    paper's memory count for a rank-r Nystrom approximation.
    """

    def __init__(self, X, Z, sigma, n_threads=1):
        start = time.perf_counter()
        self.X, self.sigma = X, sigma
        M, _ = nystrom_feature_map(_kernel_matrix_trusted(0, sigma, Z, Z, n_threads), 1e-11)
        self.Phi = np.empty((X.shape[0], M.shape[1]))
        for s in range(0, X.shape[0], 8192):
            C = _kernel_matrix_trusted(0, sigma, X[s:s + 8192], Z, n_threads)
            self.Phi[s:s + 8192] = C @ M
        self.seconds = time.perf_counter() - start
        self.n_stored = self.Phi.size

    def rel_error(self, n_rows, seed):
        """||G - Phi Phi^T||_F / ||G||_F over ``n_rows`` sampled rows (all rows if n_rows >= n)."""
        n = self.X.shape[0]
        rng = np.random.default_rng(seed)
        rows = np.arange(n) if n_rows >= n else np.sort(rng.choice(n, n_rows, replace=False))
        num = den = 0.0
        for s in range(0, len(rows), CHUNK):
            r = rows[s:s + CHUNK]
            G = _kernel_matrix_trusted(0, self.sigma, self.X[r], self.X, 1)
            num += float(np.sum((G - self.Phi[r] @ self.Phi.T) ** 2))
            den += float(np.sum(G ** 2))
        return math.sqrt(num / den)


def uniform_nystrom(X, r, sigma, seed=0):
    idx = np.sort(np.random.default_rng(seed).choice(X.shape[0], r, replace=False))
    return NystromApprox(X, np.ascontiguousarray(X[idx]), sigma)


def kmeans_nystrom(X, r, sigma, seed=0, sample=20000):
    """KNys (Zhang & Kwok): the r k-means centroids of a 20000-point subsample as landmarks."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    S = X if X.shape[0] <= sample else X[rng.choice(X.shape[0], sample, replace=False)]
    Z, _ = kmeans2(S, r, iter=10, minit="++", seed=rng)
    t_cluster = time.perf_counter() - start
    out = NystromApprox(X, np.ascontiguousarray(Z), sigma)
    out.seconds += t_cluster
    return out


def meka_time(X, **kw):
    """(seconds, hkern.meka(X, **kw))."""
    return best_time(lambda: hkern.meka(X, **kw))


# ---------------------------------------------------------------------------------------------
# The three parts
# ---------------------------------------------------------------------------------------------


def gamma(sigma):
    return 1.0 / (2.0 * sigma**2)


def table7(c=10, k=64, sigmas=(1.0, 2.0), n_rows=2000):
    print(f"## 1. Relative kernel approximation error at equal memory (c = {c}, k = {k})\n")
    print("| data | n | d | sigma | gamma | MEKA | uniform Nystrom | k-means Nystrom | "
          "Nystrom rank r | MEKA s | Nys s | KNys s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    wins = {s: 0 for s in sigmas}
    for name in SETS:
        X = load_standardized(name)[0]
        n, d = X.shape
        for sigma in sigmas:
            t, G = meka_time(X, r=k, n_clusters=c, sigma=sigma, seed=0)
            e_meka = G.rel_error(n_rows, seed=1)
            r = round(G.n_stored / n)
            N = uniform_nystrom(X, r, sigma, seed=0)
            KN = kmeans_nystrom(X, r, sigma, seed=0)
            e_n, e_k = N.rel_error(n_rows, 1), KN.rel_error(n_rows, 1)
            wins[sigma] += e_meka < e_n
            best = min(e_meka, e_n, e_k)
            cells = [f"**{e:.4f}**" if e == best else f"{e:.4f}" for e in (e_meka, e_n, e_k)]
            print(f"| {name} | {n} | {d} | {sigma:g} | {gamma(sigma):.3g} | " + " | ".join(cells)
                  + f" | {r} | {t:.2f} | {N.seconds:.2f} | {KN.seconds:.2f} |", flush=True)
    print("\nBold: smallest error of the row.  MEKA below uniform Nystrom on " +
          ", ".join(f"{wins[s]}/{len(SETS)} sets at sigma={s:g}" for s in sigmas) + ".\n")


def mixture(n, d=8, centres=20, spread=0.15, seed=0):
    """Gaussian mixture: centres uniform in [-1, 1]^d, isotropic spread."""
    rng = np.random.default_rng(seed)
    C = rng.uniform(-1.0, 1.0, size=(centres, d))
    return C[rng.integers(centres, size=n)] + spread * rng.standard_normal((n, d))


def synthetic(n, target=0.10, n_rows=500):
    print(f"## 2. Time and memory to reach {target:.0%} relative error, n = {n}\n")
    cases = [("uniform cube [-1,1]^8 (make_regression)", make_regression(n, d=8, seed=0)[0],
              1.0),
             ("20-component Gaussian mixture, d = 8, spread 0.15", mixture(n), 0.4)]
    meka_ladder = [(10, 16), (10, 32), (20, 32), (10, 64), (20, 64), (10, 128), (20, 128)]
    nys_ladder = [50, 100, 200, 400, 800]
    print("| data | sigma | method | setting | error | seconds | stored numbers / n | MiB |")
    print("|---|---:|---|---|---:|---:|---:|---:|")
    summary = []
    for label, X, sigma in cases:
        found = {}
        for c, k in meka_ladder:
            t, G = meka_time(X, r=k, n_clusters=c, sigma=sigma, seed=0)
            e = G.rel_error(n_rows, seed=1)
            mib = G.n_stored * 8 / 2**20
            print(f"| {label} | {sigma:g} | MEKA | c={c}, k={k} | {e:.4f} | {t:.2f} | "
                  f"{G.n_stored / n:.1f} | {mib:.0f} |", flush=True)
            del G
            if e <= target:
                found["MEKA"] = (t, mib)
                break
        for r in nys_ladder:
            N = uniform_nystrom(X, r, sigma, seed=0)
            e = N.rel_error(n_rows, 1)
            mib = N.n_stored * 8 / 2**20
            print(f"| {label} | {sigma:g} | uniform Nystrom | r={r} | {e:.4f} | "
                  f"{N.seconds:.2f} | {r} | {mib:.0f} |", flush=True)
            t = N.seconds
            del N
            if e <= target:
                found["Nystrom"] = (t, mib)
                break
        summary.append((label, found))
    print("\n| data | Nystrom / MEKA time | Nystrom / MEKA memory |")
    print("|---|---:|---:|")
    for label, found in summary:
        if len(found) == 2:
            (tm, mm), (tn, mn) = found["MEKA"], found["Nystrom"]
            print(f"| {label} | {tn / tm:.2f}x | {mn / mm:.2f}x |")
        else:
            print(f"| {label} | not reached by {sorted({'MEKA', 'Nystrom'} - set(found))}"
                  " | |")
    print()


def krr(c=10, k=64, sets=("kin40k", "protein", "elevators")):
    print(f"## 3. KRR test RMSE at equal memory (MEKA c = {c}, k = {k}; Nystrom rank r = "
          "MEKA's stored numbers / n)\n")
    grid = [dict(sigma=s, lam=lam) for s in (1.0, 2.0) for lam in (1e-3, 1e-2, 1e-1)]
    print("| data | method | setting | sigma | lam | validation RMSE | test RMSE | fit s |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for name in sets:
        X, y, Xt, yt, _ = load_standardized(name)
        cut = int(0.8 * X.shape[0])      # validation: the last 20% of the training set
        G = hkern.meka(X, r=k, n_clusters=c, sigma=1.0, seed=0)
        r = round(G.n_stored / X.shape[0])
        del G
        fits = [("MEKA", f"c={c}, k={k}", hkern.fit_meka,
                 {"r": k, "n_clusters": c, "seed": 0}),
                ("Nystrom", f"r={r}", hkern.fit_nystrom, {"r": r, "seed": 0})]
        for label, setting, fit, kw in fits:
            best, val_rmse, _ = tune(lambda X_, y_, **p: fit(X_, y_, **p, **kw), X, y,
                                     slice(None, cut), slice(cut, None), grid)
            t, model = best_time(lambda: fit(X, y, **best, **kw))
            print(f"| {name} | {label} | {setting} | {best['sigma']:g} | {best['lam']:g} | "
                  f"{val_rmse:.4f} | {rmse(model.predict(Xt), yt):.4f} | {t:.2f} |", flush=True)
    print("\nTargets standardised with training statistics (RMSE in units of the training "
          "standard deviation).\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("parts", nargs="*", default=["table7", "synthetic", "krr"])
    parser.add_argument("--n", type=int, default=500_000)
    args = parser.parse_args()
    print(f"hkern {hkern.__version__}; threads: OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS')}; {time.strftime('%Y-%m-%d %H:%M')}\n")
    if "table7" in args.parts:
        table7()
    if "synthetic" in args.parts:
        synthetic(args.n)
    if "krr" in args.parts:
        krr()


if __name__ == "__main__":
    main()
