"""Build of the compiled kernels (both mixtures' EMs, the curve fits' Huber loop and
between-size variance, the probe's CSV); everything else is in pyproject.toml.

Optional: where the C extension does not build (no compiler, no Python.h from
python3-dev), the install goes on and the kit runs the same fit in numpy.
"""

from setuptools import Extension, setup

_C99 = ["-std=c99", "-Wall", "-Wextra"]
setup(ext_modules=[
    Extension("kit.model._mixture_kernels", ["kit/model/_mixture_kernels.c"],
              extra_compile_args=_C99, optional=True),
    Extension("kit.model._curve_kernels", ["kit/model/_curve_kernels.c"],
              extra_compile_args=_C99, optional=True),
    Extension("kit.tools._probe_rows", ["kit/tools/_probe_rows.c"],
              extra_compile_args=_C99, optional=True),
])
