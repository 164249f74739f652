"""Errors a user can cause, and how the CLI reports them.

Every error a user can cause (bad option, bad campaign file, corrupt output file, missing
transport) is raised as a :class:`UserError`. The CLI turns it into one paragraph on stderr
and a non-zero exit code, never a traceback, because the person reading it needs to know
which file, line or option is wrong and what to do, not where in our code we noticed.
"""

from __future__ import annotations

import sys
import textwrap
import warnings


class UserError(Exception):
    """An error caused by the user's input; shown without a traceback.

    ``where`` names the file, line or option at fault; ``hint`` says what to do.
    ``exit_code`` is what the CLI exits with (2 = usage/input error by convention).
    """

    exit_code: int = 2

    def __init__(
        self,
        message: str,
        *,
        where: str | None = None,
        hint: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        self.message = message
        self.where = where
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code
        super().__init__(self.paragraph())

    def paragraph(self) -> str:
        """The one-paragraph text shown to the user."""
        parts = []
        if self.where:
            parts.append(f"{self.where}:")
        parts.append(self.message.rstrip("."))
        text = " ".join(parts) + "."
        if self.hint:
            hint = self.hint.rstrip(".")
            text += " " + hint[:1].upper() + hint[1:] + "."
        return text


class IngestError(UserError):
    """A file could not be read as any supported tool output (or as the forced one)."""


class CampaignError(UserError):
    """A campaign file is invalid."""


class ModelError(UserError):
    """A series cannot be fitted, or a model file cannot be read."""


class DataWarning(UserWarning):
    """Something a user must know while the command still does its work (a damaged part of
    a dataset left out, say). The CLI prints it as ``pt2pt: warning: ...``; a program or the
    TUI can catch it with :mod:`warnings` like any other warning."""


def warn(message: str) -> None:
    """Tell the user about ``message`` (once per message and place, Python's default)."""
    warnings.warn(message, DataWarning, stacklevel=2)


def show_data_warnings() -> None:
    """Print :class:`DataWarning` as one wrapped ``pt2pt: warning:`` paragraph on stderr,
    without Python's file:line prefix (the CLI calls this once at start)."""
    shown = warnings.showwarning
    if getattr(shown, "pt2pt", False):
        return

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: object = None, line: str | None = None) -> None:
        if issubclass(category, DataWarning):
            print(textwrap.fill(f"pt2pt: warning: {message}", width=100,
                                break_long_words=False, break_on_hyphens=False),
                  file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)  # type: ignore[arg-type]

    show.pt2pt = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def format_error(err: UserError, prog: str = "pt2pt") -> str:
    """Wrap the paragraph for a terminal, prefixed with the program name."""
    return textwrap.fill(f"{prog}: error: {err.paragraph()}", width=100,
                         break_long_words=False, break_on_hyphens=False)
