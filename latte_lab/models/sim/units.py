"""The units of work a simulated agent makes out of its prompt: only what the prompt's text and the files it
shows say.

An agent reads its prompt in sections: a section starts at a paragraph that names a file of the project (a module
to complete, a deliverable to write) and runs until the next one (:func:`sections`). From the section of a file it
takes the names the text gives (functions, classes, members, attributes, constants), and the file's code as far
as it has read it. Ids follow a deterministic naming, so that every agent derives the same id for the same thing:

- ``<stem>`` (``sentiment``, ``config``, ``findings``): a file whose section names something to write in it: a
  stub, or a name the file does not define yet, or the whole file (a deliverable that is not code). Its symbols are
  those names, its description the section's own text, its dependencies the units whose modules the file imports
  (as the prompt shows the file) or whose names its section mentions.
- ``fix-<symbol>`` (``fix-rms``): a function the file defines and its section describes (a contract in the text:
  the work is to make it meet it); ``check-<symbol>``: such a function whose code (as read) or whose description
  calls other described functions: it can only be checked once they are fixed.
- ``fix-<symbol>`` of a symbol no section describes: work the text does not reveal, known only once a failure or
  a check names it (``FAILED tokenizer.Tokenizer.tokenize_words``): ``visible=False``.

A unit's tests are substrings of test and check ids: ``Test<Name>`` (the convention of one test class per
function or module), ``test_<stem>.py::``, ``[<stem>]`` when the prompt shows such a parameter, and check ids
``<module>.<symbol>``. What the reference solution holds decides none of this: it is consulted only to know
where a named member lives (``Class.name``, or a constructor that sets ``self.name``) and, later, for the text
of a correct patch (``latte_lab.models.sim.fixbook``).
"""

from __future__ import annotations

import ast
import builtins
import functools
import keyword
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from latte_lab import prompts as P
from latte_lab.models.sim import evidence as E
from latte_lab.models.sim import source as S
from latte_lab.models.sim.analysis import SCHEMA_MODULE
from latte_lab.models.sim.examples import examples_in
from latte_lab.models.sim.fixbook import Project, paths_in
from latte_lab.workspace.symbols import AST_LOCK

FIX, CHECK = "fix-", "check-"
STUB_MARKERS = ("NotImplementedError", "TODO")
SECTION_CACHE_SIZE = 2048  # message texts whose sections are kept (a prompt repeats most of its messages)
UNIT_CACHE_SIZE = 4096  # (project, sections, files shown) whose units are kept
LINE_CACHE_SIZE = 1 << 16  # lines of prompt text whose unit ids a catalogue keeps (Catalogue.ids_named)
_PARAGRAPH = re.compile(r"\n\s*\n|\n(?=[ \t]{0,4}(?:\d+[.)]|[-*])\s)|\n(?==== )")
_IDENT = re.compile(r"(?<![\w])([A-Za-z_]\w*)")
_ATTRIBUTE_WORDS = re.compile(r"\battribute|\bat creation\b|\bholds?\b|\bstores?\b", re.IGNORECASE)


@dataclass(frozen=True)
class Unit:
    """One piece of work as an agent sees it.

    ``files`` are the files it writes (none for a check), ``symbols`` what it changes in them (none: the
    whole file), ``deps`` the ids of the units it builds on, ``tests`` substrings of the test and check
    ids that exercise it, ``visible`` False for work a plan made from the text would not contain.
    """

    id: str
    title: str
    description: str
    files: tuple[str, ...]
    symbols: tuple[str, ...] = ()
    deps: tuple[str, ...] = ()
    visible: bool = True
    tests: tuple[str, ...] = ()


WorkUnit = Unit  # the name the policy modules use


def norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def unit_id(symbol: str) -> str:
    return FIX + symbol.replace(".", "-")


def named(name: str, text: str) -> bool:
    return _name_pattern(name).search(text) is not None


