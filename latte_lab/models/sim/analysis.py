"""What a simulated agent writes about a project's data: computed from an analysis it ran, never copied.

A data deliverable (a findings file, a narrative for a manager) must say only what the agent's prompts showed
(DESIGN.md, "The simulated model"). This module gives the simulated agents a generic exploratory-analysis
capability in two halves, for any CSV file and any shared schema module of the usual shape:

- **The analysis script** (:func:`analysis_script`, written to :func:`analysis_path` and run with
  ``run_script``): standard library only, it imports the team's schema module ``config`` when there is one
  (``COLUMN_MAP``: opaque column -> semantic name; ``TARGET``; ``NUMERIC_FEATURES``;
  ``CATEGORICAL_FEATURES``; ``MISSING_VALUES``: semantic column -> placeholder value), tolerates any of those
  names missing or wrong, treats the declared placeholders and empty cells as missing (and nothing else), and
  prints a report: a first line starting with :data:`ANALYSIS_MARK`, one parseable line per fact
  (``<kind>: <column>: key=value ...``, a column named ``semantic (opaque)``) and a last line starting with
  :data:`END_MARK`.
- **The composers** (:func:`compose_findings`, :func:`compose_summary`): the findings (five categories of
  ``{"finding", "supporting_evidence"}`` entries) and the narrative, by templates, from the numbers of the
  report text alone. They know nothing of any task: a placeholder nobody declared is a value like any other,
  so an agent that never noticed it writes findings that take it for data, as a real analyst would.

Wording rules (generic): a relationship's direction is put in words from the sign of Pearson's r only when
|r| reaches :data:`MIN_DIRECTION_R`, strongest first; a distribution's shape is named from its measured
skewness, kurtosis and histogram; for a categorical feature the groups with the highest and the lowest target
rate are named with their rates.

>>> analysis_path("data/loans.csv")
'analyze_loans.py'
>>> report = (ANALYSIS_MARK + "loans.csv: 50 rows, 3 columns\\n"
...           'target: defaulted (c2): n=50 positives=10 rate=0.2 binary=yes\\n'
...           'relation: income (c1): r=-0.42 n=50\\n')
>>> parse_report(report).target.name, parse_report(report).of("relation")[0].num("r")
('defaulted', -0.42)
>>> compose_findings("no report here") is None
True
"""

from __future__ import annotations

import json
import math
import re
import string
from dataclasses import dataclass, field

ANALYSIS_PREFIX = "analyze_"  # the script's file name: analyze_<data file stem>.py, shared by the team
ANALYSIS_MARK = "Analysis of "  # the report's first line: "Analysis of <file>: <n> rows, <k> columns"
END_MARK = "End of analysis"  # the report's last line: "End of analysis of <file>: <n> rows, <k> columns, <m> facts"
SCHEMA_MODULE = "config"  # the team's shared schema module the script imports from the workspace
SCHEMA_NAMES = ("COLUMN_MAP", "TARGET", "NUMERIC_FEATURES", "CATEGORICAL_FEATURES", "MISSING_VALUES")  # what it reads
HIST_BINS = 12  # histogram bins for the shape: enough to show two humps in a few hundred rows, few enough to be smooth
TROUGH_RATIO = 0.5  # bimodal: two peaks separated by a bin holding less than this share of the smaller peak
MIN_MODE_SHARE = 0.05  # a peak must hold this share of the values: a thin tail bin is not a second mode
MIN_SHAPE_VALUES = 20  # fewer values than this: no bimodality verdict (a histogram of a handful is noise)
IQR_FENCE = 1.5  # Tukey's fences: outliers lie beyond 1.5 interquartile ranges from the quartiles
MAX_GROUPS = 20  # categories reported per categorical feature (the largest ones): beyond that, rates are noise
MIN_DIRECTION_R = 0.1  # |r| below this is noise: no direction is claimed (the usual "small effect" bound)
SKEW_CUT = 0.5  # |skewness| from this on the distribution is called skewed (the common rule of thumb)
UNIFORM_KURTOSIS = -0.9  # excess kurtosis at or below this reads as roughly uniform (a uniform's is -1.2, a triangle's -0.6)
PILEUP_MIN_ROWS = 5  # a bound is "piled up" only with at least this many rows exactly on it...
PILEUP_FACTOR = 3.0  # ...and this many times the rows a typical distinct value holds (a cap, not a common value)
MIN_SUMMARY_WORDS = 100  # the narrative's length a manager's summary asks for
MAX_LINE_CHARS = 4000  # report lines longer than this are not parsed (a fact line is short; keeps parsing linear)
FINDING_KEYS = ("distributions", "relationships", "subgroup_effects", "outliers", "missing_data")  # a findings file's
# categories, the usual headings of an exploratory analysis


def analysis_path(data_file: str) -> str:
    """The analysis script's path for a data file: ``analyze_<stem>.py`` in the workspace root."""
    return ANALYSIS_PREFIX + data_file.rsplit("/", 1)[-1].rsplit(".", 1)[0] + ".py"


# ================================================================================ the script ====

