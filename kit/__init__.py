"""pt2pt-kit: raw MPI point-to-point measurements turned into per-regime models.

The package is headless on purpose: the Textual explorer (`tui`) builds on it, never the
other way round, so `kit` can run on compute nodes and in CI without a terminal.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pt2pt-kit")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.1.0"

__all__ = ["__version__"]
