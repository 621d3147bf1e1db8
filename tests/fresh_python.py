"""Run test code in a fresh interpreter: a crash there fails the test instead of killing pytest.

The child runs in this folder (tests/), never the repository root: ``python -c`` puts its working
folder first on sys.path, and from the root it would import the uncompiled source tree instead of
the installed hkern.
"""
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))


def run_python(code, *, env=None, drop_env=(), timeout=120):
    """CompletedProcess of ``code`` (dedented) run by this interpreter in tests/.

    ``env`` entries are added to the current environment after removing the names in
    ``drop_env``.
    """
    full_env = {k: v for k, v in os.environ.items() if k not in drop_env}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=full_env, cwd=HERE)
