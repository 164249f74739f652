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
from kit.measure.campaign.slurm import (
    SlurmUnreachable,
    SlurmWaitTimeout,
    squeue_states,
    wait_gone,
)

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


def test_a_controller_silent_longer_than_allowed_ends_the_wait_with_its_reason(
        tmp_path: Path) -> None:
    """``silence`` (pt2pt submit's adaptive rounds: no deadline, the jobs may run for hours)
    gives up on a controller that stays silent, with squeue's own words."""
    env = _fake_squeue(tmp_path, f"echo '{TIMED_OUT}' >&2\nexit 1\n")
    seen: list[object] = []
    with pytest.raises(SlurmUnreachable, match="Socket timed out"):
        wait_gone(["7_0"], env, timeout=None, poll=0.01, silence=0.05, on_poll=seen.append)
    assert seen and all(s is None for s in seen)


def test_an_empty_queue_waits_for_the_callers_condition(tmp_path: Path) -> None:
    count = tmp_path / "calls"
    env = _fake_squeue(tmp_path, (
        f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {count}\n"
        "if [ $n -le 1 ]; then echo '7_0|PENDING|0:00|(None)'; fi\n"))
    asked: list[int] = []
    seen: list[object] = []

    def until() -> bool:
        asked.append(1)
        return len(asked) >= 2

    wait_gone(["7_0"], env, timeout=30, poll=0.01, until=until, on_poll=seen.append)
    assert count.read_text().strip() == "3" and len(asked) == 2
    assert seen[0] == {"7_0": {"state": "PENDING", "time": "0:00", "reason": "(None)",
                               "source": "squeue"}} and seen[1:] == [{}, {}]
    with pytest.raises(SlurmWaitTimeout, match="left the queue, but not every job ended"):
        wait_gone(["7_0"], env, timeout=0.05, poll=0.01, until=lambda: False)


def test_the_selftest_waits_for_its_jobs_records(tmp_path: Path) -> None:
    """The self-test's wait: a queue without the job is not enough, its job.json must be
    there (collect reads it next); past the deadline, the self-test's own sentence."""
    import json

    from kit.measure.campaign.plan import plan_campaign
    from kit.outputs import selftest

    env = _fake_squeue(tmp_path, f"echo '{GONE}' >&2\nexit 1\n")
    text = selftest.CAMPAIGN.format(partition="debug", sizes="4M", samples=2)
    (tmp_path / "c.yaml").write_text(text)
    camp = tmp_path / "campaign"
    plan_campaign(tmp_path / "c.yaml", camp)
    jobs = json.loads((camp / "manifest.json").read_text())["jobs"]
    (camp / "submitted.json").write_text(json.dumps(
        {"jobs": {j["id"]: f"7_{n}" for n, j in enumerate(jobs)}}))
    with pytest.raises(UserError, match="self-test job did not finish within 0 s") as err:
        selftest._wait(camp, env, timeout=0.05)
    assert err.value.where == str(camp)
    for job in jobs:
        (camp / job["dir"] / "job.json").write_text(
            json.dumps({"state": "completed", "exit_status": 0}))
    selftest._wait(camp, env, timeout=30)
