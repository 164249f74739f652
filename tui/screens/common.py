"""Pieces every screen uses: help built from bindings, path prompt, confirmation, errors."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.dom import DOMNode
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label

from kit.core.errors import UserError


def notify_error(node: DOMNode, err: UserError | Exception) -> None:
    """Show an error as a notification: the app keeps running, the user reads what to do."""
    text = err.paragraph() if isinstance(err, UserError) else f"{type(err).__name__}: {err}"
    node.app.notify(text, title="Error", severity="error", timeout=12)


def _key_name(binding: BindingType) -> tuple[str, str]:
    if isinstance(binding, Binding):
        return binding.key, binding.description
    key, _action, *rest = binding
    return key, rest[0] if rest else ""


_PRETTY = {"question_mark": "?", "slash": "/", "escape": "esc", "space": "space", "enter": "enter",
           "less_than_sign": "<", "greater_than_sign": ">", "plus": "+", "minus": "-",
           "left_square_bracket": "[", "right_square_bracket": "]"}


def pretty_key(key: str) -> str:
    return ", ".join(_PRETTY.get(k.strip(), k.strip()) for k in key.split(","))


#: Footer group of the quit keys: a screen's ``q`` sits beside the app's ``ctrl+q`` as
#: "q ^q Quit" (the footer merges adjacent bindings of one group). Put ``q`` last in BINDINGS.
QUIT_GROUP = Binding.Group("Quit")


class HelpScreen(ModalScreen[None]):
    """Every key of the screen it was opened from, read from that screen's bindings."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close")]

    def __init__(self, title: str, rows: list[tuple[str, str]]) -> None:
        super().__init__()
        self._title = title
        self._rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Label(self._title, id="help-title")
            yield DataTable(id="help-table", cursor_type="none", show_header=False)
            yield Label("esc or ? closes this help", id="help-hint")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("key", "what it does")
        for key, what in self._rows:
            table.add_row(Text(key), Text(what))  # never markup: '[' is a key name


class HelpMixin:
    """Adds ``action_help``: the help lists the bindings, so it can never miss a key."""

    KEY_HELP: ClassVar[dict[str, str]] = {}
    BINDINGS: ClassVar[list[BindingType]]

    def action_help(self) -> None:
        rows = [(pretty_key(k), d) for k, d in (_key_name(b) for b in self.BINDINGS) if d]
        rows += list(self.KEY_HELP.items())
        rows.append(("ctrl+q", "quit the explorer (from any screen, even while typing)"))
        title = f"Keys of the {getattr(self, 'help_title', 'explorer')}"
        self.app.push_screen(HelpScreen(title, rows))  # type: ignore[attr-defined]


class PathPrompt(ModalScreen[str | None]):
    """Ask for a path; Enter accepts, Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, value: str = "") -> None:
        super().__init__()
        self._title = title
        self._value = value

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self._title)
            yield Input(self._value, id="path")
            with Horizontal(classes="buttons"):
                yield Button("OK", variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def _accept(self) -> None:
        self.dismiss(self.query_one(Input).value.strip() or None)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class Confirm(ModalScreen[bool]):
    """A yes/no question (overwrite a file?). ``y`` / ``n`` answer from the keyboard."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self._question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self._question)
            with Horizontal(classes="buttons"):
                yield Button("Yes (y)", variant="warning", id="yes")
                yield Button("No (n)", id="no")

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