@functools.lru_cache(maxsize=4096)
def _name_pattern(name: str) -> re.Pattern:
    return re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])")


def _parse(text: str) -> ast.Module:
    """``ast.parse`` under latte_lab's one lock (CPython 3.11's ast is not safe across the agents' threads)."""
    with AST_LOCK:
        return ast.parse(text)


@functools.lru_cache(maxsize=8192)  # a pure function of the text, asked of the same bodies every turn
def is_stub(text: str) -> bool:
    """Whether a function's body is a placeholder (``raise NotImplementedError``, ``pass``, ``...``, TODO)."""
    try:
        node = _parse(text).body[0]
    except (SyntaxError, ValueError, IndexError):
        return False
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return True
    if len(body) == 1:
        b = body[0]
        if isinstance(b, ast.Pass) or (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
                                       and b.value.value is Ellipsis):
            return True
        if isinstance(b, ast.Raise) and any(isinstance(n, ast.Name) and n.id == "NotImplementedError"
                                            for n in ast.walk(b)):
            return True
    return "TODO" in text


def calls(text: str) -> set[str]:
    """Names a piece of code calls (``f(...)``)."""
    try:
        tree = _parse(text)
    except (SyntaxError, ValueError):
        return set()
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def imports(text: str) -> list[str]:
    """Modules a file imports at its top level."""
    try:
        tree = _parse(text)
    except (SyntaxError, ValueError):
        return []
    out = []
    for n in tree.body:
        if isinstance(n, ast.ImportFrom) and n.module:
            out.append(n.module)
        elif isinstance(n, ast.Import):
            out.extend(a.name for a in n.names)
    return out


def _self_attributes(text: str) -> set[str]:
    return set(re.findall(r"self\.(\w+)\s*=", text or ""))


# ============================================================================== sections ====

_LIST_ITEM = re.compile(r"^[ \t]*(?:\d+[.)]|[-*])\s|^[ \t]+\S")
_SENDER = re.compile(r"^\[From [^\]\n]+\]: ", re.MULTILINE)  # how a message names who sent it
# Lines of the protocol's own, not of a project: a task handed over, the parts and files of a plan's task, failures
# it quotes, what to do next. They say what a message is, not what the work is.
_PROTOCOL_LINE = re.compile(r"^(?:You have been assigned task '[^'\n]*':.*|Parts: .*|Files: .*|(?:FAILED|ERROR) \S.*|"
                            r"Repository files: .*|"
                            r"Run the checks, fix the code and re-run them\.)$", re.MULTILINE)
_LABELLED = re.compile(r"\n(?=(?:fix-|check-)?[A-Za-z_][\w\-]*: (?:Make|Complete|Write|Check|Fix|Verify) )")


def _cleaned(text: str) -> str:
    """The text without what is not a description of work: the results of test and script runs (observations:
    what they show is read as failures and reports, never as a description) and the protocol's own lines."""
    if _SENDER.search(text or ""):
        kept = [seg for _, seg in P.segments(text) if P.parse_tests(seg) is None and P.parse_script(seg) is None]
        text = "\n\n".join(kept)
    elif P.parse_tests(text or "") is not None or P.parse_script(text or "") is not None:
        return ""
    return _PROTOCOL_LINE.sub("", text or "")


@functools.lru_cache(maxsize=SECTION_CACHE_SIZE)
def sections(text: str) -> tuple[tuple[tuple[str, ...], str], ...]:
    """The text's paragraphs (blank-line and list-item breaks, and each labelled part of a plan's task), each
    with the files it is about: those it names; else, for a list item or an indented line, those of the
    paragraph it continues (a heading's items are about the heading's file); a plain paragraph that names no
    file is about none. Test and script results are left out (observations, not descriptions), and so are the
    protocol's own lines (who sent a message, a task handed over, the repository's file list, a plan's parts and
    files, quoted failures) are left out."""
    out = []
    current: tuple[str, ...] = ()
    paragraphs = [p for chunk in _PARAGRAPH.split(_cleaned(text)) for p in _LABELLED.split(chunk)]
    for para in paragraphs:
        if not para.strip():
            continue
        files = tuple(sorted(paths_in(para), key=para.index))
        if files:
            current = files
        elif not _LIST_ITEM.match(para):
            current = ()
        out.append((current, para))
    return tuple(out)


