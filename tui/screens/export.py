"""Export: the model JSON and the SimGrid/SMPI configuration, written by kit."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label

from kit.core.errors import UserError
from kit.data.schema import pairs_short
from tui import modelfiles, serieskey
from tui.screens.common import Confirm, notify_error
from tui.session import Session


class Tick(Checkbox, inherit_bindings=False):
    """A checkbox whose state shows in the glyph (``✔`` / blank), not only in the colour.

    Only space and a click toggle it: Enter belongs to the dialog (save), so pressing Enter
    on a focused box never silently flips what gets written.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "toggle_button", "Toggle", show=False)]
    ON, OFF = "✔", " "

    def __init__(self, label: str, value: bool = False, *, id: str | None = None) -> None:
        super().__init__(label, value, id=id)
        self.BUTTON_INNER = self.ON if value else self.OFF

    def watch_value(self) -> None:
        self.BUTTON_INNER = self.ON if self.value else self.OFF
        super().watch_value()


def default_stem(key: serieskey.SeriesKey) -> str:
    """The series' values joined; the pair count only beyond one (``k4``), as model files."""
    words = (pairs_short(v) if k == "pairs" else v for k, v in key.as_dict().items())
    return "-".join(w for w in words if w and w not in ("raw", "unknown")
                    ).replace("/", "_").replace(":", "_")


class ExportScreen(ModalScreen[list[Path] | None]):
    """Path prompt for both outputs; asks before overwriting anything that exists."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "save", "Save", priority=False),
        Binding("escape", "cancel", "Cancel")]

    def __init__(self, session: Session, key: serieskey.SeriesKey) -> None:
        super().__init__()
        self.session = session
        self.key = key

    def compose(self) -> ComposeResult:
        stem = default_stem(self.key)
        with Vertical(classes="dialog", id="export-dialog"):
            yield Label(f"Export the model of {self.key.label}")
            yield Tick("model JSON", value=True, id="want-model")
            yield Input(f"{stem}.model.json", id="model-path")
            yield Tick("SimGrid/SMPI configuration (directory)", value=True, id="want-simgrid")
            yield Input(f"{stem}-simgrid", id="simgrid-path")
            yield Label("space toggles a box · enter saves the ticked ones · esc cancels",
                        classes="hint")
            with Horizontal(classes="buttons"):
                yield Button("Save", variant="primary", id="save")
                yield Button("Cancel", id="cancel")

    @on(Checkbox.Changed)
    def _ticked(self, event: Checkbox.Changed) -> None:
        """An unticked output's path is greyed out: what will be written is what is enabled."""
        target = {"want-model": "#model-path", "want-simgrid": "#simgrid-path"}
        if event.checkbox.id in target:
            self.query_one(target[event.checkbox.id], Input).disabled = not event.value

    def _targets(self) -> tuple[Path | None, Path | None]:
        model = (Path(self.query_one("#model-path", Input).value.strip()).expanduser()
                 if self.query_one("#want-model", Checkbox).value else None)
        simgrid = (Path(self.query_one("#simgrid-path", Input).value.strip()).expanduser()
                   if self.query_one("#want-simgrid", Checkbox).value else None)
        return model, simgrid

    @on(Input.Submitted)
    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        model_path, simgrid_dir = self._targets()
        if model_path is None and simgrid_dir is None:
            self.notify("Nothing ticked to export: tick a box with space.", severity="warning")
            return
        existing = []
        if model_path is not None and model_path.exists():
            existing.append(str(model_path))
        if simgrid_dir is not None:
            existing += [str(simgrid_dir / f) for f in modelfiles.SIMGRID_FILES
                         if (simgrid_dir / f).exists()]
        if existing:
            def answered(ok: bool | None) -> None:
                if ok:
                    self._write(model_path, simgrid_dir)

            self.app.push_screen(Confirm("Overwrite " + ", ".join(existing) + "?"), answered)
        else:
            self._write(model_path, simgrid_dir)

    @work(thread=True, exclusive=True, group="export")
    def _write(self, model_path: Path | None, simgrid_dir: Path | None) -> None:
        state = self.session.series[self.key]
        written: list[Path] = []
        model = state.model
        try:
            if model is None:
                raise UserError("no fitted model to write yet", where="export",
                                hint="wait for the fit to finish (or press r to refit), then "
                                "export again")
            if model_path is not None:
                written.append(modelfiles.save_model(model, model_path,
                                                     self.session.dataset, self.key,
                                                     validation=state.validation))
            if simgrid_dir is not None:
                written += modelfiles.export_simgrid(model, simgrid_dir)
        except (UserError, OSError) as err:
            if isinstance(err, OSError):
                err = UserError(f"cannot write: {err.strerror or err}",
                                where=str(err.filename or model_path or simgrid_dir),
                                hint="choose a writable path")
            self.app.call_from_thread(notify_error, self, err)
            return
        self.app.call_from_thread(self._done, written)

    def _done(self, written: list[Path]) -> None:
        self.app.notify("Wrote " + ", ".join(str(p) for p in written), title="Export",
                        timeout=8)
        self.dismiss(written)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
