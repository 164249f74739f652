"""Assemble the HTML report: one section per series, PNG figures next to ``index.html``.

A report is made either from a model file (its provenance names the dataset and series
whose samples are plotted under the curves) or from a dataset (every series, or the
selected ones, is fitted and validated here). Each series that cannot be fitted gets a
note in its section instead of aborting the whole report: a dataset often holds a few
aggregate-only series next to the raw ones.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from jinja2 import Environment, FileSystemLoader

from kit import __version__
from kit.core.atomicwrite import make_dirs, write_text
from kit.core.errors import ModelError, UserError
from kit.core.paths import PACKAGE_DIR
from kit.core.progress import track
from kit.data.figures import series_figures
from kit.figures.series import SeriesFigures
from kit.outputs.report.summary import TERMS, slugify, summarise

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel

TEMPLATE_DIR = PACKAGE_DIR / "templates" / "report"


@dataclass
class Section:
    """What the template shows for one series."""

    title: str
    slug: str
    provenance: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    regimes: list[dict[str, str]] = field(default_factory=list)
    images: list[dict[str, str]] = field(default_factory=list)
    validation: list[dict[str, str]] = field(default_factory=list)
    validation_columns: list[str] = field(default_factory=list)
    ranges: list[dict[str, str]] = field(default_factory=list)
    range_models: list[str] = field(default_factory=list)
    split: str = ""
    #: "How sure": one row per breakpoint / regime quantity (kit.model.uncertainty)
    intervals: list[dict[str, str]] = field(default_factory=list)
    intervals_note: str = ""
    #: run quality findings (kit.fit.runquality), one sentence each
    quality: list[str] = field(default_factory=list)
    #: The key numbers (kit.outputs.report.summary): the report's summary row and the series' card.
    summary: Any = None


def _g(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float | np.floating):
        return f"{v:.{digits}g}"
    return str(v)


def _size(v: float) -> str:
    return "∞" if not math.isfinite(v) else f"{v:,.0f}"


def regime_rows(model: RegimeModel, validation: Mapping[str, Any] | None = None
                ) -> list[dict[str, str]]:
    per_regime = (validation or {}).get("regimes") or []
    rows = []
    for k, r in enumerate(model.regimes_, start=1):
        v = per_regime[k - 1] if k - 1 < len(per_regime) else {}
        params = ", ".join(f"{n}={_g(float(v))}" for n, v in r.params.items())
        comps = getattr(r, "components", None) or []
        if comps:
            params += f"; mixture of {len(comps)} bands (shares " + ", ".join(
                _g(float(c.share), 2) for c in comps) + ")"
        q = getattr(r.noise, "quantiles", {}) or {}
        quant = " / ".join(
            f"{_g(q[p].get('fitted'), 3)} vs {_g(q[p].get('empirical'), 3)}"
            for p in ("p50", "p95", "p99") if p in q)
        ov = getattr(r, "overlap", None)
        overlap = "–" if ov is None else (
            f"{_size(float(ov.size_lo))}–{_size(float(ov.size_hi))} B, 50 % at "
            f"{_size(float(ov.center))} B")
        rows.append({"index": str(k), "sizes": f"{_size(float(r.size_min))} – "
                     f"{_size(float(r.size_max))}", "family": r.family, "params": params,
                     "noise": r.noise.family, "quantiles": quant or "–",
                     "n_samples": _g(getattr(r, "n_samples", None)),
                     "n_outliers": _g(getattr(r, "n_outliers", None)), "overlap": overlap,
                     "score": _regime_score(v, (validation or {}).get("best_baseline"))})
    return rows


def _regime_score(v: Mapping[str, Any], best: str | None) -> str:
    """Held-out score of a regime, beside the best honest baseline's (named)."""
    from kit.figures.baseline import name

    if "crps_over_floor" not in v:
        return "–"
    if best and "best_baseline_crps_over_floor" in v:
        return (f"{_g(v.get('crps_over_floor'), 3)} "
                f"({name(best)} {_g(v.get('best_baseline_crps_over_floor'), 3)})")
    return _g(v.get("crps_over_floor"), 3)


