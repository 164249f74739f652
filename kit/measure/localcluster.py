"""Bring the local Slurm cluster (playbooks/local-cluster.yml) up and down from Python.

The playbooks are the single implementation (they also serve ``make cluster-up`` and CI);
this module only chooses a non-clashing layout per state directory, runs ``ansible-playbook``
from the running interpreter's environment, and turns a failed play into a :class:`UserError`
that names the failing task. A cluster is identified by its state directory: the playbook
writes ``cluster.json`` (layout, daemons) and ``env`` (``SLURM_CONF=...``) there.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from kit.core.errors import UserError
from kit.core.paths import PLAYBOOKS_DIR

#: State dir of the default single-node cluster (the playbook's own default, `make cluster-up`).
DEFAULT_STATE_DIR = Path("/tmp/pt2pt-slurm")


@dataclass(frozen=True)
class Layout:
    """Names, ports and addresses that must differ between clusters up at the same time."""

    cluster_name: str
    ctld_port: int
    slurmd_port: int
    subnet: str
    ifprefix: str
    node_prefix: str
    #: slurmdbd and MariaDB ports (used only with accounting)
    dbd_port: int = 6819
    db_port: int = 13306

    def playbook_vars(self) -> dict[str, object]:
        return {
            "local_slurm_dbd_port": self.dbd_port,
            "local_slurm_db_port": self.db_port,
            "local_slurm_cluster_name": self.cluster_name,
            "local_slurm_ctld_port": self.ctld_port,
            "local_slurm_slurmd_port": self.slurmd_port,
            "local_slurm_subnet": self.subnet,
            "local_slurm_ifprefix": self.ifprefix,
            "local_slurm_node_prefix": self.node_prefix,
        }


#: The playbook defaults (roles/local_slurm/defaults/main.yml), used for DEFAULT_STATE_DIR.
DEFAULT_LAYOUT = Layout("pt2pt", 6817, 6818, "10.213.47.0/24", "pt2p", "ptn")


@dataclass(frozen=True)
class Cluster:
    """A running local cluster: ``env`` holds ``SLURM_CONF`` (and PT2PT_SLURM_*)."""

    state_dir: Path
    conf: Path
    env: dict[str, str]
    nodes: list[str]
    partition: str = "debug"
    daemons: list[dict[str, str]] = field(default_factory=list)

    def environ(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: os.environ) with this cluster's variables on top, for subprocess."""
        merged = dict(os.environ if base is None else base)
        merged.update(self.env)
        return merged


def default_state_dir(nodes: int = 1) -> Path:
    """Where ``up(nodes)`` puts a cluster when no state dir is given."""
    return DEFAULT_STATE_DIR if nodes == 1 else Path(f"/tmp/pt2pt-slurm-{nodes}n")


def layout_for(state_dir: Path) -> Layout:
    """The default layout for the default state dir; otherwise one of 100 slots by path hash.

    Derived from the path (not allocated) so that ``down`` and a second ``up`` need nothing
    but the state dir. Two state dirs in the same slot would clash: pick another name.
    """
    if Path(state_dir) == DEFAULT_STATE_DIR:
        return DEFAULT_LAYOUT
    slot = zlib.crc32(str(Path(state_dir)).encode()) % 100
    return Layout(
        cluster_name=f"pt2pt{slot}",
        ctld_port=6900 + 2 * slot,
        slurmd_port=6901 + 2 * slot,
        subnet=f"10.213.{100 + slot}.0/24",
        ifprefix=f"p2s{slot}",
        node_prefix=f"p{slot}n",
        dbd_port=7100 + slot,
        db_port=13400 + slot,
    )


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise UserError(
            f"{what} needs root (it starts daemons and creates network namespaces)",
            where="kit.measure.localcluster",
            hint="run it as root (e.g. sudo make cluster-up), or point PT2PT_SLURM_STATE / "
            "SLURM_CONF at a cluster that is already running",
        )


def _ansible_playbook() -> str:
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.is_file():
        return str(beside)
    found = shutil.which("ansible-playbook")
    if found:
        return found
    raise UserError(
        "ansible-playbook not found next to this Python nor on PATH",
        where="kit.measure.localcluster",
        hint="install the deploy extra: pip install -e '.[deploy]' (or make venv)",
    )


_TASK_RE = re.compile(r"^TASK \[(?P<task>.*)\] \**$")
_FATAL_RE = re.compile(r"^fatal: \[[^\]]*\]: FAILED! => (?P<body>.*)$")


def failing_task(output: str) -> tuple[str, str]:
    """(task name, message) of the first failed task in ansible's default output."""
    task = "?"
    for line in output.splitlines():
        m = _TASK_RE.match(line)
        if m:
            task = m["task"]
            continue
        m = _FATAL_RE.match(line)
        if m:
            body = m["body"]
            try:
                msg = json.loads(body).get("msg", body)
            except ValueError:
                msg = body
            return task, str(msg)
    tail = " ".join(output.strip().splitlines()[-3:])
    return task, tail or "no output"


