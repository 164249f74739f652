"""Where the benchmark executables a campaign needs are, on the machine that plans it.

The generic part of the lookup; each tool's module (kit.tools.*) says which names and
sub-folders it looks for.

Preference: the kit's Spack view (``spack_view``; default :func:`kit.core.paths.spack_view`),
where OSU binaries sit either in ``bin/`` or under ``libexec/osu-micro-benchmarks/mpi/
pt2pt[/standard]/`` depending on the OSU version; then the directories of
``PT2PT_TOOLS_PATH`` (colon-separated install prefixes or folders holding the binaries, for
builds outside Spack); then ``PATH``. The probe comes from :func:`kit.core.paths.probe_binary`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kit.core import paths


def spack_view(setting: str | None) -> Path:
    """The view as an absolute path (relative to the planning directory): job scripts run in
    their job directory, where a relative view or binary path would point elsewhere."""
    return Path(setting).absolute() if setting else paths.spack_view()


def executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def which(name: str) -> Path | None:
    """``name`` on PATH as an absolute path: jobs run in their own directory, so a relative
    PATH entry (``.``, ``bin``) would not resolve there. Symlinks are kept (Spack views)."""
    found = shutil.which(name)
    return Path(os.path.abspath(found)) if found else None


TOOLS_PATH_ENV = "PT2PT_TOOLS_PATH"


def tools_dirs() -> list[Path]:
    """The folders of ``PT2PT_TOOLS_PATH``, absolute (jobs run in their own directory)."""
    return [Path(d).absolute() for d in os.environ.get(TOOLS_PATH_ENV, "").split(":") if d]


def find_in(names: list[str], view: Path, *, prefixes: bool = True) -> Path | None:
    """The first executable of ``names`` (paths relative to a prefix) under the view, then
    under each ``PT2PT_TOOLS_PATH`` folder; None if none is there (PATH is the caller's)."""
    for prefix in (view, *tools_dirs()) if prefixes else (view,):
        for name in names:
            if executable(prefix / name):
                return prefix / name
    return None
