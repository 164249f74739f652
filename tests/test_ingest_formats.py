"""Every fixture and reference-data file: ingested, or rejected with a located message.

Spot checks compare stored values with numbers read by eye from the text files, after the
documented conversions (docs/ingest-formats.md).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from kit.data import dataset as ds
from kit.data.ingest import ingest

# Files that are not measurements: help texts, error captures, console logs.
REJECTED = {
    "logp_test_help.txt", "netgauge_help.txt", "osu_bibw_help_7.4.txt", "osu_bw_help_7.4.txt",
    "osu_latency_help_7.2.txt", "osu_latency_help_7.4.txt", "mpibenchmark_help.txt",
    "skampi_help.txt", "reprompi_error_missing_pingpong_ranks.txt",
    "reprompi_error_msize_interval_min0.txt", "skampi_pingpong_vader_debug8_stdout.txt",
    "logp_test_Send_Recv_verbose_tcp_stdout.txt", "logp_test_Send_Recv_verbose_vader_stdout.txt",
    "netgauge_loggp_tcp_stdout.txt", "netgauge_loggp_vader_stdout.txt",
}


@pytest.fixture(scope="module")
def everything(tmp_path_factory, fixtures_dir: Path, refdata_dir: Path):
    dataset = tmp_path_factory.mktemp("all") / "ds"
    report = ingest([fixtures_dir, refdata_dir], dataset)
    return dataset, report


def _rows(dataset: Path, path: Path) -> pl.DataFrame:
    """The rows of the run whose first source is ``path``."""
    runs = ds.runs(dataset).filter(pl.col("sources").str.contains(str(path.resolve()),
                                                                  literal=True))
    assert runs.height == 1, f"{path} is not exactly one run"
    run_id = runs["run_id"][0]
    return ds.scan(dataset).filter(pl.col("run_id") == run_id).collect()


def test_every_measurement_file_ingests(everything, fixtures_dir, refdata_dir):
    dataset, report = everything
    failed = {p.name: msg for p, msg in report.files_failed}
    assert set(failed) == REJECTED, failed
    for name, message in failed.items():
        assert name in message  # names the file
        assert ("help text" in message or "error capture" in message
                or "console" in message), message
    data_files = [p for d in (fixtures_dir, refdata_dir) for p in d.rglob("*")
                  if p.suffix in (".txt", ".sko", ".csv", ".out") and p.name not in REJECTED
                  and not p.name.startswith("_") and p.stat().st_size > 0
                  and p.name != "slurm_info.txt"]
    data_files += [p for p in fixtures_dir.rglob("logp_test.out.*")]
    assert report.files_ok == len(data_files)
    assert report.runs_added == report.files_ok
    runs = ds.runs(dataset)
    assert runs["n_samples"].sum() == report.rows_added == ds.scan(dataset).select(
        pl.len()).collect().item()


def test_rows_are_valid(everything):
    dataset, _ = everything
    frame = ds.scan(dataset).collect()
    assert frame.null_count().sum_horizontal().item() == 0
    assert (frame["time"] >= 0).all()
    assert set(frame["tool"].cast(pl.String).unique()) == {
        "osu", "skampi", "logp", "reprompi", "calibration", "csv", "netgauge"}


def test_osu_latency_first_and_last_size(everything, fixtures_dir):
    rows = _rows(everything[0], fixtures_dir / "osu" / "osu_latency_tcp_7.4.txt")
    assert rows["op"].cast(pl.String).unique().to_list() == ["pingpong"]
    assert rows["size"][0] == 1 and rows["time"][0] == pytest.approx(4.41e-6)
    assert rows["size"][-1] == 4194304 and rows["time"][-1] == pytest.approx(957.81e-6)
    assert rows["transport"][0] == "tcp" and rows["stat"][0] == "mean"


def test_osu_72_header_and_bandwidth_conversion(everything, fixtures_dir):
    rows = _rows(everything[0], fixtures_dir / "osu" / "osu_bw_vader_7.2.txt")
    last = rows.filter(pl.col("size") == 4194304)
    assert last["op"][0] == "bw" and last["transport"][0] == "shm"
    assert last["time"][0] == pytest.approx(4194304 / 11051.10e6)
    assert rows.height == 23


def test_osu_tail_percentiles(everything, fixtures_dir):
    rows = _rows(everything[0], fixtures_dir / "osu" / "osu_latency_vader_7.4_z_p5-25-50-75-95.txt")
    stats = set(rows["stat"].cast(pl.String))
    assert stats == {"mean", "p5", "p25", "p50", "p75", "p95"}
    one = rows.filter((pl.col("size") == 4194304) & (pl.col("stat") == "p95"))
    assert one["time"][0] == pytest.approx(430.32e-6)


def test_skampi_mean_halved_to_one_way(everything, fixtures_dir):
    rows = _rows(everything[0], fixtures_dir / "skampi" / "skampi_pingpong_tcp.sko")
    first = rows.filter(pl.col("size") == 1)
    assert first["time"][0] == pytest.approx(10.1e-6 / 2)
    assert first["n"][0] == 64 and first["stat"][0] == "mean"
    assert rows["size"].max() == 2097152


def test_skampi_debug_log_gives_raw_repetitions(everything, fixtures_dir):
    rows = _rows(everything[0], fixtures_dir / "skampi" / "skampi_pingpong_vader_debug8.sko")
    raw = rows.filter(pl.col("stat") == "raw")
    means = rows.filter(pl.col("stat") == "mean")
    assert means.height == 22
    # one raw row per repetition that SkaMPI reports in the .sko
    assert raw.height == means["n"].sum()
    # the first repetition of the first measurement in proc0000.log: 0.7 µs round trip
    assert raw.sort("seq")["time"][0] == pytest.approx(0.7e-6 / 2)


def test_calibration_round_trip_is_send_plus_recv(everything, refdata_dir):
    path = (refdata_dir / "platform-calibration" / "graphene_eth_example"
            / "graphene_eth_PingPong.csv")
    rows = _rows(everything[0], path)
    first = rows.sort("seq").row(0, named=True)
    assert first["size"] == 765921 and first["op"] == "pingpong"
    assert first["time"] == pytest.approx((5.012126e-03 + 8.841378e-03) / 2)
    assert rows.height == 6620 and first["transport"] == "tcp"
    assert first["campaign"] == "graphene_eth_example"


def test_calibration_other_calls_are_their_own_ops(everything, refdata_dir):
    folder = refdata_dir / "platform-calibration" / "graphene_eth_example"
    for name, op in (("Isend", "isend"), ("Recv", "recv"), ("Test", "test"),
                     ("Iprobe", "iprobe"), ("Wtime", "wtime")):
        rows = _rows(everything[0], folder / f"graphene_eth_{name}.csv")
        assert rows["op"].cast(pl.String).unique().to_list() == [op]
    recv = _rows(everything[0], folder / "graphene_eth_Recv.csv").sort("seq")
    assert recv["time"][0] == pytest.approx(6.949167e-03)


def test_reprompi_summary_and_raw(everything, fixtures_dir):
    summary = _rows(everything[0], fixtures_dir / "reprompi" /
                    "reprompi_sendrecv_summary_nrep1000_tcp.txt")
    one = summary.filter((pl.col("size") == 1) & (pl.col("stat") == "mean"))
    assert one["time"][0] == pytest.approx(0.0000144507 / 2) and one["n"][0] == 1000
    assert set(summary["stat"].cast(pl.String)) == {"mean", "median", "min", "max"}
    raw = _rows(everything[0], fixtures_dir / "reprompi" / "reprompi_sendrecv_raw_nrep100_tcp.txt")
    assert raw.height == 2300 and set(raw["stat"].cast(pl.String)) == {"raw"}
    assert raw.sort("seq")["time"][-1] == pytest.approx(0.0019611510 / 2)


def test_reprompi_line_split_by_a_warning_is_repaired(everything, fixtures_dir):
    path = fixtures_dir / "reprompi" / "contended_run1" / "reprompi_sendrecv_raw_nrep100_tcp.txt"
    rows = _rows(everything[0], path)
    assert rows.height == 2300
    assert (rows["time"] == 0.0000153520 / 2).any()


def test_reprompi_invalid_repetitions_are_dropped_and_reported(everything, fixtures_dir):
    dataset, report = everything
    rows = _rows(dataset, fixtures_dir / "reprompi" /
                 "reprompi_sendrecv_window_hca_global_verbose_shuffle_vader.txt")
    # 8 sizes x 5 repetitions seen by rank 0, minus the 9 with errorcode != 0
    assert rows.height == 40 - 9
    assert any("9 repetition(s)" in w for w in report.warnings)


def test_logp_parameters(everything, fixtures_dir):
    rows = _rows(everything[0], fixtures_dir / "logp_mpi" / "logp_test.out.Send.Recv.tcp")
    first = rows.filter(pl.col("seq") == 0)
    got = {(r["op"], r["stat"]): r["time"] for r in first.iter_rows(named=True)}
    assert got[("send", "mean")] == pytest.approx(0.0000031)
    assert got[("send", "min")] == pytest.approx(0.0000027)
    assert got[("recv", "mean")] == pytest.approx(0.0000020)
    assert got[("gap", "mean")] == pytest.approx(0.0000027)
    assert {"send", "recv", "gap", "latency"} == set(rows["op"].cast(pl.String))
    assert rows.filter(pl.col("op") == "latency")["size"].to_list() == [0]


def test_netgauge_prtt_halved(everything, fixtures_dir):
    rows = _rows(everything[0], fixtures_dir / "netgauge" / "netgauge_loggp_tcp_ng.out")
    pp = rows.filter((pl.col("op") == "pingpong") & (pl.col("size") == 1))
    assert pp["time"][0] == pytest.approx(10.009252e-6 / 2)
    assert rows.filter(pl.col("op") == "gap")["size"].min() == 1025  # -nan at size 1 skipped


def test_plain_csv(everything, refdata_dir):
    rows = _rows(everything[0], refdata_dir / "pycewise" / "pingpong_loopback.csv")
    first = rows.sort("seq").row(0, named=True)
    assert (first["size"], first["op"], first["tool"]) == (11682, "pingpong", "csv")
    assert first["time"] == pytest.approx(4.1382e-05)
    assert first["transport"] == "shm"


def test_series_table(everything):
    table = ds.series_table(everything[0])
    assert list(table.columns[:9]) == ["campaign", "tool", "transport", "placement", "host_pair",
                                       "pairs", "program", "op", "stat"]
    assert set(table["pairs"].to_list()) == {"1"}  # no contention run among the formats
    assert set(table["program"].to_list()) == {""}  # no application run either
    row = table.filter((pl.col("campaign") == "graphene_eth_example")
                       & (pl.col("op") == "pingpong")).row(0, named=True)
    assert row["n_samples"] == 6620 and row["size_min"] == 1 and row["size_max"] == 989921
    # 1 GbE: ~34 µs one-way for small messages, ~110 MB/s for large ones
    assert 20e-6 < row["latency_s_lo"] < row["latency_s"] < row["latency_s_hi"] < 60e-6
    assert 80e6 < row["bandwidth_Bps_lo"] < row["bandwidth_Bps"] < row["bandwidth_Bps_hi"] < 125e6


def test_launcher_noise_before_the_osu_title_is_ignored(tmp_path, fixtures_dir):
    text = (fixtures_dir / "osu" / "osu_latency_tcp_7.4.txt").read_text()
    path = tmp_path / "osu_latency.txt"
    path.write_text("--------\nWARNING: a high-performance fabric was found\n" + text)
    report = ingest([path], tmp_path / "ds", tool="osu")
    assert report.ok and report.rows_added == 23
    assert any("2 line(s) before the OSU title" in w for w in report.warnings)
    bad = tmp_path / "osu_bad.txt"
    bad.write_text(text.replace("4.33", "4.3.3"))
    report = ingest([bad], tmp_path / "ds")
    assert f"{bad}:6:" in report.files_failed[0][1]  # "2  4.33" is line 6