def _run_playbook(playbook: str, extra: dict[str, object], *, skip_packages: bool,
                  log: Path, timeout: float) -> None:
    path = PLAYBOOKS_DIR / playbook
    if not path.is_file():
        raise UserError(f"playbook {path} is missing", where="kit.measure.localcluster",
                        hint="run from a pt2pt-kit checkout (the playbooks are not in the wheel)")
    extra = {"ansible_python_interpreter": sys.executable, **extra}
    cmd = [_ansible_playbook(), "-i", "localhost,", "-c", "local", "-e", json.dumps(extra)]
    if skip_packages:
        cmd += ["--skip-tags", "packages"]
    cmd.append(str(path))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_RETRY_FILES_ENABLED="False",
               ANSIBLE_STDOUT_CALLBACK="default")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False,
                              cwd=PLAYBOOKS_DIR, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise UserError(f"{playbook} did not finish within {timeout:.0f} s",
                        where=str(path), hint="check the machine's load and retry") from exc
    if proc.returncode != 0:
        output = proc.stdout + proc.stderr
        log.write_text(" ".join(shlex.quote(c) for c in cmd) + "\n\n" + output)
        task, msg = failing_task(output)
        raise UserError(f"ansible-playbook {playbook} failed at task '{task}': {msg}",
                        where=str(path), hint=f"the full output is in {log}")


