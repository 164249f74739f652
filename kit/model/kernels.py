"""The engine's compiled kernels (``_mixture_kernels.c``, ``_curve_kernels.c``, built by
setup.py), or None.

One place decides whether they are there: the modules that use them (noise.py, mixture.py,
families.py, segmentation.py) keep numpy versions of the same computations, as the
reference the tests hold the kernels to and as the fallback where the extension was not
built (no compiler or Python.h at install time, or a source tree that was never installed).
"""

from __future__ import annotations

from types import ModuleType

KERNELS: ModuleType | None
try:
    from kit.model import _mixture_kernels as KERNELS
except ImportError:
    KERNELS = None

CURVES: ModuleType | None
try:
    from kit.model import _curve_kernels as CURVES
except ImportError:
    CURVES = None
