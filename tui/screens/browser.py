"""The series browser: every series of the dataset in one table, filtered as you type."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.events import Key
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from kit.core.errors import UserError
from kit.figures import bandwidth, latency
from kit.figures.score import format_score, score_of
from kit.figures.text import format_rate, format_time
from tui import loading, modelfiles, serieskey
from tui.background import in_background
from tui.screens.common import QUIT_GROUP, HelpMixin, PathPrompt, notify_error
from tui.session import Session
from tui.widgets.plot import format_bytes

COLUMNS = ("", "campaign", "tool", "transport", "placement", "op", "MPI", "samples", "sizes",
           "latency", "eff. bw", "runs", "model")
#: Shown only when some series knows where its ranks ran (placement or host pair).
PLACEMENT_COLUMN = "placement"


def columns(rows: Sequence[loading.SeriesRow]) -> tuple[str, ...]:
    """The table's columns: the placement column is left out when no row knows one."""
    if any(r.key.where for r in rows):
        return COLUMNS
    return tuple(c for c in COLUMNS if c != PLACEMENT_COLUMN)


def column_widths(labels: Sequence[str], rows: Sequence[Sequence[Text]]) -> list[int]:
    """Each column's width in cells: its label's or its widest cell's, over every row.

    Set on the columns when they are added, so that drawing never waits on the table's own
    measuring: Textual 8.2's DataTable measures new rows on its next Idle but caches drawn
    cells without their width, and a frame drawn in between (the loading cover going away)
    kept every column at its header's width. Over all rows, not the shown ones: the columns
    keep their width while the filter changes.
    """
    widths = [Text.from_markup(label).cell_len for label in labels]
    for cells in rows:
        widths = [max(w, cell.cell_len) for w, cell in zip(widths, cells, strict=True)]
    return widths


def conditions_cell(verdict: str) -> Text:
    """The runs' conditions (kit.measure.conditions): a disturbed node in red."""
    if verdict == "disturbed":
        return Text("disturbed", style="bold red")
    if verdict == "quiet":
        return Text("quiet", style="green")
    return Text("–", style="dim")


def _op_cell(key: serieskey.SeriesKey) -> str:
    """The op, with the statistic for tools that print aggregates (OSU: ``pingpong [mean]``)."""
    stat = key.get("stat")
    return key.get("op") if stat in ("raw", "") else f"{key.get('op')} [{stat}]"


def matches(row: loading.SeriesRow, query: str) -> bool:
    """Every whitespace-separated term of ``query`` occurs in some field (case-insensitive)."""
    # pairs as its label ("4 pairs", nothing for 1): a bare "1" would match every row
    words = [v for k, v in row.key.as_dict().items() if k != "pairs"]
    hay = " ".join([*words, row.key.where, row.mpi]).lower()
    return all(term in hay for term in query.lower().split())


