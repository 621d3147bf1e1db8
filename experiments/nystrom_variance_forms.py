"""Which predictive variance a Nystrom model should give (issue 52): the subset-of-regressors
(SoR) form, the Bayesian linear model the fit is, against the deterministic training
conditional (DTC), which adds s2 (k(x, x) - phi(x)^T phi(x)), the prior variance the landmarks
leave out.  Both at the amplitude s2 the fit's profiled likelihood estimates, for FALKON's
default call ``hkern.fit_nystrom(X, y, solver="pcg", seed=0)`` on split 0 of each set (X
standardised, y in its own units): the coverage of the central 50/90/95% intervals of a new
target and the test NLL.

    HKERN_DATA=../shared/data/uci python experiments/nystrom_variance_forms.py [sets]

Writes ``results/nystrom_variance_forms.json``.  hkern gives the SoR form (the DTC one
over-covered: doc/uncertainty.md).
"""
import json
import sys

import numpy as np
from common import RESULTS, load_split, nystrom_features_of
from scipy.stats import norm

import hkern

SETS = ["kin40k", "pol", "elevators", "protein", "concrete", "energy"]
LEVELS = [0.5, 0.9, 0.95]


def scores(mean, std, y):
    z = np.abs(y - mean) / std
    return {"coverage": {str(v): float(np.mean(z <= norm.ppf(0.5 + v / 2))) for v in LEVELS},
            "nll": float(np.mean(-norm.logpdf(y, mean, std)))}


def measure(name):
    X, y, Xt, yt = load_split(name, 0)
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd[sd == 0] = 1.0
    X, Xt = (X - mu) / sd, (Xt - mu) / sd
    model = hkern.fit_nystrom(X, y, solver="pcg", seed=0)
    mean, sor = model.predict(Xt, return_std=True, include_noise=True)
    s2 = float(model.signal_variance_[0])
    Phi = nystrom_features_of(model, Xt)
    left_out = 1.0 - np.einsum("ij,ij->i", Phi, Phi)     # the Gaussian kernel: k(x, x) = 1
    dtc = np.sqrt(sor ** 2 + s2 * left_out)
    return dict(set=name, n=len(y), landmarks=int(model.landmarks_.shape[0]),
                signal_variance=s2, lam=float(model.lam_),
                mean_left_out=float(np.mean(left_out)),
                rmse=float(np.sqrt(np.mean((yt - mean) ** 2))),
                sor=scores(mean, sor, yt), dtc=scores(mean, dtc, yt))


def main():
    sets = sys.argv[1].split(",") if len(sys.argv) > 1 else SETS
    records = []
    for name in sets:
        records.append(measure(name))
        print(json.dumps(records[-1]), flush=True)
        (RESULTS / "nystrom_variance_forms.json").write_text(json.dumps(
            {"command": "python experiments/nystrom_variance_forms.py " + " ".join(sys.argv[1:]),
             "hkern": hkern.__version__, "records": records}, indent=1))


if __name__ == "__main__":
    main()
