"""What the MPI tests share (tests/test_oasis_mpi.py, tests/test_mpi_fits.py): the mpiexec
that comes with the ``mpi`` extra, the environment of one OpenMP thread per rank, and the
parsing of the JSON records the ranks print."""
import json
import os
import shutil
import sys

MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
# The ranks share this machine's cores: one OpenMP thread each, as doc/mpi.md recommends
# (n_jobs=None honours OMP_NUM_THREADS).
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def records(stdout):
    """Every JSON record the ranks printed (mpiexec may put two ranks' records on one line)."""
    decoder, found, i = json.JSONDecoder(), [], 0
    while (i := stdout.find("{", i)) >= 0:
        obj, i = decoder.raw_decode(stdout, i)
        found.append(obj)
    return found


def assert_raised_everywhere(recs, ranks, kind, text, where):
    """Every rank's record of a case holds the same error: of type ``kind``, its message
    containing ``text`` and, for an error on one rank ``where`` (None: on all), naming it."""
    assert sorted(recs) == list(range(ranks))
    assert len({rec["message"] for rec in recs.values()}) == 1
    for rec in recs.values():
        assert rec["outcome"] == "error" and rec["type"] == kind, rec
        assert text in rec["message"], rec["message"]
        if where is not None and ranks > 1:
            assert f"raised on rank {where} of {ranks}" in rec["message"], rec["message"]
