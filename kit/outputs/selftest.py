"""``pt2pt selftest``: the whole chain measured against a link of known bandwidth.

Two Slurm nodes (network namespaces joined by veths) are brought up with every veth shaped
by ``tbf rate 1gbit burst 256kb``; a campaign of the probe over TCP between the nodes runs
through plan -> submit -> collect, and the large-message bandwidth is fitted. The expected
value is the shaped rate times the TCP payload efficiency at MTU 1500 (MSS 1448 bytes of
1514 on the wire = 0.956): 0.956 x 125 MB/s. Only sizes >= 4 MiB are fitted, where the
token bucket's burst no longer inflates the rate (../shared/notes/local-cluster-lab.md §4.2).

Each size is repeated and only the fastest quarter of its samples is fitted: other processes
on the same cores can only add time (a rank that is not scheduled stops draining its socket,
so even the slope suffers under load), while the link's rate bounds the fastest transfers.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kit.core.errors import UserError
from kit.data.collect import collect
from kit.measure.campaign.manifest import read_job_json, read_manifest, read_submitted
from kit.measure.campaign.plan import plan_campaign
from kit.measure.campaign.slurm import SlurmWaitTimeout, wait_gone
from kit.measure.campaign.submit import submit

SHAPE = ("1gbit", "256kb")
RATE_BPS = 1e9 / 8
TCP_EFFICIENCY = 1448 / 1514
EXPECTED_BPS = TCP_EFFICIENCY * RATE_BPS
TOLERANCE = 0.05
MIN_FIT_SIZE = 4 << 20
SIZES = ("4M", "6M", "8M", "12M", "16M")
#: share of each size's samples (the fastest) that enter the fit
FAST_SHARE = 0.25
#: The self-test's own cluster (never the user's: its layout slot differs from the defaults).
#: Under /tmp directly: munged runs as the munge user and must traverse the path.
DEFAULT_STATE_DIR = Path("/tmp/pt2pt-selftest-slurm")

CAMPAIGN = """\
# Written by pt2pt selftest: probe pingpong over TCP between two shaped nodes.
name: selftest
mpi: openmpi
transports: [tcp]
placement: inter-node
repetitions: 1
seed: 1
launcher: srun --mpi=pmix
slurm:
  partition: {partition}
  time: "00:15:00"
tools:
  - tool: probe
    ops: [pingpong]
    sizes: list:{sizes}
    samples: {samples}
    warmup: 3
"""


@dataclass
class SelftestResult:
    measured_bps: float
    expected_bps: float
    n_samples: int
    method: str
    work_dir: Path

    @property
    def ratio(self) -> float:
        return self.measured_bps / self.expected_bps

    @property
    def ok(self) -> bool:
        return abs(self.ratio - 1.0) <= TOLERANCE


def fastest(size: np.ndarray, one_way: np.ndarray,
            share: float = FAST_SHARE) -> tuple[np.ndarray, np.ndarray]:
    """The fastest ``share`` of the samples of each distinct size (at least one per size)."""
    keep = np.zeros(size.size, dtype=bool)
    for value in np.unique(size):
        idx = np.flatnonzero(size == value)
        n = max(1, round(share * idx.size))
        keep[idx[np.argsort(one_way[idx], kind="stable")[:n]]] = True
    return size[keep], one_way[keep]


def fit_bandwidth(size: np.ndarray, one_way: np.ndarray) -> tuple[float, str]:
    """Bytes/s from the slope of one-way time vs size, with the model engine if present.

    A single linear regime (a + b*s) is forced: above 4 MiB the time is latency plus size
    over bandwidth. Without the engine, the Theil-Sen slope (robust to stray samples).
    """
    try:
        from kit.model import RegimeModel

        model = RegimeModel(breakpoints=[], families=["linear"], max_regimes=1, min_support=3,
                            noise=False, mixture=False, overlap=False, random_state=0)
        model.fit(size, one_way)
        lo, hi = float(size.min()), float(size.max())
        t_lo, t_hi = (float(v) for v in model.predict(np.array([lo, hi])))
        if t_hi > t_lo:
            return (hi - lo) / (t_hi - t_lo), "RegimeModel (one linear regime)"
    except ImportError:
        pass
    from scipy.stats import theilslopes

    slope = float(theilslopes(one_way, size)[0])
    if slope <= 0:
        raise UserError("the measured time does not grow with the message size",
                        where="pt2pt selftest", hint="look at the job outputs in the work "
                        "directory; the link may not be shaped")
    return 1.0 / slope, "Theil-Sen slope"


def _wait(campaign_dir: Path, env: dict[str, str], timeout: float) -> None:
    """Until the self-test's jobs left the queue and each wrote its job.json (collect reads
    it next), with the self-test's own sentence when that takes longer than ``timeout``."""
    manifest = read_manifest(campaign_dir)
    ids = list(read_submitted(campaign_dir).values())
    try:
        wait_gone(ids, env, timeout, until=lambda: all(
            read_job_json(campaign_dir, j) is not None for j in manifest["jobs"]))
    except SlurmWaitTimeout as exc:
        raise UserError(f"the self-test job did not finish within {timeout:.0f} s",
                        where=str(campaign_dir), hint="check 'pt2pt status' and the "
                        "slurm-*.out files in the campaign's arrays/ directory") from exc


