"""The model layer's place in the layering: config and data below it, teams, trials, analysis and the CLI
above it; providers share their SDK helpers instead of importing each other."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "latte_lab"


def _imported_after(statement: str) -> set[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted(m for m in sys.modules if m.startswith('latte_lab'))))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(proc.stdout))


def _under(modules: set[str], *packages: str) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.mark.parametrize("module", ["latte_lab.config", "latte_lab.data"])
def test_config_and_data_import_nothing_above_them(module):
    loaded = _imported_after(f"import {module}")
    assert _under(loaded, "latte_lab.models", "latte_lab.teams", "latte_lab.trial", "latte_lab.analysis",
                  "latte_lab.viz", "latte_lab.cli", "latte_lab.tasks") == []


def test_models_import_no_higher_layer_and_no_sdk():
    loaded = _imported_after("import latte_lab.models; latte_lab.models.make_model('simulated')")
    assert _under(loaded, "latte_lab.teams", "latte_lab.trial", "latte_lab.sweep", "latte_lab.analysis",
                  "latte_lab.viz", "latte_lab.cli") == []
    sdks = subprocess.run([sys.executable, "-c", "import sys, latte_lab.models; print('openai' in sys.modules, "
                           "'anthropic' in sys.modules)"], capture_output=True, text=True, timeout=120, check=True)
    assert sdks.stdout.split() == ["False", "False"]  # an SDK is imported when its client is built


def _latte_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("latte_lab"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("latte_lab"))
    return names


def test_each_provider_uses_the_shared_sdk_helpers_not_the_other_provider():
    providers = PACKAGE / "models" / "providers"
    for name, other in (("openai", "anthropic"), ("anthropic", "openai")):
        imports = _latte_imports(providers / f"{name}.py")
        assert "latte_lab.models.providers._sdk" in imports
        assert f"latte_lab.models.providers.{other}" not in imports


def test_no_bundled_file_is_found_through_the_source_tree():
    """Bundled files are package resources (latte_lab.data), never paths built from __file__."""
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if "parents[" in p.read_text(encoding="utf-8")]
    assert offenders == []
