"""Campaign design for many node pairs (kit.measure.campaign.pairplan): round-by-round
order of disjoint pairs, and a budget that sizes a 64-node all-pairs campaign."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from kit.core.errors import CampaignError
from kit.measure.campaign import pairs as pairs_mod
from kit.measure.campaign.pairplan import matchings, visit_order
from kit.measure.campaign.plan import plan_campaign
from kit.tools.probe import cluster_sizes


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    probe = tmp_path / "pt2pt-probe"
    probe.write_text("#!/bin/sh\n")
    probe.chmod(0o755)
    monkeypatch.setenv("PT2PT_PROBE", str(probe))


@pytest.mark.parametrize("n", [2, 5, 8, 64])
def test_matchings_cover_every_pair_once_in_disjoint_rounds(n: int) -> None:
    nodes = [f"n{i}" for i in range(n)]
    rounds = matchings(nodes, random.Random(1))
    seen = [p for r in rounds for p in r]
    assert sorted(seen) == sorted(itertools.combinations(sorted(nodes), 2))
    for r in rounds:
        flat = [x for p in r for x in p]
        assert len(flat) == len(set(flat))  # no node twice in a round
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    if n > 4:
        assert matchings(nodes, random.Random(2)) != rounds  # randomised


def test_visits_come_round_by_round() -> None:
    pairs = list(itertools.combinations([f"n{i}" for i in range(6)], 2))
    order = visit_order(pairs, 3, seed=7)
    assert len(order) == 15 * 3
    by_pos = sorted(order, key=order.__getitem__)
    assert [v for _, v in by_pos] == [1] * 15 + [2] * 15 + [3] * 15
    # each round a new schedule: the pairs' order differs between visits
    assert [p for p, v in by_pos if v == 1] != [p for p, v in by_pos if v == 2]


def _all_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int, tool: str,
               budget: str = "") -> Path:
    monkeypatch.setattr(pairs_mod, "partition_nodes",
                        lambda partition, env=None: [f"c{i:03d}" for i in range(n)])
    campaign = tmp_path / "allpairs.yaml"
    campaign.write_text(
        "name: allpairs\nmpi: openmpi\ntransports: [tcp]\nplacement: inter-node\n"
        "repetitions: 2\nseed: 3\nlauncher: srun --mpi=pmix\n"
        "slurm: {time: '00:30:00', throttle: 32}\n"
        f"pairs: {{all-pairs: true{budget}}}\n"
        f"tools:\n  - tool: probe\n{tool}")
    return campaign


def test_an_all_pairs_plan_is_round_by_round(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    campaign = _all_pairs(tmp_path, monkeypatch, 8, "    samples: 100\n")
    manifest = json.loads(plan_campaign(campaign, tmp_path / "out").read_text())
    jobs = manifest["jobs"]
    assert len(jobs) == 28 * 2 and manifest["campaign"]["order"] == "rounds"
    assert [j["repetition"] for j in jobs] == [1] * 28 + [2] * 28
    # consecutive jobs of a round of 4 disjoint pairs share no node
    for start in range(0, 56, 4):
        nodes = [n for j in jobs[start:start + 4] for n in j["host_pair"]]
        assert len(set(nodes)) == 8, start


def test_a_budget_keeps_64_nodes_all_pairs_in_its_time(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    budget = ', budget: {time: "04:00:00", latency: 20us, bandwidth: 1Gbps, startup: 5s}'
    campaign = _all_pairs(tmp_path, monkeypatch, 64,
                          "    sizes: cluster:4M\n    samples: auto\n    warmup: 10\n", budget)
    manifest = json.loads(plan_campaign(campaign, tmp_path / "out").read_text())
    plan = manifest["campaign"]["budget"]
    assert plan["jobs"] == 2016 * 2 and plan["concurrent"] == 32
    assert plan["estimate_s"] <= 4 * 3600 and plan["samples_per_size"] >= 10
    command = manifest["jobs"][0]["command"]
    assert command[command.index("--samples") + 1] == str(plan["samples_per_size"])
    assert command[command.index("--sizes") + 1] == \
        "list:" + ",".join(map(str, cluster_sizes(4 << 20)))
    # a fixed count that does not fit is refused at the budget's line
    too_many = _all_pairs(tmp_path, monkeypatch, 64, "    sizes: cluster:4M\n    samples: 100000\n",
                          budget)
    with pytest.raises(CampaignError, match="over the budget of 4:00:00") as err:
        plan_campaign(too_many, tmp_path / "out2")
    assert "allpairs.yaml:" in err.value.paragraph() and "samples: auto" in err.value.paragraph()
    assert not (tmp_path / "out2").exists()  # nothing half planned
    # auto without a budget
    no_budget = _all_pairs(tmp_path, monkeypatch, 8, "    samples: auto\n")
    with pytest.raises(CampaignError, match="samples: auto needs a budget"):
        plan_campaign(no_budget, tmp_path / "out3")
    bad = _all_pairs(tmp_path, monkeypatch, 8, "", ", budget: {time: '01:00:00', bandwidth: fast}")
    with pytest.raises(CampaignError, match="not a positive amount"):
        plan_campaign(bad, tmp_path / "out4")


def test_a_second_stage_share_bounds_the_first_and_sizes_the_second(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kit.measure.campaign.pairplan import second_stage_pairs

    base = ', budget: {time: "04:00:00", latency: 20us, bandwidth: 1Gbps, startup: 5s'
    tool = "    sizes: cluster:4M\n    samples: auto\n    warmup: 10\n"
    one = json.loads(plan_campaign(_all_pairs(tmp_path, monkeypatch, 16, tool, base + "}"),
                                   tmp_path / "one").read_text())["campaign"]["budget"]
    two = json.loads(plan_campaign(
        _all_pairs(tmp_path, monkeypatch, 16, tool,
                   base + ", second-stage: {share: 0.4, visits: 16}}"),
        tmp_path / "two").read_text())["campaign"]["budget"]
    # the first stage gets 60 % of the time, the second holds 0.4 / 0.6 of its jobs
    assert two["estimate_s"] <= 0.6 * 4 * 3600 < one["estimate_s"]
    assert two["second_stage"] == {"share": 0.4, "visits": 16,
                                   "pairs": second_stage_pairs(240, 0.4, 16)}
    # 120 pairs x 2 visits: the second stage's 0.4 / 0.6 of that is 10 pairs x 16 visits
    assert second_stage_pairs(240, 0.4, 16) == 10 and second_stage_pairs(4032, 0.4, 16) == 168
    # what the second stage may measure fits in its share: its jobs cost the first's
    assert 10 * 16 * two["job_s"] / two["concurrent"] <= 0.4 * 4 * 3600
    bad = _all_pairs(tmp_path, monkeypatch, 8, tool, base + ", second-stage: {share: 1.5}}")
    with pytest.raises(CampaignError, match="between 0 and 1") as err:
        plan_campaign(bad, tmp_path / "out5")
    assert "allpairs.yaml:" in err.value.paragraph() and "share" in err.value.paragraph()
