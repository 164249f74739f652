"""A two-stage cluster verdict: measure more only where the first stage left it undecided.

A link's noise level from two visits of a few hundred samples has a standard error near half
of a 10 % threshold (issue 58's benchmark): a fixed design finds a 20 % noisier link with
power ~0.1, and measuring every one of 2,016 pairs 8x longer to fix that spends the budget on
pairs whose verdict is already plain. The second stage re-measures only the links whose
first-stage interval still reaches the threshold and whose test is not already beyond
doubt, most suspicious first, as many as the budget's second share holds
(:func:`kit.measure.campaign.pairplan.second_stage_pairs`).

**Why the false-discovery rate still holds.** The first stage chose the re-measured links for
looking slow, so its estimate of them is biased toward slow; a verdict on all their samples
pooled would flag more nulls than the stated rate. Each link's final p-value is instead

    p = min(p1 / PI, C(p1, p2) / (1 - PI))

where ``p1`` is its first-stage test, ``p2`` the test of its second-stage samples alone and
``C`` the inverse-normal combination ``1 - Phi(w1 z1 + w2 z2)`` with weights fixed by the
design before any data (``w1^2 = V1 / (V1 + V2)``, the visits' shares), ``C = 1`` for a link
not re-measured. Under a link's null ``p1`` is uniform, and ``p2`` is uniform *given* the
first stage (fresh samples; how many and whether at all depends only on the first stage),
so ``C`` is uniform whatever rule chose the link (Bauer & Koehne's adaptive combination
test), and the Bonferroni split over the two routes makes ``p`` valid: ``P(p <= t) <= PI t
+ (1 - PI) t``. A node is never re-measured as such (every pair it is in already measures
it), so its p-value is its first stage's. Benjamini-Hochberg over all final p-values then
controls the false-discovery rate as the single-stage verdict does (:mod:`kit.analyses.
slowlinks`; the same positive-dependence standing between link tests that share a node).
``PI`` is small because a link whose first stage alone is decisive clears ``p1 / PI``
easily, and the second route then loses little (its cut moves from ``t`` to ``0.9 t``).

The second-stage p-value of a link comes from a cluster model where that link has only its
second-stage visits (:func:`second_view`): its population and node terms are estimated
from all pairs, a link's own first stage does not enter its ``p2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr, ndtri

from kit.analyses.slowlinks import Finding, Findings, Thresholds, benjamini_hochberg, find
from kit.core.errors import UserError
from kit.data.pairrows import PairRows, pair_label
from kit.figures.deviation import sentence
from kit.fit.clustermodel import ClusterModel

#: Share of each link's level spent on its first stage alone.
PI_FIRST = 0.1
#: The interval a link must still reach the threshold with to be worth re-measuring (two-
#: sided 95 %: its upper end on the slow side).
Z_REACH = 1.959963984540054


@dataclass(frozen=True)
class StageDesign:
    """Visits of every pair in the first stage, of a re-measured pair in the second, and
    the most pairs the second stage may measure (the budget's)."""

    first_visits: int
    second_visits: int
    capacity: int
    first_share: float = PI_FIRST

    @property
    def weights(self) -> tuple[float, float]:
        """Inverse-normal weights, fixed by the design: each stage's share of the visits."""
        total = self.first_visits + self.second_visits
        return math.sqrt(self.first_visits / total), math.sqrt(self.second_visits / total)


def sure_cut(findings: Findings, design: StageDesign) -> float:
    """A first-stage p-value at or below which a test is flagged whatever the others do
    (Bonferroni at ``PI`` of the level: below every Benjamini-Hochberg cut)."""
    m = sum(math.isfinite(f.p) for f in findings.tests)
    return design.first_share * findings.fdr / max(m, 1)


def undecided(findings: Findings, design: StageDesign) -> list[int]:
    """Pair indices to re-measure, most suspicious first, at most ``design.capacity``.

    A link is undecided in a figure when its first-stage 95 % interval still reaches the
    threshold on the slow side and its p-value is not below :func:`sure_cut`; a pair's
    urgency is its smallest such p-value over the three figures.
    """
    sure = sure_cut(findings, design)
    reach = float(ndtr(Z_REACH))  # p1 below this: the interval's slow end reaches thr
    best: dict[int, float] = {}
    for f in findings.tests:
        if f.kind != "link" or not math.isfinite(f.p):
            continue
        if sure < f.p <= reach:
            best[f.index] = min(best.get(f.index, 1.0), f.p)
    order = sorted(best, key=lambda k: (best[k], k))
    return order[:max(design.capacity, 0)]


def two_route_p(p1: NDArray, p2: NDArray, design: StageDesign) -> NDArray[np.float64]:
    """Each test's final p-value ``min(p1 / PI, C(p1, p2) / (1 - PI))`` (module docstring);
    a NaN ``p2`` (not measured again) leaves the first route only."""
    w1, w2 = design.weights
    pi = design.first_share
    p1 = np.asarray(p1, dtype=float)
    p2 = np.asarray(p2, dtype=float)
    z1 = ndtri(1.0 - np.clip(np.nan_to_num(p1, nan=1.0), 1e-300, 1.0 - 1e-16))
    z2 = ndtri(1.0 - np.clip(np.nan_to_num(p2, nan=1.0), 1e-300, 1.0 - 1e-16))
    c = np.where(np.isfinite(p2), ndtr(-(w1 * z1 + w2 * z2)), np.inf)
    return np.minimum(np.minimum(p1 / pi, 1.0), c / (1.0 - pi))


def second_view(first: PairRows, second: PairRows, chosen: set[tuple[str, str]]) -> PairRows:
    """Rows for the second-stage tests: the chosen pairs by their second-stage visits only,
    every other pair by its first stage (they carry the population and node terms)."""
    keep_first = np.array([p not in chosen for p in first.pairs], dtype=bool)
    keep_second = np.array([p in chosen for p in second.pairs], dtype=bool)
    return PairRows.joined([first.select(keep_first), second.select(keep_second)])


def combine(first: Findings, second: Findings, chosen: set[str],
            design: StageDesign) -> Findings:
    """The final verdict: every test's two-route p-value (module docstring), then
    Benjamini-Hochberg over all of them at the first stage's level.

    ``chosen`` are the re-measured links' labels; their estimate and interval are the second
    stage's (its samples only: unbiased by the choice), every other test keeps its first
    stage's. The p-values, not the intervals, decide.
    """
    w1, w2 = design.weights
    pi = design.first_share
    later = {(f.name, f.figure): f for f in second.tests if f.kind == "link"}
    finals: list[Finding] = []
    p2 = np.full(len(first.tests), np.nan)
    for i, f in enumerate(first.tests):
        g = later.get((f.name, f.figure)) if f.kind == "link" and f.name in chosen else None
        if g is not None and math.isfinite(g.p):
            p2[i] = g.p
            where = first.where[f.figure] + " (second stage)"
            f = replace(f, estimate=g.estimate, lo=g.lo, hi=g.hi, se=g.se,
                        sentence=sentence(f.kind, f.name, f.figure, g.estimate, g.lo, g.hi,
                                          where))
        finals.append(f)
    p1 = np.array([f.p for f in first.tests])
    link = np.array([f.kind == "link" for f in first.tests])
    # a node is never measured again: its first-stage p-value stands
    p = np.where(link, two_route_p(p1, p2, design), p1)
    finals = [replace(f, p=float(pv)) for f, pv in zip(finals, p, strict=True)]
    reject, q = benjamini_hochberg(np.array([f.p for f in finals]), first.fdr)
    tests = [replace(f, q=float(qv), flagged=bool(r))
             for f, qv, r in zip(finals, q, reject, strict=True)]
    note = (f"two stages: {len(chosen)} undecided links measured again "
            f"({design.second_visits} visits each after {design.first_visits}); a link's "
            f"p-value is min(p1 / {pi:g}, C / {1 - pi:g}), C the inverse-normal combination "
            f"of its two stages with weights {w1:.3f}, {w2:.3f}")
    return Findings(tests, first.thresholds, first.fdr, first.where, first.populations,
                    [*first.notes, note])



def visits_per_pair(rows: PairRows) -> int:
    """The visits most pairs of ``rows`` have (a campaign's repetitions, when complete)."""
    counts = np.bincount(rows.run_pair, minlength=len(rows.pairs))
    return int(np.median(counts)) if len(counts) else 0


def verdict(first_rows: PairRows, second_rows: PairRows, thresholds: Thresholds,
            fdr: float, seed: int = 0) -> tuple[ClusterModel, Findings]:
    """The final verdict of a two-stage campaign: the first stage's model (what the cluster
    view shows) and :func:`combine`'s findings; the re-measured links are the pairs of
    ``second_rows``. The combination's weights are the stages' visits per pair as measured
    (the design's ``repetitions`` of each stage when every job ran)."""
    model = ClusterModel(random_state=seed).fit(first_rows)
    first = find(model, thresholds, fdr)
    chosen = set(second_rows.pairs)
    unknown = chosen - set(model.pairs_)
    if unknown:
        raise UserError(f"the second stage measured {len(unknown)} pair(s) the first did not "
                        f"(e.g. {pair_label(sorted(unknown)[0])})", where="option --second-stage",
                        hint="give the dataset of the second stage of this campaign (pairs "
                        "listed by pt2pt cluster --undecided)")
    design = StageDesign(visits_per_pair(first_rows), visits_per_pair(second_rows), len(chosen))
    second_model = ClusterModel(random_state=seed).fit(second_view(first_rows, second_rows,
                                                                   chosen))
    return model, combine(first, find(second_model, thresholds, fdr),
                          {pair_label(p) for p in chosen}, design)
