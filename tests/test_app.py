"""Applications both ways (issue 57): the ``app`` campaign tool for real, ``simulate --app`` in
SimGrid, from one source; their results, series keys and the errors of bad programs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from kit.cli import main
from kit.core.errors import UserError
from kit.tools import app as apps
from tests.builders import linear_overhead_model, three_linear_regimes
from tests.conftest import mpi_env

needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None or shutil.which("smpicc") is None,
    reason="SimGrid is not installed (apt-get install libsimgrid-dev g++); CI installs it")

HALO_OUT = """halo: np 4 cells 4096 width 1024 bytes 8192 iterations 5 compute_us 100 mode sendrecv
rank 0 time 1.5e-03
rank 1 time 1.4e-03
rank 2 time 1.4e-03
rank 3 time 1.3e-03
wall_time_s 1.5e-03
"""
ALLREDUCE_OUT = """
# OSU MPI Allreduce Latency Test v7.4
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)
4                      12.50
8                      13.00
"""


def test_results_and_labels(fixtures_dir: Path) -> None:
    assert apps.read_result(HALO_OUT, where="x") == (8192, 1.5e-3, [1.5e-3, 1.4e-3, 1.4e-3, 1.3e-3])
    assert apps.read_result(ALLREDUCE_OUT, where="x") == (8, 13.0e-6, [])
    assert apps.read_result(ALLREDUCE_OUT, where="x", size=4)[1] == pytest.approx(12.5e-6)
    # OSU bandwidth: MB/s (10^6) as seconds per message
    size, seconds, _ = apps.read_result((fixtures_dir / "osu" / "osu_bw_tcp_7.4.txt").read_text(),
                                        where="x", size=65536)
    assert size == 65536 and 1e-6 < seconds < 1e-2
    with pytest.raises(UserError, match="neither 'wall_time_s' nor an OSU title"):
        apps.read_result("Segmentation fault\n", where="run 3")
    text = apps.label("halo", ["-w", "8192", "-m", "isend"], 4)
    assert text == "halo -w 8192 -m isend np=4"
    assert apps.parse_label(text) == ("halo", ["-w", "8192", "-m", "isend"], 4)
    with pytest.raises(UserError, match="program"):
        apps.parse_label("halo -w 8")
    with pytest.raises(UserError, match="unknown program"):
        apps.program("hpl")


@pytest.mark.skipif(shutil.which("mpicc") is None, reason="mpicc not installed")
def test_a_program_that_does_not_build_names_itself_and_the_compiler(tmp_path: Path) -> None:
    bad = tmp_path / "broken.c"
    bad.write_text("#include <mpi.h>\nint main(void) { return undefined_thing; }\n")
    with pytest.raises(apps.BuildError) as err:
        apps.build(apps.program(str(bad)), "mpicc", cache=tmp_path / "cache")
    text = err.value.paragraph()
    assert "broken does not build with mpicc" in text and "undefined_thing" in text
    assert not list((tmp_path / "cache").rglob("broken"))  # nothing half-built kept


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kit.outputs.export.platform import cluster_platform

    folder = tmp_path_factory.mktemp("platform")
    cluster_platform(three_linear_regimes(1e-8), hosts=4, cores=2,
                     intra_model=linear_overhead_model(1e-6, 2e-10)).write(folder)
    return folder


@needs_simgrid
def test_simulate_app_halo_with_noise_and_per_rank_times(platform: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    out = tmp_path / "sim.json"
    assert main(["simulate", "--app", "halo", "--args", "-n 4096 -w 512 -i 5 -c 50", "--np", "4",
                 "--platform", str(platform), "--reps", "3", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "halo -n 4096 -w 512 -i 5 -c 50 np=4" in text and "computation not simulated" in text
    doc = json.loads(out.read_text())
    values = [r["seconds"] for r in doc["runs"]]
    assert len(values) == 3 and len(set(values)) == 3  # three seeds, three noisy runs
    assert all(len(r["ranks"]) == 4 and max(r["ranks"]) == r["seconds"] for r in doc["runs"])
    assert all(r["size"] == 4096 for r in doc["runs"])  # 512 cells x 8 B
    # the known compute phase is simulated exactly: 5 iterations x 50 us at least
    assert min(values) > 5 * 50e-6
    # deterministic and nominal variants run once and say so
    assert main(["simulate", "--app", "halo", "--args", "-n 4096 -w 512 -i 5", "--np", "4",
                 "--platform", str(platform), "--nominal", "--json"]) == 0
    nominal = json.loads(capsys.readouterr().out)
    assert nominal["variant"] == "nominal" and not nominal["noise"]


@needs_simgrid
@pytest.mark.parametrize("source, words", [
    ("#include <mpi.h>\nint main(void) { return undefined_thing; }\n",
     ["does not build with smpicc", "undefined_thing"]),
    ("#include <mpi.h>\nint main(int c, char **v) { int r, x = 0; MPI_Init(&c, &v);\n"
     "MPI_Comm_rank(MPI_COMM_WORLD, &r);\n"
     "MPI_Recv(&x, 1, MPI_INT, 1 - r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);\n"
     "MPI_Finalize(); return 0; }\n", ["failed under SimGrid", "Deadlock detected"]),
    ("#include <mpi.h>\nint main(int c, char **v) { MPI_Comm k; MPI_Init(&c, &v);\n"
     "MPI_Comm_spawn(\"x\", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &k,\n"
     "MPI_ERRCODES_IGNORE); MPI_Finalize(); return 0; }\n",
     ["failed under SimGrid", "Not yet implemented: PMPI_Comm_spawn"]),
    ("#include <mpi.h>\nint main(int c, char **v) { volatile int spin = 1; MPI_Init(&c, &v);\n"
     "while (spin) {} MPI_Finalize(); return 0; }\n", ["did not finish within 3 s"]),
], ids=["no-build", "deadlock", "unsupported", "time-limit"])
def test_bad_programs_are_one_message_and_leave_no_result(
        platform: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str,
        words: list[str]) -> None:
    prog = tmp_path / "bad.c"
    prog.write_text(source)
    out = tmp_path / "sim.json"
    assert main(["simulate", "--app", str(prog), "--np", "2", "--platform", str(platform),
                 "--reps", "2", "--time-limit", "3", "-o", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "program bad" in err and "Traceback" not in err
    for word in words:
        assert word in err
    assert not out.exists()


APP_CAMPAIGN = """\
name: app-test
mpi: openmpi
transports: [shm]
placement: intra-node
repetitions: 2
seed: 7
launcher: mpirun
tools:
  - tool: app
    program: halo
    args: ["-n", "2048", "-w", "256", "-i", "3", "-c", "10"]
    np: [2]
  - tool: probe
    ops: [pingpong]
    sizes: loguniform:1:4096
    samples: 200
