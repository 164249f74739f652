"""HTML report of fitted series: regimes, noise, validation (see :mod:`kit.report.build`)."""

from kit.report.build import Section, render, report_dataset, report_model_file, series_section

__all__ = ["Section", "render", "report_dataset", "report_model_file", "series_section"]