_SCRIPT = string.Template('''"""Analyses $path for the team: the target's rate; each feature's distribution, outliers and relation
with the target; the missing data. Columns come from the shared schema (config.py) when it is there; the
placeholders it declares in MISSING_VALUES and empty cells are missing values, nothing else is."""

import contextlib
import csv
import io
import json
import math
import os
import re
import statistics
import sys

PATH = $path_repr
MARK = $mark
END = $end
MODULE = $module
NAMES = $names
BINS = $bins
TROUGH_RATIO = $trough_ratio
MIN_MODE_SHARE = $min_mode_share
MIN_SHAPE_VALUES = $min_shape_values
IQR_FENCE = $iqr_fence
MAX_GROUPS = $max_groups
TRUE_WORDS = ("1", "true", "yes", "y", "t")
FALSE_WORDS = ("0", "false", "no", "n", "f")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")  # text written bare; anything else as a JSON string
ABSENT = object()
facts = 0


def clean(text):
    return " ".join(str(text).split())


def fmt(value):
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "nan"
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        if 1e4 <= abs(value) < 1e15:
            return str(round(value))  # five digits and more before the point: the fraction says nothing
        return format(value, ".3g")  # three significant digits: the report fits a script's shown output
    text = clean(value)
    return text if WORD.fullmatch(text) else json.dumps(text)


LAST = ("config", "schema", "lacking", "placeholder", "empty", "cells", "target")  # printed last: see below
deferred = []


def say(kind, label, **fields):
    """One fact: '<kind>: <label>: key=value ...' (numbers bare, text as a JSON string). The facts about the
    whole table (schema, missing values, target) are printed last, just above the end line: a run's shown
    output keeps its end, so they are the last to be cut."""
    global facts
    body = " ".join(f"{k}={fmt(v)}" for k, v in fields.items() if v is not None)
    if body:
        facts += 1
        line = f"{kind}: {clean(label)}: {body}"
        if kind in LAST:
            deferred.append(line)
        else:
            print(line)


def finish(n_rows, n_columns):
    for line in deferred:
        print(line)
    print(f"{END} of {PATH}: {n_rows} rows, {n_columns} columns, {facts} facts")


def number(cell):
    try:
        x = float(cell)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def same(cell, value):
    """Whether a cell holds a placeholder value (as text, or as the same number)."""
    if isinstance(value, bool) or value is None:
        return False
    if cell == clean(value):
        return True
    a, b = number(cell), number(value)
    return a is not None and b is not None and a == b


# ----- the data
try:
    with open(PATH, newline="", encoding="utf-8-sig") as fh:
        table = [row for row in csv.reader(fh)]
except (OSError, UnicodeDecodeError, csv.Error) as exc:
    print(f"{MARK}{PATH}: 0 rows, 0 columns")
    say("lacking", PATH, data=f"{type(exc).__name__}: {exc}"[:200])
    finish(0, 0)
    sys.exit(0)
header = [clean(h) for h in (table[0] if table else [])]
rows = [r for r in table[1:] if any(c.strip() for c in r)]
index = {}
for i, h in enumerate(header):
    index.setdefault(h, i)
columns = list(index)


def cell(row, col):
    i = index[col]
    return row[i].strip() if i < len(row) and row[i] is not None else ""


print(f"{MARK}{PATH}: {len(rows)} rows, {len(columns)} columns")

# ----- the schema: whatever config.py holds, as far as it makes sense
config, status = None, "absent"
if os.path.exists(MODULE + ".py"):
    sys.path.insert(0, os.getcwd())
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            config = __import__(MODULE)
        status = "imported"
    except (Exception, SystemExit) as exc:  # a half-written schema: say so and go on without it
        config, status = None, f"{type(exc).__name__}: {exc}"[:200]
say("config", MODULE + ".py", status=status)


def setting(name):
    return ABSENT if config is None else getattr(config, name, ABSENT)


state, notes = {}, {}
semantic = {}  # column -> semantic name
raw = setting("COLUMN_MAP")
if raw is ABSENT:
    state["COLUMN_MAP"] = "missing"
elif not isinstance(raw, dict):
    state["COLUMN_MAP"] = "invalid"
else:
    unknown = []
    for k, v in raw.items():
        if isinstance(k, str) and clean(k) in index and isinstance(v, str) and clean(v):
            semantic.setdefault(clean(k), clean(v))
        else:
            unknown.append(clean(k))
    state["COLUMN_MAP"] = "partial" if unknown else "ok"
    notes["COLUMN_MAP"] = {"columns": len(semantic), "unknown": ",".join(unknown) or None}
by_name = {}
for col in columns:
    if col in semantic:
        by_name.setdefault(semantic[col], col)


def resolve(name):
    """The column a schema name means: its semantic name, else the column's own name."""
    if not isinstance(name, str):
        return None
    name = clean(name)
    return by_name.get(name) or (name if name in index else None)


def label(col):
    return f"{semantic[col]} ({col})" if semantic.get(col, col) != col else col


target = None
raw = setting("TARGET")
if raw is ABSENT:
    state["TARGET"] = "missing"
elif resolve(raw) is None:
    state["TARGET"] = "invalid"
    notes["TARGET"] = {"value": clean(raw)}
else:
    target = resolve(raw)
    state["TARGET"] = "ok"
    notes["TARGET"] = {"column": label(target)}

features = {}
used = {target} if target else set()
for name in ("NUMERIC_FEATURES", "CATEGORICAL_FEATURES"):
    raw = setting(name)
    if raw is ABSENT:
        state[name] = "missing"
        continue
    if isinstance(raw, (set, frozenset)):
        raw = sorted(raw, key=str)
    if not isinstance(raw, (list, tuple)):
        state[name] = "invalid"
        continue
    cols, unknown = [], []
    for item in raw:
        col = resolve(item)
        if col is None:
            unknown.append(clean(item))
        elif col not in used:
            cols.append(col)
            used.add(col)
    features[name] = cols
    state[name] = "partial" if unknown else "ok"
    notes[name] = {"features": len(cols), "unknown": ",".join(unknown) or None}

placeholders = {}  # column -> declared placeholder values
raw = setting("MISSING_VALUES")
if raw is ABSENT:
    state["MISSING_VALUES"] = "missing"
elif not isinstance(raw, dict):
    state["MISSING_VALUES"] = "invalid"
else:
    unknown = []
    for k, v in raw.items():
        col = resolve(k)
        values = list(v) if isinstance(v, (list, tuple, set, frozenset)) else [v]
        values = [x for x in values if isinstance(x, (int, float, str)) and not isinstance(x, bool)]
        if col is None or not values:
            unknown.append(clean(k))
        else:
            placeholders.setdefault(col, [])
            placeholders[col] += [x for x in values if x not in placeholders[col]]
    state["MISSING_VALUES"] = "partial" if unknown else "ok"
    notes["MISSING_VALUES"] = {"entries": sum(len(v) for v in placeholders.values()), "unknown": ",".join(unknown) or None}


def missing(value, col):
    return value == "" or any(same(value, p) for p in placeholders.get(col, ()))


def present(col):
    return [v for v in (cell(r, col) for r in rows) if not missing(v, col)]


# features the schema does not list: inferred from the data (numbers or text), identifiers left out
inferred = {}
for name in ("NUMERIC_FEATURES", "CATEGORICAL_FEATURES"):
    if name in features:
        continue
    cols, skipped = [], []
    for col in columns:
        if col in used:
            continue
        values = present(col)
        numeric = bool(values) and all(number(v) is not None for v in values)
        if not values or numeric != (name == "NUMERIC_FEATURES"):
            continue
        distinct = len(set(values))
        if len(values) > 1 and distinct == len(values) and (not numeric or all(number(v).is_integer() for v in values)):
            skipped.append(col)  # every value different: an identifier, not a feature
            continue
        cols.append(col)
    used.update(cols)
    features[name] = cols
    inferred[name] = {"inferred": ",".join(label(c) for c in cols) or "none", "identifiers": ",".join(skipped) or None}

for name in NAMES:  # a name read as it should be goes without a line (the report must fit a script's shown output)
    if state[name] != "ok" or notes.get(name, {}).get("entries"):
        say("schema", name, state=state[name], **notes.get(name, {}), **inferred.get(name, {}))
lacking = [n for n in NAMES if state[n] in ("missing", "invalid")]
if lacking or status != "imported":
    say("lacking", MODULE + ".py", names=",".join(lacking) or None, reason=None if status == "imported" else status)

# ----- missing data: the declared placeholders, then the empty cells
for col in sorted(placeholders, key=columns.index):
    for value in placeholders[col]:
        hits = sum(1 for r in rows if same(cell(r, col), value))
        say("placeholder", label(col), value=value, rows=hits, total=len(rows),
            share=hits / len(rows) if rows else 0.0)
empty_rows = set()
empty_cells = 0
for col in columns:
    empties = [i for i, r in enumerate(rows) if cell(r, col) == ""]
    if empties:
        say("empty", label(col), cells=len(empties), share=len(empties) / len(rows))
    empty_cells += len(empties)
    empty_rows.update(empties)
say("cells", PATH, total=len(rows) * len(columns), empty=empty_cells, rows_with_empty=len(empty_rows),
    placeholders=sum(len(v) for v in placeholders.values()))

# ----- the target
outcome = {}  # row index -> target value
binary = False
if target is not None:
    bad = 0
    for i, r in enumerate(rows):
        v = cell(r, target)
        if missing(v, target):
            continue
        x = number(v)
        if x is None and v.lower() in TRUE_WORDS + FALSE_WORDS:
            x = 1.0 if v.lower() in TRUE_WORDS else 0.0
        if x is None:
            bad += 1
        else:
            outcome[i] = x
    binary = bool(outcome) and set(outcome.values()) <= {0.0, 1.0}
    ys = list(outcome.values())
    if binary:
        say("target", label(target), n=len(ys), positives=int(sum(ys)), rate=sum(ys) / len(ys), binary=True,
            unparsed=bad)
    else:
        say("target", label(target), n=len(ys), mean=statistics.fmean(ys) if ys else None, binary=False, unparsed=bad)
rate_key = "rate" if binary else "mean"


def histogram(xs):
    """Counts per bin: integer data on whole-number bins (no empty bins between neighbouring values)."""
    lo, hi = xs[0], xs[-1]
    if all(x.is_integer() for x in xs):
        width = max(1, math.ceil((hi - lo + 1) / BINS))
        counts = [0] * (int((hi - lo) // width) + 1)
        for x in xs:
            counts[int((x - lo) // width)] += 1
        return counts, [lo + i * width + (width - 1) / 2 for i in range(len(counts))], width
    width = (hi - lo) / BINS
    counts = [0] * BINS
    for x in xs:
        counts[min(int((x - lo) / width), BINS - 1)] += 1
    return counts, [lo + (i + 0.5) * width for i in range(BINS)], width


def two_modes(counts, n):
    """(left mode bin, trough bin, right mode bin) when two peaks stand apart around a deep enough dip."""
    best = None
    for k in range(1, len(counts) - 1):
        left, right = max(counts[:k]), max(counts[k + 1:])
        small = min(left, right)
        if small < MIN_MODE_SHARE * n or counts[k] >= TROUGH_RATIO * small:
            continue
        if best is None or counts[k] / small < best[0]:
            best = (counts[k] / small, counts.index(left), k, k + 1 + counts[k + 1:].index(right))
    return best[1:] if best else None


def pearson(pairs):
    n = len(pairs)
    if n < 3:
        return float("nan")
    mx = math.fsum(x for x, _ in pairs) / n
    my = math.fsum(y for _, y in pairs) / n
    sxy = math.fsum((x - mx) * (y - my) for x, y in pairs)
    sxx = math.fsum((x - mx) ** 2 for x, _ in pairs)
    syy = math.fsum((y - my) ** 2 for _, y in pairs)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


# ----- numeric features
for col in features.get("NUMERIC_FEATURES", []):
    values, gaps, bad = {}, 0, 0
    for i, r in enumerate(rows):
        v = cell(r, col)
        if missing(v, col):
            gaps += 1
        elif number(v) is None:
            bad += 1
        else:
            values[i] = number(v)
    xs = sorted(values.values())
    lab = label(col)
    if not xs:
        say("numeric", lab, n=0, missing=gaps, unparsed=bad)
        continue
    n = len(xs)
    mean = math.fsum(xs) / n
    m2 = math.fsum((x - mean) ** 2 for x in xs) / n
    m3 = math.fsum((x - mean) ** 3 for x in xs) / n
    m4 = math.fsum((x - mean) ** 4 for x in xs) / n
    say("numeric", lab, n=n, missing=gaps or None, unparsed=bad or None, distinct=len(set(xs)), mean=mean, median=statistics.median(xs),
        sd=math.sqrt(m2), min=xs[0], max=xs[-1], skew=m3 / m2 ** 1.5 if m2 > 0 else 0.0,
        kurtosis=m4 / m2 ** 2 - 3 if m2 > 0 else 0.0)
    if n >= MIN_SHAPE_VALUES and xs[-1] > xs[0]:
        counts, centers, width = histogram(xs)
        modes = two_modes(counts, n)
        if modes:
            left, trough, right = modes
            say("shape", lab, width=width, hist=",".join(map(str, counts)), bimodal=True,
                mode1=centers[left], mode2=centers[right], trough=centers[trough],
                below_trough=sum(counts[:trough]) / n)
        else:
            say("shape", lab, width=width, hist=",".join(map(str, counts)), bimodal=False)
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive") if n > 1 else (xs[0],) * 3
    low, high = q1 - IQR_FENCE * (q3 - q1), q3 + IQR_FENCE * (q3 - q1)
    say("outliers", lab, iqr_outliers=sum(1 for x in xs if x < low or x > high), q1=q1, q3=q3, low_fence=low,
        high_fence=high, at_min=xs.count(xs[0]), at_max=xs.count(xs[-1]))  # the bounds: on the numeric line
    if target is None or col == target:
        continue
    pairs = sorted((values[i], outcome[i]) for i in values if i in outcome)
    say("relation", lab, r=pearson(pairs), n=len(pairs))
    if len(pairs) >= 6:
        t1, t2 = statistics.quantiles([x for x, _ in pairs], n=3, method="inclusive")
        low_band = [y for x, y in pairs if x <= t1]
        high_band = [y for x, y in pairs if x >= t2]
        if t1 < t2 and low_band and high_band:
            say("band", lab, low_max=max(x for x, _ in pairs if x <= t1), low_n=len(low_band),
                **{f"low_{rate_key}": statistics.fmean(low_band)}, high_min=min(x for x, _ in pairs if x >= t2),
                high_n=len(high_band), **{f"high_{rate_key}": statistics.fmean(high_band)})

# ----- categorical features
for col in features.get("CATEGORICAL_FEATURES", []):
    groups = {}
    gaps = 0
    for i, r in enumerate(rows):
        v = cell(r, col)
        if missing(v, col):
            gaps += 1
        else:
            groups.setdefault(v, []).append(i)
    lab = label(col)
    shown = sorted(groups, key=lambda g: (-len(groups[g]), g))[:MAX_GROUPS]
    say("categorical", lab, n=sum(len(v) for v in groups.values()), missing=gaps, groups=len(groups), shown=len(shown))
    stats = {}
    for g in shown:
        ys = [outcome[i] for i in groups[g] if i in outcome]
        stats[g] = statistics.fmean(ys) if ys else None
    if target is not None and any(v is not None for v in stats.values()):
        shown.sort(key=lambda g: (stats[g] is None, -(stats[g] or 0.0), -len(groups[g]), g))
    for g in shown:
        say("group", lab, value=g, n=len(groups[g]), **({rate_key: stats[g]} if target is not None else {}))

finish(len(rows), len(columns))
''')


