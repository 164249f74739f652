"""Turn tool outputs (probe, OSU, SkaMPI, logp_mpi, ReproMPI, SimGrid calibration, netgauge,
plain CSV) into rows of the tidy dataset. One module per format; :mod:`.sniff` decides which
one reads a file; :mod:`.orchestrate` writes the dataset. The per-tool mapping (op, raw or
aggregated, units) is documented in docs/ingest-formats.md and in each module.
"""

from kit.ingest.orchestrate import IngestReport, ingest
from kit.ingest.sniff import FORMATS, detect

__all__ = ["FORMATS", "IngestReport", "detect", "ingest"]
