"""The Python twin of the probe's plan (kit.probe.plan): determinism and the documented rules.

The MPI tests in test_probe.py check that the C probe produces exactly this plan; these tests
pin the plan's own properties without MPI, so a change in either side shows up in one place.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.core.errors import UserError
from kit.probe.plan import (
    SplitMix64,
    build_plan,
    draw_loguniform,
    grid_sizes,
    parse_bytes,
    plan_hash,
)


def test_splitmix64_matches_the_published_reference_values() -> None:
    # Published reference outputs for seed 1234567
    # (Rosetta Code, "Pseudo-random numbers/Splitmix64").
    rng = SplitMix64(1234567)
    assert [rng.next() for _ in range(3)] == [
        6457827717110365317, 3203168211198807973, 9817491932198370423]


def test_parse_bytes_suffixes_are_powers_of_1024() -> None:
    assert [parse_bytes(x) for x in ("0", "512", "64K", "4M", "1G", "2k")] == [
        0, 512, 65536, 4 << 20, 1 << 30, 2048]
    with pytest.raises(UserError, match="--sizes"):
        parse_bytes("4MB")


@given(lo=st.integers(0, 1 << 20), span=st.integers(0, 1 << 30), seed=st.integers(0, 2**64 - 1))
@settings(max_examples=200, deadline=None)
def test_loguniform_draws_stay_in_bounds(lo: int, span: int, seed: int) -> None:
    rng = SplitMix64(seed)
    hi = lo + span
    assert all(lo <= draw_loguniform(rng, lo, hi) <= hi for _ in range(20))


def test_grid_starts_at_zero_and_rounds_half_up() -> None:
    assert grid_sizes(0, 1024, 2.0) == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert grid_sizes(10, 40, 1.5) == [10, 15, 23, 34]


def test_plan_counts_warmup_first_and_every_list_size_per_op() -> None:
    plan = build_plan(["pingpong", "send"], "list:0,8,1K", samples=3, seed=5, warmup=4)
    assert len(plan) == 4 + 2 * 3 * 3
    assert [e.warmup for e in plan[:4]] == [True] * 4 and not any(e.warmup for e in plan[4:])
    assert [e.op for e in plan[:4]] == ["pingpong", "send", "pingpong", "send"]
    measured = sorted((e.op, e.size) for e in plan[4:])
    assert measured == sorted((op, s) for op in ("pingpong", "send") for s in (0, 8, 1024)
                              for _ in range(3))


def test_same_seed_same_plan_other_seed_other_order() -> None:
    a = build_plan(["pingpong", "recv"], "loguniform:0:4M", samples=200, seed=42, warmup=5)
    b = build_plan(["pingpong", "recv"], "loguniform:0:4M", samples=200, seed=42, warmup=5)
    c = build_plan(["pingpong", "recv"], "loguniform:0:4M", samples=200, seed=43, warmup=5)
    assert a == b and plan_hash(a) == plan_hash(b)
    assert [e.size for e in a] != [e.size for e in c] and plan_hash(a) != plan_hash(c)


def test_warmup_count_does_not_change_the_measured_sequence() -> None:
    a = build_plan(["pingpong"], "loguniform:1:1M", samples=100, seed=9, warmup=0)
    b = build_plan(["pingpong"], "loguniform:1:1M", samples=100, seed=9, warmup=17)
    assert a == b[17:]


def test_ops_are_interleaved_not_blocked() -> None:
    plan = build_plan(["pingpong", "send", "stream"], "list:8", samples=100, seed=3, warmup=0)
    ops = [e.op for e in plan]
    switches = sum(x != y for x, y in itertools.pairwise(ops))
    # Blocked order would switch twice; a shuffle of 3x100 switches about 200 times.
    assert switches > 100


def test_log_of_size_plus_one_spreads_over_the_whole_range() -> None:
    plan = build_plan(["pingpong"], "loguniform:0:1M", samples=4000, seed=11, warmup=0)
    logs = [math.log(e.size + 1) for e in plan]
    top = math.log(2**20 + 2)
    # Each decile of the log range holds roughly a tenth of the draws.
    counts = [sum(k * top / 10 <= x < (k + 1) * top / 10 for x in logs) for k in range(10)]
    assert all(250 < c < 550 for c in counts), counts


def test_unknown_size_kind_is_a_user_error() -> None:
    with pytest.raises(UserError, match="loguniform:MIN:MAX"):
        build_plan(["pingpong"], "uniform:1:10", samples=1, seed=1, warmup=0)


def test_default_order_and_no_repeats_keep_the_plan_of_older_probes() -> None:
    a = build_plan(["pingpong", "send"], "loguniform:0:4M", samples=50, seed=4, warmup=3)
    b = build_plan(["pingpong", "send"], "loguniform:0:4M", samples=50, seed=4, warmup=3,
                   order="shuffled", repeat_fraction=0.0, repeat_count=5)
    assert a == b and plan_hash(a) == plan_hash(b)


def test_blocked_order_is_the_shuffled_multiset_per_op_sizes_ascending() -> None:
    kw = {"samples": 30, "seed": 8, "warmup": 4}
    shuffled = build_plan(["send", "pingpong"], "loguniform:0:1M", **kw)
    blocked = build_plan(["send", "pingpong"], "loguniform:0:1M", order="blocked", **kw)
    assert blocked[:4] == shuffled[:4]  # warm-ups untouched
    assert sorted(blocked[4:], key=repr) == sorted(shuffled[4:], key=repr)
    body = blocked[4:]
    assert [e.op for e in body] == ["send"] * 30 + ["pingpong"] * 30  # ops in --op order
    for op in ("send", "pingpong"):
        sizes = [e.size for e in body if e.op == op]
        assert sizes == sorted(sizes)
    assert plan_hash(blocked) != plan_hash(shuffled)
    with pytest.raises(UserError, match="--order"):
        build_plan(["send"], "list:8", order="random", **kw)


def test_blocked_list_sizes_repeat_back_to_back() -> None:
    plan = build_plan(["pingpong"], "list:64K,8,1K", samples=3, seed=1, warmup=0,
                      order="blocked")
    assert [e.size for e in plan] == [8] * 3 + [1024] * 3 + [65536] * 3


@pytest.mark.parametrize("fraction,count", [(0.1, 1), (0.25, 3), (1.0, 1)])
def test_repeat_fraction_remeasures_a_random_subset_of_sizes(fraction: float,
                                                             count: int) -> None:
    base = build_plan(["pingpong"], "loguniform:0:4M", samples=400, seed=21, warmup=2)
    plan = build_plan(["pingpong"], "loguniform:0:4M", samples=400, seed=21, warmup=2,
                      repeat_fraction=fraction, repeat_count=count)
    chosen = math.floor(fraction * 400 + 0.5)
    assert len(plan) == len(base) + chosen * count
    assert plan[:2] == base[:2]
    measured = [e.size for e in plan[2:]]
    original = [e.size for e in base[2:]]
    extra = list(measured)
    for s in original:
        extra.remove(s)  # the original draws are all still there
    # every extra entry is a copy of a planned size, each chosen size `count` more times
    assert set(extra) <= set(original)
    assert all(extra.count(s) % count == 0 for s in set(extra))
    # the repeats are interleaved, not appended: some sit in the first half of the plan
    counts = {s: measured.count(s) for s in measured}
    first_half = measured[: len(measured) // 2]
    assert sum(counts[s] > original.count(s) for s in first_half) > chosen * 0.2


def test_repeats_are_the_same_for_the_same_seed_and_differ_for_another() -> None:
    kw = {"samples": 200, "warmup": 0, "repeat_fraction": 0.1}
    a = build_plan(["pingpong"], "loguniform:0:4M", seed=3, **kw)
    b = build_plan(["pingpong"], "loguniform:0:4M", seed=3, **kw)
    c = build_plan(["pingpong"], "loguniform:0:4M", seed=4, **kw)
    assert plan_hash(a) == plan_hash(b) != plan_hash(c)
