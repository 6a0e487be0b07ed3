"""A cache file with damaged pages (issue 34): lookups that reach them are misses with one warning, stores that
fail are warnings, and ``latte-lab cache check [--repair]`` reports the damage and keeps every readable row.

The damage is made the same way every time: a real cache file is filled, folded out of its WAL, and the
pages that hold chosen rows (found by the bytes of their text) are overwritten with a fixed pattern."""

from __future__ import annotations

import sqlite3
import warnings

import pytest
from conftest_models import make_request

import latte_lab as ll
from latte_lab.cli import main
from latte_lab.errors import ConfigError
from latte_lab.models import (
    CachedModel,
    Cassette,
    ModelResponse,
    RecordingModel,
    ResponseCache,
    ScriptedModel,
    Usage,
    make_model,
    read_cassette,
)
from latte_lab.models.cache_check import check_cache, repair_cache
from latte_lab.trial import comparable_events, run_trial

ROWS = 200
DAMAGED_ROWS = (17, 120)  # the pages holding these rows' texts are overwritten
GARBAGE = b"\xde\xad\xbe\xef"


def requests():
    return [make_request(text=f"question-{i:03d}", call_index=i) for i in range(ROWS)]


def answer(i: int) -> ModelResponse:
    return ModelResponse(f"answer-{i:03d} " + "y" * 300, Usage(10, 5), 0.25, model="gpt-4o")


