"""The run directory of a trial: its files, how they are written and read back, and ``load_trial``.

A run directory ``<runs_dir>/<trial_id>/`` holds:

- ``config.json``: ``schema_version`` and the :class:`~latte_lab.config.TrialConfig`.
- ``events.jsonl``: one event per line, appended as it happens. The event types and their fields are
  declared in :mod:`latte_lab.events` (``latte_lab.events.describe()`` prints them as a table).
- ``snapshots.jsonl``: the graph per round for graph teams (round 0 = after planning), as keyframes and
  operation deltas (:mod:`latte_lab.graph.history`).
- ``calls.jsonl``: the cassette, every model call in order, enough to replay the trial offline.
- ``ledger.csv``: tokens per call with agent and round, billed vs replayed, dollars.
- ``state.jsonl``: the trial's state at each round's end (its team, workspace and clock), from which a fork
  starts (:mod:`latte_lab.teams.state`).
- ``workspace/``: the shared files as the team left them.
- ``result.json``: ``{"trial_id", "status", "error", "row", "metrics", "eval"}``; its ``row`` is the
  trial's line in the results schema (:data:`latte_lab.schema.TRIAL_COLUMNS`).
- ``special_files.json`` (when the agents left any): the symlinks and special files of the workspace,
  replaced by what they were.

Its parts: :mod:`~latte_lab.rundir.format` (the files, written whole and read back), :mod:`~latte_lab.rundir.special`
(symlinks and special files), :mod:`~latte_lab.rundir.result` (a trial read back, and what a result says of how
its trial ended) and :mod:`~latte_lab.rundir.run` (:func:`read_run`: the records as the versioned data contract). Every name of them is here too.
"""

from latte_lab.rundir.contract import contract_markdown  # noqa: F401 - the data contract's page
from latte_lab.rundir.format import *  # noqa: F403
from latte_lab.rundir.format import DISK_FULL_ERRNOS, RESERVE_FILE, RESULT_RESERVE_BYTES, SHORT_ROW_FIELDS  # noqa: F401
from latte_lab.rundir.format import __all__ as _format_names
from latte_lab.rundir.result import *  # noqa: F403
from latte_lab.rundir.result import __all__ as _result_names
from latte_lab.rundir.run import *  # noqa: F403
from latte_lab.rundir.run import __all__ as _run_names
from latte_lab.rundir.special import *  # noqa: F403
from latte_lab.rundir.special import __all__ as _special_names

__all__ = [*_format_names, *_result_names, *_run_names, *_special_names]
