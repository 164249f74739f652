"""The closed loop: run the kit's own ping-pong under SimGrid/SMPI with a model's export.

Why: an export is only as good as what SimGrid does with it. This module builds the
ping-pong (kit/outputs/export/smpi/pingpong.c, with ``smpicc``) and the noise plugin
(kit/outputs/export/smpi/noise_plugin.cpp, against libsimgrid-dev), writes the export for the
installed SimGrid, runs ``smpirun`` on the measured pair's platform and compares what
SimGrid computes with what the model says:

* :func:`simulate_model`: at 1 B, 1 KiB, 64 KiB, 1 MiB, 4 MiB, the middle of every regime
  and the measured sizes on both sides of every break, the simulated median one-way time
  over ``pt2pt predict``'s median (measured sizes' own adjustments included: the export
  carries them), and with the noise plugin the simulated p05/p95 over predict's.
* :func:`simulate_against`: the loop back to reality. The model's settings are refitted on
  a training split of the measured series, the held-out samples' plan (their sizes, in
  their order) is simulated with noise, and the simulated times are compared with the
  held-out measurements per size decade.

SimGrid's clock is global, so the simulated ping-pong times every message one way (send
call on one rank to receive return on the other); those per-message times are what is
compared with the model's one-way time (the measured RTT/2).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kit.core.errors import UserError
from kit.outputs.export.simgrid import HOSTS, SimgridExport, export_simgrid

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel

SMPI_SRC = Path(__file__).parent / "export" / "smpi"
#: Fixed check sizes; the middle of each regime and the measured sizes next to each break
#: are added (:func:`check_sizes`).
CHECK_SIZES = ((1, "1 B"), (1024, "1 KiB"), (65536, "64 KiB"), (1048576, "1 MiB"),
               (4194304, "4 MiB"))
#: smpirun options the loop adds: no benchmarking of the program's own CPU time (it would
#: add host-dependent time between MPI calls), warnings only.
RUN_CFG = ("--cfg=smpi/simulate-computation:no", "--log=root.thres:warning")


class SimGridMissing(UserError):
    """SimGrid (smpirun, smpicc, libsimgrid-dev) is not installed."""


@dataclass
class Point:
    """One size of the comparison: model vs simulation."""

    size: int
    label: str
    regime: int
    extrapolated: bool
    model_median: float
    sim_median: float
    n: int
    model_p05: float | None = None
    model_p95: float | None = None
    sim_p05: float | None = None
    sim_p95: float | None = None
    #: The model's CDF at the simulated p05 and p95: 0.05 and 0.95 when the simulation
    #: reproduces them. Where a quantile sits between two noise components (little
    #: probability between them) its ratio can be 10 % off while its level is 0.003 off.
    sim_p05_level: float | None = None
    sim_p95_level: float | None = None

    @property
    def median_ratio(self) -> float:
        return self.sim_median / self.model_median

    @property
    def p05_ratio(self) -> float | None:
        return None if self.sim_p05 is None or not self.model_p05 else self.sim_p05 / self.model_p05

    @property
    def p95_ratio(self) -> float | None:
        return None if self.sim_p95 is None or not self.model_p95 else self.sim_p95 / self.model_p95

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(median_ratio=self.median_ratio, p05_ratio=self.p05_ratio,
                 p95_ratio=self.p95_ratio)
        return d


@dataclass
class Report:
    """The comparison and how it was made (what a user needs to judge the numbers)."""

    simgrid_version: str
    noise: bool
    reps: int
    points: list[Point]
    export_dir: str
    statistic: str
    baseline: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"simgrid_version": self.simgrid_version, "noise": self.noise,
                "reps": self.reps, "export_dir": self.export_dir, "statistic": self.statistic,
                "baseline": self.baseline, "notes": self.notes,
                "points": [p.to_dict() for p in self.points]}


# --------------------------------------------------------------------------- tools


def _need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise SimGridMissing(f"'{tool}' is not installed, so SimGrid cannot run",
                             where="pt2pt simulate",
                             hint=f"install SimGrid, e.g. 'apt-get install {package}' on Debian "
                             "12 (SimGrid 3.32), and retry")
    return path


def cache_dir() -> Path:
    """Where the built ping-pong and plugin live (per source content and SimGrid)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pt2pt"
    digest = hashlib.sha256()
    for name in ("pingpong.c", "noise_plugin.cpp", "Makefile"):
        digest.update((SMPI_SRC / name).read_bytes())
    smpicc = shutil.which("smpicc") or ""
    digest.update(smpicc.encode())
    return base / f"simgrid-{digest.hexdigest()[:12]}"


