"""``pt2pt fit DATASET -o model.json``: fit the regime model to one series of a dataset."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kit.core import argtypes
from kit.core.errors import ModelError, UserError

if TYPE_CHECKING:
    from kit.fit.fitting import FitOptions
    from kit.fit.runquality import RunQuality
    from kit.model.contract import ModelFile


def _sizes_list(text: str, where: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"cannot read {text!r} as comma-separated sizes in bytes", where=where,
                        hint="e.g. 1420,65536") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fit", help="fit per-regime models with noise to one series of a dataset",
        description="Segment the series on log(size) (number of regimes by BIC), pick a family "
        "per regime (constant, linear, power), fit two-band mixtures, overlaps and noise, and "
        "write the model as JSON. With a single series in the dataset no --series is needed.")
    parser.add_argument("dataset", type=Path, metavar="DATASET", help="dataset folder")
    parser.add_argument("--series", metavar="KEY=V,...",
                        help="select one series: campaign=..,tool=..,transport=..,"
                        "placement=..,host_pair=..,op=..,stat=..")
    parser.add_argument("--aggregates", action="store_true",
                        help="allow a series of a tool's statistics (OSU mean/percentiles, "
                        "SkaMPI averages, logp): the model then describes that statistic, "
                        "its noise is unknown, and the model file says so")
    parser.add_argument("--breakpoints", metavar="B1,B2,..",
                        help="fix the regime boundaries (bytes) instead of searching them")
    parser.add_argument("--max-regimes", type=argtypes.regimes, default=6, metavar="N",
                        help="most regimes the search may use (default 6)")
    parser.add_argument("--min-support", type=argtypes.support, default=None, metavar="N",
                        help="fewest samples per regime (default: max(20, 1%% of samples))")
    parser.add_argument("--no-overlap", action="store_true", help="sharp boundaries only")
    parser.add_argument("--no-mixture", action="store_true", help="no two-band regimes")
    parser.add_argument("--seed", type=argtypes.seed, default=0,
                        help="random state for subsampling/EM")
    parser.add_argument("--keep-disturbed", action="store_true",
                        help="fit disturbed windows and runs too (default: run quality "
                        "excludes them; see docs/architecture.md 'Run quality')")
    parser.add_argument("--keep-carry-over", action="store_true",
                        help="fit the samples slowed by the bytes an earlier send/isend of the "
                        "same run left in flight too (default: left out when slower; see "
                        "docs/architecture.md 'Carry-over')")
    parser.add_argument("--no-intervals", action="store_true",
                        help="skip the bootstrap intervals on breakpoints, parameters and noise")
    parser.add_argument("--no-validate", action="store_true",
                        help="skip the held-out comparison with the honest baselines")
    parser.add_argument("--max-samples", type=argtypes.sample_cap, default=None, metavar="N",
                        help="fit a series of more than N raw rows on a uniform, "
                        "deterministic subsample of about N rows, read while streaming, so "
                        "memory stays bounded (default 4000000; 0: every row)")
    parser.add_argument("--all", action="store_true",
                        help="fit every series of the dataset (those matching --series, if "
                        "given) in parallel, one model per series into the folder -o names; "
                        "one series' failure is reported and the others' models are kept")
    parser.add_argument("--jobs", type=argtypes.jobs, default=None, metavar="N",
                        help="with --all: processes fitting at once (default: all cores)")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="MODEL.json",
                        help="where to write the model (with --all: a folder, one "
                        "CAMPAIGN__TOOL__...__STAT.json per series)")
    parser.set_defaults(func=run)


def _options(args: argparse.Namespace) -> FitOptions:
    from kit.fit.fitting import MAX_FIT_SAMPLES, FitOptions

    if args.max_regimes < 1:
        raise UserError("must be at least 1", where="--max-regimes")
    if args.max_samples is not None and 0 < args.max_samples < 1000:
        raise UserError("must be 0 (every row) or at least 1000", where="--max-samples")
    bps = tuple(_sizes_list(args.breakpoints, "--breakpoints")) if args.breakpoints else None
    return FitOptions(aggregates=args.aggregates, breakpoints=bps, max_regimes=args.max_regimes,
                      min_support=args.min_support, overlap=not args.no_overlap,
                      mixture=not args.no_mixture, seed=args.seed,
                      keep_disturbed=args.keep_disturbed,
                      keep_carry_over=args.keep_carry_over, intervals=not args.no_intervals,
                      validate=not args.no_validate,
                      max_samples=MAX_FIT_SAMPLES if args.max_samples is None
                      else args.max_samples)


def run(args: argparse.Namespace) -> int:
    from kit.core.progress import bar
    from kit.data.dataset import parse_selector, require_ingested
    from kit.fit.fitting import fit_series
    from kit.model.io import write_model

    opts = _options(args)
    if args.jobs is not None and args.jobs < 1:
        raise UserError("must be at least 1", where="--jobs")
    require_ingested(args.dataset)
    if args.all:
        return run_all(args, opts)
    if args.jobs is not None:
        raise UserError("--jobs applies to --all only", where="--jobs",
                        hint="add --all to fit every series in parallel")
    chosen = _resolve(args.dataset, parse_selector(args.series), args.aggregates)
    # No count to show inside a fit: a pulsing bar with the elapsed time says it is working.
    with bar("fit", description=f"{args.dataset}: regimes, families and noise"):
        result = fit_series(args.dataset, chosen, opts)
    for note in result.notes:
        print(note, file=sys.stderr)
    fitted, quality = result.fitted, result.quality
    model = fitted.model
    write_model(fitted, args.output)
    regimes = ", ".join(f"[{r.size_min:.0f}, {r.size_max:.0f}) {r.family}"
                        + (" 2-band" if r.is_mixture else "") for r in model.regimes_)
    print(f"{args.output}: {len(model.regimes_)} regime(s): {regimes}; "
          f"{model.n_outliers_} outlier(s) of {model.n_samples_} samples", file=sys.stderr)
    prov = fitted.provenance
    if prov.get("quantity"):
        print(f"{args.output}: time here is the {prov['quantity']}", file=sys.stderr)
    if fitted.aggregate:
        print(f"{args.output}: fitted to aggregates ({prov.get('statistic')} per size), not "
              f"to single messages: noise {prov.get('noise') or 'unknown'}", file=sys.stderr)
    if prov.get("per_size_dropped"):
        print(f"{args.output}: {prov['per_size_dropped']}", file=sys.stderr)
    per_size = getattr(model, "per_size_", None)
    if per_size is not None:  # the per-size variance components, in words
        for line in per_size.describe():
            print(f"  {line}", file=sys.stderr)
    for line in _summary(fitted, quality):
        print(line, file=sys.stderr)
    for line in _figures(args.dataset, chosen, fitted.validation):
        print(line, file=sys.stderr)
    return 0


def _figures(dataset: Path, series: dict[str, str], validation: dict[str, Any]) -> list[str]:
    """The series' figures as every surface shows them (kit.figures), and the verdict."""
    from kit.data.figures import series_figures

    figures = series_figures(dataset, series, validation)
    lines = [f"{figures.latency_label()}: {figures.latency_text()}; "
             f"{figures.bandwidth_label()}: {figures.bandwidth_text()} (measured medians, "
             "95 % intervals)"]
    if figures.score is not None:
        lines.append(f"score {figures.score_text()}; best baseline {figures.best_text()}")
    if figures.verdict:
        lines.append(f"verdict: {figures.verdict}")
    note = figures.score_note()
    if note:
        lines.append(f"score {figures.score_text()}: {note}")
    return lines