class SeriesTable(DataTable[Text]):
    """The series list. Enter opens the highlighted series and the footer says so: DataTable's
    own Enter binding is hidden, and while the table had the focus it hid the screen's "Open"
    too, so the footer named the key only when the focus happened to be elsewhere."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Open")]


class BrowserScreen(HelpMixin, Screen[None]):
    """Series table. ``/`` (or a letter other than ``q``) starts the filter; Enter opens a series.

    ``q`` quits as in every terminal pager, unless the filter has the focus: then it is a letter
    of the query like any other. Escape clears the filter and gives the table the focus back.
    """

    help_title = "series list"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_series", "Open"),
        Binding("slash", "focus_filter", "Filter"),
        Binding("space", "mark", "Mark"),  # for compare (ctrl+g); short: the footer is full
        Binding("ctrl+g", "compare", "Compare marked"),
        Binding("ctrl+k", "cluster", "Cluster", show=False),  # in the help (?): footer full
        Binding("ctrl+o", "open_dataset", "Open dataset"),
        Binding("ctrl+a", "apps", "Apps"),
        Binding("ctrl+l", "collectives", "Collectives", show=False),  # in the help (?)
        Binding("escape", "clear_filter", "Clear filter"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "app.quit", "Quit", group=QUIT_GROUP),  # last: beside the app's ctrl+q
    ]
    KEY_HELP: ClassVar[dict[str, str]] = {
        "/ or a letter": "filters the table (all words must match campaign/tool/transport/"
                         "placement/hosts/op/MPI)",
        "up/down": "move in the table (also while typing in the filter)",
        "space": "marks the highlighted series for compare; ctrl+g compares the marked ones",
        "ctrl+k": "the cluster view of the highlighted series' campaign (a campaign over at "
                  "least 3 node pairs): node against node, slow links and nodes marked, Enter "
                  "opens a pair",
        "ctrl+l": "the collectives view of the sweep given with --collectives DIR: best "
                  "algorithm per (numproc, size), shares within X % of the best with intervals",
        "latency": latency.DEFINITION,
        "eff. bw": bandwidth.DEFINITION,
        "model": "the score (held-out CRPS / floor) of the series' model when it was "
                 "validated, else whether it has one",
    }

    def __init__(self, session: Session, dataset: Path | None = None,
                 models: Sequence[Path] = ()) -> None:
        super().__init__()
        self.session = session
        self._start_dataset = dataset
        self._start_models = list(models)
        self.marked: set[serieskey.SeriesKey] = set()
        self.shown: list[loading.SeriesRow] = []
        self._columns: tuple[str, ...] = COLUMNS
        self._widths: list[int] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="browser"):
            # No select-on-focus: a letter typed in the table focuses the filter and must not
            # be replaced by the next one.
            yield Input(placeholder="/ to filter series (esc clears) · q quits", id="filter",
                        select_on_focus=False)
            yield SeriesTable(id="series", cursor_type="row", zebra_stripes=True)
            yield Static("", id="browser-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        self._columns = columns([])
        table.add_columns(*self._columns)
        table.focus()
        if self._start_models:
            self._status("Loading models …")
            self.load_model_files(self._start_models)  # then opens the dataset
        elif self._start_dataset is not None:
            self.open_dataset(self._start_dataset)
        else:
            self._status("No dataset open: press ctrl+o to open one.")

    # ------------------------------------------------------------------ loading

    def open_dataset(self, path: Path) -> None:
        self.query_one(DataTable).loading = True
        self._status(f"Opening {path} …")
        self._load_rows(path)

    @work(exclusive=True, group="open-dataset")
    async def _load_rows(self, path: Path) -> None:
        try:
            rows = await in_background(loading.series_rows, path)
        except UserError as err:
            self._load_failed(path, err)
            return
        self._rows_loaded(path, rows)

    def _load_failed(self, path: Path, err: UserError) -> None:
        table = self.query_one(DataTable)
        table.loading = False
        table.focus()
        notify_error(self, err)
        if self.session.dataset is None:
            self._status(f"Could not open {path}: press ctrl+o to open another dataset.")
        else:
            self._status(f"Still showing {self.session.dataset}.")

    def _rows_loaded(self, path: Path, rows: list[loading.SeriesRow]) -> None:
        if self.session.dataset != path:
            self.session.series.clear()
            self.marked.clear()
        self.session.dataset = path
        self.session.rows = rows
        for message in self.session.match_models():
            self.notify(message, title="Model", severity="warning", timeout=12)
        table = self.query_one(DataTable)
        table.loading = False
        # The loading overlay took the focus away and is removed on the next refresh:
        # focusing now can lose to it on a slow machine.
        self.call_after_refresh(table.focus)
        self.refresh_table()
        self.sub_title = path.name  # the name only: full paths are long and machine-specific
        if len(rows) == 1:
            self._open(rows[0].key)

    @work(exclusive=True, group="load-model")
    async def load_model_files(self, paths: list[Path]) -> None:
        """Load the models given on the command line, then open the dataset.

        Loading first lets the rows be matched to their models the moment they appear. A bad
        file is a notification naming it; the other models and the dataset still open.
        """
        loaded, errors = await in_background(modelfiles.load_models, paths)
        for err in errors:
            notify_error(self, err)
        self.session.model_files = loaded
        # `pt2pt tui --model M.json` alone: open the dataset the models were fitted on.
        origin = next((m.dataset for m in loaded
                       if m.dataset is not None and m.dataset.is_dir()), None)
        target = self._start_dataset or origin
        if target is not None:
            self.open_dataset(target)
        else:
            self._status("No dataset open: press ctrl+o to open one.")

    # ------------------------------------------------------------------ table

    def refresh_table(self) -> None:
        table = self.query_one(DataTable)
        query = self.query_one("#filter", Input).value
        current = self._highlighted()
        wanted = columns(self.session.rows)
        cells = {r.key: self._cells(r, wanted) for r in self.session.rows}
        widths = column_widths(wanted, list(cells.values()))
        if (wanted, widths) != (self._columns, self._widths):
            table.clear(columns=True)
            for label, width in zip(wanted, widths, strict=True):
                table.add_column(label, width=width)
            self._columns, self._widths = wanted, widths
        else:
            table.clear()
        self.shown = [r for r in self.session.rows if matches(r, query)]
        for row in self.shown:
            table.add_row(*cells[row.key], key="|".join(row.key.values))
        if current is not None and current in [r.key for r in self.shown]:
            table.move_cursor(row=[r.key for r in self.shown].index(current))
        shown, total = len(self.shown), len(self.session.rows)
        loaded = len(self.session.file_models)
        self._status(f"{shown} of {total} series"
                     + (f", {loaded} with a model from file" if loaded else "")
                     + (f", {len(self.marked)} marked" if self.marked else ""))

    def _cells(self, row: loading.SeriesRow, shown: tuple[str, ...]) -> list[Text]:
        """The row's cells for the ``shown`` columns. Text, never markup: a dataset's names
        and an OSU op's ``[mean]`` are shown as they are."""
        cells = self._all_cells(row)
        if PLACEMENT_COLUMN in shown:
            return cells
        del cells[COLUMNS.index(PLACEMENT_COLUMN)]
        return cells

    def _all_cells(self, row: loading.SeriesRow) -> list[Text]:
        fitted = self.session.fitted(row.key)
        return [
            Text("●", style="bold magenta") if row.key in self.marked else Text(" "),
            Text(row.key.get("campaign")),
            Text(row.key.get("tool")),
            Text(row.key.get("transport")),
            Text(row.key.where or "–"),
            Text(_op_cell(row.key)),
            Text(row.mpi or "–"),
            Text(f"{row.n_samples:,}", justify="right"),
            Text(f"{format_bytes(row.size_min)}–{format_bytes(row.size_max)}"),
            Text(format_time(row.figures.latency.value), justify="right"),
            Text(format_rate(row.figures.bandwidth.value), justify="right"),
            conditions_cell(row.conditions),
            self._model_cell(row, fitted),
        ]

    def _model_cell(self, row: loading.SeriesRow, fitted: bool) -> Text:
        """The score of the series' model (kit.figures), ``yes`` without a validation."""
        if not fitted:
            return Text("no", style="dim")
        validation = self.session.validation_for(row.key)
        score = score_of(validation)
        return Text(format_score(score) if score else "yes", style="green")

    def _highlighted(self) -> serieskey.SeriesKey | None:
        table = self.query_one(DataTable)
        if not self.shown or table.cursor_row is None:
            return None
        if 0 <= table.cursor_row < len(self.shown):
            return self.shown[table.cursor_row].key
        return None

    def _status(self, text: str) -> None:
        self.query_one("#browser-status", Static).update(text)

    def on_screen_resume(self) -> None:
        # Coming back from a series: its "fitted" flag may have changed.
        if self.session.rows:
            self.refresh_table()

    # ------------------------------------------------------------------ events / actions

    @on(Input.Changed, "#filter")
    def _filter_changed(self) -> None:
        self.refresh_table()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one(DataTable).focus()
        self.action_open_series()

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open_series()

    def on_key(self, event: Key) -> None:
        table = self.query_one(DataTable)
        flt = self.query_one("#filter", Input)
        if self.focused is flt and event.key in ("up", "down"):
            (table.action_cursor_up if event.key == "up" else table.action_cursor_down)()
            event.stop()
        elif (self.focused is table and event.is_printable and event.character
              and event.character not in " ?q/"):
            flt.focus()
            flt.value += event.character
            flt.cursor_position = len(flt.value)
            event.stop()

    def action_open_series(self) -> None:
        key = self._highlighted()
        if key is None:
            self.notify("No series to open.", severity="warning")
            return
        self._open(key)

    def _open(self, key: serieskey.SeriesKey) -> None:
        from tui.screens.series import SeriesScreen

        if key.get("op") == "app":  # runs of a program: not fitted
            self.action_apps()
            return
        self.app.push_screen(SeriesScreen(self.session, key))

    def _push_view(self, path: Path | None, missing: str, load: Callable[[Path], Any],
                   screen: Callable[[Any], Screen[None]]) -> None:
        """Open a result's view: say how to make it when none was given, its error if bad."""
        if path is None:
            self.notify(missing, severity="warning")
            return
        try:
            view = load(path)
        except UserError as err:
            notify_error(self, err)
            return
        self.app.push_screen(screen(view))

    def action_apps(self) -> None:
        from tui import appsview
        from tui.screens.apps import AppsScreen

        self._push_view(self.session.apps, "No applications result: run pt2pt predict-app "
                        "DATASET --platform DIR -o FILE, then pt2pt tui DATASET --apps FILE.",
                        appsview.load, AppsScreen)

    def action_collectives(self) -> None:
        from tui import collview
        from tui.screens.collectives import CollectivesScreen

        self._push_view(self.session.collectives, "No collectives sweep: run pt2pt collectives "
                        "sweep OUT ..., then pt2pt tui --collectives OUT.", collview.load,
                        CollectivesScreen)

    def action_mark(self) -> None:
        key = self._highlighted()
        if key is None:
            return
        self.marked.symmetric_difference_update({key})
        self.refresh_table()

    def action_compare(self) -> None:
        from tui.screens.compare import CompareScreen

        keys = [r.key for r in self.shown if r.key in self.marked] or \
            [r.key for r in self.shown][:6]
        if len(keys) < 2:
            self.notify("Mark at least two series with space to compare them.",
                        severity="warning")
            return
        self.app.push_screen(CompareScreen(self.session, keys))

    def action_cluster(self) -> None:
        from tui import clusterview
        from tui.screens.cluster import ClusterScreen

        key = self._highlighted()
        if key is None or not clusterview.is_cluster_member(
                key, [r.key for r in self.session.rows]):
            self.notify("The cluster view needs an inter-node series of a campaign that "
                        "measured at least 3 node pairs (pairs: {all-pairs: N}).",
                        severity="warning")
            return
        self.app.push_screen(ClusterScreen(self.session, key))

    def action_open_dataset(self) -> None:
        def chosen(path: str | None) -> None:
            if path:
                self.open_dataset(Path(path).expanduser())

        self.app.push_screen(PathPrompt("Open dataset directory",
                                        str(self.session.dataset or "")), chosen)

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        flt = self.query_one("#filter", Input)
        flt.value = ""
        self.query_one(DataTable).focus()
