"""The response cache: keys, modes, corruption, concurrency (threads and processes)."""

from __future__ import annotations

import dataclasses
import multiprocessing
import sqlite3
import subprocess
import sys
import threading

import pytest
from conftest_models import make_request

from latte_lab.errors import CacheMissError, ConfigError
from latte_lab.models import AgentView, CachedModel, ModelResponse, ResponseCache, ScriptedModel, Usage
from latte_lab.models.base import Message, ModelRequest, Scope
from latte_lab.models.request_keys import (
    MESSAGE_PIECES,
    canonical_json,
    diff_fields,
    key_and_parts,
    key_fields,
    key_from_fields,
    object_json,
    request_from_fields,
    request_key,
)

WRITERS = 4
ENTRIES_PER_WRITER = 500


def answer(text="fine", usage=(10, 5), finish="stop") -> ModelResponse:
    return ModelResponse(text=text, usage=Usage(*usage), latency_s=1.25, finish_reason=finish, model="gpt-4o")


@pytest.fixture
def cache(tmp_path):
    with ResponseCache(tmp_path / "sub" / "dir" / "cache.sqlite") as c:
        yield c


# -- keys -----------------------------------------------------------------------------------------------
KEY_SCRIPT = """
import sys
from latte_lab.models.base import Message, ModelRequest, Scope
from latte_lab.models.request_keys import request_key
r = ModelRequest("openai", "gpt-4o", "système ✓", [Message("user", "héllo — 世界"), Message("assistant", "ok")],
                 temperature=0.7, max_tokens=4096, top_p=0.9, stop=("END",),
                 scope=Scope(seed=3, agent="Dev2", call_index=7, trial="t1"))
sys.stdout.write(request_key(r))
"""


def test_same_request_same_key_in_separate_processes():
    keys = {subprocess.run([sys.executable, "-c", KEY_SCRIPT], capture_output=True, text=True, check=True).stdout
            for _ in range(2)}
    request = make_request(text="x")
    request = dataclasses.replace(
        request, system="système ✓", messages=[Message("user", "héllo — 世界"), Message("assistant", "ok")],
        top_p=0.9, stop=("END",), scope=Scope(seed=3, agent="Dev2", call_index=7, trial="t1"),
    )
    assert keys == {request_key(request)}


@pytest.mark.parametrize(
    "change",
    [
        {"model": "gpt-4o-mini"},
        {"provider": "anthropic"},
        {"base_url": "http://localhost:8000/v1"},
        {"system": "You are someone else."},
        {"messages": [Message("user", "hello!")]},
        {"temperature": 0.2},
        {"max_tokens": 100},
        {"top_p": 0.5},
        {"stop": ("END",)},
        {"scope": Scope(seed=1, agent="Dev1")},
        {"scope": Scope(seed=0, agent="Dev2")},
        {"scope": Scope(seed=0, agent="Dev1", call_index=1)},
        {"scope": Scope(seed=0, agent="Dev1", trial="other")},
    ],
)
def test_every_key_field_changes_the_key(change):
    base = make_request()
    assert request_key(dataclasses.replace(base, **change)) != request_key(base)


def test_view_and_number_types_do_not_change_the_key():
    base = make_request(temperature=1)
    view = AgentView(task="debug", role="lead", agent="Lead")
    assert request_key(dataclasses.replace(base, view=view)) == request_key(base)
    assert request_key(dataclasses.replace(base, temperature=1.0)) == request_key(base)


def key_and_json(fields: dict) -> tuple[str, str]:
    """The key and the JSON of the fields as key_and_parts encodes them, each piece once."""
    key, parts = key_and_parts(fields)
    parts["messages"] = "[" + ",".join(parts.pop(MESSAGE_PIECES)) + "]"
    return key, object_json(parts)


def test_key_and_json_match_encoding_the_fields_whole():
    long = "é\"\\\n\u2028 ✅ \x00 " * 100  # long enough to be remembered, with every kind of escape
    for text in ("short", long, long):  # the second long one is served from the memo
        r = dataclasses.replace(make_request(), system=text,
                                messages=[Message("user", text), Message("assistant", "ok " + text)])
        fields = key_fields(r)
        assert key_and_json(fields) == (key_from_fields(fields), canonical_json(fields))