"""


@pytest.mark.mpi
@pytest.mark.slow
def test_app_campaign_runs_locally_into_its_own_series(
        probe_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app tool through the job templates (run-local): each repetition one row, op app,
    the program key naming program, arguments and ranks; fit --all leaves it to predict-app."""
    from kit.data.collect import collect
    from kit.data.dataset import runs, scan, series_table
    from kit.measure.campaign.plan import plan_campaign
    from kit.measure.campaign.runlocal import run_local

    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    for key, value in mpi_env().items():
        monkeypatch.setenv(key, value)
    campaign = tmp_path / "c.yaml"
    campaign.write_text(APP_CAMPAIGN)
    out, dataset = tmp_path / "campaign", tmp_path / "dataset"
    manifest = json.loads(plan_campaign(campaign, out).read_text())
    app_jobs = [j for j in manifest["jobs"] if j["tool"] == "app"]
    assert len(app_jobs) == 2 and all(j["ntasks_per_node"] == 2 and j["nodes"] == 1
                                      for j in app_jobs)
    assert all("-np2-" in j["id"] for j in app_jobs)
    run_local(out)
    assert collect(out, dataset).ok
    table = series_table(dataset)
    app = table.filter(pl.col("op") == "app")
    assert app.height == 1
    assert app["program"][0] == "halo -n 2048 -w 256 -i 3 -c 10 np=2"
    assert set(table.filter(pl.col("op") != "app")["program"]) == {""}
    rows = scan(dataset).filter(pl.col("op") == "app").collect()
    assert rows.height == 2 and (rows["size"] == 2048).all() and (rows["time"] > 30e-6).all()
    recorded = runs(dataset).filter(pl.col("tool") == "app")
    assert recorded.height == 2 and recorded["start"].null_count() == 0
    assert main(["fit", str(dataset), "--all", "--no-intervals", "-o", str(tmp_path / "m")]) == 0
    models = [p.name for p in (tmp_path / "m").glob("*.json")]
    assert models and not [m for m in models if "__app__" in m or "halo" in m], models
    _runs_that_waited_for_a_cpu_are_withheld(tmp_path, dataset)
    if shutil.which("smpirun") is None:
        return
    # predict-app: the same program simulated on a platform (synthetic models: no
    # calibration series, hence no Hockney baseline, which the notes say), the report
    # section and the TUI view read the same result
    from kit.outputs.export.platform import cluster_platform

    platform = tmp_path / "platform"
    cluster_platform(three_linear_regimes(1e-8), hosts=2, cores=2,
                     intra_model=linear_overhead_model(1e-6, 2e-10)).write(platform)
    result = tmp_path / "apps.json"
    assert main(["predict-app", str(dataset), "--platform", str(platform), "-o",
                 str(result)]) == 0
    doc = json.loads(result.read_text())
    (prog,) = doc["programs"]
    assert prog["program"] == "halo -n 2048 -w 256 -i 3 -c 10 np=2"
    assert set(prog["comparisons"]) == {"calibrated", "nominal"}
    cal = prog["comparisons"]["calibrated"]
    assert cal["n_real"] == 2 and cal["n_sim"] == 5
    assert cal["ratio_lo"] <= cal["ratio"] <= cal["ratio_hi"]
    assert any("no Hockney baseline" in n for n in doc["notes"])
    report = tmp_path / "report"
    assert main(["report", str(dataset), "--apps", str(result), "--no-validate", "-o",
                 str(report)]) == 0
    html = (report / "index.html").read_text()
    assert 'id="apps"' in html and "halo -n 2048 -w 256 -i 3 -c 10 np=2" in html
    _tui_shows_the_apps(dataset, result)


