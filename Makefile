# pt2pt-kit task runner. The two commands the README promises:
#   make demo   set up and run the main job (local sweep -> dataset -> model -> report/TUI)
#   make test   set up and run the whole test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PT2PT := $(VENV)/bin/pt2pt
PYTEST_ARGS ?=
DEMO_ARGS ?=
IS_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo yes)

.PHONY: help venv probe demo test lint bench cluster-up cluster-down test-container system-deps clean selftest

help:
	@echo "make demo            set up everything and run the demo campaign (README command 1)"
	@echo "make test            set up and run the test suite (README command 2)"
	@echo "make test-container  build the Containerfile and run the tests in it (podman or docker)"
	@echo "make lint            ruff + ansible-lint"
	@echo "make bench           run the benchmarks (see BENCHMARKS.md)"
	@echo "make cluster-up / cluster-down   local Slurm cluster (root)"
	@echo "make selftest        shaped two-node TCP bandwidth vs 0.956 x 125 MB/s (root)"

$(VENV)/.installed: pyproject.toml
	@if ! $(PYTHON) -c 'import venv, ensurepip' 2>/dev/null; then \
	  if [ "$(IS_ROOT)" = yes ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv python3-pip; \
	  else echo "make: python3-venv is missing: run 'sudo apt-get install python3-venv' and retry" >&2; exit 2; fi; fi
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,deploy]'
	touch $@

venv: $(VENV)/.installed

# System packages (Open MPI, Slurm, munge) through the project's own playbook when root.
system-deps: venv
	@if [ "$(IS_ROOT)" = yes ]; then \
	  $(VENV)/bin/ansible-playbook -i localhost, -c local -e ansible_python_interpreter=$(abspath $(PY)) \
	    playbooks/local-cluster.yml --tags packages; \
	elif ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then \
	  echo "make: Open MPI is missing: run 'sudo apt-get install --no-install-recommends openmpi-bin libopenmpi-dev slurm-wlm munge' (or run make as root)" >&2; exit 2; fi

probe: system-deps
	$(MAKE) -C kit/probe

demo: probe
	$(PT2PT) demo $(DEMO_ARGS)

test: probe
	$(PY) -m pytest $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check kit tui tests benchmarks
	$(VENV)/bin/ansible-lint playbooks

# Ground-truth check of the whole chain (root): see `pt2pt selftest --help`.
selftest: probe
	$(PT2PT) selftest

bench: probe
	$(PY) benchmarks/run_all.py

cluster-up: venv
	$(VENV)/bin/ansible-playbook -i localhost, -c local -e ansible_python_interpreter=$(abspath $(PY)) playbooks/local-cluster.yml

cluster-down: venv
	$(VENV)/bin/ansible-playbook -i localhost, -c local -e ansible_python_interpreter=$(abspath $(PY)) playbooks/local-cluster-down.yml

test-container:
	bash .ci/container-test.sh

clean:
	$(MAKE) -C kit/probe clean
	rm -rf $(VENV) demo-out .pytest_cache
