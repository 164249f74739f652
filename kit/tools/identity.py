"""A run's identity, and whether its writer is still at work (ingest and collect).

A run's id is the SHA-256 of its files' bytes, so two copies of one run taken at different
moments (ingested while the probe was still writing, then again once it had ended) used to
be two runs holding the same samples: a 300,000-sample run became 339,990 samples in its
series. Two rules stop that:

* **identity**: a run also has an identity independent of its bytes, from what its tool
  records about it (the probe: plan hash, start time, hosts, seed, pairing). A later, longer
  copy of a run replaces the shorter one in the dataset; a copy no longer than the one there
  is skipped, saying which run it duplicates.
* **live writer**: a run whose writer is alive is not committed unless asked for
  (``--allow-running``): its samples file is locked by the probe, or its meta names a
  writer process alive on this host, or (writers on other hosts) its meta has no end time
  and the files changed less than :data:`GRACE_S` ago.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from kit.core.liveness import file_locked, pid_alive, this_host
from kit.tools.parsing import ParsedRun

#: A run without an end time whose files changed this recently is taken as still being
#: written when its writer cannot be asked (another host, a file system without locks).
GRACE_S = 60.0


def of(tool: str, **fields: Any) -> str | None:
    """The identity of a run from what its tool recorded; None when a field is missing
    (the run is then identified by its bytes alone)."""
    if any(v in (None, "", []) for v in fields.values()):
        return None
    text = json.dumps([tool, sorted(fields.items())], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def live_writer(run: ParsedRun, now: float | None = None) -> str | None:
    """Why ``run``'s files are still being written, or None when they are not."""
    for path in run.sources:
        if file_locked(path):
            return f"{path.name} is locked by the process writing it"
    writer = run.writer
    if writer is None:  # the tool recorded an end (or records nothing about its writer)
        return None
    host, pid = writer.get("host"), writer.get("pid")
    if this_host(host):
        if pid_alive(pid, program=writer.get("program")):
            return f"its writer, process {pid} on this host, is still running"
        return None  # killed: an incomplete run, to be ingested as such
    now = time.time() if now is None else now
    ages = []
    for path in run.sources:
        try:
            ages.append(now - path.stat().st_mtime)
        except OSError:
            continue
    if ages and min(ages) < GRACE_S:
        return (f"its meta file has no end time and it changed {max(min(ages), 0):.0f} s ago "
                f"(its writer runs on {host or 'another host'})")
    return None
