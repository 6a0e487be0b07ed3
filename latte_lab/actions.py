"""The text protocol agents speak: action types, a tolerant parser of model replies, and a renderer.

Agents act by writing tags in their replies (paper Appendix A4-A5)::

    <claim_task id="task-1" />
    <discover_task id="fix-index" title="Fix index() API bug" dependencies="task-2">
        Run the tests, fix search_lib.py.
    </discover_task>
    <edit_file path="stats.py">
    ```python
    def mean(xs): ...
    ```
    </edit_file>

:func:`parse_actions` turns a reply into actions in document order plus one :class:`ParseError` per
malformed or unknown action tag, which the orchestrator sends back to the agent (the released code
dropped them silently). It never raises, runs in linear time (a hand-written scanner; no regex can
backtrack over the whole reply) and is fuzz-tested.

What the parser accepts:

- attributes in any order, double or single quotes (or unquoted values without spaces), spaces around
  ``=``; attribute values are trimmed, and ``id``/``to``/``path``/``topic``/``title`` must not be empty;
- attribute-only tags (claim_task, run_tests, ...) either self-closing ``<run_tests />`` or as
  ``<run_tests>`` optionally followed by its closing tag (text in between is ignored);
- body tags (discover_task/plan_task, edit_file, broadcast, synthesize, publish) end at the first
  matching closing tag (as in the released code); their bodies are never scanned for actions, so a file
  may contain the text ``<run_tests />``. Bodies are trimmed; an edit_file body also loses a leading
  ```` ```lang ```` fence line and a trailing ```` ``` ```` fence. ``<discover_task .../>`` is a task with no
  description; ``<edit_file path="p"></edit_file>`` writes an empty file but a self-closing edit_file is an
  error (it carries no content); broadcast, synthesize and publish need a non-empty body;
- dependencies are comma-separated, trimmed, empties dropped; a leading ``repo/`` or ``./`` is stripped
  from paths; other attributes of discover_task (``difficulty``, ``rel``, ...) are kept in ``extra``.

What it reports (one :class:`ParseError` each): a known tag with a missing or empty required attribute,
broken attribute syntax, an unclosed body, a closing tag with no opening tag, and unknown tags that look
like actions: a lowercase snake_case name containing ``_`` followed by attributes or ``/>`` (so
``<delete_task id="x"/>`` is reported but ``<br>``, ``<b>``, ``List<T>``, ``<my_type>`` and ``a < b`` are
not). Tags inside markdown code fences are still actions (released-code behaviour).

A body tag whose opening tag lacks a required attribute (``<edit_file>`` mentioned in prose) is reported
without consuming a body, so the real tag after it is still read.
An unclosed body tag (``<edit_file path="a.py">`` with no ``</edit_file>``, usually a reply cut at the
token limit) is an error, and scanning resumes right after its opening tag.

``plan_task`` is parsed as :class:`DiscoverTask` with ``alias="plan_task"``; ``alias`` does not take part
in equality, and :func:`render_action` writes the tag the action was parsed from.

Content :func:`render_action` cannot represent (it raises :class:`ActionRenderError`): a body containing
its own closing tag; an attribute value holding both quote characters, leading/trailing whitespace, or
more than ``MAX_ATTRIBUTE_CHARS`` characters; a body with leading/trailing whitespace (except edit_file
content, which is fenced when needed); a dependency id containing a comma; a path starting with ``repo/``
or ``./`` (the parser strips those prefixes).

>>> r = parse_actions('Taking it. <claim_task id="task-1" /> then <run_tests/> <delete_task id="x"/>')
>>> r.actions
[ClaimTask(id='task-1'), RunTests()]
>>> [(e.tag, e.message) for e in r.errors]
[('delete_task', 'unknown action tag <delete_task>; known tags: assign_task, broadcast, certify_complete, claim_task, close_task, complete_task, discover_task, edit_file, plan_task, publish, read_file, release_task, request_status, run_script, run_tests, synthesize, verify_task')]
>>> parse_actions("<discover_task title='Fix rms' id=fix dependencies='a, ,b'>Fix it.</discover_task>").actions
[DiscoverTask(id='fix', title='Fix rms', dependencies=('a', 'b'), description='Fix it.', extra=())]
>>> render_action(EditFile("x.py", "print('<run_tests />')\\n"))
'<edit_file path="x.py">\\n```\\nprint(\\'<run_tests />\\')\\n```\\n</edit_file>'
>>> parse_actions(render_action(EditFile("x.py", "print(1)\\n"))).actions
[EditFile(path='x.py', content='print(1)\\n')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from latte_lab.errors import LatteError

__all__ = [
    "ACTION_TAGS",
    "Action",
    "ActionRenderError",
    "AssignTask",
    "Broadcast",
    "CertifyComplete",
    "ClaimTask",
    "CloseTask",
    "CompleteTask",
    "DiscoverTask",
    "EditFile",
    "ParseError",
    "ParseResult",
    "Publish",
    "ReadFile",
    "ReleaseTask",
    "RequestStatus",
    "RunScript",
    "RunTests",
    "Synthesize",
    "VerifyTask",
    "dedupe",
    "parse_actions",
    "render_action",
]

MAX_ATTRIBUTE_CHARS = 4_000  # a quoted value longer than this is treated as an unclosed quote (keeps parsing linear)
SNIPPET_CHARS = 80  # how much of the offending text a ParseError quotes back to the agent
MAX_PARSE_ERRORS = 50  # errors reported per reply; beyond that one summary entry (feedback stays readable)


class ActionRenderError(LatteError, ValueError):
    """An action holds content the tag syntax cannot represent (see the module docstring)."""


# ---------------------------------------------------------------------------------------------- actions

@dataclass(frozen=True)
class DiscoverTask:
    """Add a task node: ``<discover_task id title [dependencies] [...]>description</discover_task>``."""

    tag: ClassVar[str] = "discover_task"
    id: str
    title: str
    dependencies: tuple[str, ...] = ()
    description: str = ""
    extra: tuple[tuple[str, str], ...] = ()  # other attributes (difficulty, rel, ...), sorted by name
    alias: str | None = field(default=None, compare=False, repr=False)  # "plan_task" when parsed from it


@dataclass(frozen=True)
class AssignTask:
    tag: ClassVar[str] = "assign_task"
    id: str
    to: str


@dataclass(frozen=True)
class ClaimTask:
    tag: ClassVar[str] = "claim_task"
    id: str


@dataclass(frozen=True)
class CompleteTask:
    tag: ClassVar[str] = "complete_task"
    id: str


@dataclass(frozen=True)
class ReleaseTask:
    tag: ClassVar[str] = "release_task"
    id: str


@dataclass(frozen=True)
class CloseTask:
    tag: ClassVar[str] = "close_task"
    id: str


@dataclass(frozen=True)
class VerifyTask:
    tag: ClassVar[str] = "verify_task"
    id: str


@dataclass(frozen=True)
class Broadcast:
    tag: ClassVar[str] = "broadcast"
    text: str


@dataclass(frozen=True)
class EditFile:
    """Overwrite a whole file with ``content``."""

    tag: ClassVar[str] = "edit_file"
    path: str
    content: str


@dataclass(frozen=True)
class ReadFile:
    tag: ClassVar[str] = "read_file"
    path: str


@dataclass(frozen=True)
class RunScript:
    tag: ClassVar[str] = "run_script"
    path: str


@dataclass(frozen=True)
class RunTests:
    tag: ClassVar[str] = "run_tests"


@dataclass(frozen=True)
class RequestStatus:
    tag: ClassVar[str] = "request_status"


@dataclass(frozen=True)
class Synthesize:
    tag: ClassVar[str] = "synthesize"
    text: str


@dataclass(frozen=True)
class CertifyComplete:
    """The Leader-Worker Lead or a decentralized peer declares the project finished."""

    tag: ClassVar[str] = "certify_complete"


@dataclass(frozen=True)
class Publish:
    """A message on the pipeline team's publish-subscribe bus, under ``topic``."""

    tag: ClassVar[str] = "publish"
    topic: str
    text: str