def _summary(fitted: ModelFile, quality: RunQuality | None) -> list[str]:
    """What the fit found beyond the regimes: run quality, baselines, intervals."""
    from kit.figures.baseline import name
    from kit.figures.score import LEGEND, Score, format_score

    lines: list[str] = []
    found = quality.lines() if quality is not None else []
    if quality is None:
        lines.append("run quality: not assessed (aggregates carry no measurement order)")
    elif quality.n_disturbed:
        what = ("kept (--keep-disturbed)" if not quality.excluded
                else "excluded from the fit")
        lines.append(f"run quality: {quality.verdict}: {quality.n_disturbed} of "
                     f"{len(quality.disturbed)} samples disturbed, {what}:")
    else:
        lines.append(f"run quality: {quality.verdict}: {len(quality.runs)} run(s), no "
                     "disturbed window found")
    lines += [f"  {line}" for line in found]
    validation = fitted.validation
    if validation.get("summary"):
        from kit.fit.validate import validation_table

        lines.append(f"held-out scores ({LEGEND}; relative median and p95 errors; best "
                     "baseline first):")
        for row in validation_table(validation).iter_rows(named=True):
            if row["model"] == "floor":
                continue
            score = format_score(Score(float(row["crps_over_floor"]),
                                       row["crps_over_floor_se"]))
            lines.append(f"  {name(str(row['model'])):<15} score {score:<12} "
                         f"median err {_pct(row['median_err'])}  p95 err "
                         f"{_pct(row['p95_err'])}  ({row['what']})")
        lines += _cost("validation", "the refit on the training split and the scores",
                       "--no-validate")
    intervals = fitted.intervals
    if intervals:
        from kit.model.uncertainty import summary_lines

        lines += summary_lines(intervals)
        lines += _cost("intervals", "the bootstrap", "--no-intervals")
    return lines


