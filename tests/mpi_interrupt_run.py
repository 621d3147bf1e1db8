"""Run by tests/test_interrupts.py under mpiexec -n 2: a sharded fit_hierarchical on ragged
shards of kin40k (7000 and 13 000 rows, r=1024; 12 s uninterrupted), to be ended by SIGINT.

    mpiexec -n 2 python mpi_interrupt_run.py DIR

Each rank writes DIR/start-RANK (its process id) once every rank has loaded its shard, then
fits, then writes DIR/finished-RANK.  Files, not stdout: right after an aborted launch, a new
mpiexec sometimes forwarded none of its ranks' output (seen with MPICH's Hydra 5.0.2).
"""
import os
import sys

from mpi4py import MPI

import hkern
from hkern.datasets import load_uci, standardize

COMM = MPI.COMM_WORLD
CUTS = (0, 7000, 20000)

X, y, _, _, _ = standardize(*load_uci("kin40k", split=0))
rank = COMM.Get_rank()
lo, hi = CUTS[rank], CUTS[rank + 1]
COMM.Barrier()
with open(os.path.join(sys.argv[1], f"start-{rank}"), "w") as f:
    f.write(str(os.getpid()))
hkern.fit_hierarchical(X[lo:hi], y[lo:hi], r=1024, seed=0, n_jobs=1, comm=COMM)
open(os.path.join(sys.argv[1], f"finished-{rank}"), "w").close()
