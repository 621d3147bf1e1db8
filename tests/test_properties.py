"""Runs the property-based suite (tests/properties_api.py) in its own interpreter.

A crash (segfault, abort) inside a compiled core would otherwise end the whole test run without
a report; in a subprocess it fails this test, with the suite's output and the falsifying example
hypothesis printed.  The suite's size is bounded for CI (HKERN_HYPOTHESIS_EXAMPLES, default 100
examples per property, about a minute in all).
"""
import os
import subprocess
import sys

SUITE = os.path.join(os.path.dirname(__file__), "properties_api.py")


def test_property_suite():
    out = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-m", "pytest", SUITE, "-q", "-p",
         "no:cacheprovider", "--import-mode=importlib"],
        capture_output=True, text=True, timeout=1500, cwd=os.path.dirname(__file__))
    report = (out.stdout + out.stderr)[-12000:]
    assert out.returncode == 0, f"property suite failed (exit {out.returncode}):\n{report}"
