"""Load YAML keeping the line of every value, so validation errors can say ``file:line``.

PyYAML's ``compose`` gives nodes with start marks; we convert them to plain Python values
ourselves and remember, for each path of keys/indices, the 1-based line where it starts.
Duplicate keys are an error here (plain ``yaml.safe_load`` silently keeps the last one,
which would hide a typo in a campaign).

Campaign files are untrusted input, so this loader is also their gate against denial of
service: a file is at most ``MAX_YAML_BYTES``; the event stream is checked (iteratively,
before anything is composed) for nesting deeper than ``MAX_DEPTH`` and more than
``MAX_ALIASES`` aliases; and the conversion stops after ``MAX_NODES`` values, counting each
use of an alias again, so a ten-line "billion laughs" alias bomb or a self-referencing alias
(``name: &r [*r]``) is one paragraph at its line, not gigabytes or a RecursionError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kit.core.errors import CampaignError
from kit.core.inputs import read_bytes

PathKey = tuple[str | int, ...]
#: resolves scalar nodes (int, bool, null, str) the way yaml.safe_load would
_SCALARS = yaml.SafeLoader("")
#: A campaign, a transport table or a site file is a few KiB; 1 MiB is far beyond any.
MAX_YAML_BYTES = 1 << 20
#: Nesting of lists and mappings (a campaign needs 5).
MAX_DEPTH = 64
#: Aliases (``*name``) in one file.
MAX_ALIASES = 1_000
#: Values after expanding aliases (a 1 MiB file without aliases has fewer).
MAX_NODES = 500_000
#: libyaml's parser where PyYAML was built with it (the same nodes, marks and resolver as
#: the pure-Python one, about 10x faster: the transport table alone took 90 ms to compose)
_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class Located:
    """A loaded document plus the line of every path in it."""

    data: Any
    lines: dict[PathKey, int] = field(default_factory=dict)
    source: str = "<string>"
    #: the scalar text as written (YAML 1.1 reads ``00:10:00`` as the integer 600)
    raw: dict[PathKey, str] = field(default_factory=dict)

    def line(self, path: PathKey) -> int:
        """Line of ``path``, or of its nearest ancestor that has one (1 if none)."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), 1)

    def where(self, path: PathKey) -> str:
        """``file:line`` plus the dotted key, for error messages."""
        dotted = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in path)
        dotted = dotted.replace(".[", "[")
        key = f" ({dotted})" if dotted else ""
        return f"{self.source}:{self.line(path)}{key}"


def _too_large(out: Located, node: yaml.Node, what: str) -> CampaignError:
    return CampaignError(f"not a usable campaign file: {what}",
                         where=f"{out.source}:{node.start_mark.line + 1}",
                         hint="write the values out instead of nesting or repeating aliases "
                              "(a campaign needs a few levels and a few hundred values)")


def _convert(node: yaml.Node, path: PathKey, out: Located, budget: list[int]) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise _too_large(out, node, f"more than {MAX_NODES:,} values once its aliases are "
                         "expanded")
    if len(path) > MAX_DEPTH:  # an alias that contains itself (&r [*r]) nests for ever
        raise _too_large(out, node, f"nested deeper than {MAX_DEPTH} levels (an alias that "
                         "refers to itself?)")
    out.lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _convert(key_node, (*path, "<key>"), out, budget)
            out.lines.pop((*path, "<key>"), None)
            out.raw.pop((*path, "<key>"), None)
            if not isinstance(key, str):
                raise CampaignError(
                    f"keys must be strings, found {key!r}",
                    where=f"{out.source}:{key_node.start_mark.line + 1}",
                    hint="quote the key or fix the indentation")
            if key in result:
                raise CampaignError(
                    f"key '{key}' appears twice",
                    where=f"{out.source}:{key_node.start_mark.line + 1}",
                    hint="remove one of the two entries")
            result[key] = _convert(value_node, (*path, key), out, budget)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), out, budget) for i, item in enumerate(node.value)]
    # Scalars: let the safe constructor resolve ints/bools/nulls as usual.
    out.raw[path] = str(node.value)
    try:
        return _SCALARS.construct_object(node)
    except (yaml.YAMLError, ValueError, TypeError, AttributeError, OverflowError) as exc:
        # '!!python/object...' (refused by the safe constructor, never run), '!!timestamp x'
        # (PyYAML fails inside its own constructor): the line, not a traceback.
        problem = getattr(exc, "problem", None) or f"cannot read {node.value!r} as {node.tag}"
        raise CampaignError(f"not valid campaign YAML: {problem}",
                            where=f"{out.source}:{node.start_mark.line + 1}",
                            hint="remove the '!!' tag: campaign values are plain text, "
                                 "numbers and lists") from None


def _check_events(text: str, source: str) -> None:
    """Depth and alias limits from the parser's event stream (no recursion, no nodes)."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=_COMPOSER):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise CampaignError(f"not a usable campaign file: nested deeper than "
                                    f"{MAX_DEPTH} levels", where=f"{source}:"
                                    f"{event.start_mark.line + 1}",
                                    hint="a campaign needs a few levels of lists and mappings")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise CampaignError(f"not a usable campaign file: more than {MAX_ALIASES:,} "
                                    "aliases", where=f"{source}:{event.start_mark.line + 1}",
                                    hint="write the values out instead of repeating aliases")


def load_located(text: str, source: str = "<string>") -> Located:
    """Parse ``text``; YAML syntax errors become a CampaignError with the line."""
    out = Located(data=None, source=source)
    if len(text) > MAX_YAML_BYTES:
        raise CampaignError(f"the file is larger than {MAX_YAML_BYTES >> 20} MiB",
                            where=source, hint="give the campaign YAML file (a few KiB)")
    try:
        _check_events(text, source)
        node = yaml.compose(text, Loader=_COMPOSER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise CampaignError(
            f"not valid YAML: {exc.problem or exc}",
            where=f"{source}:{line}",
            hint="fix the YAML syntax (indentation, quotes, colons)") from None
    except yaml.YAMLError as exc:
        raise CampaignError(f"not valid YAML: {exc}", where=source,
                            hint="fix the YAML syntax") from None
    if node is None:
        raise CampaignError("the file is empty", where=f"{source}:1",
                            hint="write a campaign mapping (see jobs/campaigns/*.yaml)")
    out.data = _convert(node, (), out, [MAX_NODES])
    return out


def load_located_file(path: Path) -> Located:
    """Read and parse a YAML file; unreadable, non-regular or huge files are user errors."""
    raw = read_bytes(path, "campaign file", limit=MAX_YAML_BYTES, error=CampaignError)
    try:
        text = raw.decode("utf-8-sig")  # an editor's BOM is not an error
    except UnicodeDecodeError:
        raise CampaignError("not UTF-8 text", where=str(path),
                            hint="save the campaign as UTF-8 YAML") from None
    return load_located(text, source=str(path))
