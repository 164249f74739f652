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
    return Path(setting) if setting else DEFAULT_VIEW


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_osu(name: str, view: Path) -> Path | None:
    candidates = [view / "bin" / name]
    for sub in ("mpi/pt2pt", "mpi/pt2pt/standard"):
        candidates.append(view / "libexec" / "osu-micro-benchmarks" / sub / name)
    for path in candidates:
        if _executable(path):
            return path
    found = shutil.which(name)
    return Path(found) if found else None


def find_skampi(view: Path) -> Path | None:
    if _executable(view / "bin" / "skampi"):
        return view / "bin" / "skampi"
    found = shutil.which("skampi")
    return Path(found) if found else None


def find_probe() -> Path | None:
    path = probe_binary()
    return path.resolve() if path is not None else None
