"""What the simulated agent "knows" about a task: its skill.

A :class:`TaskSkill` is built once per task from the task's reference decomposition
(``work_units()``), its reference solution and its starting files. It answers the questions an agent
answers from experience: which units the description reveals, which unit a failing test or a check
belongs to, what the correct version of a unit looks like (a wrong one is a generic slip of it,
``latte_lab.models.sim.mutate``), and how to patch a file with it. Whether the agent gets to write the
correct version is decided elsewhere, from what its prompt shows. Nothing here knows about teams,
tasks by name, or outcomes.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from latte_lab.errors import TaskError
from latte_lab.models.sim import source as S
from latte_lab.models.sim.mutate import mutate_file, mutate_symbol
from latte_lab.models.view import failures_in
from latte_lab.tasks.base import Task, WorkUnit


class _SetupRecorder:
    """Stands in for a Workspace during ``task.setup`` to capture the starting files without I/O."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.protected: set[str] = set()
        self.test_args: tuple[str, ...] = ()

    def setup_file(self, path: str, text: str) -> None:
        self.files[str(path)] = text

    write = setup_file

    def protect(self, *paths: str) -> None:
        self.protected.update(paths)

    def exists(self, path: str) -> bool:
        return path in self.files

    def read(self, path: str, agent: str | None = None) -> str:
        return self.files[path]


def starting_files(task: Task) -> dict[str, str]:
    """The files ``task.setup`` writes, captured without touching the disk when the task allows it."""
    rec = _SetupRecorder()
    try:
        task.setup(rec)  # type: ignore[arg-type]
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