@functools.lru_cache(maxsize=SECTION_CACHE_SIZE)
def part_examples(text: str):
    """The examples of one message (cached: a prompt repeats most of its messages)."""
    return examples_in(text)


# ============================================================================= the catalogue ====

class Catalogue:
    """What a project's public material fixes, computed once per project: its code and data files, the symbols
    of its starting files, and which test files are public. Which of it is work is decided per prompt
    (:func:`units_from_text`)."""

    def __init__(self, project: Project):
        self.project = project
        p = project
        self.code_files = [f for f in sorted(p.paths) if S.kind(f) == "py" and f not in p.public_tests]
        self.data_files = E.data_files(p.start, p.public_tests)  # what agents profile, and what they must see
        self.data = frozenset().union(*(E.data_tokens(p.start[f]) for f in self.data_files))
        self.workable = frozenset(f for f in p.paths if f not in p.public_tests and f not in self.data_files)
        self._resolved: dict[str, Unit | None] = {}
        self._lock = threading.Lock()
        self.id_pattern = re.compile(r"(?<![\w-])(" + "|".join(
            [re.escape(stem(f)) for f in sorted(self.workable, key=lambda f: -len(stem(f)))]
            + [rf"{FIX}[A-Za-z_][\w\-]*", rf"{CHECK}[A-Za-z_][\w\-]*"]) + r")(?![\w-])")
        self._ids_by_line: dict[str, frozenset[str]] = {}

    def ids_named(self, text: str) -> set[str]:
        """The unit ids a text could name (whole words). ``id_pattern`` never matches across a line boundary, so
        they are the union of its lines', and each distinct line is scanned once (a prompt repeats most)."""
        found: set[str] = set()
        for line in text.splitlines():
            hit = self._ids_by_line.get(line)
            if hit is None:
                if len(self._ids_by_line) >= LINE_CACHE_SIZE:
                    self._ids_by_line.clear()
                hit = self._ids_by_line[line] = frozenset(m.group(1) for m in self.id_pattern.finditer(line))
            found |= hit
        return found

    def resolve(self, uid: str) -> Unit | None:
        """``fix-<symbol>`` of a symbol of the project's code: work a failure or a check names (not in a plan)."""
        with self._lock:
            if uid in self._resolved:
                return self._resolved[uid]
        unit = None
        if uid.startswith(FIX):
            name = uid[len(FIX):].replace("-", ".")
            p = self.project
            f = next((f for f in self.code_files if name in p.start_symbols(f) or name in p.correct_symbols(f)), None)
            if f is not None:
                tests = (f"Test{name.rsplit('.', 1)[-1].title().replace('_', '')}", f"{stem(f)}.{name}")
                # it builds on the functions of its file its starting code calls (what an agent reading the file sees)
                start = p.start_symbols(f)
                callees = sorted(c for c in calls(start.get(name, "")) if c != name and c in start
                                 and start[c].lstrip().startswith("def "))
                unit = Unit(id=uid, title=f"Fix {name}", files=(f,), symbols=(name,), visible=False, tests=tests,
                            deps=tuple(unit_id(c) for c in callees),
                            description=f"{name} in {f} does not do what the checks expect; fix it.")
        with self._lock:
            self._resolved[uid] = unit
        return unit


_CATALOGUES: dict[str, Catalogue] = {}
_CAT_LOCK = threading.Lock()


