"""Atomic file writes: a reader (or a crash) never sees half a manifest or job record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kit.core.atomicwrite import write_text


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write to a temp file in the same directory, then rename over ``path``
    (kit.core.atomicwrite: errors in words, no temp file left)."""
    write_text(path, text, mode=mode)


def dump_json(data: Any) -> str:
    """Stable JSON (sorted keys, fixed indent): same data, same bytes."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