Action = (DiscoverTask | AssignTask | ClaimTask | CompleteTask | ReleaseTask | CloseTask | VerifyTask
          | Broadcast | EditFile | ReadFile | RunScript | RunTests | RequestStatus | Synthesize
          | CertifyComplete | Publish)

_ID_TAGS = {"claim_task": ClaimTask, "complete_task": CompleteTask, "release_task": ReleaseTask,
            "close_task": CloseTask, "verify_task": VerifyTask}
_PATH_TAGS = {"read_file": ReadFile, "run_script": RunScript}
_BARE_TAGS = {"run_tests": RunTests, "request_status": RequestStatus, "certify_complete": CertifyComplete}
_TEXT_TAGS = {"broadcast": Broadcast, "synthesize": Synthesize}
_BODY_TAGS = frozenset({"discover_task", "plan_task", "edit_file", "broadcast", "synthesize", "publish"})
ACTION_TAGS = frozenset({"discover_task", "plan_task", "assign_task", "edit_file", "publish",
                         *_ID_TAGS, *_PATH_TAGS, *_BARE_TAGS, *_TEXT_TAGS})
_KNOWN_LIST = ", ".join(sorted(ACTION_TAGS))
_DISCOVER_CORE = ("id", "title", "dependencies")
_BODY_REQUIRED = {"discover_task": ("id", "title"), "plan_task": ("id", "title"), "edit_file": ("path",),
                  "publish": ("topic",)}


