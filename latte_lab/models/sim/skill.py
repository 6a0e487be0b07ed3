"""What a simulated agent makes of a project from what its prompt shows: the units it works on, and how it
writes them.

The units come from the prompt's text and the files it shows (``latte_lab.models.sim.units``), plus work that a
failure or a check in the prompt names. The content of a correct patch comes from the fix book
(``latte_lab.models.sim.fixbook``), the only place that knows the reference; whether the agent gets to write it
is decided elsewhere, from what its prompt shows (``latte_lab.models.sim.work``). Examples and check scripts are
in ``latte_lab.models.sim.examples``. Nothing here knows about teams, tasks by name, or outcomes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from latte_lab.models.sim import analysis as A
from latte_lab.models.sim import evidence as E
from latte_lab.models.sim import source as S
from latte_lab.models.sim.examples import (  # noqa: F401 - the names the policy modules import from here
    CHECK_HELPERS,
    CHECK_HELPERS_TEXT,
    CHECK_PREFIX,
    Example,
    check_path,
    check_script,
    examples_in,
)
from latte_lab.models.sim.fixbook import Project
from latte_lab.models.sim.mutate import mutate_file, mutate_symbol
from latte_lab.models.sim.units import (  # noqa: F401
    CHECK,
    FIX,
    Catalogue,
    Unit,
    WorkUnit,
    catalogue,
    fix_for_check,
    order,
    part_examples,
    stem,
    unit_id,
    units_from_text,
)
from latte_lab.models.view import failures_in

_TEST_CLASS = re.compile(r"\b(Test[A-Z]\w*)")


# ================================================================================ the skill ====

class Skill:
    """The units one prompt shows, and how to write them (patch content from the fix book)."""

    def __init__(self, project: Project | None, parts: str | Sequence[str], failures: Iterable[str],
                 shown: Mapping[str, str] | None = None):
        """``parts``: the prompt's messages (or one text); ``failures``: the test and check ids it shows results
        for; ``shown``: the files it shows (path -> text)."""
        parts = [parts] if isinstance(parts, str) else list(parts)
        text = "\n".join(parts)
        shown = dict(shown or {})
        self.shown = shown
        self.project = project
        self.start: dict[str, str] = project.start if project else {}
        self.solution: dict[str, str] = project.solution if project else {}
        self.public_tests: tuple[str, ...] = project.public_tests if project else ()
        self._blame_cache: dict[str, frozenset[str]] = {}
        self.text = text  # what the prompt shows
        self.evidence = ""  # what it shows about the project's data (E.data_evidence)
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
        self.evidence = E.data_evidence(text, shown, self.data_files) if self.data_files else ""
        self.examples = tuple(dict.fromkeys(e for part in parts for e in part_examples(part)))
        # the public test classes the prompt shows (a test file read, or a failure naming one)
        public = "\n".join(project.start.get(t, "") for t in project.public_tests)
        seen = text + "".join(f"\n{shown[t]}" for t in project.public_tests if t in shown)  # a test file read
        self.public_classes = tuple(dict.fromkeys(c for c in _TEST_CLASS.findall(seen) if re.search(rf"^class {c}\b", public, re.M)))
        units = units_from_text(cat, parts, shown)
        ids = {u.id for u in units}
        # a check's failure is evidence about the checked function too: its own fix, not in any plan
        extra = [u for c in units if c.id.startswith(CHECK) and (u := cat.resolve(fix_for_check(c.id)))]
        for uid in sorted(cat.ids_named(text) - ids):  # work a message or a task names (fix-<symbol>)
            u = cat.resolve(uid)
            if u is not None:
                extra.append(u)
        for f in failures:  # a failure or check about a symbol no known unit covers
            if any(_matches(t, f) for u in units + extra for t in u.tests):
                continue
            m = re.fullmatch(r"([\w/]+)\.([A-Za-z_][\w.]*)", f) or re.search(r"::Test(\w+)", f)
            if m is None:
                continue
            if m.re.pattern.startswith("::"):  # a test class named after a function: its fix
                cands = [cat.resolve(unit_id(n)) for n in _function_names(m.group(1), cat)]
                extra += [u for u in cands if u is not None]
                continue
            u = cat.resolve(unit_id(m.group(2)))
            if u is not None and stem(u.files[0]) == m.group(1).rsplit("/", 1)[-1]:
                extra.append(u)
        self.units = units + [u for u in dict((u.id, u) for u in extra).values() if u.id not in ids]
        self.by_id = {u.id: u for u in self.units}
        # covered: the public tests exercise the unit's behaviour (a test class or a test file of its own), so a
        # green run says something about it; a test that only looks its names up does not
        public_files = {t.rsplit("/", 1)[-1] for t in project.public_tests}
        self.covered = {u.id: any(c in self.public_classes for c in u.tests)
                        or any(t.startswith("test_") and t.endswith(".py::") and t[:-2] in public_files for t in u.tests)
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
        mods = {stem(f) for f in files}
        examples = [e for e in self.examples if e.module in mods]
        if not examples:
            if self.about_data(unit):  # a report about the data: analyse it (with the team's schema)
                return A.analysis_path(self.data_files[0]), A.analysis_script(self.data_files[0])
            if unit.files and self.data_files:  # code about data: profile the data first
                return E.profile_path(self.data_files[0]), E.profile_script(self.data_files[0])
            return None
        module = examples[0].module
        mine = [e for e in examples if e.module == module]
        return check_path(module), check_script(module, mine)

    def about_data(self, unit: WorkUnit) -> bool:
        """Whether the unit writes a report about the project's data: a deliverable that is not code (a findings
        file, a narrative) in a project with data files. Its text is computed from an analysis the agent ran."""
        return bool(self.data_files) and bool(unit.files) and all(
            S.kind(f) != "py" and f not in self.start for f in unit.files)

    def needs_report(self, unit: WorkUnit) -> bool:
        """Whether the unit is a report about the data and the prompt shows no analysis to write it from, or only
        one that ran without a schema the agent now sees written (it runs the analysis again)."""
        if not self.about_data(unit):
            return False
        report = A.parse_report(self.text)
        if report is None:
            return True
        schema = f"{A.SCHEMA_MODULE}.py"
        lacking = any(f.kind == "lacking" and f.label == schema for f in report.facts)
        return lacking and schema in self.shown and bool(self.shown[schema].strip())

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
        return order(units, {u.id: i for i, u in enumerate(self.units)})

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

    def version(self, unit: WorkUnit, path: str, correct: bool, rng) -> dict[str, str] | str | None:
        """The unit's output for one file: {symbol: text}, or the whole file text for whole-file units.

        A correct version brings the module-level names it uses that the file does not have yet.
        ``correct=False`` gives the correct output with one generic slip in one of its symbols (or in
        the whole file); when nothing can slip, the agent "fails to find the change" and leaves the
        version it started from.
        """
        if not unit.symbols and self.about_data(unit):
            # computed from the latest analysis the prompt shows, never copied (None: nothing to write it from)
            good = A.compose_findings(self.text) if S.kind(path) == "json" else A.compose_summary(self.text)
            if good is None or correct:
                return good
            return mutate_file(good, path, rng) or good
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
                out = E.gate_symbols(out, path, self.cat.data, self.evidence)
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
            wanted = E.gate_constant(text, self.cat.data, self.evidence)
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

    def changed(self, unit: WorkUnit, path: str, view: str | None) -> bool:
        """Whether the file as the agent sees it holds the unit changed from the start (by anyone, rightly or
        not): what an agent that read the starting file can tell by looking. Nothing here compares with the
        reference."""
        if view is None:
            return False
        if not unit.symbols:
            if path in self.start:
                return S.normalize_code(view) != S.normalize_code(self.start[path])
            return bool(view.strip())
        try:
            have = S.get_symbols(view, path)
        except S.SpliceError:
            return True
        start = self.start_symbols(path)
        for sym in unit.symbols:
            cur = have.get(sym)
            if cur is None:
                continue
            if sym not in start or not S.same_symbol(cur, start[sym], path):
                return True
        return False

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

    files = dict(files or {})
    return Skill(fix_book(tasks).project_for(files, text), text, failures, files)


def _function_names(camel: str, cat: Catalogue) -> list[str]:
    """Functions of the project's code whose name, in CamelCase, is ``camel`` (``MovingAverage``)."""
    want = camel.lower()
    out = []
    for f in cat.code_files:
        for name in cat.project.start_symbols(f):
            if "." not in name and name.replace("_", "").lower() == want:
                out.append(name)
    return out
