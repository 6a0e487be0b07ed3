"""What a simulated agent makes of a project from what its prompt shows: its units of work.

The agent builds its own units from the evidence in its prompt, with ids of a deterministic naming,
so that every agent derives the same id for the same thing:

- ``<stem>`` (``sentiment``, ``config``): a file the project description names that is still to be
  written: a deliverable that does not exist yet, or a module whose functions are stubs or lack members
  the description names. Its symbols are those stubs and named members (a deliverable: the names the
  description gives it). Its dependencies are the described modules it imports.
- ``fix-<symbol>`` (``fix-rms``, ``fix-Tokenizer-tokenize_words``): one function, class or method. A
  function the public tests cover with a test class of its own (``TestRms``) and the description names
  is visible work; any other symbol is work the description does not reveal, known only once a failure
  or a check names it (``FAILED tokenizer.Tokenizer.tokenize_words - ...``).
- ``check-<symbol>``: a covered function whose code calls other covered functions: a plan from the
  description checks it once those are fixed; a bug of its own (``fix-<symbol>``, not visible) shows
  only when its tests still fail with its callees in place. Dependencies come from the calls in the code.

Which failures and checks are about a unit: the test classes named after its file or function, the
tests of a file ``test_<stem>.py``, the ``[<stem>]`` parameter of a test, and check ids
``<module>.<symbol>``. A unit's check script runs the
examples the project description gives for its module (``>>> ...`` lines and the output the user
expects) and prints ``PASSED``/``FAILED <module>.<symbol> - <difference>`` lines.

The content of a correct patch comes from the fix book (``latte_lab.models.sim.fixbook``), the only
place that knows the reference. Whether the agent gets to write it is decided elsewhere, from what its
prompt shows (``latte_lab.models.sim.work``). Nothing here knows about teams, tasks by name, or outcomes.
"""

from __future__ import annotations

import ast
import functools
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from latte_lab.models.sim import evidence as E
from latte_lab.models.sim import source as S
from latte_lab.models.sim.fixbook import Project, paths_in
from latte_lab.models.sim.mutate import mutate_file, mutate_symbol
from latte_lab.models.view import failures_in

CHECK_HELPERS = "check_helpers.py"  # the shared module every check script imports (agents write it)
CHECK_PREFIX = "check_"  # a check script: check_<module>.py, one per module checked, shared by the team
FIX, CHECK = "fix-", "check-"
STUB_MARKERS = ("NotImplementedError", "TODO")
LINE_CACHE_SIZE = 1 << 16  # lines of prompt text whose unit ids a catalogue keeps (Catalogue.ids_named)



@dataclass(frozen=True)
class Unit:
    """One piece of work as an agent sees it.

    ``files`` are the files it writes (none for a check), ``symbols`` what it changes in them (none: the
    whole file), ``deps`` the ids of the units it builds on, ``tests`` substrings of the test and check
    ids that exercise it, ``visible`` False for work a plan made from the description would not contain.
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

# ================================================================================ examples ====

_IMPORT = re.compile(r"^(?:from\s+([\w.]+)\s+import\s+(.+)|import\s+([\w.]+))$")
_MEMBER = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\([^()]*\))?\s*\.\s*([A-Za-z_]\w*)")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class Example:
    """One example of a project description: ``>>> expr`` and the output the user expects."""

    check: str  # <module>.<symbol>: what the example exercises
    module: str
    setup: str  # the imports stated before it
    expr: str
    expected: str


def examples_in(text: str) -> tuple[Example, ...]:
    """The ``>>>`` examples of a text whose call can be traced to an imported module."""
    names: dict[str, str] = {}  # imported name -> module
    imports: list[str] = []
    out: list[Example] = []
    if not text or ">>> " not in text:
        return ()
    lines = text.splitlines()
    # the lines that can start an example (a fast substring test first; most of a prompt has none)
    starts = [k for k, raw in enumerate(lines) if ">>> " in raw and raw.strip().startswith(">>> ")]
    for k in starts:  # (an example's expected lines stop at the next ">>> " line, so none of them is a start)
        line = lines[k].strip()
        i = k + 1
        code = line[4:].strip()
        if m := _IMPORT.match(code):
            imports.append(code)
            if m.group(3):
                names[m.group(3)] = m.group(3)
            else:
                for part in m.group(2).split(","):
                    names[part.split(" as ")[-1].strip()] = m.group(1)
            continue
        expected = []
        while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith(">>> "):
            expected.append(lines[i].strip())
            i += 1
        if not expected:
            continue
        check = module = None
        if m := next((m for m in _MEMBER.finditer(code) if m.group(1) in names), None):
            module = names[m.group(1)]
            check = f"{module}.{m.group(2)}" if module == m.group(1) else f"{module}.{m.group(1)}.{m.group(2)}"
        elif m := next((m for m in _CALL.finditer(code) if m.group(1) in names), None):
            module = names[m.group(1)]
            check = f"{module}.{m.group(1)}"
        if check is None or module is None or not _complete(code, tuple(expected)):
            continue  # an example cut short (a listing that truncates task texts) is not one to run
        out.append(Example(check=check, module=module, setup=_setup(code, tuple(imports)), expr=code,
                           expected="\n".join(expected)))
    return tuple({(e.check, e.expr): e for e in reversed(out)}.values())[::-1]


@functools.lru_cache(maxsize=4096)
def _setup(code: str, imports: tuple[str, ...]) -> str:
    """The imports stated so far that an example's code uses."""
    return "\n".join(imp for imp in imports if any(_named(n.split(" as ")[-1].strip(), code) for n in
                                                  re.split(r",|\bimport\b", imp.split(" import ", 1)[-1]) if n.strip()))


