"""Model files are untrusted: every malformed one is refused by every reader, without a traceback.

The corpus (tests/model_corpus.py, generated, 90+ files) covers the 53 files issue 13 tried
and more. Readers: ``kit.model.io.load_model`` (the one entry point), the CLI commands that
read models (in-process for all files and commands; as real subprocesses for a sample,
all of them when CI=true), and the TUI (a bad model is a notification, the rest opens).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kit.cli import main
from kit.core.errors import ModelError
from kit.model.io import load_model
from kit.model.schema import MAX_REGIMES, MODEL_SCHEMA, SCHEMA_VERSION
from tests.model_corpus import accepted, base_model, malformed

ROOT = Path(__file__).resolve().parent.parent
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
MALFORMED = malformed()
ACCEPTED = accepted()
#: The CLI commands that read a model file (argv after the file; OUT is a fresh directory).
COMMANDS = {
    "predict": ["--sizes", "1,1024,1000000"],
    "sample": ["--sizes", "1,1024", "-n", "2", "--seed", "1"],
    "export": ["--simgrid", "-o", "OUT"],
    "validate": ["--no-save"],
    "report": ["-o", "OUT"],
    "simulate": [],
    "diff": ["--halves"],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("model-corpus")
    for name, raw in MALFORMED:
        (root / "bad" / f"{name}.json").parent.mkdir(exist_ok=True)
        (root / "bad" / f"{name}.json").write_bytes(raw)
    for name, raw in ACCEPTED:
        (root / "good" / f"{name}.json").parent.mkdir(exist_ok=True)
        (root / "good" / f"{name}.json").write_bytes(raw)
    return root


def test_corpus_covers_the_issue() -> None:
    names = {n for n, _ in MALFORMED}
    assert len(names) >= 53
    for listed in ("not-utf8", "deep-list-100k", "regimes-null-item", "noise-null", "param-1e400",
                   "noise-unknown-family", "noise-params-empty", "format-version-float",
                   "regimes-12000", "constant-negative", "param-null-nan", "size-min-above-max",
                   "regimes-reversed", "noise-scale-negative"):
        assert listed in names
    assert MODEL_SCHEMA["title"] == "pt2pt-model" and SCHEMA_VERSION >= 1


@pytest.mark.parametrize("name", [n for n, _ in ACCEPTED])
def test_valid_and_forward_compatible_files_load(name: str, corpus: Path) -> None:
    model = load_model(corpus / "good" / f"{name}.json")
    sizes = np.geomspace(1, 2 ** 22, 40)
    q = model.predict_quantiles(sizes, [0.05, 0.5, 0.95])
    assert np.all(np.isfinite(q)) and np.all(q > 0) and np.all(np.diff(q, axis=1) >= 0)


@pytest.mark.parametrize("name", [n for n, _ in MALFORMED])
def test_malformed_file_is_refused_naming_the_file(name: str, corpus: Path) -> None:
    path = corpus / "bad" / f"{name}.json"
    with pytest.raises(ModelError) as err:
        load_model(path)
    assert err.value.where is not None and str(path) in err.value.where
    assert "Traceback" not in err.value.paragraph()


def test_errors_carry_the_json_path(tmp_path: Path) -> None:
    doc = base_model()
    doc["regimes"][1]["noise"]["params"]["scale"] = -2.0
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelError, match=r"\$\.regimes\[1\]\.noise\.params\.scale"):
        load_model(path)
    doc = base_model()
    doc["regimes"] = [doc["regimes"][0]] * (MAX_REGIMES + 1)
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelError, match=r"\$\.regimes: 65 regimes"):
        load_model(path)


def _argv(command: str, path: Path, out: Path) -> list[str]:
    return [command, str(path), *[str(out) if a == "OUT" else a for a in COMMANDS[command]]]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_cli_refuses_every_malformed_file(command: str, corpus: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """In-process ``pt2pt <command>`` on every file: a UserError exit, never an exception."""
    for name, _ in MALFORMED:
        path = corpus / "bad" / f"{name}.json"
        rc = main(_argv(command, path, tmp_path / name))
        err = capsys.readouterr().err
        assert rc != 0, (command, name)
        assert "error:" in err and name in err, (command, name, err)
        assert not (tmp_path / name).exists() or not any((tmp_path / name).iterdir())


#: `python -m kit` from this checkout, whatever is installed.
KIT_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _no_traceback(name: str, rc: int, stderr: str) -> None:
    assert rc not in (0, -9), (name, rc, stderr)  # -9: killed at the timeout (a hang)
    assert "Traceback" not in stderr, (name, stderr)
    assert f"{name}.json" in stderr, (name, stderr)


def test_cli_subprocess_no_traceback_no_hang(corpus: Path, tmp_path: Path) -> None:
    """The real executable, `python -m kit predict FILE`: exit non-zero, no 'Traceback',
    within the timeout (12,000 regimes included), on a sample of the corpus (each fresh
    start costs its imports, about 0.3 CPU-s on a slow core)..."""
    for name in ["not-utf8", "deep-list-100k", "noise-null", "regimes-12000",
                 "constant-negative"]:
        proc = subprocess.run([sys.executable, "-m", "kit",
                               *_argv("predict", corpus / "bad" / f"{name}.json",
                                      tmp_path / name)],
                              env=KIT_ENV, capture_output=True, text=True, timeout=120)
        _no_traceback(name, proc.returncode, proc.stderr)


def test_cli_forked_processes_no_traceback_no_hang(corpus: Path, tmp_path: Path) -> None:
    """...and on every file, each in a process of its own forked from one that has done the
    imports (tests/cli_forks.py): kit's entry module as `python -m kit` runs it."""
    names = [n for n, _ in MALFORMED]
    jobs = [_argv("predict", corpus / "bad" / f"{name}.json", tmp_path / name)
            for name in names]
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "cli_forks.py"), "120"],
                          input=json.dumps(jobs), env=KIT_ENV, capture_output=True, text=True,
                          timeout=600, check=True)
    results = json.loads(proc.stdout)
    assert len(results) == len(names)
    for name, res in zip(names, results, strict=True):
        _no_traceback(name, res["rc"], res["stderr"])


