"""Runs the property-based suites (tests/properties_api.py: every public call on awkward
inputs; tests/properties_solvers.py: selection, PCG, return_std, scale laws and
n_jobs) each in its own interpreter.

A crash (segfault, abort) inside a compiled core would otherwise end the whole test run without
a report; in a subprocess it fails this test, with the suite's output and the falsifying example
hypothesis printed.  The suite's size is bounded for CI (HKERN_HYPOTHESIS_EXAMPLES, default 100
examples per property, about a minute in all).
"""
import os
import subprocess
import sys

import pytest

SUITES = ["properties_api.py", "properties_solvers.py"]


@pytest.mark.parametrize("suite", SUITES)
def test_property_suite(suite):
    out = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-m", "pytest",
         os.path.join(os.path.dirname(__file__), suite), "-q", "-p",
         "no:cacheprovider", "--import-mode=importlib"],
        capture_output=True, text=True, timeout=1500, cwd=os.path.dirname(__file__))
    report = (out.stdout + out.stderr)[-12000:]
    assert out.returncode == 0, f"property suite failed (exit {out.returncode}):\n{report}"
