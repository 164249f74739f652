"""OSU 7.4 and SkaMPI 6 for real.

Two parts:

* always: our own outputs of the job templates (``tests/data/real-tools``, see its README for
  the commands) parsed by the OSU/SkaMPI ingest. These are what the tools really print under
  ``pt2pt run-local``, not hand-written fixtures, so format drift shows up here;
* when the binaries are installed: a tiny campaign with OSU (``osu_latency``, ``osu_bw``,
  ``osu_bibw``, with and without ``-z``) and SkaMPI over shm, tcp and ib is planned, run with
  ``run-local`` and collected, and the dataset must hold exactly the expected series (ib has
  no hardware here: its jobs must end as *skipped*, not failed).

The binaries are looked up like ``pt2pt plan`` does, on ``PATH``, after the directories
listed in ``PT2PT_TOOLS_PATH`` (``os.pathsep``-separated), e.g. for the builds described in
docs/spack.md ("Verified"):

    PT2PT_TOOLS_PATH=/work/tools/osu-7.4/libexec/osu-micro-benchmarks/mpi/pt2pt:/work/tools/skampi/bin
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

from kit.data.collect import collect
from kit.data.dataset import runs, series_table
from kit.measure.campaign.plan import plan_campaign
from kit.measure.campaign.runlocal import run_local
from kit.tools import osu, skampi

DATA = Path(__file__).resolve().parent / "data" / "real-tools"
PINGPONG_SKI = Path(__file__).resolve().parent.parent / "jobs" / "campaigns" / "pingpong.ski"
OSU_BENCHMARKS = ("osu_latency", "osu_bw", "osu_bibw")
BW_STATS = {"mean", "p50", "p10", "p1"}  # OSU's P50/P90/P99 *bandwidth* tails, as time


def _frame(path: Path) -> pl.DataFrame:
    parsed = (osu if path.suffix == ".txt" else skampi).parse(path)
    assert isinstance(parsed.rows, pl.DataFrame)
    return parsed.rows.with_columns(pl.col("op").cast(pl.String), pl.col("stat").cast(pl.String))


def _by_stat(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per size, one column per stat (the time)."""
    return frame.pivot(on="stat", index="size", values="time").sort("size")


def test_real_osu_latency_plain() -> None:
    rows = _frame(DATA / "osu_latency_shm.txt")
    assert set(rows["op"]) == {"pingpong"} and set(rows["stat"]) == {"mean"}
    assert rows["size"].to_list() == [2**k for k in range(17)]
    assert rows["time"][0] == pytest.approx(0.28e-6)  # "1   0.28" µs, one-way


def test_real_osu_latency_tail_columns_are_time_percentiles() -> None:
    rows = _frame(DATA / "osu_latency_z_tcp.txt")
    assert set(rows["stat"]) == {"mean", "p50", "p90", "p99"}
    wide = _by_stat(rows)
    assert ((wide["p50"] <= wide["p90"]) & (wide["p90"] <= wide["p99"])).all()


@pytest.mark.parametrize(("name", "op"), [("osu_bw_z_shm.txt", "bw"),
                                          ("osu_bibw_z_tcp.txt", "bibw")])
def test_real_osu_bandwidth_tails_become_time_percentiles(name: str, op: str) -> None:
    """OSU sorts per-iteration *bandwidths* ascending: its P99 column is the fastest iteration,
    i.e. the 1st percentile of the time per message. Stored as p99 it read as a slow tail
    below the median (seen in the first real run); it is stored as p1 now."""
    rows = _frame(DATA / name)
    assert set(rows["op"]) == {op} and set(rows["stat"]) == BW_STATS
    wide = _by_stat(rows)
    assert ((wide["p1"] <= wide["p10"]) & (wide["p10"] <= wide["p50"])).all()
    last = rows.filter((pl.col("size") == 65536) & (pl.col("stat") == "p1"))
    p99_bw = float((DATA / name).read_text().splitlines()[-1].split()[-1])
    assert last["time"][0] == pytest.approx(65536 / (p99_bw * 1e6))


def test_real_skampi_pingpong() -> None:
    parsed = skampi.parse(DATA / "skampi_pingpong_tcp.sko")
    rows = _frame(DATA / "skampi_pingpong_tcp.sko")
    assert parsed.tool_version == "SKaMPI Version 6.0.0"
    assert rows["size"].to_list() == [2**k for k in range(15)]  # 64 KiB buffer: up to 16 KiB
    assert set(rows["stat"]) == {"mean"} and rows["n"].min() >= 32
    assert rows["time"][0] == pytest.approx(8.7e-6 / 2)  # round trip -> one way


