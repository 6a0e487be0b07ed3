"""Cassettes: the calls one trial made, one JSON line each, so the trial replays from that file alone.

A run directory's ``calls.jsonl`` is a cassette. Lines are appended as calls finish (from several
threads, under a lock), each whole or not at all. Replay looks calls up by (agent, call_index), not by line
order, because concurrent calls finish in any order, then checks the full request key so a changed
prompt is reported instead of silently answered with a stale reply.

A prompt repeats its agent's earlier messages at every call, so each message is written once: a call line
holds the messages no earlier line held, numbered (``"new_messages": [[n, role, content], ...]``), and
names the system prompt (``request["system_id"]``, a message of role ``system``), the prompt's messages
(``request["message_ids"]``) and the reply (``response["text_id"]``, which the agent's next prompt
repeats) by number. :func:`read_cassette` gives every line back whole (``system``, ``messages`` as
``[role, content]`` pairs, the reply's ``text``), for lines written either way. A cassette has one writer
at a time (a second one is refused while the first holds the file); a number defined again later (a
cassette appended to by a second writer after the first) means its latest definition. A text holding code
points UTF-8 cannot encode (a lone surrogate) is written with their JSON escapes and reads back the same.
"""

from __future__ import annotations

import fcntl
import glob
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Self

from latte_lab import rundir
from latte_lab.errors import CacheMissError, DataError, LatteError
from latte_lab.models.base import ModelRequest, ModelResponse, Usage
from latte_lab.models.cache import ResponseCache
from latte_lab.models.keys import only_key_shapes, redact, redact_key_shapes
from latte_lab.models.request_keys import (
    MESSAGE_PIECES,
    canonical_json,
    diff_fields,
    escape_surrogates,
    key_and_parts,
    key_fields,
    key_from_fields,
    object_json,
    request_from_fields,
    value_json,
)
from latte_lab.models.request_keys import _message_json as message_json

CASSETTE_NAME = rundir.CALLS_FILE  # the cassette's file name inside a run directory
_CALL_JSON = '"call"'


