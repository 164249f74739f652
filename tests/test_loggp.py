"""LogGP: parameters from the probe's ops, compared with what logp_mpi and Netgauge report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kit.analyses.loggp import loggp, loggp_from_ops
from kit.cli import main


def _ingest(path: Path, out: Path, campaign: str) -> Path:
    from kit.data.ingest import ingest

    report = ingest([path], out, campaign=campaign, transport="tcp")
    assert report.files_ok and not report.files_failed
    return out


def test_netgauge_fixture_parameters_are_recovered(shared_dir: Path, tmp_path: Path) -> None:
    ds = _ingest(shared_dir / "fixtures/netgauge/netgauge_loggp_tcp_ng.out", tmp_path / "ds", "ng")
    # Netgauge's own numbers at the smallest sizes: L (= half round trip) 5.0 us,
    # o_s ~3.2 us, o_r ~3.0 us, g ~3.1 us (see the fixture's columns).
    res = loggp(ds, breakpoints=[8192])
    small = res["regimes"][0]
    assert small["T1"]["value"] == pytest.approx(5.0e-6, rel=0.15)
    assert small["o_s"]["value"] == pytest.approx(3.2e-6, rel=0.15)
    assert small["o_r"]["value"] == pytest.approx(3.0e-6, rel=0.15)
    assert small["g"]["value"] == pytest.approx(3.1e-6, rel=0.15)
    for p in ("T1", "o_s", "o_r", "g"):
        assert small[p]["lo"] <= small[p]["value"] <= small[p]["hi"]
    json.dumps(res, allow_nan=False)
    assert res["loggopsim"]["o"] == pytest.approx(small["o_s"]["value"] * 1e9, rel=1e-6)


def test_logp_mpi_fixture_and_the_cli(shared_dir: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    ds = _ingest(shared_dir / "fixtures/logp_mpi/logp_test.out.Send.Recv.tcp", tmp_path / "ds",
                 "lp")
    out = tmp_path / "loggp.json"
    assert main(["loggp", str(ds), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    res = json.loads(out.read_text())
    r = res["regimes"][0]
    # logp_test's header: Latency = 1.6 us; os ~3.1 us, or ~2.1 us, g ~3 us at small sizes.
    assert r["L"]["value"] == pytest.approx(1.6e-6, rel=0.01)
    assert r["L"]["lo"] is None and "single latency value" in r["L"]["why"]
    assert r["o_s"]["value"] == pytest.approx(3.1e-6, rel=0.2)
    assert r["o_r"]["value"] == pytest.approx(2.2e-6, rel=0.2)
    assert "not estimated" in printed and "nan" not in printed.lower()


def test_stream_without_send_recv_says_what_is_missing() -> None:
    rng = np.random.default_rng(0)
    s = np.floor(np.exp(rng.uniform(0, np.log(2**20), 400)))
    g = (1e-6 + s / 2e9) * rng.lognormal(0, 0.05, s.size)
    res = loggp_from_ops({"gap": (s, g)}, n_boot=50)
    r = res["regimes"][0]
    assert r["g"]["value"] == pytest.approx(1e-6, rel=0.1)
    assert r["G"]["value"] == pytest.approx(1 / 2e9, rel=0.1)
    for p in ("o_s", "o_r", "L", "T1"):
        assert r[p]["value"] is None and r[p]["lo"] is None and "needs" in r[p]["why"]
    assert any(m.startswith("o_s") for m in res["not_estimated"])


def _probe(probe_bin: Path, prefix: Path, ops: str, samples: int) -> None:
    import subprocess

    from tests.conftest import mpi_env

    prefix.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mpirun", "--oversubscribe", "-np", "2", "--mca", "btl", "self,vader",
                    str(probe_bin), "--op", ops, "--sizes", "loguniform:1:256K", "--samples",
                    str(samples), "--window", "16", "--seed", "3", "--output", str(prefix)],
                   check=True, env=mpi_env(), timeout=300, capture_output=True)


@pytest.mark.mpi
def test_real_stream_series_is_fitted_and_feeds_loggp(probe_bin: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A probe run's stream windows are a raw series of per-message gaps: ``fit`` takes it
    (saying what its time is), ``loggp`` takes g and G from it; a campaign with stream alone
    gets g and G and a statement of what needs send/recv/pingpong, never a NaN."""
    from kit.model.io import read_model

    _probe(probe_bin, tmp_path / "all" / "r", "pingpong,send,recv,stream", 200)
    _probe(probe_bin, tmp_path / "stream" / "r", "stream", 200)
    from kit.data.ingest import ingest

    assert ingest([tmp_path / "all"], tmp_path / "ds", campaign="all").ok
    assert ingest([tmp_path / "stream"], tmp_path / "ds", campaign="stream").ok
    model = tmp_path / "stream.json"
    assert main(["fit", str(tmp_path / "ds"), "--series", "campaign=all,op=stream", "-o",
                 str(model), "--no-intervals", "--no-validate"]) == 0
    err = capsys.readouterr().err
    assert "per-message gap g = window time / messages per window" in err
    fitted = read_model(model)
    assert fitted.provenance["series"]["stat"] == "raw"
    assert fitted.provenance["samples"] == "raw"
    assert "per-message gap" in fitted.provenance["quantity"]
    assert fitted.provenance["n_samples"] >= 150  # one sample per window, not one per size
    # the per-message gap of the largest sizes is at least size / (memory bandwidth)
    assert fitted.model.predict([262144.0])[0] > 262144 / 100e9

    res = loggp(tmp_path / "ds", {"campaign": "all"}, n_boot=50)
    assert res["sources"]["gap"] == ("stream", "gap") and res["used"]["gap"] == "stream (raw)"
    first = res["regimes"][0]
    for p in ("g", "o_s", "o_r", "T1", "L"):
        assert first[p]["value"] is not None, p
    assert 0 < first["g"]["lo"] <= first["g"]["value"] <= first["g"]["hi"] < 1e-3

    out = tmp_path / "stream_only.json"
    assert main(["loggp", str(tmp_path / "ds"), "--series", "campaign=stream", "--json",
                 str(out)]) == 0
    printed = capsys.readouterr().out
    assert "nan" not in printed.lower()
    only = json.loads(out.read_text())
    r = only["regimes"][0]
    assert r["g"]["value"] > 0 and r["G"]["value"] is not None
    for p in ("o_s", "o_r", "T1", "L"):
        assert r[p]["value"] is None and "needs" in r[p]["why"]
        assert f"{p} " in printed and "not estimated" in printed
    assert only["loggopsim"]["L"] is None and only["loggopsim"]["g"] > 0