def _cost(part: str, what: str, flag: str) -> list[str]:
    """What an optional part of the fit cost, next to the flag that skips it."""
    from kit.core.cost import spent

    cpu = spent(part)
    return [] if cpu is None else [f"  ({what}: {cpu:.2f} CPU-s; {flag} skips it)"]


def _pct(v: Any) -> str:
    return "-" if v is None or not math.isfinite(float(v)) else f"{100 * float(v):.3g} %"


def _resolve(dataset: Path, selector: dict[str, str], aggregates: bool) -> dict[str, str]:
    """The one series the selector names, without reading its rows (a series may hold 10^8:
    kit.fit.fitting reads what the fit needs); kit.data.dataset.resolve_series words the
    errors."""
    from kit.data.dataset import resolve_series

    chosen = resolve_series(dataset, selector, aggregates=aggregates)
    if chosen.get("op") == "app":
        raise ModelError(f"{chosen.get('program')}: an application's runs are compared "
                         "with its simulations, not fitted", where="option --series",
                         hint="pt2pt predict-app DATASET --platform DIR")
    return chosen


def run_all(args: argparse.Namespace, opts: FitOptions) -> int:
    """``fit --all``: every matching series, in parallel; exit 1 when any series failed."""
    import polars as pl

    from kit.core.progress import bar
    from kit.data.dataset import describe, matching_series, parse_selector
    from kit.data.series_keys import series_dict
    from kit.fit.fitall import SeriesFit, fit_all

    if args.output.exists() and not args.output.is_dir():
        raise UserError(f"{args.output} exists and is not a folder", where="-o/--output",
                        hint="with --all, -o names a folder that receives one model per series")
    found = matching_series(args.dataset, parse_selector(args.series), aggregates=args.aggregates)
    found = found.filter(pl.col("op") != "app")  # applications: pt2pt predict-app
    if found.height == 0:
        raise ModelError("no series to fit" + (f" match {args.series}" if args.series else ""),
                         where=str(args.dataset),
                         hint="list the series with 'pt2pt datasets'; series of aggregates "
                         "only are fitted with --aggregates")
    # Largest first: the long fits start at once and the short ones fill the gaps.
    rows = sorted(found.iter_rows(named=True), key=lambda r: -int(r["n"]))
    series = [series_dict(r) for r in rows]
    with bar("fit --all", total=len(series), description=str(args.dataset)) as shown:
        def on_done(done: int, total: int, res: SeriesFit) -> None:
            shown.update(completed=done)
            what = (f"{res.path} ({res.n_rows} samples, {res.cpu_s:.1f} CPU-s)" if res.ok
                    else f"FAILED: {res.error}")
            line = f"[{done}/{total}] {describe(res.series)}: {what}"
            if res.ok:
                shown.print(line)
                for note in res.notes:
                    shown.print(f"  {note}")
            else:  # errors are printed even with --quiet
                print(line, file=sys.stderr, flush=True)

        results = fit_all(args.dataset, series, args.output, opts, jobs=args.jobs,
                          on_done=on_done)
    failed = [r for r in results if not r.ok]
    print(f"{args.output}: {len(results) - len(failed)} of {len(results)} series fitted"
          + (f", {len(failed)} failed (listed above)" if failed else ""), file=sys.stderr)
    return 1 if failed else 0
