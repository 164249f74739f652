"""pt2pt-kit: raw MPI point-to-point measurements turned into per-regime models.

The package is headless on purpose: the Textual explorer (`tui`) builds on it, never the
other way round, so `kit` can run on compute nodes and in CI without a terminal.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # The version is looked up on first use, not at import: importlib.metadata alone costs
    # ~60 ms, a third of `pt2pt --version` and paid by every command (issue 19).
    if name != "__version__":
        raise AttributeError(f"module 'kit' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("pt2pt-kit")
    except PackageNotFoundError:  # running from a source tree that was never installed
        value = "0.1.0"
    globals()["__version__"] = value
    return value
