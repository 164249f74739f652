"""The applications view: each program's simulated vs real runs (``pt2pt predict-app``)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from tui.appsview import AppsView
from tui.screens.common import HelpMixin


class AppsScreen(HelpMixin, Screen[None]):
    """Per program: the calibrated platform's median ratio with its interval, the real
    median's level among the simulated runs, and the two baselines beside it."""

    help_title = "applications view"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("escape,q", "app.pop_screen", "Back"),
    ]
    KEY_HELP: ClassVar[dict[str, str]] = {
        "table": "one program (arguments, ranks) per row; ratio = simulated / real median "
                 "[95 % interval]; level = share of simulated runs at or below the real "
                 "median, in/out of the simulated p05-p95; baselines: nominal (no factors) "
                 "and robust Hockney, with which is closer beyond the noise"}

    def __init__(self, view: AppsView) -> None:
        super().__init__()
        self.view = view

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="apps-body"):
            yield DataTable(id="apps-table", cursor_type="row", zebra_stripes=True)
            yield Static(Text("\n".join([*self.view.lines, self.view.statistic])),
                         id="apps-notes")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"applications: {self.view.path.name}"
        table = self.query_one("#apps-table", DataTable)
        table.add_columns(*self.view.headers)
        for row in self.view.rows:
            table.add_row(*row)
