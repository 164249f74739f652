"""OSU 7.4 and SkaMPI 6 for real.

Two parts:

* always: our own outputs of the job templates (``tests/data/real-tools``, see its README for
  the commands) parsed by the OSU/SkaMPI ingest. These are what the tools really print under
  ``pt2pt run-local``, not hand-written fixtures, so format drift shows up here;
* with the tools Spack built from the kit's environment (the ``spack_tools`` session
  fixture, tests/conftest_spack.py): a tiny campaign with OSU (``osu_latency``, ``osu_bw``,
  ``osu_bibw``, with and without ``-z``) and SkaMPI with the kit's ``pingpong.ski`` over shm,
  tcp and ib is planned, run with ``run-local`` and collected, and the dataset must hold
  exactly the expected series (ib has no hardware here: its jobs must end as *skipped*, not
  failed); then the Spack-built probe and ``osu_latency`` measure the same sizes in the same
  conditions, the probe's series is fitted, and its P50 is held to OSU's.

``pt2pt plan`` finds the binaries as it does for a user: in the Spack view, here the
fixture's (``PT2PT_SPACK_VIEW``), with nothing on ``PATH``.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from kit.core.paths import SPACK_VIEW_ENV
from kit.data.collect import collect
from kit.data.dataset import runs, scan, series_table
from kit.data.schema import SERIES_KEYS
from kit.figures.estimate import Estimate, median_interval
from kit.fit.fitting import FitOptions, fit_series
from kit.measure.campaign.manifest import MANIFEST_NAME
from kit.measure.campaign.plan import plan_campaign
from kit.measure.campaign.runlocal import run_local
from kit.measure.conditions import Conditions, withheld
from kit.measure.machine import wait_for_idle
from kit.tools import osu, skampi
from tests.conftest_spack import SpackTools, runs_spack_built_tools

DATA = Path(__file__).resolve().parent / "data" / "real-tools"
PINGPONG_SKI = Path(__file__).resolve().parent.parent / "jobs" / "campaigns" / "pingpong.ski"
OSU_BENCHMARKS = ("osu_latency", "osu_bw", "osu_bibw")
TITLE_OPS = {"osu_latency": "pingpong", "osu_bw": "bw", "osu_bibw": "bibw"}
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


def test_bandwidth_printed_as_zero_is_left_out_with_a_warning() -> None:
    """A busy node: OSU printed the 1 B mean bandwidth as 0.00 MB/s, which holds no time per
    message. That cell is left out and named; the run's other rows are kept (the demo's
    collect failed the whole job on it)."""
    name = "osu_bw_z_tcp_busy.txt"
    run = osu.parse(DATA / name)
    rows = _frame(DATA / name)
    assert set(rows["stat"]) == BW_STATS
    assert rows.filter(pl.col("size") == 1)["stat"].sort().to_list() == ["p1", "p10", "p50"]
    assert rows.filter(pl.col("stat") == "mean")["size"].min() == 2
    assert rows.height == 23 * 4 - 1  # 1 B .. 4 MiB, four columns, one cell out
    assert any("0.00 MB/s" in w and "1 B mean" in w for w in run.warnings), run.warnings


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


# --- the real binaries, built by Spack ---------------------------------------------------

@pytest.fixture
def spack_view(spack_tools: SpackTools, monkeypatch: pytest.MonkeyPatch,
               tmp_path: Path) -> Path:
    """The Spack-built view as the default view; no site file, no tools on PATH."""
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    monkeypatch.setenv(SPACK_VIEW_ENV, str(spack_tools.view))
    monkeypatch.delenv("PT2PT_PROBE", raising=False)
    # Selection variables in the caller's environment must not leak into the jobs.
    monkeypatch.setenv("OMPI_MCA_btl", "self,tcp")
    return spack_tools.view

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


@runs_spack_built_tools
def test_osu_and_skampi_campaign_runs_locally_and_collects(
        spack_view: Path, tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN)
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    manifest = json.loads(plan_campaign(campaign, out).read_text())
    assert manifest["not_planned"] == []
    # Found in the view, as plan finds them for a user.
    assert all(Path(j["command"][0]).is_relative_to(spack_view) for j in manifest["jobs"]), \
        [j["command"][0] for j in manifest["jobs"]]
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
    # mean rows come from both OSU entries (with and without -z): 13 sizes 1..4096 each, less
    # the bandwidth cells a busy node printed as 0.00 MB/s (left out, named in a warning)
    expected_n: dict[tuple[str, str], int] = {}
    for job in manifest["jobs"]:
        if job["tool"] == "osu" and job["transport"] != "ib":
            for output in job["outputs"]:
                parsed = osu.parse(out / job["dir"] / output)
                n = parsed.rows.filter(pl.col("stat").cast(pl.String) == "mean").height
                assert n == 13 or any("0.00 MB/s" in w for w in parsed.warnings), \
                    (output, n, parsed.warnings)
                key = (job["transport"], TITLE_OPS[job["benchmark"]])
                expected_n[key] = expected_n.get(key, 0) + n
    osu_means = means.filter(pl.col("tool").cast(pl.String) == "osu")
    assert osu_means.height == len(expected_n)
    for row in osu_means.iter_rows(named=True):
        key = (str(row["transport"]), str(row["op"]))
        assert row["n_samples"] == expected_n[key], (key, row, expected_n)
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


# --- the probe against OSU -------------------------------------------------------------

#: Sizes (bytes) at which the probe is held to osu_latency, and how close.
CROSS_SIZES = (8, 1024, 65536, 1048576)
CROSS_TOLERANCE = 0.05
#: The statistic the ±5 % claim is made on: the P50 (robust to the odd preempted message),
#: except where the per-message times are bimodal with a share near one half. Over vader
#: (shm) at 8 B both tools alternate message by message between two modes (0.25 / 0.47 us,
#: kit/probe/README.md): a run's P50 then says on which side of one half the fast share
#: fell (probe 0.45-0.52, OSU 0.50-0.51), a knife-edge that jumps ~30 %, not what a message
#: costs. The mean moves continuously with the modes and the share, and is the figure
#: osu_latency prints by default. Chosen from the transport's mechanism before this run,
#: never from which statistic passes; both are printed for every cell (BENCHMARKS.md "Probe
#: fidelity" has the per-mode picture).
CLAIM_STAT: dict[tuple[str, int], str] = {("shm", 8): "mean"}
#: Beyond this the probe times something else than osu_latency (a round trip not halved,
#: the warm-up in the samples): asserted whatever the machine's state. Between the two,
#: the difference is reported (CrossCheckOutside) and BENCHMARKS.md carries the figures.
GROSS_TOLERANCE = 0.25
#: Many short rounds rather than a few long ones: what spreads probe/OSU is the run, not
#: the samples within it (8 B-64 KiB at load 7-11: the P50s of a run's two halves differ by
#: a median 0.3-2 %, the P50s of 10 runs by 12-23 % max/min). 10 rounds give the median of
#: the paired ratios a 98 % distribution-free interval, 2nd-9th of 10 (kit.figures.estimate).
#: At shm 64 KiB / 1 MiB (CMA) a short osu_latency run also carries its own slow first
#: milliseconds (kit/probe/README.md, "64 KiB over vader"): more rounds would narrow the
#: interval around that bias, longer runs dilute it; kept at 10 x 200 for CI's time.
CROSS_ROUNDS, CROSS_SAMPLES, CROSS_WARMUP = 10, 200, 20
#: Longest wait for the load average to fall below a two-rank run's limit before measuring.
QUIET_WAIT_S = 90.0

# Both tools: the same sizes (powers of two, 8 B .. 1 MiB), each size's repetitions back to
# back in ascending order (OSU's sweep; the probe's --order blocked), through the same job
# template and launch line (same binding). osu_latency skips its first -x iterations of
# *every* size; the probe measures CROSS_WARMUP more samples per size and the comparison
# leaves out the first CROSS_WARMUP of each size (_p50_by_round): the same messages in the
# same order, timed the same way. The probe's own --warmup is 0: it runs before the plan and
# cycles through every size (8 B .. 1 MiB), and a 1 KiB message that comes after larger ones
# and a block of smaller ones is ~9 % slower over tcp than one that never saw them
# (kit/probe/README.md, "Fidelity against OSU"): osu_latency's connection never has.
CROSS_CAMPAIGN = f"""\
name: cross-check
mpi: openmpi
transports: [shm, tcp]
placement: intra-node
repetitions: {CROSS_ROUNDS}
seed: 9
launcher: mpirun
tools:
  - tool: probe
    ops: [pingpong]
    sizes: "grid:8:1M:2"
    samples: {CROSS_SAMPLES + CROSS_WARMUP}
    warmup: 0
    order: blocked
  - tool: osu
    benchmarks: [osu_latency]
    options: ["-z", "-m", "8:1048576", "-i", "{CROSS_SAMPLES}", "-x", "{CROSS_WARMUP}"]
