"""The main job, ``python -m hkern``."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from hkern._cli import main


def test_main_job_prints_the_table(capsys):
    # A small exact subsample and rank, and one selected bandwidth rather than lengthscales,
    # keep this quick; the full default run (--sigma ard --lam auto) is in the README.
    assert main(["--r", "64", "--hck-r", "128", "--exact-n", "800", "--sigma", "auto",
                 "--methods", "hck,independent,exact,nystrom,rff"]) == 0
    out = capsys.readouterr().out
    assert "kin40k split 0: 36000 train, 4000 test, d=8" in out
    table = out.split("-----")[-1]
    assert [line.split()[0] for line in table.strip().splitlines()[:5]] == [
        "hck", "independent", "exact", "nystrom", "rff"]
    for method in ("hck", "independent", "exact", "nystrom", "rff"):
        line = next(l for l in out.splitlines() if l.startswith(method + " "))
        rmse = float(line.split()[4])
        assert 0.0 < rmse < 1.0, line  # standardised targets: 1.0 is the mean predictor
    assert "[" in out and "s] nystrom: fitting on 36000 points" in out
    # the selected hyperparameters are shown, one line per method
    assert out.count("; selected sigma=") == 5


def test_defaults_select_lengthscales_and_ridge(capsys):
    assert main(["--methods", "nystrom", "--r", "32"]) == 0
    out = capsys.readouterr().out
    assert "sigma=ard lam=auto" in out
    line = next(l for l in out.splitlines() if "nystrom: done" in l)
    assert line.count(",") >= 7          # eight lengthscales, one per feature of kin40k


def test_method_subset_and_options(capsys):
    assert main(["--methods", "rff", "--r", "32", "--sigma", "1.5", "--lam", "0.1",
                 "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "sigma=1.5 lam=0.1 seed=3" in out and "nystrom and rff 32" in out
    assert "nystrom" not in out.split("-----")[-1]


def small_set(folder, n=700, d=3, seed=0):
    """A UCI-style data set of n rows (data.csv.gz, test_mask.csv.gz) in folder/small."""
    import numpy as np
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] + 0.05 * rng.normal(size=n)
    (folder / "small").mkdir()
    np.savetxt(folder / "small" / "data.csv.gz", np.column_stack([X, y]), delimiter=",")
    mask = np.zeros((n, 10), dtype=int)
    for split in range(10):
        mask[split::10, split] = 1
    np.savetxt(folder / "small" / "test_mask.csv.gz", mask, delimiter=",", fmt="%d")


def test_the_iterative_solvers_and_the_frontier(capsys, tmp_path):
    small_set(tmp_path)
    assert main(["--data", "small", "--data-dir", str(tmp_path), "--methods",
                 "pcg,falkon,nystrom", "--falkon-r", "64", "--r", "32", "--sigma", "auto"]) == 0
    out = capsys.readouterr().out
    table = out.split("-----")[-1].split("\n\n")[0]
    rows = {line.split()[0]: line.split() for line in table.strip().splitlines()}
    assert list(rows) == ["pcg", "falkon", "nystrom"]
    assert rows["pcg"][2] == "630" and rows["falkon"][1] == "64"     # every training row
    assert out.count("; selected sigma=") == 3
    frontier = out.split("error against time")[1].split("\n\n")[0].strip().splitlines()[1:]
    times = [float(line.split()[0]) for line in frontier]
    assert re.search(r"\ntotal \d+\.\d s on \d+ threads, data loading included\n", out)
    errors = [float(line.split()[4]) for line in frontier]
    assert frontier and times == sorted(times) and errors == sorted(errors, reverse=True)
    assert "pcg: exact KRR on every training row" in out


def test_unknown_method_fails_cleanly(capsys):
    assert main(["--methods", "svm"]) == 2
    assert "unknown method(s) ['svm']" in capsys.readouterr().err


def test_missing_data_set_fails_cleanly(capsys, tmp_path):
    assert main(["--data", "nope", "--data-dir", str(tmp_path)]) == 2
    assert "no data set 'nope'" in capsys.readouterr().err


def test_module_entry_point_runs(tmp_path):
    # Run from a neutral folder: from the source folder, `python -m` would import the
    # uncompiled source tree rather than the installed package.
    result = subprocess.run([sys.executable, "-m", "hkern", "--help"], capture_output=True,
                            text=True, check=True, cwd=tmp_path)
    assert "Fit hkern's kernel ridge methods" in result.stdout
    assert result.stdout.startswith("usage: python -m hkern ")


def test_version(tmp_path):
    import hkern
    result = subprocess.run([sys.executable, "-m", "hkern", "--version"], capture_output=True,
                            text=True, check=True, cwd=tmp_path)
    assert result.stdout == f"python -m hkern {hkern.__version__}\n"


def test_console_script_runs(tmp_path):
    script = shutil.which("hkern", path=os.path.dirname(sys.executable))
    if script is None:  # an editable/development install without the entry point
        pytest.skip("the 'hkern' console script is not installed in this environment")
    result = subprocess.run([script, "--help"], capture_output=True, text=True, check=True,
                            cwd=tmp_path)
    assert result.stdout.startswith("usage: hkern ")      # the name it was run by


@pytest.mark.parametrize("argv, message", [
    (["--n-jobs", "0"], "argument --n-jobs: n_jobs must be None or a non-zero integer, got 0"),
    (["--n-jobs", "1.5"], "argument --n-jobs: invalid literal for int()"),
    (["--sigma", "-1"], "argument --sigma: --sigma must be 'auto' or 'ard' or a number > 0; got "
                        "'-1' (--sigma must be a real number > 0, got -1.0)"),
    (["--sigma", "median"], "argument --sigma: --sigma must be 'auto' or 'ard' or a number > 0; "
                            "got 'median'"),
    (["--lam", "0"], "argument --lam: --lam must be 'auto' or a number > 0; got '0' (--lam must "
                     "be a real number > 0, got 0.0)"),
    (["--kernel", "foo"], "argument --kernel: kernel must be one of"),
    (["--r", "0"], "argument --r: --r must be an integer >= 1, got 0"),
    (["--split", "10"], "argument --split: --split must be an integer in [0, 9], got 10"),
])
def test_bad_options_are_usage_errors(argv, message, capsys):
    # Issue 16 defect 12: --n-jobs 0 printed a traceback from inside the first fit.
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_every_method_skipped_is_a_failure(capsys):
    # Issue 16 defect 12: the job exited 0 when no method ran.  RFF has no sampler for imq.
    assert main(["--methods", "rff", "--kernel", "imq", "--r", "8"]) == 1
    captured = capsys.readouterr()
    assert "rff: skipped (random Fourier features are not available" in captured.out
    assert "error: 1 of 1 method(s) skipped (rff)" in captured.err


def test_n_jobs_none_is_accepted(capsys):
    assert main(["--methods", "rff", "--r", "8", "--n-jobs", "None"]) == 0


def test_plot_writes_the_frontier(capsys, tmp_path):
    small_set(tmp_path)
    out_file = tmp_path / "frontier.png"
    assert main(["--data", "small", "--data-dir", str(tmp_path), "--methods", "rff,nystrom",
                 "--r", "32", "--sigma", "1", "--lam", "0.1", "--plot", str(out_file)]) == 0
    assert out_file.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote the frontier to {out_file}" in capsys.readouterr().out


def test_plot_to_a_missing_folder_fails_before_the_fits(capsys, tmp_path):
    assert main(["--plot", str(tmp_path / "no" / "f.png")]) == 2
    assert "its folder does not exist" in capsys.readouterr().err
