"""The noise view: how time scatters around the fitted curve inside one regime."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from kit.core.errors import UserError
from tui import figures, fitting, noiseview, serieskey
from tui.background import in_background
from tui.screens.common import HelpMixin, notify_error
from tui.session import Session
from tui.widgets.plot import Plot


class NoiseScreen(HelpMixin, Screen[None]):
    """Histogram of ln(time / fitted curve) on a log axis with the chosen density; candidates."""

    help_title = "noise view"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left,up", "regime(-1)", "Prev regime"),
        Binding("right,down", "regime(1)", "Next regime"),
        Binding("question_mark", "help", "Help"),
        Binding("escape,q", "app.pop_screen", "Back"),
    ]
    KEY_HELP: ClassVar[dict[str, str]] = {
        "dim line": "histogram of ln(time / fitted curve) of the regime's inlier samples, on a "
                    "log-ratio axis over the whole range (heavy tails stay visible)",
        "white line": "density of ln(ratio) of the chosen noise family; dotted line at ratio 1",
        "table": "candidate families by AIC (lower is better), fitted vs empirical quantiles",
    }

    def __init__(self, session: Session, key: serieskey.SeriesKey, regime: int) -> None:
        super().__init__()
        self.session = session
        self.key = key
        self.regime = regime

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="noise-body"):
            yield Static("", id="noise-title")
            yield Plot(id="noise-plot")
            yield DataTable(id="candidates", cursor_type="none")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.key.label
        table = self.query_one(DataTable)
        table.add_columns("family", "AIC", "ΔAIC", "p50 fit/emp", "p95 fit/emp", "p99 fit/emp")
        self._show()

    def _show(self) -> None:
        self.query_one("#noise-body").loading = True
        self._compute(self.regime)

    @work(exclusive=True, group="noise")
    async def _compute(self, regime: int) -> None:
        state = self.session.series[self.key]
        try:
            view = await in_background(noiseview.noise_view, state.model, state.samples, regime)
        except UserError as err:
            self._failed(err)
            return
        self._computed(regime, view)

    def _failed(self, err: UserError) -> None:
        notify_error(self, err)
        if self.is_attached:
            self.query_one("#noise-body").loading = False

    def _computed(self, regime: int, view: noiseview.NoiseView) -> None:
        if regime != self.regime or not self.is_attached:
            return
        self.query_one("#noise-body").loading = False
        colour = figures.regime_colour(regime)
        model = self.session.series[self.key].model
        if model is None:  # refitting: the view comes back with the next model
            return
        reg = fitting.regimes(model)[regime]
        title = Text.assemble((f"regime {regime} ", f"bold {colour}"),
                              f"{reg.family}  ·  {len(view.ratio):,} samples  ·  noise ",
                              (view.family, "bold"), "  (x: time / fitted curve)")
        self.query_one("#noise-title", Static).update(title)
        self.query_one(Plot).spec = figures.histogram_spec(view, colour)
        table = self.query_one(DataTable)
        table.clear()
        best = min((c.aic for c in view.candidates), default=0.0)
        for c in view.candidates:
            style = "bold green" if c.chosen else ""
            table.add_row(
                Text(("● " if c.chosen else "  ") + c.family, style=style),
                Text(f"{c.aic:.1f}", justify="right"),
                Text(f"{c.aic - best:.1f}", justify="right"),
                *[Text(f"{f:.3f} / {e:.3f}", justify="right")
                  for f, e in zip(c.fitted, c.empirical, strict=True)])

    def action_regime(self, step: int) -> None:
        model = self.session.series[self.key].model
        if model is None:
            return
        n = len(model.regimes_)
        self.regime = (self.regime + step) % n
        self._show()
