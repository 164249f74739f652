"""The cluster view: a multi-pair campaign's pair matrix; Enter opens a cell's series."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from kit.core.errors import UserError
from tui import clusterview, serieskey
from tui.background import in_background
from tui.screens.common import HelpMixin, notify_error
from tui.session import Session


class MatrixTable(DataTable[Text]):
    """The matrix; Enter opens the pair and the footer says so (DataTable's own Enter
    binding would hide the screen's)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Open pair")]


class ClusterScreen(HelpMixin, Screen[None]):
    """Node against node, one figure at a time; the cell under the cursor explained below."""

    help_title = "cluster view"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_pair", "Open pair"),
        Binding("f", "figure", "Next figure"),
        Binding("question_mark", "help", "Help"),
        Binding("escape,q", "app.pop_screen", "Back"),
    ]
    KEY_HELP: ClassVar[dict[str, str]] = {
        "arrows": "move between cells; the panel below says the pair's value, the typical "
                  "pair's and whether it is flagged (pt2pt cluster's test)",
        "colour": "worse than the typical pair in red, better in blue (clipped at ±50 %); "
                  "× a flagged link, ! a flagged node",
        **{f"f: {name}": what for name, what in clusterview.MEANING.items()},
    }

    def __init__(self, session: Session, key: serieskey.SeriesKey) -> None:
        super().__init__()
        self.session = session
        self.key = key
        self.state: clusterview.ClusterState | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="cluster-body"):
            yield Static("", id="cluster-summary")
            yield MatrixTable(id="matrix", cursor_type="cell", show_row_labels=False)
            yield Static("", id="cell-info")
        yield Footer()

    def on_mount(self) -> None:
        selector = clusterview.cluster_of(self.key)
        self.sub_title = ", ".join(f"{k}={v}" for k, v in selector.items() if k != "stat")
        self.query_one("#cluster-body").loading = True
        self._load()

    @work(exclusive=True, group="cluster")
    async def _load(self) -> None:
        try:
            state = await in_background(clusterview.load_cluster,
                                        self.session.dataset, self.key)
        except UserError as err:
            self.query_one("#cluster-body").loading = False
            notify_error(self, err)
            self.app.pop_screen()
            return
        self.state = state
        self.query_one("#cluster-body").loading = False
        self._draw()

    def _draw(self) -> None:
        state = self.state
        if state is None:
            return
        matrix = state.matrix()
        summary = self.query_one("#cluster-summary", Static)
        summary.update(Text("\n".join([matrix.title + f" (typical pair "
                                       f"{matrix.cell_text_typical()})", *state.lines[1:]])))
        table = self.query_one("#matrix", DataTable)
        row, col = table.cursor_coordinate
        table.clear(columns=True)
        table.add_column("", key="node")
        for node in matrix.nodes:
            table.add_column(node, key=node)
        for cells in clusterview.cells(matrix):
            table.add_row(*cells)
        table.move_cursor(row=min(row, len(matrix.nodes) - 1),
                          column=max(1, min(col, len(matrix.nodes))))
        table.focus()
        self._explain()

    def _cell(self) -> tuple[int, int]:
        coord = self.query_one("#matrix", DataTable).cursor_coordinate
        return coord.row, coord.column - 1

    def _explain(self) -> None:
        if self.state is None:
            return
        i, j = self._cell()
        text = "" if j < 0 else clusterview.cell_info(self.state, i, j)
        self.query_one("#cell-info", Static).update(Text(text))

    @on(DataTable.CellHighlighted)
    def _moved(self) -> None:
        self._explain()

    @on(DataTable.CellSelected)
    def _selected(self) -> None:
        self.action_open_pair()

    def action_figure(self) -> None:
        if self.state is not None:
            self.state.next_figure()
            self._draw()

    def action_open_pair(self) -> None:
        if self.state is None:
            return
        i, j = self._cell()
        if j < 0 or i == j:
            self.notify("Pick a cell of two different nodes.", severity="warning")
            return
        key = clusterview.series_of(self.state, i, j, [r.key for r in self.session.rows])
        if key is None:
            self.notify("This pair was not measured.", severity="warning")
            return
        from tui.screens.series import SeriesScreen

        self.app.push_screen(SeriesScreen(self.session, key))
