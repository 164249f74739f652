"""The ``pt2pt`` console script.

Subcommands live in :mod:`kit.commands` (one module each, discovered at start-up) so the
CLI stays a thin shell over plain functions: every stage can also be called from Python.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from kit import __version__
from kit import commands as _commands
from kit.errors import UserError, format_error


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad options as one paragraph, exit code 2 (same as UserError)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        err = UserError(message, where=f"option error in '{self.prog}'",
                        hint=f"run '{self.prog} --help' for the accepted options")
        print(format_error(err), file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pt2pt",
        description="Measure MPI point-to-point communication sample by sample, "
        "and turn the samples into per-regime models with noise.",
    )
    parser.add_argument("--version", action="version", version=f"pt2pt-kit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for info in sorted(pkgutil.iter_modules(_commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{_commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    # Plugins (e.g. the Textual explorer) register through entry points, so that `kit`
    # stays importable and testable without them.
    for ep in sorted(entry_points(group="pt2pt.commands"), key=lambda e: e.name):
        try:
            ep.load()(sub)
        except ImportError as exc:  # plugin installed but its dependencies are not
            print(f"pt2pt: warning: command '{ep.name}' unavailable: {exc}", file=sys.stderr)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        rc = func(args)
    except UserError as err:
        print(format_error(err), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("pt2pt: interrupted; files already written are kept.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
