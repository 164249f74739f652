"""The tcp transport check counts the bytes the node's interfaces moved during the job, per
interface: interfaces that appear or vanish mid-job (other jobs' namespaces and veth pairs on a
shared host) change a total over all interfaces, not what this job's traffic moved."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.measure.campaign import jobrecord

HEADER = ("Inter-|   Receive                                                |  Transmit\n"
          " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets "
          "errs drop fifo colls carrier compressed\n")


def _netdev(counters: dict[str, tuple[int, int]]) -> str:
    return HEADER + "".join(f"{name:>6}: {rx} 0 0 0 0 0 0 0 {tx} 0 0 0 0 0 0 0\n"
                            for name, (rx, tx) in counters.items())


def test_bytes_moved_are_summed_per_interface(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    real_read = Path.read_text
    current = {"text": ""}

    def fake_read(self: Path, *args: object, **kwargs: object) -> str:
        if str(self) == "/proc/net/dev":
            return current["text"]
        return real_read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", fake_read)
    current["text"] = _netdev({"lo": (1000, 1000), "veth-other": (900_000, 900_000)})
    before = {"net": jobrecord.net_bytes(), "net_if": jobrecord.net_counters()}
    assert before["net_if"] == {"lo": 2000, "veth-other": 1_800_000}
    # the job moved 500,000 bytes over lo; another job's veth pair went away meanwhile
    current["text"] = _netdev({"lo": (251_000, 251_000), "eth1": (10, 10)})
    assert jobrecord.net_bytes() - before["net"] < 0  # what the old total read
    assert jobrecord.net_moved(before) == 500_000
    # counters written by an older kit (a total only) are still read as a total
    assert jobrecord.net_moved({"net": 2000}) == 502_020 - 2000
