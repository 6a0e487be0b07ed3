"""The report a simulated agent's analysis script prints, read back: a header line starting with
:data:`ANALYSIS_MARK`, one fact per line (``<kind>: <column>: key=value ...``, a column named
``semantic (opaque)``) and a last line starting with :data:`END_MARK`. Split from
:mod:`latte_lab.models.sim.analysis`, which writes the script and composes deliverables from what
:func:`parse_report` returns.

>>> r = parse_report(ANALYSIS_MARK + "loans.csv: 50 rows, 3 columns\\nrelation: income (c1): r=-0.42 n=50\\n")
>>> r.of("relation")[0].num("r")
-0.42
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

ANALYSIS_MARK = "Analysis of "  # the report's first line: "Analysis of <file>: <n> rows, <k> columns"
END_MARK = "End of analysis"  # the report's last line: "End of analysis of <file>: <n> rows, <k> columns, <m> facts"
MAX_LINE_CHARS = 4000  # report lines longer than this are not parsed (a fact line is short; keeps parsing linear)


# ============================================================================== the report ====

_KIND = re.compile(r"([a-z_]+): ")
_FIELD = r'[a-z_0-9]+=(?:"(?:[^"\\]|\\.)*"|[^\s"]+)'
_FIELDS = re.compile(rf"{_FIELD}(?: {_FIELD})*")
_PAIR = re.compile(r'([a-z_0-9]+)=("(?:[^"\\]|\\.)*"|[^\s"]+)')
_HEADER = re.compile(rf"{re.escape(ANALYSIS_MARK)}(?P<file>.+): (?P<rows>\d+) rows, (?P<columns>\d+) columns")
_END = re.compile(rf"{re.escape(END_MARK)} of (?P<file>.+): (?P<rows>\d+) rows, (?P<columns>\d+) columns, \d+ facts")
_LABEL = re.compile(r"(?P<name>.+?) \((?P<opaque>[^()]+)\)")


@dataclass(frozen=True)
class Fact:
    """One line of a report: its kind, the column (or file) it is about, and its fields as written."""

    kind: str
    label: str
    fields: dict[str, str]

    @property
    def name(self) -> str:
        """The column's semantic name (its opaque name when the schema gave none)."""
        m = _LABEL.fullmatch(self.label)
        return m.group("name") if m else self.label

    @property
    def opaque(self) -> str | None:
        """The column's name in the file when the label gives a semantic name before it."""
        m = _LABEL.fullmatch(self.label)
        return m.group("opaque") if m else None

    def num(self, key: str) -> float | None:
        """A field as a finite number (None when absent, not a number, or nan)."""
        try:
            x = float(self.fields[key])
        except (KeyError, ValueError):
            return None
        return x if math.isfinite(x) else None

    def text(self, key: str) -> str | None:
        value = self.fields.get(key)
        if value is None or not value.startswith('"'):
            return value
        try:
            decoded = json.loads(value)
        except ValueError:
            return None
        return decoded if isinstance(decoded, str) else None

    def flag(self, key: str) -> bool:
        return self.fields.get(key) == "yes"


@dataclass
class Report:
    """The last analysis report of a text: its header and its facts in order."""

    file: str
    rows: int
    columns: int
    facts: list[Fact] = field(default_factory=list)
    complete: bool = False  # whether the end line was there (a report cut short is composed from what it holds)

    def of(self, kind: str, label: str | None = None) -> list[Fact]:
        return [f for f in self.facts if f.kind == kind and (label is None or f.label == label)]

    def first(self, kind: str, label: str | None = None) -> Fact | None:
        found = self.of(kind, label)
        return found[0] if found else None

    @property
    def target(self) -> Fact | None:
        return self.first("target")

    def numeric_labels(self) -> list[str]:
        """The numeric features, in the report's order (any of their lines names one)."""
        kinds = ("numeric", "shape", "outliers", "relation", "band")
        return list(dict.fromkeys(f.label for f in self.facts if f.kind in kinds))


def _fact(line: str) -> Fact | None:
    m = _KIND.match(line)
    if not m:
        return None
    rest = line[m.end():]
    pos = rest.find(": ")
    while pos > 0:  # the column ends at the first ": " after which only key=value fields follow
        if _FIELDS.fullmatch(rest, pos + 2):
            return Fact(m.group(1), rest[:pos], dict(_PAIR.findall(rest, pos + 2)))
        pos = rest.find(": ", pos + 1)
    return None


def parse_report(text: str) -> Report | None:
    """The last report in a text (a prompt may show several runs: the latest counts), or None.

    Lines are read from the last header on, or, when a run's shown output kept only the report's end (its
    head cut off), from the end line back to the first line that is no fact (the first line left, possibly cut
    short, is not read). A line that is no fact is skipped, and a last line that may be cut short (no line end
    after it; not the end line or a whole header) is dropped rather than read with a truncated number.
    """
    if not isinstance(text, str) or (ANALYSIS_MARK not in text and END_MARK not in text):
        return None
    lines = text.splitlines()
    last = lines[-1].strip() if lines else ""
    if lines and not text.endswith(("\n", "\r")) and not last.startswith(END_MARK) and not _HEADER.fullmatch(last):
        lines = lines[:-1]  # cut short: "r=-0.35" may be what is left of "r=-0.351"
    head = next((i for i in range(len(lines) - 1, -1, -1) if _HEADER.fullmatch(lines[i].strip())), None)
    ends = [i for i, line in enumerate(lines) if _END.fullmatch(line.strip())]
    end = ends[-1] if ends else None
    # the last report's head was cut off: its end has no head before it (none at all, or only an earlier
    # report's, whose own end lies between); a head after the last end is a report cut short at its tail
    cut = end is not None and (head is None or any(head < e < end for e in ends[:-1]))
    if cut:
        m = _END.fullmatch(lines[end].strip())
        start = end
        while start > 0 and _fact(lines[start - 1].strip()) is not None:
            start -= 1
        report = Report(file=m.group("file"), rows=int(m.group("rows")), columns=int(m.group("columns")))
        body = lines[start + 1:end + 1]  # the first line left may be a fact cut short at its start
    elif head is not None:
        m = _HEADER.fullmatch(lines[head].strip())
        report = Report(file=m.group("file"), rows=int(m.group("rows")), columns=int(m.group("columns")))
        body = lines[head + 1:]
    else:
        return None
    for raw in body:
        line = raw.strip()
        if line.startswith(END_MARK):
            report.complete = True
            break
        if len(line) <= MAX_LINE_CHARS and (fact := _fact(line)) is not None:
            report.facts.append(fact)
    return report