def build(noise: bool, out: Path | None = None) -> tuple[Path, Path | None]:
    """Build the ping-pong (and the noise plugin) with the kit's Makefile; cached."""
    _need("smpirun", "libsimgrid-dev")
    _need("smpicc", "libsimgrid-dev")
    targets = ["pingpong"]
    if noise:
        _need(os.environ.get("CXX", "g++"), "g++")
        targets.append("libpt2pt_noise.so")
    out = out or cache_dir()
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["make", "-s", "-C", str(SMPI_SRC), f"OUT={out}",
                           *[str(out / t) for t in targets]],
                          capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode != 0:
        raise SimGridMissing(f"building the SMPI ping-pong/noise plugin failed: "
                             f"{(proc.stderr or proc.stdout).strip()[-600:]}",
                             where=str(SMPI_SRC / "Makefile"),
                             hint="install libsimgrid-dev and g++ (apt-get install "
                             "libsimgrid-dev g++), then retry")
    return out / "pingpong", (out / "libpt2pt_noise.so") if noise else None


# --------------------------------------------------------------------------- running


def run_pingpong(export: SimgridExport, sizes: list[int], reps: int, *, noise: bool,
                 seed: int = 1, workdir: Path | None = None) -> dict[str, np.ndarray]:
    """Run the ping-pong under smpirun; per ping-pong: size, rtt_half, fwd, back (s).

    With ``noise`` the factor strings are left out and the plugin's callbacks draw each
    message's factors from the export's noise tables instead.
    """
    binary, plugin = build(noise)
    smpirun = _need("smpirun", "libsimgrid-dev")
    with tempfile.TemporaryDirectory(prefix="pt2pt-sim-", dir=workdir) as tmp:
        d = Path(tmp)
        # The factor strings go in the platform's <config> (one --cfg argument may not
        # exceed 128 KiB, and measured sizes add two entries each); with noise, the plugin
        # sets the factors and the strings must be absent.
        (d / "platform.xml").write_text(export.platform_xml(with_config=not noise))
        (d / "hostfile").write_text("\n".join(HOSTS) + "\n")
        (d / "sizes.txt").write_text("\n".join(str(int(s)) for s in sizes) + "\n")
        (d / "noise.tsv").write_text(export.noise_table)
        cmd = [smpirun]
        if noise:
            assert plugin is not None
            cmd += ["-wrapper", f"env LD_PRELOAD={plugin} PT2PT_SIMGRID_NOISE={d / 'noise.tsv'} "
                    f"PT2PT_SIMGRID_SEED={seed}"]
        cmd += ["-platform", str(d / "platform.xml"), "-hostfile", str(d / "hostfile"),
                "-np", "2", *(export.cfg_args(factors=False) if noise else []), *RUN_CFG,
                str(binary), str(d / "sizes.txt"), str(reps)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=1800,
                              cwd=d)
    if proc.returncode != 0 or not proc.stdout.startswith("size,"):
        text = (proc.stderr or proc.stdout).strip()
        # SimGrid prints a long backtrace after the reason: show the reason.
        reason = [line for line in text.splitlines() if "->" not in line
                  and "backtrace" not in line.lower()]
        raise UserError(f"smpirun failed (exit {proc.returncode}): "
                        f"{chr(10).join(reason)[-1500:]}",
                        where="pt2pt simulate", hint="run the printed command by hand to see "
                        "SimGrid's full message; check the SimGrid version (--simgrid-version)")
    rows = np.array([[float(v) for v in line.split(",")]
                     for line in proc.stdout.splitlines()[1:] if line.strip()])
    return {"size": rows[:, 0], "rtt_half": rows[:, 1], "fwd": rows[:, 2], "back": rows[:, 3]}


def check_sizes(model: RegimeModel) -> list[tuple[int, str]]:
    """1 B ... 4 MiB, the (geometric) middle of every regime, and the measured sizes
    (with adjustments of their own) closest to each break on either side."""
    out = dict((s, label) for s, label in CHECK_SIZES)
    for k, r in enumerate(model.regimes_):
        mid = round(float(np.sqrt(max(float(r.size_min), 1.0) * max(float(r.size_max), 1.0))))
        out.setdefault(mid, f"regime {k + 1} mid")
    stored = model.stored_sizes() if hasattr(model, "stored_sizes") else np.zeros(0)
    for k, bp in enumerate(getattr(model, "breakpoints_", [])):
        below, above = stored[stored < bp], stored[stored >= bp]
        if below.size:
            out.setdefault(int(below.max()), f"below break {k + 1}")
        if above.size:
            out.setdefault(int(above.min()), f"above break {k + 1}")
    return sorted(out.items())


