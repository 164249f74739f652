"""A fit never writes a model its own reader refuses (kit.model.schema.check_physical).

Seen on a busy machine (the demo at load 15-20): sizes whose samples split between a
microsecond body and 10-30 ms scheduler hiccups got per-size tails of 10^9 s at p97 (the
typical size's tail scaled by that size's own, bimodal, spread), and `pt2pt demo`'s
models were refused by `pt2pt predict`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kit.core.errors import ModelError
from kit.fit.fitting import FitOptions, SeriesSamples, fit_samples
from kit.model.io import read_model, write_model


def _busy_series(seed: int) -> SeriesSamples:
    """Log-uniform sizes, a latency/bandwidth curve, lognormal noise; at a few sizes a
    share of the samples are scheduler hiccups of 10-30 ms."""
    rng = np.random.default_rng(seed)
    sizes = np.round(np.exp(rng.uniform(0, np.log(4 << 20), 3000)))
    # a few sizes repeated, as a probe plan's small sizes are
    sizes[:600] = rng.choice([1, 8, 22, 43, 64, 128], 600)
    time = (5e-6 + sizes / 2e8) * rng.lognormal(0, 0.1, len(sizes))
    hiccup = (sizes <= 128) & (rng.random(len(sizes)) < 0.3)
    time[hiccup] = rng.uniform(0.01, 0.03, hiccup.sum())
    return SeriesSamples.of_arrays(sizes, time)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_busy_series_fits_to_a_model_its_reader_accepts(seed: int, tmp_path: Path) -> None:
    fitted = fit_samples(_busy_series(seed), FitOptions(intervals=False, validate=False))
    # the per-size layer kept: its tails stay near what the sizes' samples say
    assert "per_size_dropped" not in fitted.provenance, fitted.provenance["per_size_dropped"]
    path = write_model(fitted, tmp_path / "m.json")
    model = read_model(path).model  # the gate of every read
    q = model.predict_quantiles(np.array([1.0, 22.0, 43.0, 4096.0]), [0.05, 0.5, 0.95])
    assert np.all(q < 1.0)  # no message of this series took a second


def test_a_refused_per_size_layer_is_left_out_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    from kit.model import schema

    real = schema.check_physical

    def refuse_layers(model: object, where: str) -> None:
        ps = getattr(model, "per_size_", None)
        if ps is not None and ps.estimated:
            raise ModelError("predicts 1e9 s at 43 B", where=where)
        real(model, where)

    monkeypatch.setattr(schema, "check_physical", refuse_layers)
    fitted = fit_samples(_busy_series(0), FitOptions(intervals=False, validate=False))
    assert fitted.model.per_size_ is None
    assert "per-size layer left out" in fitted.provenance["per_size_dropped"]


def test_a_model_refused_even_without_its_layer_is_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kit.model import schema

    def refuse(model: object, where: str) -> None:
        raise ModelError("predicts 1e9 s", where=where)

    monkeypatch.setattr(schema, "check_physical", refuse)
    with pytest.raises(ModelError, match="not physical"):
        fit_samples(_busy_series(0), FitOptions(intervals=False, validate=False))


def test_the_fit_command_says_the_layer_was_left_out(
        refdata_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from kit.cli import main
    from kit.data.ingest import ingest
    from kit.model import schema

    ds = tmp_path / "dataset"
    ingest([refdata_dir / "platform-calibration/graphene_eth_example/graphene_eth_PingPong.csv"],
           ds, campaign="graphene", transport="tcp")
    real = schema.check_physical

    def refuse_layers(model: object, where: str) -> None:
        ps = getattr(model, "per_size_", None)
        if ps is not None and ps.estimated:
            raise ModelError("predicts 1e9 s at 43 B", where=where)
        real(model, where)

    monkeypatch.setattr(schema, "check_physical", refuse_layers)
    out = tmp_path / "m.json"
    assert main(["fit", str(ds), "-o", str(out), "--no-intervals", "--no-validate"]) == 0
    assert "per-size layer left out: with it, predicts 1e9 s at 43 B" in capsys.readouterr().err
    monkeypatch.setattr(schema, "check_physical", real)
    assert read_model(out).model.per_size_ is None
