"""Cassettes: recording, replay with zero network calls, verification, import into the cache."""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest
from conftest_models import canary_keys_fixture, fake_server_fixture, make_request  # noqa: F401 - fixtures

from latte_lab.errors import CacheMissError, DataError, LatteError, ModelError
from latte_lab.models import (
    CachedModel,
    Cassette,
    CassetteModel,
    RecordingModel,
    ResponseCache,
    ScriptedModel,
    import_cassettes,
    read_cassette,
)
from latte_lab.models.base import Message
from latte_lab.models.providers.openai import OpenAIModel


def record_trial(run_dir, replies, requests):
    cassette = Cassette(run_dir / "calls.jsonl")
    model = RecordingModel(ScriptedModel(replies, latency_s=2.5), cassette)
    responses = [model.generate(r) for r in requests]
    cassette.close()
    return responses


def trial_requests():
    return [make_request(agent=a, call_index=i, text=f"{a} turn {i}") for i in range(3) for a in ("Lead", "Dev1")]


def test_cassette_lines_hold_request_scope_and_response(tmp_path):
    responses = record_trial(tmp_path, [f"r{i}" for i in range(6)], trial_requests())
    lines = read_cassette(tmp_path)  # a run directory works as well as the file
    assert [line["response"]["text"] for line in lines] == [r.text for r in responses]
    first = lines[0]
    assert first["type"] == "call" and first["scope"]["agent"] == "Lead"
    assert first["request"]["messages"] == [["user", "Lead turn 0"]]
    assert first["response"]["latency_s"] == 2.5 and first["response"]["cached"] is False


@pytest.mark.parametrize("env_secret", [False, True])
def test_cassette_lines_are_the_canonical_record_redacted_whole(tmp_path, monkeypatch, env_secret):
    """Lines are assembled from pieces encoded (and masked) once; they must equal encoding and masking the
    whole record, keys anywhere in the prompt or the reply included."""
    from latte_lab.models.keys import redact
    from latte_lab.models.request_keys import canonical_json, key_fields, request_key

    if env_secret:
        monkeypatch.setenv("LATTE_TEST_SECRET", "plain-secret-4242")
    long = "é ✅ \"q\" \\ sk-proj-AbCdEfGhIjKlMnOpQrSt task-1 plain-secret-4242 " * 20
    request = dataclasses.replace(make_request(), system="sys sk-ant-" + "k" * 20,
                                  messages=[Message("user", long), Message("assistant", "ok"), Message("user", long)])
    reply = "done sk-" + "z" * 24 + " plain-secret-4242"
    cassette = Cassette(tmp_path / "calls.jsonl")
    RecordingModel(ScriptedModel([reply]), cassette).generate(request)
    cassette.close()
    line = (tmp_path / "calls.jsonl").read_text(encoding="utf-8")
    fields = key_fields(request)
    messages = fields.pop("messages")  # the repeated message is written once, and named twice
    fields["system_id"], fields["message_ids"] = 0, [1, 2, 1]
    system = fields.pop("system")
    response = {k: v for k, v in json.loads(line)["response"].items() if k != "text_id"}
    record = {"type": "call", "key": request_key(request), "scope": dataclasses.asdict(request.scope),
              "request": fields, "response": {**response, "text_id": 3},
              "new_messages": [[0, "system", system], [1, *messages[0]], [2, *messages[1]], [3, "assistant", reply]]}
    assert line == redact(canonical_json(record)) + "\n"
    whole = read_cassette(tmp_path)[0]
    assert whole["request"] == json.loads(redact(canonical_json(key_fields(request))))
    assert whole["response"]["text"] == redact(reply) and "text_id" not in whole["response"]
    assert "sk-proj-Ab" not in line and "kkkkkkkkkk" not in line and "zzzzzzzz" not in line
    assert ("plain-secret-4242" in line) is not env_secret


