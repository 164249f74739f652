"""Campaign file validation: every error names the file and line, valid files load fully."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kit.core.errors import CampaignError
from kit.core.paths import JOBS_DIR
from kit.measure.campaign.schema import load_campaign
from kit.measure.campaign.site import load_site
from kit.measure.campaign.transports import load_table

BASE = """\
name: demo
mpi: openmpi
transports: [shm, tcp]
placement: intra-node
repetitions: 2
seed: 5
launcher: srun --mpi=pmix
slurm:
  partition: debug
  time: "00:05:00"
tools:
  - tool: probe
    ops: [pingpong, send]
    sizes: loguniform:0:1M
    samples: 100
"""


@pytest.fixture(autouse=True)
def _no_site_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))


def _write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _error(tmp_path: Path, text: str) -> str:
    path = _write(tmp_path, text)
    with pytest.raises(CampaignError) as info:
        load_campaign(path)
    return info.value.paragraph()


def test_valid_campaign_loads_every_field(tmp_path: Path) -> None:
    c = load_campaign(_write(tmp_path, BASE))
    assert (c.name, c.mpi, c.transports, c.placements) == (
        "demo", "openmpi", ("shm", "tcp"), ("intra-node",))
    assert (c.repetitions, c.seed) == (2, 5)
    assert c.launcher.words == ("srun", "--mpi=pmix")
    assert c.slurm.partition == "debug" and c.slurm.time == "00:05:00"
    probe = c.tools[0]
    assert probe.tool == "probe" and probe.options["ops"] == ["pingpong", "send"]
    assert probe.options["samples"] == 100 and probe.line == 12


def test_example_campaigns_are_valid() -> None:
    examples = sorted((JOBS_DIR / "campaigns").glob("*.yaml"))
    assert any(p.name == "local-demo.yaml" for p in examples)
    for path in examples:
        campaign = load_campaign(path)
        assert campaign.name and campaign.tools


@pytest.mark.parametrize(("old", "new", "line", "words"), [
    ("mpi: openmpi", "mpi: lam", 2, "unknown MPI flavour 'lam'"),
    ("transports: [shm, tcp]", "transports: [shm, carrier-pigeon]", 3, "carrier-pigeon"),
    ("placement: intra-node", "placement: [intra-node, inter-node]", 3,
     "'shm' cannot be measured inter-node"),
    ("repetitions: 2", "repetitions: 0", 5, "integer from 1"),
    ("seed: 5", "seed: many", 6, "integer"),
    ("launcher: srun --mpi=pmix", "launcher: aprun -n 2", 7, "unknown launcher 'aprun'"),
    ('  time: "00:05:00"', "  time: soon", 10, "invalid Slurm time"),
    ("  partition: debug", '  partition: "debug; rm -rf ~"', 9, "invalid value"),
    ("    sizes: loguniform:0:1M", "    sizes: loguniform:2M:1M", 14, "larger than MAX"),
    ("    sizes: loguniform:0:1M", "    sizes: uniform:0:1M", 14, "invalid value"),
    ("    ops: [pingpong, send]", "    ops: [pingpong, teleport]", 13, "unknown probe op"),
    ("    samples: 100", "    samples: -3", 15, "integer from 1"),
    ("seed: 5", "seed: 5\ncolour: blue", 7, "unknown key 'colour'"),
    ("seed: 5", "seed: 5\nseed: 6", 7, "appears twice"),
    ("name: demo", "name: 'my campaign'", 1, "invalid value"),
])
def test_errors_name_the_line(tmp_path: Path, old: str, new: str, line: int,
                              words: str) -> None:
    assert old in BASE
    text = _error(tmp_path, BASE.replace(old, new))
    assert f"c.yaml:{line}" in text
    assert words in text


def test_shm_inter_node_is_refused_with_a_hint(tmp_path: Path) -> None:
    text = _error(tmp_path, BASE.replace("placement: intra-node", "placement: inter-node"))
    assert "c.yaml:3" in text and "intra-node" in text


def test_a_transport_can_narrow_its_placement(tmp_path: Path) -> None:
    text = BASE.replace("transports: [shm, tcp]", "transports: [tcp, {shm: intra-node}]")
    c = load_campaign(_write(tmp_path, text.replace("placement: intra-node",
                                                    "placement: [intra-node, inter-node]")))
    assert c.transports == ("tcp", "shm")
    assert c.transport_placements == {"tcp": ("intra-node", "inter-node"),
                                      "shm": ("intra-node",)}
    bad = _error(tmp_path, BASE.replace("transports: [shm, tcp]",
                                        "transports: [{shm: inter-node}]"))
    assert "c.yaml:3" in bad and "cannot be measured inter-node" in bad


def test_missing_required_key_and_yaml_syntax(tmp_path: Path) -> None:
    assert "'tools' is missing" in _error(tmp_path, BASE.split("tools:")[0])
    text = _error(tmp_path, BASE.replace("transports: [shm, tcp]", "transports: [shm, tcp"))
    assert "not valid YAML" in text and "c.yaml:" in text


def test_newline_in_a_value_is_refused(tmp_path: Path) -> None:
    text = _error(tmp_path, BASE.replace("  partition: debug",
                                         '  partition: "debug\\n#SBATCH --uid=0"'))
    assert "c.yaml:9" in text and "newlines" in text


def test_sbatch_extra_options_must_be_single_safe_words(tmp_path: Path) -> None:
    ok = load_campaign(_write(tmp_path, BASE.replace(
        '  time: "00:05:00"', '  time: "00:05:00"\n  extra: [--exclusive, --constraint=ib]')))
    assert ok.slurm.extra == ("--exclusive", "--constraint=ib")
    text = _error(tmp_path, BASE.replace(
        '  time: "00:05:00"', '  time: "00:05:00"\n  extra: ["--comment=$(id)"]'))
    assert "c.yaml:11" in text


def test_skampi_template_path_is_checked(tmp_path: Path) -> None:
    text = _error(tmp_path, BASE + "  - tool: skampi\n    ski: nowhere.ski\n")
    assert "c.yaml:17" in text and "does not exist" in text
    (tmp_path / "pp.ski").write_text("set_skampi_buffer({{ buf }})\n")
    c = load_campaign(_write(tmp_path, BASE + "  - tool: skampi\n    ski: pp.ski\n"
                             "    params: {buf: 8mb}\n"))
    assert c.tools[1].options["ski"] == str((tmp_path / "pp.ski").resolve())


def test_site_defaults_fill_gaps_and_campaign_wins(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    site = _write(tmp_path, "partition: batch\naccount: proj42\nqos: short\n"
                  "launcher: mpirun\nspack_view: /opt/view\n", "site.yaml")
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(site))
    text = BASE.replace("launcher: srun --mpi=pmix\n", "")
    c = load_campaign(_write(tmp_path, text))
    assert c.slurm.partition == "debug"  # the campaign's own value
    assert (c.slurm.account, c.slurm.qos) == ("proj42", "short")
    assert c.launcher.command == "mpirun" and c.spack_view == "/opt/view"
    bad = _write(tmp_path, "partition: batch\ncolour: red\n", "site.yaml")
    with pytest.raises(CampaignError) as info:
        load_site(bad)
    assert "site.yaml:2" in info.value.paragraph()


def test_transport_table_covers_every_flavour() -> None:
    table = load_table()
    for flavour in ("openmpi", "mpich", "intelmpi"):
        names = table.transports(flavour)
        assert {"tcp", "shm", "ib"} <= set(names), flavour
        assert table.entry(flavour, "shm").placements == ("intra-node",)
        for name in names:
            entry = table.entry(flavour, name)
            assert entry.env, (flavour, name)
            assert entry.unavailable, (flavour, name)
    ompi = table.entry("openmpi", "shm")
    assert ompi.env["OMPI_MCA_btl"] == "self,vader"
    assert ompi.env_by_major[5]["OMPI_MCA_btl"] == "self,sm"
    ib = table.entry("openmpi", "ib")
    assert ib.env["OMPI_MCA_pml"] == "ucx" and "rc" in ib.env["UCX_TLS"]
    assert any("'rc' is not available" in p for p in ib.unavailable)
    assert table.skipped_exit not in (0, 1, 2) and table.skipped_exit != table.check_failed_exit


def test_cli_reports_campaign_errors_as_one_paragraph(tmp_path: Path) -> None:
    path = _write(tmp_path, BASE.replace("mpi: openmpi", "mpi: lam"))
    proc = subprocess.run([sys.executable, "-m", "kit", "plan", str(path), "-o",
                           str(tmp_path / "out")], capture_output=True, text=True,
                          env={"PT2PT_SITE_CONFIG": str(tmp_path / "none"), "PATH": "/usr/bin"})
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{path}:2" in proc.stderr.replace("\n", " ")
    assert not (tmp_path / "out").exists()
