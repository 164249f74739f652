"""One module per tool (issue 14): the registry, and a new tool added as one module.

tests/example_tool.py defines a whole tool (options, binary, command, template fragment,
detection, parser). Registered at run time, it is planned, run (``run-local``, real
``mpirun``), detected and ingested, and no file of the kit names it. Before it is
registered, the same file is "unknown format" and the same campaign is refused. Exported by
another package under the entry-point group ``pt2pt.tools``, it needs no call at all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit import tools
from kit.core.errors import CampaignError, IngestError
from kit.data.dataset import runs, series_table
from kit.data.ingest import ingest
from kit.data.ingest.sniff import detect, formats
from kit.measure.campaign.plan import plan_campaign
from tests import example_tool

FIXTURE = Path(__file__).parent / "data" / "tools" / "pingtxt.out"

CAMPAIGN = """\
name: pingtxt-demo
mpi: openmpi
transports: [shm]
placement: intra-node
repetitions: 2
seed: 3
tools:
  - tool: pingtxt
    sizes: [1, 64, 1024]
    iterations: 3
"""

#: What the tool's binary prints (rank 0 only; both ranks run it under mpirun).
BINARY = """\
#!/bin/bash
[ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] || exit 0
echo "# pingtxt 1.0: round-trip times of one message, microseconds, in $PWD"
for size in 1 64 1024; do for i in 1 2 3; do echo "$size 1$i.5"; done; done
"""


@pytest.fixture
def pingtxt() -> Iterator[tools.Tool]:
    tool = tools.register(example_tool.TOOL)
    try:
        yield tool
    finally:
        tools.unregister(tool.name)


@pytest.fixture
def binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    exe = folder / "pingtxt"
    exe.write_text(BINARY)
    exe.chmod(0o755)
    monkeypatch.setenv("PT2PT_TOOLS_PATH", str(folder))
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    return exe


def test_registry_lists_every_builtin_tool_from_its_own_module() -> None:
    assert tools.names() == ("probe", "osu", "skampi", "logp", "reprompi", "app",
                             "calibration", "collectives", "csv", "netgauge")
    assert tools.plannable() == ("probe", "osu", "skampi", "app", "collectives")
    # the collective sweep's jobs are points, not samples: no ingest format
    assert "collectives" not in formats() and "csv" in formats()
    for name, tool in tools.REGISTRY.items():
        assert type(tool).__module__.startswith("kit.tools."), name
        assert tool.sniffers(), name


def test_unregistered_tool_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="unknown format"):
        detect(FIXTURE)
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN)
    with pytest.raises(CampaignError, match="unknown tool 'pingtxt'"):
        plan_campaign(campaign, tmp_path / "plan")


def test_new_tool_module_is_detected_and_ingested(pingtxt: tools.Tool, tmp_path: Path) -> None:
    assert detect(FIXTURE) == "pingtxt"
    report = ingest([FIXTURE], tmp_path / "ds", campaign="c", transport="tcp")
    assert report.ok and report.rows_added == 8
    series = series_table(tmp_path / "ds").row(0, named=True)
    assert (series["tool"], series["op"], series["stat"]) == ("pingtxt", "pingpong", "raw")
    assert series["size_min"] == 1 and series["size_max"] == 65536
    assert runs(tmp_path / "ds")["tool_version"].to_list() == ["1.0"]


def test_new_tool_module_is_planned(pingtxt: tools.Tool, binary: Path, tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN)
    manifest = json.loads(plan_campaign(campaign, tmp_path / "plan").read_text())
    jobs = manifest["jobs"]
    assert [j["tool"] for j in jobs] == ["pingtxt", "pingtxt"]
    assert jobs[0]["command"] == [str(binary), "--sizes", "1,64,1024", "--iterations", "3"]
    assert jobs[0]["outputs"] == ["pingtxt.out"]
    script = (tmp_path / "plan" / jobs[0]["script"]).read_text()
    assert "# Tool: pingtxt, 3 iterations per size." in script
    assert f"PT2PT_CMD=({binary} --sizes 1,64,1024 --iterations 3)" in script
    assert ">pingtxt.out 2>stderr.txt" in script  # the base template around the fragment
    # the tool's own options schema, with the campaign's line
    campaign.write_text(CAMPAIGN.replace("iterations: 3", "iterations: 0"))
    with pytest.raises(CampaignError, match=r"c\.yaml:10.*from 1 to 1000000"):
        plan_campaign(campaign, tmp_path / "plan2")


def test_a_tool_of_another_package_is_found_through_its_entry_point(tmp_path: Path) -> None:
    """Installed as a package exporting ``pt2pt.tools``, the same module needs no call at
    all: a fresh ``pt2pt ingest`` detects and ingests its output."""
    import subprocess
    import sys

    dist = tmp_path / "site" / "pingtxt_tool-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pingtxt-tool\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[pt2pt.tools]\npingtxt = tests.example_tool:TOOL\n")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(tmp_path / "site")])}
    proc = subprocess.run([sys.executable, "-m", "kit", "ingest", str(FIXTURE), "--dataset",
                           str(tmp_path / "ds"), "--campaign", "c"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert series_table(tmp_path / "ds")["tool"].to_list() == ["pingtxt"]


@pytest.mark.mpi
def test_new_tool_module_runs_locally_and_is_collected(pingtxt: tools.Tool, binary: Path,
                                                       tmp_path: Path) -> None:
    import shutil

    from kit.data.collect import collect
    from kit.measure.campaign.runlocal import run_local

    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not found: install openmpi-bin")
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN)
    out = tmp_path / "plan"
    plan_campaign(campaign, out)
    results = run_local(out)
    assert [r.state for r in results] == ["completed", "completed"], results
    report = collect(out, tmp_path / "ds")
    assert [j.outcome for j in report.jobs] == ["ingested", "ingested"], report
    series = series_table(tmp_path / "ds")
    assert series.height == 1 and series["tool"][0] == "pingtxt"
    assert series["n_samples"][0] == 18  # 2 jobs x 3 sizes x 3 iterations
    assert series["placement"][0] == "intra-node"
