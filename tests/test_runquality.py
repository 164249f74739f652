"""Run quality: disturbed windows in seq order and runs unlike the others.

The synthetic tests pin the detector's rules; the probe test is the real thing: a run on
this machine with a CPU hog (two busy loops pinned to each core) released halfway through
must be flagged in its second half, the same run without the hog must not be flagged.

The machine is shared and loaded by others, which disturbs "quiet" runs too (that is what
the detector is for). So the probe and the hog both run at nice -10 (as root): the hog
competes with the ranks on equal terms, other users' work does not. Without the right to
raise priority the test is skipped rather than made to pass by luck.
"""

from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.ndimage import median_filter

from kit.fit.runquality import RunQuality, assess
from tests.conftest import mpi_env


def _run(n: int, seed: int, slow: tuple[int, int] | None = None, factor: float = 10.0,
         run_id: str = "r1", level: float = 1.0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    size = np.floor(np.exp(rng.uniform(0, np.log(2**22), n)))
    time = level * (2e-6 + size / 5e9) * rng.lognormal(0.0, 0.15, n)
    time *= np.where(rng.random(n) < 0.01, 20.0, 1.0)  # sparse preemption, not a window
    if slow is not None:
        time[slow[0]:slow[1]] *= factor * rng.lognormal(0.0, 0.3, slow[1] - slow[0])
    return pl.DataFrame({"run_id": [run_id] * n, "seq": np.arange(n), "size": size,
                         "time": time})


def _assess(frame: pl.DataFrame) -> RunQuality:
    return assess(frame["run_id"], frame["seq"], frame["size"], frame["time"])


def test_quiet_run_has_no_window() -> None:
    for seed in range(5):
        q = _assess(_run(3000, seed))
        assert q.n_disturbed == 0, q.lines()
        assert q.runs[0].verdict == "quiet"


def test_slow_window_is_found_where_it_is() -> None:
    q = _assess(_run(4000, 1, slow=(2500, 3300)))
    assert len(q.windows) == 1
    w = q.windows[0]
    assert abs(w.seq_start - 2500) < 80 and abs(w.seq_end - 3299) < 80
    assert w.slowdown > 5
    assert q.disturbed[2600:3200].all() and not q.disturbed[:2400].any()
    assert "above the run's quiet level" in q.lines()[0]
    d = q.to_dict()
    assert d["n_disturbed"] == q.n_disturbed and d["windows"][0]["run_id"] == "r1"


def test_a_run_slower_throughout_is_caught_by_the_others() -> None:
    frames = [_run(1500, s, run_id=f"r{s}") for s in range(4)]
    frames.append(_run(1500, 9, run_id="slow", level=4.0))
    q = _assess(pl.concat(frames))
    verdict = {r.run_id: r.verdict for r in q.runs}
    assert verdict["slow"] == "disturbed throughout"
    assert all(v == "quiet" for k, v in verdict.items() if k != "slow")
    assert q.n_disturbed == 1500


def test_too_short_a_run_is_not_judged_and_says_so() -> None:
    q = _assess(_run(30, 0))
    assert q.n_disturbed == 0 and q.runs[0].verdict == "not judged"
    assert "too few" in q.lines()[0]


# --------------------------------------------------------------------------- the real thing

SIZES = "loguniform:128K:4M"  # each sample ~0.1-1 ms: long enough for a hog to slow most
#: Samples per run; the hog is released when half of them are on disk.
N = 3000
#: Busy loops pinned to each rank's CPU (ranks bound one per hardware thread, the CPUs read
#: from /proc), at the probe's own priority. With two per CPU each rank gets about a third,
#: and a pingpong needs both ranks on a CPU at once: the hogged half is tens of times slower
#: (one per core, or unpinned loops, left the median at x1.1-1.4 on this machine: nothing a
#: detector should call disturbed).
HOGS_PER_CPU = 2
#: The hogged part is cut short after this long (SIGTERM to mpirun, which the probe handles
#: by keeping every finished sample): at tens of times slower it still holds hundreds of
#: samples, and the test stays within about two minutes.
HOG_SECONDS = 20.0
#: A burst of the hog: at least BURST samples whose BURST-sample rolling median is over
#: BURST_X times the part before the hog (the detector's shortest window is 15 samples).
BURST = 15
BURST_X = 6.0
#: Burst samples to pool the recall over (two hogged runs hold 50-250).
MIN_BURST_SAMPLES = 150
#: Rows are flushed every FLUSH samples: the seq at the release is known to within FLUSH.
FLUSH = 50
#: Spawned before the run, blocked on stdin: one byte releases the busy loop at once (a
#: Python start-up under load can outlast a short run's second half). Each loop ends by
#: itself later, should the test die before killing it.
_HOG = ("import sys, time; sys.stdin.buffer.read(1)\n"
        "end = time.monotonic() + %f + 30\nwhile time.monotonic() < end: pass")


def _can_raise_priority() -> bool:
    try:
        return subprocess.run(["nice", "-n", "-10", "true"], capture_output=True,
                              timeout=10).returncode == 0 and os.geteuid() == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _hogs() -> list[subprocess.Popen[bytes]]:
    """2 x HOGS_PER_CPU busy loops, waiting (pinned to the ranks' CPUs at the release)."""
    return [subprocess.Popen(["nice", "-n", "-10", sys.executable, "-c",
                              _HOG % HOG_SECONDS], stdin=subprocess.PIPE)
            for _ in range(2 * HOGS_PER_CPU)]


def _rank_cpus(prefix: Path) -> list[int]:
    """The CPUs the probe's two ranks are bound to (``--bind-to hwthread``: one each), read
    from /proc: the processes whose command line names this run's output prefix."""
    cpus: set[int] = set()
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if not argv[0].endswith(b"pt2pt-probe") or str(prefix).encode() not in argv:
                continue
            cpus |= os.sched_getaffinity(int(proc.name))
        except (OSError, ValueError):
            continue
    return sorted(cpus)


def _probe_run(probe: Path, prefix: Path, hog: bool) -> tuple[pl.DataFrame, int]:
    """Run the probe (shm); with ``hog``, release the hogs when half the samples are on
    disk and stop the run HOG_SECONDS later. Returns the rows and the line count at the
    release (-1 without hog)."""
    cmd = ["nice", "-n", "-10", "mpirun", "-np", "2", "--bind-to", "hwthread",
           "--mca", "pml", "ob1", "--mca", "btl", "self,vader",
           "--mca", "btl_vader_backing_directory", str(prefix.parent),
           str(probe), "--op", "pingpong", "--sizes", SIZES, "--samples", str(N),
           "--flush-every", str(FLUSH), "--fsync-interval", "0", "--seed", "3",
           "--output", str(prefix)]
    hogs = _hogs() if hog else []
    proc = subprocess.Popen(cmd, env=mpi_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    csv = Path(f"{prefix}.samples.csv")
    started_at = -1
    released = math.inf
    stopped = False
    deadline = time.monotonic() + 300
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if now > deadline:
                proc.kill()
                pytest.fail("probe run did not finish in 300 s")
            if hogs and started_at < 0 and csv.exists():
                with csv.open() as fh:
                    lines = sum(1 for _ in fh)
                if lines > N // 2:
                    started_at, released = lines, now
                    cpus = _rank_cpus(prefix)
                    assert 1 <= len(cpus) <= 2, f"ranks not bound to one CPU each: {cpus}"
                    for k, h in enumerate(hogs):
                        os.sched_setaffinity(h.pid, {cpus[k % len(cpus)]})
                        assert h.stdin is not None
                        h.stdin.write(b"x")
                        h.stdin.flush()
            if not stopped and now - released > HOG_SECONDS:
                proc.send_signal(signal.SIGTERM)  # the probe keeps its finished samples
                stopped = True
            time.sleep(0.02)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert proc.returncode == 0 or stopped, proc.stderr.read() if proc.stderr else ""
    text = csv.read_text()
    if not text.endswith("\n"):  # a stop in the middle of a write: drop the partial line
        text = text[:text.rfind("\n") + 1]
    frame = pl.read_csv(io.StringIO(text)).filter(pl.col("warmup") == 0)
    return frame.with_columns(run_id=pl.lit("run")), started_at


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.skipif(not _can_raise_priority(), reason="needs root to run probe and hog at nice -10")
def test_cpu_hog_halfway_is_flagged_and_the_same_run_without_it_is_not(
        probe_bin: Path, tmp_path: Path) -> None:
    """Other users' load disturbs runs too (rightly flagged), so each half of the claim is
    checked on attempts whose reference part was quiet: up to three quiet runs, up to six
    hogged ones for two to four usable; if the machine never gives one, the test is skipped,
    naming what it found, not passed."""
    found: list[str] = []
    for attempt in range(3):
        quiet, _ = _probe_run(probe_bin, tmp_path / f"quiet{attempt}", hog=False)
        qq = _assess(quiet)
        if qq.n_disturbed <= 0.02 * quiet.height:
            break
        found += qq.lines()
    else:
        pytest.skip(f"no quiet run in 3 attempts on this loaded machine: {found[:4]}")

    # Recall is pooled over hogged runs whose part before the hog was quiet, until they hold
    # MIN_BURST_SAMPLES burst samples (at least two runs, at most four): how CFS hands the
    # hog the CPU differs from run to run. Per run it was 0.79-1.0 in five runs here, but
    # two runs of 87 burst samples in all pooled to 0.64 once, and 100-odd to 0.66 before.
    usable = 0
    hits = bursts = 0
    medians: list[float] = []
    reports: list[list[str]] = []
    for attempt in range(6):
        hogged, started = _probe_run(probe_bin, tmp_path / f"hog{attempt}", hog=True)
        assert started > 0, "the run ended before the hog could start"
        qh = _assess(hogged)
        # Rows on disk when the hog started (header and warm-up included) bound its start.
        if qh.disturbed[hogged["seq"].to_numpy() < started - 20].mean() >= 0.05:
            found += qh.lines()
            continue
        usable += 1
        h, b, median = _burst_hits(hogged, started, qh)
        hits, bursts = hits + h, bursts + b
        medians.append(median)
        reports.append(qh.lines())
        if usable == 4 or (usable >= 2 and bursts >= MIN_BURST_SAMPLES):
            break
    if not usable:
        pytest.skip(f"the part before the hog was never quiet in 6 attempts: {found[:4]}")
    if not bursts:
        pytest.skip(f"the hog made no burst of {BURST} samples over x{BURST_X} in "
                    f"{usable} run(s) (median x{medians} after it started): nothing of "
                    "the size the detector is for")
    recall = hits / bursts
    assert recall > 0.7, (recall, bursts, medians, reports)


def _burst_hits(hogged: pl.DataFrame, started: int, qh: RunQuality) -> tuple[int, int, float]:
    """(burst samples the detector flagged, burst samples, median slowdown after the hog
    started) of one hogged run.

    The hog does not slow the probe evenly: CFS hands it the CPU in stretches, so the probe
    runs 15-100 samples at 15-90x, then at full speed again. The truth is those bursts:
    stretches of at least BURST samples after the hog started whose BURST-sample rolling
    median is over BURST_X times the part before it (lone spikes do not count)."""
    seq = hogged["seq"].to_numpy()
    before = seq < started - 20
    after = seq >= started + FLUSH + 10
    per_byte = (hogged["time"] / hogged["size"]).to_numpy()
    assert after.sum() >= 100, f"only {after.sum()} samples after the hog started"
    ratio = per_byte / float(np.median(per_byte[before]))
    rolled = median_filter(ratio, size=BURST, mode="nearest")
    in_burst = np.zeros(len(ratio), dtype=bool)
    d = np.diff(np.r_[0, ((rolled > BURST_X) & after).astype(np.int8), 0])
    for a, b in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1), strict=True):
        if b - a >= BURST:
            in_burst[a:b] = True
    if in_burst.any():
        # the windows over the hogged part say how much slower it was (other windows,
        # if any, are other users' load before the hog, which the caller bounds)
        hogged_windows = [w for w in qh.windows if w.seq_end >= started + FLUSH + 10]
        assert hogged_windows and max(w.slowdown for w in hogged_windows) > 2, qh.lines()
    return (int(qh.disturbed[in_burst].sum()), int(in_burst.sum()),
            float(np.median(ratio[after])))


@pytest.mark.parametrize("ids", [
    np.array(["b", "a", "c", "a", "b10", "b2"], dtype=object),  # as Polars hands them over
    np.array(["b", "a", "c", "a"]),  # a numpy string array
    np.array([10, 2, 2, 33]),  # numbers: named and sorted as their strings
    np.array([1, "x", 1, "x"], dtype=object),
])
def test_runs_are_named_and_ordered_as_their_strings(ids: np.ndarray) -> None:
    """assess() codes run ids once; the names and their order are those of the run ids'
    strings, sorted (what every report and verdict lists)."""
    from kit.model.runs import string_codes

    names, code = string_codes(ids)
    as_str = np.asarray(ids).astype(str)
    assert names == sorted(set(as_str.tolist()))
    assert [names[c] for c in code] == as_str.tolist()
