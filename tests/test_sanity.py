"""The physical sanity layer (kit/figures/sanity.py): its rules, and a property test that feeds
busy data, the shared reference runs and synthetic edge cases through every command and
asserts that no figure physics forbids reaches a user unflagged (tests/sanity_scan.py says
what counts). The demo's own data goes through the same scan in tests/test_demo.py."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from kit.cli import main
from kit.data.ingest import ingest
from kit.figures import sanity
from tests.builders import write_contention_run
from tests.sanity_scan import violations
from tests.test_ingest_probe import META

DATA = Path(__file__).parent / "data"
GRAPHENE = "platform-calibration/graphene_eth_example"
TAURUS = "platform-calibration/taurus_26_07_2016_calibration"


# --------------------------------------------------------------------------- the rules
def test_the_rules() -> None:
    assert sanity.time_problem(-1.5e-5, "L") and "negative" in str(sanity.time_problem(-1, "L"))
    assert sanity.time_problem(2e-6) is None and sanity.time_problem(math.nan)
    assert sanity.bandwidth_problem(1e30) and sanity.bandwidth_problem(0.0)
    assert sanity.bandwidth_problem(1.2e10) is None
    assert sanity.factor_problem(0.0, "lat") and sanity.factor_problem(-1, "bw", kind="bw")
    assert sanity.factor_problem(0.8, "lat", 3e-5) is None
    assert sanity.factor_problem(1e7, "bw", 1e9, kind="bandwidth")  # unbounded
    assert sanity.factor_problem(2e8, "lat", 3e-5)  # an hour and a half of latency
    assert sanity.interval_problem(2.0, 0.0, 4.0)  # a positive quantity's interval reaching 0
    assert sanity.interval_problem(2.0, 1e-3, 1e3)  # spans a factor 1e6
    assert sanity.interval_problem(2.0, 1.5, 3.0) is None
    assert sanity.ratio_interval_problem(0.08, -1.0, 5.3e28)  # [-100, +5.3e30] %
    assert sanity.ratio_interval_problem(0.07, 0.05, 0.09) is None
    assert sanity.steps_down([1, 2, 3], [1.0, 0.9, 1.0]) == [(2, pytest.approx(0.1))]
    assert sanity.steps_down([1, 2, 3], [1.0, 0.995, 1.2]) == []
    assert sanity.flag("L -15 us", "negative").startswith("L -15 us " + sanity.FLAG)


def test_the_scan_finds_what_it_should_and_spares_refusals() -> None:
    bad = ("sizes [65,911, inf) B  L -15.28 us [-22.46, -11.4]\n"
           "per-pair eff. bw @3 B (median)\n"
           "--cfg=smpi/lat-factor:0:0;1024:1.2\n"
           "bandwidth 2.91e+15 B/s\n"
           "change +8 % [-100.0 %, +5.3e+30 %]\n")
    assert len(violations(bad)) == 6, violations(bad)
    refused = ("pt2pt: error: ping-pong model: the nominal bandwidth 2.91e+15 B/s is\n"
               "above 4e+12 B/s: a fit's artefact.\n\nL -1 us\n")
    assert violations(refused) == ["negative time '-1 us'"]
    assert not violations(sanity.flag("L -15.28 us", "negative"))


# --------------------------------------------------------------------------- data
def _csv(path: Path, size: np.ndarray, time: np.ndarray) -> Path:
    path.write_text("size,duration\n" + "".join(f"{int(s)},{t:.9e}\n"
                                                 for s, t in zip(size, time, strict=True)))
    return path


def _busy(root: Path) -> Path:
    """The busy machine's shm run (stalls of up to 6.5 ms), as ingest reads it."""
    lines = (DATA / "busy_shm_pingpong.csv").read_text().splitlines()
    rows = np.array([[float(v) for v in line.split(",")] for line in lines
                     if line and not line.startswith(("#", "seq"))])
    path = _csv(root / "busy_shm.csv", rows[:, 1], rows[:, 2])
    assert ingest([path], root / "busy", campaign="busy", transport="shm").ok
    return root / "busy"


