"""Site defaults for campaigns: partition, account, qos, launcher, Spack view, kit Python.

The Ansible site playbook writes them to ``/etc/pt2pt/site.yaml`` so that campaign files
stay portable between clusters; a campaign's own values always win. ``PT2PT_SITE_CONFIG``
points elsewhere (tests, users without root).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kit.core.errors import CampaignError
from kit.core.yamlmarks import load_located_file

DEFAULT_SITE_FILE = Path("/etc/pt2pt/site.yaml")
SITE_KEYS = ("partition", "account", "qos", "launcher", "spack_view", "python")


@dataclass(frozen=True)
class SiteDefaults:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    launcher: str | None = None
    spack_view: str | None = None
    #: the installed kit's interpreter on the compute nodes (runs kit.measure.campaign.jobrecord)
    python: str | None = None
    source: str | None = None


def site_file() -> Path:
    return Path(os.environ.get("PT2PT_SITE_CONFIG") or DEFAULT_SITE_FILE)


def load_site(path: Path | None = None) -> SiteDefaults:
    """Read the site file if it exists; a missing file means no defaults."""
    path = path or site_file()
    if not path.is_file():
        return SiteDefaults()
    loc = load_located_file(path)
    data = loc.data if loc.data is not None else {}
    if not isinstance(data, dict):
        raise CampaignError("the site file must be a mapping", where=loc.where(()),
                            hint=f"write 'key: value' lines with keys {', '.join(SITE_KEYS)}")
    values: dict[str, str | None] = {}
    for key, value in data.items():
        if key not in SITE_KEYS:
            raise CampaignError(f"unknown site key '{key}'", where=loc.where((key,)),
                                hint=f"allowed keys: {', '.join(SITE_KEYS)}")
        if value is not None and not isinstance(value, str):
            raise CampaignError(f"'{key}' must be text", where=loc.where((key,)),
                                hint="quote the value")
        values[key] = value
    return SiteDefaults(**values, source=str(path))
