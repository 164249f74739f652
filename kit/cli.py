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

from kit import commands as _commands
from kit.core import signals
from kit.core.errors import UserError, format_error, show_data_warnings


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad options as one paragraph, exit code 2 (same as UserError)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        err = UserError(message, where=f"option error in '{self.prog}'",
                        hint=f"run '{self.prog} --help' for the accepted options")
        print(format_error(err), file=sys.stderr)
        raise SystemExit(2)


#: The module of kit.commands that registers each command, so that ``pt2pt COMMAND`` imports
#: that module only: importing all of them pulls in scikit-learn and scipy, seconds of CPU
#: before ``pt2pt --version`` can answer (issue 19). A command missing here still works (all
#: modules are then imported); tests/test_cli_startup.py checks the table is complete.
COMMAND_MODULES = {
    "cluster": "cluster", "collect": "collect", "collectives": "collectives",
    "compare": "compare", "contention": "contention",
    "datasets": "datasets", "demo": "demo",
    "diff": "diff", "export": "export", "fit": "fit", "ingest": "ingest", "loggp": "loggp",
    "plan": "plan",
    "predict": "predict", "predict-app": "predict_app", "sample": "predict", "report": "report",
    "run-local": "run_local",
    "selftest": "selftest", "simulate": "simulate", "status": "status", "submit": "submit",
    "validate": "validate",
}


def _modules_for(argv: Sequence[str]) -> set[str] | None:
    """Command modules ``argv`` needs: one for a known command, none for a bare --version,
    None (all, plus plugins) for anything else such as --help or an unknown command."""
    words = [w for w in argv if not w.startswith("-")]
    if words:
        module = COMMAND_MODULES.get(words[0])
        return {module} if module else None
    return set() if "--version" in argv and not {"-h", "--help"} & set(argv) else None


class _Version(argparse.Action):
    """--version, reading the installed version only when asked (kit.__getattr__)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        import kit

        print(f"pt2pt-kit {kit.__version__}")
        parser.exit()


def build_parser(only: set[str] | None = None) -> argparse.ArgumentParser:
    """The whole CLI, or with ``only`` just the named kit.commands modules (no plugins)."""
    parser = _Parser(
        prog="pt2pt",
        description="Measure MPI point-to-point communication sample by sample, "
        "and turn the samples into per-regime models with noise.",
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show program's version number and exit")
    parser.add_argument("--quiet", dest="global_quiet", action="store_true",
                        help="no progress bars or progress lines on stderr, for scripts (also "
                        "PT2PT_QUIET=1; bars are drawn only on a terminal anyway)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for info in sorted(pkgutil.iter_modules(_commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or (only is not None and info.name not in only):
            continue
        module = importlib.import_module(f"{_commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    # Plugins (e.g. the Textual explorer) register through entry points, so that `kit`
    # stays importable and testable without them.
    plugins = []
    if only is None:
        from importlib.metadata import entry_points

        plugins = list(entry_points(group="pt2pt.commands"))
    for ep in sorted(plugins, key=lambda e: e.name):
        try:
            ep.load()(sub)
        except ImportError as exc:  # plugin installed but its dependencies are not
            print(f"pt2pt: warning: command '{ep.name}' unavailable: {exc}", file=sys.stderr)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    only = _modules_for(words)
    # A kit command: SIGTERM is an exception from here on (not for plugins: the TUI's event
    # loop handles its own).
    restore = signals.install() if only else (lambda: None)
    show_data_warnings()
    try:
        return _main(words, only)
    except signals.Stopped as stop:
        print(f"pt2pt: stopped by {stop.name}; every file already written is kept whole, "
              "and none was left half-written.", file=sys.stderr)
        return 128 + stop.signum
    finally:
        restore()


def _main(words: list[str], only: set[str] | None) -> int:
    parser = build_parser(only)
    try:
        args = parser.parse_args(words)
    except SystemExit as stop:  # an option error (already printed), --help, --version
        return stop.code if isinstance(stop.code, int) else 2
    func = getattr(args, "func", None)
    from kit.core import progress

    progress.set_quiet(bool(getattr(args, "global_quiet", False)))
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
    except OSError as exc:
        # The last net under every command: a full disk, a permission or a name too long
        # for the file system met where no writer expected it is the user's situation, not
        # a bug (kit.core.atomicwrite names it); anything else is a bug and keeps its trace.
        from kit.core.atomicwrite import is_storage_error, output_error

        if not is_storage_error(exc):
            raise
        failed = output_error(exc, exc.filename or "a file", "cannot read or write")
        print(format_error(failed), file=sys.stderr)
        return failed.exit_code
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
