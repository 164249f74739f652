"""The job-side bookkeeping helper: ``python3 DIR/bin/jobrecord.py begin|finish|task``.

Job scripts stay short shell (environment, launch, signal handling); everything that decides
and records what happened lives here, in one tested place. ``pt2pt plan`` copies this file
into the campaign directory, so the compute nodes need only ``python3`` (standard library),
not the planning checkout nor the kit's dependencies:

``task MANIFEST GROUP INDEX``
    the job directory of array task INDEX of GROUP (a job array reads its configuration from
    the manifest by ``SLURM_ARRAY_TASK_ID``).
``begin LAUNCHER TOOL``
    checks both exist, snapshots the network/InfiniBand counters for the transport check;
    on a missing one writes ``job.json`` (failed, 127) and exits 127.
``cpu RANK POLICY``
    prints the CPU rank RANK is pinned to under the campaign's binding (nothing: not pinned);
    the template's rank wrapper runs the tool under ``taskset -c`` that CPU.
``watch PID``
    samples the node's load, CPU pressure and stolen time while the tool (PID) runs
    (:mod:`kit.measure.campaign.nodestate`); ``begin`` and ``finish`` read them before and after.
``finish --rc RC [--signal SIG] [--skip REASON]``
    classifies the run and writes ``job.json`` atomically, with the run's ``conditions``;
    its exit status is the job's.

Classification uses the probe's *own* exit status, which each rank writes to
``rank-<N>.rc`` through the template's rank wrapper, and the ranks' stderr/stdout; never the
launcher's code alone: ``srun`` passes on a rank's code (16 for an MPI error), ``mpirun`` says
1 or the rank's code, so "exit 1 means maybe unavailable" was wrong under direct launch.
A TERM before ``time limit - signal lead - slack`` is a cancellation (scancel); later it is the
time limit (``--signal=B:TERM@lead``). Only the standard library is imported: this runs inside
Slurm's KillWait window.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__:
    from kit.measure.campaign import nodestate
else:  # run as bin/jobrecord.py: the copy of nodestate.py that plan put beside it (also
    # under python -I, which leaves the script's folder off sys.path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import nodestate  # type: ignore[no-redef]

COUNTERS = ".pt2pt-counters.json"
#: the watcher's running summary of the node while the tool runs
DURING = ".pt2pt-during.json"
#: a TERM this close to (time limit - lead) counts as the time limit, not a scancel: Slurm
#: may send the --signal up to 60 s earlier than asked (its event resolution)
TIMEOUT_SLACK_S = 65


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _plan(job_dir: Path) -> dict[str, Any]:
    return json.loads((job_dir / "plan.json").read_text(encoding="utf-8"))


def net_counters() -> dict[str, int]:
    """rx + tx bytes per network interface of the node (/proc/net/dev)."""
    out: dict[str, int] = {}
    try:
        lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    except OSError:
        return out
    for line in lines:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if len(fields) > 8:
            out[name.strip()] = int(fields[0]) + int(fields[8])
    return out


def net_bytes() -> int:
    """rx + tx bytes over the node's interfaces (/proc/net/dev)."""
    return sum(net_counters().values())


def net_moved(before: dict[str, Any]) -> int:
    """Bytes the node's interfaces moved since ``before`` (a job's start counters): summed
    per interface present at both ends. A total over all interfaces shrank when another
    job's network namespaces and veth pairs went away mid-run (a tcp probe job on a shared
    host then read 445 MB moved for a 461 MB payload and failed its transport check)."""
    start = before.get("net_if")
    if not isinstance(start, dict):  # counters of a job begun by an older kit
        return net_bytes() - int(before.get("net", 0))
    now = net_counters()
    return sum(max(0, now[i] - int(v)) for i, v in start.items() if i in now)


def ib_bytes() -> int:
    """InfiniBand port data counters (in 4-byte words) as bytes."""
    total = 0
    for path in Path("/sys/class/infiniband").glob("*/ports/*/counters/port_*_data"):
        if path.name in ("port_xmit_data", "port_rcv_data"):
            try:
                total += int(path.read_text().strip()) * 4
            except (OSError, ValueError):
                continue
    return total


def _slurm_id() -> str | None:
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID") or None


def rank_cpus(job_dir: Path) -> dict[str, int]:
    """The CPU each rank was pinned to, from rank-<N>.cpu (written by the rank wrapper)."""
    cpus: dict[str, int] = {}
    for path in job_dir.glob("rank-*.cpu"):
        try:
            cpus[str(int(path.stem.split("-", 1)[1]))] = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return cpus


