"""The series view: the sample cloud, the regimes the engine found, and the user's edits.

Edits (move/add/delete a breakpoint, change a family) change the working copy in the
session at once and schedule a refit shortly after the last key press, so the user sees
the consequence without asking; ``r`` refits immediately. Fits run in a background thread and
a newer edit supersedes an older fit (results of stale fits are dropped).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Header, LoadingIndicator, Static

from kit.core.errors import UserError
from tui import drawcache, figures, fitting, loading, serieskey
from tui.background import in_background
from tui.screens.common import HelpMixin, notify_error
from tui.session import SeriesState, Session
from tui.widgets.plot import Plot, format_bytes

if TYPE_CHECKING:
    from kit.model.estimator import RegimeModel

COARSE_STEP = 2 ** 0.5
REFIT_DELAY_S = 0.6
VALIDATE_DELAY_S = 1.0  # validation refits a copy: wait until the user stops editing


def _fmt_params(params: Mapping[str, float | list[float]]) -> str:
    def one(v: float | list[float]) -> str:
        return "[" + " ".join(f"{x:.3g}" for x in v) + "]" if isinstance(v, list) else f"{v:.3g}"

    return ", ".join(f"{k}={one(v)}" for k, v in params.items()) or "–"


def _ellipsize(text: str, width: int) -> str:
    """Keep both ends of a long file name (series names sit at both ends of demo names)."""
    if len(text) <= width:
        return text
    half = (width - 1) // 2
    return text[:half] + "…" + text[len(text) - (width - 1 - half):]


def _range(lo: float, hi: float) -> str:
    hi_s = "∞" if not math.isfinite(hi) else format_bytes(hi)
    return f"[{format_bytes(lo)}, {hi_s})"


_VALIDATION_ROWS = (
    ("score", "crps_over_floor", lambda x: f"{x:.2f}"),
    ("best baseline", "best_baseline_crps_over_floor", lambda x: f"{x:.2f}"),
    ("median error", "median_err", lambda x: f"{x * 100:.1f} %"),
    ("p5-p95 coverage", "coverage", lambda x: f"{x * 100:.0f} % (90 ideal)"),
    ("sizes scored", "n_sizes", lambda x: f"{x:.0f}"),
)


def _intervals(text: Text, intervals: dict[str, Any] | None, k: int) -> None:
    """The regime's bootstrap intervals (saved models carry them; a TUI refit does not)."""
    from kit.model.uncertainty import format_interval

    if not intervals or k >= len(intervals.get("regimes", [])):
        return
    reg = intervals["regimes"][k]
    text.append(f"\n{int(float(intervals['level']) * 100)} % intervals ", "bold")
    text.append(f"({intervals['resample']} bootstrap)\n", "dim")
    for name, iv in reg.get("params", {}).items():
        text.append(f"  {name:<14}").append(format_interval(iv) + "\n")
    for name, iv in reg.get("noise", {}).items():
        text.append(f"  noise {name:<8}").append(format_interval(iv, "{:.3g}".format) + "\n")
    for c, iv in enumerate(reg.get("band_shares", [])):
        text.append(f"  band {c + 1} share  ").append(
            format_interval(iv, "{:.2f}".format) + "\n")
    bps = intervals.get("breakpoints", [])
    for b in (k - 1, k):
        if 0 <= b < len(bps):
            text.append(f"  breakpoint {b + 1:<3} ").append(
                format_interval(bps[b], format_bytes) + "\n")


_MOVE = Binding.Group("Move break")
_EDIT = Binding.Group("Add/del break")