def _runs_that_waited_for_a_cpu_are_withheld(tmp_path: Path, dataset: Path) -> None:
    """predict-app's real runs come with their run-quality verdicts from the runs table:
    the same collected runs, marked disturbed, withhold the program (a copy: the test's
    dataset stays as collected)."""
    from kit.data.dataset import RUNS_FILE
    from kit.outputs.predictapp import app_series

    (series,) = app_series(dataset)
    assert len(series["real"]) + series["dropped"] == 2
    busy = tmp_path / "busy"
    shutil.copytree(dataset, busy)
    table = pl.read_parquet(busy / RUNS_FILE)
    meta = pl.read_parquet_metadata(busy / RUNS_FILE)
    why = "tasks waited for a CPU 90 % of the time"
    table.with_columns(conditions=pl.when(pl.col("tool") == "app").then(pl.lit("disturbed"))
                       .otherwise(pl.col("conditions")),
                       conditions_why=pl.when(pl.col("tool") == "app").then(pl.lit(why))
                       .otherwise(pl.col("conditions_why"))
                       ).write_parquet(busy / RUNS_FILE, metadata=meta)
    (series,) = app_series(busy)
    assert series["withheld"] and why in series["withheld"] and len(series["real"]) == 2


def _tui_shows_the_apps(dataset: Path, result: Path) -> None:
    import asyncio

    from textual.widgets import DataTable

    from tui.app import ExplorerApp
    from tui.screens.apps import AppsScreen

    async def explore() -> None:
        app = ExplorerApp(dataset, apps=result)
        async with app.run_test(size=(160, 50)) as pilot:
            for _ in range(200):
                await pilot.pause(0.05)
                if not any(w.is_running for w in app.workers):
                    break
            await pilot.press("ctrl+a")
            await pilot.pause(0.3)
            assert isinstance(app.screen, AppsScreen)
            table = app.screen.query_one("#apps-table", DataTable)
            assert table.row_count == 1
            assert "halo" in str(table.get_row_at(0)[0])

    asyncio.run(explore())


