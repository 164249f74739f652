"""Exports of fitted models to other tools (SimGrid/SMPI: :mod:`kit.outputs.export.simgrid`)."""
