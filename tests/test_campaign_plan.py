"""``pt2pt plan``: jobs, manifest, seeded order, byte-identical output, binary lookup."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from kit.core.errors import CampaignError
from kit.core.paths import SPACK_VIEW_ENV
from kit.measure.campaign.plan import plan_campaign

CAMPAIGN = """\
name: plan-test
mpi: openmpi
transports: [shm, tcp, ib]
placement: intra-node
repetitions: 3
seed: {seed}
launcher: mpirun
slurm: {{partition: debug, account: proj1, qos: low, time: "00:07:00", extra: [--exclusive]}}
tools:
  - tool: probe
    ops: [pingpong, recv]
    sizes: grid:1:1M:4
    samples: 10
  - tool: osu
    benchmarks: [osu_latency, osu_bw]
    options: [-z]
    optional: true
"""


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    # A probe path that exists: planning only needs to find the executable.
    probe = tmp_path / "bin" / "pt2pt-probe"
    probe.parent.mkdir()
    probe.write_text("#!/bin/sh\nexit 0\n")
    probe.chmod(0o755)
    monkeypatch.setenv("PT2PT_PROBE", str(probe))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    # No OSU unless a test puts it there: an empty default view, whatever the checkout holds.
    (tmp_path / "empty-view").mkdir()
    monkeypatch.setenv(SPACK_VIEW_ENV, str(tmp_path / "empty-view"))


def _campaign(tmp_path: Path, seed: int = 11, text: str = CAMPAIGN) -> Path:
    path = tmp_path / f"campaign-{seed}.yaml"
    path.write_text(text.format(seed=seed))
    return path


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_plan_writes_every_job_and_a_manifest(tmp_path: Path) -> None:
    manifest_path = plan_campaign(_campaign(tmp_path), tmp_path / "out")
    manifest = json.loads(manifest_path.read_text())
    jobs = manifest["jobs"]
    assert len(jobs) == 3 * 3  # transports x repetitions; OSU binaries are absent here
    assert {(j["transport"], j["repetition"]) for j in jobs} == {
        (t, r) for t in ("shm", "tcp", "ib") for r in (1, 2, 3)}
    assert [item["what"] for item in manifest["not_planned"]] == ["osu_latency", "osu_bw"]
    for index, job in enumerate(jobs):
        assert job["id"].startswith(f"{index:03d}-probe-")
        script = tmp_path / "out" / job["script"]
        assert os.access(script, os.X_OK)
        assert json.loads((script.parent / "plan.json").read_text())["id"] == job["id"]
        text = script.read_text()
        for line in ("#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=2",
                     "#SBATCH --partition=debug", "#SBATCH --account=proj1",
                     "#SBATCH --qos=low", "#SBATCH --time=00:07:00", "#SBATCH --exclusive"):
            assert line in text
        # bash accepts the script.
        subprocess.run(["bash", "-n", str(script)], check=True)
    seeds = {j["seed"] for j in jobs}
    assert len(seeds) == len(jobs)  # independent repetitions draw different size plans


def test_same_input_gives_byte_identical_output(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path)
    a, b = tmp_path / "plan-a", tmp_path / "plan-b"
    plan_campaign(campaign, a)
    first = _tree(a)
    plan_campaign(campaign, a)  # re-plan over a plan that never ran
    assert _tree(a) == first
    plan_campaign(campaign, b)  # elsewhere: only the directory in the paths differs
    second = {k: v.replace(str(b).encode(), str(a).encode()) for k, v in _tree(b).items()}
    assert second == first


def test_order_is_shuffled_from_the_seed(tmp_path: Path) -> None:
    def order(seed: int, out: str) -> list[str]:
        manifest = json.loads(plan_campaign(_campaign(tmp_path, seed), tmp_path / out)
                              .read_text())
        return [j["id"].split("-", 1)[1] for j in manifest["jobs"]]

    a, a_again, b = order(1, "s1"), order(1, "s1b"), order(2, "s2")
    assert a == a_again
    assert sorted(a) == sorted(b) and a != b
    assert a != sorted(a)  # not the nested-loop order


def test_transport_forcing_is_rendered_per_job(tmp_path: Path) -> None:
    manifest = json.loads(plan_campaign(_campaign(tmp_path), tmp_path / "out").read_text())
    by_transport = {j["transport"]: tmp_path / "out" / j["script"] for j in manifest["jobs"]}
    shm = by_transport["shm"].read_text()
    assert "export OMPI_MCA_btl=self,vader" in shm and "export OMPI_MCA_pml=ob1" in shm
    assert "export OMPI_MCA_btl=self,sm" in shm  # the Open MPI >= 5 branch
    assert "export OMPI_MCA_btl=self,tcp" in by_transport["tcp"].read_text()
    ib = by_transport["ib"].read_text()
    assert "export UCX_TLS=self,rc" in ib
    assert "-x UCX_TLS" in ib  # mpirun forwards non-OMPI variables to remote ranks


def test_binaries_are_found_in_either_spack_view_layout(tmp_path: Path) -> None:
    view = tmp_path / "view"
    layouts = {"osu_latency": view / "bin" / "osu_latency",
               "osu_bw": view / "libexec/osu-micro-benchmarks/mpi/pt2pt/standard/osu_bw"}
    for path in layouts.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    text = CAMPAIGN + f"spack_view: {view}\n"
    manifest = json.loads(plan_campaign(_campaign(tmp_path, text=text), tmp_path / "out")
                          .read_text())
    osu = [j for j in manifest["jobs"] if j["tool"] == "osu"]
    assert len(osu) == 2 * 3 * 3 and manifest["not_planned"] == []
    for job in osu:
        assert job["command"] == [str(layouts[job["benchmark"]]), "-z"]
        assert job["outputs"] == [f"{job['benchmark']}.txt"]
    script = (tmp_path / "out" / osu[0]["script"]).read_text()
    assert f"export PATH={view}/bin:" in script


def test_default_view_is_the_kit_environments_or_pt2pt_spack_view(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without `spack_view`, plan looks in <kit>/.spack-env/view, or where PT2PT_SPACK_VIEW
    says (how the tests keep a developer's filled view out, and use the one they build)."""
    from kit.core import paths

    monkeypatch.delenv(SPACK_VIEW_ENV)
    assert paths.spack_view() == paths.REPO_ROOT / ".spack-env" / "view"
    view = tmp_path / "view"
    for exe in ("osu_latency", "osu_bw"):
        (view / "bin").mkdir(parents=True, exist_ok=True)
        (view / "bin" / exe).write_text("#!/bin/sh\n")
        (view / "bin" / exe).chmod(0o755)
    monkeypatch.setenv(SPACK_VIEW_ENV, str(view))
    manifest = json.loads(plan_campaign(_campaign(tmp_path), tmp_path / "out").read_text())
    osu = [j for j in manifest["jobs"] if j["tool"] == "osu"]
    assert manifest["not_planned"] == [] and {j["command"][0] for j in osu} == {
        str(view / "bin" / "osu_latency"), str(view / "bin" / "osu_bw")}
    assert f"export PATH={view}/bin:" in (tmp_path / "out" / osu[0]["script"]).read_text()