"""


class CrossCheckWithheld(UserWarning):
    """The ±5 % claim was not tested: the machine was not quiet (the reason is the text)."""


class CrossCheckOutside(UserWarning):
    """The ±5 % claim was tested on a quiet machine and not met: for some cell the interval
    of the median probe/OSU ratio is not inside ±5 % (outside it, or too wide to tell; the
    table is the text). A warning, never a failure: a claim about a distribution measured on
    a shared VM can miss through noise a quiet verdict did not see; what fails the test is
    the gross check (the probe timing something else than osu_latency)."""


def _launch(script: Path) -> tuple[str, ...]:
    """The job script's launcher words and transport forcing (what sets the binding)."""
    return tuple(ln.strip() for ln in script.read_text().splitlines()
                 if ln.strip().startswith(("PT2PT_LAUNCH=(", "export OMPI_MCA_", "export UCX_")))


def _pair_jobs(out: Path) -> list[str]:
    """Run each probe job next to its OSU job of the same transport and round, the first of
    the two alternating from round to round (ABBA). The campaign's shuffled order spreads a
    campaign's drift over its configurations, but put a round's two jobs minutes apart (and,
    with a fixed seed, the same tool first in every run): their ratio then measured when
    each ran as much as what ran. Adjacent pairs see the same machine; alternating cancels
    what the first job of a pair leaves behind. Returns the job ids in run order."""
    path = out / MANIFEST_NAME
    manifest = json.loads(path.read_text())
    by_key = {(j["repetition"], j["transport"], j["tool"]): j for j in manifest["jobs"]}
    ordered = []
    for r in range(1, CROSS_ROUNDS + 1):
        tools = ("probe", "osu") if r % 2 else ("osu", "probe")
        transports = ("shm", "tcp") if r % 2 else ("tcp", "shm")
        ordered += [by_key.pop((r, t, tool)) for t in transports for tool in tools]
    assert not by_key, by_key
    manifest["jobs"] = ordered
    path.write_text(json.dumps(manifest, indent=1))
    return [j["id"] for j in ordered]