def _size_range(model: RegimeModel) -> tuple[float, float]:
    return float(model.regimes_[0].size_min), float(model.regimes_[-1].size_max)


def simulate_model(model: RegimeModel, *, noise: bool = False, reps: int | None = None,
                   seed: int = 1,
                   version: str | None = None, send_model: RegimeModel | None = None,
                   recv_model: RegimeModel | None = None, export_dir: Path | None = None) -> Report:
    """Simulate the check sizes and compare with the model (median; p05/p95 with noise)."""
    reps = reps or (2500 if noise else 3)
    export = export_simgrid(model, version=version, center="median", send_model=send_model,
                            recv_model=recv_model)
    if export_dir is not None:
        export.write(export_dir)
    points_in = check_sizes(model)
    sizes = [s for s, _ in points_in]
    run = run_pingpong(export, sizes, reps, noise=noise, seed=seed)
    quant = np.asarray(model.predict_quantiles(np.array(sizes, dtype=float), [0.05, 0.5, 0.95]))
    lo, hi = _size_range(model)
    regime = np.asarray(model.regime_index(np.array(sizes, dtype=float)))
    points = []
    for i, (size, label) in enumerate(points_in):
        m = run["size"] == size
        # Every message one way: the forward and the backward message of each ping-pong.
        one_way = np.concatenate([run["fwd"][m], run["back"][m]])
        p = Point(size=size, label=label, regime=int(regime[i]) + 1,
                  extrapolated=not lo <= size <= hi, model_median=float(quant[i, 1]),
                  sim_median=float(np.median(one_way)), n=int(one_way.size))
        if noise:
            p.model_p05, p.model_p95 = float(quant[i, 0]), float(quant[i, 2])
            p.sim_p05, p.sim_p95 = (float(v) for v in np.quantile(one_way, [0.05, 0.95]))
            p.sim_p05_level, p.sim_p95_level = (float(v) for v in np.asarray(model.cdf(
                np.array([size], dtype=float), np.array([[p.sim_p05, p.sim_p95]])))[0])
        points.append(p)
    v = export.version
    notes = ["ratio = simulated / model; simulated = one-way time of each message under SMPI "
             "(global clock), model = pt2pt predict (median, p05, p95 of the one-way time; "
             "measured sizes with their own adjustments, which the export carries)"]
    if noise:
        notes.append(f"noise: libpt2pt_noise draws every message's factor from the export's "
                     f"per-segment quantile tables (seed {seed}); {2 * reps} messages per size")
        notes.append("level = the model's CDF at the simulated p05/p95 (0.05/0.95 when "
                     "reproduced): between two noise components a quantile's ratio can be "
                     "10 % off while its level is right")
    if any(p.extrapolated for p in points):
        notes.append("sizes marked * lie outside the measured range: the model extrapolates")
    n_own = len(export.document.get("measured_sizes", []))
    if n_own:
        notes.append(f"{n_own} measured sizes exported with their own factors and noise table "
                     "(one-byte entries); every other size follows predict's smooth curve")
    return Report(simgrid_version=f"{v[0]}.{v[1]}", noise=noise, reps=reps, points=points,
                  export_dir=str(export_dir) if export_dir else "",
                  statistic="median" + (", p05, p95" if noise else ""),
                  baseline="the model (pt2pt predict)", notes=notes)


@dataclass
class AgainstRow:
    """One size decade: held-out measurements vs the simulation of their plan."""

    size_lo: float
    size_hi: float
    n_real: int
    n_sim: int
    real_median: float
    sim_median: float
    real_p05: float
    sim_p05: float
    real_p95: float
    sim_p95: float
    model_median: float
    model_p05: float
    model_p95: float
    #: Where the simulated (model's) p05/p95 fall among the held-out samples: their share
    #: at or below it (ties counted half), 0.05/0.95 when the tail is reproduced. A ratio of
    #: times says little where the real samples have a gap (between two bands).
    sim_p05_level: float = math.nan
    sim_p95_level: float = math.nan
    model_p05_level: float = math.nan
    model_p95_level: float = math.nan

    @property
    def level_se(self) -> float:
        """Standard error of a level at 0.05 or 0.95: binomial among the ``n_real`` held-out
        samples, plus the simulated (or drawn) quantile's own, from ``n_sim`` messages
        (the model's draws are as many: two per held-out ping-pong)."""
        return math.sqrt(0.05 * 0.95 * (1.0 / self.n_real + 1.0 / max(self.n_sim, 1)))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(level_se=self.level_se, median_ratio=self.sim_median / self.real_median,
                 p05_ratio=self.sim_p05 / self.real_p05, p95_ratio=self.sim_p95 / self.real_p95,
                 model_median_ratio=self.model_median / self.real_median,
                 model_p05_ratio=self.model_p05 / self.real_p05,
                 model_p95_ratio=self.model_p95 / self.real_p95)
        return d


