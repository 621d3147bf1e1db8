"""Run by tests/test_oasis_mpi.py under mpiexec: oASIS-P on synthetic data, results as JSON."""
import json
import sys

import numpy as np

from hkern.datasets import make_regression
from hkern.oasis.parallel import oasis_mpi

n, ell, init, seed = (int(a) for a in sys.argv[1:5])
X, _ = make_regression(n, d=3, seed=11)
result = oasis_mpi(X, ell, sigma=0.5, init=init, seed=seed)
if result.rank == 0:
    print(json.dumps({"size": result.size, "indices": result.indices.tolist(),
                      "scores": [None if np.isnan(s) else float(s).hex() for s in result.scores],
                      "W_inv": [float(v).hex() for v in result.W_inv.ravel()],
                      "C": [float(v).hex() for v in result.C.ravel()]}))
