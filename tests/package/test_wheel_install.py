"""latte_lab as a user gets it from ``pip install``: a wheel built from this tree, installed with its declared
dependencies into a fresh virtual environment outside the repository, with no latte_lab environment variable set.

The environment is made as a user's would be: ``uv pip install <wheel>`` resolves the wheel's own
dependencies (no ``--no-deps``, no borrowed site-packages), held to the locked versions by constraints
exported from uv.lock (``uv export``), so the test is repeatable; uv's cache, filled when the project's own
environment was installed, serves the downloads. A dependency missing from pyproject.toml is then missing
here. The core install alone (no extra) runs the offline demo (which must succeed), exports and views it, and
names the missing extra of an OpenAI model in one line; with the openai and lab extras added, it prints the
prices, regenerates Table 2 from the bundled published data, runs a priced trial and runs notebook 03; the only latte_lab it can import is
the installed wheel, so every bundled file must have been packaged and found as a package resource.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd
import pytest
from conftest_models import FakeProvider

import latte_lab as ll
from latte_lab.analysis import stats

REPO = Path(__file__).resolve().parents[2]
STEP_TIMEOUT_S = 300  # one build, install or command; each takes seconds, this only stops a hang
pytestmark = [pytest.mark.slow, pytest.mark.timeout(4 * STEP_TIMEOUT_S)]  # build, install, then commands
LATTE_ENV_PREFIXES = ("LATTE_",)  # LATTE_PUBLISHED_DIR, LATTE_LAB_PRICES, LATTE_PAPER_REFERENCE, ...


class Command:
    """A command started now and awaited later, so the slow ones share the machine's cores."""

    def __init__(self, cmd, *, cwd, env=None):
        self.cmd = [str(c) for c in cmd]
        self.proc = subprocess.Popen(self.cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)

    def output(self, timeout=STEP_TIMEOUT_S) -> str:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        assert self.proc.returncode == 0, f"{self.cmd} failed ({self.proc.returncode}):\n{out[-3000:]}\n{err[-3000:]}"
        self.err = err
        return out


def _run(cmd, *, cwd, env=None, stderr=False) -> str:
    command = Command(cmd, cwd=cwd, env=env)
    out = command.output()
    return out + command.err if stderr else out


NOTEBOOK_SCRIPT = """
import nbformat
from nbclient import NotebookClient

nb = nbformat.read({notebook!r}, as_version=4)
nb.cells.append(nbformat.v4.new_code_cell("import latte_lab; print(latte_lab.__file__)"))
NotebookClient(nb, timeout={timeout}, kernel_name="python3").execute()
print("kernel imported", nb.cells[-1].outputs[0]["text"].strip())
print("published", nb.cells[1].outputs[0]["text"].splitlines()[0])
"""


def _clean_env(home: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(LATTE_ENV_PREFIXES) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HOME=str(home), MPLBACKEND="Agg", **extra)  # a fresh home: no user cache, no .env
    return env


_BUILD: dict = {}  # what the installed fixture built, for with_extras


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv bin folder, a working folder outside the repository, a clean environment)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    shutil.copy(REPO / "pyproject.toml", src)
    shutil.copy(REPO / "README.md", src)
    shutil.copy(REPO / "LICENSE", src)
    shutil.copytree(REPO / "latte_lab", src / "latte_lab",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", root / "dist", src],
         cwd=root)
    (wheel,) = (root / "dist").glob("latte_lab-*.whl")

    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (make installs it into .venv)")
    constraints = root / "constraints.txt"
    _run([uv, "export", "--frozen", "--all-extras", "--no-hashes", "--no-emit-project", "--no-header",
          "--format", "requirements.txt", "-o", constraints], cwd=REPO)
    venv = root / "venv"
    uv_env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH")}
    _run([uv, "venv", "-q", "--python", sys.executable, venv], cwd=root, env=uv_env)
    install = _run([uv, "pip", "install", "--python", venv / "bin" / "python", "--constraint", constraints,
                    wheel], cwd=root, env=uv_env, stderr=True)  # the core only: no extra
    _BUILD.update(uv=uv, wheel=wheel, constraints=constraints, venv=venv, uv_env=uv_env, root=root)
    fresh_site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    assert not list(fresh_site.glob("*.pth")) or all("latte" not in p.read_text() and str(REPO) not in p.read_text()
                                                      for p in fresh_site.glob("*.pth"))
    print(install)

    work = root / "work"
    (work / "home").mkdir(parents=True)
    env = _clean_env(work / "home")
    where = _run([venv / "bin" / "python", "-c", "import latte_lab; print(latte_lab.__file__)"], cwd=work, env=env)
    assert Path(where.strip()).is_relative_to(fresh_site), where  # the wheel, not this checkout
    return venv / "bin", work, env


