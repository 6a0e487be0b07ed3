"""What a pip install gets: a feature whose extra is missing stops with one line naming the extra (the module
hidden by a None in sys.modules, in a fresh interpreter); ``latte-lab notebooks`` copies the shipped notebooks
and never overwrites a changed copy; one version (pyproject, latte_lab.__version__, CITATION.cff); the package
metadata (license file, extras, no dev extra)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import metadata, version
from pathlib import Path

import pytest

import latte_lab as ll
from latte_lab.cli import main
from latte_lab.cli.notebooks import copy_notebooks, shipped_notebooks

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
HIDE = "import sys\nfor name in {modules!r}: sys.modules[name] = None  # as if the extra were not installed\n"


def run_without(modules: list[str], code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HIDE.format(modules=modules) + code], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False, env={**_env(), "OPENAI_API_KEY": ""})


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("LATTE_")} | {"MPLBACKEND": "Agg"}


CLI = "from latte_lab.cli import main\nraise SystemExit(main({argv!r}))\n"


@pytest.mark.parametrize(("modules", "argv", "extra"), [
    (["openai"], ["run", "--task", "debug", "--model", "openai/gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1",
                  "--max-rounds", "1", "--cache", "off", "--quiet", "--runs-dir", "runs"], "openai"),
    (["anthropic"], ["run", "--task", "debug", "--model", "anthropic/claude-haiku-4-5", "--base-url",
                     "http://127.0.0.1:9", "--max-rounds", "1", "--cache", "off", "--quiet", "--runs-dir", "runs"],
     "anthropic"),
    (["ray"], ["sweep", "--tasks", "debug", "--teams", "latte", "--replicates", "1", "--backend", "ray",
               "--out", "sweep"], "distributed"),
])
def test_a_command_whose_extra_is_missing_stops_with_one_line_naming_it(tmp_path, modules, argv, extra):
    proc = run_without(modules, CLI.format(argv=argv), tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].endswith(f"pip install 'latte-lab[{extra}]'"), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    print(lines[0])


def test_parquet_export_without_pyarrow_is_one_line_and_csv_still_works(tmp_path):
    code = ("import latte_lab as ll\n"
            "ll.run_trial(ll.TrialConfig(task='debug', max_rounds=1, sandbox='local', cache='off', runs_dir='runs'))\n"
            + CLI.format(argv=["export", "runs", "-o", "t.parquet"]))
    proc = run_without(["pyarrow"], code, tmp_path)
    assert proc.returncode == 1 and proc.stderr.strip() == (
        "latte-lab: error: writing Parquet needs the pyarrow package: pip install 'latte-lab[parquet]'"), proc.stderr
    proc = run_without(["pyarrow"], CLI.format(argv=["export", "runs", "-o", "t.csv"]), tmp_path)
    assert proc.returncode == 0 and (tmp_path / "t.csv").stat().st_size > 0, proc.stderr


def test_the_widgets_without_ipywidgets_say_which_extra(tmp_path):
    code = ("from latte_lab.errors import MissingExtraError\nimport latte_lab as ll\n"
            "try:\n    ll.viz.TrialForm()\nexcept MissingExtraError as e:\n    print(e)\n")
    proc = run_without(["ipywidgets"], code, tmp_path)
    assert proc.stdout.strip() == "the trial form needs the ipywidgets package: pip install 'latte-lab[lab]'", (
        proc.stdout + proc.stderr)


def test_notebooks_are_copied_and_a_changed_copy_is_never_overwritten(tmp_path, capsys):
    shipped = shipped_notebooks()
    assert set(shipped) == {p.name for p in (REPO / "notebooks").glob("*.ipynb")}  # every notebook ships
    dest = tmp_path / "nb"
    assert main(["notebooks", str(dest)]) == 0
    assert {p.name: p.read_bytes() for p in dest.glob("*.ipynb")} == shipped
    assert copy_notebooks(dest) == ([], sorted(dest.glob("*.ipynb")))  # again: unchanged copies are kept
    mine = dest / "01_quickstart.ipynb"
    mine.write_text("my own work")
    (dest / "07_what_if.ipynb").unlink()
    capsys.readouterr()
    assert main(["notebooks", str(dest)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "01_quickstart.ipynb differs from the shipped notebook" in err, err
    assert mine.read_text() == "my own work" and not (dest / "07_what_if.ipynb").exists()  # nothing copied


def test_one_version_everywhere():
    assert ll.__version__ == version("latte_lab") == PYPROJECT["project"]["version"]
    cff = (REPO / "CITATION.cff").read_text()
    assert f'version: "{ll.__version__}"' in cff
    assert "Improving the Efficiency of Language Agent Teams with Adaptive Task Graphs" in cff
    assert "__version__ =" not in (REPO / "latte_lab" / "__init__.py").read_text()


def test_the_metadata_has_a_license_file_extras_and_no_dev_extra():
    meta = metadata("latte_lab")
    assert meta["License-Expression"] == "MIT" and "LICENSE" in (meta.get_all("License-File") or [])
    assert "MIT License" in (REPO / "LICENSE").read_text() and "latte_lab contributors" in (REPO / "LICENSE").read_text()
    extras = set(meta.get_all("Provides-Extra") or [])
    assert extras == {"lab", "openai", "anthropic", "parquet", "distributed", "all"}
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in meta.get_all("Classifier"))
    assert "uv" in " ".join(PYPROJECT["dependency-groups"]["dev"])
    core = " ".join(PYPROJECT["project"]["dependencies"])
    for heavy in ("jupyterlab", "ray", "openai", "anthropic", "pyarrow", "statsmodels", "seaborn", "<10"):
        assert heavy not in core
