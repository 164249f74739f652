"""Where the kit finds its own files (probe sources, job templates, playbooks) at run time.

Job templates, the transport table, the example campaigns and the playbooks live in the
repository's top-level ``jobs/`` and ``playbooks/`` (a fixed layout). ``kit/_data/`` links
to them, so they are package data of ``kit``: a wheel carries copies and ``pip install``
of it plans and deploys without the source tree. They are found with
``importlib.resources`` (the same call in a checkout and in an installed package).
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = PACKAGE_DIR.parent
PROBE_DIR = PACKAGE_DIR / "probe"


def data_dir(name: str) -> Path:
    """``jobs`` or ``playbooks`` from the package data (``kit/_data/NAME``).

    A checkout whose links were not created (e.g. a copy made without symlinks) falls back
    to the top-level folder beside the package.
    """
    found = Path(str(resources.files("kit") / "_data" / name))
    return found if found.is_dir() else REPO_ROOT / name


JOBS_DIR = data_dir("jobs")
PLAYBOOKS_DIR = data_dir("playbooks")
#: Names the Spack view to use when a campaign and the site name none.
SPACK_VIEW_ENV = "PT2PT_SPACK_VIEW"


def spack_view() -> Path:
    """The default Spack view: ``$PT2PT_SPACK_VIEW``, else the kit environment's own
    (``<kit>/.spack-env/view``, spack.yaml has ``view: true``).

    Read at each call, not at import: the test suite points it at an empty folder so that
    no test depends on what a developer's ``spack -e . install`` left in the checkout.
    """
    env = os.environ.get(SPACK_VIEW_ENV)
    return Path(env).absolute() if env else REPO_ROOT / ".spack-env" / "view"


def probe_binary() -> Path | None:
    """The probe executable: $PT2PT_PROBE, the in-tree build, the Spack view, or PATH."""
    env = os.environ.get("PT2PT_PROBE")
    if env:
        return Path(env)
    local = PROBE_DIR / "pt2pt-probe"
    if local.is_file() and os.access(local, os.X_OK):
        return local
    view = spack_view() / "bin" / "pt2pt-probe"
    if view.is_file() and os.access(view, os.X_OK):
        return view
    found = shutil.which("pt2pt-probe")
    return Path(found) if found else None