def test_the_demo_succeeds(installed):
    """The first thing a new user runs: an offline trial that must succeed (pytest came with the wheel), on the
    core install (no extra)."""
    bin_dir, work, env = installed
    out = _run([bin_dir / "latte-lab", "demo", "--runs-dir", work / "demo"], cwd=work, env=env)
    print(out)
    assert ": SUCCESS (" in out, out


def test_the_core_install_exports_views_and_names_a_missing_extra_in_one_line(installed):
    bin_dir, work, env = installed
    (run,) = (work / "demo").iterdir()
    _run([bin_dir / "latte-lab", "export", work / "demo", "-o", work / "demo.csv"], cwd=work, env=env)
    _run([bin_dir / "latte-lab", "view", run], cwd=work, env=env)
    assert (work / "demo.csv").stat().st_size > 0 and (run / "view.html").is_file()
    proc = subprocess.run([bin_dir / "latte-lab", "run", "--task", "debug", "--model", "openai/gpt-4o", "--max-rounds",
                           "1", "--runs-dir", work / "no-sdk"], cwd=work, env=env, capture_output=True, text=True,
                          timeout=STEP_TIMEOUT_S, check=False)
    assert proc.returncode == 1 and proc.stderr == (
        "latte-lab: error: the model 'openai/gpt-4o' needs the openai package: pip install 'latte-lab[openai]'\n")


@pytest.fixture(scope="module")
def with_extras(installed):
    """The same environment with the openai and lab extras added (the priced trial, notebook 03)."""
    b = _BUILD
    _run([b["uv"], "pip", "install", "--python", b["venv"] / "bin" / "python", "--constraint", b["constraints"],
          f"latte_lab[openai,lab] @ {b['wheel'].as_uri()}"], cwd=b["root"], env=b["uv_env"])
    return installed


@pytest.fixture(scope="module")
def slow_commands(with_extras):
    """``latte-lab figures`` and notebook 03, started together while the quick tests run."""
    bin_dir, work, env = with_extras
    notebook = REPO / "notebooks" / "03_reproduce_paper.ipynb"
    commands = {
        "figures": Command([bin_dir / "latte-lab", "figures", "--out", work / "figures"], cwd=work, env=env),
        "notebook": Command([bin_dir / "python", "-c",
                             NOTEBOOK_SCRIPT.format(notebook=str(notebook), timeout=STEP_TIMEOUT_S)],
                            cwd=work, env=env),
    }
    yield commands
    for command in commands.values():
        if command.proc.poll() is None:
            command.proc.kill()
            command.proc.communicate()


def test_prints_the_bundled_prices(installed, slow_commands):
    bin_dir, work, env = installed
    out = _run([bin_dir / "latte-lab", "prices"], cwd=work, env=env)
    assert "from the table bundled with latte_lab" in out
    gpt4o = next(line for line in out.splitlines() if line.split()[:2] == ["openai", "gpt-4o"])
    assert gpt4o.split()[2:4] == ["2.50", "10.00"]


def test_runs_a_priced_trial(with_extras, slow_commands):
    bin_dir, work, env = with_extras
    server = FakeProvider().start()  # answers every call with 11 input and 7 output tokens
    try:
        out = _run([bin_dir / "latte-lab", "run", "--task", "debug", "--model", "openai/gpt-4o-mini",
                    "--base-url", server.openai_url, "--max-rounds", "2", "--cache", "off",
                    "--runs-dir", work / "runs", "--quiet"],
                   cwd=work, env={**env, "OPENAI_API_KEY": "sk-test-wheel-install-0000"})
    finally:
        server.stop()
    assert "run directory:" in out
    (result,) = (work / "runs").glob("*/result.json")
    row = json.loads(result.read_text())["row"]
    calls = server.hits
    assert calls > 0 and row["total_tokens"] == calls * (11 + 7)
    # gpt-4o-mini at the bundled list price: 0.15 $ per million input tokens, 0.60 $ per million output tokens
    assert math.isclose(row["dollars"], calls * (11 * 0.15 + 7 * 0.60) / 1e6, rel_tol=1e-9)


