"""Timing of oASIS-P for experiments/compare_oasis.py: run under mpiexec -n P (one thread per rank).

    mpiexec -n 2 python experiments/oasis_mpi_speed.py 200000 400

Each rank passes oasis_mpi only its block of rows (block_layout).  The data are generated on
every rank from one seed and cut to the block, which stands in for each rank reading its rows
from storage; the full array is dropped before the timed call.
"""
import sys
import time

import numpy as np
from mpi4py import MPI

from hkern.datasets import make_regression
from hkern.oasis.sharded import block_layout, oasis_mpi

n, ell = int(sys.argv[1]), int(sys.argv[2])
comm = MPI.COMM_WORLD
offsets = block_layout(n, comm.Get_size())
X, _ = make_regression(n, d=8, seed=0)
X_local = np.array(X[offsets[comm.Get_rank()]: offsets[comm.Get_rank() + 1]])
del X
comm.Barrier()
start = time.perf_counter()
result = oasis_mpi(X_local, ell, sigma=1.0, seed=0, n_jobs=1, gather=False)
comm.Barrier()
elapsed = time.perf_counter() - start
if comm.Get_rank() == 0:
    print(f"RESULT ranks={comm.Get_size()} seconds={elapsed:.3f} "
          f"first={result.indices_[:5].tolist()} k={len(result.indices_)}")
