"""Fuzzed campaigns, .ski templates and model files: refused as user errors, or safe.

Checks values, not only "no crash":

* a mutated campaign either loads or raises a CampaignError naming the file *and line*
  (campaign files keep their line numbers), never another exception;
* a mutated .ski template either renders to text without template syntax left in it, with
  only declared values inserted, or is refused naming the file and line; nothing is executed;
* a mutated model file is refused with a ModelError, or it predicts finite positive times
  with p05 <= p50 <= p95 on a fine grid across all its sizes, and its draws are positive.

A fast subset by default; with ``CI=true`` the counts below (with tests/test_ingest_fuzz.py's
4,000 tool outputs) make 10,000 cases.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.core.errors import CampaignError, ModelError
from kit.measure.campaign.schema import load_campaign
from kit.model.io import model_from_dict
from kit.model.noise import Noise
from kit.model.schema import parse_model_bytes
from kit.tools.skampi import render_text_template
from tests.model_corpus import base_model

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
N_CAMPAIGNS = 1000 if CI else 60
N_TEMPLATES = 4000 if CI else 300
N_MODELS = 1000 if CI else 100
ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"deadline": None, "database": None, "derandomize": True,
            "suppress_health_check": list(HealthCheck)}

# ------------------------------------------------------------------ campaigns

CAMPAIGN_TOKENS = ["", " ", ":", "- ", "[", "]", "{", "}", "{{ x }}", "{% if %}", "'", '"',
                   "\t", "&a", "*a", "!!python/object:os.system", "0", "-1", "1e999", "null",
                   "yes", "~", "$(touch /tmp/pt2pt-fuzz-marker)", "`id`", "\\", "#", "\n  x: 1",
                   "\u00e9", "\x00", "9" * 30, "loguniform:0:4M", "list:8,x"]


def _campaign_seed() -> str:
    text = (ROOT / "jobs" / "campaigns" / "local-demo.yaml").read_text()
    return text.replace("ski: pingpong.ski", f"ski: {ROOT / 'jobs' / 'campaigns' / 'pingpong.ski'}")


@st.composite
def mutated_campaign(draw: st.DrawFn, seed: str) -> str:
    lines = seed.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["token", "delete", "duplicate", "indent"]))
        if kind == "token":
            line = lines[i]
            p = draw(st.integers(0, len(line)))
            q = draw(st.integers(p, min(len(line), p + 8)))
            lines[i] = line[:p] + draw(st.sampled_from(CAMPAIGN_TOKENS)) + line[q:]
        elif kind == "delete" and len(lines) > 1:
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        else:
            lines[i] = "  " + lines[i]
    return "".join(lines)


def test_fuzzed_campaigns_load_or_name_their_line(tmp_path: Path) -> None:
    os.environ.setdefault("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    marker = Path("/tmp/pt2pt-fuzz-marker")
    marker.unlink(missing_ok=True)
    seed = _campaign_seed()
    path = tmp_path / "campaign.yaml"

    @settings(max_examples=N_CAMPAIGNS, **SETTINGS)
    @given(text=mutated_campaign(seed))
    def check(text: str) -> None:
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        try:
            load_campaign(path)
        except CampaignError as err:
            assert err.where and str(path) in err.where
            # an error inside the file names its line (unreadable/empty files: the file)
            if text.strip() and "\x00" not in text:
                assert err.where.startswith(f"{path}:") or "line" in err.message, err.where

    check()
    assert not marker.exists()


# ------------------------------------------------------------------ .ski templates

SKI_TOKENS = ["{{", "}}", "{%", "%}", "{#", "#}", "{{ buf }}", "{{buf}}", "{{ nope }}",
              '{{ buf | default("8mb") }}', "{{ x | default('y') }}", "{{ buf|upper }}",
              "{{ cycler.__init__.__globals__.os.popen('touch /tmp/pt2pt-ski-marker') }}",
              "{% include '/etc/passwd' %}", "{{ self }}", "{{ lipsum }}", "{", "}", "|",
              "default(", ")", '"', "'", "\n", " ", "\u00e9", "{{ buf ~ 1 }}", "{{ 7*7 }}"]


@st.composite
def mutated_ski(draw: st.DrawFn) -> str:
    text = (ROOT / "jobs" / "campaigns" / "pingpong.ski").read_text()
    for _ in range(draw(st.integers(1, 4))):
        p = draw(st.integers(0, len(text)))
        q = draw(st.integers(p, min(len(text), p + 6)))
        text = text[:p] + draw(st.sampled_from(SKI_TOKENS)) + text[q:]
    return text


def test_fuzzed_ski_templates_substitute_or_refuse() -> None:
    marker = Path("/tmp/pt2pt-ski-marker")
    marker.unlink(missing_ok=True)
    params = {"buf": "4mb", "max_buffer": "16mb"}

    @settings(max_examples=N_TEMPLATES, **SETTINGS)
    @given(text=mutated_ski())
    def check(text: str) -> None:
        try:
            out = render_text_template(text, params, "t.ski")
        except CampaignError as err:
            assert err.where and err.where.startswith("t.ski:")
            line = int(err.where.split(":")[1])
            assert 1 <= line <= text.count("\n") + 1
            return
        for syntax in ("{{", "}}", "{%", "%}", "{#", "#}"):
            assert syntax not in out
        assert "49" not in out or "49" in text  # {{ 7*7 }} was never evaluated

    check()
    assert not marker.exists()


# ------------------------------------------------------------------ model files

_VALUES: list[Any] = [None, True, 0, 0.0, -1.0, 1e-300, 1e300, -1e300, 2.5, 1e6, "x", "",
                      [], {}, [1.0], {"a": 1.0}, 3, 64, 10 ** 20, [0.5, 0.5], -0.0]


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*prefix, k))
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append((*prefix, i))
            out.extend(_paths(v, (*prefix, i)))
    return out


BASE = base_model()
BASE_PATHS = _paths(BASE)


@st.composite
def mutated_model(draw: st.DrawFn) -> bytes:
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(BASE_PATHS))
        parent: Any = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            last = path[-1]
            kind = draw(st.sampled_from(["set", "scale", "delete"]))
            if kind == "delete" and isinstance(parent, dict):
                parent.pop(last, None)
            elif kind == "scale" and isinstance(parent[last], int | float) \
                    and not isinstance(parent[last], bool):
                parent[last] = parent[last] * draw(st.sampled_from([-1.0, 0.0, 1e-6, 1e6, 1e300]))
            else:
                # a copy: the shared list/dict values would otherwise collect edits
                # across examples and end up containing themselves
                parent[last] = copy.deepcopy(draw(st.sampled_from(_VALUES)))
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed this path
    return json.dumps(doc).encode()


def test_fuzzed_models_are_refused_or_physical() -> None:
    seen = {"accepted": 0, "refused": 0}

    @settings(max_examples=N_MODELS, **SETTINGS)
    @given(raw=mutated_model())
    def check(raw: bytes) -> None:
        try:
            model = model_from_dict(parse_model_bytes(raw, "m.json"), "m.json")
        except ModelError as err:
            assert err.where == "m.json" and err.paragraph()
            seen["refused"] += 1
            return
        seen["accepted"] += 1
        top = max(float(r.size_max) for r in model.regimes_)
        grid = np.unique(np.concatenate([[0.0, 1.0], np.geomspace(1, max(top, 2.0), 48)]))
        q = model.predict_quantiles(grid, [0.05, 0.5, 0.95])
        assert np.all(np.isfinite(q)) and np.all(q > 0), "accepted a non-positive time"
        assert np.all(q[:, 0] <= q[:, 1] * (1 + 1e-9)) and np.all(q[:, 1] <= q[:, 2] * (1 + 1e-9))
        draws = model.sample(grid[::8], 4, random_state=0)
        assert np.all(np.isfinite(draws)) and np.all(draws > 0)

    check()
    # both sides were exercised: the physical assertions ran on accepted mutants
    assert seen["accepted"] > 0 and seen["refused"] > 0, seen


def test_an_accepted_invgauss_with_a_huge_mu_draws_positive_times() -> None:
    """Found by the model fuzz above: numpy's Wald sampler gives 0 and -inf once mu is past
    ~1e150, where the quantiles (which the load checks) are sound; the draws must be positive
    too, and follow those quantiles."""
    noise = Noise("invgauss", {"mu": 1e298, "scale": 100.0})
    x = noise.rvs(20000, np.random.default_rng(1))
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    levels = np.array([0.05, 0.5, 0.95])
    assert np.allclose(np.quantile(x, levels), noise.ppf(levels), rtol=0.15)


def test_yaml_tags_are_refused_at_their_line(tmp_path: Path) -> None:
    """Found by the fuzz above: '!!python/object...' or '!!timestamp x' raised PyYAML's own
    exceptions (a traceback); the safe loader never ran them, now they name their line."""
    from kit.core.yamlmarks import load_located

    for tag in ("!!python/object:os.system x", "!!python/name:os.system ''",
                "!!timestamp nope", "!!binary xx", "!!int abc", "!custom 1"):
        with pytest.raises(CampaignError) as err:
            load_located(f"name: t\nmpi: {tag}\n", "c.yaml")
        assert err.value.where == "c.yaml:2"
