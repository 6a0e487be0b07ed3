"""Shared test helpers for the model layer: a fake provider server speaking the real wire formats.

``FakeProvider`` is an ``http.server`` on 127.0.0.1 (ephemeral port) that answers OpenAI
``/v1/chat/completions`` and Anthropic ``/v1/messages`` requests. Tests queue scripted answers
(status, headers, body, delay) and read back every request the server received, so the real SDKs can
be exercised end to end without a network. Test modules import the fixtures under their function
names (``from conftest_models import fake_server_fixture``) and request them as ``fake_server``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from latte_lab.models import Message, ModelRequest, Scope

SERVER_JOIN_SECONDS = 5  # shutting the fake server down never takes longer than this
POLL_SECONDS = 0.02  # serve_forever checks for shutdown this often; the default 0.5 s slows every test


@dataclass
class Reply:
    status: int = 200
    body: object = None  # dict -> JSON; bytes/str -> sent as is; None -> a default success body
    headers: dict = field(default_factory=dict)
    delay_s: float = 0.0


def openai_body(text: str, model: str = "gpt-4o", finish: str = "stop", usage=(11, 7)) -> dict:
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def anthropic_body(texts, model: str = "claude-test", stop: str = "end_turn", usage=(13, 5)) -> dict:
    blocks = [{"type": "text", "text": t} for t in ([texts] if isinstance(texts, str) else texts)]
    return {
        "id": "msg_test", "type": "message", "role": "assistant", "model": model, "content": blocks,
        "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


class FakeProvider:
    """A scripted OpenAI/Anthropic-compatible HTTP server on an ephemeral loopback port."""

    def __init__(self):
        self.requests: list[dict] = []
        self.script: list[Reply] = []
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with provider._lock:
                    provider.requests.append(
                        {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body, "time": time.monotonic()}
                    )
                    reply = provider.script.pop(0) if provider.script else Reply()
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.body if reply.body is not None else provider.default_body(self.path, body)
                data = json.dumps(payload).encode() if isinstance(payload, dict) else (
                    payload.encode() if isinstance(payload, str) else payload)
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
        )

    @staticmethod
    def default_body(path: str, body) -> dict:
        last = (body or {}).get("messages", [{}])[-1].get("content", "")
        model = (body or {}).get("model", "unknown")
        if path.endswith("/messages"):
            return anthropic_body(f"reply to: {last}", model=model)
        return openai_body(f"reply to: {last}", model=model)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    @property
    def hits(self) -> int:
        with self._lock:
            return len(self.requests)

    def start(self) -> FakeProvider:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(SERVER_JOIN_SECONDS)


@pytest.fixture(name="fake_server")
def fake_server_fixture():
    server = FakeProvider().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(name="canary_keys")
def canary_keys_fixture(monkeypatch):
    """Unique canary API keys planted in the environment; returns {"openai": ..., "anthropic": ...}.

    The OpenAI canary has a provider key shape (``sk-...``); the Anthropic one does not, so both the
    shape rule and the secret-env-var rule of ``redact`` are exercised.
    """
    keys = {"openai": f"sk-canary{uuid.uuid4().hex}", "anthropic": f"canary-{uuid.uuid4().hex}"}
    monkeypatch.setenv("OPENAI_API_KEY", keys["openai"])
    monkeypatch.setenv("ANTHROPIC_API_KEY", keys["anthropic"])
    return keys


def make_request(provider="openai", model="gpt-4o", text="hello", *, agent="Dev1", seed=0, call_index=0,
                 base_url=None, **kw) -> ModelRequest:
    return ModelRequest(
        provider=provider, model=model, system="You are a test agent.", messages=[Message("user", text)],
        base_url=base_url, scope=Scope(seed=seed, agent=agent, call_index=call_index), **kw,
    )


class ProtocolServer(FakeProvider):
    """A scripted provider that answers like a (very small) LATTE team on the debug task: the Lead plans one
    task, a worker claims it and writes the task's reference module (a test fixture, not an agent model)."""

    @property
    def solution(self) -> str:
        import latte_lab as ll

        return ll.tasks.get("debug").reference_solution()["signal_toolkit.py"]

    def default_body(self, path, body):
        from latte_lab import prompts

        last = body["messages"][-1]["content"]
        if isinstance(last, list):  # Anthropic content blocks
            last = "".join(b.get("text", "") for b in last)
        if "PLANNING" in last:
            text = 'Plan.\n<discover_task id="t1" title="Fix the module">Fix every bug.</discover_task>'
        elif prompts.READY_HEADER in last:
            text = 'Taking it. <claim_task id="t1" />'
        elif prompts.TASK_HEADER in last:
            text = f'<edit_file path="signal_toolkit.py">{self.solution}</edit_file>\n<complete_task id="t1" />'
        else:
            text = "Nothing to change."
        if path.endswith("/messages"):
            return anthropic_body(text, model=body["model"])
        return openai_body(text, model=body["model"])