@pytest.mark.slow
def test_tui_notifies_each_bad_model_and_opens_the_rest(corpus: Path, tmp_path: Path) -> None:
    """`pt2pt tui DATASET --models DIR` with every malformed file and the good ones: one error
    notification per bad file, the good models load, the dataset opens."""
    from tests.test_tui_pilot import SIZE, build_synthetic_dataset, settle, sync
    from tui.app import ExplorerApp
    from tui.screens.browser import BrowserScreen

    dataset = build_synthetic_dataset(tmp_path, n=1500)
    mixed = tmp_path / "models"
    mixed.mkdir()
    for src in [*(corpus / "bad").iterdir(), *(corpus / "good").iterdir()]:
        (mixed / src.name).write_bytes(src.read_bytes())

    @sync
    async def run() -> None:
        app = ExplorerApp(dataset, models=[mixed])
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            errors = [n for n in app._notifications if n.severity == "error"]
            named = {name for name, _ in MALFORMED if any(f"{name}.json" in n.message
                                                          for n in errors)}
            assert named == {name for name, _ in MALFORMED}
            assert all("Traceback" not in n.message for n in errors)
            assert sorted(m.name for m in app.session.model_files) == \
                sorted(f"{name}.json" for name, _ in ACCEPTED)
            assert isinstance(app.screen, BrowserScreen)
            assert len(app.screen.shown) == 2

    run()


@pytest.mark.parametrize("validation", [{"summary": 5}, {"summary": {"model": 3}},
                                        {"ranges": "x"}, {"regimes": [None]},
                                        {"score": "x", "per_size": 3}])
