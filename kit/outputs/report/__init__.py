"""HTML report of fitted series: regimes, noise, validation (:mod:`kit.outputs.report.build`)."""

from kit.outputs.report.build import (
    Section,
    render,
    report_dataset,
    report_model_file,
    series_section,
)

__all__ = ["Section", "render", "report_dataset", "report_model_file", "series_section"]
