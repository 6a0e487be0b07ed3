"""The fix book: what a correct version of a file or symbol looks like, looked up by content.

This is the only module of the simulated model that reads task internals. It is built from every
registered task (and the ``tasks=`` mapping a :class:`~latte_lab.models.sim.SimulatedModel` was given):
each task's starting files, its reference solution and its public text (description and public test
files), stored as anonymous *projects*. Nothing is stored under a task's id, and nothing here says which
work exists: a project answers "this is what the correct version of that symbol or file looks like",
which models an agent that can write the fix once its prompt has given it the evidence.

An agent's prompt is matched to a project by content (:meth:`FixBook.project_for`): the files it has
read (a file whose text is a known starting or correct version of that path weighs most, then symbols
whose text matches), the file names its prompt mentions and the lines of project text it shows.

>>> book = fix_book()
>>> p = book.project_for({}, "Fix signal_toolkit.py until test_suite.py passes.")
>>> "signal_toolkit.py" in p.start and p.correct_symbols("signal_toolkit.py")["rms"].startswith("def rms")
True
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from latte_lab.models.sim import source as S

_PATH = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.(?:py|json|txt|csv|md))(?![\w])")
_WORD = re.compile(r"[A-Za-z_]\w{4,}")
MIN_TEXT_LINE = 30  # characters: shorter project-text lines are too generic to say which project it is
FILE_CACHE_SIZE = 2048  # file texts whose fit a project keeps (Project.file_score)
LINE_CACHE_SIZE = 1 << 14  # prompt lines whose description-line hits a project keeps (Project.lines_shown)


def paths_in(text: str) -> set[str]:
    """File names (with an extension the projects use) mentioned in a text."""
    return set().union(*(line_terms(line)[0] for line in (text or "").splitlines()))


@functools.lru_cache(maxsize=1 << 16)
def line_terms(line: str) -> tuple[frozenset[str], frozenset[str], str]:
    """The file names and the words (``_WORD``) of one line, and the line stripped when it is long enough to
    say which project it is from (``MIN_TEXT_LINE``; else ""). Neither pattern matches a line break or any
    other line boundary, so a text's terms are the union of its lines'; and a prompt repeats most of its
    lines from one call to the next (the description, the files, the test output), so each is scanned once."""
    stripped = line.strip()
    return (frozenset(_PATH.findall(line)), frozenset(_WORD.findall(line)),
            stripped if len(stripped) >= MIN_TEXT_LINE else "")


@functools.lru_cache(maxsize=1024)
def part_terms(part: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The file names, words and long stripped lines (:func:`line_terms`) of one part of a prompt (a message).
    A prompt joins its parts with line breaks, so its terms are the union of its parts'; and most parts (the
    system message, earlier turns) come back unchanged in the next call."""
    terms = [line_terms(line) for line in part.splitlines()]
    return (frozenset().union(*(t[0] for t in terms)), frozenset().union(*(t[1] for t in terms)),
            frozenset(t[2] for t in terms if t[2]))


def _safe_symbols(text: str | None, path: str) -> dict[str, str]:
    if not text:
        return {}
    try:
        return S.get_symbols(text, path)
    except S.SpliceError:
        return {}


@dataclass(eq=False)
class Project:
    """One project the book knows: its starting files, their correct versions and its public text."""

    start: dict[str, str]
    solution: dict[str, str]
    public_tests: tuple[str, ...]
    description: str
    key: str = ""
    _symbols: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.key:
            h = hashlib.sha256()
            for path in sorted(self.start):
                h.update(path.encode() + b"\0" + self.start[path].encode() + b"\0")
            h.update(self.description.encode())
            self.key = h.hexdigest()[:16]
        self.lines = frozenset(line.strip() for line in self.description.splitlines()
                               if len(line.strip()) >= MIN_TEXT_LINE)
        self.paths = set(self.start) | set(self.solution)
        self._file_scores: dict[tuple[str, str], int] = {}
        self._line_hits: dict[str | frozenset[str], frozenset[str]] = {}  # per prompt line, and per group of them

    def start_symbols(self, path: str) -> dict[str, str]:
        k = ("start", path)
        if k not in self._symbols:
            self._symbols[k] = _safe_symbols(self.start.get(path), path)
        return self._symbols[k]

    def correct_symbols(self, path: str) -> dict[str, str]:
        k = ("solution", path)
        if k not in self._symbols:
            self._symbols[k] = _safe_symbols(self.solution.get(path, self.start.get(path)), path)
        return self._symbols[k]

    def correct(self, path: str) -> str | None:
        """The correct version of a whole file (the starting one when the reference leaves it)."""
        return self.solution.get(path, self.start.get(path))

    @cached_property
    def public_text(self) -> str:
        """What every agent may read of the project: its description and its public test files."""
        return "\n".join([self.description, *(self.start.get(p, "") for p in self.public_tests)])

    @cached_property
    def names(self) -> frozenset[str]:
        """The test classes of its public tests and the names defined in its code (5 characters or more)."""
        out = set(re.findall(r"^class (Test\w+)", "\n".join(self.start.get(p, "") for p in self.public_tests), re.M))
        for path in self.paths:
            if path.endswith(".py") and path not in self.public_tests:
                out |= {n for name in (*self.start_symbols(path), *self.correct_symbols(path))
                        for n in name.split(".") if len(n) >= 5 and not n.startswith("__")}
        return frozenset(out)

    def match(self, files: Mapping[str, str], mentioned: set[str], text: str, words: frozenset[str] = frozenset()) -> int:
        """How well a prompt's content fits this project (0: not at all)."""
        score = sum(self.file_score(path, seen) for path, seen in files.items())
        score += 3 * len(mentioned & self.paths)
        score += 2 * len(words & self.names)  # its test classes and code names, as failures and tasks name them
        if text and self.lines:
            score += sum(1 for line in self.lines if line in text)
        return score

    def file_score(self, path: str, seen: str) -> int:
        """How well one file a prompt shows fits this project: 100 for a known starting or correct version of
        it, else 5 for each symbol that is one of those versions' (kept per text: prompts show files again)."""
        if path not in self.paths:
            return 0
        score = self._file_scores.get((path, seen))
        if score is None:
            norm = S.normalize_code(seen)
            if any(v is not None and S.normalize_code(v) == norm for v in (self.start.get(path), self.solution.get(path))):
                score = 100
            else:
                have = _safe_symbols(seen, path)
                known = {**self.start_symbols(path), **self.correct_symbols(path)}
                score = 5 * sum(1 for name, body in have.items() if name in known and S.same_symbol(body, known[name], path))
            if len(self._file_scores) >= FILE_CACHE_SIZE:
                self._file_scores.clear()
            self._file_scores[(path, seen)] = score
        return score

    def lines_shown(self, groups: Iterable[frozenset[str]]) -> int:
        """How many of the project's description lines occur in the given groups of (stripped, long) prompt
        lines, one group per part of the prompt. A description line has no line break, so it occurs in the
        prompt's joined text only within one of its lines; each distinct line, and each distinct group, is
        searched once."""
        if not self.lines:
            return 0
        found: set[str] = set()
        for group in groups:
            hits = self._line_hits.get(group)
            if hits is None:
                hits = frozenset().union(*(self._hits_in(line) for line in group))
                if len(self._line_hits) >= LINE_CACHE_SIZE:
                    self._line_hits.clear()
                self._line_hits[group] = hits
            found |= hits
        return len(found)

    def _hits_in(self, line: str) -> frozenset[str]:
        hits = self._line_hits.get(line)
        if hits is None:
            hits = self._line_hits[line] = frozenset(own for own in self.lines if own in line)
        return hits