def test_replay_from_cassette_alone_with_zero_network_calls(fake_server, canary_keys, tmp_path):
    live = RecordingModel(OpenAIModel("gpt-4o", base_url=fake_server.openai_url),
                          Cassette(tmp_path / "calls.jsonl"))
    requests = trial_requests()
    originals = [live.generate(r) for r in requests]
    live.cassette.close()
    hits = fake_server.hits
    replay = CassetteModel(tmp_path / "calls.jsonl")
    # Replay in a different order (concurrent calls finish in any order): lookups are by scope.
    replayed = {id(r): replay.generate(r) for r in reversed(requests)}
    assert fake_server.hits == hits == len(requests)
    for request, original in zip(requests, originals):
        again = replayed[id(request)]
        assert again.text == original.text and again.usage == original.usage
        assert again.latency_s == pytest.approx(original.latency_s) and again.cached is True


def test_replay_mismatch_names_the_differing_field(tmp_path):
    requests = trial_requests()
    record_trial(tmp_path, [f"r{i}" for i in range(6)], requests)
    replay = CassetteModel(tmp_path)
    with pytest.raises(CacheMissError, match=r"max_tokens \(4096 stored vs 99 requested\)"):
        replay.generate(make_request(agent="Lead", call_index=0, text="Lead turn 0", max_tokens=99))
    with pytest.raises(CacheMissError, match="has no call for agent 'Dev9' call 0"):
        replay.generate(make_request(agent="Dev9"))


def test_failed_calls_are_noted_but_not_replayed(tmp_path):
    cassette = Cassette(tmp_path / "calls.jsonl")
    model = RecordingModel(ScriptedModel(["only one"]), cassette)
    model.generate(make_request(call_index=0))
    with pytest.raises(ModelError):
        model.generate(make_request(call_index=1))
    cassette.close()
    assert [line["type"] for line in read_cassette(tmp_path)] == ["call", "error"]
    replay = CassetteModel(tmp_path)
    assert len(replay) == 1
    with pytest.raises(CacheMissError):
        replay.generate(make_request(call_index=1))


def test_concurrent_recording_keeps_lines_whole(tmp_path):
    cassette = Cassette(tmp_path / "calls.jsonl")
    model = RecordingModel(ScriptedModel(lambda r: "x" * 5000 + r.scope.agent), cassette)
    threads = [threading.Thread(target=lambda a=a: [model.generate(make_request(agent=a, call_index=i))
                                                    for i in range(25)]) for a in ("A", "B", "C", "D")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cassette.close()
    lines = (tmp_path / "calls.jsonl").read_text().splitlines()
    assert len(lines) == 100 and all(json.loads(line)["type"] == "call" for line in lines)


def test_damaged_cassette_is_a_data_error(tmp_path):
    (tmp_path / "calls.jsonl").write_text('{"type": "call"}\nnot json\n')
    with pytest.raises(DataError, match="line 2"):
        read_cassette(tmp_path)
    with pytest.raises(DataError, match="no cassette"):
        read_cassette(tmp_path / "missing")


def test_import_cassettes_fills_the_cache_for_replay(tmp_path):
    requests = trial_requests()
    record_trial(tmp_path / "runs" / "trial1", [f"r{i}" for i in range(6)], requests)
    other = [make_request(seed=9, agent="Dev1", call_index=i) for i in range(2)]
    record_trial(tmp_path / "runs" / "trial2", ["s0", "s1"], other)
    cache = ResponseCache(tmp_path / "c.sqlite")
    assert import_cassettes(str(tmp_path / "runs" / "*"), cache) == 8
    assert import_cassettes(tmp_path / "runs", cache) == 8  # idempotent: same keys replaced
    assert len(cache) == 8
    replay = CachedModel(None, cache, "replay")
    assert [replay.generate(r).text for r in requests] == [f"r{i}" for i in range(6)]
    assert replay.generate(other[1]).text == "s1"
    with pytest.raises(DataError, match="no cassettes"):
        import_cassettes(tmp_path / "nowhere", cache)


def test_call_line_without_scope_is_a_data_error(tmp_path):
    (tmp_path / "calls.jsonl").write_text('{"type": "call", "response": {"text": "x"}}\n')
    with pytest.raises(DataError, match="lacks scope or response"):
        CassetteModel(tmp_path)


def test_each_message_is_written_once_and_every_line_reads_back_whole(tmp_path):
    """Later calls repeat an agent's earlier messages: the file holds each once, read_cassette gives every
    call its whole prompt, and a trial replays from it."""
    shared = "earlier context: " + "x" * 3000

    def prompt(i):
        return [Message("user", shared), *[Message("assistant", f"reply {j}") for j in range(i)],
                Message("user", f"turn {i}")]

    requests = [dataclasses.replace(make_request(agent="Dev1", call_index=i), messages=prompt(i)) for i in range(4)]
    record_trial(tmp_path, [f"reply {i}" for i in range(4)], requests)
    raw = (tmp_path / "calls.jsonl").read_text(encoding="utf-8")
    assert raw.count("earlier context") == 1  # once, not in all four lines
    lines = read_cassette(tmp_path)
    assert [line["request"]["messages"] for line in lines] == [[[m.role, m.content] for m in r.messages]
                                                               for r in requests]
    assert all("new_messages" not in line and "message_ids" not in line["request"] for line in lines)
    model = CassetteModel(tmp_path)
    assert [model.generate(r).text for r in requests] == [f"reply {i}" for i in range(4)]


def test_lines_that_hold_their_messages_whole_read_as_before(tmp_path):
    from latte_lab.models.request_keys import canonical_json, key_fields, request_key

    request = make_request(agent="Lead", call_index=0, text="hello")
    line = {"type": "call", "key": request_key(request), "scope": dataclasses.asdict(request.scope),
            "request": key_fields(request), "response": {"text": "hi", "usage": {"input_tokens": 1,
            "output_tokens": 1}, "latency_s": 0.1, "finish_reason": "stop", "model": "m", "cached": False}}
    (tmp_path / "calls.jsonl").write_text(canonical_json(line) + "\n", encoding="utf-8")
    assert read_cassette(tmp_path)[0]["request"]["messages"] == [["user", "hello"]]
    assert CassetteModel(tmp_path).generate(request).text == "hi"


def test_a_line_naming_a_message_no_earlier_line_holds_is_a_clear_error(tmp_path):
    record_trial(tmp_path, ["a", "b"], trial_requests()[:2])
    path = tmp_path / "calls.jsonl"
    first, second = path.read_text(encoding="utf-8").splitlines()
    path.write_text(second + "\n", encoding="utf-8")  # the line that defined message 0 is gone
    record = json.loads(second)
    record["request"]["message_ids"] = [0]
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="record 1: names a message that no earlier line holds"):
        read_cassette(tmp_path)