@functools.lru_cache(maxsize=4096)
def _complete(code: str, expected: tuple[str, ...]) -> bool:
    """Whether an example's expression and its expected output are whole Python expressions."""
    try:
        compile(code, "<example>", "eval")
        compile("\n".join(expected), "<expected>", "eval")
    except SyntaxError:
        return False
    return True


CHECK_HELPERS_TEXT = '''"""Runs examples and prints one PASSED/FAILED line per example (shared by the check scripts)."""

import importlib
import sys

sys.path.insert(0, ".")


def run(examples):
    """examples: (check id, setup code, expression, expected output as the user wrote it)."""
    for check, setup, expr, expected in examples:
        scope = {}
        try:
            for name in list(sys.modules):
                if name.split(".")[0] in {line.split()[1] for line in setup.splitlines() if line.split()}:
                    del sys.modules[name]
            importlib.invalidate_caches()
            exec(setup, scope)
            got = eval(expr, scope)
        except Exception as exc:  # noqa: BLE001 - every failure is a finding
            print(f"FAILED {check} - {expr} raised {type(exc).__name__}: {exc}"[:300])
            continue
        try:
            ok = got == eval(expected, {})
        except Exception:  # noqa: BLE001 - expected output that is not an expression: compare the text
            ok = repr(got) == expected or str(got) == expected
        print(f"PASSED {check}" if ok else f"FAILED {check} - {expr} gave {got!r}, expected {expected}"[:300])
'''


def check_script(module: str, examples: Iterable[Example]) -> str:
    """The check script of one module: its examples, run by the shared helpers."""
    rows = ",\n".join(f"    ({e.check!r}, {e.setup!r}, {e.expr!r}, {e.expected!r})" for e in examples)
    return (f'"""Checks {module} against the examples of the project description."""\n\n'
            f"from check_helpers import run\n\nrun([\n{rows},\n])\n")


def check_path(module: str) -> str:
    return f"{CHECK_PREFIX}{module}.py"


# ============================================================================= the catalogue ====

def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def unit_id(symbol: str) -> str:
    return FIX + symbol.replace(".", "-")


def is_stub(text: str) -> bool:
    """Whether a function's body is a placeholder (``raise NotImplementedError``, ``pass``, ``...``, TODO)."""
    try:
        node = ast.parse(text).body[0]
    except (SyntaxError, IndexError):
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
        if isinstance(b, ast.Raise) and "NotImplementedError" in ast.unparse(b):
            return True
    return "TODO" in text


def _calls(text: str) -> set[str]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def _imports(text: str) -> list[str]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    out = []
    for n in tree.body:
        if isinstance(n, ast.ImportFrom) and n.module:
            out.append(n.module)
        elif isinstance(n, ast.Import):
            out.extend(a.name for a in n.names)
    return out


