"""Every command the README quotes must exist: make targets, pt2pt subcommands and options,
and the repository files they name. A user copies these lines; they must not be fiction."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from kit.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")


def _code_lines() -> list[str]:
    lines: list[str] = []
    for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", README, flags=re.S):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line:
                lines.append(line)
    return lines


def _make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, flags=re.M))


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("pt2pt has no subcommands")


CODE = _code_lines()


def test_readme_has_the_two_commands() -> None:
    assert "make demo" in CODE
    assert "make test" in CODE


@pytest.mark.parametrize("line", [line for line in CODE if line.startswith("make ")])
def test_make_targets_exist(line: str) -> None:
    words = shlex.split(line)[1:]
    targets = [w for w in words if "=" not in w and not w.startswith("-")]
    missing = set(targets) - _make_targets()
    assert not missing, f"README says '{line}' but the Makefile has no target {missing}"


@pytest.mark.parametrize("line", [line for line in CODE if line.startswith("pt2pt ")])
def test_pt2pt_commands_and_options_exist(line: str) -> None:
    words = shlex.split(line)
    subs = _subparsers()
    assert words[1] in subs, f"README quotes unknown subcommand: {line}"
    parser = subs[words[1]]
    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if nested:  # pt2pt collectives sweep ...: the options are the nested command's
        assert words[2] in nested[0].choices, f"README quotes unknown subcommand: {line}"
        parser = nested[0].choices[words[2]]
    options = {opt for action in parser._actions for opt in action.option_strings}
    for word in words[2:]:
        if word.startswith("-"):
            assert word.split("=", 1)[0] in options, f"'{word}' is not an option of: {line}"


def test_inline_commands_name_real_options() -> None:
    """Options quoted inline (`pt2pt x --opt`) exist too."""
    subs = _subparsers()
    for sub, opt in re.findall(r"`pt2pt ([\w-]+)[^`]*?(--[\w-]+)", README):
        assert sub in subs, f"README mentions unknown subcommand {sub}"
        options = {o for a in subs[sub]._actions for o in a.option_strings}
        assert opt in options, f"README mentions pt2pt {sub} {opt}, which does not exist"


def test_repo_paths_named_in_commands_exist() -> None:
    for line in CODE:
        for word in shlex.split(line):
            if re.match(r"^(jobs|playbooks|kit|docs|tests|benchmarks)/", word):
                assert (REPO / word).exists(), f"README names {word}, which does not exist"


def test_linked_files_exist() -> None:
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if "://" not in target:
            assert (REPO / target).exists(), f"README links {target}, which does not exist"
