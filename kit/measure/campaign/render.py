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
    """A job template made from a tool's fragment (kit.tools; imported here, not at the top:
    the tools' modules import this one)."""
    from kit import tools

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


# A user's text template (a .ski file) comes from a campaign, i.e. from someone else: it is
# never given to a template engine (Jinja2 would evaluate `{{ cycler.__init__.__globals__...}}`
# and run code at plan time). The only constructs are a declared parameter, `{{ name }}`, and
# a parameter with a literal fallback, `{{ name | default("8mb") }}`; anything else between
# `{{ }}`, and every `{% %}` / `{# #}` tag, is refused with the file and line.
_TAG = re.compile(r"\{\{(.*?)\}\}|\{%|%\}|\{#|#\}|\{\{|\}\}", re.S)
_SUBST = re.compile(
    r"""^\s*([A-Za-z_][A-Za-z0-9_]*)\s*"""
    r"""(?:\|\s*default\s*\(\s*(?:"([^"\\{}]*)"|'([^'\\{}]*)')\s*\)\s*)?$""")
MAX_TEXT_TEMPLATE_BYTES = 1 << 20


def render_text_template(text: str, params: dict[str, str], source: str) -> str:
    """Substitute the declared ``params`` into a user's text template (a .ski file).

    Plain substitution, no template engine: see the comment above for the accepted forms.
    """
    if len(text) > MAX_TEXT_TEMPLATE_BYTES:
        raise CampaignError(f"the template is larger than {MAX_TEXT_TEMPLATE_BYTES} bytes",
                            where=source, hint="give a SkaMPI input file, not a data file")
    out: list[str] = []
    pos = 0
    for match in _TAG.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        expr = match.group(1)
        sub = _SUBST.match(expr) if expr is not None else None
        if sub is None:
            shown = match.group(0) if len(match.group(0)) <= 60 else match.group(0)[:57] + "..."
            raise CampaignError(
                f"unsupported template syntax {shown!r}", where=f"{source}:{line}",
                hint="a .ski template may only use '{{ name }}' or "
                     "'{{ name | default(\"value\") }}' with a name declared under 'params:' "
                     "in the campaign; no expressions, filters, blocks or comments")
        name, fallback = sub.group(1), sub.group(2) if sub.group(2) is not None else sub.group(3)
        if name in params:
            value = str(params[name])
        elif fallback is not None:
            value = fallback
        else:
            raise CampaignError(f"'{name}' is not a declared parameter", where=f"{source}:{line}",
                                hint="define the variable under 'params:' in the campaign")
        out.append(text[pos:match.start()])
        out.append(value)
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def read_text_template(path: Path, params: dict[str, str]) -> str:
    """Read and render a user's text template file; unreadable or non-UTF-8 is a CampaignError."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_TEXT_TEMPLATE_BYTES + 1)
        text = raw.decode("utf-8")
    except OSError as exc:
        raise CampaignError(f"cannot read the template ({exc.strerror})", where=str(path),
                            hint="check the 'ski:' path in the campaign") from None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise CampaignError("the template is not UTF-8 text", where=f"{path}:{line}",
                            hint="save the .ski file as UTF-8 text") from None
    return render_text_template(text, params, str(path))
