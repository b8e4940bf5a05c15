"""The compiled modules: protocol/record_scan.py (the per-record walk of Produce validation) and
protocol/record_columns.py (fetched records decoded into Arrow's column layout, for the Spark source), compiled by
Cython with the C types of their .pxd files. Everything else about the package is in pyproject.toml.

The extensions are optional: where nothing can compile them (no C compiler, no Python headers), the install goes on
and the same files run as plain Python.
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

MODULES = ("record_scan", "record_columns")

# Cython takes a module's name from where its file lies (protocol.record_scan) and finds the .pxd by that name: built
# as "epoch_broker.protocol.record_scan" it would find none and compile untyped Python (~1.5x, not ~20x). Its init
# function, PyInit_record_scan, is the same under either name, so it is installed under the package's.
extensions = cythonize(
    # -g0: no debug info (a module is 0.2 MB instead of 1.4 MB)
    [Extension(f"protocol.{name}", [f"protocol/{name}.py"], extra_compile_args=["-g0"]) for name in MODULES],
    compiler_directives={"language_level": 3, "annotation_typing": False},
)
for extension in extensions:
    extension.name = f"epoch_broker.{extension.name}"
    # Set here, not on the Extension given to cythonize: the one it returns lacks it, and without it a machine with
    # no C compiler (python:3.11-slim) could not install at all
    extension.optional = True
setup(ext_modules=extensions)
