"""``pt2pt predict-app``: every application series of a dataset, simulated three ways and
compared with its real runs (issue 57).

For each series with op ``app`` (its key ``program`` = program, arguments, ranks), the
program runs under SMPI on

* the **calibrated** platform (the folder ``pt2pt export --hosts`` wrote: the models'
  factors and noise through the kit's plugin), as many runs as the real series has (at
  least 5), each with its own noise seed;
* **nominal**: the same links with every factor 1, no overheads, no noise (latency and
  bandwidth only), one run;
* **Hockney**: links at the robust Hockney line of the calibration series (latency
  ``alpha``, bandwidth ``beta``: ``kit.fit.baselines.RobustHockneyModel``, fitted to the
  inter-node, and intra-node, samples the platform's models came from), factors 1, one run.

The real runs compared are those whose run quality was not ``disturbed``
(:func:`kit.analyses.appcompare.usable_runs`): a program whose ranks waited for a CPU (four
fake nodes on two cores) is *withheld*: shown, but left out of the summary's target figures.

Each comparison is :func:`kit.analyses.appcompare.compare` (median ratio with its bootstrap
interval, the real median's level among the simulated runs, inside p05-p95), and each
baseline is set against the calibrated platform with :func:`appcompare.closer`. The result
(``format`` ``pt2pt-predict-app``) is what the report section and the TUI view read.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from kit.analyses.appcompare import closer, compare, summarise, usable_runs
from kit.core.atomicwrite import write_text
from kit.core.errors import UserError
from kit.outputs.appsim import COMPUTE_TEXT, AppSimulation, simulate_app
from kit.outputs.export.platform import FILES, load_platform
from kit.tools import app as apps

FORMAT = "pt2pt-predict-app"
MIN_RUNS = 5
BASELINES = ("nominal", "hockney")
TARGET_ERROR = 0.05


def app_series(dataset: Path) -> list[dict[str, Any]]:
    """Each app series of ``dataset``: its keys, its runs' figures (seconds) and which of
    them are compared (:func:`usable_runs`: the run-quality verdicts of the runs table)."""
    from kit.data import dataset as ds

    rows = (ds.scan(ds.require_ingested(dataset)).filter(pl.col("op") == "app")
            .select("campaign", "transport", "placement", "program", "size", "time", "run_id")
            .collect())
    quality = ds.runs(dataset)
    if {"conditions", "conditions_why"} <= set(quality.columns):
        rows = rows.join(quality.select("run_id", "conditions", "conditions_why"),
                         on="run_id", how="left")
    else:  # an older dataset: nothing recorded, every run counts
        rows = rows.with_columns(conditions=pl.lit(None, pl.String),
                                 conditions_why=pl.lit(None, pl.String))
    out = []
    for key, group in rows.group_by(["campaign", "transport", "placement", "program"],
                                    maintain_order=True):
        campaign, transport, placement, program = (str(v) for v in key)
        real = usable_runs([float(t) for t in group["time"]], group["conditions"].to_list(),
                           group["conditions_why"].to_list())
        out.append({"campaign": campaign, "transport": transport, "placement": placement,
                    "program": program, "size": int(group["size"][0]),
                    "real": real.values, "dropped": real.dropped,
                    "withheld": real.withheld})
    return sorted(out, key=lambda s: (s["program"], s["campaign"]))


def _hockney(platform: Path, work: Path) -> tuple[Path | None, str]:
    """A platform folder at the robust Hockney lines of the models' calibration series, or
    (None, why not)."""
    from kit.fit.baselines import RobustHockneyModel
    from kit.fit.fitting import FitOptions, read_series

    doc = load_platform(platform)
    lines = {}
    for role in ("inter", "intra"):
        part = doc.get(role)
        if not part:
            continue
        prov = part.get("provenance") or {}
        dataset, series = prov.get("dataset"), prov.get("series")
        if not dataset or not isinstance(series, dict) or not Path(dataset).is_dir():
            return None, (f"no Hockney baseline: the {role}-node model's calibration series "
                          "is not known (its provenance names no readable dataset)")
        rows = read_series(Path(dataset), {k: str(v) for k, v in series.items()},
                           FitOptions(aggregates=True))  # the rows the model was fitted on
        line = RobustHockneyModel().fit(rows.size, rows.time)
        lines[role] = (line.alpha_, line.beta_)
    if "inter" not in lines:
        return None, "no Hockney baseline: the platform names no inter-node model"
    folder = work / "hockney"
    folder.mkdir(parents=True)
    for name in FILES:
        shutil.copy(platform / name, folder / name)
    alpha, beta = lines["inter"]
    loop = lines.get("intra", lines["inter"])
    xml = (folder / "platform.xml").read_text()
    for attr, value in (("bw", f"{beta:.10g}Bps"), ("lat", f"{alpha / 2:.10g}s"),
                        ("loopback_bw", f"{loop[1]:.10g}Bps"),
                        ("loopback_lat", f"{loop[0]:.10g}s")):
        xml, n = re.subn(rf'(\s{attr}=")[^"]*(")', rf"\g<1>{value}\g<2>", xml, count=1)
        if n != 1:
            return None, f"no Hockney baseline: platform.xml has no {attr} attribute"
    xml = re.sub(r'\s(bb_bw|bb_lat)="[^"]*"', "", xml)
    (folder / "platform.xml").write_text(xml)
    return folder, (f"Hockney: inter-node alpha {alpha:.4g} s, beta {beta:.4g} B/s (robust "
                    "Hockney on the calibration series' per-size medians), factors 1, no "
                    "noise")


def predict_app(dataset: Path, platform: Path, *, reps: int | None = None, seed: int = 1,
                compute: str = "skip", time_limit: float = 600.0, hockney: bool = True,
                programs: list[str] | None = None,
                on_program: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """The comparison document (see the module doc)."""
    platform_notes = [f"platform: {n}" for n in load_platform(platform).get("notes", [])]
    found = app_series(dataset)
    if programs:
        found = [s for s in found if s["program"] in programs
                 or apps.parse_label(s["program"])[0] in programs]
    if not found:
        raise UserError(f"no application series in {dataset}" + (
            f" matching {', '.join(programs)}" if programs else ""), where=str(dataset),
            hint="run programs for real with the campaign tool 'app' and collect them "
            "(docs/simgrid.md)")
    notes = [COMPUTE_TEXT[compute], "collectives: Open MPI's algorithm choices "
             "(smpi/coll-selector:ompi), the real runs' MPI", *platform_notes]
    results = []
    with tempfile.TemporaryDirectory(prefix="pt2pt-predict-app-") as tmp:
        hockney_dir, why = _hockney(platform, Path(tmp)) if hockney else (None, "")
        if why:
            notes.append(why)
        for i, series in enumerate(found, 1):
            if on_program is not None:
                on_program(i, len(found), series["program"])
            name, args, np_ = apps.parse_label(series["program"])
            per_host = np_ if series["placement"] in ("intra-node", "intra-socket") else 1
            n = reps or max(len(series["real"]), MIN_RUNS)
            common: dict[str, Any] = {"np": np_, "compute": compute, "time_limit": time_limit,
                                      "ranks_per_host": per_host, "size": series["size"] or None}
            sims: dict[str, AppSimulation] = {
                "calibrated": simulate_app(name, args, platform=platform, reps=n, seed=seed,
                                           **common),
                "nominal": simulate_app(name, args, platform=platform, reps=1,
                                        variant="nominal", **common)}
            if hockney_dir is not None:
                sims["hockney"] = simulate_app(name, args, platform=hockney_dir, reps=1,
                                               variant="nominal", **common)
            comparisons = {v: compare(series["real"], s.values(), v, seed=seed)
                           for v, s in sims.items()}
            cal = comparisons["calibrated"]
            results.append({
                **{k: series[k] for k in ("campaign", "transport", "placement", "program",
                                          "size")},
                "real": series["real"], "dropped": series["dropped"],
                "withheld": series["withheld"],
                "simulated": {v: s.values() for v, s in sims.items()},
                "ranks": {v: [r.ranks for r in s.runs] for v, s in sims.items()},
                "comparisons": {v: c.to_dict() for v, c in comparisons.items()},
                "closer": {b: closer(cal, comparisons[b]) for b in BASELINES
                           if b in comparisons},
                "simulation_s": sum(s.elapsed_s for s in sims.values()),
            })
    return document(dataset, platform, results, notes, compute)


def document(dataset: Path, platform: Path, results: list[dict[str, Any]], notes: list[str],
              compute: str) -> dict[str, Any]:
    """The result; the summary's figures are over the programs not withheld."""
    withheld = [r for r in results if r.get("withheld")]
    results_all, results = results, [r for r in results if not r.get("withheld")]
    cal = [r["comparisons"]["calibrated"] for r in results]
    summary: dict[str, Any] = {
        "programs": len(results), "withheld": len(withheld),
        "dropped_runs": int(sum(r.get("dropped", 0) for r in results)),
        **summarise([c["error"] for c in cal]),
        "inside": int(sum(c["inside"] for c in cal)),
        "within_target": int(sum(c["error"] <= TARGET_ERROR for c in cal)),
        "target_error": TARGET_ERROR,
    }
    for base in BASELINES:
        verdicts = [r["closer"][base] for r in results if base in r["closer"]]
        summary[base] = {
            **summarise([r["comparisons"][base]["error"] for r in results
                         if base in r["comparisons"]]),
            "calibrated_closer": verdicts.count("calibrated"),
            "baseline_closer": verdicts.count("baseline"), "tie": verdicts.count("tie")}
    return {
        "format": FORMAT, "format_version": 1, "dataset": str(dataset),
        "platform": str(platform), "compute": compute, "summary": summary,
        "programs": results_all,
        "statistic": "median of each program's figure per run (halo: wall time of the slowest "
                     "rank; OSU: latency, or size / bandwidth), seconds; ratio = simulated / "
                     "real with a 95 % bootstrap interval (real and simulated runs resampled); "
                     "level = share of simulated runs at or below the real median; inside = "
                     "the real median within the simulated p05-p95",
        "real_runs": "the real runs whose run quality was not disturbed; a program with fewer "
                     "than 2 such runs is withheld: shown with all its runs, left out of the "
                     "summary",
        "closer": "calibrated or baseline: closer to the real median (|ln ratio|) where the "
                  "two ratio intervals do not overlap; tie otherwise",
        "notes": notes,
    }