def _classic_run(folder: Path, hosts: list[str], latency: float, seed: int) -> None:
    """A two-rank probe run of pingpong, send, recv and stream on ``hosts``: times from a
    LogGP truth whose latency part is ``latency`` (seconds)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lines = ["seq,op,size,count,time,call,warmup"]
    ops = ("pingpong", "send", "recv", "stream")
    for i in range(1200):
        op = ops[i % 4]
        size = int(np.exp(rng.uniform(0, np.log(2**20))))
        base = {"pingpong": latency + size / 1e9, "send": 1e-6 + size / 8e9,
                "recv": 1.2e-6 + size / 8e9, "stream": 2e-6 + size / 1e9}[op]
        count = 16 if op == "stream" else 1
        t = base * rng.lognormal(0, 0.05) * (2 if op == "pingpong" else count)
        lines.append(f"{i},{op},{size},{count},{t:.9e},,0")
    (folder / "r.samples.csv").write_text("\n".join(lines) + "\n")
    (folder / "r.meta.json").write_text(json.dumps({
        "probe_version": "test", "mpi_version": "test", "hosts": hosts, "ops": list(ops),
        "env": {}, "complete": True, "samples_written": 1200}))


def test_loggp_never_pools_placements(tmp_path: Path) -> None:
    """Intra- and inter-node runs of one campaign are two LogGP tables (issue 14: a series'
    identity includes its placement), and a selector that matches both says so."""
    from kit.core.errors import UserError
    from kit.data.ingest import ingest
    from kit.outputs.report.loggp import loggp_part

    _classic_run(tmp_path / "in" / "intra", ["n1", "n1"], 2e-6, 1)
    _classic_run(tmp_path / "in" / "inter", ["n1", "n2"], 20e-6, 2)
    assert ingest([tmp_path / "in"], tmp_path / "ds", campaign="c", transport="tcp").ok
    with pytest.raises(UserError, match="placement=inter-node"):
        loggp(tmp_path / "ds", {"campaign": "c"}, n_boot=20)
    blocks, notes = loggp_part(tmp_path / "ds", {"campaign": "c"})
    assert not notes
    titles = sorted(b.title for b in blocks)
    assert titles == ["c / tcp / probe, inter-node n1:n2", "c / tcp / probe, intra-node n1:n1"]
    lat = {}
    for place in ("intra-node", "inter-node"):
        res = loggp(tmp_path / "ds", {"campaign": "c", "placement": place}, n_boot=20)
        lat[place] = res["regimes"][0]["T1"]["value"]
    assert lat["inter-node"] > 5 * lat["intra-node"]
