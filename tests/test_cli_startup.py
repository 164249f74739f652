"""CLI start-up stays light: `pt2pt --version` and `pt2pt datasets` import no scientific stack.

Every CLI call used to import scikit-learn and scipy (seconds of CPU) because building the
parser imported every command module (issue 19). The parser now imports only the module of
the command being run (kit.cli.COMMAND_MODULES). These tests run the real CLI in a fresh
interpreter and read which modules it imported; they assert what was loaded, never how long
it took.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

from kit import cli
from kit.data.ingest import ingest

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("sklearn", "scipy", "matplotlib")


#: Runs the CLI like `python -m kit ARGS` and reports sys.modules afterwards (importtime would
#: miss modules imported through importlib.import_module, as the CLI imports its commands).
_RUNNER = """
import json, sys
import kit.cli
try:
    rc = kit.cli.main(sys.argv[1:])
except SystemExit as exc:
    rc = exc.code
print("MODULES " + json.dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(rc or 0)
"""


def imported_modules(args: list[str]) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run the CLI with ARGS in a fresh interpreter; the modules it imported."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _RUNNER, *args], env=env,
                          capture_output=True, text=True, timeout=300)
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES "))
    return proc, set(json.loads(line[len("MODULES "):]))


def heavy(names: set[str]) -> set[str]:
    return {n for n in names if n.split(".")[0] in HEAVY}


def test_version_imports_no_command_module_and_no_scientific_stack() -> None:
    proc, names = imported_modules(["--version"])
    assert proc.returncode == 0 and "pt2pt-kit" in proc.stdout
    assert "kit.cli" in names  # the measurement saw the CLI itself
    assert not heavy(names), sorted(heavy(names))
    assert not {n for n in names if n.startswith("kit.commands.")}
    assert "numpy" not in names and "polars" not in names


def test_datasets_on_a_small_dataset_imports_no_scientific_stack(tmp_path: Path) -> None:
    csv = tmp_path / "run.samples.csv"
    csv.write_text("seq,op,size,count,time,call,warmup\n"
                   + "".join(f"{i},pingpong,{8 << i},1,{(i + 1) * 1e-6:.9e},,0\n"
                             for i in range(10)))
    report = ingest([csv], tmp_path / "ds", campaign="c", transport="shm")
    assert report.rows_added == 10
    proc, names = imported_modules(["datasets", str(tmp_path / "ds")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pingpong" in proc.stdout
    assert "kit.commands.datasets" in names
    assert not heavy(names), sorted(heavy(names))
    assert "numpy" not in names  # ~0.1 s that a table of series does not need
    # ingest stored the summary: listing it needs no Polars (~0.5 s of import)
    assert "polars" not in names


def test_datasets_without_a_current_summary_computes_it_then_lists_without_polars(
        tmp_path: Path) -> None:
    csv = tmp_path / "run.samples.csv"
    csv.write_text("seq,op,size,count,time,call,warmup\n"
                   + "".join(f"{i},pingpong,{8 << i},1,{(i + 1) * 1e-6:.9e},,0\n"
                             for i in range(10)))
    ingest([csv], tmp_path / "ds", campaign="c", transport="shm")
    (tmp_path / "ds" / "series.json").unlink()  # e.g. a dataset written by an older kit
    first, names = imported_modules(["datasets", str(tmp_path / "ds")])
    assert first.returncode == 0 and "polars" in names  # computed from the samples
    second, names = imported_modules(["datasets", str(tmp_path / "ds")])
    assert second.returncode == 0 and "polars" not in names  # ... and stored by the first
    assert second.stdout == first.stdout


def test_version_is_printed_on_stdout_and_exits_0() -> None:
    proc = subprocess.run([sys.executable, "-m", "kit", "--version"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0 and proc.stdout.startswith("pt2pt-kit ") and not proc.stderr


def test_help_still_lists_every_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "kit", "--help"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0
    for command in cli.COMMAND_MODULES:
        assert command in proc.stdout, command


def test_command_table_names_every_registered_command() -> None:
    """A command missing from COMMAND_MODULES still works, but slowly: keep the table whole."""
    full = cli.build_parser()
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    plugins = {ep.name for ep in entry_points(group="pt2pt.commands")}
    registered = set(sub.choices)
    missing = registered - set(cli.COMMAND_MODULES) - plugins
    assert not missing, f"add {sorted(missing)} to kit.cli.COMMAND_MODULES"
    for command, module in cli.COMMAND_MODULES.items():
        one = cli.build_parser({module})
        sub_one = next(a for a in one._actions if isinstance(a, argparse._SubParsersAction))
        assert command in sub_one.choices, (command, module)


@pytest.mark.parametrize("argv,expected", [
    (["--version"], set()),
    (["fit", "--help"], {"fit"}),
    (["sample", "m.json"], {"predict"}),
    (["--help"], None),
    (["no-such-command"], None),
])
def test_modules_for_picks_only_what_the_command_needs(argv: list[str],
                                                       expected: set[str] | None) -> None:
    assert cli._modules_for(argv) == expected


#: Commands that read one model file and nothing else, with the arguments they need.
MODEL_COMMANDS = {
    "predict": ["--sizes", "1,1024"],
    "sample": ["--sizes", "1,1024", "-n", "2", "--seed", "1"],
    "export": ["--simgrid", "-o", "OUT"],
    "simulate": [],
}


@pytest.mark.parametrize("command", list(MODEL_COMMANDS))
def test_a_malformed_model_file_is_refused_before_the_engine_is_imported(
        command: str, tmp_path: Path) -> None:
    """The schema runs first: a bad file costs no scikit-learn or SciPy import (~1.5 s of
    CPU to print one line)."""
    from tests.model_corpus import malformed

    bad = tmp_path / "noise-null.json"
    bad.write_bytes(dict(malformed())["noise-null"])
    args = [str(tmp_path / "out") if a == "OUT" else a for a in MODEL_COMMANDS[command]]
    proc, names = imported_modules([command, str(bad), *args])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "noise-null.json" in proc.stderr and "Traceback" not in proc.stderr
    assert not {"sklearn", "scipy.stats"} & names
    if command != "simulate":  # simulate runs SimGrid's Python module, which loads SciPy
        assert not heavy(names), sorted(heavy(names))[:5]


#: Models whose every noise family is evaluated without SciPy (gamma's incomplete gamma
#: function is scipy.special's: a gamma noise loads it).
LIGHT_FAMILIES = ("lognormal", "weibull", "fisk", "invgauss", "gmm")


@pytest.mark.parametrize("command", ["predict", "sample", "export"])
def test_a_saved_model_is_used_without_the_estimator_libraries(command: str,
                                                               tmp_path: Path) -> None:
    """`predict`, `sample` and `export` of a model file read it and evaluate it: the
    numbers come from numpy and Python's math module (kit.model.special), so neither
    scikit-learn nor SciPy (0.3-1.0 CPU-s of imports) nor Polars is loaded, for every
    noise family but gamma, two-band regimes, overlaps and per-size effects included."""
    from kit.fit import synth
    from kit.fit.fitting import FitOptions, SeriesSamples, fit_read
    from kit.model.contract import ModelFile
    from kit.model.io import write_model

    truth = synth.Truth([
        synth.TrueRegime(1, "constant", {"a": 20e-6}, synth.TrueNoise("lognormal", 0.1)),
        synth.TrueRegime(4096, "linear", {"a": 30e-6, "b": 1e-9},
                         synth.TrueNoise("weibull", 0.15)),
        synth.TrueRegime(65536, "linear", {"a": 90e-6, "b": 8e-10},
                         synth.TrueNoise("invgauss", 0.1))])
    size, time = synth.sample(truth, 6000, grid=60, seed=3)
    model = fit_read(SeriesSamples.of_arrays(size, time),
                     FitOptions(validate=False, intervals=False)).model
    families = {n.family for r in model.regimes_
                for n in ([c.noise for c in r.components] if r.is_mixture else [r.noise])}
    assert families <= set(LIGHT_FAMILIES), families
    good = write_model(ModelFile(model), tmp_path / "good.json")
    args = [str(tmp_path / "out") if a == "OUT" else a for a in MODEL_COMMANDS[command]]
    proc, names = imported_modules([command, str(good), *args])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not heavy(names), sorted(heavy(names))[:5]
    assert "polars" not in names
    if command == "predict":  # and the numbers are the engine's
        rows = [line.split(",") for line in proc.stdout.split()[1:]]
        q = model.predict_quantiles([1, 1024], [0.5, 0.05, 0.95])
        np.testing.assert_allclose(np.array([[float(v) for v in r[1:]] for r in rows]), q,
                                   rtol=1e-8)


@pytest.mark.parametrize("command", [*sorted(cli.COMMAND_MODULES), "tui", None])
def test_help_of_every_command_imports_no_scientific_stack(command: str | None) -> None:
    """Asking how to call a command is not using the engine: `pt2pt fit --help` and
    `pt2pt validate --help` imported scikit-learn and SciPy (a second of CPU) for the
    parser alone."""
    proc, names = imported_modules([command, "--help"] if command else ["--help"])
    assert proc.returncode == 0 and "usage: pt2pt" in proc.stdout, proc.stderr[-2000:]
    assert not heavy(names), sorted(heavy(names))[:5]