class SeriesScreen(HelpMixin, Screen[None]):
    """Log-log cloud of one series with its fitted regimes; side panel with the numbers."""

    help_title = "series view"
    BINDINGS: ClassVar[list[BindingType]] = [
        # The footer has room for about 12 entries at 120 columns: arrows are left to the help,
        # the breakpoint edits share two groups, and ctrl+q (the app's) must still fit.
        Binding("left", "select_bp(-1)", "Prev breakpoint", show=False),
        Binding("right", "select_bp(1)", "Next breakpoint", show=False),
        Binding("shift+left,h", "move_bp(-1)", "Move breakpoint down", key_display="h",
                group=_MOVE),
        Binding("shift+right,l", "move_bp(1)", "Move breakpoint up", key_display="l",
                group=_MOVE),
        Binding("H", "move_bp(-4)", "Move breakpoint down ½ octave", show=False),
        Binding("L", "move_bp(4)", "Move breakpoint up ½ octave", show=False),
        Binding("a", "add_bp", "Add breakpoint", group=_EDIT),
        Binding("d,delete", "delete_bp", "Delete breakpoint", group=_EDIT),
        Binding("up", "select_regime(-1)", "Prev regime", show=False),
        Binding("down", "select_regime(1)", "Next regime", show=False),
        Binding("f", "cycle_family", "Family"),
        Binding("r", "refit", "Refit"),
        Binding("R", "auto_fit", "Automatic fit", show=False),
        Binding("m", "toggle_mode", "Raw/median"),
        Binding("n", "noise", "Noise"),
        Binding("e", "export", "Export"),
        Binding("question_mark", "help", "Help"),
        Binding("q,escape", "app.pop_screen", "Back"),
    ]
    KEY_HELP: ClassVar[dict[str, str]] = {
        "regime colours": "samples, curves and the strip under the x axis share the regime colour",
        "▒ in the strip": "overlap window where both neighbouring regimes occur",
        "dotted lines": "raw view: 1 % / 99 % per size bin; median view: 5/25/75/95 % bands",
    }

    def __init__(self, session: Session, key: serieskey.SeriesKey) -> None:
        super().__init__()
        self.session = session
        self.key = key
        self.mode = "raw"
        self.sel_bp: int | None = None
        self.sel_regime = 0
        self._generation = 0
        self._refit_timer: Timer | None = None
        self._validate_timer: Timer | None = None
        self.validating = False
        self.fitting = False
        self.preview = False  # the model shown is a quick preview; the full fit is running

    @property
    def busy(self) -> bool:
        """Work is under way or scheduled (tests and benchmarks wait for this to clear)."""
        return (self.state is None or self.fitting or self.validating
                or self._refit_timer is not None or self._validate_timer is not None)

    @property
    def state(self) -> SeriesState | None:
        return self.session.series.get(self.key)

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="series-body"):
            yield Plot(id="plot")
            with Vertical(id="panel"):
                with Horizontal(id="panel-head"):
                    yield Static("", id="model-status")
                    yield LoadingIndicator(id="fit-busy")
                regimes: DataTable[Any] = DataTable(id="regimes", cursor_type="row")
                regimes.can_focus = False  # arrows belong to the plot (breakpoints, regimes)
                yield regimes
                yield Static("", id="regime-detail")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = self.key.label
        self.query_one("#fit-busy").display = False
        table = self.query_one("#regimes", DataTable)
        table.add_columns("#", "range", "family", "noise")
        self.query_one(Plot).focus()
        if self.state is None:
            self.query_one("#plot").loading = True
            self._load()
        else:
            self._start_from(self.state)

    # ------------------------------------------------------------------ workers

    def _gone(self) -> bool:
        """Whether the user left this screen while a worker ran: detached, or being taken
        down (its widgets already removed, so querying them would raise)."""
        return not self.is_attached or not self.query("#fit-busy")

    @work(exclusive=True, group="load-series")
    async def _load(self) -> None:
        """Draw the series from its stored drawing summaries first, or from a preview of a
        large series' rows (tui.drawcache.first_plot), then read its samples (for the fit)
        without holding the plot back."""
        try:
            stamp, cached = await in_background(self._read_cached)
            if cached is not None and not self._gone() and self.state is None:
                self._preview(cached)
            state = await in_background(self._read, stamp, cached)
        except UserError as err:
            self._load_failed(err)
            return
        self._loaded(state)

    def _read_cached(self) -> tuple[str | None, drawcache.Cached | None]:
        row = self.session.row_for(self.key)
        return drawcache.first_plot(self.session.dataset,  # type: ignore[arg-type]
                                    self.key, row.n_samples if row is not None else None)

    def _read(self, stamp: str | None, cached: drawcache.Cached | None) -> SeriesState:
        samples = loading.load_samples(self.session.dataset,  # type: ignore[arg-type]
                                       self.key, [r.key for r in self.session.rows])
        reported = loading.reported_noise(self.session.dataset, self.key)  # type: ignore[arg-type]
        if cached is not None and not cached.preview_step and cached.n_samples == len(samples):
            return SeriesState(samples, cached.median, cached.raw, reported_noise=reported)
        state = SeriesState.of(samples, reported)
        if stamp is not None:
            drawcache.store(self.session.dataset, self.key, stamp,  # type: ignore[arg-type]
                            state.raw_binned or state.binned, state.binned, len(samples))
        return state

    def _preview(self, cached: drawcache.Cached) -> None:
        """The plot from the stored summaries while the samples load (nothing to edit yet)."""
        self.query_one("#plot").loading = False
        binned = cached.raw if self.mode == "raw" else cached.median
        self.query_one(Plot).spec = figures.series_spec(binned, None, [], None, self.mode)
        what, reading = cached.describe()
        self.query_one("#model-status", Static).update(Text.assemble(
            (what, "bold"), f" · {self.mode} view\n", (reading, "yellow")))

    def _load_failed(self, err: UserError) -> None:
        notify_error(self, err)
        if self._gone():
            return
        self.query_one("#plot").loading = False
        self.dismiss()

    def _loaded(self, state: SeriesState) -> None:
        self.session.series[self.key] = state  # kept even if the user already left
        if self._gone():
            return
        self.query_one("#plot").loading = False
        self._start_from(state)

    def _start_from(self, state: SeriesState) -> None:
        """Show the series; fit it unless a model is known (kept, or given with --model)."""
        file_model = self.session.file_model_for(self.key)
        if state.model is not None:
            self.redraw()
        elif file_model is not None:
            # shown as saved, with the file's validation: no refit
            self._adopt(file_model.model, source=file_model.name,
                        validation=file_model.validation, intervals=file_model.intervals)
            # Once more after the table has measured its rows: a single fill can leave the
            # regimes table's header at its empty widths (a fit redraws several times anyway).
            self.call_after_refresh(self.redraw)
        else:
            self.redraw()
            self.start_fit(auto=True)

    def start_fit(self, *, auto: bool = False) -> None:
        state = self.state
        if state is None or self._gone():
            return
        for timer in (self._refit_timer, self._validate_timer):
            if timer is not None:
                timer.stop()
        self._refit_timer = self._validate_timer = None
        self.workers.cancel_group(self, "validate")  # it would score a superseded model
        self.validating = False
        self._generation += 1
        self.fitting = True
        self.query_one("#fit-busy").display = True
        bps = None if auto else list(state.breakpoints)
        fams = None if auto else list(state.families)
        self._fit(self._generation, state, bps, fams)

    @work(exclusive=True, group="fit")
    async def _fit(self, generation: int, state: SeriesState, bps: list[float] | None,
                   fams: list[str | None] | None) -> None:
        """Large series: a preview fit first (shown at once), then the full fit.

        A newer fit cancels this worker (exclusive group); the abandoned computation ends
        in its daemon thread and its result is dropped.
        """
        try:
            if len(state.samples) >= fitting.PREVIEW_MIN_SAMPLES:
                preview = await in_background(fitting.fit, state.samples, bps, fams, preview=True)
                self._fitted(generation, preview, False)
            model = await in_background(fitting.fit, state.samples, bps, fams)
        except UserError as err:
            self._fit_failed(generation, err)
            return
        self._fitted(generation, model, True)

    def _fit_failed(self, generation: int, err: UserError) -> None:
        if generation != self._generation or self._gone():
            return
        self.fitting = False
        self.query_one("#fit-busy").display = False
        notify_error(self, err)
        self.redraw()

    def _fitted(self, generation: int, model: RegimeModel, final: bool = True) -> None:
        if generation != self._generation or self._gone():
            return  # a newer edit is being fitted, or the user left this series
        self.fitting = not final
        self.preview = not final
        self.query_one("#fit-busy").display = not final
        self._adopt(model)
        if final:
            self._validate_timer = self.set_timer(
                VALIDATE_DELAY_S, lambda: self._start_validation(generation, model))

    def _start_validation(self, generation: int, model: RegimeModel) -> None:
        self._validate_timer = None
        state = self.state
        if generation != self._generation or state is None:
            return
        self.validating = True
        self._validate(generation, model, state)

    @work(exclusive=True, group="validate")
    async def _validate(self, generation: int, model: RegimeModel, state: SeriesState) -> None:
        try:
            result = await in_background(fitting.validate, model, state.samples)
        except UserError as err:
            self._validated(generation, err)
            return
        if state.model is model:  # kept beside the model it scores
            state.validation = result
        self._validated(generation, None)

    def _validated(self, generation: int, err: UserError | None) -> None:
        self.validating = False
        if generation != self._generation or self._gone():
            return
        if err is not None:
            self.notify(f"Validation skipped: {err.paragraph()}", severity="warning")
        self.redraw()

    def _adopt(self, model: RegimeModel, source: str | None = None,
               validation: dict[str, Any] | None = None,
               intervals: dict[str, Any] | None = None) -> None:
        state = self.state
        assert state is not None
        views = fitting.regimes(model)
        state.adopt(model, fitting.breakpoints_of(model), [v.family for v in views], source,
                    validation, intervals)
        if self.sel_bp is not None and self.sel_bp >= len(state.breakpoints):
            self.sel_bp = len(state.breakpoints) - 1 if state.breakpoints else None
        self.sel_regime = min(self.sel_regime, max(len(views) - 1, 0))
        self.redraw()

    def schedule_refit(self) -> None:
        """Refit shortly after the last edit: the user sees consequences without asking."""
        if self._refit_timer is not None:
            self._refit_timer.stop()
        self._refit_timer = self.set_timer(REFIT_DELAY_S, self.start_fit)

    # ------------------------------------------------------------------ drawing

    def redraw(self) -> None:
        state = self.state
        if state is None:
            return
        plot = self.query_one(Plot)
        plot.spec = figures.series_spec(state.binned_for(self.mode), state.model,
                                        state.breakpoints, self.sel_bp, self.mode)
        self._panel(state)

    def _panel(self, state: SeriesState) -> None:
        n = len(state.samples)
        if state.model is None:
            status = "fitting…" if self.fitting else "not fitted (press r)"
        elif self.preview:
            status = "preview — full fit running…"
        elif state.edited:
            status = "edited — refitting…" if self.fitting else "edited — press r to refit"
        elif state.source:
            status = f"loaded: {_ellipsize(state.source, 34)}"
        else:
            status = "fitted"
        left_out = state.samples.left_out
        head = Text.assemble((f"{n:,} samples", "bold"),
                             f" ({left_out:,} disturbed left out)" if left_out else "",
                             f" · {self.mode} view\n",
                             (status, "yellow" if state.edited or state.model is None
                              or self.preview else "green"))
        self.query_one("#model-status", Static).update(head)
        table = self.query_one("#regimes", DataTable)
        table.clear()
        views = fitting.regimes(state.model, state.validation) if state.model is not None else []
        for v in views:
            wanted = state.families[v.index] if v.index < len(state.families) else None
            # An edited family shows as "fitted→wanted" until the refit lands.
            fam = f"{v.family}→{wanted}" if wanted and wanted != v.family else v.family
            table.add_row(Text("■", style=figures.regime_colour(v.index)) + f" {v.index}",
                          _range(v.size_min, v.size_max), fam, v.noise_family)
        if views:
            table.move_cursor(row=min(self.sel_regime, len(views) - 1))
        self.query_one("#regime-detail", Static).update(self._detail(state, views))

    def _detail(self, state: SeriesState, views: list[fitting.RegimeView]) -> Text:
        text = Text()
        row = next((r for r in self.session.rows if r.key == self.key), None)
        if row is not None and row.conditions == "disturbed":
            # Said first: every figure below describes the load as much as the network.
            text.append(f"runs: disturbed: {row.conditions_why}\n\n", "bold red")
        elif row is not None:
            text.append("runs: ", "bold").append(
                "quiet\n" if row.conditions == "quiet" else "conditions not recorded\n",
                "green" if row.conditions == "quiet" else "dim")
        note = state.aggregate_note()
        if note is not None:
            # Said before any figure: the points are a tool's statistic, not messages.
            text.append(note + "\n\n", "bold yellow")
        text.append("breakpoints: ", "bold")
        if not state.breakpoints:
            text.append("none")
        for i, bp in enumerate(state.breakpoints):
            style = "reverse bold yellow" if i == self.sel_bp else ""
            text.append(format_bytes(bp), style)
            text.append(" ")
        text.append("\n")
        fams = ", ".join(f or "auto" for f in state.families)
        text.append("families: ", "bold").append(f"{fams or 'auto'}\n\n")
        if not views:
            return text
        v = views[min(self.sel_regime, len(views) - 1)]
        text.append(f"regime {v.index} ", f"bold {figures.regime_colour(v.index)}")
        text.append(_range(v.size_min, v.size_max) + "\n")
        text.append("family  ", "bold").append(f"{v.family}: {_fmt_params(v.params)}\n")
        text.append("noise   ", "bold").append(f"{v.noise_family}: {_fmt_params(v.noise_params)}\n")
        if v.bands:
            shares = " + ".join(f"{fam} {share:.0%}" for fam, share in v.bands)
            text.append("bands   ", "bold").append(f"{len(v.bands)}: {shares}\n")
        if v.n_samples is not None:
            text.append("samples ", "bold").append(f"{v.n_samples:,}\n")
        if v.overlap:
            text.append("overlap ", "bold").append(_range(*v.overlap) + "\n")
        _intervals(text, state.intervals, v.index)
        text.append("\nheld-out validation\n", "bold")
        if not v.errors:
            text.append("  running…\n" if self.validating else "  –\n", "dim")
        for label, key, fmt in _VALIDATION_ROWS:
            if key in v.errors:
                text.append(f"  {label:<18}").append(fmt(v.errors[key]) + "\n")
        self._series_figures(text, state)
        return text

    def _series_figures(self, text: Text, state: SeriesState) -> None:
        """The whole series' figures, as every surface shows them (kit.figures)."""
        figures = fitting.series_figures(self.session.row_for(self.key), state.validation)
        cells = figures.cells()
        text.append("\nwhole series\n", "bold")
        text.append(f"  {figures.latency_label():<18}").append(cells["latency"] + "\n")
        text.append("  eff. bw (top oct.)").append(f" {cells['bandwidth']}\n")
        if figures.score is not None:
            text.append(f"  {'score':<18}").append(cells["score"] + "\n")
            text.append(f"  {'best baseline':<18}").append(cells["best baseline"] + "\n")
            text.append("  " + figures.verdict + "\n", "italic")

    # ------------------------------------------------------------------ actions

    def _editable(self) -> SeriesState | None:
        state = self.state
        if state is None or state.model is None:
            self.notify("Wait for the first fit to finish.", severity="warning")
            return None
        return state

    def _edited(self, state: SeriesState) -> None:
        """After any breakpoint/family edit: mark the model as the user's, show, refit."""
        state.edited = True
        self.redraw()
        self.schedule_refit()

    def action_select_bp(self, step: int) -> None:
        state = self.state
        if state is None or not state.breakpoints:
            return
        n = len(state.breakpoints)
        self.sel_bp = (0 if step > 0 else n - 1) if self.sel_bp is None else \
            (self.sel_bp + step) % n
        self.redraw()

    def action_move_bp(self, steps: int) -> None:
        state = self._editable()
        if state is None or self.sel_bp is None:
            if state is not None:
                self.notify("Select a breakpoint first (left/right).", severity="warning")
            return
        refused = state.move_breakpoint(self.sel_bp, steps)
        if refused:
            self.notify(refused, severity="warning")
            return
        self._edited(state)

    def action_add_bp(self) -> None:
        state = self._editable()
        if state is None:
            return
        r = self.sel_regime
        refused = state.add_breakpoint(r)
        if refused:
            self.notify(refused, severity="warning")
            return
        self.sel_bp = r
        self._edited(state)

    def action_delete_bp(self) -> None:
        state = self._editable()
        if state is None or self.sel_bp is None:
            if state is not None:
                self.notify("Select a breakpoint first (left/right).", severity="warning")
            return
        i = self.sel_bp
        refused = state.delete_breakpoint(i)
        if refused:
            self.notify(refused, severity="warning")
            return
        self.sel_bp = min(i, len(state.breakpoints) - 1) if state.breakpoints else None
        self.sel_regime = min(self.sel_regime, len(state.breakpoints))
        self._edited(state)

    def action_select_regime(self, step: int) -> None:
        state = self.state
        if state is None:
            return
        n = len(state.breakpoints) + 1
        self.sel_regime = (self.sel_regime + step) % n
        self.redraw()

    def action_cycle_family(self) -> None:
        state = self._editable()
        if state is None:
            return
        r = self.sel_regime
        refused = state.cycle_family(r, fitting.FAMILIES)
        if refused:
            self.notify(refused, severity="warning")
            return
        self.notify(f"regime {r}: family {state.families[r] or 'auto'}", timeout=2)
        self._edited(state)

    def action_refit(self) -> None:
        if self.state is not None:
            self.start_fit(auto=self.state.model is None)
            self.redraw()

    def action_auto_fit(self) -> None:
        if self.state is not None:
            self.start_fit(auto=True)
            self.redraw()

    def action_toggle_mode(self) -> None:
        self.mode = "median" if self.mode == "raw" else "raw"
        self.redraw()

    def action_noise(self) -> None:
        from tui.screens.noise import NoiseScreen

        state = self._editable()
        if state is not None:
            self.app.push_screen(NoiseScreen(self.session, self.key, self.sel_regime))

    def action_export(self) -> None:
        from tui.screens.export import ExportScreen

        state = self._editable()
        if state is None:
            return
        if self.fitting or state.edited:
            self.notify("Wait for the fit of the current breakpoints to finish, then export.",
                        severity="warning")
            return
        self.app.push_screen(ExportScreen(self.session, self.key))