def test_numbers_of_a_line_the_disk_refused_are_given_again(tmp_path, monkeypatch):
    """A line that could not be written takes its messages' numbers back: the next line holds them."""
    from latte_lab import rundir

    cassette = Cassette(tmp_path / "calls.jsonl")
    requests = trial_requests()
    real = rundir.JsonlAppender.append_text
    failures = iter([True])

    def refused_once(self, text):
        if next(failures, False):
            raise OSError(5, "I/O error")  # an error that is not a full disk: raised, recording goes on
        return real(self, text)

    monkeypatch.setattr(rundir.JsonlAppender, "append_text", refused_once)
    model = RecordingModel(ScriptedModel(["x", "y"]), cassette)
    with pytest.raises(OSError):
        model.generate(requests[0])
    model.generate(requests[0])
    cassette.close()
    (line,) = read_cassette(tmp_path)
    assert line["request"]["messages"] == [["user", "Lead turn 0"]]


def test_a_second_writer_of_the_same_cassette_at_once_is_refused(tmp_path):
    """Lines name messages by their writer's numbers: two writers at once would make them ambiguous. One
    after the other is fine (a later definition of a number wins)."""
    first, second = Cassette(tmp_path / "calls.jsonl"), Cassette(tmp_path / "calls.jsonl")
    RecordingModel(ScriptedModel(["a"]), first).generate(trial_requests()[0])
    with pytest.raises(LatteError, match="is being written by another cassette"):
        RecordingModel(ScriptedModel(["b"]), second).generate(trial_requests()[1])
    first.close()
    RecordingModel(ScriptedModel(["c"]), second).generate(trial_requests()[2])
    second.close()
    lines = read_cassette(tmp_path)
    assert [line["response"]["text"] for line in lines] == ["a", "c"]
    assert [line["request"]["messages"] for line in lines] == [[["user", "Lead turn 0"]], [["user", "Lead turn 1"]]]