def run_selftest(*, samples: int = 12, state_dir: Path | None = None,
                 work_dir: Path | None = None, keep: bool = False, timeout: float = 600,
                 log: Callable[[str], None] = print) -> SelftestResult:
    if os.geteuid() != 0:
        raise UserError("the self-test needs root: it starts Slurm daemons and creates network "
                        "namespaces and shaped links", where="pt2pt selftest",
                        hint="run it as root (e.g. sudo pt2pt selftest)")
    from kit.measure import localcluster

    state = state_dir or DEFAULT_STATE_DIR
    work = work_dir or Path(tempfile.mkdtemp(prefix="pt2pt-selftest-"))
    work.mkdir(parents=True, exist_ok=True)
    log(f"selftest: bringing up 2 Slurm nodes, links shaped tbf {SHAPE[0]} burst {SHAPE[1]} "
        f"(state {state})")
    try:
        cluster = localcluster.up(nodes=2, state_dir=state, shape=SHAPE)
        env = cluster.environ()
        campaign_file = work / "selftest.yaml"
        campaign_file.write_text(CAMPAIGN.format(partition=cluster.partition,
                                                 sizes=",".join(SIZES), samples=int(samples)),
                                 encoding="utf-8")
        campaign_dir = work / "campaign"
        plan_campaign(campaign_file, campaign_dir)
        submit(campaign_dir, env=env)
        log(f"selftest: probe pingpong over tcp between {', '.join(cluster.nodes)}, "
            f"{samples} repetitions of {', '.join(SIZES)} bytes")
        _wait(campaign_dir, env, timeout)
        dataset = work / "dataset"
        report = collect(campaign_dir, dataset, env=env)
        bad = [j for j in report.jobs if j.outcome != "ingested"]
        if bad:
            raise UserError(f"the self-test job ended '{bad[0].outcome}': {bad[0].detail}",
                            where=str(campaign_dir), hint="see job.json and stderr.txt there")
    finally:
        if not keep:
            log("selftest: tearing the cluster down")
            localcluster.down(state)
    import polars as pl

    from kit.data.dataset import scan

    frame = (scan(dataset)
             .filter((pl.col("op") == "pingpong") & ~pl.col("warmup")
                     & (pl.col("size") >= MIN_FIT_SIZE))
             .select("size", "time").collect())
    size, one_way = fastest(frame["size"].to_numpy().astype(float), frame["time"].to_numpy())
    if len(np.unique(size)) < 2 or size.size < 5:
        raise UserError(f"only {frame.height} samples of 4 MiB or more were measured",
                        where=str(dataset), hint="raise --samples")
    measured, method = fit_bandwidth(size, one_way)
    return SelftestResult(measured_bps=measured, expected_bps=EXPECTED_BPS,
                          n_samples=frame.height, method=method, work_dir=work)