def analysis_script(data_file: str) -> str:
    """The text of the analysis script for one CSV file (relative to the workspace root, where it runs).

    Standard library only and fast (one pass per column over a few hundred rows). The report it prints is
    what :func:`compose_findings` and :func:`compose_summary` read; it names no test and knows no task.
    """
    return _SCRIPT.substitute(
        path=data_file.replace('"', "'").replace("\\", "/"), path_repr=repr(data_file), mark=repr(ANALYSIS_MARK), end=repr(END_MARK),
        module=repr(SCHEMA_MODULE), names=repr(SCHEMA_NAMES), bins=HIST_BINS, trough_ratio=TROUGH_RATIO,
        min_mode_share=MIN_MODE_SHARE, min_shape_values=MIN_SHAPE_VALUES, iqr_fence=IQR_FENCE, max_groups=MAX_GROUPS,
    )


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


# ============================================================================= composition ====

def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _stat(x: float) -> str:
    """A computed figure (mean, median, mode): whole numbers from 1,000 on, else two decimals."""
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.2f}"


def _val(x: float) -> str:
    """A value of the data (a bound, a band's edge): as written, with thousands separated."""
    if float(x).is_integer():
        return f"{x:,.0f}"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:g}"


def _r(x: float) -> str:
    return f"{x:.3f}"


