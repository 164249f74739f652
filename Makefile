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

.PHONY: help venv probe demo test lint bench cluster-up cluster-down test-container system-deps test-deps clean selftest

help:
	@echo "make demo            set up everything and run the demo campaign (README command 1)"
	@echo "make test            set up and run the test suite (README command 2)"
	@echo "make test-deps       what make test installs first (root: every package a test uses)"
	@echo "make test-container  build the Containerfile and run the tests in it (podman or docker)"
	@echo "make lint            ruff + mypy + ansible-lint"
	@echo "make bench           run the benchmarks (see BENCHMARKS.md)"
	@echo "make cluster-up / cluster-down   local Slurm cluster (root)"
	@echo "make selftest        shaped two-node TCP bandwidth vs 0.956 x 125 MB/s (root)"

$(VENV)/.installed: pyproject.toml setup.py kit/model/_mixture_kernels.c kit/model/_curve_kernels.c kit/tools/_probe_rows.c
	@if ! $(PYTHON) -c 'import venv, ensurepip' 2>/dev/null; then \
	  if [ "$(IS_ROOT)" = yes ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv python3-pip; \
	  else echo "make: python3-venv is missing: run 'sudo apt-get install python3-venv' and retry" >&2; exit 2; fi; fi
	@# Python.h and gcc build the model's C kernels (setup.py); without them fits run in numpy.
	@if ! $(PYTHON) -c 'import os, sysconfig; os.stat(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null \
	    || ! command -v gcc >/dev/null; then \
	  if [ "$(IS_ROOT)" = yes ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-dev gcc; \
	  else echo "make: note: python3-dev or gcc is missing: the kit's C kernels will not build and fits run slower in numpy ('sudo apt-get install python3-dev gcc', then 'rm $(VENV)/.installed; make venv')" >&2; fi; fi
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# setuptools' "Editable installation" box is advice for package authors, not a failure.
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q -e '.[dev,deploy]'
	touch $@

venv: $(VENV)/.installed

# System packages (Open MPI, Slurm, munge) through the project's own playbook when root.
# Not root: check before building the venv (a missing package should be the first thing said,
# not the last after a minute of pip) and name only the packages that are missing. mpicc calls
# gcc, which libopenmpi-dev does not pull in without recommends.
system-deps:
	@if [ "$(IS_ROOT)" = yes ]; then \
	  $(MAKE) --no-print-directory venv && \
	  ANSIBLE_DEPRECATION_WARNINGS=False PYTHONWARNINGS="ignore:DSA is deprecated" \
	  $(VENV)/bin/ansible-playbook -i localhost, -c local -e ansible_python_interpreter=$(abspath $(PY)) \
	    playbooks/local-cluster.yml --tags packages; \
	else \
	  missing=""; \
	  command -v mpirun >/dev/null || missing="$$missing openmpi-bin"; \
	  command -v mpicc >/dev/null || missing="$$missing libopenmpi-dev"; \
	  command -v gcc >/dev/null || missing="$$missing gcc"; \
	  if [ -n "$$missing" ]; then \
	    echo "make: missing system packages:$$missing" >&2; \
	    echo "make: run 'sudo apt-get install --no-install-recommends$$missing' and retry (or run make as root)" >&2; \
	    exit 2; fi; \
	  if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/munged ]; then \
	    echo "make: note: slurm-wlm/munge are not installed; only the Slurm tests need them (as root)" >&2; fi; \
	fi

