"""The pt2pt explorer application: a thin shell that owns the session and the screens.

Everything a screen shows is computed in the adapter over ``kit`` (:mod:`tui.data` lists it); this
module only wires start-up arguments to the first screen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from tui.datawarnings import notify_data_warnings
from tui.screens.browser import BrowserScreen
from tui.screens.common import QUIT_GROUP
from tui.session import Session


class ExplorerApp(App[int]):
    """``pt2pt tui``: browse series, edit regimes, inspect noise, compare, export."""

    CSS_PATH = "app.tcss"
    TITLE = "pt2pt explorer"
    BINDINGS: ClassVar[list[BindingType]] = [
        # Every screen shows it and it works even in a text box (priority).
        Binding("ctrl+q", "quit", "Quit", priority=True, group=QUIT_GROUP)]

    def __init__(self, dataset: str | Path | None = None,
                 model: str | Path | Sequence[str | Path] | None = None,
                 models: Sequence[str | Path] = (), apps: str | Path | None = None,
                 collectives: str | Path | None = None) -> None:
        """``model``: one model file or several; ``models``: more files or directories of them.

        Both end up in one list: each model is matched to its series when the dataset opens.
        """
        super().__init__()
        self.session = Session(apps=Path(apps) if apps else None,
                               collectives=Path(collectives) if collectives else None)
        self._start_dataset = Path(dataset) if dataset else None
        given = [] if model is None else [model] if isinstance(model, str | Path) else list(model)
        self._start_models = [Path(m) for m in (*given, *models)]
        self._restore_warnings: Callable[[], None] = lambda: None

    def on_mount(self) -> None:
        self._restore_warnings = notify_data_warnings(self)
        self.push_screen(BrowserScreen(self.session, self._start_dataset, self._start_models))

    def on_unmount(self) -> None:
        self._restore_warnings()


def run(dataset: str | Path | None, model: str | Path | Sequence[str | Path] | None = None,
        models: Sequence[str | Path] = (), apps: str | Path | None = None,
        collectives: str | Path | None = None) -> int:
    """Run the explorer in the terminal; returns the process exit code."""
    app = ExplorerApp(dataset, model, models, apps, collectives)
    app.run()
    return int(app.return_code or 0)