def test_comparison_figures_on_synthetic_truth() -> None:
    """The median ratio's interval covers 1 about 95 % of the time when simulated and real
    runs come from one distribution; a baseline 20 % off is 'baseline' or 'calibrated' by
    which is closer, never when the intervals overlap."""
    import numpy as np

    from kit.analyses.appcompare import closer, compare

    rng = np.random.default_rng(3)
    covered, inside = 0, 0
    trials = 100
    for _ in range(trials):
        real = rng.lognormal(-7.0, 0.05, 8)
        sim = rng.lognormal(-7.0, 0.05, 8)
        c = compare(real, sim, "calibrated", n_boot=300)
        covered += c.ratio_lo <= 1.0 <= c.ratio_hi
        inside += c.inside
        assert 0.0 <= c.real_p50_level <= 1.0
    assert 0.88 <= covered / trials <= 1.0
    assert inside / trials > 0.5
    real = rng.lognormal(-7.0, 0.01, 10)
    cal = compare(real, real * 1.01, "calibrated")
    off = compare(real, np.full(1, np.median(real) * 1.2), "nominal")
    assert off.ratio == pytest.approx(1.2, rel=0.01) and not off.inside
    assert closer(cal, off) == "calibrated"
    assert closer(off, cal) == "baseline"
    near = compare(real, np.full(1, np.median(real) * 1.005), "nominal")
    assert closer(cal, near) == "tie"
    with pytest.raises(ValueError):
        compare([], [1.0], "x")


def test_real_runs_that_waited_for_a_cpu_are_not_compared() -> None:
    """Only runs whose run quality was not disturbed are compared (unknown: nothing recorded,
    kept); a program left with fewer than two is withheld, with the runs' own reason, and
    keeps every run for display (issue 57: 4 ranks on 2 cores measured the scheduler)."""
    from kit.analyses.appcompare import usable_runs

    waited = "tasks waited for a CPU 86 % of the time"
    mixed = usable_runs([1.0, 2.0, 9.0, 1.5], ["quiet", None, "disturbed", "quiet"],
                        [None, None, waited, None])
    assert mixed.values == [1.0, 2.0, 1.5] and mixed.dropped == 1 and mixed.withheld is None
    oversubscribed = usable_runs([30.0, 31.0, 29.0], ["disturbed"] * 3, [waited] * 3)
    assert oversubscribed.values == [30.0, 31.0, 29.0] and oversubscribed.dropped == 0
    assert oversubscribed.withheld and waited in oversubscribed.withheld
    assert "3 of 3" in oversubscribed.withheld


def test_withheld_programs_are_shown_but_left_out_of_the_target_figures() -> None:
    """The summary's median error, within-target count and baseline verdicts are over the
    programs not withheld; the withheld one stays in the table, marked, and is named under
    it."""
    from kit.analyses.appcompare import compare
    from kit.outputs.predictapp import document, summary_lines, table_rows

    def result(program: str, real: list[float], sim: list[float],
               withheld: str | None) -> dict[str, object]:
        cal = compare(real, sim, "calibrated", n_boot=200).to_dict()
        nominal = compare(real, [sim[0] * 2], "nominal", n_boot=200).to_dict()
        return {"program": program, "placement": "inter-node", "real": real, "dropped": 0,
                "withheld": withheld, "comparisons": {"calibrated": cal, "nominal": nominal},
                "closer": {"nominal": "calibrated"}}

    good = result("osu_latency np=2", [1.0, 1.01, 0.99], [1.01, 1.02, 1.0], None)
    busy = result("halo np=4", [30.0, 31.0, 29.0], [1.0, 1.0, 1.0], "3 of 3 real runs waited")
    doc = document(Path("ds"), Path("plat"), [good, busy], [], "skip")
    s = doc["summary"]
    assert s["programs"] == 1 and s["withheld"] == 1
    assert s["median_error"] == pytest.approx(0.01, abs=0.005) and s["within_target"] == 1
    assert s["nominal"]["calibrated_closer"] == 1
    rows = table_rows(doc)
    assert [r["program"] for r in rows] == ["osu_latency np=2", "halo np=4"]
    assert rows[1]["runs"].endswith("withheld") and not rows[0]["runs"].endswith("withheld")
    assert any("halo np=4" in line and "3 of 3 real runs waited" in line
               for line in summary_lines(doc))