def test_regenerates_table2_from_the_bundled_published_data(installed, slow_commands):
    _, work, _ = installed
    out = slow_commands["figures"].output()
    assert "published:" in out and "latte_lab/data/published" in out
    ours = pd.read_csv(work / "figures" / "table2.csv")
    expected = stats.table2(ll.load_published().trials).reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, expected, check_dtype=False)
    assert "Paper vs recomputed" in (work / "figures" / "report.md").read_text()


def test_runs_notebook_03(installed, slow_commands):
    bin_dir, _, _ = installed
    out = slow_commands["notebook"].output()
    kernel_file = out.split("kernel imported ", 1)[1].splitlines()[0]
    assert Path(kernel_file).is_relative_to(bin_dir.parent), out  # the kernel ran the installed wheel
    assert "latte_lab/data/published" in out


def test_bundled_published_data_is_the_authors_folder_unmodified(tmp_path):
    """The bundled copy is the authors' experiments/ folder at the commit SOURCE.md names, byte for byte: every
    file's SHA-256 is the one latte_lab/data/published_sha256.txt records for it."""
    from latte_lab.data import bundled_published_dir, check_published

    bundled = bundled_published_dir()
    source = (bundled / "SOURCE.md").read_text()
    assert "github.com/emieczkowski/latte" in source and "8647e3b" in source and "2605.06320" in source
    assert check_published(bundled) == []
    altered = tmp_path / "published"  # and the check can fail: a changed, a missing and an extra file
    shutil.copytree(bundled, altered)
    (altered / "operator_usage.json").write_text("{}")
    (altered / "event_metrics.json").unlink()
    (altered / "notes.txt").write_text("mine")
    assert sorted(check_published(altered)) == [
        "event_metrics.json: missing", "notes.txt: not in the authors' folder",
        "operator_usage.json: changed (its SHA-256 is not the published file's)"]


def test_the_shared_copy_of_the_published_data_is_the_bundled_one():
    """Where the project's shared folder sits beside this checkout (../shared/published, the copy the bundled
    data was taken from), both hold the same bytes."""
    from latte_lab.data import bundled_published_dir

    bundled = bundled_published_dir()
    original = REPO.parent / "shared" / "published"  # the copy this one was taken from, where present
    if not original.is_dir():
        pytest.skip(f"no shared copy of the authors' data at {original} to compare the bundled one with (the "
                    "bundled copy's checksums are checked by the test above in any checkout)")
    theirs = {p.relative_to(original): p.read_bytes() for p in original.rglob("*") if p.is_file()}
    ours = {p.relative_to(bundled): p.read_bytes() for p in bundled.rglob("*") if p.is_file()}
    assert ours.pop(Path("README.md")) and ours == theirs  # the same bytes, plus our README


def test_no_sandboxed_run_finds_the_hidden_material_of_a_wheel_install(installed):
    """A wheel ships the task folders in site-packages, which every sandbox binds: neither an agent's script nor
    workspace code in a hidden evaluation finds a file of them (latte_lab.tasks.hidden_search), while the
    host does."""
    from latte_lab.sandbox import bwrap, local

    bin_dir, work, env = installed
    report = json.loads(_run([bin_dir / "python", "-m", "latte_lab.tasks.hidden_search"], cwd=work, env=env))
    assert report.pop("host (the search works)") >= 15
    if not local.private_tmp_possible():  # as another user the local backend hides nothing (README)
        report = {k: v for k, v in report.items() if not k.startswith("local")}
    assert report and all(found == [] for found in report.values()), report
    assert any(k.startswith("bwrap") for k in report) or not bwrap.probe()[0]

