"""Run named points of a set's isotropic test-set oracle grid (experiments/iterative_defaults.py,
``grid``) that a partial grid left out, and add them to its record.

    python experiments/grid_points.py protein 0:1e-2,0:1e-1,1:1e-2

Each point is ``<bandwidth index>:<lam>``, the index into the grid's 8 bandwidths, smallest
first (the median pairwise distance times 2^-3 .. 2^0.5); PCG with max_iter 300, as the grid.
"""
import json
import os
import sys
import time

import numpy as np

import hkern
from hkern.datasets import load_uci, standardize

name = sys.argv[1]
points = [(int(i), float(lam)) for i, lam in (p.split(":") for p in sys.argv[2].split(","))]
RECORD = os.path.join(os.path.dirname(__file__), "..", "results", "iterative_defaults",
                      f"{name}.json")
Xtr, ytr, Xte, yte, _ = standardize(*load_uci(name, split=0))
n = Xtr.shape[0]
rng = np.random.default_rng(0)                 # the grid's own draw of pairs
i, j = rng.integers(0, n, 4000), rng.integers(0, n, 4000)
med = float(np.median(np.linalg.norm(Xtr[i] - Xtr[j], axis=1)))
sigmas = med * 2.0 ** np.linspace(-3, 0.5, 8)
for index, lam in points:
    t = time.time()
    m = hkern.fit_exact(Xtr, ytr, solver="pcg", seed=0, sigma=float(sigmas[index]), lam=lam,
                        max_iter=300)
    row = dict(sigma=float(sigmas[index]), lam=lam, seconds=time.time() - t,
               rmse=float(np.sqrt(np.mean((m.predict(Xte) - yte) ** 2))),
               iters=int(m.n_iter_), converged=bool(m.solver_trace_.converged))
    print("GRID", row, flush=True)
    out = json.load(open(RECORD))
    out["grid"] = [g for g in out["grid"] if not (np.isclose(g["sigma"], row["sigma"])
                                                 and g["lam"] == lam)] + [row]
    json.dump(out, open(RECORD, "w"), indent=1)
