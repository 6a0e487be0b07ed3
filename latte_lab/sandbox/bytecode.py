"""Compiled bytecode for the packages that sandboxed runs import.

A sandboxed run is a fresh interpreter (a bubblewrap sandbox, or the local backend's exec path). Where
the installed packages carry no ``.pyc`` files (uv installs none unless asked; ``PYTHONDONTWRITEBYTECODE``
stops Python from writing them), every such run compiles what it imports from source: about 0.7 s for
pytest alone, and several seconds for pandas, on every test run of a trial. Inside bubblewrap the
installation is read-only, so no run can ever write them. Compiling these packages once, at install,
removes that cost (``make`` does it after ``uv sync``):

    python -m latte_lab.sandbox.bytecode
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import sys
import time

# What a test run or an agent's script imports in the sandbox: pytest and what it imports, and the
# data libraries of the task suites and their reference solutions (eda).
SANDBOX_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "numpy", "pandas", "dateutil")


def package_dirs(names: tuple[str, ...] = SANDBOX_PACKAGES) -> list[str]:
    """The installed directories (or single files) of ``names``; missing packages are left out."""
    found = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin in (None, "built-in", "frozen"):
            continue
        locations = list(spec.submodule_search_locations or [])
        found.extend(locations or [spec.origin])
    return found


def compile_packages(names: tuple[str, ...] = SANDBOX_PACKAGES, workers: int = 0) -> int:
    """Compile every module of ``names`` (``workers``: processes, 0 = one per CPU); the number of
    packages compiled. A file that does not compile is reported and left as it is."""
    ok = True
    places = package_dirs(names)
    for place in places:
        if os.path.isdir(place):
            ok &= bool(compileall.compile_dir(place, quiet=1, workers=workers))
        else:
            ok &= bool(compileall.compile_file(place, quiet=1))
    if not ok:
        print("latte_lab: some modules did not compile (see above); runs compile them themselves", file=sys.stderr)
    return len(places)


def main() -> int:
    start = time.perf_counter()
    count = compile_packages()
    print(f"latte_lab: bytecode of {count} packages that sandboxed runs import, in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
