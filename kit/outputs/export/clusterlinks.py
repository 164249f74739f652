"""A heterogeneous SimGrid platform from a cluster model: each node's deviation on its host's
links, so that a simulation can place ranks on the slow node.

The cluster platform (:mod:`kit.outputs.export.platform`) routes a message from host i to
host j through i's up link and j's down link, each at half the inter-node route's latency
and at its bandwidth. The cluster model (:mod:`kit.fit.clustermodel`) says what each node
adds to every pair it is in: a latency (seconds, one way) and a bandwidth factor. So host
i's two links get

* latency: the common half-route latency plus node i's added latency (a message to or from
  i then carries it once, one way, as measured);
* bandwidth: the common bandwidth times node i's factor (a route's bandwidth is its slower
  link's: two slow nodes make the slower one's, where the model's product would be a little
  slower still; the notes say so when it happens).

Node effects are shrunk toward the typical node by how sure each is (empirical Bayes with
the nodes' own spread), so a node measured on few pairs moves little. The population (the
typical pair) is the inter-node model of every route. What a star of one switch cannot
carry is named in the notes: a link's own deviation (a pair slower than its two nodes
explain), a latency below the platform's (a node faster than the typical one by more than
half the route's latency is clipped at zero).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kit.figures.deviation import format_seconds
from kit.fit.clustermodel import ClusterModel
from kit.fit.hierarchy import two_group
from kit.model.contract import PointToPointModel
from kit.model.segmentation import robust_tau2
from kit.outputs.export.platform import ClusterPlatform, LinkValue, cluster_platform


def shrunk_nodes(model: ClusterModel, figure: str) -> np.ndarray:
    """Node effects of ``figure``, shrunk toward the typical node by how sure each is.

    The links' two-group prior (:func:`kit.fit.hierarchy.two_group`) with the nodes' robust
    spread: a node far outside the bulk (a flagged slow node) keeps its own effect, one
    within it is pulled in by ``tau² / (tau² + se²)``.
    """
    fig = model.figures_.get(figure)
    n = len(model.nodes_)
    out = np.zeros(n)
    if fig is None:
        return out
    parts = fig.parts
    est = parts.node_estimated & np.isfinite(parts.node) & np.isfinite(parts.node_se)
    if est.sum() < 3:
        return out
    se2 = parts.node_se[est] ** 2
    tau2 = robust_tau2(parts.node[est] - float(np.median(parts.node[est])), se2)
    out[est] = two_group(parts.node[est], se2, tau2)[0]
    return out


def node_links(model: ClusterModel, platform: ClusterPlatform
               ) -> tuple[dict[str, LinkValue], list[str]]:
    """Link values of every host (host i = the model's node i) and what is not carried."""
    lat = shrunk_nodes(model, "latency")
    bw = shrunk_nodes(model, "bandwidth")
    base = platform.link
    values: dict[str, LinkValue] = {}
    notes: list[str] = []
    clipped = []
    for i, node in enumerate(model.nodes_):
        if lat[i] == 0.0 and bw[i] == 0.0:
            continue
        latency = base.latency + float(lat[i])
        if latency < 0:
            clipped.append(node)
            latency = 0.0
        value = LinkValue(base.bandwidth * math.exp(float(bw[i])), latency)
        names = platform.link_names(i)
        values[names["up"]] = values[names["down"]] = value
    if clipped:
        notes.append(f"{', '.join(clipped)}: faster than the typical pair by more than half "
                     "the route's latency; their links' latency is 0")
    slow_bw = [model.nodes_[i] for i in np.flatnonzero(bw < math.log(0.95))]
    if len(slow_bw) >= 2:
        notes.append(f"{len(slow_bw)} nodes with less bandwidth ({', '.join(slow_bw[:6])}): a "
                     "route between two of them runs at the slower one's, where the cluster "
                     "model multiplies both factors")
    return values, notes


def _links_not_carried(model: ClusterModel, findings: Any | None) -> list[str]:
    if findings is None:
        return []
    links = [f for f in findings.flagged if f.kind == "link"]
    if not links:
        return []
    named = "; ".join(f.sentence for f in links[:5]) + ("; ..." if len(links) > 5 else "")
    return [f"{len(links)} slow link(s) of their own are not on the platform (one switch "
            f"routes every pair through its two hosts' links, which carry the node effects "
            f"only): {named}"]


def cluster_model_platform(model: ClusterModel, *, cores: int = 1,
                           intra_model: PointToPointModel | None = None,
                           send_model: PointToPointModel | None = None,
                           recv_model: PointToPointModel | None = None,
                           backbone: LinkValue | None = None,
                           version: tuple[int, int] | str | None = None,
                           findings: Any | None = None) -> ClusterPlatform:
    """The cluster platform of the model's nodes: the population on every route, each
    node's deviation on its host's links, the node names as host labels."""
    provenance = {"cluster_model": dict(model.series_), "nodes": len(model.nodes_),
                  "pairs": len(model.pairs_)}
    platform = cluster_platform(model.population_, hosts=len(model.nodes_), cores=cores,
                                intra_model=intra_model, send_model=send_model,
                                recv_model=recv_model, backbone=backbone, version=version,
                                provenance=provenance)
    values, notes = node_links(model, platform)
    platform = platform.with_link_values(values, labels=list(model.nodes_))
    platform.notes.extend([
        f"hosts node-0 .. node-{len(model.nodes_) - 1} are the measured nodes "
        f"{model.nodes_[0]} .. {model.nodes_[-1]} (platform.json host_labels); "
        f"{len(values) // 2} of them have links of their own (their node effects)",
        *notes, *_links_not_carried(model, findings)])
    return platform


def describe_links(model: ClusterModel, platform: ClusterPlatform) -> list[str]:
    """One line per host with links of its own: which node, its latency and bandwidth."""
    out = []
    for i, node in enumerate(model.nodes_):
        up = platform.link_values.get(platform.link_names(i)["up"])
        if up is None:
            continue
        added = up.latency - platform.link.latency
        out.append(f"node-{i} = {node}: link latency {format_seconds(up.latency)} "
                   f"({'+' if added >= 0 else '-'}{format_seconds(abs(added))}), bandwidth "
                   f"{up.bandwidth / 1e6:.4g} MB/s "
                   f"({100 * (up.bandwidth / platform.link.bandwidth - 1):+.3g} %)")
    return out
