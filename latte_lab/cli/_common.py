"""What every ``latte-lab`` subcommand shares: the help layout, the usage error, the default runs folder and
how a table cell is written.

>>> HelpFormatter("prog")._fill_text("Find runs.\\n\\nexamples:\\n  latte-lab runs\\n", 40, "")
'Find runs.\\n\\nexamples:\\n  latte-lab runs'
>>> cell(None), cell(float("nan")), cell(0.5, "{:.0%}"), cell(52373, "{:,}")
('-', '-', '50%', '52,373')
"""

from __future__ import annotations

import argparse
import math
import textwrap
import time

from latte_lab.errors import LatteError

USAGE_EXIT = 2
"""Exit status of a command line that names something missing or unknown: argparse's own for usage errors."""

MISSING = "-"
"""What a table cell shows for a value a trial does not have (NaN, None, an unreadable file)."""


def is_flag(action: argparse.Action) -> bool:
    """An option that takes no value (``--quiet``, ``--help``): its default is 'not given', which its help
    need not say."""
    return action.nargs == 0


class UsageError(LatteError):
    """The command line names something that is not there or not what it should be (a missing folder, an
    unknown run, an unknown file type): one line on stderr and exit status 2."""


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help with two changes.

    Descriptions and epilogs keep their paragraphs (blank lines) and their indented lines as written, so an
    epilog can list examples; other lines are filled to the terminal's width as usual. An option whose help
    does not say its default gets ``(default: X)`` appended when it has one worth showing (not None, not a
    flag).
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        blocks = []
        for block in text.strip("\n").split("\n\n"):
            lines = block.split("\n")
            head = [line for line in lines if not line.startswith(" ")]
            if len(head) == len(lines):  # plain prose: fill it
                blocks.append(textwrap.fill(" ".join(line.strip() for line in lines), width,
                                            initial_indent=indent, subsequent_indent=indent))
            else:  # a heading line and examples: as written
                blocks.append("\n".join(indent + line for line in lines))
        return "\n\n".join(blocks)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or is_flag(action):
            return text
        shown = action.default not in (None, argparse.SUPPRESS) and not action.required
        takes_default = action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)
        if shown and takes_default:
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """The ``latte-lab`` parser and every subcommand's: :class:`HelpFormatter` unless told otherwise."""

    def __init__(self, *args, formatter_class=HelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)


class VersionAction(argparse.Action):
    """``--version``: prints ``latte-lab <version>`` (the installed distribution's, read only when asked)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the version of latte_lab and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"latte-lab {installed_version()}")
        parser.exit()


def installed_version() -> str:
    """The version of the installed ``latte_lab`` distribution (``latte_lab.__version__``, read from its
    metadata); ``0+unknown (not installed)`` when it runs from a source tree that was never installed."""
    from latte_lab import __version__

    return __version__ if __version__ != "0+unknown" else f"{__version__} (not installed)"


def default_runs_dir() -> str:
    """Where trials go unless told otherwise: ``TrialConfig.runs_dir``'s default (``runs``)."""
    from latte_lab.config import TrialConfig

    return TrialConfig.model_fields["runs_dir"].default


def cell(value, fmt: str = "{}") -> str:
    """``value`` formatted for a table, or :data:`MISSING` when it is None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    try:
        return fmt.format(value)
    except (ValueError, TypeError):  # a hand-edited file: show what is there
        return str(value)


def local_time(epoch: float | None, seconds: bool = False) -> str:
    """``2026-12-04 05:04`` in this machine's time zone (with ``:50`` seconds if asked); :data:`MISSING` for
    None."""
    if epoch is None:
        return MISSING
    return time.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M", time.localtime(epoch))


def table(header: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> list[str]:
    """Lines of a plain text table: columns as wide as their widest cell, two spaces apart, the columns
    whose index is in ``right`` aligned right (numbers); the last column is never padded.

    >>> table(["A", "N"], [["x", "10"], ["yy", "2"]], right={1})
    ['A    N', 'x   10', 'yy   2']
    """
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for r in [header, *rows]:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        cells[-1] = r[-1].rjust(widths[-1]) if len(r) - 1 in right else r[-1]
        lines.append("  ".join(cells))
    return lines
