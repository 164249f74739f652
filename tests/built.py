"""The kit's compiled extensions, for the tests that hold them to their numpy references.

They are optional at install time (no compiler or Python.h: the numpy paths run), but the
suite runs where they are built (``make venv``, the Containerfile), so a missing one fails
the test that asks for it instead of skipping: a silently slower fit would go unnoticed.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


def extension(module: str) -> ModuleType:
    """``kit.model._mixture_kernels``, ``kit.tools._probe_rows`` etc., or a failure that says
    how to build it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - the message is the point
        source = module.replace(".", "/") + ".c"
        pytest.fail(f"the C kernels are not built ({exc}): install python3-dev and gcc, then "
                    f"`pip install -e .` (make venv) builds {source}")