def catalogue(project: Project) -> Catalogue:
    with _CAT_LOCK:
        cat = _CATALOGUES.get(project.key)
        if cat is None or cat.project is not project:
            cat = _CATALOGUES[project.key] = Catalogue(project)
        return cat


# =========================================================================== units from text ====

def units_from_text(cat: Catalogue, parts: Sequence[str], shown: Mapping[str, str]) -> list[Unit]:
    """The units the prompt's text (its messages, ``parts``) and the files it shows (``shown``: path -> text)
    describe, in order of first mention."""
    by_file: dict[str, list[str]] = {}
    own: dict[str, list[str]] = {}  # the paragraphs about that file alone
    for part in parts:
        for files, para in sections(part):
            workable = [f for f in files if f in cat.workable]
            for f in workable:
                for target in ([by_file] if len(workable) > 1 else [by_file, own]):
                    chunks = target.setdefault(f, [])
                    if para not in chunks:
                        chunks.append(para)
    if not by_file:
        return []
    examples = tuple(dict.fromkeys(e for part in parts for e in part_examples(part)))
    key = (cat.project.key, tuple((f, tuple(chunks)) for f, chunks in by_file.items()),
           tuple(sorted((f, hash(shown[f])) for f in by_file if f in shown)), hash(examples))
    # paragraphs stay paragraphs (a blank line between them): a unit's own item is found again by sections()
    return list(_units_cached(key, cat, {f: "\n\n".join(c) for f, c in by_file.items()},
                              {f: shown[f] for f in by_file if f in shown}, examples,
                              {f: "\n\n".join(c) for f, c in own.items()}))


_UNITS: dict[tuple, tuple[Unit, ...]] = {}
_UNITS_LOCK = threading.Lock()


def _units_cached(key: tuple, cat: Catalogue, texts: dict[str, str], shown: dict[str, str],
                  examples: tuple, own: dict[str, str]) -> tuple[Unit, ...]:
    with _UNITS_LOCK:
        hit = _UNITS.get(key)
    if hit is not None:
        return hit
    units = tuple(_derive(cat, texts, shown, examples, own))
    with _UNITS_LOCK:
        if len(_UNITS) >= UNIT_CACHE_SIZE:
            _UNITS.clear()
        _UNITS[key] = units
    return units


def _derive(cat: Catalogue, texts: dict[str, str], shown: dict[str, str], examples: tuple,
            own: dict[str, str]) -> list[Unit]:
    p = cat.project
    units: list[Unit] = []
    described: dict[str, tuple[str, str]] = {}  # function -> (file, its section's text): work to fix or check
    for f, text in texts.items():
        if S.kind(f) != "py" or f not in p.start:
            syms = _new_file_symbols(cat, f, text)
        else:
            syms = _file_symbols(cat, f, text, shown.get(f))
            start = p.start_symbols(f)
            for name in sorted(set(_IDENT.findall(text)) & set(start), key=text.index):
                if "." not in name and name not in (syms or ()) and start[name].lstrip().startswith("def ") \
                        and not is_stub(start[name]) and re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", text):
                    described[name] = (f, text)
        if syms is not None:
            units.append(_file_unit(cat, f, syms, text, examples))
    units = _with_file_deps(cat, units, own, shown)
    units += _function_units(cat, described, shown)
    return units


def _names(text: str) -> list[str]:
    return list(dict.fromkeys(_IDENT.findall(text)))


