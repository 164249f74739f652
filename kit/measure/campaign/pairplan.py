"""Campaign design for many node pairs: the order pairs are visited in, and the budget.

**Order.** A campaign over every pair of a machine runs for hours; the machine drifts
(other jobs, temperature, a daemon waking up). If pair (n3, n9) were measured in the last
hour only, a slow last hour would read as a slow link. So each visit (``repetitions``) of
every pair is one *round* of the campaign, and within a round the pairs come in a random
order of *matchings*: sets of disjoint pairs (the circle method's 1-factorisation of the
complete graph, nodes shuffled per round), shuffled, and shuffled inside. Every pair's
visits are thus spread over the campaign's whole duration, each round spans all nodes, and
consecutive jobs of a Slurm array share no node, so a throttle up to half the nodes runs
them at once without two pairs on one node. The cluster model (``pt2pt cluster``) combines
a pair's visits with the between-visit variance, so what changes over time is not taken
for a pair's own.

**Budget.** ``budget: {time, latency, bandwidth, startup, concurrent}`` states the whole
campaign's Slurm time and the network it is planned for; with a probe entry's ``samples:
auto`` the plan computes how many times each size is measured per visit so that every
round fits, and refuses (naming the line) a fixed ``samples`` that does not. The estimate
of one job: ``startup + (warmup + samples x sizes) x mean round trip``, a round trip at size
s being ``2 (latency + s / bandwidth)``; jobs of a round run ``concurrent`` at a time (half
the nodes by default).

**Second stage.** ``budget: {..., second-stage: {share: S, visits: V}}`` keeps the share S of
the time for measuring more where the first stage left a verdict undecided: the first stage
(every pair, its visits) is sized from ``(1 - S) x time``, and the second stage measures at
most :attr:`BudgetPlan.second_pairs` pairs ``V`` visits each, jobs of the first stage's
shape, which is what ``S x time`` holds (:func:`second_stage_pairs`). Which pairs, and why
the verdict's false-discovery rate still holds, is :mod:`kit.analyses.twostage`'s. The
total is the budget's time whatever the first stage finds.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kit.core.errors import CampaignError
from kit.measure.campaign.schema import Budget


def matchings(nodes: Sequence[str], rng: random.Random) -> list[list[tuple[str, str]]]:
    """Every pair of ``nodes`` exactly once, as rounds of disjoint pairs (circle method).

    With an odd count a phantom node sits out one node per round. Nodes are shuffled first
    and the rounds and the pairs in each are shuffled, so two calls with different states
    of ``rng`` give different schedules; pairs come sorted within themselves.
    """
    people: list[str | None] = list(nodes)
    rng.shuffle(people)
    if len(people) % 2:
        people.append(None)
    n = len(people)
    rounds = []
    for r in range(n - 1):
        ring = [people[0], *people[1:][r:], *people[1:][:r]]
        pairs = []
        for i in range(n // 2):
            a, b = ring[i], ring[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b) if a < b else (b, a))
        rng.shuffle(pairs)
        rounds.append(pairs)
    rng.shuffle(rounds)
    return rounds


def visit_order(pairs: Sequence[tuple[str, str]], visits: int, seed: int
                ) -> dict[tuple[tuple[str, str], int], int]:
    """Position of each (pair, visit) in the campaign: round by round (visit 1 of every
    pair, then visit 2, ...), each round a fresh random schedule of disjoint matchings of
    the measured pairs (a subset of all pairs keeps the schedule's order)."""
    wanted = {tuple(sorted(p)) for p in pairs}
    nodes = sorted({n for p in wanted for n in p})
    rng = random.Random(seed)
    order: dict[tuple[tuple[str, str], int], int] = {}
    for visit in range(1, visits + 1):
        for matching in matchings(nodes, rng):
            for pair in matching:
                if pair in wanted:
                    order[(pair, visit)] = len(order)
    return order


@dataclass(frozen=True)
class BudgetPlan:
    """What a budget gives: samples per size and visit, the estimate, the rule."""

    samples: int
    sizes: int
    job_s: float
    total_s: float
    budget_s: int
    concurrent: int
    jobs: int
    #: the second stage: share of the time, visits per pair, most pairs it measures
    second_share: float = 0.0
    second_visits: int = 0
    second_pairs: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"samples_per_size": self.samples, "sizes": self.sizes,
                               "job_s": round(self.job_s, 3),
                               "estimate_s": round(self.total_s, 1),
                               "budget_s": self.budget_s, "concurrent": self.concurrent,
                               "jobs": self.jobs}
        if self.second_share:
            out["second_stage"] = {"share": self.second_share, "visits": self.second_visits,
                                   "pairs": self.second_pairs}
        return out

    def describe(self) -> str:
        text = (f"budget {_hms(self.budget_s)}: {self.jobs} jobs, {self.concurrent} at a time, "
                f"{self.samples} samples of each of {self.sizes} sizes per visit, "
                f"~{self.job_s:.0f} s a job: estimated {_hms(self.total_s)}")
        if self.second_share:
            text += (f"; then a second stage of {self.second_share:.0%} of the time: at most "
                     f"{self.second_pairs} undecided pairs, {self.second_visits} more visits "
                     "each")
        return text