@dataclass(frozen=True)
class ParseError:
    """One malformed or unknown action tag: what was wrong, where (character offset) and the text."""

    tag: str
    message: str
    offset: int
    snippet: str


@dataclass
class ParseResult:
    """The actions of one reply in document order, and the tags that could not be understood."""

    actions: list[Action] = field(default_factory=list)
    errors: list[ParseError] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- scanner

_TAG_START = re.compile(r"<(/?)([A-Za-z_][A-Za-z0-9_]*)")
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
_LOOKS_LIKE_ACTION = re.compile(r"\s+[A-Za-z_][\w\-]*\s*=|\s*/>")
_WS = re.compile(r"\s*")
_ATTR_NAME = re.compile(r"([A-Za-z_][\w\-]*)\s*=\s*")
_UNQUOTED = re.compile(r"[^\s\"'<>=/`]+(?:/+[^\s\"'<>=/`]+)*")
_CLOSE_END = re.compile(r"\s*>")


class _Malformed(Exception):
    """Internal: the tag at hand cannot be read; carries the reason for the ParseError."""


class _CloserFinder:
    """Finds ``</tag>`` from increasing start offsets without rescanning (keeps unclosed bodies linear).

    If a search from s0 found its first match at r (or none), any search from s in [s0, r] has the same
    answer, so it is reused instead of scanning the same text again.
    """

    __slots__ = ("match", "pattern", "start", "text")

    def __init__(self, name: str, text: str):
        self.pattern = re.compile(rf"</{name}\s*>")
        self.text = text
        self.start = -1
        self.match: re.Match[str] | None = None

    def find(self, pos: int) -> re.Match[str] | None:
        if self.start >= 0 and self.start <= pos and (self.match is None or pos <= self.match.start()):
            return self.match
        self.start, self.match = pos, self.pattern.search(self.text, pos)
        return self.match


