"""The applications view's content: a ``pt2pt predict-app`` result as table rows and lines.

An adapter (screens reach ``kit`` through these): the rows and the summary sentences are
``kit.outputs.predictapp``'s, the same the CLI and the report print.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AppsView:
    """What the applications screen shows."""

    path: Path
    headers: list[str]
    rows: list[list[str]]
    lines: list[str]
    statistic: str


def load(path: Path) -> AppsView:
    """Read a predict-app result (UserError naming the file when it is not one)."""
    from kit.outputs.predictapp import read, summary_lines, table_rows

    doc = read(path)
    rows = table_rows(doc)
    headers = list(rows[0]) if rows else []
    return AppsView(path=Path(path), headers=headers,
                    rows=[[r[h] for h in headers] for r in rows],
                    lines=[*summary_lines(doc), *doc.get("notes", [])],
                    statistic=str(doc.get("statistic", "")))