def _validation_part(section: Section, validation: Mapping[str, Any]) -> None:
    from kit.fit.validate import validation_table

    table = validation_table(validation)
    section.validation_columns = table.columns
    section.validation = [{c: _g(v, 3) for c, v in row.items()}
                          for row in table.iter_rows(named=True)]
    models = [m for m in validation["summary"] if m != "floor"]
    section.range_models = models
    section.ranges = [
        {"sizes": f"{_size(r['size_min'])} – {_size(r['size_max'])}",
         "n_sizes": str(r["n_sizes"]), "floor": _g(r["floor"], 3),
         **{m: _g(r[m]["crps_over_floor"], 3) for m in models if m in r}}
        for r in validation.get("ranges", [])]
    sp = validation.get("split", {})
    section.split = (f"{sp.get('method')}, {sp.get('test_fraction')} held out, seed "
                     f"{sp.get('seed')}, {sp.get('n_train')} training / {sp.get('n_test')} "
                     "held-out samples")


def series_section(out_dir: Path, model: RegimeModel, samples: pl.DataFrame | None, *,
                   title: str, provenance: Mapping[str, Any] | None = None,
                   validation: Mapping[str, Any] | None = None,
                   intervals: Mapping[str, Any] | None = None,
                   run_quality: Mapping[str, Any] | None = None,
                   aggregate: bool = False, figures: SeriesFigures | None = None) -> Section:
    """Write the series' PNGs into ``out_dir`` and return its section.

    ``samples``: every row of the series (:func:`samples_frame`: ``run_id``, ``seq``,
    ``size``, ``time``), drawn under the model; its measurement order gives the
    time-vs-sequence figure of run quality (not for ``aggregate`` rows, a tool's
    statistic per size: no measurement order). None: the plots show the model alone.
    ``figures`` (:func:`series_figures`): the series' latency, bandwidth, score and verdict
    as every surface shows them; without it, only the score and verdict of ``validation``.
    """
    from kit.fit.baselines import HockneyModel, RobustHockneyModel
    from kit.outputs.report import plots

    size = time = None
    if samples is not None:
        size, time = samples["size"].to_numpy(), samples["time"].to_numpy()
    slug = slugify(title)
    section = Section(title=title, slug=slug,
                      provenance={str(k): str(v) for k, v in (provenance or {}).items()})
    section.regimes = regime_rows(model, validation)
    if figures is None:
        figures = SeriesFigures.of({}, validation)
    section.summary = summarise(model, figures, title=title, slug=slug,
                                n_samples=model.n_samples_,
                                samples=(size, time) if size is not None and time is not None
                                else None)
    baselines = {}
    if size is not None and time is not None and size.size >= 2:
        baselines["robust Hockney (per-size medians)"] = RobustHockneyModel().fit(size, time)
        baselines["textbook line (per-size means)"] = HockneyModel().fit(size, time)
    else:
        section.notes.append("The samples of this series were not available: the plots show "
                             "the model alone.")
    scatter = plots.scatter_plot(out_dir / f"{slug}-scatter.png", model, size, time, title,
                                 baselines)
    section.images.append({"file": scatter.name, "caption": "Samples, regimes (shaded "
                           "alternately), fitted curves, model median and p05..p95 band, "
                           "overlap windows, robust Hockney (relative least squares on per-size "
                           "medians) and the textbook line (least squares on per-size means)."})
    if size is not None and time is not None and size.size >= 2:
        resid = plots.residual_plot(out_dir / f"{slug}-residuals.png", model, size, time,
                                    title)
        section.images.append({"file": resid.name, "caption": "Per regime: time / curve of "
                               "the samples on a log axis (share of samples per log bin), the "
                               "fitted noise, and draws from the model."})
        tails = plots.tail_plot(out_dir / f"{slug}-tails.png", model, size, time, title)
        section.images.append({"file": tails.name, "caption": "Per regime: share of samples "
                               "above each time / curve, samples beside the fitted noise "
                               "(log-log): where p95 and p99 are missed, the lines part."})
    if validation:
        _validation_part(section, validation)
        vplot = plots.validation_plot(out_dir / f"{slug}-validation.png", validation, title,
                                      breakpoints=list(model.breakpoints_))
        section.images.append({"file": vplot.name, "caption": "How close each model's "
                               "predicted distribution is to the held-out samples, as CRPS over "
                               "the floor (the held-out samples' own expected CRPS), pooled per "
                               "half-decade of size: 1 is as good as the data allow; the "
                               "baselines show what the regimes buy."})
    else:
        section.notes.append("No validation: the model file holds none and the samples were "
                             "not available to compute it.")
    _intervals_part(section, intervals)
    _quality_part(section, out_dir, slug, title, run_quality,
                  None if aggregate else samples)
    return section


