"""Every choice of every dropdown in notebooks 01 and 02 works: one kernel per notebook runs the setup cells
once, then, for each option of each dropdown (the others left at their defaults), sets the widget, runs the
cells that depend on it with a short trial, and fails on any error output. Only one dropdown moves at a time,
so a notebook costs (sum of its options) short trials, not their product. Notebook 02's team dropdowns run
from tests/viz/test_notebook_widgets_teams.py, so that the suite's two workers share the notebooks' options."""

from __future__ import annotations

import tempfile
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

import latte_lab as ll
from latte_lab.config import BUILTIN_TASKS, BUILTIN_TEAMS  # what a kernel knows: tests may register more here

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
MAX_ROUNDS = 3  # enough for every team to act and for every drawing to have something in it
CELL_TIMEOUT_S = 120


def _errors(outputs) -> list[str]:
    return [f"{o.get('ename')}: {o.get('evalue')}" for o in outputs if o.get("output_type") == "error"]


class Kernel:
    """One kernel running cells of a notebook (or extra code) and collecting any error output."""

    def __init__(self, nb):
        self.nb = nb
        # IPC sockets, not TCP ports: a port chosen here can be taken meanwhile by another kernel of the suite
        # (the browser tests' JupyterLab starts kernels on the other worker)
        self._sockets = tempfile.TemporaryDirectory(prefix="latte_lab-kernel-")  # removed with this object
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(self._sockets.name) / "ipc"))
        self.client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})

    def run(self, what) -> list[str]:
        cell = nbformat.v4.new_code_cell(what) if isinstance(what, str) else what
        cell.outputs = []
        self.client.execute_cell(cell, 0)
        return _errors(cell.outputs)


def _code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def _find(cells, text: str) -> int:
    return next(i for i, c in enumerate(cells) if text in c.source)


def _sweep(nb, setup: list, choices: dict[str, tuple[list[str], list]], apply: str) -> list[str]:
    """Runs ``setup`` once, then for each widget's (options, dependent cells) and each option: ``apply``
    (formatted with the widget and the option's repr) and the dependent cells. Returns every failure as
    'widget=option: cell: error'."""
    kernel = Kernel(nb)
    failures = []
    with kernel.client.setup_kernel():
        kernel.run("import matplotlib; matplotlib.use('Agg')")
        for cell in setup:
            assert not (errs := kernel.run(cell)), f"setup cell failed: {errs}"
        for widget, (options, dependent) in choices.items():
            for option in options:
                errs = kernel.run(apply.format(widget=widget, value=repr(option)))
                for cell in dependent:
                    errs += kernel.run(cell)
                    if errs:
                        failures.append(f"{widget}={option}: {cell.source.splitlines()[0][:60]}: {errs}")
                        break
    return failures


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_dropdown_option_of_the_quickstart_runs():
    nb = nbformat.read(NOTEBOOKS / "01_quickstart.ipynb", as_version=4)
    cells = _code_cells(nb)
    widgets_at = _find(cells, "w.Dropdown(")
    config_at = _find(cells, "ll.TrialConfig(")
    # the widgets' defaults, then every cell after the configuration, with the trial cut short
    shorten = nbformat.v4.new_code_cell(f"cfg = cfg.model_copy(update={{'max_rounds': {MAX_ROUNDS}}})")
    dependent = [cells[config_at], shorten, *cells[config_at + 1:]]
    choices = {"team_w": (list(BUILTIN_TEAMS), dependent),
               "task_w": ([t for t in list(BUILTIN_TASKS) if t != "textproc"], dependent),
               "model_w": ([m for m in ll.viz.widgets.model_choices() if m != "simulated"], dependent)}
    apply = "team_w.value, task_w.value, model_w.value = 'latte', 'textproc', 'simulated'\n{widget}.value = {value}"
    failures = _sweep(nb, cells[:widgets_at + 1], choices, apply)
    assert not failures, "\n".join(failures)


def explorer_failures(widgets: tuple[str, ...]) -> list[str]:
    """Notebook 02's dropdowns ``widgets`` (of form.team, form.team2, form.task), each option in turn: the
    suite runs them from two files, so that two workers share them."""
    nb = nbformat.read(NOTEBOOKS / "02_trial_explorer.ipynb", as_version=4)
    cells = _code_cells(nb)
    form_at = _find(cells, "ll.viz.trial_form(")
    shorten = nbformat.v4.new_code_cell(f"form.max_rounds.value = {MAX_ROUNDS}")
    # the form's Run (what the button does), then every cell that reads its result
    run = nbformat.v4.new_code_cell("form.result = None")
    dependent = [run, *cells[form_at + 1:]]
    # the cells after "Every team on the same task" run all five teams whatever the team dropdowns say, so
    # they run once per task; the team choices run the form and the cells that read its result
    every_team_at = _find(cells, "ll.viz.compare(results)")
    form_only = dependent[:every_team_at - form_at]
    choices = {"form.team": (list(BUILTIN_TEAMS), form_only), "form.team2": (list(BUILTIN_TEAMS), form_only),
               "form.task": (list(BUILTIN_TASKS), dependent)}
    apply = ("form.team.value, form.task.value, form.compare.value = 'latte', 'textproc', False\n"
             "{widget}.value = {value}\n"
             "form.compare.value = '{widget}' == 'form.team2'")
    return _sweep(nb, [*cells[:form_at + 1], shorten], {w: choices[w] for w in widgets}, apply)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_task_option_of_the_trial_explorer_runs():
    failures = explorer_failures(("form.task",))
    assert not failures, "\n".join(failures)
