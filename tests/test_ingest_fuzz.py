"""Mutated tool outputs either ingest or raise IngestError, never any other exception.

The seeds are real fixture files (and excerpts of the large reference files, cut in the
test). Mutations are line and byte edits a disk, a killed job or a careless edit produce;
the probe's meta file is mutated too. What ingests is checked for values, not only for
"no crash": no non-finite, negative or null time or size reaches the dataset.
``FUZZ_CASES`` examples: a fast subset by default, 4,000 when ``CI=true``
(tests/test_hardening_fuzz.py adds campaigns and model files: >= 10,000 cases in CI).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.core.errors import IngestError
from kit.data.ingest import sniff
from kit.data.ingest.orchestrate import parse_file, write_part

SEEDS = [
    "osu/osu_latency_vader_7.2.txt", "osu/osu_latency_tcp_7.4_z.txt", "osu/osu_bw_tcp_7.4.txt",
    "osu/osu_bibw_vader_7.4_z.txt", "skampi/skampi_pingpong_tcp.sko",
    "logp_mpi/logp_test.out.Send.Recv.tcp", "netgauge/netgauge_loggp_tcp_ng.out",
    "reprompi/reprompi_sendrecv_summary_nrep1000_tcp.txt",
    "reprompi/reprompi_sendrecv_window_hca_global_verbose_shuffle_vader.txt",
    "reprompi/reprompi_error_missing_pingpong_ranks.txt", "osu/osu_latency_help_7.4.txt",
]
EXCERPTS = [  # (path in ../shared, lines kept, name in the test folder)
    ("fixtures/reprompi/reprompi_sendrecv_raw_nrep100_tcp.txt", 120, "raw_tcp.txt"),
    ("reference-data/platform-calibration/graphene_eth_example/graphene_eth_PingPong.csv", 40,
     "g_PingPong.csv"),
    ("reference-data/platform-calibration/graphene_eth_example/graphene_eth_Isend.csv", 40,
     "g_Isend.csv"),
    ("reference-data/pycewise/pingpong_remote.csv", 40, "pingpong_remote.csv"),
]
PROBE = (b"seq,op,size,count,time,call,warmup\n0,pingpong,1532,1,3.1e-05,,1\n"
         b"1,isend,64,1,2.0e-06,5.0e-07,0\n2,stream,4096,64,1.2e-04,,0\n3,recv,0,1,1e-07,,0\n")
PROBE_META = b'{"hosts": ["a", "b"], "env": {"OMPI_MCA_btl": "self,tcp"}, "complete": true}'
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
FUZZ_CASES = 4000 if CI else 400
META_VALUES = [None, True, 0, -1, 1.5, "x", "", [], {}, ["a"], {"k": "v"}, [1, 2], 10 ** 30]

TOKENS = [b"", b"-", b"-1", b"0", b"1e309", b"nan", b"inf", b"x", b",", b" ", b"\n", b"\t",
          b"#", b"\xff\xfe", b"\x00", b"99999999999999999999999", b"1.5", b"WARNING: x\n",
          b"# Size  Bandwidth (MB/s)\n", b"count= 1 1 1 1 1 1 1\n", b"MPI_Send,1,0,1\n"]


@pytest.fixture(scope="module")
def seeds(fixtures_dir: Path, shared_dir: Path) -> list[tuple[str, bytes]]:
    out = [(Path(rel).name, (fixtures_dir / rel).read_bytes()) for rel in SEEDS]
    for rel, keep, name in EXCERPTS:
        lines = (shared_dir / rel).read_bytes().splitlines(keepends=True)
        out.append((name, b"".join(lines[:keep])))
    out.append(("run.samples.csv", PROBE))
    return out


@st.composite
def mutated(draw, seeds: list[tuple[str, bytes]]) -> tuple[str, bytes]:
    name, data = draw(st.sampled_from(seeds))
    lines = data.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "duplicate", "swap", "token", "byte", "truncate"]))
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind in ("token", "byte"):
            line = lines[i]
            p = draw(st.integers(0, len(line)))
            q = draw(st.integers(p, min(len(line), p + 12)))
            new = draw(st.sampled_from(TOKENS)) if kind == "token" else draw(st.binary(max_size=3))
            lines[i] = line[:p] + new + line[q:]
        else:
            lines = lines[: i + 1]
            lines[-1] = lines[-1][: draw(st.integers(0, len(lines[-1])))]
    return name, b"".join(lines)


def _ingest_one(folder: Path, name: str, data: bytes, meta: bytes = PROBE_META) -> None:
    path = folder / name
    path.write_bytes(data)
    if name.endswith(".samples.csv"):
        (folder / "run.meta.json").write_bytes(meta)
    try:
        run = parse_file(path)
    except sniff.Companion:
        return
    n_rows, files = write_part(run, folder / "part-fuzz.parquet")
    written = pl.read_parquet(files)
    assert written.height == n_rows > 0
    assert written.null_count().sum_horizontal().item() == 0
    times = written["time"].to_list()
    assert all(math.isfinite(t) and t >= 0 for t in times), "non-finite or negative time"
    assert written["size"].min() >= 0  # type: ignore[operator]
    assert run.complete in (True, False) and (run.complete or run.incomplete_reason)


@st.composite
def mutated_meta(draw) -> bytes:
    """The probe's meta file with keys set to values of other types, or its bytes cut."""
    meta = json.loads(PROBE_META)
    meta.update(samples_written=4, ops=["pingpong", "isend", "stream", "recv"])
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(["hosts", "env", "complete", "samples_written", "ops",
                                    "start", "slurm_job_id", "probe_version", "stop_reason"]))
        meta[key] = draw(st.sampled_from(META_VALUES))
    raw = json.dumps(meta).encode()
    if draw(st.booleans()) and draw(st.booleans()):
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


def test_mutated_files_ingest_or_raise_ingest_error(seeds):
    @settings(max_examples=FUZZ_CASES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=mutated(seeds), meta=mutated_meta())
    def check(case: tuple[str, bytes], meta: bytes) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                _ingest_one(Path(tmp), *case, meta=meta)
            except IngestError as err:
                assert err.where and err.paragraph()

    check()


def test_unmutated_seeds_behave(seeds, tmp_path):
    """The seeds themselves: data ingests, the help and error captures are rejected."""
    for name, data in seeds:
        folder = tmp_path / name
        folder.mkdir()
        if "help" in name or "error" in name:
            with pytest.raises(IngestError):
                _ingest_one(folder, name, data)
        else:
            _ingest_one(folder, name, data)
