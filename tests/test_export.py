"""SimGrid export: factor-string syntax and lookup, and the round trip of a fitted model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from kit.cli import main
from kit.core.errors import ModelError
from kit.fit import synth
from kit.model import RegimeModel
from kit.outputs.export.simgrid import (
    LINE_TOLERANCE,
    FactorEntry,
    SimgridExport,
    export_simgrid,
    factor_at,
    format_factor,
    linear_pieces,
    overhead_string,
    overheads_from_simgrid,
    parse_factor,
    regimes_from_simgrid,
)
from tests.builders import linear_overhead_model, three_linear_regimes


def test_format_and_parse_are_inverse_and_sorted() -> None:
    entries = [FactorEntry(65472, (11.6436,)), FactorEntry(0, (2.01467,)),
               FactorEntry(1426, (1.61075,))]
    text = format_factor(entries)
    assert text == "0:2.01467;1426:1.61075;65472:11.6436"
    single, parsed = parse_factor(text)
    assert single is None
    assert parsed == sorted(entries, key=lambda e: e.bound)
    # SimGrid's own default string (Stampede) parses, whatever the order of its chunks.
    _, stampede = parse_factor("65472:11.6436;15424:3.48845;9376:2.59299;0:2.01467")
    assert [e.bound for e in stampede] == [0, 9376, 15424, 65472]
    assert parse_factor("1.5") == (1.5, [])
    _, os_entries = parse_factor("1:3:2;10:5:1")
    assert os_entries[1].values == (5.0, 1.0)


@pytest.mark.parametrize("bad", ["abc", "10:x", "x:1", "10:"])
def test_malformed_strings_are_user_errors(bad: str) -> None:
    with pytest.raises(ModelError):
        parse_factor(bad, option="network/latency-factor")


def test_lookup_uses_the_largest_bound_strictly_below_the_size() -> None:
    _, entries = parse_factor("0:1.0;100:2.0;1000:3.0")
    default = (9.0,)
    assert factor_at(entries, 0, default) == default  # at the first bound: default
    assert factor_at(entries, 1, default) == (1.0,)
    assert factor_at(entries, 100, default) == (1.0,)  # equal to a bound: previous entry
    assert factor_at(entries, 101, default) == (2.0,)
    assert factor_at(entries, 1000, default) == (2.0,)
    assert factor_at(entries, 1001, default) == (3.0,)
    assert factor_at(entries, 10**9, default) == (3.0,)


@pytest.fixture(scope="module")
def linear_model() -> RegimeModel:
    return three_linear_regimes(1e-10)


def _simgrid_time(result: SimgridExport, latency: float, bandwidth: float, s: float) -> float:
    """One idle-route transfer as SimGrid computes it: L*lat(s) + s/(B*bw(s))."""
    _, lat = parse_factor(result.latency_factor)
    _, bw = parse_factor(result.bandwidth_factor)
    return latency * factor_at(lat, s, (1.0,))[0] + s / (bandwidth * factor_at(bw, s, (1.0,))[0])


def test_export_of_a_fitted_model_parses_back_to_its_regimes(linear_model: RegimeModel) -> None:
    m = linear_model
    result = export_simgrid(m, latency=10e-6, bandwidth=1.25e9, envelope=0, center="curve")
    pieces = regimes_from_simgrid(result.latency_factor, result.bandwidth_factor, 10e-6, 1.25e9)
    assert len(pieces) == len(m.regimes_)
    for k, (piece, regime) in enumerate(zip(pieces, m.regimes_, strict=True)):
        if k:
            assert piece.size_min == math.ceil(regime.size_min)
        assert regime.family == "linear"
        assert piece.a == pytest.approx(regime.params["a"], rel=1e-8)
        assert piece.b == pytest.approx(regime.params["b"], rel=1e-8)
    # What SimGrid would compute equals the model's curve on both sides of each boundary.
    for bp in m.breakpoints_:
        for s in (math.ceil(bp) - 1, math.ceil(bp), math.ceil(bp) + 1):
            want = float(m.curve(np.array([float(s)]))[0])
            assert _simgrid_time(result, 10e-6, 1.25e9, s) == pytest.approx(want, rel=1e-8)


def test_defaults_make_the_nominal_route_the_model_itself(linear_model: RegimeModel) -> None:
    result = export_simgrid(linear_model, envelope=0, center="curve")
    pieces = linear_pieces(linear_model)
    assert result.latency == pytest.approx(pieces[0].a)
    assert result.bandwidth == pytest.approx(1 / pieces[-1].b)
    _, lat = parse_factor(result.latency_factor)
    assert lat[0].values[0] == pytest.approx(1.0)  # size 0 gets the default: no error there


def test_overhead_strings_round_trip(linear_model: RegimeModel) -> None:
    text = overhead_string(linear_model)
    pieces = overheads_from_simgrid(text)
    for piece, regime in zip(pieces, linear_model.regimes_, strict=True):
        assert piece.a == pytest.approx(regime.params["a"], rel=1e-8)
        assert piece.b == pytest.approx(regime.params["b"], rel=1e-8)
    small = linear_overhead_model(2e-6, 1e-11)
    result = export_simgrid(linear_model, send_model=small, recv_model=small)
    assert result.config["smpi/os"] == overhead_string(small) == result.config["smpi/or"]


def test_power_and_constant_regimes_export_within_tolerance() -> None:
    truth = synth.Truth([
        synth.TrueRegime(1, "constant", {"a": 15e-6}, synth.TrueNoise("lognormal", 0.04)),
        synth.TrueRegime(2048, "power", {"a": 2e-6, "b": 0.45}, synth.TrueNoise("lognormal", 0.04)),
    ])
    size, time = synth.sample(truth, 2000, grid=30, lo=1, hi=2**20, seed=2)
    m = RegimeModel(breakpoints=[2048], families=["constant", "power"], mixture=False,
                    overlap=False).fit(size, time)
    result = export_simgrid(m, latency=10e-6, bandwidth=1e9, envelope=0, center="curve")
    grid = np.unique(np.geomspace(1, 2**20, 400).round())
    sim = np.array([_simgrid_time(result, 10e-6, 1e9, s) for s in grid])
    curve = m.curve(grid)
    assert np.max(np.abs(sim - curve) / curve) < LINE_TOLERANCE + 1e-3
    # The power regime needed several entries; the constant one a single entry.
    regimes = [seg["regime"] for seg in result.document["segments"]]
    assert regimes.count(0) == 1 and regimes.count(1) > 2
    pieces = regimes_from_simgrid(result.latency_factor, result.bandwidth_factor, 10e-6, 1e9)
    assert len(pieces) == len(regimes)
    assert pieces[1].size_min == math.ceil(m.breakpoints_[0])


def test_write_creates_config_and_noise_json(linear_model: RegimeModel, tmp_path: Path) -> None:
    result = export_simgrid(linear_model, latency=10e-6, bandwidth=1.25e9, version="3.36",
                            center="curve")
    paths = result.write(tmp_path / "out")
    names = sorted(p.name for p in paths)
    assert names == ["hostfile", "platform.xml", "simgrid-noise.json", "simgrid-noise.tsv",
                     "smpi-config.txt", "smpi-config.xml"]
    args = (tmp_path / "out" / "smpi-config.txt").read_text().split()
    assert args[0].startswith("--cfg=network/latency-factor:0:")
    assert "--cfg=network/crosstraffic:0" in args
    xml = (tmp_path / "out" / "smpi-config.xml").read_text()
    assert '<prop id="network/bandwidth-factor" value="0:' in xml
    doc = json.loads((tmp_path / "out" / "simgrid-noise.json").read_text())
    assert len(doc["segments"]) == 3
    for seg in doc["segments"]:
        values = seg["ratio_quantiles"]["values"]
        assert np.all(np.diff(values) >= 0)
        assert 0.9 < values[50] < 1.1  # ratio to the curve: median near 1 without bands
        assert seg["noise"]["family"]


def test_cli_export(linear_model: RegimeModel, tmp_path: Path,
                    capsys: pytest.CaptureFixture[str]) -> None:
    from kit.model.io import save_model

    path = save_model(linear_model, tmp_path / "pp.json")
    assert main(["export", str(path), "--simgrid", "--latency", "10us", "--bandwidth",
                 "10Gbps", "-o", str(tmp_path / "sg")]) == 0
    out = capsys.readouterr().out
    assert "bandwidth 1.25e+09 B/s" in out and "latency 1e-05 s" in out
    assert (tmp_path / "sg" / "smpi-config.txt").stat().st_size > 0
    assert main(["export", str(path), "--simgrid", "--latency", "fast"]) == 2
    err = capsys.readouterr().err
    assert "--latency" in err and "Traceback" not in err
    assert main(["export", str(tmp_path / "missing.json"), "--simgrid"]) == 2


class _SizeZeroApart:
    """A model stand-in whose size 0 is 3.6 % faster than the smooth curve (the demo's tcp
    model of the CI rehearsal of c246d98) and every other stored size on it."""

    def predict_quantiles_and_unmeasured(self, sizes: np.ndarray, levels: list[float],
                                         decide: range) -> tuple[np.ndarray, np.ndarray]:
        base = np.full((len(sizes), len(levels)), 6e-6)
        own = base * np.where(np.asarray(sizes) == 0, 0.964, 1.0)[:, None]
        return own, base[:, list(decide)]


def test_size_zero_gets_its_own_entry_when_it_differs_from_the_smooth_line() -> None:
    """`pt2pt predict` gives size 0 its own median; the export dropped it (only sizes >= 1
    had entries), so SimGrid ran size 0 at the smooth line's time: 1.038x predict's."""
    from kit.outputs.export.persize import SizePoint, own_sizes, with_points

    own = own_sizes(_SizeZeroApart(), np.array([0.0, 1.0, 2.0, 8.0]))
    assert own.sizes.tolist() == [0.0]
    assert own.median[0] == pytest.approx(0.964 * 6e-6)
    # SimGrid applies an entry above its bound: size 0 + the 16-byte envelope is the entry
    # at 15; without an envelope (transfer 0) there is no bound below it: no entry
    point = SizePoint(0, 16, 0.5, 2.0, 5.8e-6, (1.0,))
    table = dict(with_points([0, 1000], [(1.0, 1.0), (1.0, 1.0)], [point]))
    assert table[15] == (0.5, 2.0) and table[16] == (1.0, 1.0)
    bare = SizePoint(0, 0, 0.5, 2.0, 5.8e-6, (1.0,))
    assert dict(with_points([0, 1000], [(1.0, 1.0), (1.0, 1.0)], [bare])) == {
        0: (1.0, 1.0), 1000: (1.0, 1.0)}
