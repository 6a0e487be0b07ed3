"""Layering: lower layers never import higher ones, and the core imports no models, teams, analysis or viz.

Every import counts, including those inside functions and under ``TYPE_CHECKING``, and the modules a
package's table of names resolved on first use (``_LAZY``) names: a lazy import of a higher layer is still a
dependency on it. Within a layer the packages are ordered too: a module imports only its own package and
the packages before it in its layer's tuple (analysis sits below sweep, which runs studies whose results
analysis reads), and viz, which draws every picture, sits above analysis, which returns numbers. One kind is not: a lookup in a registry of plug-ins, inside a
function and of exactly the registry module (``latte_lab.teams`` / ``latte_lab.tasks``, which users extend
from a notebook): ``TrialConfig.rounds`` reads a task's own default round budget from its class that way.
Checking names does not: TrialConfig resolves them against the built-in names config declares, and a
registry only if one is already imported, so making a config loads no task, team, sandbox or workspace
module (a test below runs it in a fresh interpreter).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import latte_lab

PACKAGE = Path(latte_lab.__file__).parent

# Bottom up. A module belongs to the layer of the longest prefix below that names it; the command line sits at the
# top. Within a layer the prefixes are bottom up too: a module may import its own prefix's modules and those of the
# prefixes before it (graph.dag before the graph, events before schema, ...). README.md's "Layers, bottom up" line is
# written from this list (test_the_readmes_layer_list_is_this_one).
LAYERS: list[tuple[str, ...]] = [
    ("errors",),
    ("config", "registry", "data"),
    ("graph.dag", "graph", "graph.history", "actions", "prompts", "events", "schema"),
    ("sandbox",),
    ("workspace",),
    ("tasks", "metrics", "rundir", "results"),
    ("models",),
    ("teams",),
    ("forking", "trial"),
    ("analysis", "scheduling", "teaching", "sweep"),
    ("viz",),
    ("cli",),
]
TOP = len(LAYERS)  # latte_lab/__init__.py re-exports the public API from every layer

REGISTRY_MODULES = ("teams", "tasks")  # looked up by name from inside functions (see the module docstring)
CORE = ("graph", "actions", "events", "schema", "metrics", "rundir")
NOT_IN_CORE = ("models", "teams", "analysis", "viz")
# Deprecated names a package still gives from a higher layer, resolved on first use (never at import): the paper's
# figures are drawn by viz, and ll.analysis.figure2a ... were their names before.
RE_EXPORTS: dict[tuple[str, str], str] = {
    ("analysis", "viz.figures"): "ll.analysis.figure2a ... figure4, deprecated names of ll.viz.figure2a ...",
}
# Upward imports that are being removed; each entry fails (strict xfail) once its import is gone, so the
# entry is deleted with it.
KNOWN_UPWARD: dict[str, str] = {}
# Data files that ship inside task packages are agent workspaces, not library code.
TASK_PAYLOAD_DIRS = ("files", "hidden", "solution")


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts)


def rank_of(name: str) -> tuple[int, int]:
    """(layer, place within the layer) of a module named relative to the package ('' is the package itself)."""
    if name == "":
        return TOP, 0
    best, best_len = None, -1
    for i, prefixes in enumerate(LAYERS):
        for j, prefix in enumerate(prefixes):
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = (i, j), len(prefix)
    if best is None:
        raise AssertionError(f"latte_lab.{name} is in no layer: add it to LAYERS in tests/package/test_layers.py "
                             "(and to DESIGN.md's layer list)")
    return best


def layer_of(name: str) -> int:
    """Layer of a module named relative to the package ('' is the package itself)."""
    return rank_of(name)[0]


def library_modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).parts
        if rel[0] == "tasks" and any(part in TASK_PAYLOAD_DIRS for part in rel[2:-1]):
            continue
        out[module_name(path)] = path
    return out


def _nodes_with_scope(tree: ast.AST):
    """Every node with whether it sits inside a function."""
    todo = [(tree, False)]
    while todo:
        node, in_function = todo.pop()
        yield node, in_function
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        todo += [(child, inner) for child in ast.iter_child_nodes(node)]


def imports_of(name: str, path: Path) -> set[str]:
    """latte_lab modules that ``name`` imports anywhere in its source, relative to the package, except
    registry lookups from inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node, in_function in _nodes_with_scope(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[:len(base) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
                targets = ["latte_lab." + mod if mod else "latte_lab"]
            else:
                targets = [node.module or ""]
            # `from latte_lab import models` imports the submodule models
            targets += [f"{targets[0]}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module" and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            targets = [node.args[0].value]
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", "").startswith("_LAZY") for t in node.targets) \
                and isinstance(node.value, ast.Dict):  # {name: "latte_lab.module"}: imported on first use
            targets = [v.value for v in node.value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
        else:
            continue
        # `from latte_lab import x` runs latte_lab/__init__.py, which imports only the errors: not a dependency
        names = {t[len("latte_lab."):] for t in targets if t.startswith("latte_lab.")}
        found.update(n for n in names if not (in_function and n in REGISTRY_MODULES))
    modules = library_modules()
    # keep only names that are modules or packages (drop `from latte_lab.x import SomeClass`)
    return {t for t in found if t in modules} - {name}


MODULES = library_modules()


def test_every_module_has_a_layer():
    for name in MODULES:
        layer_of(name)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_UPWARD[n], strict=True))
                                  if n in KNOWN_UPWARD else n for n in sorted(MODULES)])
