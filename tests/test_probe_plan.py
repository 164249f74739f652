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

from kit.errors import UserError
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