class FixBook:
    """Every known project; a prompt finds its project by content (:meth:`project_for`)."""

    def __init__(self, projects: list[Project]):
        self.projects = sorted(projects, key=lambda p: p.key)
        self._picks: dict[tuple, Project | None] = {}

    def project_for(self, files: Mapping[str, str], text: str | Sequence[str]) -> Project | None:
        """The project whose files and text the prompt shows most of; None when nothing matches. ``text`` may
        be given as the parts (messages) the prompt joins with line breaks."""
        terms = [part_terms(part) for part in ([text] if isinstance(text, str) else text)]
        mentioned = set().union(*(t[0] for t in terms))
        words = frozenset().union(*(t[1] for t in terms))
        lines = frozenset().union(*(t[2] for t in terms))
        key = (tuple(sorted((p, hash(t)) for p, t in files.items())), frozenset(mentioned), hash(lines), hash(words))
        if key in self._picks:
            return self._picks[key]
        best, best_score = None, 0
        for project in self.projects:  # the sum Project.match makes, with each part kept per file and per line
            score = (sum(project.file_score(path, seen) for path, seen in files.items())
                     + 3 * len(mentioned & project.paths) + 2 * len(words & project.names) + project.lines_shown(t[2] for t in terms))
            if score > best_score:
                best, best_score = project, score
        if len(self._picks) > 4096:
            self._picks.clear()
        self._picks[key] = best
        return best


class _SetupRecorder:
    """Stands in for a Workspace during ``task.setup`` to capture the starting files without I/O."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.test_args: tuple[str, ...] = ()

    def setup_file(self, path: str, text: str) -> None:
        self.files[str(path)] = text

    write = setup_file

    def protect(self, *paths: str) -> None:
        pass

    def exists(self, path: str) -> bool:
        return path in self.files

    def read(self, path: str, agent: str | None = None) -> str:
        return self.files[path]


def starting_files(task) -> dict[str, str]:
    """The files ``task.setup`` writes, captured without touching the disk when the task allows it."""
    rec = _SetupRecorder()
    try:
        task.setup(rec)
        return dict(rec.files)
    except (AttributeError, TypeError):
        pass  # the task uses more of the Workspace API: set it up in a scratch workspace
    import tempfile

    from latte_lab.workspace import Workspace

    with tempfile.TemporaryDirectory(prefix="latte_sim_") as tmp:
        ws = Workspace(tmp)
        task.setup(ws)
        out = {}
        for path in ws.list_files():
            try:
                out[path] = ws.read(path)
            except Exception:  # binary or unreadable data files are not patched by agents
                continue
        return out


def _project(task) -> Project | None:
    try:
        solution = dict(task.reference_solution())
    except NotImplementedError:
        return None  # a task without a reference: the book has nothing to say about it
    return Project(start=starting_files(task), solution=solution, public_tests=tuple(task.public_tests),
                   description=str(task.description or ""))


_BOOKS: dict[object, FixBook] = {}
_LOCK = threading.Lock()


def fix_book(tasks: Mapping[str, object] | None = None) -> FixBook:
    """The (cached) book of every registered task, plus the tasks of ``tasks`` when given."""
    from latte_lab import tasks as registry

    extra = tuple(tasks.values()) if tasks else ()
    key = (tuple(registry.names()), tuple(id(t) for t in extra))
    with _LOCK:
        book = _BOOKS.get(key)
        if book is None:
            projects: dict[str, Project] = {}
            for task in [*extra, *(registry.get(n) for n in registry.names())]:
                project = _project(task)
                if project is not None:
                    projects.setdefault(project.key, project)
            book = _BOOKS[key] = FixBook(list(projects.values()))
        return book
