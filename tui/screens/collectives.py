"""The collectives view: a collective-algorithm sweep ranked (``pt2pt collectives``)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
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
        Binding("x", "next_threshold", "Within X %"),
        Binding("escape,q", "app.pop_screen", "Back"),
    ]
    KEY_HELP: ClassVar[dict[str, str]] = {
        "upper table": "one configuration (collective, numproc, size) per row: the best "
                       "algorithm (smallest median simulated time) and each algorithm's "
                       "ratio to it",
        "plot": "the highlighted row's size: median simulated time / size against numproc, "
                "one line per algorithm (log axes), as the 2015 study draws it",
        "share chart": "per numproc range, each algorithm's share of configurations within "
                       "X % of the best (●) with its 95 % interval (━) on a 0-1 axis; ┄ the "
                       "bounds over every configuration where some were left out (an "
                       "algorithm did not complete: no simulated time); x: next X",
        "lower table": "per algorithm and numproc range: the share of configurations within "
                       "X % of the best [95 % bootstrap interval]",
    }

    def __init__(self, view: CollectivesView) -> None:
        super().__init__()
        self.view = view
        self.threshold = 0  # index into view.thresholds: the chart's X
        self.collective = view.ranking[0][0] if view.ranking else ""

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="coll-body"):
            yield DataTable(id="coll-ranking", cursor_type="row", zebra_stripes=True)
            with Horizontal(id="coll-figures"):
                with Vertical(id="coll-times"):
                    yield Plot(id="coll-plot")
                    yield Static(id="coll-legend")
                yield Static(id="coll-chart")
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
        self._draw_chart()

    def _draw_chart(self) -> None:
        xs = self.view.thresholds
        if xs:
            self.query_one("#coll-chart", Static).update(
                self.view.share_chart(self.collective, xs[self.threshold % len(xs)]))

    def action_next_threshold(self) -> None:
        self.threshold += 1
        self._draw_chart()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "coll-ranking" or event.cursor_row >= len(self.view.ranking):
            return
        row = self.view.ranking[event.cursor_row]
        if row[0] != self.collective:
            self.collective = row[0]
            self._draw_chart()
        spec, legend = self.view.plot(row[0], int(row[2]))
        self.query_one("#coll-plot", Plot).spec = spec
        text = Text(f"{row[0]} at {row[2]} B: time / size (s/B) against numproc  ")
        for alg, colour in legend:
            text.append(f"━ {alg}  ", style=colour)
        self.query_one("#coll-legend", Static).update(text)