def _parse_env(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env[key] = value
    return env


def load(state_dir: Path | str) -> Cluster:
    """The cluster described in ``state_dir`` (whether or not its daemons still run)."""
    state = Path(state_dir)
    desc_path, env_path = state / "cluster.json", state / "env"
    if not desc_path.is_file() or not env_path.is_file():
        raise UserError(f"no local Slurm cluster in {state} (cluster.json or env missing)",
                        where=str(state), hint="bring one up with kit.measure.localcluster.up() "
                        "or make cluster-up")
    desc = json.loads(desc_path.read_text())
    return Cluster(state_dir=state, conf=Path(desc["conf"]), env=_parse_env(env_path.read_text()),
                   nodes=list(desc["nodes"]), partition=desc.get("partition", "debug"),
                   daemons=list(desc["daemons"]))


def _alive(pidfile: str, exe: str, match: str) -> bool:
    """Same test as the playbook's module: non-zombie, right binary, our argument.

    Only root (or the owner) may read ``/proc/PID/exe`` of root's daemons; a non-root client
    of a cluster root started (PT2PT_SLURM_STATE) judges the binary by ``argv[0]`` instead,
    which the playbook starts as the absolute path, so that such a cluster counts as up.
    """
    try:
        pid = int(Path(pidfile).read_text().split()[0])
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return False
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        try:
            binary = os.readlink(f"/proc/{pid}/exe")
        except PermissionError:
            binary = os.fsdecode(argv[0])
        if os.path.realpath(binary) != os.path.realpath(exe):
            return False
    except (OSError, ValueError, IndexError):
        return False
    return match.encode() in argv


def is_up(state_dir: Path | str | None = None) -> bool:
    """True if every daemon of the cluster in ``state_dir`` is running."""
    state = Path(state_dir) if state_dir else DEFAULT_STATE_DIR
    try:
        cluster = load(state)
    except (UserError, ValueError, KeyError):
        return False
    return bool(cluster.daemons) and all(
        _alive(d["pidfile"], d["exe"], d["match"]) for d in cluster.daemons)


@dataclass(frozen=True)
class LinkShape:
    """One slower link between nodes ``a`` and ``b`` (numbers 1..N), both directions."""

    a: int
    b: int
    rate: str
    burst: str = "64kb"

    def playbook_value(self) -> dict[str, object]:
        return {"nodes": [self.a, self.b], "rate": self.rate, "burst": self.burst}


@dataclass(frozen=True)
class NodeShape:
    """A slower node: its egress at ``rate`` instead of the common shaping (every message it
    sends is serialised slower, so each of its pairs slows down)."""

    node: int
    rate: str
    burst: str = "64kb"

    def playbook_value(self) -> dict[str, object]:
        return {"node": self.node, "rate": self.rate, "burst": self.burst}


_RATE_RE = re.compile(r"^[0-9.]+[kmgt]?(bit|bps)$")
_BURST_RE = re.compile(r"^[0-9]+[kmg]?b?$")


def _check_node_shapes(shapes: tuple[NodeShape, ...], nodes: int) -> None:
    for shape in shapes:
        if not (isinstance(shape, NodeShape) and 1 <= shape.node <= nodes
                and _RATE_RE.match(shape.rate) and _BURST_RE.match(shape.burst)):
            raise UserError(f"node_shapes: {shape!r} is not a node of the {nodes}",
                            where="kit.measure.localcluster.up",
                            hint="pass NodeShape(node, rate, burst) with 1 <= node <= nodes, "
                            "a rate like '20mbit' and a burst like '64kb'")


def _check_links(links: tuple[LinkShape, ...], nodes: int) -> None:
    for link in links:
        if not (isinstance(link, LinkShape) and 1 <= link.a <= nodes and 1 <= link.b <= nodes
                and link.a != link.b and _RATE_RE.match(link.rate)
                and _BURST_RE.match(link.burst)):
            raise UserError(f"links: {link!r} is not a link between two of the {nodes} nodes",
                            where="kit.measure.localcluster.up",
                            hint="pass LinkShape(a, b, rate, burst) with 1 <= a != b <= nodes, "
                            "a rate like '100mbit' and a burst like '64kb'")


def up(nodes: int = 1, state_dir: Path | str | None = None,
       shape: tuple[str, str] | None = None, *, layout: Layout | None = None,
       accounting: bool = False, switches: int = 0, cpus: int = 0,
       links: tuple[LinkShape, ...] = (), node_shapes: tuple[NodeShape, ...] = (),
       timeout: float = 900) -> Cluster:
    """Start (or confirm) a local cluster of ``nodes`` nodes and return it.

    ``shape=(rate, burst)``, e.g. ``("1gbit", "256kb")``, puts tbf on every node's link
    (only meaningful with ``nodes > 1``). ``layout`` overrides the ports/subnet/names otherwise
    derived from the state dir. ``accounting=True`` adds MariaDB + slurmdbd (sacct works);
    ``switches=K`` spreads the nodes over K leaf switches (topology/tree); ``cpus=C`` makes
    every node declare C CPUs (0: the machine's), e.g. for more ranks per node than cores.
    ``links`` makes some links slower than the rest (:class:`LinkShape`, htb on both ends,
    matched on the peer's address) and ``node_shapes`` some nodes (:class:`NodeShape`, their
    egress rate): known slow links and nodes for the cluster model's ground truth.
    Idempotent: on a running cluster it changes nothing (shapes and links are re-applied).
    Debian packages are installed only when a daemon binary is missing.
    """
    _require_root("kit.measure.localcluster.up")
    if not isinstance(nodes, int) or not 1 <= nodes <= 64:
        raise UserError(f"nodes={nodes!r} is not a node count", where="kit.measure.localcluster.up",
                        hint="pass an integer between 1 and 64")
    if shape is not None and (len(shape) != 2 or not all(isinstance(s, str) for s in shape)):
        raise UserError(f"shape={shape!r} is not (rate, burst)",
                        where="kit.measure.localcluster.up",
                        hint="pass e.g. shape=('1gbit', '256kb'), or None for no shaping")
    if shape is not None and nodes == 1:
        raise UserError("shape needs nodes >= 2: it shapes the links between the fake nodes",
                        where="kit.measure.localcluster.up", hint="pass nodes=2, or shape=None")
    if not isinstance(cpus, int) or not 0 <= cpus <= 256:
        raise UserError(f"cpus={cpus!r} is not a CPU count", where="kit.measure.localcluster.up",
                        hint="pass an integer between 0 (the machine's) and 256")
    _check_links(tuple(links), nodes)
    _check_node_shapes(tuple(node_shapes), nodes)
    state = Path(state_dir) if state_dir else default_state_dir(nodes)
    extra: dict[str, object] = {
        **(layout or layout_for(state)).playbook_vars(),
        "local_slurm_state_dir": str(state),
        "local_slurm_nodes": nodes,
        "local_slurm_shape_rate": shape[0] if shape else "",
        "local_slurm_shape_burst": shape[1] if shape else "256kb",
        "local_slurm_accounting": accounting,
        "local_slurm_switches": switches,
        "local_slurm_cpus": cpus,
        "local_slurm_link_shapes": [link.playbook_value() for link in links],
        "local_slurm_node_shapes": [shape.playbook_value() for shape in node_shapes],
    }
    daemons = ["slurmctld", "slurmd", "munged"] + (["slurmdbd", "mariadbd"] if accounting else [])
    have_all = all(Path("/usr/sbin", b).exists() for b in daemons)
    _run_playbook("local-cluster.yml", extra, skip_packages=have_all,
                  log=state.with_name(state.name + ".ansible-up.log"), timeout=timeout)
    return load(state)


def down(state_dir: Path | str | None = None, *, timeout: float = 300) -> None:
    """Stop the cluster in ``state_dir`` (default: the 1-node default) and remove all it made."""
    _require_root("kit.measure.localcluster.down")
    state = Path(state_dir) if state_dir else DEFAULT_STATE_DIR
    _run_playbook("local-cluster-down.yml", {"local_slurm_state_dir": str(state)},
                  skip_packages=True, log=state.with_name(state.name + ".ansible-down.log"),
                  timeout=timeout)