def _intervals_part(section: Section, intervals: Mapping[str, Any] | None) -> None:
    """Rows "quantity: value [lo, hi]" from the model's bootstrap intervals."""
    from kit.model.uncertainty import format_interval

    if not intervals:
        section.notes.append("No intervals: the model was fitted with --no-intervals (or "
                             "before they existed); refit to see how sure each number is.")
        return
    section.intervals_note = (f"{int(float(intervals['level']) * 100)} % intervals, "
                              f"{intervals['resample']} bootstrap, {intervals['n_boot']} "
                              f"resamples of {intervals['n_units']} units")
    rows = [{"what": f"breakpoint {k + 1} [B]",
             "interval": format_interval(iv, "{:,.0f}".format)}
            for k, iv in enumerate(intervals.get("breakpoints", []))]
    for k, reg in enumerate(intervals.get("regimes", [])):
        name = f"regime {k + 1} ({reg.get('family')})"
        rows += [{"what": f"{name} {n}", "interval": format_interval(iv)}
                 for n, iv in reg.get("params", {}).items()]
        rows += [{"what": f"{name} noise {n}", "interval": format_interval(iv, "{:.3g}".format)}
                 for n, iv in reg.get("noise", {}).items()]
        rows += [{"what": f"{name} band {c + 1} share",
                  "interval": format_interval(iv, "{:.2f}".format)}
                 for c, iv in enumerate(reg.get("band_shares", []))]
    section.intervals = rows


def _quality_part(section: Section, out_dir: Path, slug: str, title: str,
                  quality: Mapping[str, Any] | None, samples: pl.DataFrame | None) -> None:
    """Run-quality sentences and the time-vs-sequence figure."""
    from kit.fit.runquality import assess_frame, overall_verdict, quality_lines
    from kit.measure.conditions import DISTURBED
    from kit.outputs.report import plots

    if samples is not None and samples.height >= 2 and "seq" in samples.columns:
        found = assess_frame(samples)
        if not quality:
            quality = found.to_dict()
        seqp = plots.sequence_plot(out_dir / f"{slug}-sequence.png",
                                   samples["run_id"].to_numpy(), samples["seq"].to_numpy(),
                                   samples["size"].to_numpy().astype(float),
                                   samples["time"].to_numpy(), found.disturbed, title)
        section.images.append({"file": seqp.name, "caption": "Time in measurement order, "
                               "relative to each run's quiet level at the same sizes (25 % "
                               "quantile per size bin); red: flagged as disturbed."})
    if not quality:
        return
    lines = quality_lines(quality)
    n_bad = int(quality.get("n_disturbed", 0))
    verdict = quality.get("verdict") or overall_verdict(quality.get("runs", []),
                                                        len(quality.get("windows", [])))
    head = (f"{n_bad} of {quality.get('n_samples')} samples flagged as disturbed, "
            + ("excluded from the fit" if quality.get("excluded") else "kept in the fit")
            if n_bad else f"{len(quality.get('runs', []))} run(s), no disturbed window found")
    section.quality = [f"run quality: {verdict}. {head}", *lines]
    if section.summary is not None:
        section.summary.conditions = verdict
    if verdict == DISTURBED:
        section.notes.insert(0, "Measured on a disturbed node (run quality below): the "
                             "numbers on this page describe the load as much as the network; "
                             "measure again on a quiet node before comparing them.")


def aggregate_note(stat: str, reported: Mapping[str, Any] | None = None) -> str:
    """What a section fitted to a tool's statistic must say before any figure; the
    messages' noise is what the tool reported (``provenance.reported_noise``), if it did."""
    summary = reported.get("summary") if isinstance(reported, Mapping) else None
    messages = f"that noise, {summary}." if isinstance(summary, str) and summary else \
        "which is unknown."
    return (f"Fitted to aggregates: each point is the tool's per-size {stat}, not one message. "
            "The curve and regimes are those of that statistic; the noise shown is its "
            f"spread across sizes and runs, not the messages' noise: {messages}")