def fold_wal(path) -> int:
    """Moves the WAL's pages into the file; returns the page size."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    return size


def damage(path, markers) -> list[int]:
    """Overwrites each page holding one of ``markers`` with garbage; returns the page numbers (0-based)."""
    size = fold_wal(path)
    data = bytearray(path.read_bytes())
    pages = []
    for marker in markers:
        at = data.find(marker)
        assert at >= 0, marker
        page = at // size
        data[page * size:(page + 1) * size] = GARBAGE * (size // len(GARBAGE))
        pages.append(page)
    path.write_bytes(bytes(data))
    return pages


@pytest.fixture
def damaged(tmp_path):
    path = tmp_path / "cache.sqlite"
    with ResponseCache(path) as cache:
        cache.put_many([(r, answer(i)) for i, r in enumerate(requests())])
    damage(path, [f"answer-{i:03d}".encode() for i in DAMAGED_ROWS])
    return path


def served(cache) -> dict[int, str]:
    out = {}
    for i, request in enumerate(requests()):
        hit = cache.get(request)
        if hit is not None:
            out[i] = hit.text
    return out


def test_damaged_pages_are_misses_with_one_warning(damaged):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ResponseCache(damaged) as cache:
            hits = served(cache)
    assert not set(DAMAGED_ROWS) & set(hits)
    assert ROWS - 40 < len(hits) < ROWS  # only the rows of two pages are lost
    assert all(text == answer(i).text for i, text in hits.items())
    damage_warnings = [w for w in caught if "is damaged" in str(w.message)]
    assert len(damage_warnings) == 1
    message = str(damage_warnings[0].message)
    assert "\n" not in message and f"latte-lab cache check --repair {damaged}" in message


def test_a_call_whose_row_is_damaged_is_answered_recorded_and_its_failed_store_is_a_warning(damaged, tmp_path):
    request = requests()[DAMAGED_ROWS[0]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = ResponseCache(damaged)
        with Cassette(tmp_path / "run" / "calls.jsonl") as cassette:
            model = RecordingModel(CachedModel(ScriptedModel(["fresh reply"]), cache), cassette)
            response = model.generate(request)
        stored = cache.put(request, response)  # the row's page is damaged: it cannot be replaced
        fresh = make_request(text="never asked before", call_index=999)
        assert cache.put(fresh, answer(0))  # a row that lands on a sound page is stored
        assert cache.get(fresh).text == answer(0).text
        cache.close()
    assert response.text == "fresh reply" and not response.cached
    assert not stored and cache.damaged_count >= 2
    [line] = read_cassette(tmp_path / "run")
    assert line["response"]["text"] == "fresh reply"
    assert len([w for w in caught if "is damaged" in str(w.message)]) == 1


def test_replay_of_a_damaged_row_is_a_cache_miss_error_not_a_crash(damaged):
    model = CachedModel(None, ResponseCache(damaged, read_only=True), mode="replay")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ll.CacheMissError, match="no cached response"):
            model.generate(requests()[DAMAGED_ROWS[1]])
        assert model.generate(requests()[0]).text == answer(0).text


def test_cache_check_reports_the_damage_and_repair_keeps_every_readable_row(damaged, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ResponseCache(damaged, read_only=True) as cache:
            readable = served(cache)
    before = damaged.read_bytes()

    assert main(["cache", "check", str(damaged)]) == 1
    out = capsys.readouterr().out
    assert "integrity: 1 problem(s)" in out and "malformed" in out
    assert f"rows: {len(readable)} readable, {ROWS - len(readable)} unreadable (on damaged pages)" in out
    assert f"latte-lab cache check --repair {damaged}" in out
    assert damaged.read_bytes() == before  # checking writes nothing

    assert main(["cache", "check", "--repair", "--path", str(damaged)]) == 0
    out = capsys.readouterr().out
    assert f"now holds the {len(readable)} row(s) that could be read" in out
    [backup] = damaged.parent.glob("cache.sqlite.damaged-*[0-9]")
    assert f"kept as {backup}" in out
    assert backup.read_bytes() == before

    assert main(["cache", "check", str(damaged)]) == 0
    assert "integrity: ok" in capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a sound file: no warning at all
        with ResponseCache(damaged) as cache:
            assert served(cache) == readable and len(cache) == len(readable)


def test_cache_check_names_rows_that_do_not_decode_and_repair_drops_them(tmp_path, capsys):
    path = tmp_path / "cache.sqlite"
    with ResponseCache(path) as cache:
        cache.put_many([(r, answer(i)) for i, r in enumerate(requests()[:3])])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE responses SET usage = 'not json' WHERE text LIKE 'answer-001%'")
    conn.commit()
    conn.close()
    report = check_cache(path)
    assert report.integrity == ["ok"] and report.readable == 2 and len(report.undecodable) == 1
    assert main(["cache", "check", str(path)]) == 1
    assert "2 readable, 0 unreadable (on damaged pages), 1 that do not decode" in capsys.readouterr().out
    assert repair_cache(path).kept == 2
    with ResponseCache(path) as cache:
        assert len(cache) == 2 and cache.get(requests()[0]).text == answer(0).text


def test_a_sound_cache_checks_ok_and_is_not_touched_by_repair(tmp_path, capsys):
    path = tmp_path / "cache.sqlite"
    with ResponseCache(path) as cache:
        cache.put(requests()[0], answer(0))
    assert main(["cache", "check", "--repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert "integrity: ok" in out and "nothing to repair" in out
    assert not list(tmp_path.glob("*.damaged-*"))


def test_a_cache_whose_header_is_damaged_is_repaired_into_an_empty_one(tmp_path, capsys):
    path = tmp_path / "cache.sqlite"
    with ResponseCache(path) as cache:
        cache.put(requests()[0], answer(0))
    size = fold_wal(path)
    path.write_bytes(GARBAGE * (size // len(GARBAGE)) + path.read_bytes()[size:])
    with pytest.raises(ConfigError, match="cache check --repair"):
        ResponseCache(path)
    assert main(["cache", "check", str(path)]) == 1
    assert "no row can be read" in capsys.readouterr().out
    assert main(["cache", "check", "--repair", str(path)]) == 0
    with ResponseCache(path) as cache:
        assert len(cache) == 0


def test_cache_check_of_a_missing_file_is_one_line(tmp_path, capsys):
    assert main(["cache", "check", str(tmp_path / "nope.sqlite")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("latte-lab: error: no response cache at") and "\n" not in err


def test_a_trial_on_a_damaged_cache_goes_on_and_calls_the_model_for_the_lost_rows(tmp_path):
    path = tmp_path / "cache.sqlite"
    cfg = ll.TrialConfig(task="debug", team="latte", model="simulated", seed=0, max_rounds=6)
    first = run_trial(cfg, model=make_model("simulated", cache=ResponseCache(path)), runs_dir=tmp_path / "a")
    assert first.status == "ok", first.error
    with ResponseCache(path) as cache:
        stored = len(cache)
    conn = sqlite3.connect(path)
    texts = [row[0] for row in conn.execute("SELECT text FROM responses ORDER BY rowid")]
    conn.close()
    damage(path, [texts[len(texts) // 2][:40].encode()])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = run_trial(cfg, model=make_model("simulated", cache=ResponseCache(path)), runs_dir=tmp_path / "b")
    assert again.status == "ok", again.error
    assert [w for w in caught if "is damaged" in str(w.message)]
    assert comparable_events(again.event_list) == comparable_events(first.event_list)
    replies = [e for e in again.event_list if e["type"] == "agent_reply"]
    assert 0 < sum(not e["cached"] for e in replies) < stored  # only the lost rows were asked again