def test_report_survives_a_free_form_validation_block(validation: dict[str, object],
                                                      tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``validation`` is free-form (kit.fit.validate's output, extended by others): a block of
    another shape is left out of the report with a note, never a traceback."""
    doc = base_model()
    doc["validation"] = validation
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    assert main(["report", str(path), "-o", str(tmp_path / "r")]) == 0
    html = next((tmp_path / "r").glob("*.html")).read_text()
    assert "stored validation is not in the form" in html


#: The per-size columns' rules as per-value JSON Schema (what the schema said before the
#: columns were checked with numpy): the messages must stay jsonschema's.
_ITEM_RULES = {
    "sizes": {"type": "number", "minimum": 0},
    "n": {"type": "integer", "minimum": 1},
    "loc": {"type": "number", "minimum": -20, "maximum": 20},
    "loc_slow": {"type": ["number", "null"], "minimum": -20, "maximum": 20},
    "share": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
    "shape": {"type": "number", "minimum": -20, "maximum": 20},
}
_BAD_VALUES = [True, "0.5", None, [1.0], {"a": 1}, -25, 25.5, -1.0, 1.5, 0, 2.0]


def _per_size_doc(sizes: int) -> dict:
    doc = base_model()
    doc["per_size"] = {"estimated": True, "sizes": [float(2 * i + 1) for i in range(sizes)],
                       "n": [3] * sizes, "loc": [0.01] * sizes, "loc_slow": [None] * sizes,
                       "share": [0.25] * sizes, "shape_levels": [0.25, 0.5, 0.75],
                       "shape": [[-0.01, 0.0, 0.02]] * sizes}
    return doc


@pytest.mark.parametrize("key", list(_ITEM_RULES))
@pytest.mark.parametrize("bad", _BAD_VALUES, ids=repr)
def test_per_size_values_are_refused_as_jsonschema_would(key: str, bad: object,
                                                          tmp_path: Path) -> None:
    """One bad value in a per-size column: refused with the JSON path of that value and
    jsonschema's own message for it, or accepted where the per-value rule accepts it."""
    from jsonschema import Draft202012Validator

    doc = _per_size_doc(3)
    column = doc["per_size"][key]
    if key == "shape":
        column[1] = [-0.01, bad, 0.02]
        where = "$.per_size.shape[1][1]"
    else:
        column[1] = bad
        where = f"$.per_size.{key}[1]"
    errors = list(Draft202012Validator(_ITEM_RULES[key]).iter_errors(bad))
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    if not errors:  # the value rule accepts it (a later rule, e.g. sizes' order, may not)
        try:
            load_model(path)
        except ModelError as exc:
            assert not any(w in str(exc) for w in ("not of type", "the minimum", "the maximum"))
        return
    with pytest.raises(ModelError) as err:
        load_model(path)
    text = str(err.value)
    assert where in text, text
    assert f"{where}: {errors[0].message}. " in text, (errors[0].message, text)


def test_a_hundred_thousand_stored_sizes_load_and_the_last_bad_value_is_named(
        tmp_path: Path) -> None:
    """A log-uniform fit stores a size per few samples: 10^5 sizes load (with their shape
    rows), and one bad value at the very end is still found and named."""
    doc = _per_size_doc(100_000)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc))
    model = load_model(path)
    assert len(model.per_size_.sizes) == 100_000
    doc["per_size"]["shape"][-1] = [-0.01, 0.0, 21.0]
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelError, match=r"\$\.per_size\.shape\[99999\]\[2\]: 21\.0 is "
                                         r"greater than the maximum of 20"):
        load_model(path)
    doc["per_size"]["shape"][-1] = [-0.01, 0.0] + [0.0] * 63
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelError, match=r"\$\.per_size\.shape\[99999\]: a row of 65 values"):
        load_model(path)


def test_a_long_bad_per_size_value_is_named_by_its_kind(tmp_path: Path) -> None:
    """A column value that is a long list is named "this list of N items", not printed."""
    doc = _per_size_doc(3)
    doc["per_size"]["loc"][2] = list(range(500))
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelError) as err:
        load_model(path)
    text = str(err.value)
    assert "$.per_size.loc[2]: this list of 500 items is not of type 'number'" in text
    assert len(text) < 300