def render(out_dir: Path, sections: list[Section], title: str, *,
           loggp: tuple[list[Any], list[str]] | None = None,
           contention: list[dict[str, Any]] | None = None,
           clusters: list[Any] | None = None,
           apps: dict[str, Any] | None = None) -> Path:
    """Write ``index.html`` (atomically) from the sections (and the LogGP part, if any:
    :func:`kit.outputs.report.loggp.loggp_part`'s tables and notes; the contention part:
    :func:`contention_part`'s groups)."""
    env = Environment(loader=FileSystemLoader(str(TEMPLATE_DIR)), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)
    blocks, loggp_notes = loggp if loggp is not None else ([], [])
    html = env.get_template("index.html.j2").render(
        loggp_blocks=blocks, loggp_notes=loggp_notes, contention=contention or [],
        clusters=clusters or [],
        apps=apps_part(apps) if apps else None,
        title=title, sections=sections, kit_version=__version__, terms=TERMS,
        summaries=[s.summary for s in sections if s.summary is not None],
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"))
    path = out_dir / "index.html"
    return write_text(path, html)


# --------------------------------------------------------------------------- data access


def samples_frame(dataset: Path | None, series: Mapping[str, Any]) -> pl.DataFrame | None:
    """Every row of one series (kit.data.dataset.series_frame: ``run_id``, ``seq``, ``size``,
    ``time``), disturbed windows included: the plots show what was measured, the
    time-vs-sequence figure marks what run quality left out. None without a dataset."""
    from kit.data import dataset as ds

    if dataset is None:
        return None
    keys = ds.resolve_series(dataset, ds.model_selector(series), aggregates=True,
                             where="series")
    frame = ds.series_frame(dataset, keys)
    return frame if frame.height else None


def _series_title(series: Mapping[str, Any]) -> str:
    """``campaign / probe / tcp / ... / 4 pairs / pingpong / raw``: k = 1 is not named."""
    from kit.data.schema import SERIES_KEYS, UNKNOWN, pairs_label

    words = [pairs_label(series.get(k)) if k == "pairs" else str(series[k])
             for k in SERIES_KEYS if series.get(k) not in (None, UNKNOWN, "")]
    return " / ".join(w for w in words if w)


def report_model_file(model_path: Path, out_dir: Path, *, dataset: Path | None = None) -> Path:
    """Report for one saved model; samples come from ``dataset`` or the model's provenance."""
    from kit.model.io import read_model

    fitted = read_model(model_path)
    model, prov = fitted.model, fitted.provenance
    series = fitted.series or {}
    ds_path = dataset or fitted.dataset
    frame = None
    make_dirs(out_dir)
    notes = []
    validation = fitted.validation or None
    figures = SeriesFigures.of({}, validation)
    try:
        frame = samples_frame(ds_path, series)
        figures = series_figures(ds_path, series, validation)
    except UserError as err:
        notes.append(f"Samples not loaded: {err.paragraph()}")
    title = _series_title(series or {}) or model_path.stem
    shown_prov = {"model": model_path, **{k: v for k, v in prov.items() if k != "series"}}
    extra: dict[str, Any] = {"intervals": fitted.intervals, "run_quality": fitted.run_quality,
                             "aggregate": fitted.aggregate}
    try:
        section = series_section(out_dir, model, frame, title=title,
                                 provenance=shown_prov, validation=validation,
                                 figures=figures, **extra)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError):
        # The file is untrusted and its stored validation is free-form JSON: a block that
        # does not have the shape kit.fit.validate writes is reported as such, not a traceback.
        if validation is None:
            raise
        notes.append("The model file's stored validation is not in the form 'pt2pt validate' "
                     "writes; it is not shown (re-run 'pt2pt validate' on the model).")
        section = series_section(out_dir, model, frame, title=title,
                                 provenance=shown_prov, validation=None, **extra)
    if fitted.aggregate:
        notes.insert(0, aggregate_note(str(series.get("stat", "aggregate")),
                                       prov.get("reported_noise")))
    section.notes[:0] = notes
    loggp = None
    if ds_path is not None and series:
        from kit.outputs.report.loggp import GROUP_KEYS, group_key, loggp_part

        group = {k: str(series[k]) for k in GROUP_KEYS if series.get(k) is not None}
        bps = None
        if series.get("op") == "pingpong" and len(group) == len(GROUP_KEYS):  # model's ranges
            bps = {group_key(group): list(model.breakpoints_)}
        loggp = loggp_part(Path(ds_path), group, breakpoints=bps)
    return render(out_dir, [section], f"pt2pt report: {title}", loggp=loggp)


def apps_part(doc: dict[str, Any]) -> dict[str, Any]:
    """The applications section from a ``pt2pt predict-app`` result (kit.outputs.predictapp:
    the same rows as its table, the same summary lines)."""
    from kit.outputs.predictapp import summary_lines, table_rows

    rows = table_rows(doc)
    headers = list(rows[0]) if rows else []
    return {"platform": doc.get("platform", ""), "statistic": doc.get("statistic", ""),
            "headers": headers, "rows": [[r[h] for h in headers] for r in rows],
            "lines": [*summary_lines(doc), *doc.get("notes", [])]}


