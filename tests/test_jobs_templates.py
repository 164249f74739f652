"""The transport table rendered through the sbatch templates, for every MPI and transport."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kit.core.errors import CampaignError
from kit.measure.campaign.plan import plan_campaign
from kit.measure.campaign.render import sbatch_value, shquote, words
from kit.measure.campaign.transports import load_table

TABLE = load_table()
COMBOS = [(f, t) for (f, t) in TABLE.entries]


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    probe = tmp_path / "pt2pt-probe"
    probe.write_text("#!/bin/sh\n")
    probe.chmod(0o755)
    monkeypatch.setenv("PT2PT_PROBE", str(probe))


def _plan(tmp_path: Path, flavour: str, transport: str, placement: str,
          launcher: str = "srun --mpi=pmix", extra: str = "") -> Path:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        f"name: t\nmpi: {flavour}\ntransports: [{transport}]\nplacement: {placement}\n"
        f"launcher: {launcher}\nseed: 1\n{extra}tools:\n  - tool: probe\n")
    manifest = json.loads(plan_campaign(campaign, tmp_path / "out").read_text())
    return tmp_path / "out" / manifest["jobs"][0]["script"]


@pytest.mark.parametrize(("flavour", "transport"), COMBOS)
def test_every_entry_renders_a_valid_forcing_script(tmp_path: Path, flavour: str,
                                                    transport: str) -> None:
    entry = TABLE.entry(flavour, transport)
    placement = entry.placements[-1]
    script = _plan(tmp_path, flavour, transport, placement)
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    for name, value in entry.env.items():
        assert f"export {name}={shquote(value)}" in text
    nodes = "2" if placement == "inter-node" else "1"
    assert f"#SBATCH --nodes={nodes}\n" in text
    plan = json.loads((script.parent / "plan.json").read_text())
    for pattern in entry.unavailable:  # classified by kit.measure.campaign.jobrecord from plan.json
        assert pattern in plan["unavailable"]
    assert "#SBATCH --signal=B:TERM@60\n" in text
    assert plan["exits"]["skipped"] == TABLE.skipped_exit


def test_campaign_env_may_not_override_the_forcing(tmp_path: Path) -> None:
    with pytest.raises(CampaignError) as info:
        _plan(tmp_path, "openmpi", "tcp", "intra-node",
              extra="env:\n  OMPI_MCA_btl: self,vader\n")
    assert "c.yaml:8 (env.OMPI_MCA_btl)" in info.value.paragraph()
    script = _plan(tmp_path, "openmpi", "tcp", "intra-node",
                   extra="env:\n  OMPI_MCA_btl_tcp_if_include: lo\n")
    assert "export OMPI_MCA_btl_tcp_if_include=lo" in script.read_text()


def test_output_directory_with_blanks_cannot_reach_an_sbatch_line(tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: t\nmpi: openmpi\ntransports: [tcp]\ntools:\n  - tool: probe\n")
    with pytest.raises(CampaignError) as info:
        plan_campaign(campaign, tmp_path / "my results")
    assert "#SBATCH" in info.value.paragraph()


def test_filters_quote_everything() -> None:
    assert shquote("a b") == "'a b'" and shquote("$(x)") == "'$(x)'"
    assert words(["-m", "1:4M", "it's"]) == "-m 1:4M 'it'\"'\"'s'"
    with pytest.raises(TypeError):
        words("not a list")
    with pytest.raises(CampaignError):
        sbatch_value("--x;id")
