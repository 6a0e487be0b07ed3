"""The `debug` task (paper "Debug", released code `debug_sprint`).

A pure-Python signal-processing module, ``signal_toolkit.py``, with eight planted bugs (one per leaf
function, the kinds listed in the reference document §8.2) and three composite functions whose tests
only pass once the leaves they call are fixed; two of the composites have a bug of their own besides.
The public ``test_suite.py`` (33 tests, one class per function) is the success criterion; there is no
hidden suite, so ``evaluate`` runs the pristine public suite on a temporary copy of the workspace.

Files ship as package data with a ``.py.txt`` suffix so that neither pytest nor the linter ever
treats them as project code: ``files/`` holds the starting workspace, ``solution/`` the reference
module.

Work units: the description names all eleven functions and their contracts, so the eight leaf fixes
and the three composite checks are ``visible``. Two composites also carry a bug of their own
(smooth_detrend smooths before it detrends; peak_rate divides by the duration of the downsampled
signal): their tests fail anyway while the leaves they call are broken, so these bugs show up only
once those leaves are fixed -- a composite test failing for a new reason. They are the hidden units
``fix-smooth_detrend`` and ``fix-peak_rate`` (``visible=False``). Composite checks write nothing
(``files=()``); a description starting with ``CHECK_ONLY_PREFIX`` says so.
"""

from __future__ import annotations

import ast
import functools
from importlib import resources

from latte_lab.errors import TaskError
from latte_lab.sandbox.threads import parse
from latte_lab.tasks import register
from latte_lab.tasks.base import EvalResult, Task, WorkUnit
from latte_lab.tasks.suite import run_hidden_suite

MODULE = "signal_toolkit.py"  # the only file agents may edit
TEST_FILE = "test_suite.py"  # the public suite, protected read-only
CHECK_ONLY_PREFIX = "Check-only:"  # starts the description of a unit that needs no code change
EVAL_TIMEOUT_SECONDS = 120  # the 33 pure-Python tests take about a second; generous for slow CI

# (function, test class, effort, what the fix has to achieve): the eight leaves, in file order.
LEAVES: tuple[tuple[str, str, float, str], ...] = (
    ("normalize", "TestNormalize", 1.0, "map the minimum to 0.0 and the maximum to 1.0 exactly"),
    (
        "moving_average",
        "TestMovingAverage",
        1.5,
        "return a trailing average with the same length as the input",
    ),
    ("rms", "TestRms", 0.8, "return the root of the mean square"),
    ("find_peaks", "TestFindPeaks", 1.0, "count strict local maxima only (plateaus are not peaks)"),
    ("linear_detrend", "TestLinearDetrend", 1.2, "subtract the least-squares line from the signal"),
    (
        "autocorrelation",
        "TestAutocorrelation",
        1.2,
        "normalise every lag by the lag-0 energy so that r[0] == 1",
    ),
    ("zero_crossings", "TestZeroCrossings", 1.0, "count sign changes in both directions"),
    ("downsample", "TestDownsample", 0.8, "keep every factor-th sample starting with the first"),
)
# (function, test class, the leaves it calls): composites whose tests wait for those leaves.
COMPOSITES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("band_energy", "TestBandEnergy", ("moving_average", "rms")),
    ("smooth_detrend", "TestSmoothDetrend", ("linear_detrend", "moving_average")),
    ("peak_rate", "TestPeakRate", ("downsample", "find_peaks")),
)
# (composite, what its own fix restores): the composites with a bug of their own, masked until the
# leaves they call are fixed.
HIDDEN_COMPOSITE_BUGS: tuple[tuple[str, str], ...] = (
    ("smooth_detrend", "detrend first, then smooth, as its contract states"),
    ("peak_rate", "divide by the duration of the original signal, not of the downsampled one"),
)
CHECK_EFFORT = 0.3  # a composite unit only runs its tests

DESCRIPTION = f"""\
Debug `{MODULE}`, a small pure-Python signal-processing module (standard library only).
Several of its functions contain bugs -- common numerical and off-by-one mistakes -- and the
public test suite `{TEST_FILE}` (33 tests, one test class per function) fails. Run it with
`python -m pytest -q {TEST_FILE}`, read the failures, and fix `{MODULE}` until every test passes.
Only `{MODULE}` may be edited; `{TEST_FILE}` is read-only. Every function takes a list of numbers
and returns a new list or a float; each docstring states the function's contract:

- normalize(xs): (x - min) / (max - min), so the minimum maps to 0.0 and the maximum to 1.0;
  a constant signal maps to all 0.0, an empty one to [].
- moving_average(xs, window): trailing mean of the last `window` samples (fewer at the start),
  SAME length as xs; window must be a positive integer.
- rms(xs): root mean square, sqrt(mean(x**2)); 0.0 for an empty signal.
- find_peaks(xs): indices of STRICT local maxima (greater than both neighbours), never the first
  or last sample; plateaus are not peaks.
- linear_detrend(xs): xs minus its least-squares straight line over i = 0..n-1 (zero-mean residuals).
- autocorrelation(xs, max_lag): coefficients for lags 0..max_lag of the mean-removed signal,
  divided by the lag-0 energy, so r[0] == 1.0.
- zero_crossings(xs): number of sign changes between consecutive samples, both directions;
  zero counts as non-negative.
- downsample(xs, factor): every factor-th sample starting with the FIRST, i.e. xs[::factor].
- band_energy(xs, window) = rms(moving_average(xs, window)).
- smooth_detrend(xs, window) = moving_average(linear_detrend(xs), window).
- peak_rate(xs, sample_rate, factor=1): strict peaks of downsample(xs, factor) per second of the
  original signal (len(xs) / sample_rate seconds).

The last three are composite functions built on the others: their tests can only pass once the
functions they call are correct.
"""