def test_request_round_trips_through_key_fields():
    request = make_request(top_p=0.3, stop=("a", "b"), base_url="http://x", seed=4, agent="Lead", call_index=2)
    assert request_key(request_from_fields(key_fields(request))) == request_key(request)


def test_diff_fields_names_scope_and_messages():
    a, b = key_fields(make_request(seed=1)), key_fields(make_request(seed=2, text="other"))
    assert diff_fields(a, b) == ["messages (message 0 differs)", "scope.seed (1 stored vs 2 requested)"]


# -- get / put ------------------------------------------------------------------------------------------
def test_put_then_get_returns_cached_copy_with_original_latency(cache):
    assert cache.get(make_request()) is None
    assert cache.put(make_request(), answer())
    hit = cache.get(make_request())
    assert hit == dataclasses.replace(answer(), cached=True)
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.tokens_saved, stats.entries) == (1, 1, 15, 1)
    assert stats.size_bytes > 0 and cache.path.parent.is_dir()


@pytest.mark.parametrize("finish", ["length", "refusal", "error"])
def test_incomplete_answers_are_never_stored(cache, finish):
    assert cache.put(make_request(), answer(finish=finish)) is False
    assert len(cache) == 0


def test_default_path_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LATTE_LAB_CACHE", str(tmp_path / "env" / "c.sqlite"))
    with ResponseCache() as c:
        assert c.path == tmp_path / "env" / "c.sqlite" and c.path.exists()


def test_not_a_database_is_a_config_error(tmp_path):
    bad = tmp_path / "c.sqlite"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(ConfigError, match="not a usable SQLite cache"):
        ResponseCache(bad)


@pytest.mark.parametrize(
    ("column", "value"), [("usage", "not json"), ("usage", '{"input_tokens": 1}'), ("text", None)]
)
def test_corrupt_row_is_a_miss_with_a_warning(cache, column, value):
    request = make_request()
    cache.put(request, answer())
    conn = sqlite3.connect(cache.path)
    if column == "text":  # NOT NULL column: rebuild the table without the constraint to plant a NULL
        conn.executescript(
            "CREATE TABLE r2 AS SELECT * FROM responses; DROP TABLE responses; ALTER TABLE r2 RENAME TO responses;"
        )
    conn.execute(f"UPDATE responses SET {column} = ?", (value,))
    conn.commit()
    conn.close()
    with pytest.warns(UserWarning, match=request_key(request)):
        assert cache.get(request) is None
    model = CachedModel(ScriptedModel(["fresh"]), cache)
    with pytest.warns(UserWarning):
        assert model.generate(request).text == "fresh"


# -- modes ----------------------------------------------------------------------------------------------
def test_read_write_calls_inner_once(cache):
    inner = ScriptedModel(["one"])
    model = CachedModel(inner, cache)
    first, second = model.generate(make_request()), model.generate(make_request())
    assert (first.text, first.cached, second.text, second.cached) == ("one", False, "one", True)
    assert len(inner.calls) == 1


def test_off_mode_never_reads_or_writes(cache):
    cache.put(make_request(), answer("stored"))
    model = CachedModel(ScriptedModel(["live", "live2"]), cache, "off")
    assert model.generate(make_request()).text == "live"
    assert model.generate(make_request(text="new")).text == "live2"
    assert len(cache) == 1 and cache.stats().hits == 0


def test_replay_serves_hits_and_names_the_differing_field_on_a_miss(cache):
    cache.put(make_request(), answer("stored"))
    model = CachedModel(None, cache, "replay")
    assert model.generate(make_request()).text == "stored"
    with pytest.raises(CacheMissError, match=r"temperature \(0.7 stored vs 0.2 requested\)"):
        model.generate(make_request(temperature=0.2))
    with pytest.raises(CacheMissError, match=r"differs in: messages \(message 0 differs\)"):
        model.generate(make_request(text="changed prompt"))
    with pytest.raises(CacheMissError, match="no stored request for this scope"):
        model.generate(make_request(agent="Dev4"))


