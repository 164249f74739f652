"""The cluster platform (kit.outputs.export.platform): SimGrid 3.32 loads it and runs both
models, per route class; per-link values apply; what it cannot carry is refused."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from kit.cli import main
from kit.core.errors import ModelError, UserError
from kit.model import RegimeModel
from kit.outputs.export.platform import (
    ClusterPlatform,
    LinkValue,
    cluster_platform,
    load_platform,
)
from tests.builders import linear_overhead_model, three_linear_regimes

needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None, reason="SimGrid is not installed (apt-get install "
    "libsimgrid-dev g++); CI installs it")


@cache
def _inter() -> RegimeModel:
    return three_linear_regimes(1e-8)  # ~100 MB/s between hosts


@cache
def _intra() -> RegimeModel:
    return linear_overhead_model(1e-6, 2e-10)  # ~5 GB/s within a host


def _pingpong(platform: ClusterPlatform, folder: Path, hostfile: str, sizes: list[int],
              *, noise: bool = False, reps: int = 1) -> dict[int, float]:
    """Median one-way time per size of the kit's ping-pong on ``platform`` (2 ranks)."""
    from kit.outputs.simulate import RUN_CFG, build

    binary, plugin = build(noise=True)
    assert plugin is not None
    (folder / "hf").write_text(hostfile)
    (folder / "sizes.txt").write_text("\n".join(map(str, sizes)) + "\n")
    proc = subprocess.run(["smpirun", *platform.smpirun_args(folder, plugin, noise=noise),
                           "-hostfile", str(folder / "hf"), "-np", "2", *RUN_CFG,
                           str(binary), str(folder / "sizes.txt"), str(reps)],
                          capture_output=True, text=True, timeout=600, cwd=folder, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = np.array([[float(v) for v in line.split(",")]
                     for line in proc.stdout.splitlines()[1:] if line.strip()])
    return {s: float(np.median(np.r_[rows[rows[:, 0] == s, 2], rows[rows[:, 0] == s, 3]]))
            for s in sizes}


@needs_simgrid
def test_simgrid_runs_both_models_on_the_cluster(tmp_path: Path) -> None:
    """Two hosts: the inter-node model; two ranks of one host: the intra-node model (the
    plugin picks the route class from the hosts), each within 2 % of pt2pt predict."""
    # a backbone (the switch) far faster than the hosts' links: its latency comes out of them
    platform = cluster_platform(_inter(), hosts=4, cores=2, intra_model=_intra(),
                                backbone=LinkValue(1e12, 1e-6))
    platform.write(tmp_path)
    sizes = [1, 1000, 5000, 65536, 100000, 1048576]
    for hostfile, model in (("node-0\nnode-3\n", _inter()), ("node-2:2\n", _intra())):
        got = _pingpong(platform, tmp_path, hostfile, sizes)
        want = model.predict(np.array(sizes, dtype=float))
        for s, w in zip(sizes, want, strict=True):
            assert got[s] == pytest.approx(w, rel=0.02), (hostfile, s)
    # The platform's nominal routes are the exports': two host links and the backbone make
    # the inter route.
    assert 2 * platform.link.latency + 1e-6 == pytest.approx(platform.inter.latency)
    assert platform.loopback == LinkValue(platform.intra.bandwidth, platform.intra.latency)


@needs_simgrid
def test_link_values_slow_one_host_down(tmp_path: Path) -> None:
    """The per-link hook (issue 58's deviations): node-1's links at half the bandwidth make
    a 1 MiB message to it take the bandwidth term twice, and leave other routes alone."""
    base = cluster_platform(_inter(), hosts=3)
    names = base.link_names(1)
    slow = LinkValue(base.link.bandwidth / 2, base.link.latency)
    platform = cluster_platform(_inter(), hosts=3,
                                link_values={names["up"]: slow, names["down"]: slow})
    assert f"link {names['down']} " in platform.network_table()
    platform.write(tmp_path)
    size = 1048576
    fast = _pingpong(platform, tmp_path, "node-0\nnode-2\n", [size])[size]
    slowed = _pingpong(platform, tmp_path, "node-0\nnode-1\n", [size])[size]
    bw_term = float(_inter().predict(np.array([size], dtype=float))[0]) - platform.inter.latency
    assert fast == pytest.approx(_inter().predict(np.array([size], dtype=float))[0], rel=0.02)
    assert slowed - fast == pytest.approx(bw_term, rel=0.1)


@needs_simgrid
def test_noise_per_route_class(tmp_path: Path) -> None:
    platform = cluster_platform(_inter(), hosts=2, cores=2, intra_model=_intra())
    platform.write(tmp_path)
    got = _pingpong(platform, tmp_path, "node-0:2\n", [1000], noise=True, reps=400)
    assert got[1000] == pytest.approx(_intra().predict(np.array([1000.0]))[0], rel=0.03)


def test_platform_files_and_refusals(tmp_path: Path) -> None:
    platform = cluster_platform(_inter(), hosts=4, cores=2, intra_model=_intra(),
                                send_model=linear_overhead_model(2e-7, 1e-12),
                                backbone=LinkValue(1e10, 1e-7), version="3.32")
    written = platform.write(tmp_path, ranks_per_host=2)
    assert sorted(p.name for p in written) == sorted(
        ["platform.xml", "hostfile", "network.tsv", "smpi-config.txt", "platform.json"])
    cluster = ET.parse(tmp_path / "platform.xml").getroot().find("cluster")
    assert cluster is not None and cluster.get("radical") == "0-3" and cluster.get("core") == "2"
    assert cluster.get("bb_bw") == "1e+10Bps"  # SimGrid reads it (strtod and a unit)
    # the backbone's latency is taken out of the host links: the route keeps the model's
    assert 2 * platform.link.latency + 1e-7 == pytest.approx(platform.inter.latency)
    assert (tmp_path / "hostfile").read_text() == "".join(f"node-{i}:2\n" for i in range(4))
    cfg = (tmp_path / "smpi-config.txt").read_text()
    assert "--cfg=smpi/os:" in cfg and "lat-factor" not in cfg and "smpi/wtime:0" in cfg
    table = (tmp_path / "network.tsv").read_text()
    assert table.count("class inter") == 1 and table.count("class intra") == 1
    assert load_platform(tmp_path)["hosts"] == 4
    with pytest.raises(UserError, match="hosts"):
        cluster_platform(_inter(), hosts=0)
    with pytest.raises(UserError, match="not in the platform"):
        cluster_platform(_inter(), hosts=2, link_values={"node-9": LinkValue(1e9, 0.0)})
    with pytest.raises(ModelError, match="backbone"):
        cluster_platform(_inter(), hosts=2, backbone=LinkValue(1e9, 1.0))
    with pytest.raises(ModelError, match="no network factor callbacks"):
        cluster_platform(_inter(), hosts=2, version="3.30")
    # intra-node messages cannot carry an inter-node receive overhead longer than them
    with pytest.raises(ModelError, match=r"intra-node model: .*exceed the ping-pong"):
        cluster_platform(_inter(), hosts=2, intra_model=_intra(),
                         recv_model=linear_overhead_model(5e-6, 1e-12))
    with pytest.raises(UserError, match="not a pt2pt cluster platform"):
        load_platform(tmp_path / "nowhere")


def test_cli_writes_the_cluster_platform(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from kit.model.io import save_model

    inter = save_model(_inter(), tmp_path / "inter.json")
    intra = save_model(_intra(), tmp_path / "intra.json")
    assert main(["export", str(inter), "--simgrid", "--hosts", "3", "--cores", "2", "--intra",
                 str(intra), "--backbone", "10GBps,100ns", "-o", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "3 hosts x 2 cores" in out and "pt2pt simulate --app" in out
    assert load_platform(tmp_path / "p")["cores"] == 2
    assert main(["export", str(inter), "--simgrid", "--intra", str(intra)]) == 2
    assert "--intra: needs --hosts" in " ".join(capsys.readouterr().err.split())
    assert main(["export", str(inter), "--simgrid", "--hosts", "2", "--backbone", "fast"]) == 2
    assert "--backbone" in capsys.readouterr().err


def test_cabinets_are_clusters_joined_by_their_uplinks(tmp_path: Path) -> None:
    """Cabinets of K hosts (issue 61): one <cluster> per cabinet (the last one smaller), one
    split-duplex uplink each, a route per ordered pair through the source's uplink up and the
    destination's down; the hosts keep their names and the link names follow the cabinet."""
    platform = cluster_platform(_inter(), hosts=5, cabinet=2, uplink=LinkValue(5e8, 2e-6),
                                backbone=LinkValue(1e11, 1e-7), version="3.32")
    assert [list(c) for c in platform.cabinets()] == [[0, 1], [2, 3], [4]]
    platform.write(tmp_path)
    root = ET.parse(tmp_path / "platform.xml").getroot()
    zone = root.find("zone")
    assert zone is not None and zone.get("routing") == "Full"
    clusters = zone.findall("cluster")
    assert [c.get("radical") for c in clusters] == ["0-1", "2-3", "4-4"]
    assert {c.get("prefix") for c in clusters} == {"node-"}
    assert all(c.get("bb_bw") == "1e+11Bps" for c in clusters)  # each cabinet's switch
    uplinks = zone.findall("link")
    assert [u.get("sharing_policy") for u in uplinks] == ["SPLITDUPLEX"] * 3
    assert uplinks[0].get("bandwidth") == "500000000Bps"
    routes = zone.findall("zoneRoute")
    assert len(routes) == 3 * 2
    r = next(r for r in routes if r.get("src") == "pt2pt-cab0" and r.get("dst") == "pt2pt-cab2")
    assert r.get("symmetrical") == "NO" and r.get("gw_src") == "pt2pt-cab0-router"
    assert [(c.get("id"), c.get("direction")) for c in r.findall("link_ctn")] == [
        ("pt2pt_uplink_0", "UP"), ("pt2pt_uplink_2", "DOWN")]
    assert platform.link_names(3)["up"] == "pt2pt-cab1_link_3_UP"
    names = platform.all_link_names()
    assert "pt2pt_uplink_2_DOWN" in names and "pt2pt-cab2_backbone" in names
    doc = load_platform(tmp_path)
    assert doc["cabinet"] == 2 and doc["uplink"] == {"bandwidth": 5e8, "latency": 2e-6}
    assert any("3 cabinets of 2 hosts" in n for n in platform.notes)
    # the default uplink: one host link's bandwidth, no latency, said in the notes
    default = cluster_platform(_inter(), hosts=4, cabinet=2)
    assert default.uplink == LinkValue(default.link.bandwidth, 0.0)
    assert any("the default: give --uplink" in n for n in default.notes)
    # one cabinet holding every host is the flat platform
    flat = cluster_platform(_inter(), hosts=4, cabinet=4)
    assert flat.cabinet is None and "<zone" not in flat.platform_xml()
    with pytest.raises(UserError, match="uplink needs cabinets"):
        cluster_platform(_inter(), hosts=4, uplink=LinkValue(1e9, 0.0))
    with pytest.raises(UserError, match="at most 128 cabinets"):
        cluster_platform(_inter(), hosts=1024, cabinet=4)
    with pytest.raises(UserError, match="hosts per cabinet"):
        cluster_platform(_inter(), hosts=4, cabinet=0)
    with pytest.raises(UserError, match="uplink"):
        cluster_platform(_inter(), hosts=4, cabinet=2, uplink=LinkValue(0.0, 0.0))


def test_cli_writes_cabinets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kit.model.io import save_model

    inter = save_model(_inter(), tmp_path / "inter.json")
    assert main(["export", str(inter), "--simgrid", "--hosts", "8", "--cabinet", "4",
                 "--uplink", "10Gbps,1us", "-o", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "8 hosts x 1 cores in cabinets of 4" in out and "2 cabinets of 4 hosts" in out
    doc = load_platform(tmp_path / "p")
    assert doc["cabinet"] == 4 and doc["uplink"] == {"bandwidth": 1.25e9, "latency": 1e-6}
    assert main(["export", str(inter), "--simgrid", "--hosts", "8", "--cabinet", "4",
                 "--uplink", "2GBps", "-o", str(tmp_path / "q")]) == 0
    assert load_platform(tmp_path / "q")["uplink"] == {"bandwidth": 2e9, "latency": 0.0}
    capsys.readouterr()
    assert main(["export", str(inter), "--simgrid", "--cabinet", "4"]) == 2
    assert "--cabinet: needs --hosts" in " ".join(capsys.readouterr().err.split())
    assert main(["export", str(inter), "--simgrid", "--hosts", "8", "--uplink", "1GBps"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--uplink" in err and "--cabinet" in err and "Traceback" not in err
    assert main(["export", str(inter), "--simgrid", "--hosts", "8", "--cabinet", "2",
                 "--uplink", "fast"]) == 2
    assert "--uplink" in capsys.readouterr().err


@needs_simgrid
def test_simgrid_loads_cabinets_and_keeps_the_route(tmp_path: Path) -> None:
    """SimGrid 3.32 loads the cabinets (and the plugin finds a cabinet host's link by its
    name); with the uplinks idle, a message to another cabinet follows the model as one
    within the cabinet does (no uplink latency): only sharing the uplink slows it."""
    base = cluster_platform(_inter(), hosts=4, cabinet=2)
    up = base.link_names(3)["up"]
    platform = cluster_platform(_inter(), hosts=4, cabinet=2, link_values={up: base.link})
    assert f"link {up} " in platform.network_table()
    platform.write(tmp_path)
    sizes = [1000, 1048576]
    want = _inter().predict(np.array(sizes, dtype=float))
    for hostfile in ("node-0\nnode-1\n", "node-0\nnode-3\n"):
        got = _pingpong(platform, tmp_path, hostfile, sizes)
        for s, w in zip(sizes, want, strict=True):
            assert got[s] == pytest.approx(w, rel=0.02), (hostfile, s)


def test_a_platform_calibrated_on_a_disturbed_node_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model fitted to runs on a busy node carries that load in its noise, and every
    simulated message draws it again: the platform and the export's output say so; a quiet
    calibration adds no such note."""
    from kit.model.contract import ModelFile
    from kit.model.io import write_model

    why = "load 4.0 during the run on 2 CPU(s) with 1 rank(s)"
    counts = {"n_samples": 100, "n_disturbed": 0, "windows": []}
    busy = {"verdict": "disturbed", **counts, "runs": [
        {"run_id": "r1", "verdict": "quiet", "conditions": "disturbed", "conditions_why": why}]}
    quiet = {"verdict": "quiet", **counts, "runs": [
        {"run_id": "r2", "verdict": "quiet", "conditions": "quiet"}]}
    for name, quality in (("busy", busy), ("quiet", quiet)):
        path = write_model(ModelFile(_inter(), run_quality=quality), tmp_path / f"{name}.json")
        assert main(["export", str(path), "--simgrid", "--hosts", "2",
                     "-o", str(tmp_path / name)]) == 0
        out = " ".join(capsys.readouterr().out.split())
        notes = " ".join(load_platform(tmp_path / name)["notes"])
        if name == "busy":
            assert "busy.json was fitted to runs that were not quiet" in notes and why in notes
            assert "not quiet" in out and "calibrate again on a quiet node" in out
        else:
            assert "not quiet" not in notes and "not quiet" not in out


def test_a_single_pair_export_says_so_too_and_a_quiet_one_loads_no_run_quality_machinery(
        tmp_path: Path) -> None:
    """The note is not the cluster platform's alone; and asking a quiet model the question
    (kit.fit.qualitynote) must not load kit.fit.runquality and its Polars."""
    import sys

    from kit.model.contract import ModelFile
    from kit.model.io import write_model

    busy = {"verdict": "disturbed", "n_samples": 100, "n_disturbed": 10,
            "windows": [{"run_id": "r1", "seq_start": 0, "seq_end": 9, "n_samples": 10}],
            "runs": []}
    quiet = {"verdict": "quiet", "n_samples": 100, "n_disturbed": 0, "windows": [],
             "runs": []}
    probe = ("import sys; from kit.cli import main; rc = main(sys.argv[1:]); "
             "print('loaded:', sorted(m for m in ('polars', 'kit.fit.runquality') "
             "if m in sys.modules)); sys.exit(rc)")
    for name, quality in (("busy", busy), ("quiet", quiet)):
        path = write_model(ModelFile(_inter(), run_quality=quality), tmp_path / f"{name}.json")
        proc = subprocess.run([sys.executable, "-c", probe, "export", str(path), "--simgrid",
                               "-o", str(tmp_path / name)],
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
        out = " ".join(proc.stdout.split())
        if name == "busy":
            assert ("note: the model busy.json was fitted to runs that were not quiet "
                    "(1 disturbed window(s) left out)") in out
        else:
            assert "not quiet" not in out and "loaded: []" in out
