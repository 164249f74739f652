"""Does the cluster model predict pairs it has not seen? Hold pairs out and count.

The model's claim about an unmeasured pair is a distribution: the population shifted by a
draw of the between-pair spread (:meth:`kit.fit.clustermodel.ClusterModel.cdf` with no
pair), or, for a pair between two measured nodes, shifted by their node effects with the
between-link spread. Held-out check: fit on a random share of the pairs, then for every
sample of each held-out pair read its predictive CDF value (the PIT); a calibrated model
puts 90 % of them inside [0.05, 0.95] (its p05..p95), and its PIT values are uniform.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kit.data.pairrows import PairRows, pair_label
from kit.fit.clustermodel import ClusterModel

NOMINAL = 0.90


def held_out(rows: PairRows, fraction: float = 0.2, seed: int = 0, *,
             max_scored: int = 50_000, **params: Any) -> dict[str, Any]:
    """Fit on ``1 - fraction`` of the pairs, score the held-out pairs' samples.

    Returns ``coverage`` (share of held-out samples inside the population's predictive
    p05..p95: an unseen pair between unseen nodes), ``coverage_nodes`` (the same with the
    pair's two measured node effects: an unseen link between seen nodes), ``nominal``,
    per-pair coverage quantiles, the held-out pairs and counts. Above ``max_scored``
    held-out samples a seeded uniform subsample is scored (each costs a few hundred CDF
    evaluations).
    """
    rng = np.random.default_rng(seed)
    P = len(rows.pairs)
    n_out = max(1, round(fraction * P))
    out = np.zeros(P, dtype=bool)
    out[rng.choice(P, n_out, replace=False)] = True
    model = ClusterModel(random_state=seed, **params).fit(rows.select(~out))
    test = rows.select(out)
    if len(test) > max_scored:
        keep = np.zeros(len(test), dtype=bool)
        keep[rng.choice(len(test), max_scored, replace=False)] = True
        test = PairRows(test.series, test.nodes, test.pairs, test.host_pairs, test.runs,
                        test.run_pair, test.run_start, test.pair[keep], test.run[keep],
                        test.size[keep], test.time[keep], test.seq[keep], test.dataset,
                        test.notes)
    u_pop = model.cdf(test.size, test.time)
    u_nodes = np.empty(len(test))
    per_pair = []
    for k, pair in enumerate(test.pairs):
        sel = test.pair == k
        u_nodes[sel] = model.cdf(test.size[sel], test.time[sel], pair)
        inside = (u_pop[sel] >= 0.05) & (u_pop[sel] <= 0.95)
        per_pair.append(float(inside.mean()))
    inside_pop = (u_pop >= 0.05) & (u_pop <= 0.95)
    inside_nodes = (u_nodes >= 0.05) & (u_nodes <= 0.95)
    return {"nominal": NOMINAL, "coverage": float(inside_pop.mean()),
            "coverage_nodes": float(inside_nodes.mean()),
            "below_p05": float((u_pop < 0.05).mean()), "above_p95": float((u_pop > 0.95).mean()),
            "per_pair": {"min": float(np.min(per_pair)), "median": float(np.median(per_pair)),
                         "max": float(np.max(per_pair))},
            "held_out_pairs": [pair_label(p) for p in test.pairs],
            "n_pairs_fitted": int(P - n_out), "n_scored": len(test)}
