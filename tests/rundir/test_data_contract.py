"""The versioned data contract: ``schema_version`` in config.json, result.json, the first event and the Parquet
export; ``ll.read_run`` on a run written today, on one written before versions were recorded (a fixture kept
under tests/rundir/data), and its one-line refusal of a newer major version; docs/data-contract.md generated from
latte_lab.events and TRIAL_COLUMNS and up to date."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import latte_lab as ll
from latte_lab.cli import main
from latte_lab.errors import DataError
from latte_lab.rundir.contract import contract_markdown
from latte_lab.schema import SCHEMA_VERSION, TRIAL_COLUMNS

REPO = Path(__file__).resolve().parents[2]
BEFORE = Path(__file__).with_name("data") / "run_before_schema_version"  # written before schema_version existed


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    res = ll.run_trial(ll.TrialConfig(task="debug", team="latte", model="simulated", max_rounds=2, seed=0,
                                      sandbox="local", cache="off", runs_dir=str(runs)))
    assert res.status == "ok", res.error
    return res.run_dir


def test_a_new_run_records_the_schema_version_in_config_result_and_its_first_event(run_dir):
    assert json.loads((run_dir / "config.json").read_text())["schema_version"] == SCHEMA_VERSION
    assert json.loads((run_dir / "result.json").read_text())["schema_version"] == SCHEMA_VERSION
    first = json.loads((run_dir / "events.jsonl").read_text().splitlines()[0])
    assert first["type"] == "run_start" and first["schema_version"] == SCHEMA_VERSION


def test_read_run_gives_typed_records_of_a_new_run(run_dir):
    run = ll.read_run(run_dir)
    assert run.schema_version == SCHEMA_VERSION
    assert isinstance(run.config, ll.TrialConfig) and run.config.max_rounds == 2
    assert run.status == "ok" and run.row["trial_id"] == run.config.trial_id
    assert run.events[0]["type"] == "run_start" and run.events[-1]["type"] in {"run_end", "evaluation"}
    assert run.calls and all(len(c["key"]) == 64 for c in run.calls)  # every call with its cache key
    print(f"read_run(new run): {run!r}, {len(run.events)} events, {len(run.calls)} calls")


def test_read_run_loads_a_run_written_before_schema_version():
    assert "schema_version" not in json.loads((BEFORE / "config.json").read_text())  # the fixture is pre-versioning
    run = ll.read_run(BEFORE)
    assert run.schema_version == "0"
    assert run.config.task == "debug" and run.config.max_rounds == 3
    assert run.status == "ok" and run.row["total_rounds"] == 3 and len(run.events) == 36 and len(run.calls) == 6
    assert ll.load_trial(BEFORE).rounds == 3  # and the older reader still takes it
    print(f"read_run(run before schema_version): {run!r}, {len(run.events)} events, {len(run.calls)} calls")


@pytest.mark.parametrize("where", ["config.json", "result.json", "events"])
def test_read_run_refuses_a_newer_major_version_in_one_line(run_dir, tmp_path, where):
    copy = shutil.copytree(run_dir, tmp_path / "run")
    newer = f"{int(SCHEMA_VERSION.split('.')[0]) + 1}.0"
    if where == "events":
        lines = (copy / "events.jsonl").read_text().splitlines()
        lines[0] = json.dumps({**json.loads(lines[0]), "schema_version": newer})
        (copy / "events.jsonl").write_text("\n".join(lines) + "\n")
    else:
        data = json.loads((copy / where).read_text())
        (copy / where).write_text(json.dumps({**data, "schema_version": newer}))
    with pytest.raises(DataError) as err:
        ll.read_run(copy)
    message = str(err.value)
    assert "\n" not in message and f"data schema {newer}" in message and "upgrade latte_lab" in message


def test_a_newer_minor_version_still_reads(run_dir, tmp_path):
    copy = shutil.copytree(run_dir, tmp_path / "run")
    data = json.loads((copy / "result.json").read_text())
    minor = f"{SCHEMA_VERSION.split('.')[0]}.99"
    (copy / "result.json").write_text(json.dumps({**data, "schema_version": minor}))
    assert ll.read_run(copy).schema_version == minor


def test_read_run_of_a_folder_that_is_no_run_is_one_line(tmp_path):
    with pytest.raises(DataError, match="is not a finished latte_lab run directory"):
        ll.read_run(tmp_path)


def test_the_parquet_export_carries_the_schema_version(run_dir, tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "runs.parquet"
    assert main(["export", str(run_dir.parent), "-o", str(out)]) == 0
    meta = pq.read_schema(out).metadata
    assert meta[b"latte_lab.schema_version"].decode() == SCHEMA_VERSION


def test_the_data_contract_page_is_generated_and_up_to_date():
    page = (REPO / "docs" / "data-contract.md").read_text(encoding="utf-8")
    assert page == contract_markdown(), ("docs/data-contract.md is out of date: "
                                         "make data-contract")
    for column in TRIAL_COLUMNS:
        assert f"| `{column}` |" in page
    for name in ll.events.BUILTIN_EVENT_TYPES:
        assert f"| `{name}` |" in page
    assert f"Schema version **{SCHEMA_VERSION}**" in page
