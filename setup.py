"""The one compiled module: protocol/record_scan.py (the per-record walk of Produce validation), compiled by Cython
with the C types of protocol/record_scan.pxd. Everything else about the package is in pyproject.toml.

The extension is optional: where nothing can compile it (no C compiler, no Python headers), the install goes on
and the same file runs as plain Python.
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

# Cython takes a module's name from where its file lies (protocol.record_scan) and finds the .pxd by that name: built
# as "epoch_broker.protocol.record_scan" it would find none and compile untyped Python (~1.5x, not ~20x). Its init
# function, PyInit_record_scan, is the same under either name, so it is installed under the package's.
(scanner,) = cythonize(
    # -g0: no debug info (the module is 0.2 MB instead of 1.4 MB)
    [Extension("protocol.record_scan", ["protocol/record_scan.py"], extra_compile_args=["-g0"])],
    compiler_directives={"language_level": 3, "annotation_typing": False},
)
scanner.name = "epoch_broker.protocol.record_scan"
# Set here, not on the Extension given to cythonize: the one it returns lacks it, and without it a machine with no C
# compiler (python:3.11-slim) could not install at all
scanner.optional = True
setup(ext_modules=[scanner])