_NAME = r"[A-Za-z_]\w*"
# where a clause starts: a line (after a bullet, a number, a "file.py:" or "Complete"/"Write" lead), or after "; "
_LEAD = r"(?:(?:Complete|Write|Add|Implement)[ \t]+)?"
_CLAUSE = rf"(?:^|;[ \t]+|\n)[ \t]*(?:[-*][ \t]+|\d+[.)][ \t]+)?{_LEAD}(?:[\w/]+\.\w+:[ \t]+)?{_LEAD}"
_DEFINITIONS = (
    re.compile(rf"(?<![\w.])({_NAME})\s*\([^()\n]*\)\s*->"),  # a signature with its return: get_ngrams(tokens, n) -> ...
    re.compile(rf"{_CLAUSE}({_NAME})(?:\(\))?\.({_NAME})\s*\(", re.M),  # Summarizer().summarize(text, ...) at a clause's start
    # name(args) at a clause's start, then what it is or does: ":", "=", "(defaults ...)", "with ...", "stores ..."
    re.compile(rf"{_CLAUSE}({_NAME})\s*\([^()\n]*\)[ \t]*(?::|=|\(|with\b|[a-z]+s\b)", re.M),
    re.compile(rf"{_CLAUSE}({_NAME}):[ \t]", re.M),  # a labelled member: "sentence_count: len(sentences)"
)
_BUILTINS = frozenset(dir(builtins))
_NOT_NAMES = frozenset({"py", "json", "txt", "csv", "md", "e", "g", "i", "Note", "Example", "Examples", "Parts", "Files"})


def defined_names(text: str) -> list[str]:
    """The names a text presents as things to have in the code, in order of first mention: signatures (with a
    return, or at the start of a clause followed by what they are or do), labelled members. (An attribute an
    instance holds is read by the words about it, in :func:`_file_symbols`.) A name the text only uses
    (``rms(...)`` inside another's contract, ``len(text)``) is none.

    >>> defined_names("- get_ngrams(tokens, n) -> list; get_bigrams(tokens) = get_ngrams(tokens, 2).")
    ['get_ngrams', 'get_bigrams']
    >>> defined_names("- rms(xs): sqrt(mean(x**2)).\\n- sentences: Tokenizer().split(text)")
    ['rms', 'sentences']
    """
    return list(_defined_names(text))


@functools.lru_cache(maxsize=2048)  # a pure function of the text; the same sections are read every turn
def _defined_names(text: str) -> tuple[str, ...]:
    """The names of :func:`defined_names`, as a tuple (cached)."""
    found: list[tuple[int, str]] = []
    for pattern in _DEFINITIONS:
        for m in pattern.finditer(text):
            found += [(m.start(i), m.group(i)) for i in range(1, (pattern.groups or 0) + 1) if m.group(i)]
    first = {}
    for i, n in sorted(found):
        first.setdefault(n, i)
    return tuple(n for n in sorted(first, key=first.get)
                 if n not in _BUILTINS and n not in _NOT_NAMES and not keyword.iskeyword(n))


def _new_file_symbols(cat: Catalogue, f: str, text: str) -> list[str] | None:
    """A file the workspace does not have yet (or not code): the whole file, or the module-level names the text
    gives it."""
    p = cat.project
    if f in p.start and S.kind(f) == "py":
        return None
    if S.kind(f) != "py":
        return [] if f not in p.start else None
    stems = {stem(x) for x in p.paths}
    syms = [n for n in defined_names(text) if "." not in n and n not in stems]  # what the text says it holds
    return syms or None


