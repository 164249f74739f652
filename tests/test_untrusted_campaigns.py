"""Campaign files, templates and planned campaign folders are untrusted input (issue 53).

Line 2: a campaign's ``ski:`` (and any file it names), a hand-edited ``manifest.json`` and a
probe's ``extra_args`` stay inside the campaign; line 3: YAML denial of service (alias bombs,
self-referencing aliases, deep nesting, 100,000 ``env:`` keys) is one paragraph in about a
second; line 10: size specs are checked by the probe's own rules, a FIFO given as a campaign
does not hang, a missing ``jobs/`` folder or ``"dir": null`` is an error, not a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.core.errors import CampaignError
from kit.core.paths import JOBS_DIR
from kit.core.yamlmarks import MAX_DEPTH, load_located
from kit.measure.campaign.schema import load_campaign
from tests.test_campaign_schema import BASE as SCHEMA_BASE
from tests.test_campaign_schema import _no_site_file  # noqa: F401  (autouse fixture)
from tests.test_campaign_schema import _write as _campaign

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"deadline": None, "database": None, "derandomize": True,
            "suppress_health_check": list(HealthCheck)}
#: test_campaign_schema's campaign, launched by mpirun (run-local plans it for this host)
BASE = SCHEMA_BASE.replace("launcher: srun --mpi=pmix", "launcher: mpirun").replace(
    "slurm:\n  partition: debug\n  time: \"00:05:00\"\n", "").replace(
    "    ops: [pingpong, send]\n", "    ops: [pingpong]\n")


def _refused(path: Path) -> str:
    with pytest.raises(CampaignError) as info:
        load_campaign(path)
    return info.value.paragraph()


def _plan(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kit", "plan", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


# ------------------------------------------------------------------ line 3: YAML bombs

BOMB = "".join(f"{k}: &{k} [{', '.join(['*' + p] * 9 if p else ['x'] * 9)}]\n"
               for p, k in zip(["", "a", "b", "c", "d", "e", "f", "g"], "abcdefgh",
                               strict=True))


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    """Ten lines that expand to 9^8 values: refused on its line after a bounded amount of work
    (subprocess: a real `pt2pt plan`, no traceback, no file written)."""
    path = _campaign(tmp_path, BOMB + BASE)
    started = time.monotonic()
    res = _plan(str(path), "-o", str(tmp_path / "out"), timeout=60)
    assert res.returncode == 2, res.stderr
    assert "aliases are expanded" in " ".join(res.stderr.split()) and "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()
    assert time.monotonic() - started < 60  # a guard against hanging, not a speed claim


@pytest.mark.parametrize("text", ["name: &r [*r]\n", "name: &r {x: *r}\n",
                                  "a: &r [[[*r]]]\nname: *r\n"])
def test_self_referencing_alias_is_refused(tmp_path: Path, text: str) -> None:
    message = _refused(_campaign(tmp_path, text + BASE.replace("name: demo\n", "")))
    assert "nested deeper" in message and "c.yaml:" in message


@pytest.mark.parametrize("opener", ["[", "{a: "])
def test_deep_nesting_is_refused_at_its_line(tmp_path: Path, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    text = BASE.replace("name: demo", "name: " + opener * 3000 + "x" + closer * 3000)
    message = _refused(_campaign(tmp_path, text))
    assert f"deeper than {MAX_DEPTH}" in message and "c.yaml:1" in message


def test_100000_env_keys_are_refused_by_size_and_80000_plan_in_linear_time(
        tmp_path: Path) -> None:
    big = _campaign(tmp_path, BASE + "env:\n" + "".join(f"  K{i}: v\n" for i in range(100_000)))
    assert "at most 1,048,576 are read" in _refused(big)
    # Below the size cap every key is checked once (the check was quadratic: 169 s).
    many = _campaign(tmp_path, BASE + "env:\n" + "".join(f"  K{i}: v\n" for i in range(60_000)),
                     "many.yaml")
    assert len(load_campaign(many).env) == 60_000


def test_duplicate_env_key_still_named(tmp_path: Path) -> None:
    message = _refused(_campaign(tmp_path, BASE + "env:\n  A: 1\n  A: 2\n"))
    assert "appears twice" in message


def test_a_bom_is_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert load_campaign(path).name == "demo"


def test_fifo_as_campaign_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "c.yaml"
    os.mkfifo(fifo)
    res = _plan(str(fifo), "-o", str(tmp_path / "out"), timeout=30)
    assert res.returncode == 2 and "named pipe" in res.stderr and "Traceback" not in res.stderr


@settings(max_examples=150, **SETTINGS)
@given(st.lists(st.sampled_from(["&a ", "*a", "[", "]", "{", "}", ": ", "- ", "\n", " ",
                                 "x", "&b ", "*b", ",", "!!str ", "<<: *a", "'", "\t"]),
                max_size=60))
def test_any_anchor_soup_loads_or_is_a_campaign_error(tokens: list[str]) -> None:
    """Generated YAML of anchors, aliases and brackets: a value or a CampaignError, never a
    RecursionError, MemoryError or another exception."""
    try:
        load_located("".join(tokens), "fuzz.yaml")
    except CampaignError as err:
        assert "fuzz.yaml" in err.paragraph()


def test_shipped_campaigns_still_load() -> None:
    for path in sorted((JOBS_DIR / "campaigns").glob("*.yaml")):
        assert load_campaign(path).name


# ------------------------------------------------------------------ line 2: confinement

SKAMPI = "  - tool: skampi\n    ski: {ski}\n"


@pytest.mark.parametrize("ski", ["/etc/shadow", "/proc/self/environ", "../../../../etc/shadow",
                                 "link.ski", "/etc/passwd"])
def test_ski_outside_the_campaign_folder_is_refused(tmp_path: Path, ski: str) -> None:
    (tmp_path / "link.ski").symlink_to("/etc/shadow")
    message = _refused(_campaign(tmp_path, BASE + SKAMPI.format(ski=ski)))
    assert "outside the campaign's folder" in message and "c.yaml:" in message


def test_ski_beside_the_campaign_or_shipped_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "pp.ski").write_text("set_min(8)\n")
    assert load_campaign(_campaign(tmp_path, BASE + SKAMPI.format(ski="pp.ski"))).tools
    shipped = JOBS_DIR / "campaigns" / "pingpong.ski"
    assert load_campaign(_campaign(tmp_path, BASE + SKAMPI.format(ski=shipped),
                                   "shipped.yaml")).tools


def test_ski_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.ski")
    assert "not a regular file" in _refused(_campaign(tmp_path, BASE + SKAMPI.format(
        ski="pipe.ski")))


def test_the_plan_copies_a_template_with_its_own_permissions(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    from kit.measure.campaign.plan import plan_campaign

    fake = tmp_path / "bin" / "skampi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PT2PT_TOOLS_PATH", str(fake.parent))
    monkeypatch.setenv("PT2PT_PROBE", "/bin/true")
    (tmp_path / "pp.ski").write_text("set_min(8)\n")
    (tmp_path / "pp.ski").chmod(0o600)
    plan_campaign(_campaign(tmp_path, BASE + SKAMPI.format(ski="pp.ski")), tmp_path / "out")
    copies = list((tmp_path / "out" / "jobs").rglob("input.ski"))
    assert copies and all((p.stat().st_mode & 0o777) == 0o600 for p in copies)


@pytest.mark.parametrize("args", [["--output=/tmp/x"], ["--output", "/tmp/x"], ["--seed", "3"],
                                  ["--sizes=list:8"], ["--window"], ["/etc/passwd"]])
def test_extra_args_cannot_redirect_or_override(tmp_path: Path, args: list[str]) -> None:
    text = BASE.replace("    samples: 100\n", f"    samples: 100\n    extra_args: {args!r}\n")
    message = _refused(_campaign(tmp_path, text))
    assert "extra_args" in message


def test_extra_args_that_tune_the_measurement_are_accepted(tmp_path: Path) -> None:
    text = BASE.replace("    samples: 100\n", "    samples: 100\n    extra_args: [--flush-every"
                        ", '64', --window=8, --inject-delay-us, '300']\n")
    probe = load_campaign(_campaign(tmp_path, text)).tools[0]
    assert probe.options["extra_args"] == ["--flush-every", "64", "--window=8",
                                           "--inject-delay-us", "300"]


def test_skampi_options_cannot_move_its_files(tmp_path: Path) -> None:
    (tmp_path / "pp.ski").write_text("x\n")
    text = BASE + SKAMPI.format(ski="pp.ski") + "    options: [-o, /tmp/elsewhere.sko]\n"
    assert "SkaMPI's input or output" in _refused(_campaign(tmp_path, text))


def _planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from kit.measure.campaign.plan import plan_campaign

    monkeypatch.setenv("PT2PT_PROBE", "/bin/true")
    out = tmp_path / "plan"
    plan_campaign(_campaign(tmp_path, BASE), out)
    return out


@pytest.mark.parametrize("value", ["../../../../etc", "/etc", None, 5, "jobs/../../x",
                                   "escape"])
@pytest.mark.parametrize("command", ["collect", "status"])
def test_a_hand_edited_manifest_stays_inside_the_campaign(tmp_path: Path, value: object,
                                                          command: str,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    import json

    out = _planned(tmp_path, monkeypatch)
    (out / "escape").symlink_to("/etc")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["jobs"][0]["dir"] = value
    (out / "manifest.json").write_text(json.dumps(manifest))
    argv = [command, str(out)] + (["--dataset", str(tmp_path / "ds")]
                                  if command == "collect" else [])
    res = subprocess.run([sys.executable, "-m", "kit", *argv], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "not a path inside the campaign folder" in " ".join(res.stderr.split())
    assert "Traceback" not in res.stderr and not (tmp_path / "ds").exists()


def test_run_local_after_jobs_was_deleted(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    out = _planned(tmp_path, monkeypatch)
    shutil.rmtree(out / "jobs")
    res = subprocess.run([sys.executable, "-m", "kit", "run-local", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2 and "missing" in res.stderr and "Traceback" not in res.stderr


# ------------------------------------------------------------------ line 10: size specs

@pytest.mark.parametrize("sizes", ["grid:1:4M:1", "grid:1:4M:0.5",
                                   "loguniform:0:18446744073709551616",
                                   "list:8,18446744073709551616", "loguniform:0:4G",
                                   "list:" + ",".join(["8"] * 5000)])
def test_size_specs_the_probe_refuses_are_refused_at_plan(tmp_path: Path, sizes: str) -> None:
    text = BASE.replace("loguniform:0:1M", sizes)
    message = _refused(_campaign(tmp_path, text))
    assert "the probe would refuse" in message and "c.yaml:" in message


def test_the_list_of_100000_sizes_is_refused_before_it_reaches_a_command_line(
        tmp_path: Path) -> None:
    text = BASE.replace("loguniform:0:1M", "list:" + ",".join(str(k) for k in range(100_000)))
    assert "longer than 8191 characters" in _refused(_campaign(tmp_path, text))


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20)
                     | st.sampled_from(["..", "/", "/etc", "jobs/../..", "jobs/x", "a/b",
                                        "\x00", "~"]),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


@settings(max_examples=120, **SETTINGS)
@given(st.sampled_from(["dir", "script", "outputs", "id"]), _JSON,
       st.sampled_from(["jobs", "arrays", "campaign"]))
def test_any_manifest_value_reads_inside_the_folder_or_is_refused(
        tmp_path_factory: pytest.TempPathFactory, key: str, value: object,
        where: str) -> None:
    """A manifest with any JSON in a job's fields (or in place of its jobs, arrays or
    campaign): read_manifest refuses it as a CampaignError, or every path it names resolves
    inside the campaign folder."""
    import json

    from kit.measure.campaign.manifest import output_paths, read_manifest

    root = tmp_path_factory.mktemp("manifest")
    doc = {"campaign": {"name": "c"}, "jobs": [{"id": "j", "dir": "jobs/j",
                                                "script": "jobs/j/job.sbatch",
                                                "outputs": ["probe.samples.csv"]}],
           "arrays": {"g": {"script": "arrays/g.sbatch", "tasks": ["j"]}}}
    if where == "jobs":
        doc["jobs"][0][key] = value
    else:
        doc[where] = value
    (root / "manifest.json").write_text(json.dumps(doc))
    try:
        manifest = read_manifest(root)
    except CampaignError as err:
        assert str(root) in err.paragraph()
        return
    for job in manifest["jobs"]:
        for path in [root / job["dir"], *output_paths(root, job)]:
            assert path.resolve().is_relative_to(root.resolve())