def test_no_module_imports_a_higher_layer(name):
    mine = rank_of(name)
    higher = sorted(t for t in imports_of(name, MODULES[name]) if rank_of(t) > mine
                    and not any(name.split(".")[0] == a and (t == b or t.startswith(b + ".")) for a, b in RE_EXPORTS))
    layer = LAYERS[mine[0]] if mine[0] < TOP else "package"
    assert not higher, (f"latte_lab.{name} (layer {mine[0]}: {layer}) imports higher layers or later packages of "
                        f"its layer: {', '.join('latte_lab.' + t for t in higher)}")


def test_viz_sits_above_analysis_which_imports_no_drawing():
    """analysis returns DataFrames and numbers: no module of it imports viz (but for the documented re-exports,
    resolved on first use) or matplotlib; viz draws from analysis's numbers."""
    assert rank_of("viz") > rank_of("analysis") and rank_of("sweep") > rank_of("analysis")
    analysis = {n: p for n, p in MODULES.items() if n.split(".")[0] == "analysis"}
    assert {"analysis", "analysis.stats", "analysis.report"} <= set(analysis)
    for name, path in analysis.items():
        drawn = sorted(t for t in imports_of(name, path) if t.split(".")[0] == "viz")
        allowed = sorted(b for a, b in RE_EXPORTS if a == "analysis") if name == "analysis" else []
        assert drawn == allowed, f"latte_lab.{name} imports {drawn}"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        plotting = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
                    and any((a.name if isinstance(n, ast.Import) else n.module or "").split(".")[0]
                            in ("matplotlib", "seaborn") for a in n.names)]
        assert not plotting, f"latte_lab.{name} imports matplotlib or seaborn on lines {plotting}"
    assert "analysis.stats" in imports_of("viz.figures", MODULES["viz.figures"])


def test_core_modules_import_no_models_teams_analysis_or_viz_even_indirectly():
    reached, todo = set(), list(CORE)
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo += [t for t in imports_of(name, MODULES[name]) if t]
    bad = sorted(m for m in reached if m.split(".")[0] in NOT_IN_CORE)
    assert not bad, f"the core reaches {bad}"
    assert {"graph", "events", "schema", "errors"} <= reached  # the walk does follow imports
    # A core module split into a package is walked whole: the package imports every part of it.
    parts = {m for m in MODULES if m.split(".")[0] in CORE}
    assert {"graph._core", "graph._nodes", "graph._serial", "graph.dag", "graph.history", "rundir.format",
            "rundir.special", "rundir.result"} <= parts <= reached, sorted(parts - reached)


def test_importing_the_core_loads_nothing_above_it():
    code = ("import sys\n" + "".join(f"import latte_lab.{m}\n" for m in CORE)
            + "print(' '.join(sorted(m for m in sys.modules if m.startswith(('latte_lab', 'pandas', "
              "'matplotlib', 'openai', 'anthropic')))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert {"latte_lab.metrics", "latte_lab.rundir", "latte_lab.graph._core", "latte_lab.graph._serial",
            "latte_lab.graph.dag", "latte_lab.graph.history"} <= set(loaded)
    bad = [m for m in loaded if m.split(".")[0] in ("pandas", "matplotlib", "openai", "anthropic")
           or (m.startswith("latte_lab.") and m.split(".")[1] in NOT_IN_CORE)]
    assert not bad, f"importing the core loads {bad}"


