"""Checks of campaign values that turn a bad value into a CampaignError at its line.

Shared by the campaign schema (kit.measure.campaign.schema) and the tools' own option schemas
(kit.tools.*), which validate their ``tools:`` entries with the same checker; it sits below
both (kit/core) because the tools' layer is below the campaign's.
"""

from __future__ import annotations

import re
from typing import Any

from kit.core.errors import CampaignError
from kit.core.yamlmarks import Located, PathKey

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def parse_size(text: str) -> int:
    """``4M`` -> 4194304 (suffixes are powers of 1024, as the probe reads them)."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * mult


class Checker:
    """Validation helpers that turn a bad value into a CampaignError at its line."""

    def __init__(self, loc: Located) -> None:
        self.loc = loc

    def fail(self, path: PathKey, message: str, hint: str) -> CampaignError:
        return CampaignError(message, where=self.loc.where(path), hint=hint)

    def mapping(self, value: Any, path: PathKey, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, found {type(value).__name__}",
                            "write 'key: value' lines indented under it")
        known = frozenset(allowed)  # a set: 100,000 env keys were a quadratic tuple search
        for key in value:
            if key not in known:
                raise self.fail((*path, key), f"unknown key '{key}'",
                                f"allowed keys here: {', '.join(allowed)}")
        return value

    def text(self, value: Any, path: PathKey, *, pattern: re.Pattern[str] | None = None,
             hint: str = "", raw: bool = False) -> str:
        if raw and path in self.loc.raw and not isinstance(value, bool):
            value = self.loc.raw[path]
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(path, f"expected a text value, found {value!r}", hint or "quote it")
        text = str(value)
        if _CONTROL_RE.search(text):
            raise self.fail(path, "newlines and control characters are not allowed here",
                            hint or "write the value on one line")
        if pattern is not None and not pattern.match(text):
            raise self.fail(path, f"invalid value {text!r}", hint)
        return text

    def integer(self, value: Any, path: PathKey, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise self.fail(path, f"expected an integer from {lo} to {hi}, found {value!r}",
                            f"write a whole number between {lo} and {hi}")
        return value

    def boolean(self, value: Any, path: PathKey) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, found {value!r}",
                            "write true or false")
        return value

    def text_list(self, value: Any, path: PathKey, **kw: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, found {value!r}",
                            "write a YAML list, e.g. [a, b]")
        return tuple(self.text(v, (*path, i), **kw) for i, v in enumerate(value))

    def choices(self, value: Any, path: PathKey, allowed: tuple[str, ...],
                what: str) -> tuple[str, ...]:
        items = self.text_list(value, path)
        if not items:
            raise self.fail(path, f"at least one {what} is needed",
                            f"choose from: {', '.join(allowed)}")
        for i, item in enumerate(items):
            if item not in allowed:
                raise self.fail((*path, i) if isinstance(value, list) else path,
                                f"unknown {what} '{item}'", f"choose from: {', '.join(allowed)}")
        if len(set(items)) != len(items):
            raise self.fail(path, f"a {what} is listed twice", "list each one once")
        return items