# Everything the tests use beyond the demo's needs. Root: the Debian packages through
# playbooks/test-host.yml (the local cluster's with MariaDB + slurmdbd, SimGrid, Chromium,
# podman, the Spack build tools). Another user: first of all (before the venv), the one
# apt-get line for every package that is missing; without the demo's own (MPI, gcc, venv)
# nothing can run, so stop, else go on (each test that needs a missing package skips, saying
# which). The lists: the YAML lists of the roles' defaults, read here with awk (plain
# `  - name` items; tests/test_host_packages.py holds the two readings equal).
HOST_PACKAGE_LISTS := local_slurm_packages local_slurm_accounting_packages test_host_packages
HOST_PACKAGES := $(shell awk -v keys="$(HOST_PACKAGE_LISTS)" \
  'BEGIN { n = split(keys, k, " "); for (i = 1; i <= n; i++) want[k[i]] = 1 } \
   /^[A-Za-z_][A-Za-z0-9_]*:/ { key = $$1; sub(":.*", "", key); next } \
   /^  - / && (key in want) { print $$2 }' \
  playbooks/roles/local_slurm/defaults/main.yml playbooks/roles/test_host/defaults/main.yml)
DEMO_PACKAGES := openmpi-bin libopenmpi-dev gcc python3-venv

test-deps:
	@if [ "$(IS_ROOT)" = yes ]; then \
	  $(MAKE) --no-print-directory venv && \
	  ANSIBLE_DEPRECATION_WARNINGS=False PYTHONWARNINGS="ignore:DSA is deprecated" \
	  $(VENV)/bin/ansible-playbook -i localhost, -c local -e ansible_python_interpreter=$(abspath $(PY)) \
	    playbooks/test-host.yml; \
	else \
	  have=" $$(dpkg-query -W -f='$${Package} $${db:Status-Abbrev}\n' $(HOST_PACKAGES) 2>/dev/null \
	          | awk '$$2 ~ /^ii/ {print $$1}' | tr '\n' ' ')"; \
	  missing=""; for p in $(HOST_PACKAGES); do \
	    case "$$have" in *" $$p "*) ;; *) missing="$$missing $$p";; esac; done; \
	  if [ -n "$$missing" ]; then \
	    echo "make: missing Debian packages; install them with" >&2; \
	    echo "  sudo apt-get install --no-install-recommends$$missing" >&2; \
	    for p in $(DEMO_PACKAGES); do case "$$missing " in *" $$p "*) \
	      echo "make: $(DEMO_PACKAGES) are needed for anything to run: stopping" >&2; exit 2;; esac; done; \
	    echo "make: going on without them: the tests that need them skip, each saying which (or run make test as root)" >&2; \
	  fi; \
	fi

.PHONY: host-packages
host-packages:
	@echo $(HOST_PACKAGES)

# The `ansible` package carries the containers.podman collection (ansible-core does not, and
# Galaxy may be out of reach); its pin is the site-test extra of pyproject.toml.
$(VENV)/.site-test: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q $$($(PY) -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["site-test"]))')
	touch $@

probe: system-deps venv
	$(MAKE) -C kit/probe

demo: probe
	$(PT2PT) demo $(DEMO_ARGS)

# An offline Spack from ../shared/spack when there is no Spack here (CI places ../shared
# beside the checkout): laid out in $(SPACK_LAB), and the kit's environment built by the
# tests (tests/conftest_spack.py) in $(SPACK_LAB)/kit-tree, kept for the next run.
SHARED_SPACK ?= ../shared/spack
SPACK_LAB ?= $(abspath .spack-lab)

test: test-deps probe $(VENV)/.site-test
	@if [ -z "$${SPACK_ROOT:-}" ] && ! command -v spack >/dev/null && [ -f $(SHARED_SPACK)/lab.sh ]; then \
	  bash $(SHARED_SPACK)/lab.sh $(SPACK_LAB) >/dev/null || exit $$?; \
	  . $(SPACK_LAB)/env.sh; export PT2PT_SPACK_TREE=$${PT2PT_SPACK_TREE:-$(SPACK_LAB)/kit-tree}; \
	fi; \
	bash tests/run-suite $(PY) $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check kit tui tests benchmarks playbooks
	$(VENV)/bin/mypy
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
	rm -rf $(VENV) demo-out .pytest_cache .spack-lab
