"""Outputs cut at a line boundary are marked incomplete, with the reason in runs.parquet.

A cut in the middle of a line shows itself (a short or torn line); a cut at a line boundary
leaves a well-formed file. Each tool has its own tell: OSU's last size below the range it
was asked for (``-m`` in job.json, else OSU's default 4 MiB), SkaMPI's missing
``# end result`` / ``# Finished at``, the probe's ``samples_written`` in its meta file. The
real fixtures in ../shared/fixtures are cut here, in the test, at every line boundary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.data import dataset as ds
from kit.data.ingest import ingest
from kit.tools import osu, probe, skampi

OSU_FILES = ["osu_latency_tcp_7.4.txt", "osu_bw_vader_7.4.txt", "osu_bibw_tcp_7.4_z.txt",
             "osu_latency_vader_7.2.txt"]


def _cuts(text: str) -> list[tuple[int, str]]:
    """(line count, text) for every prefix ending at a line boundary."""
    lines = text.splitlines(keepends=True)
    return [(k, "".join(lines[:k])) for k in range(1, len(lines))]


@pytest.mark.parametrize("name", OSU_FILES)
def test_osu_cut_at_every_line_boundary(name: str, fixtures_dir: Path, tmp_path: Path) -> None:
    text = (fixtures_dir / "osu" / name).read_text()
    full = tmp_path / name
    full.write_text(text)
    assert osu.parse(full).complete is True
    n_data = 0
    for k, cut in _cuts(text):
        path = tmp_path / f"cut{k}-{name}"
        path.write_text(cut)
        last = cut.splitlines()[-1]
        if not last.strip() or last.startswith("#"):
            continue  # header only: refused as "without any result line", not our case
        n_data += 1
        run = osu.parse(path)
        assert run.complete is False, (k, last)
        assert "expected sizes up to 4194304 B" in (run.incomplete_reason or "")
    assert n_data == 22  # every cut from 1 to 22 of the 23 sizes


def test_osu_range_comes_from_the_job_record(fixtures_dir: Path, tmp_path: Path) -> None:
    """With ``-m 1:1024`` in job.json, stopping at 1024 B is complete, at 512 B is not."""
    lines = (fixtures_dir / "osu" / "osu_latency_tcp_7.4.txt").read_text().splitlines(True)
    upto = next(i for i, line in enumerate(lines) if line.startswith("1024 ")) + 1
    for stop, complete in ((upto, True), (upto - 1, False)):
        job = tmp_path / f"job{stop}"
        job.mkdir()
        (job / "osu_latency.txt").write_text("".join(lines[:stop]))
        (job / "job.json").write_text(json.dumps({
            "state": "completed", "plan": {"outputs": ["osu_latency.txt"],
                                           "command": ["/x/osu_latency", "-m", "1:1024"]}}))
        run = osu.parse(job / "osu_latency.txt")
        assert run.complete is complete
        if not complete:
            assert "-m 1:1024 in job.json" in (run.incomplete_reason or "")


def test_skampi_cut_at_every_line_boundary(fixtures_dir: Path, tmp_path: Path) -> None:
    text = (fixtures_dir / "skampi" / "skampi_pingpong_tcp.sko").read_text()
    full = tmp_path / "full.sko"
    full.write_text(text)
    assert skampi.parse(full).complete is True
    checked = 0
    for k, cut in _cuts(text):
        if "count=" not in cut or "# Finished at" in cut:
            continue
        path = tmp_path / f"cut{k}.sko"
        path.write_text(cut)
        run = skampi.parse(path)
        assert run.complete is False and run.incomplete_reason, k
        checked += 1
    assert checked >= 20


def test_probe_cut_at_a_line_boundary(tmp_path: Path) -> None:
    rows = [f"{i},pingpong,{8 << (i % 10)},1,{2e-6 + i * 1e-9:.9e},,{int(i < 2)}"
            for i in range(50)]
    meta = {"probe_version": "0.1.0", "hosts": ["a", "a"], "env": {}, "ops": ["pingpong"],
            "samples_written": 50, "complete": True, "stop_reason": "done"}
    for keep, complete in ((50, True), (49, False), (10, False)):
        folder = tmp_path / f"k{keep}"
        folder.mkdir()
        (folder / "r.samples.csv").write_text(probe.HEADER + "\n" + "\n".join(rows[:keep])
                                              + "\n")
        (folder / "r.meta.json").write_text(json.dumps(meta))
        report = ingest([folder / "r.samples.csv"], tmp_path / f"ds{keep}")
        assert report.ok
        run = ds.runs(tmp_path / f"ds{keep}").row(0, named=True)
        assert run["complete"] is complete
        if not complete:
            assert run["incomplete_reason"] == f"{keep} of 50 samples (output cut short)"
        else:
            assert run["incomplete_reason"] is None


def test_reason_lands_in_runs_parquet(fixtures_dir: Path, tmp_path: Path) -> None:
    lines = (fixtures_dir / "osu" / "osu_bw_tcp_7.4.txt").read_text().splitlines(True)
    cut = tmp_path / "in" / "osu_bw_tcp_7.4.txt"
    cut.parent.mkdir()
    cut.write_text("".join(lines[:-13]))
    report = ingest([cut], tmp_path / "ds")
    assert report.ok and any("stops at" in w for w in report.warnings)
    run = ds.runs(tmp_path / "ds").row(0, named=True)
    assert run["complete"] is False
    assert run["incomplete_reason"].startswith("output stops at 512 B")