def _token(value: str | None) -> str:
    """A placeholder as its text: -1.0 -> '-1'; a text placeholder quoted."""
    if value is None:
        return "?"
    if value.startswith('"'):
        try:
            return f'"{json.loads(value)}"'
        except ValueError:
            return value
    try:
        x = float(value)
    except ValueError:
        return value
    return _val(x) if math.isfinite(x) else value


def _entry(finding: str, evidence: str) -> dict[str, str]:
    return {"finding": finding, "supporting_evidence": evidence}


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


class _Composer:
    """Templates over one report: every sentence built from the figures it holds, skipped when they are absent."""

    def __init__(self, report: Report):
        self.rep = report
        t = report.target
        self.binary = t is not None and t.flag("binary")
        self.t_name = t.name if t is not None else None
        self.numeric = report.numeric_labels()

    # ----- words
    def t_level(self, level: str) -> str:
        """'a lower <target> rate' for a binary target, 'lower <target>' otherwise."""
        return f"a {level} {self.t_name} rate" if self.binary else f"{level} {self.t_name}"

    def t_value(self, x: float) -> str:
        return _pct(x) if self.binary else _stat(x)

    @property
    def t_measure(self) -> str:
        return f"{self.t_name} rate" if self.binary else f"mean {self.t_name}"

    def name(self, lab: str) -> str:
        return Fact("", lab, {}).name

    # ----- the numbers behind the words
    def relations(self) -> list[tuple[str, float, Fact]]:
        """(label, r, fact) for every numeric feature with an r, strongest first."""
        out = [(f.label, r, f) for f in self.rep.of("relation") if (r := f.num("r")) is not None]
        return sorted(out, key=lambda x: (-abs(round(x[1], 3)), x[0]))

    @staticmethod
    def strong(r: float) -> bool:
        return abs(round(r, 3)) >= MIN_DIRECTION_R  # as written: a printed -0.100 claims a direction

    def band(self, lab: str) -> tuple[float, float, Fact] | None:
        key = "rate" if self.binary else "mean"
        b = self.rep.first("band", lab)
        if b is None or b.num(f"low_{key}") is None or b.num(f"high_{key}") is None:
            return None
        return b.num(f"low_{key}"), b.num(f"high_{key}"), b

    def band_words(self, lab: str) -> str | None:
        got = self.band(lab)
        if got is None:
            return None
        low, high, b = got
        lo_edge = f" (values up to {_val(b.num('low_max'))})" if b.num("low_max") is not None else ""
        hi_edge = f" (values from {_val(b.num('high_min'))})" if b.num("high_min") is not None else ""
        return (f"{self.t_measure} {self.t_value(low)} in the bottom third of {self.name(lab)}{lo_edge} vs "
                f"{self.t_value(high)} in the top third{hi_edge}")

    def shape(self, lab: str) -> tuple[str, str, str] | None:
        """(shape word, the claim's detail, the evidence) of a numeric feature, from its measured stats."""
        num, sh = self.rep.first("numeric", lab), self.rep.first("shape", lab)
        stats = []
        if num is not None:
            for key, word in (("mean", "mean"), ("median", "median"), ("sd", "sd")):
                if num.num(key) is not None:
                    stats.append(f"{word} {_stat(num.num(key))}")
            if num.num("min") is not None and num.num("max") is not None:
                stats.append(f"range {_val(num.num('min'))} to {_val(num.num('max'))}")
        if sh is not None and sh.flag("bimodal") and None not in (sh.num("mode1"), sh.num("mode2"), sh.num("trough")):
            hist = sh.text("hist")
            bins = len(sh.text("hist").split(",")) if sh.text("hist") else 0
            evidence = f"{bins}-bin histogram" if bins else "histogram"
            evidence += f" ({hist})" if hist else ""
            evidence += f" with peaks at bins centred on {_stat(sh.num('mode1'))} and {_stat(sh.num('mode2'))}"
            if sh.num("below_trough") is not None:
                evidence += f"; {_pct(sh.num('below_trough'))} of values lie under the trough"
            detail = (f"two modes near {_stat(sh.num('mode1'))} and {_stat(sh.num('mode2'))} with a trough near "
                      f"{_stat(sh.num('trough'))} between them")
            return "bimodal", detail, "; ".join([evidence, *stats])
        if num is None or num.num("skew") is None:
            return None
        skew, kurt = num.num("skew"), num.num("kurtosis")
        evidence = "; ".join([f"skewness {skew:.2f}"] + ([f"excess kurtosis {kurt:.2f}"] if kurt is not None else [])
                             + stats)
        if num.num("distinct") is not None and num.num("distinct") <= 2:
            return "two-valued", f"it takes only {num.num('distinct'):.0f} distinct values", evidence
        if skew >= SKEW_CUT:
            return "right-skewed", "a long tail of large values pulls the mean past the median", evidence
        if skew <= -SKEW_CUT:
            return "left-skewed", "a long tail of small values pulls the mean under the median", evidence
        if kurt is not None and kurt <= UNIFORM_KURTOSIS:
            span = (f" from {_val(num.num('min'))} to {_val(num.num('max'))}"
                    if num.num("min") is not None and num.num("max") is not None else "")
            return "roughly uniform", f"its values spread evenly{span}", evidence
        centre = f" around its mean of {_stat(num.num('mean'))}" if num.num("mean") is not None else ""
        return "roughly symmetric", f"its values lie evenly on both sides{centre}", evidence

    def categories(self) -> list[tuple[str, list[tuple[str, int, float | None]], Fact | None]]:
        """(label, [(group, n, target rate or mean)], the feature's line) per categorical feature."""
        labels = list(dict.fromkeys(f.label for f in self.rep.facts if f.kind in ("categorical", "group")))
        key = "rate" if self.binary else "mean"
        out = []
        for lab in labels:
            groups = [(g.text("value"), int(g.num("n")), g.num(key)) for g in self.rep.of("group", lab)
                      if g.text("value") is not None and g.num("n") is not None]
            out.append((lab, groups, self.rep.first("categorical", lab)))
        return out

    def extremes(self, groups) -> tuple[tuple, tuple] | None:
        rated = [g for g in groups if g[2] is not None]
        if len(rated) < 2:
            return None
        ordered = sorted(rated, key=lambda g: (-g[2], -g[1], g[0]))
        return ordered[0], ordered[-1]

    def pileups(self, lab: str) -> list[tuple[str, int, float]]:
        """('minimum'|'maximum', rows, value) for a bound far more rows sit on than on a typical value."""
        out, num = self.rep.first("outliers", lab), self.rep.first("numeric", lab)
        if out is None or num is None or not num.num("n") or not num.num("distinct"):
            return []
        typical = num.num("n") / num.num("distinct")
        found = []
        for side, key, bound in (("minimum", "at_min", "min"), ("maximum", "at_max", "max")):
            rows, value = out.num(key), num.num(bound)
            if rows is not None and value is not None and rows >= PILEUP_MIN_ROWS and rows >= PILEUP_FACTOR * typical:
                found.append((side, int(rows), value))
        return found

    def pileup_reading(self, lab: str, piles: list[tuple[str, int, float]]) -> str:
        """What a pile-up suggests: a cap when the bound lies within the feature's IQR fences, a code standing
        for something else when it lies beyond them (set apart from every measured value)."""
        out = self.rep.first("outliers", lab)
        lo, hi = (out.num("low_fence"), out.num("high_fence")) if out is not None else (None, None)
        apart = any((side == "maximum" and hi is not None and value > hi) or (side == "minimum" and lo is not None
                    and value < lo) for side, _, value in piles)
        return ("a sign of a special code rather than a measured value: it lies beyond the IQR fences"
                if apart else "a sign of capped values")

    def declared(self) -> int | None:
        """How many placeholders the schema declares (None when the report does not say)."""
        s = self.rep.first("schema", "MISSING_VALUES")
        if s is not None and s.num("entries") is not None:
            return int(s.num("entries"))
        cells = self.rep.first("cells")
        return int(cells.num("placeholders")) if cells is not None and cells.num("placeholders") is not None else None

    # ----- findings.json
    def distributions(self) -> list[dict[str, str]]:
        out = []
        t = self.rep.target
        if t is not None and self.binary and t.num("rate") is not None and t.num("n"):
            pos = f"{t.num('positives'):.0f} of {t.num('n'):.0f} rows" if t.num("positives") is not None else \
                f"{t.num('n'):.0f} rows"
            out.append(_entry(f"The target {t.label} is binary: {_pct(t.num('rate'))} of rows have {t.name} = 1.",
                              f"{pos} have {t.name} = 1 ({_pct(t.num('rate'))})."))
        elif t is not None and t.num("mean") is not None:
            out.append(_entry(f"The target {t.label} has a mean of {_stat(t.num('mean'))}.",
                              f"mean {_stat(t.num('mean'))} over {t.num('n') or 0:.0f} rows."))
        for lab in self.numeric:
            got = self.shape(lab)
            if got:
                word, detail, evidence = got
                out.append(_entry(f"The distribution of {lab} is {word}: {detail}.", evidence + "."))
        for lab, groups, info in self.categories():
            if len(groups) < 2:
                continue
            total = sum(n for _, n, _ in groups)
            big = sorted(groups, key=lambda g: (-g[1], g[0]))
            count = f"{info.num('groups'):.0f}" if info is not None and info.num("groups") is not None else str(len(groups))
            out.append(_entry(
                f"{lab} has {count} groups; the largest is {big[0][0]} and the smallest {big[-1][0]}.",
                "rows per group: " + ", ".join(f"{g} {n} ({_pct(n / total)})" for g, n, _ in big) + "."))
        return out

    def relationships(self) -> list[dict[str, str]]:
        out = []
        rels = self.relations()
        for rank, (lab, r, fact) in enumerate(rels):
            name = self.name(lab)
            rows = f" over {fact.num('n'):.0f} rows with both values" if fact.num("n") is not None else ""
            band = self.band_words(lab)
            evidence = f"Pearson r = {_r(r)}{rows}" + (f"; {band}" if band else "") + "."
            if self.strong(r):
                sign, level = ("negatively", "lower") if r < 0 else ("positively", "higher")
                claim = f"{lab} is {sign} related to {self.t_name}: higher {name} goes with {self.t_level(level)}"
                if rank == 0 and len(rels) > 1:
                    claim += f"; it is the strongest relationship of the {len(rels)} numeric features"
                out.append(_entry(claim + ".", evidence))
            else:
                out.append(_entry(f"{lab} shows no clear relationship with {self.t_name}; the correlation is too "
                                  "weak to give a direction.", evidence))
        return out

    def subgroups(self) -> list[dict[str, str]]:
        out = []
        for lab, groups, _ in self.categories():
            ends = self.extremes(groups)
            if ends is None:
                continue
            (hi, hi_n, hi_v), (lo, lo_n, lo_v) = ends
            listing = ", ".join(f"{g} {self.t_value(v)} (n={n})" for g, n, v in groups if v is not None)
            out.append(_entry(
                f"The {self.t_measure} differs by {lab}: {hi} has the highest {self.t_measure} ({self.t_value(hi_v)}) "
                f"and {lo} the lowest ({self.t_value(lo_v)}).",
                f"{self.t_measure} by {self.name(lab)}: {listing}."))
        rels = self.relations()
        chosen = [lab for lab, r, _ in rels if self.strong(r) and self.band(lab)]
        if not chosen:  # no clear relationship: the widest gap between a feature's thirds is still a subgroup fact
            gaps = sorted(((abs(b[0] - b[1]), lab) for lab in self.numeric if (b := self.band(lab))), key=lambda x: (-x[0], x[1]))
            chosen = [gaps[0][1]] if gaps else []
        for lab in chosen:
            low, high, b = self.band(lab)
            counts = (f" (n={b.num('low_n'):.0f} and n={b.num('high_n'):.0f})"
                      if b.num("low_n") is not None and b.num("high_n") is not None else "")
            gap = f"; a gap of {100 * abs(low - high):.1f} percentage points" if self.binary else ""
            out.append(_entry(
                f"The {self.t_measure} differs between the bottom and top thirds of {lab}: {self.t_value(low)} vs "
                f"{self.t_value(high)}.",
                f"{self.band_words(lab)}{counts}{gap}."))
        return out

    def outliers(self) -> list[dict[str, str]]:
        out = []
        facts = [f for f in self.rep.of("outliers") if f.num("iqr_outliers") is not None]
        if facts:
            flagged = [f for f in facts if f.num("iqr_outliers") > 0]
            listing = ", ".join(f"{f.label} {f.num('iqr_outliers'):.0f}" for f in facts)
            if flagged:
                claim = (f"{len(flagged)} of {len(facts)} numeric features {'has' if len(flagged) == 1 else 'have'} "
                         f"values beyond the {IQR_FENCE:g} x IQR fences: {_join([f.label for f in flagged])}.")
            elif len(facts) == 1:
                claim = f"The only numeric feature, {facts[0].label}, has no values beyond its {IQR_FENCE:g} x IQR fences."
            else:
                claim = f"None of the {len(facts)} numeric features has values beyond the {IQR_FENCE:g} x IQR fences."
            out.append(_entry(claim, f"outliers per feature under the {IQR_FENCE:g} x IQR rule: {listing}."))
            for f in flagged:
                fences = (f" (under {_val(f.num('low_fence'))} or over {_val(f.num('high_fence'))})"
                          if f.num("low_fence") is not None and f.num("high_fence") is not None else "")
                quartiles = (f"quartiles {_val(f.num('q1'))} and {_val(f.num('q3'))}; "
                             if f.num("q1") is not None and f.num("q3") is not None else "")
                out.append(_entry(f"{f.label} has {f.num('iqr_outliers'):.0f} outliers beyond its {IQR_FENCE:g} x IQR "
                                  f"fences{fences}.",
                                  f"{quartiles}{f.num('iqr_outliers'):.0f} values lie outside the fences."))
        for lab in self.numeric:
            piles = self.pileups(lab)
            if not piles:
                continue
            num = self.rep.first("numeric", lab)
            bounds = _join([f"{side} {_val(value)}" for side, _, value in piles])
            rows = _join([f"{rows} rows sit exactly at {_val(value)}" for _, rows, value in piles])
            out.append(_entry(
                f"{lab} piles up at its {bounds}, {self.pileup_reading(lab, piles)}.",
                f"{rows}; a typical value of {self.name(lab)} occurs {num.num('n') / num.num('distinct'):.1f} times "
                f"({num.num('n'):.0f} values, {num.num('distinct'):.0f} distinct)."))
        return out

    def missing(self) -> list[dict[str, str]]:
        out = []
        for p in self.rep.of("placeholder"):
            rows, total = p.num("rows"), p.num("total")
            if rows is None or total is None:
                continue
            value = _token(p.fields.get("value"))
            share = p.num("share") if p.num("share") is not None else (rows / total if total else 0.0)
            evidence = f"{rows:.0f} of {total:.0f} rows ({_pct(share)}) hold {value}."
            if rows:
                out.append(_entry(f"{p.label} uses the placeholder {value} for a missing value: those rows are "
                                  f"treated as missing and left out of every {p.name} figure.", evidence))
            else:
                out.append(_entry(f"The placeholder {value} declared for {p.label} does not occur in the data.", evidence))
        for lab in self.numeric:
            num = self.rep.first("numeric", lab)
            if num is not None and num.num("unparsed"):
                out.append(_entry(
                    f"{lab} holds {num.num('unparsed'):.0f} cells that are neither numbers nor a declared placeholder; "
                    "they are left out of its figures.",
                    f"{num.num('unparsed'):.0f} unreadable cells besides {num.num('n') or 0:.0f} numbers."))
        cells = self.rep.first("cells")
        if cells is not None and cells.num("empty") is not None and cells.num("total") is not None:
            empty, total = cells.num("empty"), cells.num("total")
            if empty:
                per = ", ".join(f"{e.label} {e.num('cells'):.0f}" for e in self.rep.of("empty") if e.num("cells") is not None)
                rows = f" in {cells.num('rows_with_empty'):.0f} rows" if cells.num("rows_with_empty") is not None else ""
                out.append(_entry(f"{empty:.0f} cells are empty; they are treated as missing.",
                                  f"{empty:.0f} of {total:,.0f} cells ({_pct(empty / total if total else 0.0)}) are empty"
                                  f"{rows}" + (f": {per}." if per else ".")))
            elif not self.declared():
                out.append(_entry("No missing values were found: the schema declares no placeholder and no cell is "
                                  "empty.", f"0 of {total:,.0f} cells are empty; 0 placeholders declared."))
            else:
                out.append(_entry("Apart from the declared placeholders, no value is missing: no cell is empty.",
                                  f"0 of {total:,.0f} cells are empty."))
        return out

    def findings(self) -> dict[str, list[dict[str, str]]]:
        rows = f"{self.rep.rows} rows of {self.rep.file}"
        t = self.t_name or "the target"
        fallback = {
            "distributions": _entry("The analysis reported no distribution.", f"0 features described over {rows}."),
            "relationships": _entry(f"No relationship with {t} could be measured from the analysis.",
                                    f"0 numeric features compared with {t} over {rows}."),
            "subgroup_effects": _entry(f"No subgroup comparison of {t} could be made from the analysis.",
                                       f"0 groups compared over {rows}."),
            "outliers": _entry("The analysis reported no outlier count.", f"0 numeric features checked over {rows}."),
            "missing_data": _entry("The analysis reported no missing-data count.", f"0 cells counted over {rows}."),
        }
        made = {"distributions": self.distributions(), "relationships": self.relationships(),
                "subgroup_effects": self.subgroups(), "outliers": self.outliers(), "missing_data": self.missing()}
        return {k: made[k] or [fallback[k]] for k in FINDING_KEYS}

    # ----- summary.txt
    def summary(self) -> str:
        """The narrative. It never uses the word "placeholder": a reader of a summary takes it for unfinished text."""
        rep, t = self.rep, self.rep.target
        paras: list[str] = []
        intro = f"This analysis covers {rep.rows} rows and {rep.columns} columns of {rep.file}."
        if t is not None and self.binary and t.num("rate") is not None and t.num("n"):
            intro += (f" The target is {t.label}, a binary outcome: {t.num('positives') or 0:.0f} of "
                      f"{t.num('n'):.0f} rows ({_pct(t.num('rate'))}) have {t.name} = 1, so the overall "
                      f"{t.name} rate is {_pct(t.num('rate'))}.")
        elif t is not None and t.num("mean") is not None:
            intro += f" The target is {t.label}, with a mean of {_stat(t.num('mean'))}."
        else:
            intro += " The report names no target, so no driver of an outcome could be measured."
        paras.append(intro)

        drivers, weak = [], []
        for lab, r, _ in self.relations():
            if not self.strong(r):
                weak.append(f"{lab} with r = {_r(r)}")
                continue
            sign, level = ("negatively", "lower") if r < 0 else ("positively", "higher")
            got = self.band(lab)
            bands = f" ({self.t_value(got[0])} in its bottom third against {self.t_value(got[1])} in its top third)" \
                if got else ""
            consequence = f"higher {self.name(lab)} goes with {self.t_level(level)}{bands}"
            if not drivers:
                drivers.append(f"The strongest driver of {self.t_name} is {lab}: it is {sign} related to {self.t_name} "
                               f"(r = {_r(r)}), so {consequence}.")
            else:
                drivers.append(f"Next comes {lab}, {sign} related to {self.t_name} (r = {_r(r)}): {consequence}.")
        if weak:
            head = "The other numeric features show" if drivers else "No numeric feature shows"
            drivers.append(f"{head} no clear relationship with {self.t_name}: {_join(weak)}.")
        if drivers:
            paras.append(" ".join(drivers))

        groups = []
        for lab, g, _ in self.categories():
            ends = self.extremes(g)
            if ends:
                (hi, _, hi_v), (lo, _, lo_v) = ends
                groups.append(f"Across {lab}, the {self.t_measure} is highest in {hi} ({self.t_value(hi_v)}) and lowest "
                              f"in {lo} ({self.t_value(lo_v)}), out of {len(g)} groups.")
        if groups:
            paras.append(" ".join(groups))

        shapes = []
        for lab in self.numeric:
            got = self.shape(lab)
            if got:
                shapes.append(f"The distribution of {lab} is {got[0]}: {got[1]}.")
        facts = [f for f in rep.of("outliers") if f.num("iqr_outliers") is not None]
        if facts:
            flagged = [f"{f.label} with {f.num('iqr_outliers'):.0f}" for f in facts if f.num("iqr_outliers") > 0]
            verb = "has" if len(flagged) == 1 else "have"
            shapes.append(f"Under the {IQR_FENCE:g} x IQR rule, {len(flagged)} of {len(facts)} numeric features {verb} "
                          "outliers" + (f": {_join(flagged)}." if flagged else "."))
        for lab in self.numeric:
            piles = self.pileups(lab)
            if piles:
                shapes.append(f"Values of {lab} pile up at "
                              + _join([f"the {side} {_val(v)} ({rows} rows)" for side, rows, v in piles])
                              + f", {self.pileup_reading(lab, piles)}.")
        if shapes:
            paras.append(" ".join(shapes))

        missing = []
        for p in rep.of("placeholder"):
            if p.num("rows") is not None and p.num("total"):
                missing.append(f"{p.num('rows'):.0f} of {p.num('total'):.0f} rows ({_pct(p.num('rows') / p.num('total'))}) "
                               f"hold the missing-value code {_token(p.fields.get('value'))} in {p.label}; they are treated as "
                               "missing.")
        cells = rep.first("cells")
        if cells is not None and cells.num("empty") is not None and cells.num("total") is not None:
            if cells.num("empty"):
                missing.append(f"{cells.num('empty'):.0f} of {cells.num('total'):.0f} cells are empty and are treated "
                               "as missing too." if missing else
                               f"{cells.num('empty'):.0f} of {cells.num('total'):.0f} cells are empty and are treated as "
                               "missing.")
            elif not missing:
                missing.append("No missing values were found: no missing-value code is declared and none of the "
                               f"{cells.num('total'):,.0f} cells is empty.")
        if missing:
            paras.append(" ".join(missing))

        paras.append(
            f"Method: every figure comes from the analysis script's report on {rep.file}, run with the team's shared "
            "schema. Declared missing-value codes and empty cells count as missing and are left out of each figure. A "
            "relationship is Pearson's correlation with the target over the rows where both values are present, and "
            "its direction is stated only when the coefficient is at least a tenth in size; the bottom and top "
            f"thirds of each feature show the same comparison in {'rates' if self.binary else 'means'}. A distribution's shape comes from its "
            "skewness, its kurtosis and a histogram, and outliers lie beyond one and a half interquartile ranges "
            "from the quartiles.")
        absent = [what for what, there in (("the target", t is not None), ("numeric features", bool(self.numeric)),
                                           ("categorical features", bool(self.categories())),
                                           ("missing data", cells is not None)) if not there]
        if absent or not rep.complete:
            paras.append("The report gave no figures for " + (_join(absent) if absent else "its last part")
                         + "; running the analysis script again with a complete schema would fill them in.")
        rels = [x for x in self.relations() if self.strong(x[1])]
        if rels:
            paras.append(f"To act on these figures, start with {rels[0][0]}, the strongest driver of {self.t_name}.")
        return "\n\n".join(paras) + "\n"


def compose_findings(report: str) -> str | None:
    """findings.json text from an analysis report (the last one in ``report``), or None when there is none.

    A JSON object with the five keys, each a non-empty list of ``{"finding", "supporting_evidence"}`` (a
    category the report holds nothing for gets one entry saying so, with the figures it does hold); sorted
    keys, two-space indent, a final newline. Never raises on text cut anywhere.
    """
    parsed = parse_report(report)
    if parsed is None:
        return None
    return json.dumps(_Composer(parsed).findings(), indent=2, sort_keys=True) + "\n"


def compose_summary(report: str) -> str | None:
    """summary.txt text from an analysis report (the last one in ``report``), or None when there is none.

    A narrative for a manager of at least :data:`MIN_SUMMARY_WORDS` words: the target and its rate, the drivers
    in order of strength with their direction, the subgroups with the highest and the lowest rate, the
    distributions, outliers and missing data, and how the figures were made.
    """
    parsed = parse_report(report)
    if parsed is None:
        return None
    return _Composer(parsed).summary()


__all__ = ["ANALYSIS_MARK", "END_MARK", "Fact", "Report", "analysis_path", "analysis_script", "compose_findings",
           "compose_summary", "parse_report"]
