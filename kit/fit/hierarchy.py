"""A figure measured on many node pairs, split into node effects and link effects.

The per-size layer (:mod:`kit.model.persize`) shrinks each size's shift toward its regime by
empirical Bayes; this is the same one level up, with the machine's structure added: a pair's
figure ``y_p`` (its latency, bandwidth or noise deviation from the population) is

    y_p = a_i + a_j + e_p + sampling error (variance v_p)

for the pair's two nodes i and j. A node effect ``a`` is what the node adds to every pair
it is in (a slow NIC, a busy host); a link effect ``e`` is what is left to the pair itself
(a bad cable, a congested switch port), with between-link spread ``tau²``. Why nodes at all:
a node whose pairs are all slow is one fault, and must be reported as that node, not as
n-1 slow links.

Estimation, robust because the interesting pairs are the outliers:

* the visits of a pair are combined first (:func:`combine_visits`), with a between-visit
  variance pooled over all pairs (run-to-run conditions: drift, the ranks' cores), so that a
  pair measured once is not more certain than its run;
* node effects by iteratively reweighted least squares on the residuals standardised by
  ``sqrt(v + tau²)``, Huber weights to a good start and then Tukey's biweight (a slow link
  has no weight in its nodes' effects, so it cannot move them), ``tau²`` by
  the robust method of moments the per-size layer uses
  (:func:`kit.model.segmentation.robust_tau2`), node effects centred on their median (the
  typical node adds nothing); their standard errors by the sandwich, so they include the
  between-link spread;
* a link's own effect is its residual; its seen-pair value is shrunk by how much the pair
  measured with a two-group prior (Efron's): the bulk N(0, tau²), and a wide outlier group
  whose share is estimated, so that a pair far outside the bulk keeps its own value
  (a normal prior would pull a clearly slow link back toward the others).

Nodes are estimated only when each has at least :data:`MIN_NODE_PAIRS` measured pairs and
there are at least 4 nodes (with 3 nodes, three pairs and three node effects leave nothing
to tell a link from a node); otherwise every pair is a link and a note says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from kit.model.segmentation import robust_tau2

#: Fewest measured pairs of a node for its effect to be estimated.
MIN_NODE_PAIRS = 3
#: Huber's tuning constant on the standardised residuals, then Tukey's biweight's (a
#: pair beyond it has no weight at all in its nodes' effects).
HUBER_K = 2.0
BIWEIGHT_C = 4.685
_IRLS_STEPS = 30
#: Prior degrees of freedom of the pooled visit variance against a pair's own visits' scatter.
PRIOR_DF = 4.0


@dataclass(frozen=True)
class Visits:
    """Per-pair values from their visits: ``y``, variance ``v``, visits used, and the
    between-visit variance ``sigma2`` (with how it was estimated)."""

    y: NDArray[np.float64]
    v: NDArray[np.float64]
    n_visits: NDArray[np.int64]
    sigma2: float
    source: str


def between_visits(y: NDArray, w: NDArray, group: NDArray, n_groups: int) -> float | None:
    """Variance between the units of one group beyond their sampling variances ``w``.

    Pooled over the groups with at least two finite units: each unit's deviation from its
    group's mean, inflated by ``sqrt(V / (V - 1))``, through the robust method of moments.
    None when no group has two units.
    """
    ok = np.isfinite(y) & np.isfinite(w)
    counts = np.bincount(group[ok], minlength=n_groups)
    use = ok & (counts[group] >= 2)
    if use.sum() < 3:
        return None
    sums = np.bincount(group[use], weights=y[use], minlength=n_groups)
    mean = sums / np.maximum(counts, 1)
    V = counts[group[use]].astype(float)
    d = (y[use] - mean[group[use]]) * np.sqrt(V / (V - 1))
    return float(robust_tau2(d, w[use]))


def combine_visits(y: NDArray, w: NDArray, pair: NDArray, n_pairs: int,
                   sigma2: float, source: str) -> Visits:
    """Inverse-variance mean of each pair's visits, each visit's variance ``w + sigma2``.

    A deviation must hold in every visit: a pair's variance is moderated toward its own
    visits' scatter (the variance of their mean), as a moderated t statistic does,
    ``(d0 v + (V-1) s²/V) / (d0 + V - 1)`` with :data:`PRIOR_DF` prior degrees of freedom
    for the pooled ``v``: one disturbed visit (a busy host during that run) cannot make a
    pair look slow however tight the pooled variance is, and pairs whose visits agree keep
    the pooled one.
    """
    ok = np.isfinite(y) & np.isfinite(w)
    prec = np.where(ok, 1.0 / (np.where(ok, w, 1.0) + sigma2), 0.0)
    sp = np.bincount(pair, weights=prec, minlength=n_pairs)
    sy = np.bincount(pair, weights=np.where(ok, y, 0.0) * prec, minlength=n_pairs)
    nv = np.bincount(pair, weights=ok.astype(float), minlength=n_pairs).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        yp = np.where(sp > 0, sy / sp, np.nan)
        vp = np.where(sp > 0, 1.0 / sp, np.inf)
        dev = np.where(ok, y - yp[pair], 0.0)
        ss = np.bincount(pair, weights=dev**2, minlength=n_pairs)
        own = ss / np.maximum(nv * (nv - 1), 1)
        df = np.maximum(nv - 1, 0)
        moderated = np.where(nv >= 2, (PRIOR_DF * vp + df * own) / (PRIOR_DF + df), vp)
    return Visits(yp, np.where(np.isfinite(vp), moderated, vp), nv, sigma2, source)


@dataclass
class Decomposition:
    """Node and link effects of one figure (all in the figure's own units)."""

    #: the typical pair's value (twice the median node's effect): what "no deviation" is
    centre: float
    node: NDArray[np.float64]
    node_se: NDArray[np.float64]
    node_estimated: NDArray[np.bool_]
    #: per pair: raw link effect (residual), its standard error, the shrunk (seen-pair) value
    link: NDArray[np.float64]
    link_se: NDArray[np.float64]
    link_shrunk: NDArray[np.float64]
    link_shrunk_se: NDArray[np.float64]
    #: posterior probability that the link is in the bulk (two-group model)
    bulk_prob: NDArray[np.float64]
    tau2: float
    outlier_share: float
    outlier_tau2: float
    notes: list[str] = field(default_factory=list)

    def fitted(self, ends: NDArray) -> NDArray[np.float64]:
        """``centre + a_i + a_j`` per pair: a pair's value before its link effect."""
        return self.centre + self.node[ends[:, 0]] + self.node[ends[:, 1]]

    def spread(self) -> float:
        """Between-pair variance of an unseen pair's value around ``centre``.

        A new pair between two unseen nodes: two node effects (their robust spread over
        the estimated nodes, less their estimation noise) and a link effect.
        """
        est = self.node_estimated & np.isfinite(self.node)
        tau2_node = 0.0
        if est.sum() >= 3:
            tau2_node = robust_tau2(self.node[est] - float(np.median(self.node[est])),
                                    self.node_se[est] ** 2)
        return float(self.tau2 + 2.0 * tau2_node)


def _node_design(ends: NDArray, n_nodes: int, rows: NDArray) -> NDArray:
    X = np.zeros((int(rows.sum()), n_nodes))
    idx = np.arange(X.shape[0])
    X[idx, ends[rows, 0]] = 1.0
    X[idx, ends[rows, 1]] = 1.0
    return X


def decompose(y: NDArray, v: NDArray, ends: NDArray, n_nodes: int, *,
              nodes: bool = True) -> Decomposition:
    """Node and link effects of per-pair values ``y`` with sampling variances ``v``.

    ``ends[p]`` are pair p's node indices. ``nodes=False`` estimates no node effects (every
    deviation is the link's). NaN values (pairs without data for this figure) take no part
    and get their node-predicted value with no link effect.
    """
    y = np.asarray(y, dtype=float)
    v = np.asarray(v, dtype=float)
    P = len(y)
    ok = np.isfinite(y) & np.isfinite(v)
    notes: list[str] = []
    node = np.zeros(n_nodes)
    node_se = np.full(n_nodes, np.nan)
    degree = np.bincount(ends[ok].ravel(), minlength=n_nodes)
    est = np.zeros(n_nodes, dtype=bool)
    if nodes:
        est = degree >= MIN_NODE_PAIRS
        if n_nodes < 4 or est.sum() < 4:
            if est.any() or n_nodes >= 1:
                notes.append("node effects not estimated: they need at least 4 nodes with "
                             f"{MIN_NODE_PAIRS} measured pairs each (with fewer, a slow node "
                             "and slow links cannot be told apart)")
            est[:] = False
    if ok.sum() == 0:
        nan = np.full(P, np.nan)
        return Decomposition(float("nan"), node, node_se, est, nan, nan, nan, nan,
                             np.ones(P), 0.0, 0.0, 0.0, [*notes, "no pair has this figure"])
    centre = float(np.median(y[ok]))
    tau2 = 0.0
    h = np.ones(P)
    if est.any():
        cols = np.flatnonzero(est)
        rows = ok
        X_full = _node_design(ends, n_nodes, rows)
        X = np.concatenate([np.ones((X_full.shape[0], 1)), X_full[:, cols]], axis=1)
        yy, vv = y[rows], v[rows]
        beta = np.zeros(X.shape[1])
        beta[0] = centre
        biweight = False
        for steps in range(1, 2 * _IRLS_STEPS + 1):
            resid = yy - X @ beta
            if not biweight:  # the biweight's own residuals would shrink tau² (below)
                tau2 = robust_tau2(resid - float(np.median(resid)), vv)
                huber = (beta, np.ones_like(yy) if steps == 1 else h[rows].copy())
            s2 = vv + tau2
            z = np.abs(resid) / np.sqrt(s2)
            if biweight:  # Huber to a good start, then Tukey's biweight
                hh = np.clip(1.0 - (z / BIWEIGHT_C) ** 2, 0.0, None) ** 2
            else:
                hh = np.minimum(1.0, HUBER_K / np.maximum(z, 1e-12))
            W = hh / s2
            A = X.T @ (X * W[:, None])
            # one linear dependency (node columns sum to 2 x the constant): pin it softly
            A[1:, 1:] += np.eye(len(cols)) * 1e-9 * float(np.trace(A)) / len(cols)
            A[1:, 1:] += 1e-6 * np.mean(W) * np.ones((len(cols), len(cols)))
            new = np.linalg.solve(A, X.T @ (W * yy))
            done = float(np.max(np.abs(new - beta))) <= 1e-9 * (1 + float(np.max(np.abs(new))))
            beta = new
            h[rows] = hh
            if biweight and done:
                break
            if done or steps >= _IRLS_STEPS:
                biweight = True
        # tau², the links' spread, from the Huber fit's residuals: the biweight can fit a
        # few nodes' pairs almost exactly (9 parameters to 28 pairs at 8 nodes), and its
        # residuals then read a spread several times too small; and scaled by their
        # leverage (a fit of k node effects to P pairs absorbs about k/P of the variance)
        beta_h, h_h = huber
        resid = yy - X @ beta_h
        for _ in range(2):
            s2 = vv + tau2
            W = h_h / s2
            A = X.T @ (X * W[:, None])
            A[1:, 1:] += 1e-6 * np.mean(W) * np.ones((len(cols), len(cols)))
            Ainv = np.linalg.pinv(A)
            lev = np.clip(W * np.einsum("ij,jk,ik->i", X, Ainv, X), 0.0, 0.95)
            scaled = (resid - float(np.median(resid))) / np.sqrt(1.0 - lev)
            tau2 = robust_tau2(scaled, vv)
        s2 = vv + tau2
        W = h[rows] / s2
        A = X.T @ (X * W[:, None])
        A[1:, 1:] += 1e-6 * np.mean(W) * np.ones((len(cols), len(cols)))
        Ainv = np.linalg.pinv(A)
        meat = X.T @ (X * (h[rows] ** 2 / s2)[:, None])
        cov = Ainv @ meat @ Ainv
        # node effects about their median: the typical node adds nothing
        a = beta[1:]
        m = float(np.median(a))
        node[cols] = a - m
        centre = float(beta[0] + 2 * m)
        # the node effect's error relative to the common level: Var(a_i - mean a)
        k = len(cols)
        C = np.eye(k) - np.ones((k, k)) / k
        cov_a = C @ cov[1:, 1:] @ C.T
        node_se[cols] = np.sqrt(np.maximum(np.diag(cov_a), 0.0))
    fitted = centre + node[ends[:, 0]] + node[ends[:, 1]]
    link = np.where(ok, y - fitted, np.nan)
    if not est.any():
        tau2 = robust_tau2(link[ok] - float(np.median(link[ok])), v[ok]) if ok.sum() >= 3 \
            else 0.0
    nse2 = np.where(np.isfinite(node_se), node_se, 0.0) ** 2
    link_var = np.where(ok, v + nse2[ends[:, 0]] + nse2[ends[:, 1]], np.inf)
    link_se = np.sqrt(link_var)
    shrunk, shrunk_var, bulk, share, out_tau2 = two_group(link, link_var, tau2)
    return Decomposition(centre, node, node_se, est, link, link_se, shrunk, np.sqrt(shrunk_var),
                         bulk, float(tau2), share, out_tau2, notes)


def two_group(e: NDArray, v: NDArray, tau2: float, steps: int = 200
              ) -> tuple[NDArray, NDArray, NDArray, float, float]:
    """Posterior of link effects under a bulk N(0, tau²) and an outlier group N(0, tau_o²).

    Returns (posterior mean, posterior variance, P(bulk), outlier share, tau_o²). The
    outlier group's share and spread are estimated by EM on the effects with their
    sampling variances, its spread kept at least 9x the bulk's total (so it stands for
    what the bulk cannot explain). NaN effects get mean 0 and variance ``tau2``.
    """
    ok = np.isfinite(e) & np.isfinite(v)
    mean = np.zeros(len(e))
    var = np.full(len(e), tau2)
    bulk = np.ones(len(e))
    if ok.sum() == 0:
        return mean, var, bulk, 0.0, 0.0
    ee, vv = e[ok], v[ok]
    floor = 9.0 * (tau2 + float(np.median(vv)))
    t2o = max(floor, float(np.mean(ee**2)))
    share = 0.05
    for _ in range(steps):
        lb = _lognorm(ee, tau2 + vv) + math.log(1 - share)
        lo = _lognorm(ee, t2o + vv) + math.log(share)
        p_out = 1.0 / (1.0 + np.exp(np.clip(lb - lo, -700, 700)))
        new_share = float(np.clip(p_out.mean(), 1e-4, 0.5))
        # moment update of the outlier spread (heteroscedastic: weighted excess over v)
        wsum = float(p_out.sum())
        new_t2o = max(floor, float(np.sum(p_out * (ee**2 - vv)) / wsum)) if wsum > 1e-9 \
            else floor
        converged = abs(new_share - share) < 1e-7 and abs(new_t2o - t2o) < 1e-9 * new_t2o
        share, t2o = new_share, new_t2o
        if converged:
            break
    lb = _lognorm(ee, tau2 + vv) + math.log(1 - share)
    lo = _lognorm(ee, t2o + vv) + math.log(share)
    pb = 1.0 / (1.0 + np.exp(np.clip(lo - lb, -700, 700)))
    Bb = tau2 / (tau2 + vv) if tau2 > 0 else np.zeros_like(vv)
    Bo = t2o / (t2o + vv)
    m_b, m_o = Bb * ee, Bo * ee
    v_b, v_o = Bb * vv, Bo * vv
    m = pb * m_b + (1 - pb) * m_o
    mean[ok] = m
    var[ok] = pb * (v_b + m_b**2) + (1 - pb) * (v_o + m_o**2) - m**2
    bulk[ok] = pb
    return mean, var, bulk, share, t2o


def _lognorm(x: NDArray, var: NDArray | float) -> NDArray:
    return -0.5 * (np.log(2 * np.pi * var) + x**2 / var)