def _read_attributes(text: str, pos: int) -> tuple[dict[str, str], int, bool]:
    """Read ``name="value" ...`` up to ``>`` or ``/>``; returns (attributes, end offset, self-closing)."""
    attrs: dict[str, str] = {}
    n = len(text)
    while True:
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= n:
            raise _Malformed("the tag is not closed with '>' or '/>'")
        ch = text[pos]
        if ch == ">":
            return attrs, pos + 1, False
        if ch == "/" and text.startswith("/>", pos):
            return attrs, pos + 2, True
        m = _ATTR_NAME.match(text, pos)
        if m is None:
            shown = text[pos:pos + 12]
            raise _Malformed(f"expected name=\"value\", '>' or '/>' but found {shown!r}")
        name = m.group(1)
        pos = m.end()
        if pos < n and text[pos] in "\"'":
            quote = text[pos]
            close = text.find(quote, pos + 1, pos + 1 + MAX_ATTRIBUTE_CHARS + 1)
            if close < 0:
                raise _Malformed(f"the value of {name} has no closing {quote}")
            value = text[pos + 1:close]
            pos = close + 1
        else:
            v = _UNQUOTED.match(text, pos)
            if v is None:
                raise _Malformed(f"attribute {name} has no value; write {name}=\"...\"")
            value = v.group(0)
            pos = v.end()
        if name in attrs:
            raise _Malformed(f"attribute {name} is given twice")
        attrs[name] = value


def _clean_path(path: str) -> str:
    path = path.strip()
    while True:
        if path.startswith("./"):
            path = path[2:]
        elif path.startswith("repo/"):
            path = path[5:]
        else:
            return path


def _strip_fences(body: str) -> str:
    body = body.strip()
    if body.startswith("```"):
        nl = body.find("\n")
        body = "" if nl < 0 else body[nl + 1:]
    body = body.removesuffix("```")
    return body


def _required(attrs: dict[str, str], name: str, tag: str) -> str:
    value = attrs.get(name)
    if value is None:
        raise _Malformed(f"<{tag}> is missing its {name}=\"...\" attribute")
    value = value.strip()
    if not value:
        raise _Malformed(f"<{tag}> has an empty {name}")
    return value


def _build(tag: str, attrs: dict[str, str], body: str | None) -> Action:
    """Make the action for one tag; ``body`` is None for a self-closing or attribute-only tag."""
    if tag in _ID_TAGS:
        return _ID_TAGS[tag](_required(attrs, "id", tag))
    if tag in _BARE_TAGS:
        return _BARE_TAGS[tag]()
    if tag in _PATH_TAGS:
        path = _clean_path(_required(attrs, "path", tag))
        if not path:
            raise _Malformed(f"<{tag}> path is empty after removing repo/ or ./")
        return _PATH_TAGS[tag](path)
    if tag == "assign_task":
        return AssignTask(_required(attrs, "id", tag), _required(attrs, "to", tag))
    if tag in ("discover_task", "plan_task"):
        deps = tuple(d for d in (p.strip() for p in attrs.get("dependencies", "").split(",")) if d)
        extra = tuple(sorted((k, v) for k, v in attrs.items() if k not in _DISCOVER_CORE))
        return DiscoverTask(_required(attrs, "id", tag), _required(attrs, "title", tag), deps,
                            (body or "").strip(), extra, alias="plan_task" if tag == "plan_task" else None)
    if tag == "edit_file":
        path = _clean_path(_required(attrs, "path", tag))
        if not path:
            raise _Malformed("<edit_file> path is empty after removing repo/ or ./")
        if body is None:  # self-closing: "open for editing"? Writing an empty file needs <edit_file ...></edit_file>
            raise _Malformed('<edit_file> needs the whole file content: <edit_file path="...">CONTENT</edit_file>')
        return EditFile(path, _strip_fences(body))
    if body is None or not body.strip():
        raise _Malformed(f"<{tag}> needs a body: <{tag}{' ...' if tag == 'publish' else ''}>TEXT</{tag}>")
    if tag == "publish":
        return Publish(_required(attrs, "topic", tag), body.strip())
    return _TEXT_TAGS[tag](body.strip())