def _p50_by_round(dataset: Path, report: Any, jobs: dict[str, dict[str, Any]],
                  tool: str, stat: str = "p50") -> dict[tuple[str, int], dict[int, float]]:
    """(transport, repetition) -> size -> P50 one-way time (s) of that run, as osu_latency
    -z computes it: its P50 column for OSU; for the probe the lower median (OSU's
    ``sorted[round(n/2) - 1]``) of each size's samples after the first CROSS_WARMUP.
    ``stat="mean"``: OSU's average column and the mean of the same probe samples."""
    if tool == "osu":
        rows = (scan(dataset)
                .filter((pl.col("tool").cast(pl.String) == "osu")
                        & (pl.col("stat").cast(pl.String) == stat)
                        & pl.col("size").is_in(CROSS_SIZES))
                .select("run_id", "size", "time").collect())
    else:
        summary = (pl.col("time").quantile(0.5, "lower") if stat == "p50"
                   else pl.col("time").mean())
        rows = (scan(dataset)
                .filter((pl.col("tool").cast(pl.String) == "probe")
                        & (pl.col("stat").cast(pl.String) == "raw") & ~pl.col("warmup")
                        & pl.col("size").is_in(CROSS_SIZES))
                .sort("seq")
                .filter(pl.int_range(pl.len()).over("run_id", "size") >= CROSS_WARMUP)
                .group_by("run_id", "size")
                .agg(summary, pl.len().alias("n"))
                .collect())
        assert set(rows["n"]) == {CROSS_SAMPLES}, rows
    out: dict[tuple[str, int], dict[int, float]] = {}
    for outcome in report.by_outcome("ingested"):
        job = jobs[outcome.job]
        if job["tool"] != tool:
            continue
        mine = rows.filter(pl.col("run_id").is_in(outcome.run_ids))
        out[(job["transport"], job["repetition"])] = dict(
            zip(mine["size"].to_list(), mine["time"].to_list(), strict=True))
    return out


