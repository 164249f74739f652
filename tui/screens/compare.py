"""The compare view: several series overlaid, and which is best within X % per size range."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from kit.analyses.diff import DiffResult
from kit.core.errors import UserError
from tui import comparing, figures, loading, serieskey
from tui.background import in_background
from tui.screens.common import HelpMixin, notify_error
from tui.session import SeriesState, Session
from tui.widgets.plot import Plot, format_bytes, format_seconds

TOLERANCES = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0)


class CompareScreen(HelpMixin, Screen[None]):
    """Medians and 5-95 % bands of the marked series; the best-within-X % table beside."""

    help_title = "compare view"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "tolerance(1)", "Wider X %"),
        Binding("minus", "tolerance(-1)", "Narrower X %"),
        Binding("d", "diff", "Diff B vs A"),
        Binding("question_mark", "help", "Help"),
        Binding("escape,q", "app.pop_screen", "Back"),
    ]
    KEY_HELP: ClassVar[dict[str, str]] = {
        "table": "per size range: the fastest series (median) and all within X % of it",
        "d": "with two series: did B change against A? per size band the change of p05/p50/"
             "p95 with 95 % family-wise intervals (pt2pt diff); changed bands highlighted; "
             "d again goes back to the best-within table"}

    def __init__(self, session: Session, keys: list[serieskey.SeriesKey]) -> None:
        super().__init__()
        self.session = session
        self.keys = keys
        self.tol_index = 2
        self.states: list[SeriesState] = []
        self.showing_diff = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="compare-body"):
            yield Plot(id="compare-plot")
            with Vertical(id="compare-panel"):
                yield Static("", id="legend")
                yield DataTable(id="best", cursor_type="none")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"{len(self.keys)} series"
        self.query_one("#compare-body").loading = True
        self._load()

    @work(exclusive=True, group="compare")
    async def _load(self) -> None:
        states = []
        try:
            for key in self.keys:
                state = self.session.series.get(key)
                if state is None:
                    state = await in_background(self._read, key)
                states.append(state)
        except UserError as err:
            self._failed(err)
            return
        self._loaded(states)

    def _read(self, key: serieskey.SeriesKey) -> SeriesState:
        samples = loading.load_samples(self.session.dataset, key,  # type: ignore[arg-type]
                                       [r.key for r in self.session.rows])
        return SeriesState.of(samples)

    def _failed(self, err: UserError) -> None:
        notify_error(self, err)
        if self.is_attached:
            self.dismiss()

    def _loaded(self, states: list[SeriesState]) -> None:
        for key, state in zip(self.keys, states, strict=True):
            self.session.series.setdefault(key, state)
        if not self.is_attached:
            return
        self.states = states
        self.query_one("#compare-body").loading = False
        self.query_one(Plot).spec = figures.compare_spec([s.binned for s in states])
        self._table()

    def _legend(self, shares: list[comparing.Share], tol: float) -> None:
        by_index = {s.index: s for s in shares}
        legend = Text()
        for i, key in enumerate(self.keys):
            colour = figures.SERIES_COLOURS[i % len(figures.SERIES_COLOURS)]
            legend.append(f"■ {chr(65 + i)} ", f"bold {colour}").append(key.label)
            share = by_index.get(i)
            if share is not None and share.n_bins:
                legend.append(f"  within {tol:g} % in {share.n_within}/{share.n_bins} bins",
                              "dim")
            legend.append("\n")
        self.query_one("#legend", Static).update(legend)

    def _table(self) -> None:
        tol = TOLERANCES[self.tol_index]
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_columns("sizes", "best", "median", f"within {tol:g} %")
        try:
            rows, shares = comparing.best_within([s.samples for s in self.states], tol)
        except UserError as err:
            notify_error(self, err)
            return
        self._legend(shares, tol)
        for row in rows:
            table.add_row(f"{format_bytes(row.size_lo)}–{format_bytes(row.size_hi)}",
                          chr(65 + row.best), format_seconds(row.best_median),
                          " ".join(chr(65 + i) for i in row.within))

    def action_tolerance(self, step: int) -> None:
        self.tol_index = min(max(self.tol_index + step, 0), len(TOLERANCES) - 1)
        if self.states and not self.showing_diff:
            self._table()

    def action_diff(self) -> None:
        if not self.states:
            return
        if self.showing_diff:
            self.showing_diff = False
            self._table()
            return
        if len(self.states) != 2:
            self.notify("diff compares exactly two series: mark two in the list (space)",
                        severity="warning")
            return
        self.query_one("#compare-body").loading = True
        self._run_diff()

    @work(exclusive=True, group="diff")
    async def _run_diff(self) -> None:
        from tui.diffing import diff_series

        a, b = (s.samples for s in self.states)
        try:
            result = await in_background(diff_series, a, b, self.session.dataset)
        except UserError as err:
            self.query_one("#compare-body").loading = False
            notify_error(self, err)
            return
        self._show_diff(result)

    def _show_diff(self, result: DiffResult) -> None:
        from tui.diffing import rows

        if not self.is_attached:
            return
        self.query_one("#compare-body").loading = False
        self.showing_diff = True
        legend = Text()
        legend.append("B against A: ", "bold").append(
            result.verdict, "bold yellow" if result.withheld else
            "bold red" if result.changed else "green")
        legend.append(f"\n95 % family-wise intervals over {result.settings['tests']} tests; "
                      "* = between two positions of a moved break", "dim")
        self.query_one("#legend", Static).update(legend)
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_columns("sizes", "stat", "change", "95 % interval", "")
        for row in rows(result):
            style = ("bold red" if row.slower else "bold green") if row.changed else ""
            table.add_row(row.sizes, row.stat, Text(row.change, style),
                          Text(row.interval, style), Text("changed" if row.changed else "",
                                                          style))
