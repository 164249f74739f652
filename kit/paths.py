"""Where the kit finds its own files (probe sources, job templates) at run time."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
PROBE_DIR = PACKAGE_DIR / "probe"
JOBS_DIR = REPO_ROOT / "jobs"
#: The Spack environment's view (spack.yaml has `view: true`).
SPACK_VIEW = REPO_ROOT / ".spack-env" / "view"
PLAYBOOKS_DIR = REPO_ROOT / "playbooks"


def probe_binary() -> Path | None:
    """The probe executable: $PT2PT_PROBE, the in-tree build, the Spack view, or PATH."""
    env = os.environ.get("PT2PT_PROBE")
    if env:
        return Path(env)
    local = PROBE_DIR / "pt2pt-probe"
    if local.is_file() and os.access(local, os.X_OK):
        return local
    view = SPACK_VIEW / "bin" / "pt2pt-probe"
    if view.is_file() and os.access(view, os.X_OK):
        return view
    found = shutil.which("pt2pt-probe")
    return Path(found) if found else None