def report_dataset(dataset: Path, out_dir: Path, *, series: Mapping[str, str] | None = None,
                   validate: bool = True, random_state: int = 0,
                   apps: dict[str, Any] | None = None) -> Path:
    """Fit (and validate) every series of ``dataset`` matching ``series``; one section each.
    ``apps``: a ``pt2pt predict-app`` result, shown as the applications section.

    Each series is fitted by kit.fit.fitting.fit_series with ``pt2pt fit``'s options: the
    section shows the model ``pt2pt fit`` writes for it."""
    from kit.data import dataset as ds
    from kit.data.schema import SERIES_KEYS
    from kit.data.series_keys import series_dict
    from kit.fit.fitting import FitOptions, fit_series

    table = ds.series_table(dataset).filter(pl.col("op") != "app")  # apps: predict-app
    for k, v in (series or {}).items():
        if k not in SERIES_KEYS:
            raise UserError(f"'{k}' is not a series key", where="option --series",
                            hint=f"use {', '.join(SERIES_KEYS)}")
        table = table.filter(pl.col(k) == v)
    if table.height == 0 and apps is None:
        raise UserError(f"no series in {dataset} matches {dict(series or {})}",
                        where="option --series", hint="list them with 'pt2pt fit --help' "
                        "or check the dataset path")
    make_dirs(out_dir)
    sections = []
    from kit.data.pairrows import CLUSTER_KEYS
    from kit.outputs.report.loggp import group_key, loggp_part
    from kit.outputs.report.pairmatrix import cluster_parts

    # A campaign over many node pairs is one cluster model (its pair matrix), not one
    # section per pair: 2,016 pairs of 64 nodes would be 2,016 fits.
    parts, covered = cluster_parts(dataset, out_dir, dict(series or {}))
    in_cluster = (pl.col("placement") == "inter-node") & (pl.col("pairs").cast(pl.String) == "1") \
        & pl.concat_str([pl.col(k).cast(pl.String) for k in CLUSTER_KEYS], separator="\x1f"
                        ).is_in(["\x1f".join(c) for c in covered])
    skipped = table.filter(in_cluster).height if covered else 0
    if covered:
        table = table.filter(~in_cluster)

    opts = FitOptions(aggregates=True, validate=validate, seed=random_state)
    pingpong_breaks: dict[tuple[str, ...], list[float]] = {}  # LogGP's size ranges
    # A bar on a terminal: each series is fitted and validated here (minutes for many).
    for row in track(table.iter_rows(named=True), "report", table.height,
                     lambda r: _series_title({k: r[k] for k in SERIES_KEYS})):
        sel = series_dict(row)
        title = _series_title(sel)
        try:
            fit = fit_series(dataset, sel, opts)
        except ModelError as err:
            sections.append(Section(title=title, slug=slugify(title),
                                    notes=[f"Not fitted: {err.paragraph()}"]))
            continue
        fitted = fit.fitted
        section = series_section(out_dir, fitted.model, ds.series_frame(dataset, sel),
                                 title=title, provenance={"dataset": dataset,
                                                          "samples": f"{len(fit.samples):,}"},
                                 validation=fitted.validation or None,
                                 intervals=fitted.intervals, run_quality=fitted.run_quality,
                                 aggregate=fit.samples.aggregate,
                                 figures=SeriesFigures.of(row, fitted.validation))
        section.notes += fit.notes
        if sel.get("stat") != ds.RAW:
            section.notes.insert(0, aggregate_note(str(sel.get("stat")),
                                                   fitted.provenance.get("reported_noise")))
        elif sel.get("op") == "pingpong":
            pingpong_breaks.setdefault(group_key(sel), list(fitted.model.breakpoints_))
        sections.append(section)
    loggp = loggp_part(dataset, series, breakpoints=pingpong_breaks, random_state=random_state)
    if skipped:
        for part in parts:
            part.notes.append(f"the {skipped} per-pair series of the clusters above are not "
                              "fitted one by one here: 'pt2pt fit DATASET --series "
                              "host_pair=A:B,...' fits one, the TUI's cluster view (ctrl+k) opens "
                              "a pair from its cell")
    return render(out_dir, sections, f"pt2pt report: {dataset.name}", loggp=loggp,
                  contention=contention_part(dataset, series), clusters=parts, apps=apps)


def contention_part(dataset: Path, series: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """The contention section's groups (title, headers, formatted rows, notes); empty when no
    series of the dataset differ only in k, and then the report has no such section."""
    from kit.analyses import contention as ct

    return [{"title": g.title, "headers": ct.headers(g), "rows": ct.table_rows(g),
             "notes": g.notes} for g in ct.contention(dataset, series)]
