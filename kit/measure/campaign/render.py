"""Render job scripts from the Jinja2 templates in ``jobs/templates``.

Autoescaping is off (this is shell, not HTML), so safety comes from filters instead:
``shquote`` (shlex.quote) for every value, ``words`` for argument lists, ``sbatch`` for
``#SBATCH`` lines (refuses anything outside a safe character set, because sbatch parses
those lines itself) and ``envname`` for variable names. StrictUndefined turns a template
typo into an error instead of an empty string.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jinja2

from kit import tools
from kit.core.errors import CampaignError
from kit.core.paths import JOBS_DIR

_SBATCH_SAFE = re.compile(r"^[A-Za-z0-9._:=,/@+%-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def shquote(value: Any) -> str:
    return shlex.quote(str(value))


def words(values: Iterable[Any]) -> str:
    if isinstance(values, str):
        raise TypeError("words expects a list, not a string")
    return " ".join(shlex.quote(str(v)) for v in values)


def sbatch_value(value: Any) -> str:
    text = str(value)
    if not _SBATCH_SAFE.match(text):
        raise CampaignError(
            f"{text!r} cannot be written on an #SBATCH line or a script comment",
            where="job rendering",
            hint="use only letters, digits and . _ : = , / @ + % - (e.g. an output "
                 "directory without blanks)")
    return text


def envname(value: Any) -> str:
    text = str(value)
    if not _ENV_NAME.match(text):
        raise CampaignError(f"invalid environment variable name {text!r}",
                            where="job rendering", hint="use letters, digits and _")
    return text


def _tool_template(name: str) -> str | None:
    """A job template made from a tool's fragment (kit.tools.base.Tool.fragment)."""
    return tools.template_source(name)


def environment(template_dir: Path | None = None) -> jinja2.Environment:
    """Templates from ``jobs/templates``, then those of tools that give only the body of
    base.sbatch.j2's ``tool`` block (kit.tools.base.Tool.fragment)."""
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader([
            jinja2.FileSystemLoader(str(template_dir or JOBS_DIR / "templates")),
            jinja2.FunctionLoader(_tool_template)]),
        autoescape=False,  # shell, not HTML: values go through shquote/words
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters.update(shquote=shquote, words=words, sbatch=sbatch_value, envname=envname)
    return env


def render(template: str, context: dict[str, Any], template_dir: Path | None = None) -> str:
    """Render ``template`` (e.g. ``probe.sbatch.j2``) with ``context``."""
    return environment(template_dir).get_template(template).render(**context)
