"""The guard of issue 59: one series, one model, whichever surface fits it.

A 4,000-sample series with a stretch of samples ten times slower (a busy node): ``pt2pt fit``
left those samples out while the TUI and ``pt2pt report`` fitted all 4,000, and the TUI's
median at 64 KiB came out 4.5 % higher. Every surface now fits through
kit.fit.fitting.fit_series / fit_read; here each is run through its own entry point and its
model compared byte for byte (kit.model.io.dumps) with the file ``pt2pt fit`` writes. The
fits are real: the spies below only record what fit_read returned (or, for ``simulate``,
which rows it read before SimGrid would start).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kit.data import dataset as ds
from kit.data.ingest import ingest
from kit.model.io import dumps, read_model

N = 4000
SLOW = (2500, 3300)  # rows in measurement order, ten times slower


@pytest.fixture(scope="module")
def disturbed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(59)
    size = np.floor(np.exp(rng.uniform(0, np.log(2**22), N)))
    time = (4e-6 + size / 2e9) * rng.lognormal(0.0, 0.1, N)
    time[SLOW[0]:SLOW[1]] *= 10.0
    root = tmp_path_factory.mktemp("onefit")
    csv = root / "run.csv"
    csv.write_text("size,duration\n" + "".join(f"{int(s)},{t:.9e}\n"
                                               for s, t in zip(size, time, strict=True)))
    dataset = root / "ds"
    report = ingest([csv], dataset, campaign="busy", transport="tcp")
    assert not report.files_failed
    return dataset


@pytest.fixture(scope="module")
def fitted_by_fit(disturbed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kit.cli import main

    out = tmp_path_factory.mktemp("fit") / "model.json"
    assert main(["fit", str(disturbed), "-o", str(out)]) == 0
    return out


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record every FitResult kit.fit.fitting.fit_read returns (the fit itself is real)."""
    from kit.fit import fitting

    results: list[Any] = []
    real = fitting.fit_read

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        results.append(result)
        return result

    monkeypatch.setattr(fitting, "fit_read", spy)
    return results


def test_fit_leaves_the_disturbed_window_out(fitted_by_fit: Path) -> None:
    fitted = read_model(fitted_by_fit)
    assert fitted.run_quality["excluded"] and fitted.run_quality["n_disturbed"] >= 600
    assert fitted.provenance["n_samples"] == N - fitted.run_quality["n_disturbed"]


def test_fit_all_and_demo_write_the_same_bytes(disturbed: Path, fitted_by_fit: Path,
                                               tmp_path: Path) -> None:
    from kit.cli import main
    from kit.outputs import demo

    expected = fitted_by_fit.read_bytes()
    assert main(["fit", str(disturbed), "--all", "--jobs", "1", "-o", str(tmp_path / "all")]) == 0
    (batch,) = (tmp_path / "all").glob("*.json")
    assert batch.read_bytes() == expected
    results = demo.fit_all(disturbed, tmp_path / "demo")  # worker processes, like the demo
    (result,) = results
    assert result.model_path is not None and result.model_path.read_bytes() == expected


def test_report_tui_diff_fit_the_same_model(disturbed: Path, fitted_by_fit: Path,
                                            tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from kit.analyses import diff
    from kit.outputs.report.build import regime_rows, report_dataset
    from tui import data
    from tui import fitting as tui_fitting

    saved = read_model(fitted_by_fit)
    expected = dumps(saved.model)
    results = _spy(monkeypatch)
    page = report_dataset(disturbed, tmp_path / "report").read_text(encoding="utf-8")
    (report_fit,) = results
    assert dumps(report_fit.model) == expected
    assert report_fit.fitted.validation == saved.validation
    for row in regime_rows(saved.model, saved.validation):  # what the page shows is this model
        assert row["params"].replace("'", "&#39;") in page

    (row,) = data.series_rows(disturbed)
    samples = data.load_samples(disturbed, row.key)
    assert len(samples) == saved.provenance["n_samples"]  # the TUI shows the fitted rows
    model = tui_fitting.fit(samples)
    assert dumps(model) == expected
    validation = json.loads(json.dumps(tui_fitting.validate(model, samples)))
    assert validation == saved.validation

    side = diff.load_side(str(disturbed))
    assert dumps(diff._fit(side, 0)) == expected
    assert side.n == saved.provenance["n_samples"]


def test_simulate_reads_the_fitted_rows(disturbed: Path, fitted_by_fit: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from kit.fit import fitting
    from kit.outputs.simulate import simulate_against

    saved = read_model(fitted_by_fit)
    read: list[Any] = []

    class Stop(Exception):
        pass

    def spy(*args: Any, **kwargs: Any) -> Any:
        read.append(real(*args, **kwargs))
        raise Stop  # before SimGrid: the rows are what this test is about

    real = fitting.read_series
    monkeypatch.setattr(fitting, "read_series", spy)
    with pytest.raises(Stop):
        simulate_against(saved.model, disturbed, series=ds.model_selector(saved.series))
    monkeypatch.undo()
    (rows,) = read
    assert len(rows) == saved.provenance["n_samples"]
    assert rows.frame.equals(fitting.read_model_series(saved).frame)