def _file_symbols(cat: Catalogue, f: str, text: str, view: str | None) -> list[str] | None:
    """What the section of an existing module names to write in it: its stubs (those named, or every one when
    the prompt shows the file), and members it lacks; a class whose every method is to be written is one
    symbol. None when nothing is to be written."""
    p = cat.project
    start, correct = p.start_symbols(f), p.correct_symbols(f)
    names = _names(text)
    classes = [n for n in names if n in start and start[n].lstrip().startswith("class ")] or \
        [n for n in start if "." not in n and start[n].lstrip().startswith("class ") and len(
            [c for c in start if "." not in c and start[c].lstrip().startswith("class ")]) == 1]
    if view is not None:
        shown_syms = S.get_symbols(view, f) if _parses(view, f) else {}
        stubs = [s for s, body in shown_syms.items() if is_stub(body)]
    else:
        stubs = []
    wanted: list[str] = []
    defined = set(defined_names(text))
    elsewhere = {n for g in cat.code_files if g != f for n in (*p.start_symbols(g), *p.correct_symbols(g))}
    stems = {stem(x) for x in p.paths}
    for n in names:
        candidates = [n] + [f"{c}.{n}" for c in classes]
        for s in candidates:  # a stub the text names (the agent sees it in the file)
            if s in start and is_stub(start[s]) and s not in wanted:
                wanted.append(s)
        if n in defined and n not in stems and n not in start and not any(f"{c}.{n}" in start for c in classes):
            # a name the text presents as one to have, that the file lacks: a member of the file's class when the
            # class holds it (where a named member lives is all the reference tells), else the module's own
            member = next((f"{c}.{n}" for c in classes if f"{c}.{n}" in correct), None)
            s = member or n
            if s not in wanted and (member or n not in elsewhere):
                wanted.append(s)
        for c in classes:  # an attribute the text says an instance holds: its constructor sets it up
            init = f"{c}.__init__"
            if n in _self_attributes(correct.get(init, "")) and n not in _self_attributes(start.get(init, "")) \
                    and init not in wanted and (_ATTRIBUTE_WORDS.search(text) or named(f"{c}.{n}", text)):
                wanted.append(init)
    for s in stubs:
        if s not in wanted:
            wanted.append(s)
    out: list[str] = []
    for cls in dict.fromkeys(s.split(".", 1)[0] for s in wanted if "." in s):
        methods = [s for s in start if s.startswith(cls + ".")]
        if methods and all(m in wanted or is_stub(start[m]) for m in methods) and all(is_stub(start[m]) for m in methods):
            out.append(cls)
    for s in wanted:
        if s not in out and not ("." in s and s.split(".", 1)[0] in out):
            out.append(s)
    return out or None


def _parses(text: str, path: str) -> bool:
    try:
        S.get_symbols(text, path)
        return True
    except S.SpliceError:
        return False


def _file_unit(cat: Catalogue, f: str, syms: list[str], text: str, examples: tuple) -> Unit:
    s = stem(f)
    tests = [f"Test{norm(s).title()}", f"test_{s}.py::", f"[{s}]"]
    tests += [f"{s}.{x}" for x in syms] or [f"{s}."]
    for x in syms:  # the attributes a constructor it writes sets up
        if x.endswith(".__init__"):
            init = cat.project.correct_symbols(f).get(x, "")
            tests += [f"{s}.{x[:-len('__init__')]}{a}" for a in dict.fromkeys(re.findall(r"self\.(\w+)\s*=", init))
                      if not a.startswith("_")]
    what = ", ".join(syms) if syms else "the whole file"
    verb = "Write" if f not in cat.project.start else "Complete"
    body = text.strip()
    mine = [e for e in examples if e.module == s]
    if mine and "Examples:" not in body:
        lines = list(dict.fromkeys(line for e in mine for line in e.setup.splitlines()))
        body += "\nExamples:\n" + "\n".join(f">>> {line}" for line in lines) + "\n"
        body += "\n".join(f">>> {e.expr}\n{e.expected}" for e in mine)
    return Unit(id=s, title=f"{verb} {f}", files=(f,), symbols=tuple(syms), tests=tuple(dict.fromkeys(tests)),
                description=f"{verb} {f} ({what}).\n{body}"[:1500])


