"""Find the benchmark executables a campaign needs, on the machine that plans it.

Preference: the kit's Spack view (``spack_view``; default ``<repo>/.spack-env/view``),
where OSU binaries sit either in ``bin/`` or under ``libexec/osu-micro-benchmarks/mpi/
pt2pt[/standard]/`` depending on the OSU version; then ``PATH``. The probe comes from
:func:`kit.paths.probe_binary`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kit.paths import REPO_ROOT, probe_binary

DEFAULT_VIEW = REPO_ROOT / ".spack-env" / "view"


def spack_view(setting: str | None) -> Path:
    """The view as an absolute path (relative to the planning directory): job scripts run in
    their job directory, where a relative view or binary path would point elsewhere."""
    return Path(setting).absolute() if setting else DEFAULT_VIEW


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _which(name: str) -> Path | None:
    """``name`` on PATH as an absolute path: jobs run in their own directory, so a relative
    PATH entry (``.``, ``bin``) would not resolve there. Symlinks are kept (Spack views)."""
    found = shutil.which(name)
    return Path(os.path.abspath(found)) if found else None


def find_osu(name: str, view: Path) -> Path | None:
    candidates = [view / "bin" / name]
    for sub in ("mpi/pt2pt", "mpi/pt2pt/standard"):
        candidates.append(view / "libexec" / "osu-micro-benchmarks" / sub / name)
    for path in candidates:
        if _executable(path):
            return path
    return _which(name)


def find_skampi(view: Path) -> Path | None:
    if _executable(view / "bin" / "skampi"):
        return view / "bin" / "skampi"
    return _which("skampi")


def find_probe() -> Path | None:
    path = probe_binary()
    return path.resolve() if path is not None else None