def test_the_layer_check_catches_an_upward_import(tmp_path):
    fake = tmp_path / "metrics.py"
    fake.write_text("def f():\n    from latte_lab.analysis import loaders\n    from ..viz import animate\n"
                    "    from latte_lab import teams\n    return teams.get('latte')\n"
                    "from latte_lab.tasks import get\n_LAZY = {'gantt': 'latte_lab.viz.gantt'}\n")
    found = imports_of("metrics", fake)
    assert {"analysis", "analysis.loaders", "viz", "tasks", "viz.gantt"} <= found  # a module-level registry import counts
    assert "teams" not in found  # a lookup in the team registry from inside a function does not
    assert max(layer_of(t) for t in found) > layer_of("metrics")
    # within a layer: analysis importing the sweep (which runs the studies analysis reads) is upward too
    inner = tmp_path / "stats.py"
    inner.write_text("def f():\n    from latte_lab.sweep import run_sweep\n")
    assert imports_of("analysis.stats", inner) == {"sweep"} and rank_of("sweep") > rank_of("analysis.stats")
    assert layer_of("sweep") == layer_of("analysis.stats")


def test_a_config_loads_no_sandbox_workspace_task_or_team():
    """TrialConfig checks task and team names against the built-in names config declares (and a registry a user
    filled, if one was imported): making a config loads nothing above config."""
    code = ("import sys, latte_lab.config as c\n"
            "c.TrialConfig(task='debug_sprint', team='dynamic', seed=3); c.TrialConfig.released(task='eda')\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('latte_lab'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == ["latte_lab", "latte_lab.config", "latte_lab.errors"], loaded


def test_a_configs_round_budget_is_its_tasks_with_or_without_the_registry_loaded():
    code = ("import latte_lab.config as c\n"
            "print([c.TrialConfig(task=t).rounds for t in c.BUILTIN_TASKS])\n"
            "import latte_lab\n"
            "print([latte_lab.tasks.get(t).default_max_rounds for t in c.BUILTIN_TASKS])")
    before, after = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                   check=True).stdout.splitlines()
    assert before == after


def test_user_registrations_are_known_to_the_config():
    import latte_lab as ll

    @ll.tasks.register("layers_probe_task")
    class Probe(ll.tasks.Task):
        default_max_rounds = 7

    try:
        cfg = ll.TrialConfig(task="layers_probe_task")
        assert cfg.task == "layers_probe_task" and cfg.rounds == 7
    finally:
        ll.tasks.REGISTRY._entries.pop("layers_probe_task", None)


def layer_list() -> str:
    """LAYERS as one line: the prefixes of a layer joined by commas, the layers by semicolons."""
    return "; ".join(", ".join(layer) for layer in LAYERS)


def test_the_readmes_layer_list_is_this_one():
    """README.md's layout section names the layers bottom up, written from LAYERS: one line, word for word."""
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    text = " ".join(readme.split())  # the line may be wrapped
    assert f"Layers, bottom up: {layer_list()}." in text, f"README.md should say: Layers, bottom up: {layer_list()}."
    # and the layout tree below it names each top-level module and package where LAYERS puts it
    tree = readme[readme.index("Layers, bottom up:"):]
    tree = tree[tree.index("```") + 3:]
    tree = tree[:tree.index("```")]
    shown = [line.split()[0].rstrip("/").removesuffix(".py") for line in tree.splitlines()[1:]
             if line.startswith("  ") and not line.startswith("   ")]
    tops = sorted({name.split(".")[0] for name in MODULES if name})
    assert sorted(shown) == tops, "the layout tree should list every top-level module and package once"
    order = [rank_of(name)[0] for name in shown]
    assert order == sorted(order), f"the layout tree lists the layers bottom up: {shown}"


def test_moved_modules_still_import_with_a_warning():
    import importlib
    import warnings

    for old, new in latte_lab.MOVED_MODULES.items():
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            sys.modules.pop(old, None)
            module = importlib.import_module(old)
        assert module is importlib.import_module(new)
        assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in said), old
        assert not (PACKAGE.parent / (old.replace(".", "/") + ".py")).exists()


# Modules allowed past MAX_MODULE_LINES, each with why: none of latte_lab's own, but the simulated model's, whose
# split belongs to the simulated-model work (models/sim/ is edited there).
LONG_MODULES = {
    "models.sim.skill": "split by the simulated model's own work",
    "models.sim.analysis": "the simulated model's, split with it",
}
MAX_MODULE_LINES = 600  # a module reads in one sitting


def test_no_module_is_over_600_lines():
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert set(long) <= set(LONG_MODULES), f"modules over {MAX_MODULE_LINES} lines: split them by concern: {long}"