def _named(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None


class Catalogue:
    """The units a project's public text and files show (computed once per project)."""

    def __init__(self, project: Project):
        self.project = project
        p = project
        public = p.public_text
        tests_text = "\n".join(p.start.get(t, "") for t in p.public_tests)
        self.test_classes = tuple(dict.fromkeys(re.findall(r"^class (Test\w+)", tests_text, re.M)))
        self._examples = examples_in(p.description)
        described = sorted((f for f in paths_in(p.description) if f in p.paths and f not in p.public_tests),
                           key=lambda f: p.description.index(f))
        self.code_files = [f for f in sorted(p.paths) if S.kind(f) == "py" and f not in p.public_tests]
        self.data_files = E.data_files(p.start, p.public_tests)  # what agents profile, and what they must see
        self.data = frozenset().union(*(E.data_tokens(p.start[f]) for f in self.data_files))
        units: list[WorkUnit] = []
        in_files: dict[str, set[str]] = {}
        for f in described:
            syms = self._file_symbols(f, public)
            if syms is None:
                continue
            in_files[f] = set(syms)
            units.append(self._file_unit(f, syms, tests_text))
        stems = {_stem(u.files[0]): u for u in units}
        for i, u in enumerate(units):  # a module builds on the units it imports whose new parts its code uses
            f = u.files[0]
            code = p.correct(f) or ""
            deps = tuple(dict.fromkeys(stems[m].id for m in _imports(p.start.get(f, "")) if m in stems
                                       and stems[m].id != u.id
                                       and any(_named(sym.rsplit(".", 1)[-1], code) for sym in stems[m].symbols)))
            units[i] = _replace(u, deps=deps)
        # functions the public tests cover one class each, in files the description names
        covered: dict[str, tuple[str, str]] = {}  # symbol -> (file, test class)
        for cls in self.test_classes:
            want = _norm(cls.removeprefix("Test"))
            for f in described:
                if S.kind(f) != "py":
                    continue
                hit = next((s for s in p.start_symbols(f) if "." not in s and _norm(s) == want
                            and s not in in_files.get(f, set())), None)
                if hit and _named(hit, p.description):
                    covered.setdefault(hit, (f, cls))
        self.covered_symbols = covered
        for sym, (f, cls) in covered.items():
            callees = sorted(c for c in _calls(p.start_symbols(f)[sym]) if c in covered and c != sym)
            deps = tuple(unit_id(c) for c in callees)
            check = f"{_stem(f)}.{sym}"
            if callees:
                units.append(WorkUnit(id=f"{CHECK}{sym}", title=f"Check {sym}", files=(), deps=deps, tests=(cls,),
                                      description=f"{sym} calls {', '.join(callees)}; once they are fixed, run the "
                                      f"tests and confirm {cls} passes."))
            else:
                units.append(WorkUnit(id=unit_id(sym), title=f"Fix {sym}", files=(f,), symbols=(sym,), tests=(cls, check),
                                      description=f"Make {sym} in {f} meet its contract in the description; "
                                      f"{cls} must pass."))
        self.units = units
        self.by_id = {u.id: u for u in units}
        self._resolved: dict[str, WorkUnit | None] = {}
        self._lock = threading.Lock()
        self.id_pattern = re.compile(r"(?<![\w-])(" + "|".join(
            [re.escape(u.id) for u in sorted(units, key=lambda u: -len(u.id))] + [rf"{FIX}[A-Za-z_][\w\-]*"])
            + r")(?![\w-])")
        self._ids_by_line: dict[str, frozenset[str]] = {}

    def ids_named(self, text: str) -> set[str]:
        """The unit ids a text names (whole words). ``id_pattern`` never matches across a line boundary, so they
        are the union of its lines', and each distinct line is scanned once (a prompt repeats most of them)."""
        named: set[str] = set()
        for line in text.splitlines():
            found = self._ids_by_line.get(line)
            if found is None:
                if len(self._ids_by_line) >= LINE_CACHE_SIZE:
                    self._ids_by_line.clear()
                found = self._ids_by_line[line] = frozenset(m.group(1) for m in self.id_pattern.finditer(line))
            named |= found
        return named

    # ----- what a described file leaves to write -----
    def _file_symbols(self, f: str, public: str) -> list[str] | None:
        p = self.project
        start, correct = p.start_symbols(f), p.correct_symbols(f)
        if f not in p.start:
            if f not in p.solution:
                return None
            if S.kind(f) == "whole":
                return []
            return [s for s in correct if "." not in s and _named(s, p.description)] or None
        if S.kind(f) != "py":
            return None
        stubs = [s for s, text in start.items() if is_stub(text)]
        absent = [s for s in correct if s not in start and _named(s.rsplit(".", 1)[-1], public)
                  and ("." not in s or s.split(".", 1)[0] in start)]
        out: list[str] = []
        for cls in dict.fromkeys(s.split(".", 1)[0] for s in stubs + absent if "." in s):
            methods = [s for s in start if s.startswith(cls + ".")]
            if methods and all(m in stubs for m in methods) and not any(a.startswith(cls + ".") for a in absent):
                out.append(cls)
            elif any(a.startswith(cls + ".") for a in absent) and f"{cls}.__init__" in start \
                    and not S.same_symbol(start[f"{cls}.__init__"], correct.get(f"{cls}.__init__"), f) \
                    and f"{cls}.__init__" not in stubs:
                out.append(f"{cls}.__init__")  # new members that keep state need the constructor too
        for s in stubs + absent:
            if s not in out and not ("." in s and s.split(".", 1)[0] in out):
                out.append(s)
        return out or None

    def _file_unit(self, f: str, syms: list[str], tests_text: str) -> WorkUnit:
        stem = _stem(f)
        base = _norm(f.rsplit("/", 1)[-1])
        tests = [c for c in self.test_classes if _norm(c.removeprefix("Test")) in (_norm(stem), base)]
        if f'"{stem}"' in tests_text:
            tests.append(f"[{stem}]")
        tests += [f"test_{stem}.py::" for t in self.project.public_tests if t.rsplit("/", 1)[-1] == f"test_{stem}.py"]
        tests += [f"{stem}.{s}" for s in syms] or [f"{stem}."]
        for s in syms:  # the attributes a constructor it writes sets up
            if s.endswith(".__init__"):
                init = self.project.correct_symbols(f).get(s, "")
                tests += [f"{stem}.{s[:-len('__init__')]}{a}" for a in dict.fromkeys(re.findall(r"self\.(\w+)\s*=", init))
                          if not a.startswith("_")]
        what = ", ".join(syms) if syms else "the whole file"
        paras = [para.strip() for para in re.split(r"\n\s*\n|\n(?=\d+\. |- )", self.project.description) if f in para]
        item = next((para for para in paras if re.match(r"\d+\. ", para)), paras[0] if paras else "")
        verb = "Write" if f not in self.project.start else "Complete"
        text = f"{verb} {f} ({what}) as the project description states. {item}"[:600]
        mine = [e for e in self._examples if e.module == stem]
        if mine:  # the description's examples for the module travel with the task, so whoever takes it can check
            lines = list(dict.fromkeys(line for e in mine for line in e.setup.splitlines()))
            text += "\nExamples:\n" + "\n".join(f">>> {line}" for line in lines) + "\n"
            text += "\n".join(f">>> {e.expr}\n{e.expected}" for e in mine)
        return WorkUnit(id=stem, title=f"{verb} {f}", files=(f,), symbols=tuple(syms), tests=tuple(tests),
                        description=text)

    # ----- ids -----
    def resolve(self, uid: str) -> WorkUnit | None:
        """The unit an id stands for: a catalogue unit, or ``fix-<symbol>`` of a symbol in the project's code."""
        if uid in self.by_id:
            return self.by_id[uid]
        with self._lock:
            if uid in self._resolved:
                return self._resolved[uid]
        unit = None
        if uid.startswith(FIX):
            name = uid[len(FIX):].replace("-", ".")
            p = self.project
            f = next((f for f in self.code_files if name in p.start_symbols(f) or name in p.correct_symbols(f)), None)
            if f is not None:
                cov = self.covered_symbols.get(name)
                callees = sorted(c for c in _calls(p.start_symbols(f).get(name, "")) if c in self.covered_symbols
                                 and c != name)
                tests = ((cov[1],) if cov else ()) + (f"{_stem(f)}.{name}",)
                unit = WorkUnit(id=uid, title=f"Fix {name}", files=(f,), symbols=(name,), visible=False,
                                deps=tuple(unit_id(c) for c in callees), tests=tests,
                                description=f"{name} in {f} does not do what the checks expect; fix it.")
        with self._lock:
            self._resolved[uid] = unit
        return unit


def _replace(u: WorkUnit, **kw) -> WorkUnit:
    from dataclasses import replace

    return replace(u, **kw)


_CATALOGUES: dict[str, Catalogue] = {}
_CAT_LOCK = threading.Lock()


def catalogue(project: Project) -> Catalogue:
    with _CAT_LOCK:
        cat = _CATALOGUES.get(project.key)
        if cat is None or cat.project is not project:
            cat = _CATALOGUES[project.key] = Catalogue(project)
        return cat


# ================================================================================ the skill ====

class Skill:
    """The units one prompt shows, and how to write them (patch content from the fix book)."""

    def __init__(self, project: Project | None, text: str, failures: Iterable[str]):
        self.project = project
        self.start: dict[str, str] = project.start if project else {}
        self.solution: dict[str, str] = project.solution if project else {}
        self.public_tests: tuple[str, ...] = project.public_tests if project else ()
        self._blame_cache: dict[str, frozenset[str]] = {}
        self.text = text  # the evidence: what the prompt shows
        self.data_files: tuple[str, ...] = ()
        if project is None:
            self.cat = None
            self.units: list[WorkUnit] = []
            self.by_id: dict[str, WorkUnit] = {}
            self.covered: dict[str, bool] = {}
            self.public_classes: tuple[str, ...] = ()
            self.examples: tuple[Example, ...] = ()
            return
        cat = self.cat = catalogue(project)
        self.data_files = cat.data_files
        self.examples = examples_in(text)
        self.public_classes = cat.test_classes
        described = bool(project.lines) and any(line in text for line in project.lines)
        named = cat.ids_named(text)
        units = [u for u in cat.units if described or u.id in named]
        ids = {u.id for u in units}
        # a check's failure is evidence about the checked function too: its own fix, not in any plan
        extra = [u for c in units if c.id.startswith(CHECK) and (u := cat.resolve(FIX + c.id[len(CHECK):]))]
        for uid in sorted(named - ids):
            u = cat.resolve(uid)
            if u is not None:
                extra.append(u)
        for f in failures:  # a failure or check about a symbol no known unit covers
            if any(_matches(t, f) for u in units + extra for t in u.tests):
                continue
            named_by_failure = [u for u in cat.units if any(_matches(t, f) for t in u.tests)]
            if named_by_failure:  # a test named after a function or file of the project
                extra += named_by_failure
                extra += [u for c in named_by_failure if c.id.startswith(CHECK)
                          and (u := cat.resolve(FIX + c.id[len(CHECK):]))]
                continue
            m = re.fullmatch(r"([\w/]+)\.([A-Za-z_][\w.]*)", f)
            if m:
                u = cat.resolve(unit_id(m.group(2)))
                if u is not None and f"{_stem(u.files[0])}" == m.group(1).rsplit("/", 1)[-1]:
                    extra.append(u)
        self.units = units + [u for u in dict((u.id, u) for u in extra).values() if u.id not in ids]
        self.by_id = {u.id: u for u in self.units}
        # covered: the public tests exercise the unit's behaviour (a test class or a test file of its own),
        # so a green run says something about it; a test that only looks its names up does not
        self.covered = {u.id: any(c in self.public_classes for c in u.tests)
                        or any(t.startswith("test_") and t.endswith(".py::") for t in u.tests)
                        for u in self.units}

    # ----- unit facts -----
    def patchable(self, unit: WorkUnit) -> bool:
        """False for check-only units (they write no file)."""
        return bool(self.unit_files(unit))

    def probe(self, unit: WorkUnit) -> tuple[str, str] | None:
        """(path, text) of the unit's check script: the examples its prompt shows for the unit's module."""
        if self.cat is None:
            return None
        files = unit.files or tuple(f for d in unit.deps if (u := self.unit(d)) for f in u.files)
        mods = {_stem(f) for f in files}
        examples = [e for e in self.examples if e.module in mods]
        if not examples:
            if unit.files and self.data_files:  # a deliverable about data: profile the data first
                return E.profile_path(self.data_files[0]), E.profile_script(self.data_files[0])
            return None
        module = examples[0].module
        mine = [e for e in examples if e.module == module]
        return check_path(module), check_script(module, mine)

    def observable(self, unit: WorkUnit) -> bool:
        """Whether anything an agent can run observes the unit: the public tests, or its check script."""
        return bool(self.covered.get(unit.id)) or self.probe(unit) is not None

    def visible_units(self) -> list[WorkUnit]:
        return [u for u in self.units if u.visible]

    def unit(self, unit_id: str) -> WorkUnit | None:
        u = self.by_id.get(unit_id)
        if u is None and self.cat is not None:
            u = self.cat.resolve(unit_id)
        return u

    def order(self, units: Iterable[WorkUnit]) -> list[WorkUnit]:
        """Units in dependency order (a unit after the units it depends on), else the order given."""
        chosen = {u.id: u for u in units}
        index = {u.id: i for i, u in enumerate(self.units)}
        out: list[WorkUnit] = []
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

    def units_in_text(self, text: str) -> list[WorkUnit]:
        """Units whose id is named in a free text (whole word), in order of first mention."""
        if self.cat is None or not text:
            return []
        out: list[WorkUnit] = []
        for m in self.cat.id_pattern.finditer(text):
            u = self.unit(m.group(1))
            if u is not None and u not in out:
                out.append(u)
        return out

    # ----- tests -----
    def failing_units(self, failures: Iterable[str]) -> list[WorkUnit]:
        """Units exercised by any of the failing test or check ids (a collection error of a file counts
        for every unit tested in it), in the order of the units."""
        failures = list(failures)
        return [u for u in self.units if self.unit_failing(u, failures)]

    def unit_failing(self, unit: WorkUnit, failures: Iterable[str]) -> bool:
        return any(unit.id in self._blames(f) or (unit.id not in self.by_id and any(_matches(t, f) for t in unit.tests))
                   for f in failures)

    def _blames(self, failure: str) -> frozenset[str]:
        hit = self._blame_cache.get(failure)
        if hit is None:
            hit = frozenset(u.id for u in self.units if any(_matches(t, failure) for t in u.tests))
            self._blame_cache[failure] = hit
        return hit

    def names_unit(self, unit: WorkUnit, ids: Iterable[str]) -> bool:
        """Whether any of the test or check ids is one of the unit's own."""
        return any(_matches(t, f) for f in ids for t in unit.tests)

    # ----- code (the fix book's content) -----
    def solution_symbols(self, path: str) -> dict[str, str]:
        return self.project.correct_symbols(path) if self.project else {}

    def start_symbols(self, path: str) -> dict[str, str]:
        return self.project.start_symbols(path) if self.project else {}

    def version(self, unit: WorkUnit, path: str, correct: bool, rng) -> dict[str, str] | str:
        """The unit's output for one file: {symbol: text}, or the whole file text for whole-file units.

        A correct version brings the module-level names it uses that the file does not have yet.
        ``correct=False`` gives the correct output with one generic slip in one of its symbols (or in
        the whole file); when nothing can slip, the agent "fails to find the change" and leaves the
        version it started from.
        """
        if not unit.symbols:
            good = self.solution.get(path, self.start.get(path, ""))
            if correct:
                return good
            return mutate_file(good, path, rng) or self.start.get(path, "")
        sol = self.solution_symbols(path)
        start = self.start_symbols(path)
        out = {sym: sol.get(sym, start.get(sym, "")) for sym in unit.symbols if sym in sol or sym in start}
        if S.kind(path) == "py":
            used = {w for text in out.values() for w in re.findall(r"[A-Za-z_]\w*", text)}
            for name in sol:
                if "." not in name and name not in start and name not in out and name in used:
                    out[name] = sol[name]
            if self.cat is not None and self.cat.data:  # facts about the data: only as far as the prompt showed them
                out = E.gate_symbols(out, path, self.cat.data, self.text)
        if not correct and out:
            names = [s for s in out if s in unit.symbols]
            rng.shuffle(names)
            for sym in names:
                slipped = mutate_symbol(out[sym], path, rng)
                if slipped is not None and not S.same_symbol(slipped, out[sym], path):
                    out[sym] = slipped
                    break
            else:
                out = {sym: start[sym] for sym in out if sym in start}
        return out

    def stale(self, unit: WorkUnit, path: str, view: str | None) -> bool:
        """Whether the prompt now shows facts about the data that the unit's constants in the file lack: a
        value (``99``, ``var_05``) the agent would write into them today that the file, as it sees it, does
        not hold. An agent that wrote them before it profiled the data goes back to them."""
        if self.cat is None or not self.cat.data or view is None or S.kind(path) != "py":
            return False
        try:
            have = S.get_symbols(view, path)
        except S.SpliceError:
            return False
        sol = self.solution_symbols(path)
        for sym in unit.symbols:
            text = sol.get(sym)
            if not text or not E.is_constant(text):
                continue
            wanted = E.gate_constant(text, self.cat.data, self.text)
            current = have.get(sym, "")
            if wanted is not None and any(not E.shown(tok, current) for tok in E.data_literals(wanted, self.cat.data)):
                return True
        return False

    def patch(self, base: str | None, path: str, versions: Mapping[str, str] | str) -> str:
        """The file ``base`` (the agent's view; None when absent) with a unit's output spliced in.

        A view that cannot be parsed (cut off by the read cap, or broken) is replaced by the agent's
        knowledge of the starting file, as a model that cannot see the whole file would rewrite it.
        """
        if isinstance(versions, str):
            return versions
        if base is None:
            base = self.start.get(path, "")
        try:
            return S.splice(base, path, dict(versions))
        except S.SpliceError:
            return S.splice(self.start.get(path, ""), path, dict(versions))

    def state(self, unit: WorkUnit, path: str, view: str | None) -> str:
        """How a unit looks in one file as the agent sees it: ``start`` (untouched or absent),
        ``solution`` or ``other`` (changed some other way: a slip, or someone else's version)."""
        if view is None:
            return "start"
        if not unit.symbols:
            if self.solution.get(path) is not None and S.normalize_code(view) == S.normalize_code(self.solution[path]):
                return "solution"
            if path in self.start and S.normalize_code(view) == S.normalize_code(self.start[path]):
                return "start"
            return "other" if view.strip() else "start"
        try:
            have = S.get_symbols(view, path)
        except S.SpliceError:
            return "other"
        sol, start = self.solution_symbols(path), self.start_symbols(path)
        states = []
        for sym in unit.symbols:
            if sym not in sol and sym not in start:
                continue
            cur = have.get(sym)
            if cur is not None and sym in sol and S.same_symbol(cur, sol[sym], path):
                states.append("solution")  # first: a symbol already right at the start is right as it is
            elif cur is None or (sym in start and S.same_symbol(cur, start[sym], path)):
                states.append("start")
            else:
                states.append("other")
        if not states or all(s == "solution" for s in states):
            return "solution"
        if all(s == "start" for s in states):
            return "start"
        return "other"

    def unit_files(self, unit: WorkUnit) -> list[str]:
        """The unit's files the agent works on (those that exist at the start or in the solution)."""
        return [p for p in unit.files if p in self.start or p in self.solution]


def _matches(test_substring: str, failure: str) -> bool:
    """Whether a failing test id (or a file that failed to collect) exercises a unit's test."""
    if test_substring in failure:
        return True
    if "::" in failure or not failure.endswith(".py"):
        return False
    # a collection error names only the file: every test in that file fails
    if "::" in test_substring:
        return test_substring.split("::", 1)[0] == failure
    return test_substring.startswith("Test") or test_substring.startswith("[")


failures_in_text = failures_in  # failing test or check ids named in a text (FAILED/ERROR lines)


def skill_from_text(text: str, files: Mapping[str, str] | None = None, failures: Iterable[str] = (),
                    tasks: Mapping[str, object] | None = None) -> Skill:
    """The skill an agent whose prompt shows ``text`` (and the ``files`` it read) would have: for tests
    and notebooks that look at what a prompt reveals."""
    from latte_lab.models.sim.fixbook import fix_book

    return Skill(fix_book(tasks).project_for(dict(files or {}), text), text, failures)