@dataclass
class TaskSkill:
    """The simulated agent's knowledge of one task."""

    task_id: str
    units: list[WorkUnit]
    solution: dict[str, str]  # path -> reference content
    start: dict[str, str]  # path -> starting content
    public_tests: tuple[str, ...] = ()
    _sol_symbols: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    _start_symbols: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._blame_cache: dict[str, frozenset[str]] = {}
        ids = [u.id for u in self.units]
        if len(set(ids)) != len(ids):
            raise TaskError(f"task {self.task_id!r} has duplicate work unit ids: {ids}")
        self.by_id = {u.id: u for u in self.units}
        for u in self.units:
            for path in u.files:
                if self.patchable(u) and path not in self.solution and path not in self.start:
                    raise TaskError(f"work unit {u.id!r} of task {self.task_id!r} names {path!r}, which is "
                                    "neither a starting file nor in the reference solution")
            if u.symbols:
                found = {s for path in u.files for s in self.solution_symbols(path)}
                found |= {s for path in u.files for s in self.start_symbols(path)}
                missing = [s for s in u.symbols if s not in found]
                if missing and any(S.kind(p) != "whole" for p in u.files):
                    raise TaskError(f"work unit {u.id!r} of task {self.task_id!r}: symbols {missing} are in "
                                    f"neither the reference solution nor the starting version of {', '.join(u.files)}")
        public_text = "\n".join(self.start.get(p, "") for p in self.public_tests)
        self.public_classes = tuple(dict.fromkeys(re.findall(r"^class (Test\w+)", public_text, re.M)))
        # covered: the public tests exercise the unit, so running them is an observation of it
        self.covered = {u.id: any(_test_name(t) in public_text for t in u.tests if t.startswith("Test"))
                        or (u.visible and any(self._by_file(c, u) for c in self.public_classes)) for u in self.units}

    # ----- construction -----
    @classmethod
    def from_task(cls, task: Task) -> TaskSkill:
        return cls(task_id=task.id, units=list(task.work_units()), solution=dict(task.reference_solution()),
                   start=starting_files(task), public_tests=tuple(task.public_tests))

    # ----- unit facts -----
    def patchable(self, unit: WorkUnit) -> bool:
        """False for check-only units (they write no file)."""
        return bool(self.unit_files(unit))

    def observable(self, unit: WorkUnit) -> bool:
        """Whether anything an agent can run observes the unit: the public tests, or its probe."""
        return bool(self.covered.get(unit.id)) or bool(unit.probe)

    def visible_units(self) -> list[WorkUnit]:
        return [u for u in self.units if u.visible]

    def unit(self, unit_id: str) -> WorkUnit | None:
        return self.by_id.get(unit_id)

    def order(self, units: Iterable[WorkUnit]) -> list[WorkUnit]:
        """Units in dependency order (a unit after the units it depends on), else declaration order."""
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

        for uid in sorted(chosen, key=lambda i: index.get(i, 0)):
            visit(uid)
        return out

    def units_in_text(self, text: str) -> list[WorkUnit]:
        """Units whose id is named in a free text (whole word), in order of first mention."""
        hits = []
        for u in self.units:
            m = re.search(rf"(?<![\w-]){re.escape(u.id)}(?![\w-])", text)
            if m:
                hits.append((m.start(), u))
        return [u for _, u in sorted(hits, key=lambda h: h[0])]

    # ----- tests -----
    def failing_units(self, failures: Iterable[str]) -> list[WorkUnit]:
        """Units exercised by any of the failing test ids; a collection error of a file counts for
        every unit tested in it. Declaration order."""
        failures = list(failures)
        return [u for u in self.units if self.unit_failing(u, failures)]

    def unit_failing(self, unit: WorkUnit, failures: Iterable[str]) -> bool:
        """Whether any failure exercises the unit: by its test or check ids, or, for a failure that no
        unit names, by a test class named after the unit's file (``TestFindingsJson`` ->
        findings.json; visible units only: work the description does not reveal is never blamed by
        the file alone)."""
        return any(unit.id in self._blames(f) for f in failures)

    def _blames(self, failure: str) -> frozenset[str]:
        """Ids of the units one failing id exercises (cached: the same ids come back every turn)."""
        hit = self._blame_cache.get(failure)
        if hit is None:
            named = frozenset(u.id for u in self.units if any(_matches(t, failure) for t in u.tests))
            hit = named or frozenset(u.id for u in self.units if u.visible and self._by_file(failure, u))
            self._blame_cache[failure] = hit
        return hit

    def names_unit(self, unit: WorkUnit, ids: Iterable[str]) -> bool:
        """Whether any of the test or check ids is one of the unit's own (no matching by file)."""
        return any(_matches(t, f) for f in ids for t in unit.tests)

    def _by_file(self, test_id: str, unit: WorkUnit) -> bool:
        cls = next((p for p in test_id.split("::") if p.startswith("Test")), "")
        name = re.sub(r"[^a-z0-9]", "", cls.lower().removeprefix("test"))
        if not name:
            return False
        for f in unit.files:
            base = f.rsplit("/", 1)[-1].lower()
            forms = {re.sub(r"[^a-z0-9]", "", base), re.sub(r"[^a-z0-9]", "", base.rsplit(".", 1)[0])}
            if name in forms:
                return True
        return False

    # ----- code -----
    def solution_symbols(self, path: str) -> dict[str, str]:
        if path not in self._sol_symbols:
            self._sol_symbols[path] = _safe_symbols(self.solution.get(path, ""), path)
        return self._sol_symbols[path]

    def start_symbols(self, path: str) -> dict[str, str]:
        if path not in self._start_symbols:
            self._start_symbols[path] = _safe_symbols(self.start.get(path, ""), path)
        return self._start_symbols[path]

    def version(self, unit: WorkUnit, path: str, correct: bool, rng) -> dict[str, str] | str:
        """The unit's output for one file: {symbol: text}, or the whole file text for whole-file units.

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
        if not correct and out:
            names = list(out)
            rng.shuffle(names)
            for sym in names:
                slipped = mutate_symbol(out[sym], path, rng)
                if slipped is not None and not S.same_symbol(slipped, out[sym], path):
                    out[sym] = slipped
                    break
            else:
                out = {sym: start[sym] for sym in out if sym in start}
        return out

    def patch(self, base: str | None, path: str, versions: Mapping[str, str] | str) -> str:
        """The file ``base`` (the agent's view; None when absent) with a unit's output spliced in.

        A view that cannot be parsed (cut off by the read cap, or broken) is replaced by the agent's
        knowledge of the starting file, as a model that cannot see the whole file would rewrite it.
        """
        if isinstance(versions, str):
            return versions
        if base is None:
            base = self.start.get(path)
        if base is None:  # a file the agent creates: an empty document, or the module's known layout
            base = "" if S.kind(path) == "json" else self.solution.get(path, "")
        try:
            return S.splice(base, path, dict(versions))
        except S.SpliceError:
            fallback = self.start.get(path, self.solution.get(path, ""))
            return S.splice(fallback, path, dict(versions))

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
            if cur is None or (sym in start and S.same_symbol(cur, start[sym], path)):
                states.append("start")
            elif sym in sol and S.same_symbol(cur, sol[sym], path):
                states.append("solution")
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


def _test_name(test: str) -> str:
    return test.split("::")[-1]


def _matches(test_substring: str, failure: str) -> bool:
    """Whether a failing test id (or a file that failed to collect) exercises a unit's test."""
    if test_substring in failure:
        return True
    if "::" in failure or not failure.endswith(".py"):
        return False
    # a collection error names only the file: every test in that file fails
    if "::" in test_substring:
        return test_substring.split("::", 1)[0] == failure
    return True


def _safe_symbols(text: str, path: str) -> dict[str, str]:
    try:
        return S.get_symbols(text, path)
    except S.SpliceError:
        return {}


failures_in_text = failures_in  # failing test or check ids named in a text (FAILED/ERROR lines)


_CACHE: dict[str, TaskSkill] = {}
_LOCK = threading.Lock()


def skill_for(task_id: str, tasks: Mapping[str, Task] | None = None) -> TaskSkill:
    """The (cached) skill of a task: from ``tasks`` when given, else the task registry."""
    if tasks is not None and task_id in tasks:
        key = f"{task_id}@{id(tasks[task_id])}"
        task = tasks[task_id]
    else:
        key = task_id
        task = None
    with _LOCK:
        if key not in _CACHE:
            if task is None:
                from latte_lab import tasks as registry

                task = registry.get(task_id)
            _CACHE[key] = TaskSkill.from_task(task)
        return _CACHE[key]
