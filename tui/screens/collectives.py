"""The collectives view: a collective-algorithm sweep ranked (``pt2pt collectives``)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from tui.collview import RANKING_HEADERS, CollectivesView
from tui.screens.common import HelpMixin
from tui.widgets.plot import Plot


class CollectivesScreen(HelpMixin, Screen[None]):
    """Per configuration the best algorithm and every algorithm's ratio to it; per algorithm
    and numproc range the share of configurations within X % of the best, with intervals."""

    help_title = "collectives view"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("escape,q", "app.pop_screen", "Back"),
    ]
    KEY_HELP: ClassVar[dict[str, str]] = {
        "upper table": "one configuration (collective, numproc, size) per row: the best "
                       "algorithm (smallest median simulated time) and each algorithm's "
                       "ratio to it",
        "plot": "the highlighted row's size: median simulated time / size against numproc, "
                "one line per algorithm (log axes), as the 2015 study draws it",
        "lower table": "per algorithm and numproc range: the share of configurations within "
                       "X % of the best [95 % bootstrap interval]",
    }

    def __init__(self, view: CollectivesView) -> None:
        super().__init__()
        self.view = view

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="coll-body"):
            yield DataTable(id="coll-ranking", cursor_type="row", zebra_stripes=True)
            yield Plot(id="coll-plot")
            yield Static(id="coll-legend")
            yield DataTable(id="coll-shares", cursor_type="row", zebra_stripes=True)
            yield Static(Text("\n".join([self.view.statistic, *self.view.lines])),
                         id="coll-notes")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"collectives: {self.view.path}"
        ranking = self.query_one("#coll-ranking", DataTable)
        ranking.add_columns(*RANKING_HEADERS)
        for row in self.view.ranking:
            ranking.add_row(*row)
        shares = self.query_one("#coll-shares", DataTable)
        shares.add_columns(*self.view.share_headers)
        for row in self.view.shares:
            shares.add_row(*row)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "coll-ranking" or event.cursor_row >= len(self.view.ranking):
            return
        row = self.view.ranking[event.cursor_row]
        spec, legend = self.view.plot(row[0], int(row[2]))
        self.query_one("#coll-plot", Plot).spec = spec
        text = Text(f"{row[0]} at {row[2]} B: time / size (s/B) against numproc  ")
        for alg, colour in legend:
            text.append(f"━ {alg}  ", style=colour)
        self.query_one("#coll-legend", Static).update(text)