def _with_file_deps(cat: Catalogue, units: list[Unit], own: dict[str, str], shown: dict[str, str]) -> list[Unit]:
    """A file unit builds on the units whose module its file imports (as the prompt shows the file; a report
    about the data, what the analysis script that computes it imports) or whose names the paragraphs about it
    alone mention; an edge that would close a cycle (two files that mention each
    other) is left out, the earlier-mentioned unit coming first."""
    stems = {stem(u.files[0]): u for u in units}
    wanted: dict[str, list[str]] = {}
    for u in units:
        f = u.files[0]
        deps = [m for m in imports(shown.get(f, "")) if m in stems]
        if cat.data_files and S.kind(f) != "py" and f not in cat.project.start:
            # a report about the data is computed by the analysis script, which imports the team's schema
            deps += [m for m in (SCHEMA_MODULE,) if m in stems]
        text = own.get(f, "")
        for other in units:
            if other.id == u.id or stem(other.files[0]) in deps:
                continue
            names = [x.rsplit(".", 1)[-1] for x in other.symbols] + [x.split(".", 1)[0] for x in other.symbols]
            if any(len(n) > 3 and named(n, text) for n in names):
                deps.append(stem(other.files[0]))
        wanted[u.id] = list(dict.fromkeys(stems[d].id for d in deps if d in stems and stems[d].id != u.id))
    kept: dict[str, tuple[str, ...]] = {}

    def reaches(a: str, b: str) -> bool:  # b is reachable from a along the edges kept so far
        stack, seen = [a], set()
        while stack:
            x = stack.pop()
            if x == b:
                return True
            if x not in seen:
                seen.add(x)
                stack.extend(kept.get(x, ()))
        return False

    for u in units:
        kept[u.id] = ()
        kept[u.id] = tuple(d for d in wanted[u.id] if not reaches(d, u.id))
    return [replace(u, deps=kept[u.id]) for u in units]


def _function_units(cat: Catalogue, described: dict[str, tuple[str, str]], shown: dict[str, str]) -> list[Unit]:
    """``fix-<f>`` for a function its section describes, ``check-<f>`` for one that calls other described
    functions (in its code as read, or in its description)."""
    units = []
    for name, (f, text) in described.items():
        item = _unlabelled(next((para for _, para in sections(text)
                                 if re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", para)), text))
        code = S.get_symbols(shown[f], f).get(name, "") if f in shown and _parses(shown[f], f) else ""
        callees = sorted(c for c in (calls(code) | {n for n in _names(item) if re.search(rf"{re.escape(n)}\s*\(", item)})
                         if c in described and c != name)
        test_class = f"Test{name.title().replace('_', '')}"
        check = f"{stem(f)}.{name}"
        if callees:
            units.append(Unit(id=f"{CHECK}{name}", title=f"Check {name}", files=(), deps=tuple(unit_id(c) for c in callees),
                              tests=(test_class,), description=f"{item.strip()}\n{name} calls {', '.join(callees)}; once "
                              f"they are fixed, run the tests and confirm {test_class} passes."))
        else:
            units.append(Unit(id=unit_id(name), title=f"Fix {name}", files=(f,), symbols=(name,), tests=(test_class, check),
                              description=f"Make {name} in {f} meet its contract: {item.strip()}"[:800]))
    return units


_LABEL = re.compile(r"^\s*(?:fix-|check-)?[A-Za-z_][\w\-]*: (?:Make \S+ in \S+ meet its contract: )?")


def _unlabelled(para: str) -> str:
    """A paragraph without the label a plan's part carries (``fix-rms: Make rms in f.py meet its contract: ``),
    so that a description quoted from a plan is not labelled twice."""
    return _LABEL.sub("", para, count=1) if _LABELLED.match("\n" + para.lstrip()) else para


def fix_for_check(uid: str) -> str:
    return FIX + uid[len(CHECK):]


def order(units: Iterable[Unit], index: Mapping[str, int]) -> list[Unit]:
    """Units in dependency order (a unit after the units it depends on), else by ``index``."""
    chosen = {u.id: u for u in units}
    out: list[Unit] = []
    seen: set[str] = set()

    def visit(uid: str) -> None:
        if uid in seen or uid not in chosen:
            return
        seen.add(uid)
        for d in chosen[uid].deps:
            visit(d)
        out.append(chosen[uid])

    for uid in sorted(chosen, key=lambda i: index.get(i, len(index))):
        visit(uid)
    return out