class Cassette:
    """Appends one line per call to ``path`` (created with its parent directories).

    Each line is written whole or not at all. When the disk is full the first failed write raises
    :class:`~latte_lab.rundir.format.DiskFullError` (the trial stops) and later calls are no longer recorded, so
    the file stays a readable prefix of the trial.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._appender: rundir.JsonlAppender | None = None
        self._numbers: dict[str, int] = {}  # each message written, by its JSON: its number in this file
        self.disk_full: str | None = None
        self.lines = 0  # lines written by this writer

    def __repr__(self) -> str:
        return f"Cassette({str(self.path)!r})"

    def _write(self, record: dict) -> None:
        self._write_line(canonical_json(record))

    def _write_line(self, text: str, *, redacted: bool = False) -> None:
        line = (text if redacted else redact(text)) + "\n"
        with self._lock:
            self._append(line)

    def _append(self, line: str) -> bool:
        """Appends one line (the lock held); False when the disk filled up earlier and nothing is written."""
        if self.disk_full is not None:
            return False
        try:
            if self._appender is None:
                self._appender = self._open()
            try:
                self._appender.append_text(line)
            except UnicodeEncodeError:  # a lone surrogate in a reply: its JSON escape reads back the same
                self._appender.append_text(escape_surrogates(line))
            self.lines += line.count("\n")
        except OSError as exc:
            if not rundir.is_disk_full(exc):
                raise
            self.disk_full = rundir.disk_full_message(self.path.parent, exc)
            raise rundir.DiskFullError(self.disk_full) from None
        return True

    def _open(self) -> rundir.JsonlAppender:
        """The file, held by this writer alone while it is open: its lines name messages by the numbers
        this writer gave, so a second writer at the same time would make them ambiguous."""
        appender = rundir.JsonlAppender(self.path)
        try:
            fcntl.flock(appender.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            appender.close()
            raise LatteError(f"{self.path} is being written by another cassette; each trial records its calls "
                             "in a run directory of its own") from None
        except OSError:  # a file system without locks: one writer is the rule anyway
            pass
        return appender

    def record(self, request: ModelRequest, response: ModelResponse) -> None:
        # canonical_json of the line, redacted, with the prompt encoded once (for the key and the line) and,
        # when only key shapes are masked, each message masked once (they recur every call)
        by_piece = only_key_shapes()
        key, request_parts = key_and_parts(key_fields(request))
        messages = request_parts.pop(MESSAGE_PIECES)
        del request_parts["system"]  # named by number, as the messages are (see the module docstring)
        system, reply = message_json("system", request.system), message_json("assistant", response.text)
        usage = response.usage
        response_parts = {
            "usage": object_json({"input_tokens": value_json(usage.input_tokens),
                                  "output_tokens": value_json(usage.output_tokens)}),
            "latency_s": value_json(response.latency_s),
            "finish_reason": value_json(response.finish_reason),
            "model": value_json(response.model),
            "cached": value_json(response.cached),
        }
        parts = {"type": _CALL_JSON, "key": value_json(key), "scope": request_parts["scope"]}
        mask = redact_key_shapes if by_piece else _as_is
        if by_piece:
            parts = {k: mask(v) for k, v in parts.items()}
            request_parts = {k: mask(v) for k, v in request_parts.items()}
            response_parts = {k: mask(v) for k, v in response_parts.items()}
        with self._lock:  # numbers are given in the order the lines reach the file
            if self.disk_full is not None:
                return
            numbers, added = self._numbers, []

            def number(piece: str) -> str:
                n = numbers.get(piece)
                if n is None:
                    n = numbers[piece] = len(numbers)
                    added.append(piece)
                return str(n)

            request_parts["system_id"] = number(system)
            request_parts["message_ids"] = "[" + ",".join([number(piece) for piece in messages]) + "]"
            response_parts["text_id"] = number(reply)  # the agent's next prompt repeats it: written once
            parts["request"] = object_json(request_parts)
            parts["response"] = object_json(response_parts)
            parts["new_messages"] = "[" + ",".join([f"[{numbers[p]},{mask(p)[1:]}" for p in added]) + "]"
            line = object_json(parts)
            try:
                self._append((line if by_piece else redact(line)) + "\n")
            except BaseException:
                for piece in added:  # not on disk: a later line that needs them holds them
                    del numbers[piece]
                raise

    def copy_lines(self, source: str | os.PathLike, n: int) -> None:
        """Start with the first ``n`` lines of another cassette (a fork's parent's calls up to its fork point),
        as they are. The numbers they give messages are theirs; this writer's own lines define theirs again, so
        the file reads back whole (a number means its latest definition)."""
        lines = []
        if n > 0:
            with open(source, encoding="utf-8", newline="") as fh:
                for line in fh:
                    if len(lines) == n:
                        break
                    lines.append(line if line.endswith("\n") else line + "\n")
        if len(lines) != n:
            raise DataError(f"{source} holds {len(lines)} lines, not the {n} its trial's saved state counts")
        with self._lock:
            self._append("".join(lines))

    def record_error(self, request: ModelRequest, error: BaseException) -> None:
        """Note a failed call (replay ignores these lines; they explain gaps when reading a run)."""
        self._write({
            "type": "error",
            "scope": request.scope.as_dict(),
            "error": type(error).__name__,
            "message": str(error),
        })

    def close(self) -> None:
        with self._lock:
            if self._appender is not None:
                self._appender.close()
                self._appender = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _as_is(text: str) -> str:
    return text


def _resolve(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p / CASSETTE_NAME if p.is_dir() else p


def read_cassette(path: str | os.PathLike) -> list[dict]:
    """Every line of a cassette (a ``calls.jsonl`` file or a run directory holding one), in file order, each
    call whole: ``request["messages"]`` as ``[role, content]`` pairs, however the line names them.

    A damaged file (bytes that are not UTF-8, a line cut off, a line that is not JSON, a message number no
    earlier line defines) is a one-line :class:`DataError` naming the file and line.
    """
    p = _resolve(path)
    if not p.is_file():
        raise DataError(f"no cassette at {p}; a run directory holds its calls in {CASSETTE_NAME}")
    records = rundir.read_jsonl(p, missing_ok=False)
    messages: dict[int, list] = {}
    for number, record in enumerate(records, 1):
        if "new_messages" not in record:
            continue  # a line that holds its texts whole, or a note of a failed call
        try:
            for n, role, content in record.pop("new_messages"):
                messages[n] = [role, content]
            request, response = record["request"], record["response"]
            request["system"] = messages[request.pop("system_id")][1]
            request["messages"] = [list(messages[n]) for n in request.pop("message_ids")]
            response["text"] = messages[response.pop("text_id")][1]
        except (KeyError, TypeError, ValueError, AttributeError):
            raise DataError(f"{p}, record {number}: names a message that no earlier line holds (or holds it "
                            "malformed); the file is damaged") from None
    return records


def _response_from(record: dict) -> ModelResponse:
    r = record["response"]
    return ModelResponse(
        text=r["text"],
        usage=Usage(int(r["usage"]["input_tokens"]), int(r["usage"]["output_tokens"])),
        latency_s=float(r["latency_s"]),
        cached=True,
        finish_reason=r.get("finish_reason", "stop"),
        model=r.get("model", ""),
    )


class CassetteModel:
    """Serves a trial from its cassette alone: no network, no cache, responses ``cached=True``."""

    provider = "replay"
    base_url = None

    def __init__(self, path: str | os.PathLike):
        self.path = _resolve(path)
        self._calls: dict[tuple[str, int], list[dict]] = {}
        for record in read_cassette(self.path):
            if record.get("type") != "call":
                continue
            try:
                slot = (record["scope"]["agent"], int(record["scope"]["call_index"]))
                if not isinstance(record["response"]["text"], str):  # validate now, not mid-replay
                    raise TypeError("response text is not a string")
            except (KeyError, TypeError, ValueError):
                raise DataError(f"{self.path}: a call line lacks scope or response fields") from None
            self._calls.setdefault(slot, []).append(record)
        self.model = next((c[0]["request"].get("model", "") for c in self._calls.values()), "")

    def __repr__(self) -> str:
        return f"CassetteModel({str(self.path)!r})"

    def __len__(self) -> int:
        return sum(len(v) for v in self._calls.values())

    def generate(self, request: ModelRequest) -> ModelResponse:
        scope = request.scope
        candidates = self._calls.get((scope.agent, scope.call_index))
        if not candidates:
            raise CacheMissError(
                f"cassette {self.path} has no call for agent {scope.agent!r} call {scope.call_index}; the "
                f"trial being replayed made more or different calls than the recorded one"
            )
        fields = key_fields(request)
        key = key_from_fields(fields)
        for record in candidates:
            if record.get("key") == key:
                return _response_from(record)
        diffs = min((diff_fields(c.get("request", {}), fields) for c in candidates), key=len)
        raise CacheMissError(
            f"cassette {self.path}: agent {scope.agent!r} call {scope.call_index} was recorded with a "
            f"different request; differs in: {'; '.join(diffs) or 'key schema version'}"
        )


class RecordingModel:
    """Wraps a model and appends every successful call (and a note of every failed one) to a cassette."""

    def __init__(self, inner, cassette: Cassette):
        self.inner = inner
        self.cassette = cassette
        self.provider = getattr(inner, "provider", None)
        self.model = getattr(inner, "model", None)
        self.base_url = getattr(inner, "base_url", None)

    def __repr__(self) -> str:
        return f"RecordingModel({self.inner!r}, {self.cassette!r})"

    def generate(self, request: ModelRequest) -> ModelResponse:
        try:
            response = self.inner.generate(request)
        except LatteError as exc:
            self.cassette.record_error(request, exc)
            raise
        self.cassette.record(request, response)
        return response


def _cassette_paths(sources: Iterable[str | os.PathLike]) -> list[Path]:
    paths: list[Path] = []
    for source in sources:
        text = str(source)
        matches = sorted(glob.glob(text, recursive=True)) if glob.has_magic(text) else [text]
        for match in matches:
            p = Path(match)
            if p.is_dir():
                paths += sorted(p.rglob(CASSETTE_NAME))
            elif p.is_file():
                paths.append(p)
    return paths


def import_cassettes(run_dirs_or_globs, cache: ResponseCache) -> int:
    """Merge cassettes into the cache; returns how many responses were stored.

    Accepts a run directory, a sweep directory (searched recursively for ``calls.jsonl``), a cassette
    file or a glob, or a list of these. Only complete answers are stored; lines whose stored key does
    not match their request (another key schema) are skipped.
    """
    sources = [run_dirs_or_globs] if isinstance(run_dirs_or_globs, (str, os.PathLike)) else run_dirs_or_globs
    paths = _cassette_paths(sources)
    if not paths:
        raise DataError(f"no cassettes ({CASSETTE_NAME}) found under {', '.join(map(str, sources))}")
    pairs = []
    for path in paths:
        for record in read_cassette(path):
            if record.get("type") != "call":
                continue
            try:
                request = request_from_fields(record["request"])
                response = _response_from(record)
            except (KeyError, TypeError, ValueError, DataError):
                continue
            if record.get("key") and record["key"] != key_from_fields(key_fields(request)):
                continue
            response.cached = False
            pairs.append((request, response))
    return cache.put_many(pairs)