def test_required_tool_without_binary_is_an_error_at_its_line(tmp_path: Path) -> None:
    text = CAMPAIGN.replace("    optional: true\n", "")
    with pytest.raises(CampaignError) as info:
        plan_campaign(_campaign(tmp_path, text=text), tmp_path / "out")
    assert ":14" in info.value.paragraph() and "osu_latency" in info.value.paragraph()


def test_plan_refuses_to_overwrite_results(tmp_path: Path) -> None:
    out = tmp_path / "out"
    manifest = json.loads(plan_campaign(_campaign(tmp_path), out).read_text())
    (out / manifest["jobs"][0]["dir"] / "job.json").write_text("{}")
    with pytest.raises(CampaignError) as info:
        plan_campaign(_campaign(tmp_path), out)
    assert "already holds job results" in info.value.paragraph()
    assert (out / manifest["jobs"][0]["dir"] / "job.json").read_text() == "{}"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(CampaignError):
        plan_campaign(_campaign(tmp_path), tmp_path / "other")


def test_skampi_template_is_rendered_into_the_job(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    skampi = tmp_path / "bin" / "skampi"
    skampi.write_text("#!/bin/sh\n")
    skampi.chmod(0o755)
    (tmp_path / "pp.ski").write_text("set_skampi_buffer({{ buf }})\n")
    text = CAMPAIGN.split("  - tool: osu")[0] + (
        "  - tool: skampi\n    ski: pp.ski\n    params: {{buf: 4mb}}\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    manifest = json.loads(plan_campaign(_campaign(tmp_path, text=text), tmp_path / "out")
                          .read_text())
    job = next(j for j in manifest["jobs"] if j["tool"] == "skampi")
    assert (tmp_path / "out" / job["dir"] / "input.ski").read_text() == \
        "set_skampi_buffer(4mb)\n"
    assert job["command"][1:5] == ["-i", "input.ski", "-o", "skampi.sko"]


def test_intra_node_tcp_may_use_loopback_inter_node_may_not(tmp_path: Path) -> None:
    """Two ranks on one node reach each other over lo (the only interface in a container or a
    network namespace); between nodes lo is never the path, so it is not added there."""
    text = CAMPAIGN.replace("transports: [shm, tcp, ib]", "transports: [tcp]").replace(
        "placement: intra-node", "placement: [intra-node, inter-node]")
    out = tmp_path / "out"
    plan_campaign(_campaign(tmp_path, text=text), out)
    manifest = json.loads((out / "manifest.json").read_text())
    by_place = {j["placement"]: j for j in manifest["jobs"] if j["tool"] == "probe"}
    intra = (out / by_place["intra-node"]["script"]).read_text()
    inter = (out / by_place["inter-node"]["script"]).read_text()
    assert "OMPI_MCA_btl_tcp_if_include=lo" in intra
    assert by_place["intra-node"]["transport_env"]["OMPI_MCA_btl_tcp_if_include"] == "lo"
    assert "btl_tcp_if_include" not in inter


@pytest.mark.parametrize("name", ["local-demo.yaml", "cluster-sweep.yaml"])
def test_shipped_campaigns_plan_with_osu_and_skampi_installed(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Until OSU and SkaMPI were installed for real, their optional entries were never planned:
    local-demo.yaml (no params) then failed on '{{ max_buffer }}' in a comment of
    pingpong.ski. Every shipped campaign must plan its OSU and SkaMPI jobs."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for exe in ("osu_latency", "osu_bw", "osu_bibw", "skampi"):
        (tools / exe).write_text("#!/bin/sh\n")
        (tools / exe).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    campaign = Path(__file__).resolve().parent.parent / "jobs" / "campaigns" / name
    manifest = json.loads(plan_campaign(campaign, tmp_path / "out").read_text())
    assert manifest["not_planned"] == []
    assert {j["tool"] for j in manifest["jobs"]} == {"probe", "osu", "skampi"}
    job = next(j for j in manifest["jobs"] if j["tool"] == "skampi")
    ski = (tmp_path / "out" / job["dir"] / "input.ski").read_text()
    assert "set_skampi_buffer(" + ("8mb" if name == "local-demo.yaml" else "32mb") + ")" in ski
    assert "{{" not in ski and "}}" not in ski


def test_demo_campaign_osu_options_keep_runs_short() -> None:
    """OSU's -i also sets the large-message iteration count: '-i 1000' in local-demo.yaml made
    osu_bw take ~2 minutes over shared memory (64 x 1000 messages per size up to 4 MiB)."""
    import yaml

    path = Path(__file__).resolve().parent.parent / "jobs" / "campaigns" / "local-demo.yaml"
    doc = yaml.safe_load(path.read_text())
    osu = next(t for t in doc["tools"] if t["tool"] == "osu")
    assert "-i" not in osu["options"] and "--iterations" not in osu["options"]


def test_binaries_found_through_relative_paths_are_written_absolute(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs run in their own directory: a relative PATH entry or spack_view must not leave a
    relative binary path in the job's command."""
    (tmp_path / "tools").mkdir()
    for exe in ("osu_latency", "osu_bw"):
        (tmp_path / "tools" / exe).write_text("#!/bin/sh\n")
        (tmp_path / "tools" / exe).chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "tools:/usr/bin:/bin")
    manifest = json.loads(plan_campaign(_campaign(tmp_path), tmp_path / "out").read_text())
    osu = [j for j in manifest["jobs"] if j["tool"] == "osu"]
    assert osu and all(j["command"][0] == str(tmp_path / "tools" / j["benchmark"]) for j in osu)
    view = tmp_path / "view" / "bin"
    view.mkdir(parents=True)
    (view / "osu_latency").symlink_to(tmp_path / "tools" / "osu_latency")
    text = CAMPAIGN + "spack_view: view\n"
    manifest = json.loads(plan_campaign(_campaign(tmp_path, text=text), tmp_path / "out2")
                          .read_text())
    job = next(j for j in manifest["jobs"] if j.get("benchmark") == "osu_latency")
    assert job["command"][0] == str(view / "osu_latency")  # absolute, symlink kept
    script = (tmp_path / "out2" / job["script"]).read_text()
    assert f"export PATH={view}:" in script
