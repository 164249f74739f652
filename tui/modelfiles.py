"""Model files in and out: loading (a folder stands for its models), pairing each model
with the series its provenance names, saving with provenance, SimGrid export."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kit.core.errors import UserError
from kit.data.schema import SERIES_KEYS
from tui.fitting import breakpoints_of
from tui.loading import SeriesRow
from tui.serieskey import SeriesKey

if TYPE_CHECKING:
    from kit.model.contract import ModelFile
    from kit.model.estimator import RegimeModel


def load_model(path: str | Path) -> Any:
    from kit.model.io import load_model as _load

    return _load(Path(path))


def missing_models(path: Path, dataset: str | Path | None = None,
                   folder: bool | None = None) -> UserError:
    """A model file or folder that is not there, with the command that writes it."""
    data = str(dataset) if dataset else "DATASET"
    folder = path.suffix != ".json" if folder is None else folder
    if folder:
        return UserError("no such folder of models", where=str(path),
                         hint=f"write one model per series into it first: 'pt2pt fit {data} "
                         f"--all -o {path}/' (or give the models folder 'pt2pt demo' wrote, "
                         "demo-out/models)")
    return UserError("no such model file", where=str(path),
                     hint=f"fit it first: 'pt2pt fit {data} --series KEY=VALUE,... -o {path}' "
                     "('pt2pt datasets' lists the series)")


def model_files(paths: Sequence[str | Path]) -> tuple[list[Path], list[UserError]]:
    """The model JSON files named by ``paths``: files as given, directories expanded.

    A directory stands for its ``*.json`` files (sorted, hidden ones skipped: ``pt2pt demo``
    keeps a hidden fingerprint beside its models), so ``--models DIR`` needs no shell glob.
    """
    files: list[Path] = []
    errors: list[UserError] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            errors.append(missing_models(path))
            continue
        if path.is_dir():
            found = sorted(p for p in path.glob("*.json")
                           if p.is_file() and not p.name.startswith("."))
            if not found:
                errors.append(UserError("no model files (*.json) in this directory",
                                        where=str(path), hint="give the folder that "
                                        "'pt2pt demo' or 'pt2pt fit -o' wrote models into"))
            files.extend(found)
        else:
            files.append(path)
    return files, errors


def load_models(paths: Sequence[str | Path]) -> tuple[list[ModelFile], list[UserError]]:
    """Load every model file; a bad file becomes an error naming it, the others still load."""
    from kit.model.io import read_model

    loaded: list[ModelFile] = []
    files, errors = model_files(paths)
    for path in files:
        try:
            fitted = read_model(path)
        except UserError as err:
            if not err.where or str(path) not in err.where:
                err = UserError(err.message, where=str(path), hint=err.hint)
            errors.append(err)
            continue
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            errors.append(UserError(f"cannot load the model ({type(exc).__name__}: {exc})",
                                    where=str(path), hint="give a model JSON written by "
                                    "'pt2pt fit' or by this explorer's export"))
            continue
        loaded.append(fitted)
    return loaded, errors


def _describe_series(series: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in series.items())


def match_models(models: Sequence[ModelFile], rows: Sequence[SeriesRow]
                 ) -> tuple[dict[SeriesKey, ModelFile], list[ModelFile], list[str]]:
    """Pair each model with the one series of ``rows`` its provenance names.

    Returns (model per series, models that name no series, messages for the user). Models
    written by ``pt2pt fit`` name campaign/tool/transport/op and are fitted on raw samples,
    so a missing ``stat`` means ``raw``. A model matching no series, or several, is reported
    and left out; when two files name the same series the later one wins, with a message.
    """
    by_key: dict[SeriesKey, ModelFile] = {}
    unnamed: list[ModelFile] = []
    messages: list[str] = []
    for mf in models:
        if mf.series is None:
            unnamed.append(mf)
            continue
        wanted = {k: v for k, v in mf.series.items() if k in SERIES_KEYS}
        if "stat" not in wanted:
            wanted["stat"] = "raw"
        wanted.setdefault("pairs", "1")  # written before pairs was a key: the two-rank probe
        found = [r.key for r in rows
                 if all(r.key.get(k) == v for k, v in wanted.items())]
        if not found:
            messages.append(f"{mf.name}: its series ({_describe_series(mf.series)}) is not in "
                            "this dataset, so the model is not shown")
        elif len(found) > 1:
            messages.append(f"{mf.name}: its provenance names {len(found)} series of this "
                            f"dataset ({_describe_series(mf.series)}), so the model is not shown")
        else:
            if found[0] in by_key:
                messages.append(f"{mf.name} and {by_key[found[0]].name} are both for "
                                f"{found[0].label}: showing {mf.name}")
            by_key[found[0]] = mf
    return by_key, unnamed, messages


def save_model(model: RegimeModel, path: str | Path, dataset: str | Path | None, key: SeriesKey,
               validation: dict[str, Any] | None = None) -> Path:
    """Write the model with its provenance (this series, fitted here) and validation."""
    from kit.model.io import save_model as _save

    out = Path(path)
    prov: dict[str, Any] = {"dataset": str(Path(dataset).resolve()) if dataset else None,
                            "series": key.as_dict(), "source": "pt2pt tui"}
    if key.aggregate:
        from kit.fit.fitting import aggregate_noise_note
        from kit.fit.reportednoise import reported_noise

        reported = reported_noise(dataset, key.as_dict(), breakpoints_of(model)) \
            if dataset else None
        prov.update(samples="aggregates", statistic=key.get("stat"),
                    noise=aggregate_noise_note(key.get("stat"), reported))
        if reported is not None:
            prov["reported_noise"] = reported.to_dict()
    _save(model, out, provenance=prov, validation=validation)
    return out


def export_simgrid(model: RegimeModel, directory: str | Path) -> list[Path]:
    """SimGrid/SMPI configuration files (kit writes several) into ``directory``."""
    from kit.outputs.export.simgrid import export_simgrid as _export

    return _export(model).write(Path(directory))


SIMGRID_FILES = ("smpi-config.txt", "smpi-config.xml", "platform.xml", "hostfile",
                 "simgrid-noise.json", "simgrid-noise.tsv")
