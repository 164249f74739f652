"""Exports of fitted models to other tools (SimGrid/SMPI: :mod:`kit.export.simgrid`)."""