@functools.cache
def _resource(relative: str) -> str:
    """Text of a file shipped inside this package (cached: the files never change at run time)."""
    path = resources.files(__name__).joinpath(*relative.split("/"))
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise TaskError(
            f"debug task file {relative!r} is missing from the installed package; "
            "reinstall latte_lab (pip install -e .)"
        ) from exc


def top_level_defs(source: str) -> dict[str, str]:
    """Source text of every top-level function in ``source``, by name (decorators excluded)."""
    tree = parse(source)
    return {
        node.name: ast.get_source_segment(source, node)
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }



@register
class DebugTask(Task):
    """Fix the eight planted bugs of signal_toolkit.py until the public suite passes."""

    id = "debug"
    title = "Debug a signal-processing module"
    description = DESCRIPTION
    success_criteria = (
        f"All 33 tests of {TEST_FILE} pass (`python -m pytest -q {TEST_FILE}` exits 0), "
        f"with {TEST_FILE} unchanged."
    )
    # default_max_rounds: the paper's 40 (Task's); the released code used 35 (TrialConfig.released())
    public_tests = (TEST_FILE,)
    test_args = (TEST_FILE,)
    required_outputs = (MODULE,)
    accuracy_metric = "success"

    # -- files ---------------------------------------------------------------------------------
    def starting_files(self) -> dict[str, str]:
        """The workspace ``setup`` writes: the buggy module and the public suite."""
        return {
            MODULE: _resource("files/signal_toolkit.py.txt"),
            TEST_FILE: _resource("files/test_suite.py.txt"),
        }

    def setup(self, workspace) -> None:
        for path, text in self.starting_files().items():
            workspace.setup_file(path, text)
        workspace.protect(*self.public_tests)
        workspace.test_args = self.test_args

    def reference_solution(self) -> dict[str, str]:
        return {MODULE: _resource("solution/signal_toolkit.py.txt")}

    # -- scoring -------------------------------------------------------------------------------
    def evaluate(self, workspace) -> EvalResult:
        """Run the pristine public suite against a temporary copy of the workspace in a trusted session
        (:func:`latte_lab.tasks.suite.run_hidden_suite`: pytest configuration the agents wrote is left
        out and nothing the code does can change a verdict, so only what the code computes is judged).
        The same run confirms, or not, a team's claim that the public suite passes.

        Tests pytest never reported (a collection error, a timeout) count as errors, so the total
        is always the suite's 33 and ``per_class`` always lists all 11 classes. A missing
        ``signal_toolkit.py`` is noted in ``missing_outputs`` and still scored (every test then
        errors), following reference §8.5's note-and-score reading for this task.
        """
        suite = {TEST_FILE: _resource("files/test_suite.py.txt")}
        return run_hidden_suite(workspace, suite, TEST_FILE, required_outputs=self.required_outputs,
                                timeout=EVAL_TIMEOUT_SECONDS, skipped_as="error", confirm=suite)

    # -- reference decomposition ---------------------------------------------------------------
    def work_units(self) -> list[WorkUnit]:
        units = [
            WorkUnit(
                id=f"fix-{name}",
                title=f"Fix {name}",
                description=(
                    f"Find and fix the bug in {name} in {MODULE}: {goal}, as its docstring states. "
                    f"{cls} in {TEST_FILE} must pass."
                ),
                files=(MODULE,),
                symbols=(name,),
                tests=(cls,),
                effort=effort,
            )
            for name, cls, effort, goal in LEAVES
        ]
        units += [
            WorkUnit(
                id=f"check-{name}",
                title=f"Verify {name} passes",
                description=(
                    f"{CHECK_ONLY_PREFIX} {name} is built on {' and '.join(calls)}; once they are fixed, "
                    f"run {TEST_FILE} and confirm {cls} passes."
                ),
                files=(),
                deps=tuple(f"fix-{c}" for c in calls),
                tests=(cls,),
                effort=CHECK_EFFORT,
            )
            for name, cls, calls in COMPOSITES
        ]
        calls_of = {name: (cls, calls) for name, cls, calls in COMPOSITES}
        units += [
            WorkUnit(
                id=f"fix-{name}",
                title=f"Fix {name}",
                description=(
                    f"{calls_of[name][0]} still fails although {' and '.join(calls_of[name][1])} are fixed: "
                    f"{name} has a bug of its own. Fix it in {MODULE}: {goal}."
                ),
                files=(MODULE,),
                symbols=(name,),
                deps=tuple(f"fix-{c}" for c in calls_of[name][1]),
                visible=False,
                tests=(calls_of[name][0],),
            )
            for name, goal in HIDDEN_COMPOSITE_BUGS
        ]
        return units


def is_check_only(unit: WorkUnit) -> bool:
    """True for a unit that changes no code (a composite check): it writes no file."""
    return not unit.files and unit.description.startswith(CHECK_ONLY_PREFIX)


__all__ = ["DebugTask", "is_check_only", "top_level_defs"]
