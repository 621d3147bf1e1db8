"""Where hkern's predictive standard deviation stands before issue 52: the coverage of 95%
intervals and the test NLL of ``fit_exact(X, y)`` and ``fit_hierarchical(X, y)`` (with
``include_noise=True``), beside scikit-learn's ``GaussianProcessRegressor`` on the same rows, with
y standardised and with y in raw units times 1000.

    HKERN_DATA=../shared/data/uci python experiments/uncertainty_baseline.py [sets]

sets: default kin40k,pol,elevators,protein,keggundirected,concrete,energy.  Split 0; X
standardised with training statistics; the first 2000 training rows (all of a smaller set) and
the first 2000 test rows; 2 threads, seed 0.  scikit-learn: ConstantKernel * RBF (one
lengthscale per feature) + WhiteKernel, ``normalize_y=True``, no optimizer restarts.  For each
fit and target scale: coverage (the fraction of test targets inside mean +- 1.96 std), mean
NLL of the Gaussian predictive density, test RMSE, mean std, seconds.  Records in
``results/uncertainty_baseline.json``.  Takes about twenty minutes.
"""
import json
import sys
import time
import warnings

import numpy as np
from common import RESULTS, load_split

import hkern

SETS = ["kin40k", "pol", "elevators", "protein", "keggundirected", "concrete", "energy"]
ROWS = 2000
Z95 = 1.959963984540054


def scores(mean, std, y):
    std = np.maximum(std, 1e-300)
    z = (y - mean) / std
    return {"coverage": float(np.mean(np.abs(z) <= Z95)),
            "nll": float(np.mean(0.5 * z ** 2 + np.log(std) + 0.5 * np.log(2 * np.pi))),
            "rmse": float(np.sqrt(np.mean((y - mean) ** 2))), "mean_std": float(np.mean(std))}


def sklearn_gp(X, y, Xt):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    kernel = ConstantKernel() * RBF(length_scale=np.ones(X.shape[1])) + WhiteKernel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, y)
    return gp.predict(Xt, return_std=True)


def main():
    sets = sys.argv[1].split(",") if len(sys.argv) > 1 else SETS
    records = []
    for name in sets:
        X, y, Xt, yt = load_split(name, 0)
        mu, sd = X.mean(axis=0), X.std(axis=0)
        sd[sd == 0] = 1.0
        X, Xt = (X[:ROWS] - mu) / sd, (Xt[:ROWS] - mu) / sd
        y, yt = y[:ROWS], yt[:ROWS]
        ym, ys = y.mean(), y.std()
        for scale_name, (train, test) in {"standardised": ((y - ym) / ys, (yt - ym) / ys),
                                          "raw x 1000": (1000 * y, 1000 * yt)}.items():
            fits = {
                "fit_exact": lambda a, b: hkern.fit_exact(a, b, seed=0, n_jobs=2),
                "fit_hierarchical": lambda a, b: hkern.fit_hierarchical(a, b, seed=0, n_jobs=2),
            }
            for fit_name, fit in fits.items():
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = fit(X, train)
                mean, std = model.predict(Xt, return_std=True, include_noise=True)
                rec = dict(set=name, n=len(y), d=X.shape[1], targets=scale_name, fit=fit_name,
                           seconds=time.perf_counter() - t0, **scores(mean, std, test))
                print(json.dumps(rec), flush=True)
                records.append(rec)
            if scale_name == "standardised":
                t0 = time.perf_counter()
                mean, std = sklearn_gp(X, train, Xt)
                rec = dict(set=name, n=len(y), d=X.shape[1], targets=scale_name,
                           fit="sklearn GaussianProcessRegressor",
                           seconds=time.perf_counter() - t0, **scores(mean, std, test))
                print(json.dumps(rec), flush=True)
                records.append(rec)
    with open(RESULTS / "uncertainty_baseline.json", "w") as f:
        json.dump({"command": "python experiments/uncertainty_baseline.py "
                   + " ".join(sys.argv[1:]), "hkern": hkern.__version__, "records": records},
                  f, indent=1)


if __name__ == "__main__":
    main()
