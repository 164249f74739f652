"""The raw-timing probe: C99 sources built by `make -C kit/probe`, and a Python twin of its plan.

The C program lives beside this file; :mod:`kit.probe.plan` reproduces the sample order it
derives from a seed, so analysis code can check or regenerate a run's plan without MPI.
"""
