"""The documentation site covers the package: every module of latte_lab has its place in the API reference
(``docs/api/*.md``), unless it is an internal listed here. ``make test`` builds the site itself with
``mkdocs build --strict``; this test names the module that a new file left out, which the build cannot.
"""

from __future__ import annotations

import re
from pathlib import Path

import latte_lab

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(latte_lab.__file__).parent
TASK_PAYLOADS = ("files", "hidden", "solution", "wrong")  # tasks/<task>/<these>: data the sandbox runs
# Modules documented through the module that uses them, or implementation details of one feature.
INTERNAL = {
    "latte_lab.cli.cache", "latte_lab.cli.emulate", "latte_lab.cli.figures", "latte_lab.cli.prices", "latte_lab.cli.sweep",  # api/cli.md
    "latte_lab.cli.trial",
    "latte_lab.models.sim.analysis", "latte_lab.models.sim.analysis_report", "latte_lab.models.sim.examples", "latte_lab.models.sim.units", "latte_lab.models.sim.documents", "latte_lab.models.sim.evidence", "latte_lab.models.sim.fixbook", "latte_lab.models.sim.flat",
    "latte_lab.models.sim.lead",
    "latte_lab.models.sim.mutate", "latte_lab.models.sim.nodes", "latte_lab.models.sim.policy",
    "latte_lab.models.sim.skill", "latte_lab.models.sim.source", "latte_lab.models.sim.text",
    "latte_lab.models.sim.turn", "latte_lab.models.sim.work",  # the simulated model's internals
    "latte_lab.tasks.eda.generator", "latte_lab.tasks.eda.solution",
    "latte_lab.teams.prompt_text",
}


def _modules() -> set[str]:
    names = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = rel.parts
        payload = parts[1:2] == ("tasks",) and len(parts) > 4 and parts[3] in TASK_PAYLOADS
        if payload or any(p.startswith("_") and p != "__init__" for p in parts):
            continue
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _documented() -> set[str]:
    text = "\n".join(p.read_text() for p in (REPO / "docs" / "api").glob("*.md"))
    return set(re.findall(r"^::: (latte_lab[\w.]*)$", text, re.MULTILINE))


def test_every_module_is_in_the_api_reference_or_named_internal():
    modules, documented = _modules(), _documented()
    documented_or_parent = documented | {m.rpartition(".")[0] for m in documented}
    missing = sorted(m for m in modules - documented - INTERNAL if m not in documented_or_parent)
    assert not missing, f"add these modules to a page of docs/api/ (or to INTERNAL in {__name__}): {missing}"
    assert not documented - modules, f"docs/api/ names modules that do not exist: {sorted(documented - modules)}"
    assert not INTERNAL - modules, f"INTERNAL names modules that do not exist: {sorted(INTERNAL - modules)}"
