"""oASIS-P on MPI selects exactly what serial oASIS selects (launched with mpiexec).

Needs the optional extra ``hkern[mpi]`` (mpi4py and the mpich wheel, which brings mpiexec);
CI installs it.  Without it these tests are skipped with that reason.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import hkern
from hkern.datasets import make_regression

pytest.importorskip("mpi4py", reason="oASIS-P needs the optional extra hkern[mpi]")
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
if MPIEXEC is None:
    pytest.skip("mpiexec not found (install hkern[mpi])", allow_module_level=True)

SCRIPT = os.path.join(os.path.dirname(__file__), "mpi_oasis_run.py")


def run_mpi(ranks, *args, cwd):
    out = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, SCRIPT,
                          *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [l for l in out.stdout.splitlines() if l.startswith("{")]
    assert len(line) == 1, out.stdout
    return json.loads(line[0])


def hexes(a):
    return [float(v).hex() for v in np.asarray(a).ravel()]


@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("init", [0, 1, 4])
def test_same_selection_as_serial(tmp_path, ranks, init):
    """2 ranks (even blocks) and 3 ranks (uneven): same indices and bitwise the same numbers."""
    n, ell, seed = 2503, 50, 5
    got = run_mpi(ranks, n, ell, init, seed, cwd=tmp_path)
    X, _ = make_regression(n, d=3, seed=11)
    ref = hkern.oasis(X, ell, sigma=0.5, init=init, seed=seed)
    assert got["size"] == ranks
    assert got["indices"] == ref.indices.tolist()
    assert got["scores"] == [None if np.isnan(s) else float(s).hex() for s in ref.scores]
    assert got["W_inv"] == hexes(ref.W_inv)
    assert got["C"] == hexes(ref.C)


def test_command_line_entry(tmp_path):
    """mpiexec -n 2 python -m hkern.oasis.parallel DATA.npy ... writes the serial selection."""
    X, _ = make_regression(1200, d=4, seed=3)
    np.save(tmp_path / "data.npy", X)
    out = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "hkern.oasis.parallel",
                          str(tmp_path / "data.npy"), "--n-columns", "30", "--sigma", "0.7",
                          "--seed", "2", "--out", str(tmp_path / "sel.npz")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "oASIS-P on 2 ranks: 30 columns" in out.stdout
    saved = np.load(tmp_path / "sel.npz")
    ref = hkern.oasis(X, 30, sigma=0.7, seed=2)
    np.testing.assert_array_equal(saved["indices"], ref.indices)
    np.testing.assert_array_equal(saved["W_inv"], ref.W_inv)


def test_precomputed_is_refused():
    from hkern.oasis.parallel import oasis_mpi
    with pytest.raises(ValueError, match="kernel='precomputed' is serial only"):
        oasis_mpi(np.eye(5), 2, kernel="precomputed")
