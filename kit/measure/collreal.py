"""Real runs of the collective driver with Open MPI's algorithm forced (issue 61's validation).

Why: the simulated ranking of collective algorithms is only worth what it predicts; at the
scale this machine allows (np 2-4 on one host) the same driver (``collbench``, built with
``mpicc``) runs for real under ``mpirun`` with the tuned component's algorithm forced
(``collbench -a N``: ``coll_tuned_<collective>_algorithm``, read back through MPI_T), over the
transport the kit's transport table forces (``jobs/transports.yaml``: shm = ob1 + vader,
tcp = ob1 + tcp, no silent fallback). :data:`OMPI_TWINS` names the Open MPI algorithms whose
SMPI twins exist.

Each call is one mpirun of ``reps`` timed repetitions after one warm-up (the slowest rank's
time each, see collbench); the caller interleaves algorithms so that a drift of the machine
falls on all of them.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from kit.core.errors import UserError
from kit.measure.campaign.transports import load_table
from kit.tools import app as apps

#: Open MPI 4.1 tuned algorithms (name, value of coll_tuned_<collective>_algorithm) and the
#: SimGrid 3.32 algorithm that implements the same exchange pattern: linear posts every
#: send and receive at once (basic_linear), pairwise exchanges with rank +- k at step k (pair),
#: modified Bruck rotates blocks in log2(p) rounds (bruck). linear_sync and two_proc have no
#: SMPI twin.
OMPI_TWINS: dict[str, dict[str, tuple[int, str]]] = {
    "alltoall": {"linear": (1, "basic_linear"), "pairwise": (2, "pair"),
                 "modified_bruck": (3, "bruck")},
}
DEFAULT_TIME_LIMIT_S = 300.0


def twins(collective: str, names: list[str]) -> list[tuple[str, int, str]]:
    """(Open MPI name, value, SMPI name) of each of ``names``; refuses one without a twin."""
    table = OMPI_TWINS.get(collective, {})
    bad = [n for n in names if n not in table]
    if bad or not names:
        raise UserError(f"no SMPI twin for Open MPI {collective} algorithm "
                        f"{', '.join(map(repr, bad)) or '(none given)'}",
                        where="option --algorithms",
                        hint=f"give some of: {', '.join(table) or '(none for ' + collective + ')'}")
    return [(n, *table[n]) for n in names]


def environment(transport: str) -> dict[str, str]:
    """The caller's environment with the transport table's forcing for ``transport``
    (intra-node) and nothing stray from the caller; mpirun's root flags as root."""
    table = load_table()
    entry = table.entry("openmpi", transport)
    if "intra-node" not in entry.placements:
        raise UserError(f"transport {transport} cannot carry messages inside one node",
                        where="option --transport", hint="give shm or tcp")
    clear = table.clear_env.get("openmpi", ())
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_MCA_", *clear))}
    env.update(entry.for_placement("intra-node").env)
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def binary() -> Path:
    return apps.build(apps.program("collbench"), "mpicc")


def run_real(collective: str, value: int, numproc: int, size: int, *, reps: int,
             transport: str = "shm", time_limit: float = DEFAULT_TIME_LIMIT_S) -> list[float]:
    """The ``reps`` repetition times (s) of one mpirun of collbench with algorithm ``value``."""
    cmd = ["mpirun", "-np", str(numproc), "--oversubscribe", str(binary()), "-c", collective,
           "-s", str(size), "-r", str(reps), "-w", "1", "-a", str(value)]
    where = f"mpirun collbench -c {collective} -a {value} -np {numproc} -s {size}"
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=environment(transport),
                              timeout=time_limit, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UserError(f"the real run did not finish within {time_limit:g} s", where=where,
                        hint="a hung transport; check 'mpirun -np 2 hostname'") from None
    except FileNotFoundError:
        raise UserError("mpirun is not installed", where=where,
                        hint="apt-get install openmpi-bin libopenmpi-dev") from None
    times = [float(ln.split()[3]) for ln in proc.stdout.splitlines()
             if re.match(r"^rep \d+ time_s \S+$", ln)]
    if proc.returncode != 0 or len(times) != reps:
        text = (proc.stderr.strip() or proc.stdout.strip())[-800:]
        raise UserError(f"the real run failed (exit {proc.returncode}): {text}", where=where,
                        hint="exit 4: Open MPI did not take the forced algorithm; otherwise "
                        "run the command by hand to see Open MPI's words")
    return times
