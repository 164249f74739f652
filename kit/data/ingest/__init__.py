"""Turn tool outputs (probe, OSU, SkaMPI, logp_mpi, ReproMPI, SimGrid calibration, netgauge,
plain CSV) into rows of the tidy dataset. Each tool's detection and parser live in its own
module under kit/tools (the registry kit.tools); :mod:`.sniff` asks them which one reads a
file; :mod:`.orchestrate` writes the dataset. The per-tool mapping (op, raw or aggregated,
units) is documented in docs/ingest-formats.md and in each tool's module.

The names below are imported on first use: the orchestrator and detection load every tool's
module (and Polars), which naming this package alone should not cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kit.data.ingest.orchestrate import IngestReport, ingest
    from kit.data.ingest.sniff import FORMATS, detect

__all__ = ["FORMATS", "IngestReport", "detect", "ingest"]


def __getattr__(name: str) -> Any:
    if name in ("IngestReport", "ingest"):
        from kit.data.ingest import orchestrate
        return getattr(orchestrate, name)
    if name == "FORMATS":
        from kit.data.ingest import sniff
        return sniff.formats()
    if name == "detect":
        from kit.data.ingest import sniff
        return sniff.detect
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
