"""The import graph of latte_lab's modules and its cycles: every import statement counts, at module level or
inside a function (as tests/package/test_layers.py reads them), and a cycle is a strongly connected group of modules.

Usage: python benchmarks/import_cycles.py [--repo DIR]  (DIR: a checkout, default this one; run it on an older
commit's checkout to compare). Prints each cycle's modules; then the cycles between latte_lab's packages
(sweep, analysis, viz, ...: a module's imports counted as its top-level package's, the package's own
``__init__`` included), which a module-level count misses when two packages import each other through
different modules (``sweep.estimate`` importing ``analysis.loaders`` while ``analysis.sensitivity`` imported
``sweep``), and apart from them the cycles a package's ``_LAZY`` table of names resolved on first use would
close (test_layers.py counts those tables as imports too); and the modules ``import latte_lab.config`` and ``TrialConfig(task="debug")`` load in a fresh
interpreter.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path


def modules(package: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[0] == "tasks" and any(p in ("files", "hidden", "solution", "probes") for p in rel.parts[2:-1]):
            continue
        out[".".join(p for p in rel.with_suffix("").parts if p != "__init__")] = path
    return out


def lazy_targets(tree: ast.AST) -> list[str]:
    """The modules a ``_LAZY = {name: "latte_lab.module", ...}`` table names (imported on first use)."""
    return [v.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and any(getattr(t, "id", "").startswith("_LAZY") for t in node.targets) and isinstance(node.value, ast.Dict)
            for v in node.value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]


def _resolve(targets, name: str, known: set[str]) -> set[str]:
    found = set()
    for t in targets:
        if t.startswith("latte_lab."):
            t = t[len("latte_lab."):]
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def imports(name: str, path: Path, known: set[str], *, lazy: set[str] | None = None) -> set[str]:
    """The modules ``name`` imports; ``lazy`` (when given) receives those only its ``_LAZY`` table names."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: max(0, len(package.split(".")) - node.level + 1)] if package else []
                targets = ["latte_lab." + ".".join([*base, *([node.module] if node.module else [])])]
            else:
                targets = [node.module or ""]
            targets += [f"{targets[0]}.{a.name}" for a in node.names]
        else:
            continue
        found |= _resolve(targets, name, known)
    on_first_use = _resolve(lazy_targets(tree), name, known) - found
    if lazy is not None:
        lazy |= on_first_use
    return found | on_first_use


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return sorted(out, key=len, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]), help="a checkout (default: this one)")
    args = parser.parse_args()
    package = Path(args.repo) / "latte_lab"
    mods = modules(package)
    lazy: dict[str, set[str]] = {name: set() for name in mods}
    with_lazy = {name: imports(name, path, set(mods), lazy=lazy[name]) for name, path in mods.items()}
    graph = {name: targets - lazy[name] for name, targets in with_lazy.items()}
    found = cycles(graph)
    print(f"{len(mods)} modules, {sum(map(len, graph.values()))} imports, {len(found)} cycles")
    for group in found:
        print(f"  cycle of {len(group)}: {', '.join(group)}")
    def by_package(modules_graph):
        out: dict[str, set[str]] = {}
        for name, targets in modules_graph.items():
            top = name.split(".")[0]
            out.setdefault(top, set()).update(t.split(".")[0] for t in targets if t.split(".")[0] != top)
        return out

    packages, packages_lazy = by_package(graph), by_package(with_lazy)
    between = cycles(packages)
    print(f"{len(packages)} top-level modules and packages, {len(between)} cycles between them")
    for group in between:
        edges = sorted(f"{a} -> {b}" for a in group for b in group if b in packages[a])
        print(f"  cycle of {len(group)}: {', '.join(group)} ({'; '.join(edges)})")
    closed = [g for g in cycles(packages_lazy) if g not in between]
    print(f"  and {len(closed)} more closed only by a _LAZY table (a name resolved on first use, never at import)")
    for group in closed:
        edges = sorted(f"{a} -> {b}" + ("" if b in packages[a] else " (_LAZY)")
                       for a in group for b in group if b in packages_lazy[a])
        print(f"  cycle of {len(group)}: {', '.join(group)} ({'; '.join(edges)})")
    code = ("import sys; import latte_lab.config as c; a = {m for m in sys.modules if m.startswith('latte_lab')}; "
            "c.TrialConfig(task='debug'); b = {m for m in sys.modules if m.startswith('latte_lab')}; "
            "print(len(a), sorted(a)); print(len(b), sorted(b - a))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=args.repo,
                         env={"PYTHONPATH": args.repo, "PATH": "/usr/bin:/bin"})
    lines = out.stdout.splitlines() or [out.stderr.strip()[-300:]]
    print(f"import latte_lab.config loads {lines[0]}")
    if len(lines) > 1:
        print(f"TrialConfig(task='debug') then loads {lines[1]}")


if __name__ == "__main__":
    main()