def _modes(dataset: Path, transport: str, size: int) -> str:
    """The probe's two modes at one cell (shm 8 B): per run, split at the midpoint of its
    quartiles (between the modes while each holds a quarter or more), the median of each
    side and the fast share; medians over runs. osu_latency prints no per-message times."""
    frame = (scan(dataset)
             .filter((pl.col("tool").cast(pl.String) == "probe")
                     & (pl.col("transport").cast(pl.String) == transport)
                     & (pl.col("stat").cast(pl.String) == "raw") & ~pl.col("warmup")
                     & (pl.col("size") == size))
             .sort("seq")
             .filter(pl.int_range(pl.len()).over("run_id") >= CROSS_WARMUP)
             .select("run_id", "time").collect())
    fast, slow, share = [], [], []
    for (_,), run in frame.group_by("run_id"):
        t = run["time"].to_numpy()
        cut = (np.quantile(t, 0.25) + np.quantile(t, 0.75)) / 2
        fast.append(float(np.median(t[t <= cut])))
        slow.append(float(np.median(t[t > cut])) if (t > cut).any() else math.nan)
        share.append(float((t <= cut).mean()))
    return (f"probe modes: fast {statistics.median(fast) * 1e6:.3f} us, slow "
            f"{statistics.median(slow) * 1e6:.3f} us, fast share {statistics.median(share):.2f} "
            f"(medians over {len(share)} runs; range {min(share):.2f}-{max(share):.2f})")


def _conditions_withheld(dataset: Path) -> str | None:
    """Why the two tools' runs were not measured in the same quiet conditions, or None:
    every run of both tools quiet (kit.measure.conditions.judge), same binding and order."""
    table = runs(dataset).with_columns(pl.col("tool").cast(pl.String))
    sides = {tool: [Conditions.from_row(r) for r in
                    table.filter(pl.col("tool") == tool).iter_rows(named=True)]
             for tool in ("probe", "osu")}
    return withheld(sides, quiet_only=True, same_settings=True)


def _verdict(ratio: Estimate) -> str:
    """within / outside / undecided: where the interval of the median ratio lies."""
    assert ratio.lo is not None and ratio.hi is not None
    if ratio.lo >= 1 - CROSS_TOLERANCE and ratio.hi <= 1 + CROSS_TOLERANCE:
        return "within"
    if ratio.hi < 1 - CROSS_TOLERANCE or ratio.lo > 1 + CROSS_TOLERANCE:
        return "outside"
    return "undecided"


def _gross_ratios(probe: dict[tuple[str, int], dict[int, float]],
                  osu: dict[tuple[str, int], dict[int, float]],
                  means: dict[str, dict[tuple[str, int], dict[int, float]]],
                  transport: str, rounds: list[int], size: int) -> dict[str, float]:
    """Three probe/OSU ratios at one cell that a probe timing something else than
    osu_latency moves together (a round trip not halved doubles all three), each robust to
    a different accident, so the gross check holds when any one is within GROSS_TOLERANCE:

    - ``fastest P50``: each tool's fastest round (a busy machine slows some rounds of either
      tool by 1.5x: shm 1 MiB per-round ratios 0.72, 0.67, 1.45 at load 3-4);
    - ``paired P50``: the median of the per-round paired ratios (the ±5 % statistic);
    - ``fastest mean``: each tool's fastest round by its mean. Over vader 8 B times
      alternate message by message between two modes (0.25/0.47 us, kit/probe/README.md),
      so a run's P50 sits on a knife-edge and each tool's fastest round can sit on a
      different mode: CI, stop 65, shm 8 B fastest P50 0.65 while every paired ratio was
      1.01-1.20. The mean averages the two modes.
    """
    def fastest(table: dict[tuple[str, int], dict[int, float]]) -> float:
        return min(table[(transport, r)][size] for r in rounds)
    paired = statistics.median(probe[(transport, r)][size] / osu[(transport, r)][size]
                               for r in rounds)
    return {"fastest P50": fastest(probe) / fastest(osu), "paired P50": paired,
            "fastest mean": fastest(means["probe"]) / fastest(means["osu"])}


