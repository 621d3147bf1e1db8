"""Timing of oASIS-P for experiments/compare_oasis.py: run under mpiexec -n P (one thread per rank).

    mpiexec -n 2 python experiments/oasis_mpi_speed.py 200000 400
"""
import sys
import time

from mpi4py import MPI

from hkern.datasets import make_regression
from hkern.oasis.parallel import oasis_mpi

n, ell = int(sys.argv[1]), int(sys.argv[2])
X, _ = make_regression(n, d=8, seed=0)
comm = MPI.COMM_WORLD
comm.Barrier()
start = time.perf_counter()
result = oasis_mpi(X, ell, sigma=1.0, seed=0, n_jobs=1, gather=False)
comm.Barrier()
elapsed = time.perf_counter() - start
if comm.Get_rank() == 0:
    print(f"RESULT ranks={comm.Get_size()} seconds={elapsed:.3f} "
          f"first={result.indices[:5].tolist()} k={len(result.indices)}")
