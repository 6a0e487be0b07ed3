"""A trial's state at each round's end, saved in its run directory (``state.jsonl``), so that a fork at round k
starts from it instead of running k rounds again.

One line per round's end (round 0: after planning): the team's state (:meth:`~latte_lab.teams.engine.Team.state`:
its agents, graph, counters, outcome, clock, its subclass's own attributes), its workspace's files and write log
(:meth:`~latte_lab.workspace.Workspace.state`), the ledger's rows since the line before, whether the team said it
had finished, and how many lines the run directory's append-only files held then (events, snapshots, calls). A
fork reads the line of its round and the lines before it, copies those prefixes of its parent's files, and
restores the team (:func:`restore_team`).

The values are JSON (compressed, in base64, one blob per line), written compactly: a text longer than :data:`SHORT_TEXT` characters is written once in the
file and named by number afterwards (an agent's history repeats in every round); an immutable record (a message,
a test run, a write) likewise. Only the classes of :data:`CLASSES` are written and read back; a team holding
anything else (a user's team with an object of its own) saves a line saying so (``unsaved``), and a fork of it
replays its parent's rounds from the cassette instead. Nothing in the file is ever executed.

>>> codec = Codec()
>>> line = codec.encode({"a": (1, "x" * 60), "b": {"y", "z"} and ["l"]})
>>> line["texts"], Codec().decode_line(line)
([[0, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx']], {'a': (1, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'), 'b': ['l']})
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import math
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from latte_lab import rundir
from latte_lab.errors import DataError
from latte_lab.graph import CoordinationGraph
from latte_lab.graph._nodes import Status
from latte_lab.models.base import Message
from latte_lab.sandbox.pytest import TestRun
from latte_lab.sandbox.run import RunResult
from latte_lab.teams.clock import VirtualClock
from latte_lab.teams.engine import Agent, Outcome
from latte_lab.workspace.files import WriteRecord

STATE_FORMAT = 1  # bumped when a line's layout changes; a fork of a run with another format replays instead
SHORT_TEXT = 48  # characters: a longer text is written once per file and named by number
ZLIB_LEVEL = 6  # compression of a line's state (zlib's own default)
# The classes a state may hold, by the name a line gives them. Frozen ones (records that never change) are written
# once per file; the others in every line that holds them.
CLASSES: dict[str, type] = {cls.__name__: cls for cls in (Agent, Outcome, Message, TestRun, RunResult, WriteRecord,
                                                          VirtualClock)}
FROZEN = (Message, TestRun, RunResult, WriteRecord)
ENUMS: dict[str, type[enum.Enum]] = {"Status": Status}


class Unsaveable(Exception):
    """The state holds a value :class:`Codec` does not write."""


class Codec:
    """Encodes states into lines and decodes them back, keeping the numbered texts and records of the lines
    written (or read) so far. A value is JSON: a short string, a number, true/false/null as they are; anything
    else a list tagged by its first element: ``["x", n]`` text n, ``["p", n]`` record n, ``["r", n]`` the n-th
    container of this line again (shared objects stay shared), ``["l", ...]`` list, ``["t", ...]`` tuple,
    ``["s", ...]`` set, ``["d", k, v, ...]`` dict, ``["o", class, {attribute: value}]`` object, ``["e", enum,
    value]``, ``["u", text]`` bytes that are UTF-8 text, ``["b", base64]`` other bytes, ``["g", state, [record,
    ...]]`` a coordination graph (its log as records), ``["n", "nan"]`` a float that JSON has no number for."""

    def __init__(self):
        self.texts: dict[str, int] = {}
        self.records: dict[int, tuple[object, int]] = {}  # id -> (the record, kept alive; its number)
        self._text_list: list[str] = []
        self._record_list: list[object] = []

    # ----- writing -----

    def encode(self, value) -> dict:
        """One line: ``{"texts": new texts, "records": new records, "value": value}``."""
        self._new_texts: list[list] = []
        self._new_records: list[list] = []
        self._line: dict[int, int] = {}
        self._keep: list[object] = []  # what the line numbers by id stays alive until the line is written
        encoded = self._value(value)
        return {"texts": self._new_texts, "records": self._new_records, "value": encoded}

    def _text(self, text: str):
        if len(text) <= SHORT_TEXT:
            return text
        n = self.texts.get(text)
        if n is None:
            n = self.texts[text] = len(self.texts)
            self._new_texts.append([n, text])
        return ["x", n]

    def _value(self, value):
        kind = type(value)
        if kind is str:
            return self._text(value)
        if value is None or kind is bool or kind is int:
            return value
        if kind is float:
            return value if math.isfinite(value) else ["n", repr(value)]
        if kind is tuple:
            return ["t", *[self._value(v) for v in value]]
        if kind is bytes:
            try:  # a workspace's files are text nearly always: named by number as texts are
                return ["u", self._text(value.decode("utf-8"))]
            except UnicodeDecodeError:
                return ["b", base64.b64encode(value).decode("ascii")]
        if isinstance(value, enum.Enum):
            if type(value).__name__ not in ENUMS:
                raise Unsaveable(f"an enum of type {type(value).__name__}")
            return ["e", type(value).__name__, value.value]
        if isinstance(value, FROZEN):
            return self._record(value)
        seen = self._line.get(id(value))
        if seen is not None:
            return ["r", seen]
        self._line[id(value)] = len(self._line)
        self._keep.append(value)
        if kind is list:
            return ["l", *[self._value(v) for v in value]]
        if kind is dict:
            out = ["d"]
            for k, v in value.items():
                out += [self._value(k), self._value(v)]
            return out
        if kind is set or kind is frozenset:
            return ["s" if kind is set else "f", *[self._value(v) for v in value]]
        if kind is CoordinationGraph:
            state = value.state()
            log = state.pop("log")  # append-only, and no entry changes once in it: each entry written once
            return ["g", self._value(state), [self._record(entry)[1] for entry in log]]
        if kind.__name__ in CLASSES and CLASSES[kind.__name__] is kind:
            return ["o", kind.__name__, {name: self._value(v) for name, v in _fields(value).items()}]
        raise Unsaveable(f"a value of type {kind.__module__}.{kind.__qualname__}")

    def _record(self, value):
        """A value that never changes once made (a frozen record, an entry of a graph's log): written once per file,
        named by number afterwards. Its containers are numbered apart from the line's (a record is read back
        before the line's value is)."""
        held = self.records.get(id(value))
        if held is not None and held[0] is value:
            return ["p", held[1]]
        line, self._line = self._line, {}
        try:
            if isinstance(value, FROZEN):
                encoded = [type(value).__name__, {name: self._value(v) for name, v in _fields(value).items()}]
            else:
                encoded = ["=", self._value(value)]
        finally:
            self._line = line
        n = len(self._record_list)
        self._record_list.append(value)
        self.records[id(value)] = (value, n)
        self._new_records.append([n, *encoded])
        return ["p", n]

    # ----- reading -----

    def decode_line(self, line: dict):
        """The value of one line, after taking its texts and records (read the lines before it first, in order,
        with :meth:`take`, for the texts and records they define)."""
        self.take(line)
        self._decoded: list[object] = []
        return self._decode(line["value"])

    def take(self, line: dict) -> None:
        """Learn the texts and records a line defines (without decoding its value)."""
        for n, text in line.get("texts", ()):
            if n != len(self._text_list):
                raise DataError(f"text {n} out of order")
            self._text_list.append(text)
        for n, name, fields in line.get("records", ()):
            if n != len(self._record_list) or (name != "=" and name not in CLASSES):
                raise DataError(f"record {n} ({name}) out of order or of an unknown class")
            self._decoded = []
            if name == "=":
                self._record_list.append(self._decode(fields))
            else:
                self._record_list.append(_build(CLASSES[name], {k: self._decode(v) for k, v in fields.items()}))

    def _decode(self, value):
        if not isinstance(value, list):
            return value
        tag, rest = value[0], value[1:]
        if tag == "x":
            return self._text_list[rest[0]]
        if tag == "p":
            return self._record_list[rest[0]]
        if tag == "r":
            return self._decoded[rest[0]]
        if tag == "t":
            return tuple(self._decode(v) for v in rest)
        if tag == "n":
            return float(rest[0])
        if tag == "b":
            return base64.b64decode(rest[0])
        if tag == "u":
            return self._decode(rest[0]).encode("utf-8")
        if tag == "e":
            return ENUMS[rest[0]](rest[1])
        if tag == "l":
            out: list = []
            self._decoded.append(out)
            out.extend(self._decode(v) for v in rest)
            return out
        if tag == "d":
            d: dict = {}
            self._decoded.append(d)
            for i in range(0, len(rest), 2):
                d[self._decode(rest[i])] = self._decode(rest[i + 1])
            return d
        if tag in ("s", "f"):
            slot = len(self._decoded)
            self._decoded.append(None)
            items = [self._decode(v) for v in rest]
            made = set(items) if tag == "s" else frozenset(items)
            self._decoded[slot] = made
            return made
        if tag == "g":
            slot = len(self._decoded)
            self._decoded.append(None)
            state = self._decode(rest[0])
            state["log"] = [self._record_list[n] for n in rest[1]]
            graph = CoordinationGraph.from_state(state)
            self._decoded[slot] = graph
            return graph
        if tag == "o":
            cls = CLASSES.get(rest[0])
            if cls is None:
                raise DataError(f"an object of an unknown class {rest[0]!r}")
            obj = cls.__new__(cls)
            self._decoded.append(obj)
            for name, v in rest[1].items():
                object.__setattr__(obj, name, self._decode(v))
            return obj
        raise DataError(f"an unknown tag {tag!r}")


def _fields(value) -> dict[str, Any]:
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return dict(vars(value))


def _build(cls: type, fields: dict):
    obj = cls.__new__(cls)
    for name, v in fields.items():
        object.__setattr__(obj, name, v)
    return obj


# --- the state file --------------------------------------------------------------------------------------------


class StateWriter:
    """Appends the state of a trial at each round's end to its run directory's ``state.jsonl``."""

    def __init__(self, writer: rundir.RunWriter):
        self.path = writer.path / rundir.STATE_FILE
        self._writer = writer
        self._codec = Codec()
        self._ledger_rows = 0
        self._broken: str | None = None

    def save(self, round: int, team, counts: dict[str, int], finished: bool) -> None:
        """The line of round ``round``; ``counts``: lines of the run directory's append-only files so far."""
        rows = team.ledger.rows()
        line: dict[str, Any] = {"format": STATE_FORMAT, "round": round, "finished": finished, "counts": counts,
                                "ledger": rows[self._ledger_rows:]}
        self._ledger_rows = len(rows)
        workspace = team.ws.state()
        if self._broken is None and workspace is None:
            self._broken = "the workspace holds a special file"
        if self._broken is None:
            try:
                line["state"] = _pack(self._codec.encode({"team": team.state(), "workspace": workspace}))
            except Unsaveable as exc:  # from here on every line says so: the codec's numbering stopped here
                self._broken = f"the team holds {exc}"
            except Exception as exc:  # noqa: BLE001 - a state that cannot be saved never fails its trial
                self._broken = f"the state could not be written ({type(exc).__name__}: {exc})"
        if self._broken is not None:
            line["unsaved"] = self._broken
        self._writer.append_state(line)

    def resume(self, saved: SavedState, codec: Codec, parent_dir: Path) -> None:
        """A fork's writer: its file starts with its parent's lines up to the fork round (a fork of the fork may
        start from any of them), and goes on numbering texts and records where they stopped (``codec``, the one
        :func:`read_state` read them with)."""
        lines = []
        with open(Path(parent_dir) / rundir.STATE_FILE, encoding="utf-8") as fh:
            for text in fh:
                lines.append(text if text.endswith("\n") else text + "\n")
                if json.loads(text)["round"] == saved.round:
                    break
        self._writer.append_state_lines("".join(lines))
        codec.texts = {text: n for n, text in enumerate(codec._text_list)}
        codec.records = {id(obj): (obj, n) for n, obj in enumerate(codec._record_list)}
        self._codec = codec
        self._ledger_rows = len(saved.ledger)


class SavedState:
    """The state of a recorded trial at the end of one round, decoded (see :func:`read_state`)."""

    def __init__(self, round: int, finished: bool, counts: dict, team: dict, workspace: dict, ledger: list[dict]):
        self.round, self.finished, self.counts = round, finished, counts
        self.team, self.workspace, self.ledger = team, workspace, ledger


def _pack(encoded: dict) -> str:
    """A line's encoded state as compressed JSON in base64 (its texts are mostly files, test output and prompts,
    which compress about sixfold)."""
    return base64.b64encode(zlib.compress(json.dumps(encoded, ensure_ascii=False).encode("utf-8", "surrogatepass"),
                                          ZLIB_LEVEL)).decode("ascii")


def _unpack(packed: str) -> dict:
    return json.loads(zlib.decompress(base64.b64decode(packed)).decode("utf-8", "surrogatepass"))


def _lines(run_dir: Path) -> Iterator[dict]:
    return rundir.iter_jsonl(Path(run_dir) / rundir.STATE_FILE)


def read_state(run_dir: str | Path, round: int, codec: Codec | None = None) -> SavedState | None:
    """The state the trial in ``run_dir`` saved at the end of round ``round``; None when it saved none (an older
    run directory, a team whose state could not be written, a file cut short or damaged). ``codec`` keeps the
    texts and records read (a fork's :class:`StateWriter` goes on from them)."""
    codec, ledger = codec if codec is not None else Codec(), []
    try:
        for line in _lines(Path(run_dir)):
            if line.get("format") != STATE_FORMAT or "unsaved" in line:
                return None
            ledger += line["ledger"]
            if line["round"] == round:
                value = codec.decode_line(_unpack(line["state"]))
                return SavedState(round, bool(line["finished"]), dict(line["counts"]), value["team"],
                                  value["workspace"], ledger)
            codec.take(_unpack(line["state"]))
    except (OSError, DataError, KeyError, TypeError, ValueError, IndexError, zlib.error):
        return None
    return None


def restore_team(team, saved: SavedState, parent_records: list[dict]) -> None:
    """Make ``team`` (built for the fork, not set up) and its workspace what the parent's were at the end of
    ``saved.round``; its ledger gets the parent's rows up to then, as replayed calls (as a fork that replays its
    parent's rounds from the cassette records them: nothing billed now)."""
    team.ws.restore(saved.workspace)
    team.restore(saved.team, parent_records)
    for row in saved.ledger:
        team.ledger.restore_row(replayed(row))


def replayed(row: dict) -> dict:
    """A ledger row as a call served from a cassette records it: cached, nothing billed, no dollars where the model
    has a price (NaN where it has none)."""
    listed = row.get("list_dollars")
    unpriced = listed is None or (isinstance(listed, float) and math.isnan(listed))
    return {**row, "cached": True, "billed_input_tokens": 0, "billed_output_tokens": 0,
            "dollars": math.nan if unpriced else 0.0}
