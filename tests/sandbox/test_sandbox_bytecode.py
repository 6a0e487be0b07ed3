"""Bytecode for the packages sandboxed runs import (compiled once at install)."""

from __future__ import annotations

import subprocess
import sys

from latte_lab.sandbox import bytecode


def test_compiles_a_package_and_a_single_module_and_skips_missing_ones(tmp_path, monkeypatch):
    (tmp_path / "fakepkg" / "sub").mkdir(parents=True)
    (tmp_path / "fakepkg" / "__init__.py").write_text("X = 1\n")
    (tmp_path / "fakepkg" / "sub" / "__init__.py").write_text("")
    (tmp_path / "fakepkg" / "sub" / "mod.py").write_text("Y = 2\n")
    (tmp_path / "fakemod.py").write_text("Z = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert bytecode.compile_packages(("fakepkg", "fakemod", "no_such_package_here"), workers=1) == 2
    compiled = sorted(p.name.split(".")[0] for p in tmp_path.rglob("*.pyc"))
    assert compiled == ["__init__", "__init__", "fakemod", "mod"]


def test_the_installation_step_runs_by_path_with_only_the_standard_library(tmp_path):
    """make runs the file by path right after uv sync: it must not import latte_lab (whose own imports
    would be compiled in memory and thrown away) and says what it did."""
    script = bytecode.__file__
    code = f"import runpy, sys; sys.argv = ['x']; runpy.run_path({script!r}, run_name='not_main'); " \
           "print(sorted(m for m in sys.modules if m.startswith('latte_lab')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert set(bytecode.SANDBOX_PACKAGES) >= {"pytest", "_pytest", "pluggy"}
    assert any(d.endswith("_pytest") for d in bytecode.package_dirs(("_pytest",)))
