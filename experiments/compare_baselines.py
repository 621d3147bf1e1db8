"""Side-by-side comparison of hkern's foundation against scikit-learn, in one process run.

    python experiments/compare_baselines.py            # about 2 minutes on 2 cores

1. ``hkern.kernel_matrix`` (Gaussian, 200 000 x 256, d = 8) against
   ``sklearn.metrics.pairwise.rbf_kernel`` on the same inputs (best of 5 runs each).
2. kin40k split 0, X and y standardised with training statistics: sigma and lam tuned for
   ``hkern.fit_nystrom`` at r = 1024 on a validation split carved from the training set (never
   the test set); then hkern Nystrom and scikit-learn ``Nystroem`` + ``Ridge`` fitted on the
   whole training set with the same r, sigma, lam (gamma = 1 / (2 sigma^2)), best of 3 fits.

Prints markdown tables.  Thread counts: every core (both libraries' defaults).
"""
from __future__ import annotations

import numpy as np
from common import banner, best_time, load_standardized, rmse, tune, validation_split
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import Ridge
from sklearn.metrics.pairwise import rbf_kernel

import hkern

R = 1024
SIGMAS = (1.0, 1.5, 2.0, 3.0, 4.0)
LAMS = (1e-3, 1e-2, 1e-1)


def kernel_comparison():
    rng = np.random.default_rng(0)
    X, Y, sigma = rng.normal(size=(200_000, 8)), rng.normal(size=(256, 8)), 2.0
    t_h, K_h = best_time(lambda: hkern.kernel_matrix(X, Y, sigma=sigma), 5)
    t_s, K_s = best_time(lambda: rbf_kernel(X, Y, gamma=1 / (2 * sigma**2)), 5)
    err = float(np.max(np.abs(K_h - K_s) / K_s))
    print("## kernel_matrix, Gaussian, X 200000 x 8 vs Y 256 x 8\n")
    print("| implementation | best of 5 (s) |\n|---|---:|")
    print(f"| hkern.kernel_matrix | {t_h:.4f} |\n| sklearn rbf_kernel | {t_s:.4f} |")
    print(f"\nspeed-up {t_s / t_h:.2f}x; max relative difference {err:.1e}\n")


def sklearn_nystroem(X, y, r, sigma, lam):
    features = Nystroem(gamma=1 / (2 * sigma**2), n_components=r, random_state=0)
    ridge = Ridge(alpha=lam, fit_intercept=False).fit(features.fit_transform(X), y)
    return lambda Z: ridge.predict(features.transform(Z))


def nystrom_comparison():
    X_train, y_train, X_test, y_test, _ = load_standardized("kin40k")
    fit, val = validation_split(len(y_train), seed=0, sort=False)
    print(f"## Nystrom KRR on kin40k split 0 (r = {R})\n")
    print(f"Validation grid (hkern fit_nystrom on {len(fit)} points, RMSE on {len(val)} held-out "
          "training points):\n")
    grid = [dict(sigma=sigma, lam=lam) for sigma in SIGMAS for lam in LAMS]
    best, _, scores = tune(
        lambda X, y, **p: hkern.fit_nystrom(X, y, r=R, seed=0, **p),
        X_train, y_train, fit, val, grid)
    sigma, lam = best["sigma"], best["lam"]
    print("| sigma | " + " | ".join(f"lam={lam:g}" for lam in LAMS) + " |")
    print("|---:|" + "---:|" * len(LAMS))
    for s in SIGMAS:
        print(f"| {s:g} | " + " | ".join(f"{scores[('sigma', s), ('lam', l)]:.4f}" for l in LAMS)
              + " |")
    print(f"\nchosen: sigma={sigma:g}, lam={lam:g}\n")

    print("| method | sigma | lam | test RMSE | fit s (best of 3) | predict s |")
    print("|---|---:|---:|---:|---:|---:|")
    for s, l in [(sigma, lam), (2.0, 0.01)]:
        t_h, model = best_time(
            lambda: hkern.fit_nystrom(X_train, y_train, r=R, sigma=s, lam=l, seed=0), 3)
        tp_h, pred_h = best_time(lambda: model.predict(X_test), 3)
        t_s, predict = best_time(lambda: sklearn_nystroem(X_train, y_train, R, s, l), 3)
        tp_s, pred_s = best_time(lambda: predict(X_test), 3)
        print(f"| hkern fit_nystrom | {s:g} | {l:g} | {rmse(pred_h, y_test):.4f} | {t_h:.2f} | "
              f"{tp_h:.3f} |")
        print(f"| sklearn Nystroem+Ridge | {s:g} | {l:g} | {rmse(pred_s, y_test):.4f} | "
              f"{t_s:.2f} | {tp_s:.3f} |")
    print()


if __name__ == "__main__":
    print(banner() + "\n")
    kernel_comparison()
    nystrom_comparison()