def write(doc: dict[str, Any], path: Path) -> Path:
    return write_text(path, json.dumps(doc, indent=2) + "\n")


def read(path: Path) -> dict[str, Any]:
    """A predict-app result file, checked for its format."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path} ({exc})", where=str(path),
                        hint="write it with pt2pt predict-app -o FILE") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise UserError("not a pt2pt predict-app result", where=str(path),
                        hint="write it with pt2pt predict-app -o FILE")
    return doc


def fmt_ratio(c: dict[str, Any]) -> str:
    """``0.973 [0.95, 0.99]``: a comparison's ratio with its interval."""
    if not math.isfinite(c.get("ratio", math.nan)):
        return "-"
    return f"{c['ratio']:.3f} [{c['ratio_lo']:.3f}, {c['ratio_hi']:.3f}]"


def table_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """One row per program, the cells every surface (CLI, report, TUI) shows."""
    rows = []
    for r in doc["programs"]:
        c = r["comparisons"]
        cal = c["calibrated"]
        row = {
            "program": r["program"], "placement": r["placement"],
            "runs": f"{cal['n_real']} / {cal['n_sim']}" + (
                " withheld" if r.get("withheld") else ""),
            "real p50": f"{cal['real_p50']:.4g} s",
            "calibrated": fmt_ratio(cal),
            "level": f"{cal['real_p50_level']:.2f}" + (" in" if cal["inside"] else " out"),
        }
        for base in BASELINES:
            if base in c:
                verdict = r["closer"][base]
                who = {"calibrated": "calibrated closer", "baseline": f"{base} closer"}
                row[base] = f"{fmt_ratio(c[base])} ({who.get(verdict, verdict)})"
            else:
                row[base] = "-"
        rows.append(row)
    return rows


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """The summary sentences every surface prints under the table."""
    s = doc["summary"]
    out = [f"calibrated: median |sim/real - 1| {100 * s['median_error']:.1f} % over "
           f"{s['programs']} program(s) (worst {100 * s['worst_error']:.1f} %), "
           f"{s['within_target']} within {100 * s['target_error']:.0f} %, real p50 inside the "
           f"simulated p05-p95 for {s['inside']}"]
    if s.get("dropped_runs"):
        out.append(f"{s['dropped_runs']} real run(s) left out of those programs: run quality "
                   "disturbed")
    held = [r for r in doc["programs"] if r.get("withheld")]
    if held:  # one line: on a machine with fewer cores than ranks, every such program is here
        names = "; ".join(f"{r['program']} ({r['withheld'].split(' real runs')[0]} waited)"
                          for r in held)
        out.append(f"withheld (not in the figures above): {len(held)} program(s) with fewer "
                   f"than 2 real runs that had their CPUs: {names}. First: {held[0]['withheld']}")
    for base in BASELINES:
        b = s.get(base) or {}
        if math.isfinite(b.get("median_error", math.nan)):
            out.append(f"{base}: median |sim/real - 1| {100 * b['median_error']:.1f} %; "
                       f"calibrated closer on {b['calibrated_closer']}, {base} closer on "
                       f"{b['baseline_closer']}, tie (within the noise) on {b['tie']}")
    return out
