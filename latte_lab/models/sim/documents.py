"""Roles that work through published documents: requirements, design, a task list, code written file by
file from them, and a QA loop that reports what its checks find.

Each role knows only the documents it is sent. The Engineer writes from the design: it reads a file
before rewriting it when it can, but it runs nothing itself, so its first draft of a unit has no
observation behind it; the QA Engineer's bug reports are what point it at failures.
"""

from __future__ import annotations

from latte_lab.models.sim.skill import WorkUnit
from latte_lab.models.sim.turn import Turn
from latte_lab.models.sim.work import blamed, observe, write
from latte_lab.models.view import failures_in

MAX_REPORTED_FAILURES = 20  # failing ids listed in one bug report


def _docs(t: Turn) -> dict:
    return t.view.extra.get("documents") or {}


def _doc_units(t: Turn) -> list[WorkUnit]:
    docs = _docs(t)
    text = "\n".join(str(docs.get(k, "")) for k in ("requirements", "design", "tasks"))
    return t.skill.units_in_text(text)


def product_manager(t: Turn) -> None:
    units = t.skill.order(t.skill.visible_units())
    body = "Requirements (one per line):\n" + "\n".join(f"- {u.id}: {u.title}. {u.description}" for u in units)
    t.add("publish", body, topic="requirements")
    t.note(f"Writing the requirements: {len(units)} items from the project description.")


def architect(t: Turn) -> None:
    units = t.skill.order(_doc_units(t))
    by_file: dict[str, list[WorkUnit]] = {}
    for u in units:
        for f in u.files:
            by_file.setdefault(f, []).append(u)
    lines = []
    for f, us in by_file.items():
        syms = [s for u in us for s in u.symbols] or ["whole file"]
        lines.append(f"{f}: {', '.join(dict.fromkeys(syms))} (implements {', '.join(u.id for u in us)})")
    t.add("publish", "Design: files and interfaces\n" + "\n".join(lines), topic="design")
    t.note(f"Designing {len(by_file)} files from the requirements.")


def project_manager(t: Turn) -> None:
    units = t.skill.order(_doc_units(t))
    files: dict[str, list[str]] = {}
    for u in units:
        for f in u.files:
            files.setdefault(f, []).append(u.id)
    lines = [f"{i}. {f}: {', '.join(ids)}" for i, (f, ids) in enumerate(files.items(), 1)]
    t.add("publish", "Task list (in order)\n" + "\n".join(lines), topic="tasks")
    t.note(f"Ordering {len(files)} files for the Engineer.")


def engineer(t: Turn) -> None:
    view, sk = t.view, t.skill
    nxt = view.extra.get("next_file")
    if nxt:
        units = [u for u in _doc_units(t) if nxt in sk.unit_files(u)]
        return _write_file(t, nxt, units, "Implementing {f} from the design ({ids}).")
    report = str(_docs(t).get("bug_report") or "")
    fails = failures_in(report)
    units = [u for u in blamed(t, fails) if sk.patchable(u)]
    units += [u for u in sk.units_in_text(report) if sk.patchable(u) and u not in units]
    if not units:
        t.note("No file left to write and no open bug report.")
        return
    counts: dict[str, int] = {}
    for u in units:
        for f in sk.unit_files(u):
            counts[f] = counts.get(f, 0) + 1
    f = max(counts, key=lambda k: (counts[k], -list(counts).index(k)))
    _write_file(t, f, [u for u in units if f in sk.unit_files(u)], "Fixing the reported failures in {f} ({ids}).")


def _write_file(t: Turn, f: str, units: list[WorkUnit], why: str) -> None:
    """One file per turn: read it first when it exists and the prompt does not show it, then write it."""
    if t.seen(f) is None and f in t.skill.start and t.allows("read_file") and not t.last_had("read_file", path=f):
        t.add("read_file", path=f)
        t.note(f"Reading {f} before I change it.")
        return
    units = t.skill.order(units)
    if units:
        write(t, units)
    else:  # nothing of the design lives in this file: keep it as it is, so the plan moves on
        t.add("edit_file", t.seen(f) or t.skill.start.get(f, ""), path=f)
    t.notes[-1:] = [why.format(f=f, ids=", ".join(u.id for u in units) or "layout only")]


def qa(t: Turn) -> None:
    """Each turn: reports what its last run of the tests and its own checks found (work the description
    did not show included), and runs them again on the Engineer's latest files."""
    sk = t.skill
    if t.observed_last():
        fails = t.failures()
        if fails:
            units = blamed(t, fails)
            body = ("Failing tests and checks:\n" + "\n".join(f"FAILED {f}" for f in fails[:MAX_REPORTED_FAILURES]) +
                    (f"\nLikely culprits: {', '.join(u.id for u in units)}" if units else ""))
            t.add("publish", body, topic="bug_report")
            t.note(f"{len(fails)} tests and checks fail; reporting them to the Engineer.")
        else:
            t.add("publish", "All tests and checks pass.", topic="qa_passed")
            t.note("Everything passes.")
            return
    if not observe(t, _doc_units(t) or sk.visible_units()):
        t.add("run_tests")
    t.note("Running the test suite and my checks on the Engineer's files.")
