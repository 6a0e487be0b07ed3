"""Conventions of the ``latte-lab`` command, checked on the parser itself: every command has a description,
every option and argument a help text, and every option that takes a value says its default in ``--help``;
``--version`` names the installed version; the commands that find and read runs show examples.

A command that breaks a convention fails ``test_every_command_and_option_is_described``, unless the
exact case is in PENDING (cases known when the test was written, in commands whose owners fix them; remove
an entry once fixed: the test fails on an entry that no longer applies, so the list only shrinks).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import version

import pytest

from latte_lab.cli import build_parser, main
from latte_lab.cli._common import Parser, is_flag

PENDING: set[tuple[str, str | None, str]] = set()
"""(command, option or argument or None for the command itself, what is missing: description, help or
default) of the conventions broken when this test was written, in commands this test's author does not own."""

EXAMPLES = ("run", "sweep", "runs", "show", "export", "figures", "prices")
"""Commands whose help ends with examples (an epilog starting ``examples:``)."""


def commands(parser: argparse.ArgumentParser, prefix: str = ""):
    """(command path, parser) of ``latte-lab`` and every subcommand under it, nested ones too."""
    yield prefix or "latte-lab", parser
    seen = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias names the same parser again
                    seen.add(id(sub))
                    yield from commands(sub, f"{prefix} {name}".strip())


def name_of(action: argparse.Action) -> str:
    if action.option_strings:
        return max(action.option_strings, key=len)
    return action.metavar if isinstance(action.metavar, str) else action.dest.upper()


def takes_default(action: argparse.Action) -> bool:
    """An option that may be left out and then has a value: its help should say which."""
    if is_flag(action) or action.required:
        return False
    return bool(action.option_strings) or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)


def problems(top: argparse.ArgumentParser) -> set[tuple[str, str | None, str]]:
    """(command, option or None, what is missing) of every convention broken under ``top``."""
    found = set()
    for path, parser in commands(top):
        if not (parser.description or "").strip():
            found.add((path, None, "description"))
        formatter = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            if not (action.help or "").strip():
                found.add((path, name_of(action), "help"))
            elif takes_default(action) and "default" not in formatter._expand_help(action).lower():
                found.add((path, name_of(action), "default"))
    return found


def test_every_command_and_option_is_described():
    found = problems(build_parser())
    new = sorted(found - PENDING, key=str)
    fixed = sorted(PENDING - found, key=str)
    assert not new, ("commands without a description, options without help or whose help does not say their "
                     f"default (say it, e.g. '(default: every task)'): {new}")
    assert not fixed, f"fixed since PENDING was written: remove these entries from PENDING: {fixed}"


def test_the_walk_sees_every_command_and_option():
    paths = {path for path, _ in commands(build_parser())}
    assert {"latte-lab", "runs", "show", "export", "figures", "prices", "sweep", "cache check"} <= paths
    parser = Parser(prog="x", description="d")
    parser.add_argument("--bare")
    parser.add_argument("--said", default=3, help="a number")
    parser.add_argument("--flag", action="store_true", help="a flag")
    sub = parser.add_subparsers().add_parser("inner")
    sub.add_argument("path")
    sub.add_argument("--unsaid", default=None, help="a name")
    assert problems(parser) == {("latte-lab", "--bare", "help"), ("inner", None, "description"),
                                ("inner", "PATH", "help"), ("inner", "--unsaid", "default")}


@pytest.mark.parametrize("command", EXAMPLES)
def test_commands_show_examples(command):
    sub = dict(commands(build_parser()))[command]
    assert (sub.epilog or "").startswith("examples:\n  latte-lab ")
    assert "examples:\n  latte-lab" in sub.format_help()  # the epilog keeps its lines


def test_version_names_the_installed_distribution(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"latte-lab {version('latte-lab')}\n"
    proc = subprocess.run([sys.executable, "-m", "latte_lab.cli", "--version"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("latte-lab ")


def test_help_adds_a_default_its_text_does_not_say(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "response cache mode (default: read_write)" in out  # added by the formatter
    assert out.count("(default: runs/sweep)") == 1  # said by the help itself: not twice