def test_job_json_beside_the_output_gives_run_metadata(tmp_path: Path) -> None:
    """OSU/SkaMPI print no start, end, host or job id; the job template's job.json has them.
    A cancelled job's partial output must not be recorded as complete."""
    job = tmp_path / "007-osu_bw1-shm-intra-r1"
    job.mkdir()
    shutil.copy(DATA / "osu_bw_z_shm.txt", job / "osu_bw.txt")
    plan = {"outputs": ["osu_bw.txt"], "nodes": 1, "ntasks_per_node": 2,
            "transport_env": {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,vader"},
            # the range OSU was asked for: without it, stopping at 64 KiB reads as truncated
            "command": ["osu_bw", "-z", "-m", "1:65536", "-i", "200", "-x", "20"]}
    record = {"plan": plan, "state": "completed", "slurm_job_id": "4711", "host": "n1",
              "start": "2026-11-22T04:14:50Z", "end": "2026-11-22T04:14:51Z"}
    (job / "job.json").write_text(json.dumps(record))
    run = osu.parse(job / "osu_bw.txt")
    assert (run.start, run.end, run.job_id) == (record["start"], record["end"], "4711")
    assert run.hosts == ["n1", "n1"] and run.env == plan["transport_env"]
    assert run.complete is True and run.transport_hint == "shm"
    (job / "job.json").write_text(json.dumps({**record, "state": "cancelled"}))
    assert osu.parse(job / "osu_bw.txt").complete is False
    # a job.json that does not list the file (another tool's job) is not used
    (job / "job.json").write_text(json.dumps({**record, "plan": {**plan, "outputs": ["x"]}}))
    assert osu.parse(job / "osu_bw.txt").start is None
    # SkaMPI reads it the same way; inter-node jobs know only the batch host: no hosts
    shutil.copy(DATA / "skampi_pingpong_tcp.sko", job / "skampi.sko")
    inter = {**plan, "outputs": ["skampi.sko"], "nodes": 2, "ntasks_per_node": 1}
    (job / "job.json").write_text(json.dumps({**record, "plan": inter}))
    run = skampi.parse(job / "skampi.sko")
    assert run.job_id == "4711" and run.hosts == [] and run.complete is True


# --- the real binaries ------------------------------------------------------------------

def _tools_path() -> str:
    extra = os.environ.get("PT2PT_TOOLS_PATH", "")
    return os.pathsep.join(p for p in (extra, os.environ.get("PATH", "")) if p)


@pytest.fixture(scope="module")
def tools_path() -> str:
    path = _tools_path()
    wanted = (*OSU_BENCHMARKS, "skampi", "mpirun")
    missing = [name for name in wanted if shutil.which(name, path=path) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not found on PT2PT_TOOLS_PATH or PATH: build OSU "
                    "7.x and SkaMPI as in docs/spack.md ('Verified') and set "
                    "PT2PT_TOOLS_PATH=<osu prefix>/libexec/osu-micro-benchmarks/mpi/pt2pt"
                    f"{os.pathsep}<skampi prefix>/bin")
    return path


CAMPAIGN = f"""\
name: real-tools-test
mpi: openmpi
transports: [shm, tcp, ib]
placement: intra-node
repetitions: 1
seed: 5
launcher: mpirun
tools:
  - tool: osu
    benchmarks: [{", ".join(OSU_BENCHMARKS)}]
    options: ["-m", "1:4096", "-i", "100", "-x", "10"]
  - tool: osu
    benchmarks: [{", ".join(OSU_BENCHMARKS)}]
    options: ["-z", "-m", "1:4096", "-i", "100", "-x", "10"]
  - tool: skampi
    ski: {PINGPONG_SKI}
    params: {{max_buffer: 16kb}}
"""


@pytest.mark.mpi
@pytest.mark.slow
def test_osu_and_skampi_campaign_runs_locally_and_collects(
        tools_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    monkeypatch.setenv("PATH", tools_path)
    # Selection variables in the caller's environment must not leak into the jobs.
    monkeypatch.setenv("OMPI_MCA_btl", "self,tcp")
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN)
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    manifest = json.loads(plan_campaign(campaign, out).read_text())
    assert manifest["not_planned"] == []
    assert len(manifest["jobs"]) == (2 * len(OSU_BENCHMARKS) + 1) * 3
    results = {r.job: r for r in run_local(out)}
    for job in manifest["jobs"]:
        result = results[job["id"]]
        if job["transport"] == "ib":
            assert result.state == "skipped", (job["id"], result)
            assert result.reason.startswith("ib unavailable"), result.reason
        else:
            assert result.state == "completed", (job["id"], result,
                                                 (out / job["dir"] / "stderr.txt").read_text())
    report = collect(out, dataset)
    assert report.ok and len(report.by_outcome("ingested")) == 2 * (2 * len(OSU_BENCHMARKS) + 1)

    series = series_table(dataset)
    got = {(r["tool"], r["transport"], r["op"], r["stat"]) for r in series.iter_rows(named=True)}
    expected = set()
    for transport in ("shm", "tcp"):
        expected |= {("osu", transport, "pingpong", s) for s in ("mean", "p50", "p90", "p99")}
        for op in ("bw", "bibw"):
            expected |= {("osu", transport, op, s) for s in BW_STATS}
        expected.add(("skampi", transport, "pingpong", "mean"))
    assert got == expected
    means = series.filter(pl.col("stat").cast(pl.String) == "mean")
    # mean rows come from both OSU entries (with and without -z): 13 sizes 1..4096 each
    osu_means = means.filter(pl.col("tool").cast(pl.String) == "osu")
    assert set(osu_means["n_samples"]) == {2 * 13}
    assert set(osu_means["size_max"]) == {4096}
    sk = means.filter(pl.col("tool").cast(pl.String) == "skampi")
    assert set(sk["size_min"]) == {1} and set(sk["size_max"]) == {4096}  # 16 KiB buffer
    table = runs(dataset)
    assert table.height == 2 * (2 * len(OSU_BENCHMARKS) + 1)
    assert table["start"].null_count() == 0 and table["end"].null_count() == 0
    assert table["hosts"].null_count() == 0 and table["complete"].all()
    versions = set(table["tool_version"].to_list())
    assert any(v.startswith("OSU 7.") for v in versions)
    assert "SKaMPI Version 6.0.0" in versions