def _synthetic(root: Path) -> Path:
    """Edge cases in one dataset: send + recv longer than the ping-pong (LogGP's L < 0), a
    flat series (no per-byte cost: an infinite bandwidth), a series whose median drops at a
    switch, and contention runs of k = 1, 2, 4 with log-uniform sizes of their own."""
    rng = np.random.default_rng(11)
    size = np.floor(np.exp(rng.uniform(0, np.log(4 << 20), 1500)))
    noise = rng.lognormal(0, 0.1, (5, size.size))
    base = 5e-6 + size / 1e9
    files = {"pingpong": base * noise[0], "send": 0.8 * base * noise[1],
             "recv": 0.7 * base * noise[2]}
    for op, t in files.items():
        path = _csv(root / f"neg_{op}.csv", size, t)
        assert ingest([path], root / "syn", campaign="negL", transport="tcp", op=op).ok
    flat = _csv(root / "flat.csv", size, 4e-6 * noise[3])
    assert ingest([flat], root / "syn", campaign="flat", transport="tcp").ok
    drop = np.where(size < 1024, 8e-6, 4e-6) + size / 2e9
    step = _csv(root / "step.csv", size, drop * noise[4])
    assert ingest([step], root / "syn", campaign="step", transport="shm").ok
    files_k = []
    for k in (1, 2, 4):
        r = np.random.default_rng(k)
        sizes = np.floor(np.exp(r.uniform(0, np.log(4 << 20), 600))).astype(int)
        rounds = [(int(s), list((20e-6 + s * k / 1e9) * r.lognormal(0, 0.1, k)))
                  for s in sizes]
        files_k.append(write_contention_run(root / f"k{k}", k, rounds,
                                            {**META, "hosts": ["n1"] * k + ["n2"] * k}))
    assert ingest(files_k, root / "syn", campaign="cont", transport="tcp").ok
    return root / "syn"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory, refdata_dir: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sanity")
    graphene = root / "graphene"
    assert ingest([refdata_dir / GRAPHENE], graphene, campaign="graphene").files_ok
    taurus = root / "taurus"
    assert ingest([refdata_dir / TAURUS], taurus, campaign="taurus").files_ok
    return {"busy": _busy(root), "graphene": graphene, "taurus": taurus,
            "synthetic": _synthetic(root)}


Run = Callable[..., str]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """``pt2pt ARGS`` in this process: its printed output (stdout and stderr); a refusal is
    allowed (exit 1-4), a traceback is not."""
    def call(*args: str | Path) -> str:
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        text = out.out + out.err
        assert code in (0, 1, 2, 3, 4), (args, code, text[-2000:])
        assert "Traceback" not in text, text[-3000:]
        return text
    return call


def _series(dataset: Path) -> list[dict[str, str]]:
    import polars as pl

    from kit.data import dataset as ds

    table = ds.series_table(dataset).filter(pl.col("stat").cast(pl.String) == "raw")
    return [{k: str(v) for k, v in r.items() if k in ds.SERIES_KEYS} for r in table.to_dicts()]


@pytest.mark.parametrize("name", ["busy", "graphene", "taurus", "synthetic"])
def test_no_unflagged_violation_reaches_a_user(name: str, datasets: dict[str, Path],
                                               tmp_path: Path, run: Run) -> None:
    data = datasets[name]
    seen: list[tuple[str, str]] = []

    def check(where: str, text: str) -> None:
        seen.append((where, text))

    check("datasets", run("datasets", data))
    models = tmp_path / "models"
    check("fit --all", run("fit", data, "--all", "-o", models, "--jobs", "1"))
    check("contention", run("contention", data))
    check("loggp", run("loggp", data) if name != "synthetic"
          else run("loggp", data, "--series", "campaign=negL"))
    check("diff --halves", run("diff", f"{data}#{_selector(_series(data)[0])}", "--halves",
                               "--bootstrap", "40"))
    for other in ("busy", "graphene"):
        if other != name:
            check(f"diff {other}", run("diff", datasets[other], data, "--bootstrap", "40",
                                       "--no-params"))
    for i, path in enumerate(sorted(models.glob("*.json"))[:6]):
        check(f"predict {path.name}", run("predict", path, "--sizes", "0,1,64,1024,65536,"
                                          "1048576,4194304"))
        out = tmp_path / f"sg{i}"
        check(f"export {path.name}", run("export", path, "--simgrid", "-o", out))
        for cfg in out.glob("*.txt"):
            check(f"{cfg.name} of {path.name}", cfg.read_text())
        report = tmp_path / f"report{i}"
        check(f"report {path.name}", run("report", path, "-o", report))
        check(f"report {path.name} html", (report / "index.html").read_text())
    if name == "synthetic":
        steps = next(p for p in models.glob("*.json") if "step" in p.name)
        check("step diff", run("diff", f"{data}#campaign=flat", f"{data}#campaign=step",
                               "--bootstrap", "40"))
        assert steps.exists()
    found = [v for where, text in seen for v in violations(text, where)]
    assert not found, "\n".join(found[:20])


def _selector(series: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in series.items() if v and k != "pairs")


def test_the_edge_cases_are_flagged_where_they_arise(datasets: dict[str, Path],
                                                     tmp_path: Path, run: Run) -> None:
    """Each known case is caught (not merely absent): L < 0 refused with its reason, the
    contention figures read in a dense window, the flat series' bandwidth not estimated."""
    data = datasets["synthetic"]
    text = run("loggp", data, "--series", "campaign=negL")
    assert "L    not estimated (not physical: L" in text and "T1 - o_s - o_r" in text
    text = run("contention", data)
    assert "per-pair eff. bw @[" in text and "@3 B" not in text
    from kit.analyses.diff import Side, diff

    rng = np.random.default_rng(3)
    size = np.floor(np.exp(rng.uniform(0, np.log(4 << 20), 800)))
    flat_a = Side("A", size, 4e-6 * rng.lognormal(0, 0.1, size.size))
    flat_b = Side("B", size, 4e-6 * rng.lognormal(0, 0.1, size.size))
    result = diff(flat_a, flat_b, n_boot=40)
    for p in result.params:
        if p.param == "bandwidth_Bps":
            assert p.why and not p.significant
    for p in result.params:
        assert p.param != "time_at_lo_s" or p.a < 1.0
