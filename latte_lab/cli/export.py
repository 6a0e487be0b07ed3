"""``latte-lab export DIR -o FILE``: the tidy trial table of the runs under DIR (``ll.load_runs(DIR).trials``:
one row per trial, the columns of :data:`latte_lab.schema.TRIAL_COLUMNS`) as a Parquet or CSV file, the
format taken from FILE's suffix.

>>> output_format("results.parquet"), output_format("results.CSV")
('parquet', 'csv')
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

from latte_lab.cli._common import UsageError
from latte_lab.errors import LatteError

__all__ = ["FORMATS", "PARQUET_SCHEMA_KEY", "add_parser", "output_format", "write_table"]

FORMATS = {".parquet": "parquet", ".csv": "csv"}
"""File suffix -> format written."""

EPILOG = """\
examples:
  latte-lab export runs/sweep -o sweep.parquet
  latte-lab export runs -o all.csv --include-errors
  python -c "import pandas as pd; print(pd.read_parquet('sweep.parquet').groupby('team').accuracy.mean())\""""


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "export", help="write the trial table of a runs folder to a Parquet or CSV file",
        description="Write the tidy table of the trials under DIR, one row per trial with the columns of the "
        "published results (what ll.load_runs(DIR).trials gives; a trial run more than once counts once), "
        "to FILE: Parquet for .parquet, CSV for .csv. Trials that did not finish with status ok are left "
        "out, as from the published data, unless --include-errors.",
        epilog=EPILOG)
    p.add_argument("dir", metavar="DIR", help="folder holding run directories (searched recursively)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help=f"file to write; its suffix picks the format: {', '.join(FORMATS)}")
    p.add_argument("--include-errors", action="store_true",
                   help="keep trials whose status is not ok (errors, budgets reached)")
    p.set_defaults(func=run)
    return p


def output_format(path: str | Path) -> str:
    """The format a file name asks for (see :data:`FORMATS`); a UsageError for any other suffix."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        said = f"its suffix {suffix!r}" if suffix else "a name without a suffix"
        raise UsageError(f"-o {path}: cannot tell the format from {said}; name the file "
                         f"{' or '.join('*' + s for s in FORMATS)}")
    return FORMATS[suffix]


def write_table(trials, path: str | Path) -> Path:
    """Writes a DataFrame to ``path`` in the format of its suffix, whole or not at all (a temporary file
    beside it is renamed over it); the parent folder is made if missing."""
    path = Path(path)
    kind = output_format(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "parquet":
            _write_parquet(trials, tmp)
        else:
            trials.to_csv(tmp, index=False)
        os.replace(tmp, path)
    except OSError as exc:
        raise LatteError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


PARQUET_SCHEMA_KEY = b"latte_lab.schema_version"
"""The key of the Parquet file's metadata holding :data:`latte_lab.schema.SCHEMA_VERSION`."""


def _write_parquet(trials, path: Path) -> None:
    """The table as Parquet (pyarrow, the ``parquet`` extra), the data contract's version in its metadata."""
    from latte_lab.errors import require_extra
    from latte_lab.schema import SCHEMA_VERSION

    pa = require_extra("pyarrow", "parquet", "writing Parquet")
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(trials, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           PARQUET_SCHEMA_KEY: SCHEMA_VERSION.encode("ascii")})
    pq.write_table(table, path)


def run(args) -> int:
    from latte_lab.analysis import load_runs

    root = Path(args.dir)
    output_format(args.output)  # a wrong suffix is refused before the runs are read
    if not root.is_dir():
        raise UsageError(f"no folder {root}: give the folder your trials went to")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = load_runs(root, include_errors=args.include_errors)
    path = write_table(data.trials, args.output)
    print(f"wrote {len(data.trials)} trials x {data.trials.shape[1]} columns from {root} to {path}")
    for w in caught:  # load_runs names the trials it left out: one line, not a warning with its source line
        print(f"note: {w.message}")
    return 0
