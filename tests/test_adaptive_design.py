"""The adaptive design (kit.fit.adaptive, issue 60 item 2) on synthetic truth with known
breaks, and its campaign settings (``design:`` in a campaign file)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from kit.core.errors import CampaignError
from kit.fit import synth
from kit.fit.adaptive import (
    Budget,
    Design,
    Precision,
    Target,
    accumulate,
    decades,
    next_sizes,
    run_design,
)
from kit.fit.adaptive_campaign import design_of, size_range
from kit.measure.campaign.plan import plan_campaign
from kit.measure.campaign.schema import load_campaign

TRUTH = synth.Truth([
    synth.TrueRegime(1, "constant", {"a": 11e-6}, synth.TrueNoise("lognormal", 0.25)),
    synth.TrueRegime(128, "linear", {"a": 20e-6, "b": 1e-9}, synth.TrueNoise("lognormal", 0.3)),
    synth.TrueRegime(65537, "linear", {"a": 60e-6, "b": 1.0 / 1.1e9},
                     synth.TrueNoise("gamma", 0.3)),
])


def _measure(seed: int) -> object:
    def measure(k: int, sizes: np.ndarray, reps: int) -> tuple[np.ndarray, np.ndarray]:
        s = np.repeat(sizes.astype(float), reps)
        return s, synth.generate(TRUTH, s, np.random.default_rng([seed, k]))
    return accumulate(measure)  # type: ignore[arg-type]


def _design(**kw: object) -> Design:
    base: dict[str, object] = {"lo": 1, "hi": 2**22, "target": Target(0.02, 0.10),
                               "budget": Budget(100_000, 12), "round_samples": 3000}
    base.update(kw)
    return Design(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def reached() -> tuple[dict, np.ndarray, np.ndarray]:
    design = _design()
    return (*run_design(_measure(3), design),)  # type: ignore[return-value]


def test_stops_at_the_target_and_keeps_every_round(reached) -> None:
    record, size, _ = reached
    rounds = record["rounds"]
    assert record["stopped"] == "target" and record["reached"] and rounds[-1]["met"]
    assert "precision target was reached" in record["reason"]
    assert not any(r["met"] for r in rounds[:-1])
    # every round's samples are in the series: the rounds add up to it
    assert sum(r["samples"] for r in rounds) == len(size) == record["total_samples"]
    for r in rounds:
        assert r["samples"] == len(r["sizes"]) * r["repetitions"]
        assert min(r["sizes"]) >= 1 and max(r["sizes"]) <= 2**22
    last = rounds[-1]
    assert all(d["width"] <= 0.02 for d in last["decades"])
    assert all(b["width"] <= 0.10 for b in last["breaks"])
    # the breaks it found are the truth's
    assert len(last["breakpoints"]) == 2
    assert last["breakpoints"][0] == pytest.approx(128, rel=0.1)
    assert last["breakpoints"][1] == pytest.approx(65537, rel=0.1)


def test_later_rounds_go_where_the_previous_round_was_unsure(reached) -> None:
    """Every size of round k+1 lies in a decade or break interval round k left unmet."""
    rounds = reached[0]["rounds"]
    assert len(rounds) >= 2
    for before, after in itertools.pairwise(rounds):
        spans = [(d["lo"], d["hi"]) for d in before["decades"] if d["width"] > 0.02]
        spans += [(b["lo"], b["hi"]) for b in before["breaks"] if b["width"] > 0.10]
        sizes = np.array(after["sizes"], dtype=float)
        inside = np.zeros(len(sizes), dtype=bool)
        for a, b in spans:
            inside |= (sizes >= np.floor(a)) & (sizes <= np.ceil(b))
        assert inside.all()
        # and not everywhere: a decade met before gets nothing
        met = [(d["lo"], d["hi"]) for d in before["decades"] if d["width"] <= 0.02
               and not any(b["lo"] <= d["hi"] and b["hi"] >= d["lo"] for b in before["breaks"])]
        for a, b in met:
            assert not ((sizes > np.ceil(a)) & (sizes < np.floor(b))).any()


def test_fewer_samples_than_the_fixed_design_for_the_same_target(reached) -> None:
    """The fixed log-uniform design, in rounds of the same size, stopped by the same rule."""
    from kit.fit.adaptive import first_sizes, fit_round, precision

    design = _design()
    measure = _measure(3)
    n_fixed = 0
    for k in range(design.budget.rounds):
        sizes, reps = first_sizes(Design(**{**design.__dict__, "seed": 100 + k}))
        size, time = measure(k, sizes, reps)  # type: ignore[operator]
        n_fixed = len(size)
        if precision(fit_round(size, time, 1), size, time, design, k).met(design.target):
            break
    assert reached[0]["total_samples"] < n_fixed


def test_stops_at_the_budget_and_says_so() -> None:
    design = _design(target=Target(0.001, 0.001), budget=Budget(6000, 12), round_samples=3000)
    record, size, _ = run_design(_measure(5), design)
    assert record["stopped"] == "budget" and not record["reached"]
    assert "sample budget (6000) was spent" in record["reason"]
    assert len(size) <= 6000 and len(record["rounds"]) == 2


def test_stops_at_the_round_budget() -> None:
    design = _design(target=Target(0.001, None), budget=Budget(10**6, 1), round_samples=2000)
    record, _, _ = run_design(_measure(6), design)
    assert record["stopped"] == "rounds" and len(record["rounds"]) == 1


def test_next_round_shares_samples_by_need() -> None:
    """Two unmet decades: the wider gets about (w/t)² − 1 times its samples, the met none."""
    design = _design(target=Target(0.02, None), round_samples=3200, repetitions=4)
    prec = Precision(decades=[
        {"lo": 1.0, "hi": 10.0, "width": 0.01, "samples": 1000},
        {"lo": 10.0, "hi": 100.0, "width": 0.04, "samples": 1000},    # needs 3000
        {"lo": 100.0, "hi": 1000.0, "width": 0.08, "samples": 1000},  # needs 15000
    ], breaks=[])
    sizes, reps = next_sizes(prec, design, 1, 3200)
    assert reps == 4 and len(sizes) == 800
    assert (sizes >= 10).all() and (sizes <= 1000).all()
    share_wide = float(np.mean(sizes > 100))
    assert share_wide == pytest.approx(15 / 18, abs=0.05)
    again, _ = next_sizes(prec, design, 1, 3200)
    assert np.array_equal(sizes, again)  # seeded by (seed, round)
    other, _ = next_sizes(prec, design, 2, 3200)
    assert not np.array_equal(sizes, other)


def test_a_round_never_exceeds_the_probes_list() -> None:
    design = _design(target=Target(0.001, None), repetitions=1)
    prec = Precision(decades=[{"lo": 1.0, "hi": 4e6, "width": 1.0, "samples": 10}], breaks=[])
    sizes, reps = next_sizes(prec, design, 1, 100_000)
    assert len(sizes) <= 800 and len(sizes) * reps >= 99_000
    assert len("list:" + ",".join(map(str, sizes))) <= 8191


def test_decades_cover_the_range() -> None:
    assert decades(0, 4096) == [(1.0, 10.0), (10.0, 100.0), (100.0, 1000.0), (1000.0, 4096.0)]
    assert decades(64, 64) == [(64.0, 64.0)]


CAMPAIGN = """\
name: adaptive-test
mpi: openmpi
transports: [tcp]
placement: intra-node
seed: 4
tools:
  - tool: probe
    ops: [pingpong]
    sizes: loguniform:0:64K
{design}"""


def _campaign(tmp_path: Path, design: str, extra_op: bool = False) -> Path:
    text = CAMPAIGN.format(design=design)
    if extra_op:
        text = text.replace("[pingpong]", "[pingpong, send]")
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def _no_site(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))


def test_campaign_design_settings(tmp_path: Path) -> None:
    assert load_campaign(_campaign(tmp_path, "")).adaptive is None
    assert load_campaign(_campaign(tmp_path, "design: fixed\n")).adaptive is None
    spec = load_campaign(_campaign(tmp_path, "design: adaptive\n")).adaptive
    assert spec is not None and spec.median == 0.02
    camp = load_campaign(_campaign(
        tmp_path, "design:\n  adaptive: {median: 0.05, breaks: null, budget: 3000, "
        "round_samples: 1000, repetitions: 2}\n"))
    design = design_of(camp)
    assert (design.lo, design.hi) == (0, 65536) and design.target == Target(0.05, None)
    assert design.budget.samples == 3000 and design.repetitions == 2 and design.seed == 4
    assert size_range("list:5,1K,7") == (5, 1024)


@pytest.mark.parametrize(("design", "extra_op", "words"), [
    ("design: adaptive\n", True, "one series"),
    ("design: bold\n", False, "unknown design"),
    ("design:\n  adaptive: {median: 2}\n", False, "between 0 and 1"),
    ("design:\n  adaptive: {rounds: 0}\n", False, "integer from 1"),
    ("design:\n  adaptive: {speed: 1}\n", False, "unknown key 'speed'"),
    ("design:\n  adaptive: {round_samples: 2, repetitions: 4}\n", False, "cannot repeat"),
])
def test_bad_design_names_its_line(tmp_path: Path, design: str, extra_op: bool,
                                   words: str) -> None:
    with pytest.raises(CampaignError, match=words) as info:
        load_campaign(_campaign(tmp_path, design, extra_op))
    assert "c.yaml" in info.value.paragraph() and "line" in info.value.paragraph()


def test_plan_refuses_an_adaptive_campaign(tmp_path: Path) -> None:
    with pytest.raises(CampaignError, match="round by round") as info:
        plan_campaign(_campaign(tmp_path, "design: adaptive\n"), tmp_path / "out")
    assert "run-local" in info.value.paragraph()
    assert not (tmp_path / "out").exists()
