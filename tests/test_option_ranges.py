"""Option values are range-checked where they are parsed (kit.core.argtypes), by every command.

Issue 53, line 10: eight option values ended in tracebacks (``sample -n 1e12``, a negative
seed, ``fit --max-samples=-1``, ``diff --bootstrap 1e12``...) and twelve nonsense values were
accepted (``export --latency=1e308`` wrote ``TCP-gamma:inf``). Each is now an option error:
one paragraph naming the option, exit 2, nothing written. A property test sends arbitrary
text to every numeric option of every command.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.cli import build_parser, main
from kit.core import argtypes
from tests.model_corpus import base_model

SETTINGS = {"deadline": None, "database": None, "derandomize": True,
            "suppress_health_check": list(HealthCheck)}


def run(argv: list[str]) -> int:
    """``pt2pt ARGV`` in-process: its exit code, whether it returned or exited."""
    try:
        return main(argv)
    except SystemExit as stop:
        return int(stop.code or 0)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("options") / "m.json"
    path.write_text(json.dumps(base_model()))
    return path


#: (argv after the command, the option the message must name). MODEL is a valid model file;
#: a dataset is not needed (a bad value is refused before anything is read).
REFUSED = [
    # the eight tracebacks of the issue
    (["sample", "MODEL", "--sizes", "1", "-n", "1e12"], "-n"),
    (["sample", "MODEL", "--sizes", "1", "-n", "1000000000000"], "-n"),
    (["sample", "MODEL", "--sizes", "1", "--seed=-1"], "--seed"),
    (["validate", "MODEL", "--seed=-1", "--no-save"], "--seed"),
    (["fit", "DS", "--max-regimes", "1e12", "-o", "OUT"], "--max-regimes"),
    (["fit", "DS", "--max-samples=-1", "-o", "OUT"], "--max-samples"),
    (["diff", "MODEL", "MODEL", "--bootstrap", "1e12"], "--bootstrap"),
    (["diff", "MODEL", "MODEL", "--bootstrap", "1000000000000"], "--bootstrap"),
    # nonsense that was accepted
    (["export", "MODEL", "--simgrid", "--latency=1e308", "-o", "OUT"], "--latency"),
    (["export", "MODEL", "--simgrid", "--latency=1e-30", "-o", "OUT"], "--latency"),
    (["export", "MODEL", "--simgrid", "--bandwidth=1e300Bps", "-o", "OUT"], "--bandwidth"),
    (["fit", "DS", "--max-regimes", "0", "-o", "OUT"], "--max-regimes"),
    (["fit", "DS", "--min-support", "-5", "-o", "OUT"], "--min-support"),
    (["fit", "DS", "--all", "--jobs", "-1", "-o", "OUT"], "--jobs"),
    (["validate", "MODEL", "--test-fraction", "1.5", "--no-save"], "--test-fraction"),
    (["validate", "MODEL", "--test-fraction", "0", "--no-save"], "--test-fraction"),
    (["diff", "MODEL", "MODEL", "--alpha", "7"], "--alpha"),
    (["diff", "MODEL", "MODEL", "--min-effect", "-3"], "--min-effect"),
    (["compare", "DS", "--within", "nan"], "--within"),
    (["compare", "DS", "--bins-per-decade", "0"], "--bins-per-decade"),
    (["simulate", "MODEL", "--reps", "0"], "--reps"),
    (["run-local", "CAMPAIGN", "--wait-idle", "-4"], "--wait-idle"),
    (["demo", "--wait-idle", "inf"], "--wait-idle"),
    (["sample", "MODEL", "--sizes", "1", "-n", "0"], "-n"),
    (["report", "MODEL", "-o", "OUT", "--seed", "99999999999999999999999"], "--seed"),
    (["loggp", "DS", "--seed", "1.5"], "--seed"),
    (["predict", "MODEL", "--sizes", "1e300"], "--sizes"),
    (["export", "MODEL", "--simgrid", "--simgrid-version", "999999999999.5", "-o", "OUT"],
     "--simgrid-version"),
]


@pytest.mark.parametrize(("argv", "option"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_bad_option_values_are_option_errors(argv: list[str], option: str, model: Path,
                                             tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    names = {"MODEL": str(model), "DS": str(tmp_path / "ds"), "OUT": str(tmp_path / "out"),
             "CAMPAIGN": str(tmp_path / "c.yaml")}
    assert run([names.get(a, a) for a in argv]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"argument {option}" in err or f"option {option}" in err or f"{option}:" in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_latency_in_range_is_still_accepted(model: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["export", str(model), "--simgrid", "--latency", "10us", "--bandwidth",
                "10Gbps", "-o", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "smpi-config.txt").read_text()
    assert "inf" not in text and "nan" not in text


def test_integers_may_be_written_in_exponent_form() -> None:
    assert argtypes.draws("1e3") == 1000 and argtypes.seed("1_000") == 1000
    with pytest.raises(argparse.ArgumentTypeError, match="whole number"):
        argtypes.draws("2.5")


def _numeric_options() -> list[tuple[str, str]]:
    """(command, option) of every option whose type is one of kit.core.argtypes'."""
    found = []
    parser = build_parser(None)
    shared = {id(v) for v in vars(argtypes).values() if callable(v)}
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        for name, sub in action.choices.items():
            for opt in sub._actions:
                if opt.option_strings and id(opt.type) in shared:
                    found.append((name, opt.option_strings[-1]))
    return found


def test_every_numeric_option_uses_a_shared_type() -> None:
    """No command parses a number with bare int/float (which takes 1e308, nan, -1)."""
    parser = build_parser(None)
    bare = []
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        for name, sub in action.choices.items():
            bare += [f"{name} {o.option_strings[-1]}" for o in sub._actions
                     if o.option_strings and o.type in (int, float)]
    assert not bare, bare
    assert len(_numeric_options()) >= 20


@settings(max_examples=60, **SETTINGS)
@given(st.sampled_from(_numeric_options()),
       st.one_of(st.text(max_size=12), st.integers().map(str),
                 st.floats(allow_nan=True, allow_infinity=True).map(repr)))
def test_any_text_for_a_number_is_accepted_or_an_option_error(option: tuple[str, str],
                                                              text: str) -> None:
    """Parsing only (no command runs): a value is in its range, or argparse says no."""
    command, flag = option
    parser = build_parser({command.replace("-", "_")} | {"predict"})
    sub = next(a for a in parser._subparsers._group_actions).choices[command]  # type: ignore[union-attr]
    opt = next(o for o in sub._actions if flag in o.option_strings)
    try:
        value = opt.type(text)  # type: ignore[misc]
    except argparse.ArgumentTypeError as err:
        assert str(err)
        return
    assert value == value and abs(value) < 1e16  # finite, bounded
