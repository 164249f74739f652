"""Collective algorithms under SMPI (issue 61): the sweep on the real SimGrid at small numproc
(statuses, resumption, unknown algorithms, limits) and the analysis on synthetic truth."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kit.analyses.collectives import ranking, selector_lines, shares
from kit.cli import main
from kit.outputs import collsweep
from tests.builders import linear_overhead_model, three_linear_regimes

needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None or shutil.which("smpicc") is None,
    reason="SimGrid is not installed (apt-get install libsimgrid-dev g++); CI installs it")


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kit.outputs.export.platform import cluster_platform

    folder = tmp_path_factory.mktemp("platform")
    cluster_platform(three_linear_regimes(1e-8), hosts=4, cores=2,
                     intra_model=linear_overhead_model(1e-6, 2e-10)).write(folder)
    return folder


def _sweep(out: Path, platform: Path, *extra: str) -> list[str]:
    return ["collectives", "sweep", str(out), "--platform", str(platform), *extra]


@pytest.mark.skipif(shutil.which("mpicc") is None, reason="mpicc not installed")
def test_the_driver_is_warning_free_c99(tmp_path: Path) -> None:
    for cc in ("mpicc", "smpicc"):
        if shutil.which(cc) is None:
            continue
        proc = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror",
                               "-D_POSIX_C_SOURCE=200112L", "-c", "-o", str(tmp_path / "x.o"),
                               str(collsweep.apps.APPS_DIR / "collbench.c")],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, (cc, proc.stderr)


@needs_simgrid
def test_sweep_records_every_point_and_resumes(platform: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    args = ["--algorithms", "basic_linear,bruck,pair", "--sizes", "1K,64K", "--reps", "2"]
    assert main(_sweep(out, platform, "--np", "2,4", *args)) == 0
    assert "[12/12]" in capsys.readouterr().out
    rows = pl.read_parquet(out / collsweep.DATASET)
    assert rows.height == 3 * 2 * 2 * 2  # algorithms x np x sizes x reps
    assert set(rows["status"]) == {"ok"}
    assert set(rows["series"]) == {"alltoall/basic_linear", "alltoall/bruck", "alltoall/pair"}
    assert (rows["time"] > 0).all() and (rows["wall_s"] > 0).all()
    med = rows.group_by("algorithm", "numproc", "size").agg(pl.col("time").median())
    for (alg, n), part in med.partition_by("algorithm", "numproc", as_dict=True).items():
        t = dict(zip(part["size"], part["time"], strict=True))
        assert t[65536] > 10 * t[1024], (alg, n)  # 64x the bytes on a ~1 Gbit/s link
    two = med.filter((pl.col("numproc") == 2) & (pl.col("size") == 65536))["time"]
    assert two.max() / two.min() < 1.05  # two ranks: every algorithm is one exchange

    # resumed with a larger np: only the new points run; the journal's cut last line reruns
    journal = out / collsweep.JOURNAL
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:-1]) + lines[-1][:25])
    assert main(_sweep(out, platform, "--np", "2,4,8", *args)) == 0
    printed = capsys.readouterr().out
    assert "[7/7]" in printed and "[8/" not in printed  # 6 new + the cut one
    assert pl.read_parquet(out / collsweep.DATASET).height == 3 * 3 * 2 * 2

    assert main(["collectives", "analyze", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["ranking"]) == 18 and len(doc["shares"]) == 3 * 3  # one range, 3 X's
    assert main(["collectives", "analyze", str(out)]) == 0
    text = capsys.readouterr().out
    assert "alltoall np=8 size=65536: best" in text and "within 5 %" in text
    report = tmp_path / "report"
    assert main(["collectives", "analyze", str(out), "--split", "4", "--report",
                 str(report)]) == 0
    page = (report / "index.html").read_text()
    assert all((report / f"alltoall-{k}.png").stat().st_size > 5000 for k in ("times", "shares"))
    assert "bruck" in page and "within 10 %" in page and "&lt;=4" in page


@needs_simgrid
def test_an_unknown_algorithm_lists_the_valid_ones(platform: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    assert main(_sweep(out, platform, "--np", "2", "--sizes", "1K",
                       "--algorithms", "pair,bruk")) == 2
    err = capsys.readouterr().err
    assert "'bruk'" in err and "bruck" in err and "basic_linear" in err
    assert "Traceback" not in err and not (out / collsweep.JOURNAL).exists()


@needs_simgrid
def test_points_over_the_limits_are_recorded_and_the_sweep_goes_on(platform: Path,
                                                                   tmp_path: Path) -> None:
    base = collsweep.Sweep(platform, {"alltoall": ["pair"]}, [2, 4], [1024], reps=2)
    # 1 KiB: every run (even smpirun's shell) exceeds it at its first sample
    over = collsweep.run_sweep(collsweep.Sweep(**{**base.__dict__, "memory_limit": 1024}),
                               tmp_path / "mem")
    assert [p.status for p in over] == ["memory", "memory"]
    assert all("limit" in p.reason and not p.times for p in over)
    rows = collsweep.read_dataset(tmp_path / "mem")
    assert rows["status"].to_list() == ["memory", "memory"] and rows["time"].is_null().all()
    # 200,000 repetitions would take ~25 CPU-s (20,000 took 2.5): killed at the 1 s limit
    slow = collsweep.run_sweep(collsweep.Sweep(**{**base.__dict__, "time_limit": 1.0,
                                                  "reps": 200000}), tmp_path / "time")
    assert [p.status for p in slow] == ["timeout", "timeout"]
    # such points never win: the analysis reads them as not completed
    assert ranking(rows)["best"].is_null().all()


@needs_simgrid
@pytest.mark.skipif(shutil.which("prlimit") is None, reason="prlimit (util-linux) missing")
def test_the_hard_caps_stop_a_run_inside_simgrid_and_the_sweep_goes_on(
        platform: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the sampler looks once, at the start: what stops the runs is the per-process caps
    monkeypatch.setattr(collsweep, "SAMPLE_PERIOD_S", 3600.0)
    # bruck allocates numproc x size per rank (8 x 16 MiB here) past a 64 MiB data cap;
    # pair's buffers are shared-malloc file mappings, which the cap leaves alone (had the
    # driver malloc'ed them, 8 ranks x 2 x 16 MiB of private data would not fit; the files
    # take 32 MiB of /dev/shm, which a container's default 64 MiB holds)
    points = collsweep.run_sweep(collsweep.Sweep(
        platform, {"alltoall": ["bruck", "pair"]}, [8], [2 << 20], reps=1,
        data_cap=64 << 20), tmp_path / "mem")
    assert [(p.algorithm, p.status) for p in points] == [("bruck", "memory"), ("pair", "ok")]
    assert "bad_alloc" in points[0].reason and "killed" not in points[0].reason
    # 200,000 repetitions take ~25 CPU-s: stopped at 1 CPU-s, whatever the wall clock
    slow = collsweep.run_sweep(collsweep.Sweep(
        platform, {"alltoall": ["pair"]}, [2, 4], [1024], reps=200000, cpu_limit=1),
        tmp_path / "cpu")
    assert [p.status for p in slow] == ["timeout", "timeout"]
    assert all("CPU limit" in p.reason and not p.times for p in slow)
    assert collsweep.read_dataset(tmp_path / "cpu")["status"].to_list() == ["timeout"] * 2


_MAPPER = """
import mmap, os, sys, tempfile
fd, path = tempfile.mkstemp(dir="/dev/shm")
os.unlink(path)  # as SimGrid's shared-malloc buffers: unlinked, held open
os.ftruncate(fd, 32 << 20)
maps = [mmap.mmap(fd, 32 << 20) for _ in range(16)]  # 16 "ranks" map the same 32 MiB
for m in maps:
    for off in range(0, 32 << 20, 4096):
        m[off] = 1
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm")
def test_the_memory_figure_counts_a_shared_file_once_however_often_it_is_mapped() -> None:
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _MAPPER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        status = Path(f"/proc/{proc.pid}/status").read_text()
        shmem = int(next(ln.split()[1] for ln in status.splitlines()
                         if ln.startswith("RssShmem:"))) * 1024
        figure = collsweep._session_memory(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert shmem >= 16 * (32 << 20)  # RSS counts every mapping: 512 MiB
    assert 32 << 20 <= figure < 128 << 20  # the file once, plus Python's own heap


def _rows(times: dict[str, list[float | None]], numprocs: list[int]) -> pl.DataFrame:
    rows = []
    for alg, values in times.items():
        for i, t in enumerate(values):
            for rep in range(3):
                rows.append({"collective": "alltoall", "algorithm": alg,
                             "numproc": numprocs[i], "size": 1024 * (i + 1),
                             "time": None if t is None else t * (1 + 1e-4 * rep),
                             "status": "ok" if t is not None else "timeout"})
    return pl.DataFrame(rows)


def test_shares_and_intervals_on_synthetic_truth() -> None:
    n = 40
    numprocs = [4 if i < n // 2 else 512 for i in range(n)]
    truth = {
        "best": [1.0] * n,
        "close": [1.03] * n,  # within 5 % and 10 %, never within 2 %
        "half": [1.0 if i % 2 else 1.5 for i in range(n)],
        "fails": [None if i < 10 else 1.0 for i in range(n)],  # a failed point is never within
    }
    rows = _rows(truth, numprocs)
    ranked = ranking(rows)
    assert (ranked.filter(pl.col("algorithm") == "best")["ratio"] == 1.0).all()
    close = ranked.filter(pl.col("algorithm") == "close")["ratio"]
    assert close.min() == pytest.approx(1.03) and close.max() == pytest.approx(1.03)
    found = {(s.algorithm, s.numprocs, s.within_percent): s for s in shares(rows)}
    assert {k[1] for k in found} == {"all", "<=256", ">256"}
    assert found["close", "all", 2.0].share == 0 and found["close", "all", 5.0].share == 1
    # a configuration where "fails" did not complete is left out of every share; the
    # bounds say what its missing time could change
    fails = found["fails", "all", 10.0]
    assert (fails.share, fails.configurations, fails.left_out) == (1.0, 30, 10)
    assert (fails.bound_lo, fails.bound_hi) == (0.75, 1.0)
    assert found["close", "all", 2.0].bound_hi == 0  # slower than a completed best: certain
    half = found["half", "all", 5.0]
    assert half.share == 0.5 and half.lo < 0.5 < half.hi and half.hi - half.lo < 0.5
    # a selector's irregularity: how often what it picks is more than X % slower
    mixed = _rows({"best": [1.0] * n, "mpich": [1.0 if i % 4 else 1.2 for i in range(n)]},
                  numprocs)
    assert ("alltoall selector mpich: more than 5 % slower than the best in 10 of 40 "
            "configurations") in "\n".join(selector_lines(shares(mixed, within=(5.0,))))
    assert selector_lines(list(found.values())) == []  # no selector swept
    whole = found["best", ">256", 2.0]  # every point completed there
    assert whole.share == 1 and whole.hi == 1 and 0.8 < whole.lo < 1  # exact bound at n/n
    assert whole.configurations == n // 2
    # the intervals cover the truth of a population the configurations are drawn from
    covered = 0
    for seed in range(40):
        import numpy as np

        rng = np.random.default_rng(seed)
        hits = rng.random(n) < 0.3
        sample = _rows({"a": [1.0] * n, "b": [1.0 if h else 2.0 for h in hits]}, [4] * n)
        s = next(s for s in shares(sample, within=(5.0,), resamples=500, seed=seed)
                 if s.algorithm == "b")
        covered += s.lo <= 0.3 <= s.hi
    assert covered >= 33  # 95 % nominal; 40 trials


def test_a_killed_run_keeps_its_cpu_seconds() -> None:
    """A run killed over a limit dies unreaped by the sweep (its smpirun shell dies first),
    so its CPU time is read from the session before the kill: here a process that burned
    0.4 CPU-s in its own session, the same way smpirun is started."""
    import signal
    import sys

    code = ("import time\nwhile time.process_time() < 0.4: pass\nprint('burnt', flush=True)\n"
            "time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "burnt"
        assert 0.35 <= collsweep._session_cpu(proc.pid) < 30
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert collsweep._session_cpu(proc.pid) == 0  # gone: nothing of it is left to count


def test_a_point_that_did_not_complete_is_left_out_not_counted_slow(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The bias the censoring rule removes: "fast" is the best everywhere but times out (on
    the host) above 64 ranks. Counting its timeouts as "not within" would give it a share of
    0.5 and make "slow" (5 % behind it) the best at large numproc; the shares are over the
    configurations where both completed, the rest left out and bounded."""
    from kit.analyses.collectives import CENSORING, not_completed

    numprocs = [16, 32, 64, 128, 256, 512] * 4
    rows = _rows({"fast": [1.0 if n <= 64 else None for n in numprocs],
                  "slow": [1.05] * len(numprocs)}, numprocs)
    found = {(s.algorithm, s.numprocs, s.within_percent): s
             for s in shares(rows, within=(2.0, 10.0), split=64)}
    fast, slow = found["fast", "all", 2.0], found["slow", "all", 2.0]
    assert (fast.share, fast.configurations, fast.left_out) == (1.0, 12, 12)
    assert slow.share == 0.0 and slow.hi < 0.3  # never within 2 % where both ran
    assert (fast.bound_lo, fast.bound_hi) == (0.5, 1.0)
    assert (slow.bound_lo, slow.bound_hi) == (0.0, 0.5)  # it may be the best where fast is not
    above = found["slow", ">64", 10.0]
    assert math.isnan(above.share) and above.configurations == 0 and above.left_out == 12
    assert above.to_dict()["share"] is None
    assert set(not_completed(rows)["status"]) == {"timeout"} and not_completed(rows).height == 12
    # restricted to "slow", the large numprocs count again (it is then its own best)
    alone = {s.numprocs: s for s in shares(rows, within=(2.0,), split=64, algorithms=("slow",))}
    assert alone[">64"].share == 1.0 and alone[">64"].configurations == 12
    assert "no simulated time" in CENSORING
    # what the CLI prints, from a journal of the same points
    from dataclasses import asdict

    out = tmp_path / "sweep"
    out.mkdir()
    (out / collsweep.JOURNAL).write_text("".join(json.dumps(asdict(collsweep.Point(
        "alltoall", alg, n, 1024 * (1 + i // 6), "ok" if t else "timeout",
        times=[t] * 3 if t else [], reason="" if t else "CPU limit 20 s"))) + "\n"
        for alg, f in (("fast", 1.0), ("slow", 1.05)) for i, n in enumerate(numprocs)
        for t in [f if alg == "slow" or n <= 64 else None]))
    assert main(["collectives", "analyze", str(out), "--split", "64", "--within", "2"]) == 0
    text = capsys.readouterr().out
    assert "alltoall np=128 size=1024: fast timeout" in text and "left out" in text
    import re

    assert re.search(r"fast +all +12 +12 +1\.00 \[0\.\d\d, 1\.00\] \{0\.50-1\.00\}", text)
    assert re.search(r"slow +>64 +0 +12 +- \{0\.00-1\.00\}", text)
    assert "np=128 size=1024: best of those that completed slow" in text
    assert main(["collectives", "analyze", str(out), "--algorithms", "fast,nope"]) == 2
    assert "nope" in capsys.readouterr().err


def _session_of(word: str) -> set[int]:
    """The sessions of processes whose command line holds ``word``."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and word in (entry / "cmdline").read_bytes().decode(
                    errors="replace"):
                found.add(os.getsid(int(entry.name)))
        except OSError:
            continue
    return found


def _in_session(sid: int) -> list[str]:
    """Names of the live (not zombie) processes of session ``sid``."""
    names = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.getsid(int(entry.name)) == sid:
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    names.append((entry / "comm").read_text().strip())
        except (OSError, IndexError):
            continue
    return names


@needs_simgrid
def test_a_stopped_sweep_stops_its_smpirun_and_keeps_its_points(platform: Path,
                                                                tmp_path: Path) -> None:
    import signal
    import sys
    import time

    out = tmp_path / "sweep"
    seed = "918273"  # marks this test's smpirun (it runs in a session of its own)
    assert main(_sweep(out, platform, "--np", "2", "--sizes", "1K", "--algorithms", "pair",
                       "--seed", seed)) == 0
    kept = (out / collsweep.JOURNAL).read_text()
    proc = subprocess.Popen([sys.executable, "-m", "kit", *_sweep(
        out, platform, "--np", "2,8", "--sizes", "1K", "--algorithms", "pair", "--seed", seed,
        "--reps", "10000")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (sessions := _session_of(f"PT2PT_SIMGRID_SEED={seed}")) or not any(
                "smpimain" in _in_session(sid) for sid in sessions):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        # past its start-up (stopped earlier, smpimain may fail on its own when the sweep's
        # work folder, where smpirun wrote its hostfile, disappears)
        time.sleep(3)
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err
    # SIGKILL is sent before the sweep exits; a loaded kernel may take a moment to end them
    # (left running, the point takes over 10 s: 10,000 alltoalls of 8 ranks, ~12 CPU-s)
    deadline = time.monotonic() + 10
    while any(_in_session(sid) for sid in sessions) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [_in_session(sid) for sid in sessions] == [[]]
    assert (out / collsweep.JOURNAL).read_text() == kept


@needs_simgrid
def test_the_other_collectives_sweep_with_their_own_algorithms(
        platform: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # SimGrid's names differ per collective: 'lr' is an allreduce algorithm, not a bcast one
    assert main(_sweep(tmp_path / "b", platform, "--collective", "bcast", "--np", "4",
                       "--sizes", "4K", "--algorithms", "lr")) == 2
    assert "binomial_tree" in capsys.readouterr().err
    for collective, algorithms in (("allreduce", "lr,rdb"), ("bcast", "binomial_tree,flattree"),
                                   ("allgather", "ring,bruck"), ("reduce", "binomial,flat_tree")):
        out = tmp_path / collective
        assert main(_sweep(out, platform, "--collective", collective, "--np", "4",
                           "--sizes", "4K,256K", "--algorithms", algorithms, "--reps", "2")) == 0
        rows = collsweep.read_dataset(out)
        assert set(rows["status"]) == {"ok"} and set(rows["collective"]) == {collective}
        med = rows.group_by("algorithm", "size").agg(pl.col("time").median())
        for alg in algorithms.split(","):
            t = dict(med.filter(pl.col("algorithm") == alg).select("size", "time").rows())
            assert 0 < t[4096] < t[262144], (collective, alg)


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI is not installed")
def test_the_driver_forces_an_open_mpi_algorithm_for_real() -> None:
    """The real half of issue 61's validation: collbench -a forces the tuned component's
    algorithm (read back through MPI_T) and refuses a value Open MPI does not take."""
    from tests.conftest import mpi_env

    binary = collsweep.apps.build(collsweep.apps.program("collbench"), "mpicc")
    run = ["mpirun", "-np", "2", "--oversubscribe", "--mca", "btl", "self,vader", str(binary),
           "-c", "alltoall", "-s", "1024", "-r", "3"]
    proc = subprocess.run([*run, "-a", "2"], capture_output=True, text=True, timeout=120,
                          env=mpi_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    assert "forced coll_tuned_alltoall_algorithm 2" in proc.stdout
    times = [float(ln.split()[3]) for ln in proc.stdout.splitlines() if ln.startswith("rep ")]
    assert len(times) == 3 and all(t > 0 for t in times)
    bad = subprocess.run([*run, "-a", "99"], capture_output=True, text=True, timeout=120,
                         env=mpi_env(), check=False)
    assert bad.returncode != 0 and "collective_time_s" not in bad.stdout


@needs_simgrid
def test_the_shared_malloc_mode_does_not_change_the_simulated_times(platform: Path,
                                                                    tmp_path: Path) -> None:
    # local is the default because it is cheaper at scale (module doc); what it measures
    # must be what SimGrid's global mode measures, to the last digit
    def times(mode: str) -> dict[tuple[str, str, int, int], list[float]]:
        sweep = collsweep.Sweep(platform, {"alltoall": ["basic_linear", "bruck", "pair",
                                                        "ring", "ompi"]}, [8], [1024, 65536],
                                reps=2, noise=False, shared_malloc=mode)
        points = collsweep.run_sweep(sweep, tmp_path / mode)
        assert {p.status for p in points} == {"ok"}
        return {p.key: p.times for p in points}

    local, global_ = times("local"), times("global")
    assert len(local) == 10 and local == global_
    assert json.loads((tmp_path / "local" / "sweep.json").read_text())["shared_malloc"] == "local"
    with pytest.raises(collsweep.UserError, match="shared-malloc"):
        collsweep.run_sweep(collsweep.Sweep(platform, {"alltoall": ["pair"]}, [2], [4],
                                            shared_malloc="huge"), tmp_path / "bad")


@needs_simgrid
def test_extra_simgrid_options_reach_smpirun(platform: Path, tmp_path: Path) -> None:
    # the cost benchmark (bench_collectives_options.py) compares SimGrid options through
    # Sweep.cfg: an option must reach the run (a bad key fails it, in SimGrid's words), and
    # another context factory must leave the simulated times as they are
    def run(name: str, *cfg: str) -> list[collsweep.Point]:
        sweep = collsweep.Sweep(platform, {"alltoall": ["pair", "basic_linear"]}, [4], [65536],
                                reps=2, noise=False, cfg=cfg)
        return collsweep.run_sweep(sweep, tmp_path / name)

    base, other = run("base"), run("ucontext", "contexts/factory:ucontext")
    assert {p.status for p in base + other} == {"ok"}
    assert [p.times for p in base] == [p.times for p in other]
    bad = run("bad", "pt2pt/no-such-key:1")
    assert {p.status for p in bad} == {"failed"}
    assert all("pt2pt/no-such-key" in p.reason for p in bad)


def _twin_rows(medians: dict[str, float], spread: float, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame([{"collective": "alltoall", "algorithm": alg, "numproc": 4,
                          "size": 1024, "time": m * (1 + spread * rng.standard_normal())}
                         for alg, m in medians.items() for _ in range(30)])


def test_rankings_are_compared_only_where_the_real_difference_exceeds_the_noise() -> None:
    from kit.analyses.collagree import agreement, verdicts

    # real (1 % noise): a < c < b < e clearly, d within the noise of c; simulated: a < b as
    # measured, b and e reversed, a and c tied within the simulated noise
    real = _twin_rows({"a": 1.0, "b": 2.0, "c": 1.5, "d": 1.505, "e": 3.0}, 0.01, 1)
    sim = _twin_rows({"a": 1.0, "b": 3.0, "c": 1.0, "d": 0.5, "e": 2.0}, 0.01, 2)
    found = {(p.a, p.b): p for p in verdicts(real, sim, seed=3)}
    assert found[("a", "b")].verdict == "agrees"
    assert found[("b", "e")].verdict == "disagrees"
    assert found[("a", "c")].verdict == "simulated tie"
    assert found[("c", "d")].verdict == "undecided"
    for p in found.values():
        assert p.real_lo <= p.real_ratio <= p.real_hi and p.sim_lo <= p.sim_ratio <= p.sim_hi
    summary = agreement(list(found.values()))
    assert summary.undecided == 1 and summary.decided == len(found) - 1
    assert summary.agrees + summary.disagrees + summary.simulated_ties == summary.decided
    assert summary.lo <= summary.share <= summary.hi
    none = agreement([found[("c", "d")]])
    assert none.decided == 0 and math.isnan(none.share) and (none.lo, none.hi) == (0.0, 1.0)
    # a deterministic simulation (no noise): every repetition equal, the interval a point
    flat = {(p.a, p.b): p for p in verdicts(real, _twin_rows(
        {"a": 1.0, "b": 3.0, "c": 1.0, "d": 0.5, "e": 2.0}, 0.0, 2), seed=3)}
    assert flat[("a", "b")].sim_lo == flat[("a", "b")].sim_hi == pytest.approx(1 / 3)
    assert flat[("a", "b")].verdict == "agrees" and flat[("a", "c")].verdict == "simulated tie"


@pytest.mark.mpi
@needs_simgrid
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI is not installed")
def test_validate_runs_the_real_and_simulated_twins_and_compares_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The mechanics of issue 61's real-vs-simulated check, at its smallest: the platform is
    synthetic, so agreement is reported, never asserted (BENCHMARKS.md has the calibrated
    figure)."""
    from kit.analyses.collagree import VERDICTS
    from kit.outputs.export.platform import cluster_platform

    plat = tmp_path / "platform"
    cluster_platform(three_linear_regimes(1e-8), hosts=1, cores=4,
                     intra_model=linear_overhead_model(1e-6, 2e-10)).write(plat)
    out = tmp_path / "val"
    assert main(["collectives", "validate", str(out), "--platform", str(plat), "--np", "2,3",
                 "--sizes", "64K", "--runs", "2", "--reps", "3"]) == 0
    printed = capsys.readouterr().out
    assert "agreement where the real difference exceeds the noise" in printed
    doc = json.loads((out / "validation.json").read_text())
    assert doc["format"] == "pt2pt-collectives-validation" and doc["transport"] == "shm"
    assert len(doc["real"]) == 2 * 2 * 3 * 3  # runs x np x algorithms x reps
    assert all(r["time"] > 0 for r in doc["real"])
    assert {r["algorithm"] for r in doc["real"]} == {"basic_linear", "pair", "bruck"}
    # SMPI's pair refuses 3 ranks (not a power of two): said, and np 3 compares the others
    assert [(q["algorithm"], q["numproc"]) for q in doc["simulated_not_ok"]] == [("pair", 3)]
    assert "simulated pair np=3 size=65536 failed" in printed
    assert sorted((p["numproc"], p["a"], p["b"]) for p in doc["pairs"]) == [
        (2, "basic_linear", "bruck"), (2, "basic_linear", "pair"), (2, "bruck", "pair"),
        (3, "basic_linear", "bruck")]
    for p in doc["pairs"]:
        assert p["verdict"] in VERDICTS
        assert p["real_lo"] <= p["real_ratio"] <= p["real_hi"]
    a = doc["agreement"]
    assert a["decided"] + a["undecided"] == len(doc["pairs"])
    assert a["agrees"] + a["disagrees"] + a["simulated_ties"] == a["decided"]
    # an Open MPI algorithm without an SMPI twin is refused before anything runs
    assert main(["collectives", "validate", str(tmp_path / "bad"), "--platform", str(plat),
                 "--algorithms", "linear,linear_sync"]) == 2
    err = capsys.readouterr().err
    assert "'linear_sync'" in err and "modified_bruck" in err and "Traceback" not in err
    assert not (tmp_path / "bad").exists()


def test_the_split_follows_the_sweeps_topology(tmp_path: Path) -> None:
    """Where the shares split: a cabinet's ranks on a platform with cabinets, the 2015
    study's 256 on a flat one or when the sweep's platform cannot be read."""
    def split_of(doc: dict[str, object]) -> tuple[int | None, str]:
        (tmp_path / "sweep.json").write_text(json.dumps(doc))
        return collsweep.topology_split(tmp_path)

    cab = {"hosts": 1024, "cores": 2, "cabinet": 64}
    n, why = split_of({"platform": "/nowhere", "ranks_per_host": 2, "topology": cab})
    assert n == 128 and "64 hosts x 2 rank(s)" in why
    assert split_of({"platform": "/nowhere", "ranks_per_host": None, "topology": cab})[0] == 64
    n, why = split_of({"platform": "/nowhere", "topology": {**cab, "cabinet": None}})
    assert n == 256 and "flat" in why
    n, why = split_of({"platform": "/nowhere"})  # an older sweep: its platform is gone
    assert n == 256 and "not readable" in why
    (tmp_path / "sweep.json").unlink()
    assert collsweep.topology_split(tmp_path)[0] == 256


@needs_simgrid
def test_a_shared_uplink_slows_messages_between_cabinets_and_splits_the_shares(
        platform: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Four hosts in cabinets of two, each cabinet's uplink one host link wide: alltoall's
    pair algorithm at np 4 sends two of its three rounds across the cabinets, two flows per
    uplink, so it takes ~5/3 of the flat platform's time; basic_linear's all-at-once sends put
    4 MiB through each uplink where the flat platform's busiest link carries 3 (~4/3); at
    np 2 (one cabinet) both take the flat platform's time.
    The analysis splits the shares at the cabinet (2 ranks) and says why."""
    from kit.outputs.export.platform import cluster_platform

    cabinets = tmp_path / "cabinets"
    cluster_platform(three_linear_regimes(1e-8), hosts=4, cores=2, cabinet=2,
                     intra_model=linear_overhead_model(1e-6, 2e-10)).write(cabinets)
    args = ["--algorithms", "pair,basic_linear", "--np", "2,4", "--sizes", "1M", "--reps", "1",
            "--deterministic"]
    medians = {}
    for name, plat in (("flat", platform), ("cabinets", cabinets)):
        assert main(_sweep(tmp_path / name, plat, *args)) == 0
        rows = collsweep.read_dataset(tmp_path / name)
        assert set(rows["status"]) == {"ok"}
        medians[name] = {(r["algorithm"], r["numproc"]): r["time"]
                         for r in rows.iter_rows(named=True)}
    flat, cab = medians["flat"], medians["cabinets"]
    for alg, slower in (("pair", 1.5), ("basic_linear", 1.2)):
        assert cab[(alg, 2)] == pytest.approx(flat[(alg, 2)], rel=1e-6)
        assert cab[(alg, 4)] > slower * flat[(alg, 4)], alg
    capsys.readouterr()
    assert main(["collectives", "analyze", str(tmp_path / "cabinets"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["split"] == 2 and "cabinet" in doc["split_reason"]
    assert {s["numprocs"] for s in doc["shares"]} == {"all", "<=2", ">2"}
    assert main(["collectives", "analyze", str(tmp_path / "flat")]) == 0
    assert "split at 256: the 2015 study's cabinet boundary" in capsys.readouterr().out


COLL_CAMPAIGN = """\
name: coll-test
mpi: openmpi
transports: [shm]
placement: intra-node
repetitions: 1
seed: 11
launcher: mpirun
tools:
  - tool: collectives
    platform: {platform}
    collective: alltoall
    algorithms: [pair, basic_linear]
    np: [2, 4]
    sizes: [1K, 65536]
    reps: 2
    deterministic: true
    cpu_limit: 120
"""


def _plan_collectives(tmp_path: Path, platform: Path, monkeypatch: pytest.MonkeyPatch,
                      text: str = COLL_CAMPAIGN) -> tuple[Path, dict[str, object]]:
    from kit.measure.campaign.plan import plan_campaign

    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    (tmp_path / "c.yaml").write_text(text.format(platform=platform))
    out = tmp_path / "campaign"
    return out, json.loads(plan_campaign(tmp_path / "c.yaml", out).read_text())


@needs_simgrid
def test_a_collectives_campaign_plans_one_array_task_per_algorithm_and_numproc(
        platform: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The campaign section: one job per (algorithm, numproc) with every size inside, one
    task on one node, in one Slurm job array of the existing templates, each running this
    checkout's sweep into its job folder with the job's seed."""
    out, manifest = _plan_collectives(tmp_path, platform, monkeypatch)
    jobs = manifest["jobs"]
    assert isinstance(jobs, list) and len(jobs) == 2 * 2
    assert {(j["benchmark"], j["nodes"], j["ntasks_per_node"]) for j in jobs} == {
        ("pair", 1, 1), ("basic_linear", 1, 1)}
    assert {j["group"] for j in jobs} == {"pair-np2-shm-intra", "pair-np4-shm-intra",
                                          "basic_linear-np2-shm-intra",
                                          "basic_linear-np4-shm-intra"}
    arrays = sorted((out / "arrays").glob("*.sbatch"))
    assert len(arrays) == 4 and "--array=0-0" in arrays[0].read_text()
    job = next(j for j in jobs if j["benchmark"] == "pair" and "-np4-" in j["id"])
    script = (out / job["dir"] / "job.sbatch").read_text()
    assert "collectives sweep" in script and f"{out / job['dir'] / 'sweep'}" in script
    for words in ("--algorithms pair", "--np 4", "--sizes 1024,65536", "--deterministic",
                  "--cpu-limit 120",
                  f"--platform {platform.resolve()}", f"--seed {job['seed']}"):
        assert words in script, words
    assert job["outputs"] == []  # the journal stays for a rerun (not moved aside)


def test_a_bad_collectives_section_names_its_line(platform: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from kit.core.errors import CampaignError

    for bad, word in (("collective: alltoal", "alltoal"), ("sizes: [1K, big]", "big"),
                      ("np: [2, 0]", "np"), ("algorithms: []", "algorithms"),
                      ("platform: nowhere", "not a platform folder"),
                      ("cpu_limit: 0", "cpu_limit")):
        key = bad.split(":")[0] + ":"
        text = "".join("    " + bad + "\n" if line.strip().startswith(key) else line
                       for line in COLL_CAMPAIGN.splitlines(keepends=True))
        with pytest.raises(CampaignError) as err:
            _plan_collectives(tmp_path, platform, monkeypatch, text)
        assert word in err.value.paragraph() and "c.yaml:" in err.value.paragraph()


@pytest.mark.mpi
@needs_simgrid
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI is not installed")
def test_a_collectives_campaign_runs_resumes_and_collects_as_a_local_sweep(
        platform: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The planned jobs through the templates (run-local, as a Slurm task runs them): each
    sweeps its points into its folder; a job stopped after one point resumes there; collect
    gathers them into the folder a local sweep writes, with the same simulated times (both
    deterministic), and pt2pt collect leaves them to it."""
    from kit.data.collect import collect
    from kit.measure.campaign.runlocal import run_local
    from tests.conftest import mpi_env

    for key, value in mpi_env().items():
        monkeypatch.setenv(key, value)
    out, manifest = _plan_collectives(tmp_path, platform, monkeypatch)
    results = run_local(out)
    assert [r.state for r in results] == ["completed"] * 4, [r.reason for r in results]
    jobs = manifest["jobs"]
    assert isinstance(jobs, list)
    # stop one job after its first point: its rerun runs the other one only
    job_dir = out / jobs[0]["dir"]
    journal = job_dir / "sweep" / collsweep.JOURNAL
    journal.write_text(journal.read_text().splitlines(keepends=True)[0])
    (job_dir / "job.json").unlink()
    assert [r.state for r in run_local(out)] == ["completed"] * 4
    assert "[1/1]" in (job_dir / "stdout.txt").read_text()
    assert len(journal.read_text().splitlines()) == 2

    merged = tmp_path / "merged"
    assert main(["collectives", "collect", str(out), str(merged)]) == 0
    assert "8 new point(s)" in capsys.readouterr().out
    assert main(["collectives", "collect", str(out), str(merged)]) == 0
    assert "0 new point(s)" in capsys.readouterr().out  # again: nothing doubled
    got = collsweep.read_dataset(merged)
    assert got.height == 2 * 2 * 2 * 2 and set(got["status"]) == {"ok"}
    local = tmp_path / "local"
    assert main(_sweep(local, platform, "--algorithms", "pair,basic_linear", "--np", "2,4",
                       "--sizes", "1K,64K", "--reps", "2", "--deterministic")) == 0
    keys = ["algorithm", "numproc", "size", "rep"]
    want = collsweep.read_dataset(local).sort(keys)
    assert got.sort(keys)["time"].to_list() == pytest.approx(want["time"].to_list(), rel=1e-9)
    capsys.readouterr()
    assert main(["collectives", "analyze", str(merged), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["ranking"]) == 8
    report = collect(out, tmp_path / "dataset")
    assert {o.outcome for o in report.jobs} == {"skipped"}
    assert all("pt2pt collectives collect" in o.detail for o in report.jobs)