def parse_actions(text: str) -> ParseResult:
    """Parse the actions of one model reply; never raises (non-text input gives one error entry).

    Parameters
    ----------
    text : str
        One model reply.

    Returns
    -------
    ParseResult
        ``.actions`` (in reply order) and ``.errors`` (one entry per malformed or unknown tag).
    """
    result = ParseResult()
    if not isinstance(text, str):
        result.errors.append(ParseError("", f"expected the reply text, got {type(text).__name__}", 0, ""))
        return result
    try:
        _scan(text, result)
    except Exception as exc:  # noqa: BLE001  # pragma: no cover - a scanner bug must not crash a trial; report it instead
        result.errors.append(ParseError("", f"internal parser error ({exc!r}); the rest of the reply was "
                                            "skipped", len(text), ""))
    return result


class _ErrorSink:
    """Collects ParseErrors up to MAX_PARSE_ERRORS, then records one summary entry and drops the rest."""

    __slots__ = ("dropped", "errors")

    def __init__(self, errors: list[ParseError]):
        self.errors = errors
        self.dropped = 0

    def append(self, error: ParseError) -> None:
        if len(self.errors) < MAX_PARSE_ERRORS:
            self.errors.append(error)
        elif self.dropped == 0:
            self.dropped = 1
            self.errors.append(ParseError(error.tag, f"more than {MAX_PARSE_ERRORS} malformed or unknown tags; "
                                          "the rest are not reported", error.offset, error.snippet))


def _scan(text: str, result: ParseResult) -> None:
    finders: dict[str, _CloserFinder] = {}
    orphans: dict[str, int] = {}  # body tags whose opening was rejected, by name
    actions = result.actions
    errors = _ErrorSink(result.errors)
    pos = 0
    while True:
        i = text.find("<", pos)
        if i < 0:
            return
        m = _TAG_START.match(text, i)
        if m is None:
            pos = i + 1
            continue
        closing, name = m.group(1), m.group(2)
        if closing:
            if name in ACTION_TAGS:
                end = _CLOSE_END.match(text, m.end())
                if end is not None:
                    if orphans.get(name):
                        orphans[name] -= 1
                    else:
                        errors.append(ParseError(name, f"</{name}> has no matching <{name}> before it",
                                                 i, text[i:i + SNIPPET_CHARS]))
                    pos = end.end()
                    continue
            pos = m.end()
            continue
        known = name in ACTION_TAGS
        if not known and not (_SNAKE.fullmatch(name) and _LOOKS_LIKE_ACTION.match(text, m.end())):
            pos = m.end()
            continue
        try:
            attrs, end, self_closing = _read_attributes(text, m.end())
        except _Malformed as exc:
            what = f"malformed <{name}>: {exc}" if known else f"unknown action tag <{name}>; known tags: {_KNOWN_LIST}"
            errors.append(ParseError(name, what, i, text[i:i + SNIPPET_CHARS]))
            pos = m.end()
            continue
        if not known:
            errors.append(ParseError(name, f"unknown action tag <{name}>; known tags: {_KNOWN_LIST}",
                                     i, text[i:end][:SNIPPET_CHARS]))
            pos = end
            continue
        body: str | None = None
        if self_closing:
            pos = end
        elif name in _BODY_TAGS:
            try:  # a prose mention such as "I'll use <edit_file> now" must not swallow the real tag's body
                for required in _BODY_REQUIRED.get(name, ()):
                    _required(attrs, required, name)
            except _Malformed as exc:
                errors.append(ParseError(name, str(exc), i, text[i:end][:SNIPPET_CHARS]))
                orphans[name] = orphans.get(name, 0) + 1  # its closing tag is expected; do not report it
                pos = end
                continue
            finder = finders.get(name)
            if finder is None:
                finder = finders[name] = _CloserFinder(name, text)
            closer = finder.find(end)
            if closer is None:
                errors.append(ParseError(name, f"<{name}> is never closed: end it with </{name}>",
                                         i, text[i:i + SNIPPET_CHARS]))
                pos = end
                continue
            body = text[end:closer.start()]
            pos = closer.end()
        else:
            # Attribute-only tag opened with '>': swallow its closing tag if it is the next tag.
            pos = end
            nxt = text.find("<", end)
            if nxt >= 0 and text.startswith(f"</{name}", nxt):
                close_end = _CLOSE_END.match(text, nxt + 2 + len(name))
                if close_end is not None:
                    pos = close_end.end()
        try:
            actions.append(_build(name, attrs, body))
        except _Malformed as exc:
            errors.append(ParseError(name, str(exc), i, text[i:pos][:SNIPPET_CHARS]))


