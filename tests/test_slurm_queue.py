"""squeue as the kit reads it: a controller that does not answer is not an empty queue.

In a CI rehearsal (issue 58) the machine stopped for ~50 s while a contention job ran (dmesg:
workqueue lockups on both CPUs, RCU kthread starved); the test's wait loop then read the
failed squeue ("Socket timed out") as "no job left", went on, and found no job.json. A fake
squeue on PATH plays the controller here: no cluster needed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kit.core.errors import UserError
from kit.measure.campaign.slurm import SlurmUnreachable, squeue_states, wait_gone

TIMED_OUT = "slurm_load_jobs error: Socket timed out on send/recv operation"
GONE = "slurm_load_jobs error: Invalid job id specified"


def _fake_squeue(tmp_path: Path, script: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    squeue = bin_dir / "squeue"
    squeue.write_text("#!/bin/sh\n" + script)
    squeue.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_a_controller_that_does_not_answer_is_an_error_not_an_empty_queue(
        tmp_path: Path) -> None:
    env = _fake_squeue(tmp_path, f"echo '{TIMED_OUT}' >&2\nexit 1\n")
    with pytest.raises(SlurmUnreachable, match="Socket timed out"):
        squeue_states(["7_0"], env)


def test_jobs_slurm_no_longer_knows_are_gone(tmp_path: Path) -> None:
    env = _fake_squeue(tmp_path, f"echo '{GONE}' >&2\nexit 1\n")
    assert squeue_states(["7_0", "8"], env) == {}


def test_listed_tasks_are_returned(tmp_path: Path) -> None:
    env = _fake_squeue(tmp_path, "printf '7_0|RUNNING|0:05|n1\\n7_1|PENDING|0:00|(None)\\n'\n")
    states = squeue_states(["7_0"], env)
    assert states["7_0"]["state"] == "RUNNING" and states["7_1"]["state"] == "PENDING"


def test_waiting_outlasts_a_stalled_controller(tmp_path: Path) -> None:
    """Twice no answer, then the job still runs, then it is gone: wait_gone returns only then."""
    count = tmp_path / "calls"
    env = _fake_squeue(tmp_path, (
        f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {count}\n"
        f"if [ $n -le 2 ]; then echo '{TIMED_OUT}' >&2; exit 1; fi\n"
        "if [ $n -le 3 ]; then echo '7_0|RUNNING|0:05|n1'; fi\n"))
    wait_gone(["7_0"], env, timeout=30, poll=0.01)
    assert count.read_text().strip() == "4"


def test_waiting_gives_up_with_the_controllers_reason(tmp_path: Path) -> None:
    env = _fake_squeue(tmp_path, f"echo '{TIMED_OUT}' >&2\nexit 1\n")
    with pytest.raises(UserError, match=r"Socket timed out.* after 0 s"):
        wait_gone(["7_0"], env, timeout=0.05, poll=0.01)
