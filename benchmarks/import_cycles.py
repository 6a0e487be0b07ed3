"""The import graph of latte_lab's modules and its cycles: every import counts, at module level or inside a
function (as tests/test_layers.py reads them), and a cycle is a strongly connected group of modules.

Usage: python benchmarks/import_cycles.py [--repo DIR]  (DIR: a checkout, default this one; run it on an older
commit's checkout to compare). Prints each cycle's modules, and the modules ``import latte_lab.config`` and
``TrialConfig(task="debug")`` load in a fresh interpreter.
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


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
        for t in targets:
            if t.startswith("latte_lab."):
                t = t[len("latte_lab."):]
                while t and t not in known:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    found.add(t)
    return found


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
    graph = {name: imports(name, path, set(mods)) for name, path in mods.items()}
    found = cycles(graph)
    print(f"{len(mods)} modules, {sum(map(len, graph.values()))} imports, {len(found)} cycles")
    for group in found:
        print(f"  cycle of {len(group)}: {', '.join(group)}")
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
