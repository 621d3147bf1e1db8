"""Compile a Cython module that cimports hkern, as code outside hkern would, and import it.

Only the directory *containing* the installed hkern package goes on the Cython include path, so
the module sees hkern's .pxd files and nothing else: no hkern header is handed to the C compiler.
"""
import importlib.util
import os
import sys

import hkern


def build_probe(tmp_dir, name, source):
    """Compile the .pyx text ``source`` as extension module ``name`` in ``tmp_dir`` (a
    pathlib.Path) and import it.  Returns (module, the generated C source); remove the module
    from sys.modules with :func:`drop_probe` when done."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    pyx = tmp_dir / f"{name}.pyx"
    pyx.write_text(source)
    root = os.path.dirname(os.path.dirname(hkern.__file__))   # where `cimport hkern...` resolves
    exts = cythonize([Extension(name, [str(pyx)])], include_path=[root], quiet=True, force=True,
                     compiler_directives={"language_level": 3})
    dist = Distribution({"name": name, "ext_modules": exts})
    cmd = build_ext(dist)
    cmd.build_lib = str(tmp_dir / "lib")
    cmd.build_temp = str(tmp_dir / "build")
    cmd.ensure_finalized()
    cmd.run()
    path = cmd.get_ext_fullpath(name)
    assert os.path.exists(path), f"the build wrote no extension at {path}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, (tmp_dir / f"{name}.c").read_text()


def drop_probe(name):
    sys.modules.pop(name, None)