def second_stage_pairs(first_jobs: int, share: float, visits: int) -> int:
    """Most pairs a second stage of ``share`` of the whole budget measures ``visits`` more
    times each, its jobs the shape of the first stage's ``first_jobs`` (which take the
    other ``1 - share``): the one place the split is computed."""
    if not 0 < share < 1 or visits < 1:
        return 0
    return math.floor(first_jobs * share / (1.0 - share) / visits + 1e-9)


def _hms(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def round_trip_s(sizes: Sequence[int], budget: Budget) -> float:
    """Mean round trip over ``sizes`` on the budget's network."""
    return sum(2 * (budget.latency_s + s / budget.bandwidth_Bps) for s in sizes) / len(sizes)


def plan_budget(budget: Budget, *, n_nodes: int, n_jobs: int, sizes: Sequence[int],
                warmup: int, samples: int, where: str) -> BudgetPlan:
    """Samples per size and visit that fit ``budget`` (``samples`` 0 = as many as fit), or
    the check that a given count fits; CampaignError naming ``where`` otherwise."""
    concurrent = budget.concurrent or max(1, n_nodes // 2)
    rtt = round_trip_s(sizes, budget)
    first_s = budget.time_s * (1.0 - budget.second_share)  # what the first stage may take
    slots = first_s * concurrent / max(n_jobs, 1)  # seconds one job may take
    second: dict[str, Any] = {}
    if budget.second_share:
        second = {"second_share": budget.second_share, "second_visits": budget.second_visits,
                  "second_pairs": second_stage_pairs(n_jobs, budget.second_share,
                                                     budget.second_visits)}
    if samples:
        job = budget.startup_s + (warmup + samples * len(sizes)) * rtt
        plan = BudgetPlan(samples, len(sizes), job, job * n_jobs / concurrent,
                          budget.time_s, concurrent, n_jobs, **second)
        if job > slots:
            fit = math.floor((slots - budget.startup_s) / rtt - warmup) // len(sizes)
            raise CampaignError(
                f"{n_jobs} jobs of {samples} x {len(sizes)} sizes need about "
                f"{_hms(plan.total_s)}, over the budget of {_hms(first_s)}"
                + (" (the first stage's share)" if budget.second_share else ""),
                where=where, hint=f"write samples: auto (or at most {max(fit, 0)}), a longer "
                "budget time, or fewer pairs")
        return plan
    fit = math.floor(((slots - budget.startup_s) / rtt - warmup) / len(sizes))
    if fit < 1:
        raise CampaignError(
            f"the budget of {_hms(budget.time_s)} leaves {slots:.1f} s to each of {n_jobs} "
            f"jobs ({concurrent} at a time), not enough for one sample of each size after "
            f"{budget.startup_s:.0f} s of start-up", where=where,
            hint="give a longer budget time, more concurrent pairs, or fewer pairs")
    job = budget.startup_s + (warmup + fit * len(sizes)) * rtt
    return BudgetPlan(fit, len(sizes), job, job * n_jobs / concurrent, budget.time_s,
                      concurrent, n_jobs, **second)