def simulate_against(model: RegimeModel, dataset: Path, *, series: dict[str, str] | None = None,
                     seed: int = 1, test_fraction: float = 0.3, version: str | None = None,
                     max_messages: int = 4000) -> tuple[list[AgainstRow], dict[str, Any]]:
    """Refit the model's settings on a training split, simulate the held-out plan, compare.

    The held-out samples never reach the fit (``kit.fit.validate.holdout_mask``, the split the
    model's own validation uses). At most ``max_messages`` held-out ping-pongs are simulated
    (an evenly spaced subset of the plan, in order).
    """
    from kit.fit.fitting import FitOptions, read_series, resolve
    from kit.fit.validate import holdout_mask
    from kit.model.params import clone

    chosen = dict(series or {})  # the caller passes the model file's provenance series
    # the rows `pt2pt fit` fits (disturbed windows left out), split as validation splits them
    samples = read_series(dataset, resolve(dataset, chosen, FitOptions(aggregates=True)))
    size, time = samples.size, samples.time
    test = holdout_mask(size, random_state=seed, test_fraction=test_fraction)
    trained = clone(model).fit(size[~test], time[~test])
    export = export_simgrid(trained, version=version, center="median")
    plan = size[test]
    real = time[test]
    if plan.size > max_messages:
        keep = np.linspace(0, plan.size - 1, max_messages).round().astype(int)
        plan, real = plan[keep], real[keep]
    run = run_pingpong(export, [int(s) for s in plan], 1, noise=True, seed=seed)
    sim_size = np.concatenate([run["size"], run["size"]])
    sim_time = np.concatenate([run["fwd"], run["back"]])
    # The refitted model's own draws on the same plan: separates the model's error (model
    # vs real) from what the export and SimGrid add (simulated vs model).
    draws = np.asarray(trained.sample(plan, 2, random_state=seed), dtype=np.float64)
    model_size = np.repeat(plan, 2)
    model_time = draws.ravel()
    rows = []
    edges = 10.0 ** np.arange(np.floor(np.log10(max(plan.min(), 1))),
                              np.ceil(np.log10(plan.max() + 1)) + 1)
    for a, b in itertools.pairwise(edges):
        mr = (plan >= a) & (plan < b)
        ms = (sim_size >= a) & (sim_size < b)
        if mr.sum() < 20:
            continue
        mm = (model_size >= a) & (model_size < b)
        rq = np.quantile(real[mr], [0.05, 0.5, 0.95])
        sq = np.quantile(sim_time[ms], [0.05, 0.5, 0.95])
        mq = np.quantile(model_time[mm], [0.05, 0.5, 0.95])
        sl = _levels(real[mr], [sq[0], sq[2], mq[0], mq[2]])
        rows.append(AgainstRow(float(a), float(b), int(mr.sum()), int(ms.sum()), float(rq[1]),
                               float(sq[1]), float(rq[0]), float(sq[0]), float(rq[2]),
                               float(sq[2]), float(mq[1]), float(mq[0]), float(mq[2]),
                               *sl))
    v = export.version
    meta = {"simgrid_version": f"{v[0]}.{v[1]}", "dataset": str(dataset), "series": chosen,
            "held_out": int(test.sum()), "simulated": int(plan.size), "seed": seed,
            "statistic": "median, p05, p95 per size decade",
            "baseline": "held-out real samples (one-way = RTT/2), never seen by the refit",
            "note": "simulated: one-way time of each message (two per ping-pong) with the "
                    "noise plugin; model: two draws per held-out ping-pong from the refitted "
                    "model (sim/model apart from sim/real is the export's share)",
            "level_note": "level: the share of held-out samples at or below the simulated "
                          "(model's) p05/p95, ties counted half; 0.05/0.95 when the tail is "
                          "reproduced, give or take level_se (binomial, from the held-out "
                          "samples and the simulated messages of the decade)"}
    return rows, meta


def _levels(real: np.ndarray, at: list[float]) -> list[float]:
    """The held-out samples' mid-distribution function at each of ``at``: the share below
    plus half the share equal (timers that round to a tick make many samples equal)."""
    from scipy.stats import percentileofscore  # loaded by the refit already

    return [float(x) / 100.0 for x in percentileofscore(real, at, kind="mean")]
