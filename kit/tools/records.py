"""Schemas of the JSON records read beside tool outputs: ``job.json`` and the probe's meta.

Both are written by our own code, but they are read from directories copied between sites
and may be damaged or edited, so they are untrusted: a wrong type used to end in a
traceback (``int("abc")`` for ``ntasks_per_node``, ``.get`` on a list). The same approach
as the model file (:mod:`kit.model.schema`): a JSON Schema per record (validated with
``jsonschema``) for the keys we read, unknown keys ignored, and a message carrying the JSON
path of the bad field. A record that fails its schema does not fail the samples: the run
is ingested, marked incomplete, and the reason names the file and the field.
"""

from __future__ import annotations

import json
import math
import stat
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

RECORD_SCHEMA_VERSION = 1
MAX_RECORD_BYTES = 16 << 20
MAX_DEPTH = 32

_STR_OR_NULL = {"type": ["string", "null"]}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_SCALAR = {"type": ["string", "number", "boolean", "null"]}

#: ``job.json`` (kit/measure/campaign/jobrecord.py writes it), the keys ingest and collect read.
JOB_RECORD_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "pt2pt job.json",
    "type": "object",
    "properties": {
        "state": {"type": "string"},
        "reason": _STR_OR_NULL,
        "start": _STR_OR_NULL,
        "end": _STR_OR_NULL,
        "slurm_job_id": _STR_OR_NULL,
        "host": _STR_OR_NULL,
        "exit_status": {"type": ["integer", "null"]},
        "plan": {
            "type": "object",
            "properties": {
                "outputs": _STRINGS,
                "command": _STRINGS,
                "nodes": {"type": ["integer", "null"], "minimum": 1},
                "ntasks_per_node": {"type": ["integer", "null"], "minimum": 1, "maximum": 4096},
                "transport_env": {"type": ["object", "null"], "additionalProperties": _SCALAR},
            },
        },
    },
}

#: ``PREFIX.meta.json`` (the probe's run metadata, docs/architecture.md), the keys ingest reads.
PROBE_META_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "pt2pt-probe meta.json",
    "type": "object",
    "properties": {
        "probe_version": _STR_OR_NULL,
        "mpi_version": _STR_OR_NULL,
        "hosts": {"type": ["array", "null"], "items": {"type": "string"}},
        "env": {"type": ["object", "null"], "additionalProperties": _SCALAR},
        "slurm_job_id": {"type": ["string", "integer", "null"]},
        "start": _STR_OR_NULL,
        "end": _STR_OR_NULL,
        "ops": {"type": ["array", "null"], "items": {"type": "string"}},
        "samples_written": {"type": ["integer", "null"], "minimum": 0},
        "pairs": {"type": ["integer", "null"], "minimum": 1},
        # contention mode: [initiator, peer] ranks of each pair, pair 0 first
        "pairing": {"type": ["array", "null"],
                    "items": {"type": "array", "items": {"type": "integer", "minimum": 0},
                              "minItems": 2, "maxItems": 2}},
        "complete": {"type": ["boolean", "null"]},
        "stop_reason": _STR_OR_NULL,
        # the process writing the files (kit.tools.identity asks whether it still runs)
        "writer_pid": {"type": ["integer", "null"], "minimum": 0},
    },
}
_VALIDATORS = {id(s): Draft202012Validator(s) for s in (JOB_RECORD_SCHEMA, PROBE_META_SCHEMA)}


def read_record(path: Path) -> tuple[Any, str | None]:
    """(parsed JSON, None) or (None, why it cannot be read): never raises for bad content."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block the open for ever
            return None, "is not a regular file"
        with open(path, "rb") as fh:
            raw = fh.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    if len(raw) > MAX_RECORD_BYTES:
        return None, f"is larger than {MAX_RECORD_BYTES >> 20} MiB"
    try:
        text = raw.decode("utf-8-sig")  # an editor's byte order mark is not an error
    except UnicodeDecodeError as exc:
        return None, f"is not UTF-8 text (invalid byte at offset {exc.start})"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"is not valid JSON (line {exc.lineno}: {exc.msg})"
    except RecursionError:
        return None, f"is nested deeper than {MAX_DEPTH} levels"
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        return None, f"is not valid JSON ({exc})"


def problem(doc: Any, schema: dict[str, Any]) -> str | None:
    """None if ``doc`` satisfies ``schema``, else ``"$.path: message"`` for the worst error."""
    stack: list[tuple[Any, str, int]] = [(doc, "$", 1)]
    while stack:  # depth and finite numbers first: jsonschema recurses, NaN passes "number"
        obj, path, depth = stack.pop()
        if isinstance(obj, dict | list) and depth > MAX_DEPTH:
            return f"{path[:60]}: nested deeper than {MAX_DEPTH} levels"
        if isinstance(obj, dict):
            stack.extend((v, f"{path}.{k}", depth + 1) for k, v in obj.items())
        elif isinstance(obj, list):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(obj))
        elif isinstance(obj, float) and not math.isfinite(obj):
            return f"{path}: not a finite number"
    error = best_match(_VALIDATORS[id(schema)].iter_errors(doc))
    if error is None:
        return None
    shown = repr(error.instance)
    message = error.message if len(shown) <= 40 else error.message.replace(shown, "this value")
    return f"{error.json_path}: {message[:160]}"