def test_replay_picks_the_nearest_stored_request(cache):
    cache.put(make_request(call_index=0, text="a"), answer())
    cache.put(make_request(call_index=5, text="b"), answer())
    explanation = cache.explain_miss(make_request(call_index=5, text="b", max_tokens=10))
    assert explanation.endswith("differs in: max_tokens (4096 stored vs 10 requested)")


def test_mode_validation(cache):
    with pytest.raises(ConfigError, match="unknown cache mode"):
        CachedModel(ScriptedModel([]), cache, "sometimes")
    with pytest.raises(ConfigError, match="only 'replay'"):
        CachedModel(None, cache, "read_write")


# -- concurrency ----------------------------------------------------------------------------------------
def test_threads_share_one_cache(cache):
    errors = []

    def work(t):
        try:
            for i in range(50):
                request = make_request(agent=f"Dev{t}", call_index=i)
                cache.put(request, answer(f"{t}-{i}"))
                assert cache.get(request).text == f"{t}-{i}"
        except (AssertionError, AttributeError, sqlite3.Error) as exc:  # a thread's failure is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(cache) == 400


def _writer(path: str, writer: int, barrier) -> None:
    cache = ResponseCache(path)
    barrier.wait()  # start all writers at the same moment
    for i in range(ENTRIES_PER_WRITER):
        cache.put(make_request(agent=f"W{writer}", call_index=i), answer(f"{writer}:{i}"))
    cache.close()


def test_four_processes_writing_at_once(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = multiprocessing.get_context("spawn")  # no fork of a threaded pytest process
    barrier = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(path, w, barrier)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    with ResponseCache(path) as cache:
        assert len(cache) == WRITERS * ENTRIES_PER_WRITER
        for w in range(WRITERS):
            for i in range(ENTRIES_PER_WRITER):
                assert cache.get(make_request(agent=f"W{w}", call_index=i)).text == f"{w}:{i}"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_view_is_read_from_the_requests_own_prompt_when_first_asked_for():
    from latte_lab.models.view import view_from_prompt

    frame = AgentView(task="debug", role="worker", agent="Dev1", round=2, allowed_actions=("edit_file",))
    base = make_request()
    lazy = dataclasses.replace(base, frame=frame)
    assert vars(lazy).get("_view") is None  # nothing is read until a model asks (a real provider never does)
    assert lazy.view == view_from_prompt(frame, lazy.system, lazy.messages) != frame
    assert lazy.view is lazy.view  # read once
    assert request_key(lazy) == request_key(base) and base.view is None
    # a copy with another prompt reads its own, not the view the original read
    other = dataclasses.replace(lazy, messages=[Message("user", "[From System]: ✅ Assigned: task 'a'")])
    assert other.view == view_from_prompt(frame, other.system, other.messages) != lazy.view
    given = AgentView(task="debug", role="lead", agent="Lead")
    assert dataclasses.replace(lazy, view=given).view is given  # a view given is kept as it is
    assert ModelRequest(provider="x", model="y", system="", messages=[], view=given).view is given


def test_the_default_cache_honours_latte_lab_cache_then_xdg_cache_home_then_home(monkeypatch, tmp_path):
    from latte_lab.models.cache import CACHE_ENV, default_cache_path

    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_path() == tmp_path / "home" / ".cache" / "latte_lab" / "responses.sqlite"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: a relative path is ignored
    assert default_cache_path() == tmp_path / "home" / ".cache" / "latte_lab" / "responses.sqlite"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "latte_lab" / "responses.sqlite"
    with ResponseCache() as cache:  # and the cache opens there
        assert cache.path == tmp_path / "xdg" / "latte_lab" / "responses.sqlite"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine.sqlite"))
    assert default_cache_path() == tmp_path / "mine.sqlite"
