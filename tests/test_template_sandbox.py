"""A campaign's .ski template is untrusted text: it can only receive declared parameters.

Until this was fixed, ``pt2pt plan`` rendered .ski files with an unsandboxed Jinja2
environment, so ``{{ cycler.__init__.__globals__.os.popen(...) }}`` in a comment ran a command.
Each payload below tries to create a marker file, through ``pt2pt plan`` run as a subprocess;
the plan must either refuse with a one-paragraph error naming the file and line, and no marker
may appear.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit.core.errors import CampaignError
from kit.tools.skampi import read_text_template, render_text_template

ROOT = Path(__file__).resolve().parent.parent


def _payloads(m: Path) -> list[str]:
    cmd = f'touch {m}'
    return [
        f'# {{{{ cycler.__init__.__globals__.os.popen("{cmd}/cycler").read() }}}}',
        f'{{{{ joiner.__init__.__globals__.os.popen("{cmd}/joiner").read() }}}}',
        f'{{{{ namespace.__init__.__globals__.os.popen("{cmd}/namespace").read() }}}}',
        f'{{{{ lipsum.__globals__["os"].popen("{cmd}/lipsum").read() }}}}',
        f'{{{{ self._TemplateReference__context.cycler.__init__.__globals__.os'
        f'.popen("{cmd}/self").read() }}}}',
        '{{ ().__class__.__base__.__subclasses__() }}',
        '{{ "a"|attr("__class__") }}',
        '{{ buf.__class__ }}',
        '{{ buf|upper }}',
        '{{ buf ~ "x" }}',
        '{{ buf | default(buf.__class__) }}',
        f'{{% set x = cycler.__init__.__globals__.os.popen("{cmd}/set").read() %}}',
        '{% for c in ().__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}',
        '{% include "/etc/passwd" %}',
        '{% import "/etc/passwd" as p %}',
        '{% extends "/etc/passwd" %}',
        '{% raw %}{{ buf }}{% endraw %}',
        f'{{% macro m() %}}{{{{ cycler.__init__.__globals__.os.popen("{cmd}/macro") }}}}'
        f'{{% endmacro %}}{{{{ m() }}}}',
        '{# a comment #}',
        f'{{{{ config.__class__.__init__.__globals__["os"].popen("{cmd}/config") }}}}',
        f'{{{{ request.application.__globals__.__builtins__.__import__("os")'
        f'.popen("{cmd}/request") }}}}',
        '{{ (buf).__class__.__mro__[1].__subclasses__() }}',
        '{{ buf }',
        '{{ undeclared }}',
    ]


CAMPAIGN = """\
name: sandbox
mpi: openmpi
transports: [shm]
placement: intra-node
repetitions: 1
seed: 1
launcher: mpirun
tools:
  - tool: skampi
    ski: pp.ski
    params: {buf: 4mb}
"""


def test_declared_parameters_and_defaults_are_substituted() -> None:
    text = "a {{ buf }} b {{buf}} c {{ other | default(\"8mb\") }} d {{ buf|default('x') }}\n"
    assert render_text_template(text, {"buf": "4mb"}, "t.ski") == \
        "a 4mb b 4mb c 8mb d 4mb\n"
    # A value is inserted as text and never evaluated again.
    assert render_text_template("{{ buf }}", {"buf": "{{ cycler }}"}, "t.ski") == "{{ cycler }}"


@pytest.mark.parametrize("index", range(len(_payloads(Path("/m")))))
def test_payload_is_refused_with_file_and_line(index: int, tmp_path: Path) -> None:
    payload = _payloads(tmp_path)[index]
    ski = tmp_path / "pp.ski"
    ski.write_text(f"set_min_repetitions(32)\n\n{payload}\n")
    with pytest.raises(CampaignError) as err:
        read_text_template(ski, {"buf": "4mb"})
    assert err.value.where == f"{ski}:3"
    assert list(tmp_path.iterdir()) == [ski]


def test_non_utf8_template_is_a_campaign_error(tmp_path: Path) -> None:
    ski = tmp_path / "pp.ski"
    ski.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(CampaignError) as err:
        read_text_template(ski, {})
    assert err.value.where == f"{ski}:2"


def test_pt2pt_plan_runs_no_payload(tmp_path: Path) -> None:
    """The real CLI (a few payloads: each start costs seconds; the library test above covers
    all of them): exit non-zero, one paragraph, no traceback, no marker."""
    markers = tmp_path / "markers"
    markers.mkdir()
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "skampi").write_text("#!/bin/sh\n")
    (tools / "skampi").chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{tools}:/usr/bin:/bin",
           "PT2PT_SITE_CONFIG": str(tmp_path / "no-site.yaml")}
    payloads = _payloads(markers)
    for i, payload in enumerate([payloads[0], payloads[3], payloads[11], payloads[13]]):
        case = tmp_path / f"c{i}"
        case.mkdir()
        (case / "pp.ski").write_text(f"# SkaMPI input\n{payload}\n"
                                     "set_skampi_buffer({{ buf }})\n")
        (case / "campaign.yaml").write_text(CAMPAIGN)
        proc = subprocess.run([sys.executable, "-m", "kit", "plan", str(case / "campaign.yaml"),
                               "-o", str(case / "out")], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode != 0, payload
        assert "Traceback" not in proc.stderr
        assert "pp.ski:2" in proc.stderr.replace("\n", " "), proc.stderr
        assert list(markers.iterdir()) == []
