"""``pt2pt run-local`` of an adaptive campaign with the real probe and Open MPI: rounds
planned and run one by one, every round collected into one series, the design recorded
(issue 60 item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.data import dataset as ds
from tests.builders import adaptive_campaign
from tests.conftest_slurm import pt2pt_here

CAMPAIGN = adaptive_campaign("adaptive-local")

pytestmark = [pytest.mark.mpi, pytest.mark.usefixtures("tcp_campaign_env")]


def test_adaptive_rounds_until_the_budget_every_round_kept(tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN)
    out = tmp_path / "out"
    proc = pt2pt_here("run-local", campaign, "-o", out)
    # a ±0.1 % median in every decade from 600 samples: the budget stops it (exit 3)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "the sample budget (600) was spent" in proc.stdout
    record = json.loads((out / "design.json").read_text())
    assert (out / "dataset" / "design.json").read_text() == (out / "design.json").read_text()
    assert record["stopped"] == "budget" and not record["reached"]
    assert [r["round"] for r in record["rounds"]] == [0, 1, 2]
    assert record["settings"]["target"]["median"] == 0.001
    data = ds.select_series(out / "dataset", {"campaign": "adaptive-local"})
    assert len(data.size) == record["total_samples"] == 600
    for r in record["rounds"]:
        plan = (out / f"round-{r['round']:02d}.yaml").read_text()
        assert "list:" + ",".join(map(str, r["sizes"])) in plan
        assert (out / f"round-{r['round']:02d}" / "manifest.json").is_file()
        assert r["samples"] == 2 * len(r["sizes"]) == 200
        measured = set(data.size.astype(int).tolist())
        assert set(r["sizes"]) <= measured
    # the same command again: finished, said so, nothing measured again, nothing lost
    again = pt2pt_here("run-local", campaign, "-o", out)
    assert again.returncode == 3 and "Traceback" not in again.stderr, again.stderr
    assert "already finished after 3 rounds" in again.stdout
    assert len(ds.select_series(out / "dataset", {"campaign": "adaptive-local"}).size) == 600
    # another campaign into the same folder is refused in words
    campaign.write_text(CAMPAIGN.replace("median: 0.001", "median: 0.002"))
    other = pt2pt_here("run-local", campaign, "-o", out)
    assert other.returncode != 0 and "Traceback" not in other.stderr
    assert "with other design settings" in " ".join(other.stderr.split())