def rank_codes(job_dir: Path) -> dict[int, int]:
    """Each rank's own exit status, from rank-<N>.rc (written by the template's rank wrapper)."""
    codes: dict[int, int] = {}
    for path in job_dir.glob("rank-*.rc"):
        try:
            codes[int(path.stem.split("-", 1)[1])] = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return codes


def unavailable_reason(plan: dict[str, Any], job_dir: Path) -> str:
    """The first line of the ranks' output matching a 'transport unavailable' pattern."""
    patterns = [re.compile(p) for p in plan.get("unavailable", [])]
    texts = []
    for name in ("stderr.txt", plan.get("stdout_name") or "stdout.txt"):
        try:
            texts.append((job_dir / name).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    for pattern in patterns:  # the table lists the most telling messages first
        for text in texts:
            lines = text.splitlines()
            for i, line in enumerate(lines):
                if pattern.search(line):
                    return _LOG_PREFIX.sub("", message_around(lines, i))
    return ""


# UCX's and Open MPI's log prefix ("[1.2] [n2:1:0] ucp_context.c:1014 UCX  WARN  "): where
# the message was printed, not what it says.
_LOG_PREFIX = re.compile(r"^(\[[^\]]*\]\s*)+(\S+\.c:\d+\s+)?(UCX\s+\w+\s+)?")


def _is_rule(line: str) -> bool:
    return line.strip().startswith("-----")


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    return text if end < 0 else text[:end + 1]


def _clip(text: str, limit: int = 300) -> str:
    if len(text) <= limit:
        return text
    return text[:limit - 1].rsplit(" ", 1)[0] + "…"


def message_around(lines: list[str], i: int) -> str:
    """The whole sentence line ``i`` belongs to, for a job record's reason.

    MPI libraries wrap their messages at about 72 columns, so the matching line alone often
    stops mid-sentence ("... unable to reach each other for"). A wrapped line is extended to
    its sentence across the paragraph; an indented detail line ("  BTLs attempted: self") is
    given after the first sentence of the message block it sits in.
    """
    line = lines[i]
    top = i
    while top > 0 and not _is_rule(lines[top - 1]):
        top -= 1
    if line[:1].isspace():  # a detail line: name the message it details
        block: list[str] = []
        for other in lines[top:i]:
            if not other.strip():
                if block:
                    break
                continue
            block.append(other.strip())
        head = _first_sentence(" ".join(block))
        return _clip(f"{head} ({line.strip()})" if head else line.strip())
    lo, hi = i, i
    while lo > top and lines[lo - 1].strip() and not lines[lo - 1][:1].isspace():
        lo -= 1
    while (hi + 1 < len(lines) and lines[hi + 1].strip() and not _is_rule(lines[hi + 1])
           and not lines[hi + 1][:1].isspace()):
        hi += 1
    before = " ".join(x.strip() for x in lines[lo:i])
    joined = " ".join(x.strip() for x in lines[lo:hi + 1])
    at = len(before) + (1 if before else 0)
    start = joined.rfind(". ", 0, at)
    start = 0 if start < 0 else start + 2
    end = joined.find(". ", at)
    end = len(joined) if end < 0 else end + 1
    return _clip(joined[start:end].strip())


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return " ".join(lines[-n:])[:300]


_LAUNCHER_LINE = re.compile(r"^\[[^\]\s]+:\d+\]")  # "[host:pid] *** An error occurred ..."


def tool_error(path: Path) -> str:
    """The tool's own error line from a failed job's stderr, else its last lines.

    mpirun appends its banners ("Primary job terminated normally, but 1 process returned
    a non-zero exit code...") after the rank's message, so the tail of stderr names the
    launcher, not the cause (a bad probe argument read as an mpirun failure). Lines inside
    ``-----`` banner blocks and ``[host:pid]`` launcher lines are skipped; of the rest, the
    last one saying "error" wins, else the last one.
    """
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    own, inside = [], False
    for line in lines:
        if _is_rule(line):
            inside = not inside
            continue
        if not inside and line.strip() and not _LAUNCHER_LINE.match(line):
            own.append(line.strip())
    errors = [line for line in own if "error" in line.lower()]
    if errors or own:
        return _clip((errors or own)[-1])
    return _tail(path)


#: SIGSEGV as a shell reports it (128 + 11): what rank-<N>.rc holds for a crashed rank
SEGV_STATUS = 139


def pmix_fence_hint(plan: dict[str, Any], job_dir: Path, code: int) -> str:
    """A note for the one crash whose cause is known but outside the kit (else "").

    A rank killed by SIGSEGV before the tool wrote its metadata, launched by
    ``srun --mpi=pmix``: Slurm's PMIx tree fence can complete on each node alone (measured
    with Slurm 22.05.8, playbooks/README.md), so a peer leaves Open MPI 4.1's MPI_Init and
    sends to a rank still inside it, whose TCP BTL then calls a NULL receive callback.
    """
    if code != SEGV_STATUS or not plan.get("meta_file") or (job_dir / plan["meta_file"]).exists():
        return ""
    try:
        command = json.loads((job_dir / COUNTERS).read_text()).get("command", [])
    except (OSError, ValueError):
        return ""
    if not command or Path(str(command[0])).name != "srun" or "--mpi=pmix" not in command:
        return ""
    return ("; a rank crashed before the tool wrote anything (in MPI_Init?): under "
            "srun --mpi=pmix Slurm's PMIx tree fence may not synchronise the nodes; set "
            "PMIxCollFence=ring in mpi.conf or 'env: {SLURM_PMIX_FENCE: ring}' in the campaign "
            "(README, Troubleshooting)")


def probe_payload(job_dir: Path) -> int | None:
    """Bytes the probe moved in measured (non-warm-up) samples, from its own CSV."""
    path = job_dir / "probe.samples.csv"
    if not path.exists():
        return None
    total = 0
    with path.open(encoding="utf-8", errors="replace") as fh:
        header = fh.readline().strip().split(",")
        try:
            i_size, i_warm = header.index("size"), header.index("warmup")
        except ValueError:
            return None
        i_count = header.index("count") if "count" in header else None
        for line in fh:
            f = line.rstrip("\n").split(",")
            try:
                if f[i_warm] != "0":
                    continue
                count = int(f[i_count]) if i_count is not None and f[i_count] else 1
                total += int(f[i_size]) * count
            except (IndexError, ValueError):
                continue
    return total


def transport_check(plan: dict[str, Any], job_dir: Path) -> tuple[str, str]:
    """(passed|failed, detail) for a successful run: did the forced transport carry it?"""
    fails, notes = [], []
    meta_file = plan.get("meta_file")
    forced = plan.get("forced_vars") or []
    if meta_file:
        try:
            meta = re.sub(r"\s", "", (job_dir / meta_file).read_text(encoding="utf-8"))
        except OSError:
            meta = None
            fails.append(f"{meta_file} missing")
        if meta is not None:
            for var in forced:
                value = re.sub(r"\s", "", os.environ.get(var, ""))
                if f'"{var}":"{value}"' not in meta:
                    fails.append(f"{var}={os.environ.get(var, '')} not in the ranks' "
                                 f"environment ({meta_file})")
            if not fails:
                notes.append("forced variables reached the ranks")
    else:
        notes.append(f"forced selection {','.join(forced)} admits only this transport")
    kind = plan.get("transport_check")
    if kind in ("netdev", "ib_counters"):
        try:
            before = json.loads((job_dir / COUNTERS).read_text())
        except (OSError, ValueError):
            before = {}
        moved = (net_moved(before) if kind == "netdev"
                 else ib_bytes() - int(before.get("ib", 0)))
        what = ("network interface bytes (/proc/net/dev)" if kind == "netdev"
                else "InfiniBand port bytes")
        payload = probe_payload(job_dir) if plan.get("tool") == "probe" else None
        if payload is None:
            notes.append(f"{what} grew by {moved} (payload unknown for this tool: not compared)")
        elif moved >= payload:
            notes.append(f"{what} grew by {moved} >= payload {payload}")
        else:
            fails.append(f"{what} grew by only {moved} < payload {payload}")
    return ("failed" if fails else "passed"), "; ".join(fails or notes)


def classify(plan: dict[str, Any], job_dir: Path, rc: int, signal: str | None,
             started: float | None) -> dict[str, Any]:
    """state, exit_status, reason, tool exit status and check for the record."""
    exits = plan.get("exits") or {"skipped": 77, "check_failed": 78}
    codes = rank_codes(job_dir)
    # a rank's own failure before a rank the launcher killed afterwards (128 + signal)
    bad = sorted(((r, c) for r, c in codes.items() if c != 0), key=lambda rc: (rc[1] > 128, rc))
    ranks = int(plan.get("nodes") or 1) * int(plan.get("ntasks_per_node") or 1)
    if bad:
        tool_rc: int | None = bad[0][1]
    elif len(codes) >= ranks:
        tool_rc = 0
    else:  # no rank reported: the tool never ran to its end (launch failure, killed)
        tool_rc = None
    out: dict[str, Any] = {"tool_exit_status": tool_rc, "rank_exit_status": codes,
                           "launcher_exit_status": rc,
                           "transport_check": {"status": "not-run", "detail": ""}}
    if signal:
        limit = plan.get("time_limit_s")
        lead = int(plan.get("signal_lead_s") or 0)
        timeout = bool(limit and started is not None
                       and time.time() - started >= limit - lead - TIMEOUT_SLACK_S)
        state = "timeout" if timeout else "cancelled"
        why = f"the time limit (signal lead {lead} s)" if timeout else "scancel"
        out.update(state=state, exit_status=143,
                   reason=f"{state} by {why} (SIG{signal}); samples written so far are kept")
        return out
    if tool_rc != 0:  # a rank failed, or none reported (launch failure, killed)
        reason = unavailable_reason(plan, job_dir)
        if reason:
            out.update(state="skipped", exit_status=exits["skipped"],
                       reason=f"{plan.get('transport')} unavailable: {reason}")
            return out
        code = tool_rc if tool_rc not in (None, 0) else (rc or 1)
        reason = tool_error(job_dir / "stderr.txt") or f"exit status {code}"
        out.update(state="failed", exit_status=code,
                   reason=reason + pmix_fence_hint(plan, job_dir, code))
        return out
    status, detail = transport_check(plan, job_dir)
    out["transport_check"] = {"status": status, "detail": detail}
    if status != "passed":
        out.update(state="transport-check-failed", exit_status=exits["check_failed"],
                   reason=f"transport check failed: {detail}")
    else:
        note = "" if rc == 0 else f"every rank exited 0 but the launcher said {rc}"
        out.update(state="completed", exit_status=0, reason=note or None)
    return out


def conditions(job_dir: Path, plan: dict[str, Any], begin: dict[str, Any]) -> dict[str, Any]:
    """The node's state before, during and after the run (kit.measure.conditions reads it)."""
    found = begin.get("conditions")
    start: dict[str, Any] = found if isinstance(found, dict) else {}
    return {"before": {k: start.get(k) for k in ("load1", "steal")},
            "during": nodestate.read_during(job_dir / DURING),
            "after": nodestate.after(),
            "cpus_online": start.get("cpus_online") or os.cpu_count(),
            "ranks_per_node": int(plan.get("ntasks_per_node") or 1),
            "governor": start.get("governor"), "tenants": start.get("tenants")}


def write_record(job_dir: Path, plan: dict[str, Any], fields: dict[str, Any]) -> None:
    begin: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        begin = json.loads((job_dir / COUNTERS).read_text())
    record = {
        "plan": plan,
        "skipped": fields.get("reason") if fields.get("state") == "skipped" else None,
        "command": begin.get("command", []),
        "mpi_major": int(os.environ.get("PT2PT_MPI_MAJOR") or 0),
        "run_local": bool(os.environ.get("PT2PT_RUN_LOCAL")),
        "slurm_job_id": _slurm_id(),
        "slurm_raw_job_id": os.environ.get("SLURM_JOB_ID") or None,
        "slurm_nodelist": os.environ.get("SLURM_JOB_NODELIST") or None,
        "placement": plan.get("placement"),
        "host_pair": plan.get("host_pair"),
        "host": socket.gethostname(),
        "start": begin.get("start"),
        "end": _now(),
        "conditions": conditions(job_dir, plan, begin),
        "binding": {"policy": plan.get("binding") or "none", "cpus": rank_cpus(job_dir)},
        **fields,
    }
    _write_atomic(job_dir / "job.json", json.dumps(record, indent=2, sort_keys=True) + "\n")


def _start_ticks(pid: int) -> int | None:
    """The process' start time in clock ticks since boot (/proc/PID/stat field 22)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _keep_previous(job_dir: Path, plan: dict[str, Any]) -> None:
    """Move an earlier run's outputs (a rerun, a requeue) to ``previous/<time>/``: the tools
    never overwrite a run (the probe refuses to), and nothing measured is thrown away."""
    names = [*plan.get("outputs", []), plan.get("meta_file")]
    found = [job_dir / n for n in names if isinstance(n, str) and "/" not in n
             and (job_dir / n).exists()]
    if not found:
        return
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = job_dir / "previous" / stamp
    n = 1
    while dest.exists():
        n += 1
        dest = job_dir / "previous" / f"{stamp}-{n}"
    dest.mkdir(parents=True)
    for path in found:
        os.replace(path, dest / path.name)


def _begin(args: argparse.Namespace, job_dir: Path) -> int:
    plan = _plan(job_dir)
    _keep_previous(job_dir, plan)
    (job_dir / "job.json").unlink(missing_ok=True)
    for old in [*job_dir.glob("rank-*.rc"), *job_dir.glob("rank-*.cpu"), job_dir / DURING]:
        old.unlink(missing_ok=True)
    net = net_counters()
    snap = {"start": _now(), "epoch": time.time(), "net": sum(net.values()), "net_if": net,
            "ib": ib_bytes(),
            "command": list(args.command), "conditions": nodestate.before(),
            # the job script (this helper's parent): collect asks whether it still runs
            "host": socket.gethostname(), "pid": os.getppid(),
            "pid_start": _start_ticks(os.getppid())}
    _write_atomic(job_dir / COUNTERS, json.dumps(snap) + "\n")
    launcher, tool = args.launcher, args.tool
    for what, name in (("launcher", launcher), ("tool", tool)):
        if name and shutil.which(name) is None and not (
                os.path.isfile(name) and os.access(name, os.X_OK)):
            write_record(job_dir, plan, {
                "state": "failed", "exit_status": 127, "tool_exit_status": None,
                "reason": f"{what} '{name}' not found or not executable on "
                          f"{socket.gethostname()}",
                "transport_check": {"status": "not-run", "detail": ""}})
            return 127
    return 0


def _finish(args: argparse.Namespace, job_dir: Path) -> int:
    plan = _plan(job_dir)
    if args.skip:
        fields: dict[str, Any] = {
            "state": "skipped", "exit_status": (plan.get("exits") or {}).get("skipped", 77),
            "reason": args.skip, "tool_exit_status": None,
            "transport_check": {"status": "not-run", "detail": ""}}
    else:
        started = None
        with contextlib.suppress(OSError, ValueError, KeyError):
            started = float(json.loads((job_dir / COUNTERS).read_text())["epoch"])
        fields = classify(plan, job_dir, args.rc, args.signal, started)
    write_record(job_dir, plan, fields)
    return int(fields["exit_status"])


def task_dir(manifest_path: Path, group: str, index: int) -> Path:
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    job_id = manifest["arrays"][group]["tasks"][index]
    return manifest_path.parent / "jobs" / job_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kit.measure.campaign.jobrecord",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("task")
    t.add_argument("manifest", type=Path)
    t.add_argument("group")
    t.add_argument("index", type=int)
    b = sub.add_parser("begin")
    b.add_argument("launcher")
    b.add_argument("tool")
    b.add_argument("command", nargs="*")
    c = sub.add_parser("cpu")
    c.add_argument("rank", type=int)
    c.add_argument("policy")
    w = sub.add_parser("watch")
    w.add_argument("pid", type=int)
    f = sub.add_parser("finish")
    f.add_argument("--rc", type=int, default=0)
    f.add_argument("--signal", default=None)
    f.add_argument("--skip", default=None)
    args = parser.parse_args(argv)
    if args.cmd == "task":
        try:
            print(task_dir(args.manifest, args.group, args.index))
        except (OSError, ValueError, KeyError, IndexError) as exc:
            print(f"pt2pt: no task {args.index} of array {args.group} in {args.manifest}: "
                  f"{exc}", file=sys.stderr)
            return 1
        return 0
    if args.cmd == "cpu":
        try:
            cpu = nodestate.bind_cpu(args.rank, args.policy)
        except (OSError, ValueError) as exc:
            print(f"pt2pt: cannot choose a CPU for rank {args.rank} ({args.policy}): {exc}",
                  file=sys.stderr)
            return 1
        print("" if cpu is None else cpu)
        return 0
    job_dir = Path.cwd()
    if args.cmd == "watch":
        return nodestate.watch(args.pid, job_dir / DURING)
    return _begin(args, job_dir) if args.cmd == "begin" else _finish(args, job_dir)


if __name__ == "__main__":
    sys.exit(main())
