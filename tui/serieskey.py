"""Which series a screen shows, and how it is named on screen (its label).

Values aligned with ``kit.data.schema.SERIES_KEYS``; plain and hashable, so screens and the
session key their state by it."""

from __future__ import annotations

from dataclasses import dataclass

from kit.data.schema import SERIES_KEYS, UNKNOWN, pairs_count, pairs_label


@dataclass(frozen=True, order=True)
class SeriesKey:
    """One series: values aligned with ``kit.data.schema.SERIES_KEYS``."""

    values: tuple[str, ...]

    def as_dict(self) -> dict[str, str]:
        return dict(zip(SERIES_KEYS, self.values, strict=True))

    def get(self, name: str) -> str:
        return self.as_dict().get(name, "")

    @property
    def aggregate(self) -> bool:
        """The series holds a tool's statistics (mean, p99...), not single messages."""
        return self.get("stat") not in ("raw", "")

    @property
    def where(self) -> str:
        """Placement, host pair and pairs beyond one (``inter-node n1:n2, 4 pairs``), or ""
        when none is known."""
        parts = [self.get(k) for k in ("placement", "host_pair")]
        text = " ".join(p for p in parts if p and p != UNKNOWN)
        k = pairs_label(self.get("pairs"))
        return ", ".join(p for p in (text, k) if p)

    @property
    def sort_key(self) -> tuple[object, ...]:
        """Order of the browser: the values, ``pairs`` by number (2 before 16)."""
        return tuple(pairs_count(v) if k == "pairs" else v
                     for k, v in zip(SERIES_KEYS, self.values, strict=True))

    @property
    def label(self) -> str:
        d = self.as_dict()
        stat = d.get("stat", "raw")
        base = "/".join(d.get(k, "") for k in ("campaign", "tool", "transport", "op"))
        if self.where:
            base = f"{base} ({self.where})"
        return base if stat in ("raw", "") else f"{base} [{stat}]"
