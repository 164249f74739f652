"""Shell injection through campaign values: rejected by the schema, or rendered inert.

The proof is behavioural: every payload tries to create a marker file, the jobs are really
run (with bash, through ``pt2pt run-local``), and the markers never appear.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kit.core.errors import CampaignError
from kit.measure.campaign.plan import plan_campaign


def _payloads(marker_dir: Path) -> list[str]:
    m = marker_dir
    return [
        f"$(touch {m}/dollar)",
        f"`touch {m}/backtick`",
        f"x; touch {m}/semicolon",
        f"it's \"quoted\" '; touch {m}/quote; '",
        f"a && touch {m}/and || touch {m}/or",
        f"${{IFS}}$(touch${{IFS}}{m}/ifs)",
    ]


def _campaign_text(env: dict[str, str], description: str) -> str:
    return (
        "name: inject\n"
        f"description: {json.dumps(description)}\n"
        "mpi: openmpi\n"
        "transports: [shm]\n"
        "placement: intra-node\n"
        "repetitions: 1\n"
        "seed: 3\n"
        "launcher: mpirun\n"
        "env:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in env.items()) +
        "tools:\n"
        "  - tool: probe\n"
        "    ops: [pingpong]\n"
        "    sizes: list:0,8,1K\n"
        "    samples: 5\n"
        "    warmup: 1\n")


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))


@pytest.mark.mpi
def test_values_are_inert_when_the_job_really_runs(tmp_path: Path, probe_bin: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PT2PT_PROBE", str(probe_bin))
    markers = tmp_path / "markers"
    markers.mkdir()
    payloads = _payloads(markers)
    env = {f"PT2PT_NOTE_{i}": p for i, p in enumerate(payloads)}
    campaign = tmp_path / "inject.yaml"
    campaign.write_text(_campaign_text(env, "\n".join(payloads)))
    out = tmp_path / "out"
    plan_campaign(campaign, out)
    script = next(out.glob("jobs/*/job.sbatch"))
    # Each value reaches the environment literally: evaluate only the rendered export lines.
    exports = [line for line in script.read_text().splitlines()
               if line.startswith("export PT2PT_NOTE_")]
    assert len(exports) == len(payloads)
    shown = subprocess.run(
        ["bash", "-c", "\n".join(exports) + "\n" + "".join(
            f'printf "%s\\0" "$PT2PT_NOTE_{i}"; ' for i in range(len(payloads)))],
        capture_output=True, text=True, check=True).stdout
    assert shown.split("\0")[:-1] == payloads
    # Then run the whole job, as `pt2pt run-local` does.
    proc = subprocess.run([sys.executable, "-m", "kit", "run-local", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((script.parent / "job.json").read_text())
    assert record["state"] == "completed"
    assert list(markers.iterdir()) == []


def test_newline_in_a_shell_value_is_rejected(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    campaign = tmp_path / "c.yaml"
    campaign.write_text(_campaign_text({"NOTE": f"line1\ntouch {marker}"}, ""))
    with pytest.raises(CampaignError) as info:
        plan_campaign(campaign, tmp_path / "out")
    assert "c.yaml:10 (env.NOTE)" in info.value.paragraph()
    assert not marker.exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("field", ["name", "partition", "time", "extra", "account"])
def test_values_on_sbatch_lines_are_rejected(tmp_path: Path, field: str) -> None:
    marker = tmp_path / "marker"
    bad = f"x$(touch {marker})"
    text = ("name: ok\nmpi: openmpi\ntransports: [tcp]\nseed: 1\n"
            "slurm:\n  partition: debug\n  account: a\n  time: '00:05:00'\n"
            "  extra: [--exclusive]\n"
            "tools:\n  - tool: probe\n")
    newline = "--x\n" + bad
    account = f"a;touch {marker}"
    slurm_time = f"1`touch {marker}`"
    replace = {"name": ("name: ok", f"name: {json.dumps(bad)}"),
               "partition": ("partition: debug", f"partition: {json.dumps(bad)}"),
               "account": ("account: a", f"account: {json.dumps(account)}"),
               "time": ("time: '00:05:00'", f"time: {json.dumps(slurm_time)}"),
               "extra": ("extra: [--exclusive]", f"extra: [{json.dumps(newline)}]")}
    old, new = replace[field]
    campaign = tmp_path / "c.yaml"
    campaign.write_text(text.replace(old, new))
    with pytest.raises(CampaignError) as info:
        plan_campaign(campaign, tmp_path / "out")
    assert "c.yaml:" in info.value.paragraph()
    assert not (tmp_path / "out").exists()
    assert not marker.exists()


def test_description_never_reaches_the_script(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    probe = tmp_path / "pt2pt-probe"
    probe.write_text("#!/bin/sh\n")
    probe.chmod(0o755)
    monkeypatch.setenv("PT2PT_PROBE", str(probe))
    campaign = tmp_path / "c.yaml"
    campaign.write_text(_campaign_text({}, "ok\n#SBATCH --uid=0\n$(touch /nonexistent/x)"))
    out = tmp_path / "out"
    plan_campaign(campaign, out)
    script = next(out.glob("jobs/*/job.sbatch")).read_text()
    assert "--uid" not in script and "touch" not in script
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["campaign"]["description"].startswith("ok\n#SBATCH")
