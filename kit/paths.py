"""Where the kit finds its own files (probe sources, job templates) at run time."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
PROBE_DIR = PACKAGE_DIR / "probe"
JOBS_DIR = REPO_ROOT / "jobs"
PLAYBOOKS_DIR = REPO_ROOT / "playbooks"


def probe_binary() -> Path | None:
    """The probe executable: $PT2PT_PROBE, the in-tree build, or `pt2pt-probe` on PATH."""
    env = os.environ.get("PT2PT_PROBE")
    if env:
        return Path(env)
    local = PROBE_DIR / "pt2pt-probe"
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which("pt2pt-probe")
    return Path(found) if found else None