# ---------------------------------------------------------------------------------------------- render

def _attr(name: str, value: str) -> str:
    if len(value) > MAX_ATTRIBUTE_CHARS:
        raise ActionRenderError(f"{name} is longer than {MAX_ATTRIBUTE_CHARS} characters")
    if '"' not in value:
        return f' {name}="{value}"'
    if "'" not in value:
        return f" {name}='{value}'"
    raise ActionRenderError(f"{name}={value!r} holds both quote characters; tags cannot carry it")


def _render_unchecked(action: Action) -> str:
    tag = type(action).tag if not isinstance(action, DiscoverTask) else (action.alias or "discover_task")
    if isinstance(action, DiscoverTask):
        head = f"<{tag}{_attr('id', action.id)}{_attr('title', action.title)}"
        if action.dependencies:
            head += _attr("dependencies", ",".join(action.dependencies))
        head += "".join(_attr(k, v) for k, v in action.extra)
        return f"{head} />" if not action.description else f"{head}>\n{action.description}\n</{tag}>"
    if isinstance(action, AssignTask):
        return f"<{tag}{_attr('id', action.id)}{_attr('to', action.to)} />"
    if isinstance(action, (ClaimTask, CompleteTask, ReleaseTask, CloseTask, VerifyTask)):
        return f"<{tag}{_attr('id', action.id)} />"
    if isinstance(action, (ReadFile, RunScript)):
        return f"<{tag}{_attr('path', action.path)} />"
    if isinstance(action, (RunTests, RequestStatus, CertifyComplete)):
        return f"<{tag} />"
    if isinstance(action, EditFile):
        c = action.content
        plain = c and c == c.strip() and not c.startswith("```") and not c.endswith("```")
        body = c if plain else f"```\n{c}```"
        return f"<{tag}{_attr('path', action.path)}>\n{body}\n</{tag}>"
    if isinstance(action, Publish):
        return f"<{tag}{_attr('topic', action.topic)}>{action.text}</{tag}>"
    if isinstance(action, (Broadcast, Synthesize)):
        return f"<{tag}>{action.text}</{tag}>"
    raise ActionRenderError(f"not an action: {action!r}")


def render_action(action: Action) -> str:
    """The tag text for ``action``; parsing it gives back an equal action, or ActionRenderError is raised.

    The check is done by parsing the rendered text, so every limit of the syntax is caught exactly.

    Parameters
    ----------
    action : Action
        One action, as :func:`parse_actions` returns them.

    Returns
    -------
    str
        Its tag text.
    """
    text = _render_unchecked(action)
    back = parse_actions(text)
    if back.errors or back.actions != [action]:
        why = back.errors[0].message if back.errors else f"it reads back as {back.actions!r}"
        raise ActionRenderError(f"{action!r} cannot be written as a tag ({why})")
    return text


def dedupe(actions: list[Any]) -> list[Any]:
    """Drop exact repeats within one reply (same type and fields), keeping the first; order kept."""
    seen: set[Any] = set()
    out = []
    for a in actions:
        if a not in seen:
            seen.add(a)
            out.append(a)
    return out