@runs_spack_built_tools
def test_probe_is_ingested_fitted_and_within_5_percent_of_osu(
        spack_view: Path, tmp_path: Path) -> None:
    """The Spack-built probe against the Spack-built osu_latency: within ±5 % at 8 B,
    1 KiB, 64 KiB and 1 MiB over shared memory and tcp (BENCHMARKS.md "Probe fidelity"), on
    the P50, at shm 8 B on the mean (CLAIM_STAT says why).

    The statistic: per round, probe / OSU of two runs made one after the other
    (_pair_jobs); over the CROSS_ROUNDS rounds, the median of these paired ratios and its
    distribution-free interval (kit.figures.estimate, ~95 %; 98 % for 10 rounds). A cell is
    within ±5 % when the whole interval is; outside when none of it is; otherwise the rounds
    spread too much to tell (reported as not met: the claim needs the interval).

    Tested only on a quiet machine: load average below a two-rank run's limit before
    measuring (waited for up to QUIET_WAIT_S), every run of both tools quiet with the same
    binding and order (kit.measure.conditions), no disturbed window or run in the probe's
    data (run quality). Otherwise withheld with the reason (CrossCheckWithheld). A cell not
    shown within is a CrossCheckOutside warning, not a failure (noise on a shared VM can
    do that); the test fails when the tools or the kit fail, or when the probe times
    something else than osu_latency (the gross check, whatever the load).
    """
    load = wait_for_idle(QUIET_WAIT_S, poll_s=5.0)
    campaign = tmp_path / "cross.yaml"
    campaign.write_text(CROSS_CAMPAIGN)
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    manifest = json.loads(plan_campaign(campaign, out).read_text())
    jobs = {j["id"]: j for j in manifest["jobs"]}
    assert manifest["not_planned"] == [] and len(jobs) == 2 * 2 * CROSS_ROUNDS
    for transport in ("shm", "tcp"):  # same launcher, binding and transport forcing
        lines = {_launch(out / j["script"]) for j in jobs.values()
                 if j["transport"] == transport}
        assert len(lines) == 1, lines
    order = _pair_jobs(out)
    results = run_local(out)
    assert [r.job for r in results] == order
    for result in results:
        assert result.state == "completed", (result, (out / jobs[result.job]["dir"]
                                                      / "stderr.txt").read_text())
    report = collect(out, dataset)
    assert report.ok and len(report.by_outcome("ingested")) == len(jobs)
    assert {v for v in runs(dataset)["tool_version"].to_list() if v.startswith("OSU")} == \
        {"OSU 7.4"}
    # No probe message before the sweep that osu_latency does not send (no plan warm-up).
    assert scan(dataset).filter((pl.col("tool").cast(pl.String) == "probe")
                                & pl.col("warmup")).select(pl.len()).collect().item() == 0

    probe = _p50_by_round(dataset, report, jobs, "probe")
    osu_p50 = _p50_by_round(dataset, report, jobs, "osu")
    # Reported, never held: the means (one preempted sample moves a run's mean, in either
    # tool). Equal means with unequal P50s say the tools' distributions differ in shape,
    # not in cost (shm 8 B: the fast box's slow slots, kit/probe/README.md).
    means = {tool: _p50_by_round(dataset, report, jobs, tool, "mean")
             for tool in ("probe", "osu")}
    assert set(probe) == set(osu_p50) == {(t, r) for t in ("shm", "tcp")
                                           for r in range(1, CROSS_ROUNDS + 1)}
    reasons = [] if not load.busy else [f"before measuring: {load.describe()}"]
    held = _conditions_withheld(dataset)
    reasons += [f"run conditions: {held}"] if held else []
    table = []
    model_misses: list[tuple[str, int, float, float]] = []
    for transport in ("shm", "tcp"):
        (chosen,) = [{k: str(row[k]) for k in SERIES_KEYS if row[k] not in (None, "")}
                     for row in series_table(dataset).iter_rows(named=True)
                     if (str(row["tool"]), str(row["transport"])) == ("probe", transport)]
        fit = fit_series(dataset, chosen, FitOptions(intervals=False, validate=False))
        fitted, quality = fit.fitted, fit.quality
        reasons += [f"{transport}: {line}" for line in (quality.lines() if quality else [])]
        rounds = [r for (t, r) in probe if t == transport]
        fitted_on = fit.samples.frame.group_by("size").agg(pl.col("time").median())
        fitted_p50 = dict(zip(fitted_on["size"].to_list(), fitted_on["time"].to_list(),
                              strict=True))
        predicted = fitted.model.predict_quantiles(np.array(CROSS_SIZES, float), [0.5])
        for size, model_p50 in zip(CROSS_SIZES, np.ravel(predicted), strict=True):
            ratios = [probe[(transport, r)][size] / osu_p50[(transport, r)][size]
                      for r in sorted(rounds)]
            assert all(math.isfinite(x) and x > 0 for x in ratios)
            ratio = median_interval(ratios)
            assert ratio.value is not None and ratio.lo is not None
            measured = statistics.median(probe[(transport, r)][size] for r in rounds)
            mean_ratios = [means["probe"][(transport, r)][size]
                           / means["osu"][(transport, r)][size] for r in sorted(rounds)]
            mean_ratio = median_interval(mean_ratios)
            stat = CLAIM_STAT.get((transport, size), "p50")
            claim = mean_ratio if stat == "mean" else ratio
            table.append((transport, size, stat, _verdict(claim), ratio, mean_ratio,
                          mean_ratios if stat == "mean" else ratios, measured, model_p50))
            # The fitted model describes the samples it was fitted on (a loose bound: this
            # is the probe's data through the kit's fit, not a test of the fit's accuracy).
            # Those are the runs run quality kept, pooled: on a busy CI machine the
            # median over rounds may be a round the fit left out (shm 1 MiB: 127 us
            # fitted, 90 us over rounds); 1 MiB over shm can turn slow (94 us pooled
            # against 64 quiet, at load 11) while the fit continues the 64-512 KiB line
            # (54 us): no regime starts at the last size. Reported, never held: a noisy VM
            # does that between run-quality samples too.
            model_misses.append((transport, size, model_p50, fitted_p50[size]))
            # A probe timing another thing than osu_latency, whatever the load.
            gross = _gross_ratios(probe, osu_p50, means, transport, rounds, size)
            assert any(abs(x - 1) <= GROSS_TOLERANCE for x in gross.values()), \
                (transport, size, gross, ratios)
    text = "\n".join(
        f"{t:4} {s:>8} B  claim on the {st.upper():4} {v:9}  probe/OSU P50 {q.value:.3f} "
        f"[{q.lo:.3f}, {q.hi:.3f}]  mean {m.value:.3f} [{m.lo:.3f}, {m.hi:.3f}]  ({st.upper()} "
        f"rounds {' '.join(f'{x:.3f}' for x in rs)})  probe P50 {p * 1e6:.3f} us  "
        f"model P50 {f * 1e6:.3f} us"
        for t, s, st, v, q, m, rs, p, f in table)
    text += "\nshm 8 B " + _modes(dataset, "shm", 8)
    print(f"median of {CROSS_ROUNDS} paired per-round ratios [its distribution-free "
          f"interval]; load before: {load.describe()}\n{text}")
    # The fitted model against the samples it was fitted on: a loose bound, reported (a fit
    # on a few hundred samples per size of a noisy VM is not the probe's fidelity).
    misses = [f"{t} {s} B: model P50 {f * 1e6:.3f} us against the measured fitted "
              f"{p * 1e6:.3f} us" for t, s, f, p in model_misses if not 0.8 < f / p < 1.25]
    text += "".join(f"\n{m}" for m in misses)
    if reasons:
        warnings.warn(CrossCheckWithheld(
            "probe vs OSU within ±5 % not asserted, the machine was not quiet: "
            + "; ".join(reasons[:4]) + "\n" + text), stacklevel=1)
        return
    off = [(t, s, st, v) for t, s, st, v, *_ in table if v != "within"]
    if off or misses:
        warnings.warn(CrossCheckOutside(
            f"probe/OSU not shown within ±{CROSS_TOLERANCE:.0%} at {off} (claim statistic "
            f"per cell: CLAIM_STAT):\n{text}"), stacklevel=1)
