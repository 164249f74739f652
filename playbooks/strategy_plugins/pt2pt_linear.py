"""Ansible's ``linear`` strategy, run through Mitogen when Mitogen is installed.

Why: a plain Ansible task ships each module as an AnsiballZ zip and starts a fresh Python
that recompiles ``module_utils`` from it, about 0.55 CPU-s per task on a slow 2-core node;
a local cluster's up, up-again and down are mostly that (git show 1da3baf:BENCHMARKS.md,
"Ansible through Mitogen"). Mitogen keeps one interpreter per host and runs modules in
it: 0.14 s per task.
The same plays, the same task results: only how a module reaches the host changes.

Mitogen is a ``deploy`` extra (pyproject.toml). Without it this is ``linear`` itself, so a
site that installs Ansible from its distribution runs the playbooks unchanged.
``ANSIBLE_STRATEGY`` / ``-e`` cannot override a play's ``strategy:``; to run plain Ansible
with Mitogen installed, set ``PT2PT_ANSIBLE_MITOGEN=0``.
"""
from __future__ import annotations

import os

from ansible.plugins.loader import strategy_loader


def _strategy() -> type:
    linear: type = strategy_loader.get("linear", class_only=True)
    if os.environ.get("PT2PT_ANSIBLE_MITOGEN", "1") == "0":
        return linear
    try:
        import ansible_mitogen.affinity
        import ansible_mitogen.loaders  # refuses an Ansible it does not support
        import ansible_mitogen.strategy
    except ImportError:
        return linear
    # Mitogen pins its processes, and on fewer than 4 CPUs everything they start, away from
    # CPU 0: the cluster's daemons, and every job step under them, then ran on one core of
    # two (the 4-node campaign test took 138 s instead of 82). No pinning at all.
    ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()
    return type("StrategyModule", (ansible_mitogen.strategy.StrategyMixin, linear),
                {"__doc__": "linear with Mitogen's connection and module runner."})


StrategyModule = _strategy()
