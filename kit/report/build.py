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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from jinja2 import Environment, FileSystemLoader
from numpy.typing import NDArray

from kit import __version__
from kit.errors import ModelError, UserError
from kit.paths import PACKAGE_DIR

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


def slugify(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "series"


def _g(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float | np.floating):
        return f"{v:.{digits}g}"
    return str(v)


def _size(v: float) -> str:
    return "∞" if not math.isfinite(v) else f"{v:,.0f}"


def regime_rows(model: Any) -> list[dict[str, str]]:
    validation = getattr(model, "validation_", None) or {}
    per_regime = validation.get("regimes") or []
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
                     "score": (f"{_g(v.get('crps_over_floor'), 3)} "
                               f"(Hockney {_g(v.get('hockney_crps_over_floor'), 3)})"
                               if "crps_over_floor" in v else "–")})
    return rows


def _validation_part(section: Section, validation: Mapping[str, Any]) -> None:
    from kit.validate import validation_table

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


def series_section(out_dir: Path, model: Any, size: NDArray | None, time: NDArray | None, *,
                   title: str, provenance: Mapping[str, Any] | None = None,
                   validation: Mapping[str, Any] | None = None) -> Section:
    """Write the series' PNGs into ``out_dir`` and return its section."""
    from kit.baselines import HockneyModel
    from kit.report import plots

    slug = slugify(title)
    section = Section(title=title, slug=slug,
                      provenance={str(k): str(v) for k, v in (provenance or {}).items()})
    section.regimes = regime_rows(model)
    baselines = {}
    if size is not None and time is not None and size.size >= 2:
        baselines["Hockney"] = HockneyModel().fit(size, time)
    else:
        section.notes.append("The samples of this series were not available: the plots show "
                             "the model alone.")
    scatter = plots.scatter_plot(out_dir / f"{slug}-scatter.png", model, size, time, title,
                                 baselines)
    section.images.append({"file": scatter.name, "caption": "Samples, regimes (shaded "
                           "alternately), fitted curves, model median and p05..p95 band, "
                           "overlap windows, and the Hockney line."})
    if size is not None and time is not None and size.size >= 2:
        resid = plots.residual_plot(out_dir / f"{slug}-residuals.png", model, size, time,
                                    title)
        section.images.append({"file": resid.name, "caption": "Per regime: time / curve of "
                               "the samples, the fitted noise density, and draws from the "
                               "model."})
    if validation:
        _validation_part(section, validation)
        vplot = plots.validation_plot(out_dir / f"{slug}-validation.png", validation, title)
        section.images.append({"file": vplot.name, "caption": "Distributional score per "
                               "size on held-out samples: model, baselines and floor."})
    else:
        section.notes.append("No validation: the model file holds none and the samples were "
                             "not available to compute it.")
    return section


def render(out_dir: Path, sections: list[Section], title: str) -> Path:
    """Write ``index.html`` (atomically) from the sections."""
    env = Environment(loader=FileSystemLoader(str(TEMPLATE_DIR)), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)
    html = env.get_template("index.html.j2").render(
        title=title, sections=sections, kit_version=__version__,
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"))
    path = out_dir / "index.html"
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
    return path


# --------------------------------------------------------------------------- data access


def series_frame(dataset: Path, series: Mapping[str, Any]) -> pl.DataFrame:
    """``size``, ``time``, ``run_id`` of one series (non-warm-up rows, positive times)."""
    from kit import dataset as ds
    from kit.schema import SERIES_KEYS

    lf = ds.scan(dataset).filter(~pl.col("warmup"))
    for k in SERIES_KEYS:
        if k in series and series[k] is not None:
            lf = lf.filter(pl.col(k).cast(pl.String) == str(series[k]))
    frame = lf.filter(pl.col("time") > 0).select("size", "time", "run_id").collect()
    if frame.height == 0:
        raise UserError(f"no samples for series {dict(series)}", where=str(dataset),
                        hint="check the dataset path and the series selection")
    return frame


def series_samples(dataset: Path, series: Mapping[str, Any]) -> tuple[NDArray, NDArray]:
    """Sizes and times of one series as float arrays."""
    frame = series_frame(dataset, series)
    return (frame["size"].to_numpy().astype(np.float64),
            frame["time"].to_numpy().astype(np.float64))


def _series_title(series: Mapping[str, Any]) -> str:
    return " / ".join(str(series[k]) for k in ("campaign", "tool", "transport", "op", "stat")
                      if series.get(k) is not None)


def report_model_file(model_path: Path, out_dir: Path, *, dataset: Path | None = None) -> Path:
    """Report for one saved model; samples come from ``dataset`` or the model's provenance."""
    from kit.model.io import load_model

    model = load_model(model_path)
    prov = dict(getattr(model, "provenance_", None) or {})
    series = prov.get("series") if isinstance(prov.get("series"), dict) else {}
    ds_path = dataset or (Path(prov["dataset"]) if prov.get("dataset") else None)
    size = time = None
    out_dir.mkdir(parents=True, exist_ok=True)
    notes = []
    if ds_path is not None:
        try:
            size, time = series_samples(ds_path, series or {})
        except UserError as err:
            notes.append(f"Samples not loaded: {err.paragraph()}")
    validation = getattr(model, "validation_", None) or None
    title = _series_title(series or {}) or model_path.stem
    section = series_section(out_dir, model, size, time, title=title,
                             provenance={"model": model_path, **{k: v for k, v in prov.items()
                                                                 if k != "series"}},
                             validation=validation)
    section.notes[:0] = notes
    return render(out_dir, [section], f"pt2pt report: {title}")


def report_dataset(dataset: Path, out_dir: Path, *, series: Mapping[str, str] | None = None,
                   validate: bool = True, random_state: int = 0) -> Path:
    """Fit (and validate) every series of ``dataset`` matching ``series``; one section each."""
    from kit import dataset as ds
    from kit.model import RegimeModel
    from kit.schema import SERIES_KEYS
    from kit.validate import validate_into

    table = ds.series_table(dataset)
    for k, v in (series or {}).items():
        if k not in SERIES_KEYS:
            raise UserError(f"'{k}' is not a series key", where="option --series",
                            hint=f"use {', '.join(SERIES_KEYS)}")
        table = table.filter(pl.col(k) == v)
    if table.height == 0:
        raise UserError(f"no series in {dataset} matches {dict(series or {})}",
                        where="option --series", hint="list them with 'pt2pt fit --help' "
                        "or check the dataset path")
    out_dir.mkdir(parents=True, exist_ok=True)
    sections = []
    for row in table.iter_rows(named=True):
        sel = {k: row[k] for k in SERIES_KEYS}
        title = _series_title(sel)
        size, time = series_samples(dataset, sel)
        try:
            model = RegimeModel(random_state=random_state).fit(size, time)
            validation = None
            if validate:
                validation = validate_into(model, size, time, random_state=random_state)
        except ModelError as err:
            sections.append(Section(title=title, slug=slugify(title),
                                    notes=[f"Not fitted: {err.paragraph()}"]))
            continue
        sections.append(series_section(out_dir, model, size, time, title=title,
                                       provenance={"dataset": dataset,
                                                   "samples": f"{size.size:,}"},
                                       validation=validation))
    return render(out_dir, sections, f"pt2pt report: {dataset.name}")
