"""Roles of an SOP pipeline: product manager, architect and project manager publish documents, the
engineer writes one file per turn, QA runs the tests and reports bugs or passes."""

from __future__ import annotations

from latte_lab.models.sim.skill import failures_in_text
from latte_lab.models.sim.turn import Turn
from latte_lab.tasks.base import WorkUnit

PIPELINE_TOPICS = ("requirements", "design", "tasks", "bug_report", "qa_passed")


def _doc_units(t: Turn) -> list[WorkUnit]:
    docs = t.view.extra.get("documents") or {}
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
        units = [u for u in _doc_units(t) if nxt in u.files and sk.patchable(u)]
        _engineer_write(t, nxt, units, "Implementing {f} from the design ({ids}).")
        return
    docs = view.extra.get("documents") or {}
    report = str(docs.get("bug_report") or "")
    fails = failures_in_text(report) or tuple(t.failures())
    units = [u for u in sk.failing_units(fails) if sk.patchable(u)]
    units += [u for u in sk.units_in_text(report) if sk.patchable(u) and u not in units]
    if not units:
        t.note("No file left to write and no open bug report.")
        return
    counts: dict[str, int] = {}
    for u in units:
        for f in sk.unit_files(u):
            counts[f] = counts.get(f, 0) + 1
    f = max(counts, key=lambda k: (counts[k], -list(counts).index(k)))
    _engineer_write(t, f, [u for u in units if f in sk.unit_files(u)], "Fixing the reported failures in {f} ({ids}).")


def _engineer_write(t: Turn, f: str, units: list[WorkUnit], why: str) -> None:
    sk = t.skill
    base = t.view.files_read.get(f)
    merged: dict[str, str] = {}
    content: str | None = None
    for u in sk.order(units):
        v = sk.version(u, f, t.rng.random() < t.profile.p_correct_patch)
        if isinstance(v, str):
            content = v
        else:
            merged.update(v)
    if content is None:
        content = sk.patch(base, f, merged)
    elif merged:
        content = sk.patch(content, f, merged)
    t.add("edit_file", content, path=f)
    t.note(why.format(f=f, ids=", ".join(u.id for u in units) or "layout only"))


def qa(t: Turn) -> None:
    sk = t.skill
    if not t.last_had("run_tests") or not t.tests_known():
        t.add("run_tests")
        t.note("Running the test suite on the Engineer's files.")
        return
    fails = t.failures()
    if fails:
        units = sk.failing_units(fails)
        body = ("Failing tests:\n" + "\n".join(f"FAILED {f}" for f in fails[:20]) +
                (f"\nLikely culprits: {', '.join(u.id for u in units)}" if units else ""))
        t.add("publish", body, topic="bug_report")
        t.note(f"{len(fails)} tests fail; reporting them to the Engineer.")
    else:
        t.add("publish", "All tests pass.", topic="qa_passed")
        t.note("Everything passes.")


# ================================================================================== dispatch ====
