"""The emulator's HTTP server: OpenAI and Anthropic endpoints on a loopback port, and the log of every request.

Each connection is served by a thread of its own (the SDKs keep connections open between calls). A request
goes through what a provider does, in order: a key must be present (any key: it is neither checked nor
kept), the body must be a request the provider accepts (else 400), the rate limits must admit it (else 429
with ``Retry-After``), it may fail (a 5xx, or the connection dropped without an answer), and otherwise it is
answered by the simulated model after its latency, with its usage in the reply. Failed and refused requests
are not billed. Every request, whatever became of it, is one entry of the log (:data:`LOG_FIELDS`); the log
holds no prompt text, no header and no key.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from latte_lab.errors import ConfigError
from latte_lab.models import call_header
from latte_lab.models.emulator.answer import Answerer, prompt_tokens
from latte_lab.models.emulator.conditions import Conditions, Limits
from latte_lab.models.emulator.wire import WireError, error_body, parse_request, reply_body

IDLE_CONNECTION_SECONDS = 90.0  # an idle kept-alive connection is closed after this, as providers' servers do
LISTEN_BACKLOG = 1024  # connections waiting to be accepted: a sweep opens hundreds at once
SHUTDOWN_POLL_SECONDS = 0.05  # how often serve_forever looks for a stop
MAX_BODY_BYTES = 32 * 1024 * 1024  # a larger request is refused (413), as providers refuse oversized prompts
KEY_HEX_CHARS = 16  # of a request's SHA-256 in the log: enough to tell requests apart, short to read
LOG_FIELDS = ("n", "api", "model", "status", "outcome", "limit", "attempt", "key", "call", "input_tokens",
              "output_tokens", "dollars", "arrived", "finished", "latency_s", "delivered")
"""One log entry: its number, the endpoint (``openai`` or ``anthropic``), the model asked for, the HTTP
status, what became of it (``ok``, ``rate_limit``, ``5xx``, ``drop``, ``invalid``, ``no_key``,
``not_found``), the limit that refused it, its attempt (0 for the first time this content arrived), the
request's content hash, the call it was (``trial/agent/call_index`` from ``x-latte-lab-call``, else None),
the tokens and dollars billed (0 unless answered), arrival and end (Unix time), the latency imposed, and
whether the answer was written to the connection."""


def _loopback(host: str) -> bool:
    return call_header.is_loopback(f"http://[{host}]" if ":" in host else f"http://{host}")


class RequestLog:
    """Every request the emulator served, in memory (from the moment its reply is ready) and, when ``path`` is
    given, appended to a JSON-lines file once its reply is written (one line each, flushed; lines in the order
    requests ended, each with its number)."""

    def __init__(self, path: str | Path | None = None):
        self._lock = threading.Lock()
        self._entries: list[dict] = []
        self.path = Path(path) if path is not None else None
        self._file = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def add(self, entry: dict) -> None:
        """Numbers ``entry`` and keeps it (before its reply is written, so that a client that has its reply
        finds the entry)."""
        with self._lock:
            entry["n"] = len(self._entries)
            self._entries.append(entry)

    def write(self, entry: dict) -> None:
        """Appends ``entry``, now final, to the file."""
        with self._lock:
            if self._file is not None:
                self._file.write(json.dumps({k: entry.get(k) for k in LOG_FIELDS}, separators=(",", ":")) + "\n")
                self._file.flush()

    def entries(self) -> list[dict]:
        with self._lock:
            return [dict(e) for e in self._entries]

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = LISTEN_BACKLOG
    emulator: Emulator


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs expect
    timeout = IDLE_CONNECTION_SECONDS
    server: _Server

    def log_message(self, format, *args):  # the request log is the emulator's record, not stderr
        pass

    def do_GET(self):
        if self.path.rstrip("/") in ("", "/health"):
            self._send(200, {"status": "ok", "emulator": "latte_lab"})
        else:
            self._send(404, error_body("openai", "not_found", f"no route GET {self.path}")[1])

    def do_POST(self):
        self.server.emulator._serve(self)

    def _send(self, status: int, body: dict, headers: dict | None = None) -> bool:
        data = json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, str(value))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            return True
        except OSError:  # the client gave up (its timeout, its process killed)
            self.close_connection = True
            return False

    def _drop(self) -> None:
        """Closes the connection without a reply, as a provider's load balancer sometimes does."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


class Emulator:
    """A provider on a loopback port: see :mod:`latte_lab.models.emulator` for what it imposes.

    ``start()`` serves from a thread of this process (``with Emulator(...) as emu:`` starts and stops it);
    ``emu.url`` is its address, ``emu.openai_url`` the base URL for the OpenAI SDK (``.../v1``) and
    ``emu.url`` the one for the Anthropic SDK. ``entries()`` is the request log.
    """

    def __init__(self, conditions: Conditions | None = None, *, profile: str = "default",
                 log_path: str | Path | None = None, host: str = "127.0.0.1", port: int = 0, **settings):
        if not _loopback(host):
            raise ConfigError(f"the emulator listens on this machine only (127.0.0.1, ::1, localhost); got {host!r}")
        if conditions is None:
            conditions = Conditions(**settings)
        elif settings:
            raise ConfigError("give the emulator either conditions= or its settings, not both")
        self.conditions = conditions
        self.profile = profile
        self.limits = Limits(conditions)
        self.answerer = Answerer(profile)
        self.log = RequestLog(log_path)
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._prices = None
        self._host, self._port = host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "not started"
        return f"Emulator({where}, {self.conditions})"

    # ----- lifetime -----
    def start(self) -> Emulator:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        server_class = type("_EmulatorServer", (_Server,), {"address_family": family})
        self._server = server_class((self._host, self._port), _Handler)
        self._server.emulator = self
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS},
                                        name="latte-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(5)
            self._server = None
        self.log.close()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise ConfigError("the emulator is not started: call start() or use it in a with block")
        host, port = self._server.server_address[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    def entries(self) -> list[dict]:
        """The request log so far (copies)."""
        return self.log.entries()

    # ----- one request -----
    def _dollars(self, api: str, model: str, input_tokens: int, output_tokens: int) -> float | None:
        from latte_lab.models.ledger import find_price, load_prices

        if self._prices is None:
            self._prices = load_prices()
        price = find_price(self._prices, model, api)
        if price is None:
            return None
        return (input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok) / 1e6

    def _serve(self, handler: _Handler) -> None:
        arrived = time.time()
        path = handler.path.split("?", 1)[0].rstrip("/")
        api = "anthropic" if path.endswith("/messages") else "openai" if path.endswith("/chat/completions") else None
        entry = {"api": api or "openai", "model": None, "status": None, "outcome": None, "limit": None,
                 "attempt": None, "key": None, "call": None, "input_tokens": 0, "output_tokens": 0, "dollars": 0.0,
                 "arrived": round(arrived, 4), "finished": None, "latency_s": 0.0, "delivered": False}
        try:
            length = int(handler.headers.get("content-length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY_BYTES:
            self._refuse(handler, entry, "invalid", f"content-length must be 0 to {MAX_BODY_BYTES} bytes", status=413)
            return
        raw = handler.rfile.read(length)
        if api is None:
            self._refuse(handler, entry, "not_found", f"no route POST {handler.path}")
            return
        if not (handler.headers.get("authorization") or handler.headers.get("x-api-key")):
            self._refuse(handler, entry, "no_key", "no API key: send one (the emulator accepts any)")
            return
        try:
            request = parse_request(api, json.loads(raw))
        except (WireError, ValueError) as exc:
            self._refuse(handler, entry, "invalid", str(exc) if isinstance(exc, WireError) else "body is not JSON")
            return
        key = hashlib.sha256(raw).hexdigest()[:KEY_HEX_CHARS]
        with self._lock:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
        call = call_header.decode(handler.headers.get(call_header.HEADER))
        entry.update(model=request.model, attempt=attempt, key=key,
                     call=f"{call[1].trial}/{call[1].agent}/{call[1].call_index}" if call else None)
        draw = self.conditions.draw(key, attempt)
        tokens_in = prompt_tokens(request)
        refused = self.limits.admit(tokens_in, time.monotonic())
        if refused is not None:
            limit, wait = refused
            entry["limit"] = limit
            headers = {"retry-after-ms": str(max(1, math.ceil(wait * 1000))), "retry-after": str(max(1, math.ceil(wait))),
                       **self._rate_headers(api, f"refused-{key}-{attempt}")}
            self._refuse(handler, entry, "rate_limit", f"rate limit reached for {limit} per minute; "
                         f"try again in {wait:.3f}s", headers=headers)
            return
        if draw.fault:
            time.sleep(draw.fault_after_s)
            self.limits.refund(tokens_in, time.monotonic())
            entry["latency_s"] = round(draw.fault_after_s, 4)
            if draw.fault == "drop":
                self._end(entry, "drop", None, send=lambda: handler._drop() or False)
            else:
                kind = "overloaded" if int(key, 16) % 2 else "server"
                self._refuse(handler, entry, kind, "the server had an error while processing your request", outcome="5xx")
            return
        answer = self.answerer.answer(request, call)
        time.sleep(max(0.0, draw.latency_s - (time.time() - arrived)))
        self.limits.answered(answer.output_tokens, time.monotonic())
        reply_id = f"{'msg_emu' if api == 'anthropic' else 'chatcmpl-emu'}-{key}-{attempt}"
        body = reply_body(request, answer.text, input_tokens=answer.input_tokens, output_tokens=answer.output_tokens,
                          finish=answer.finish, reply_id=reply_id)
        dollars = self._dollars(api, request.model, answer.input_tokens, answer.output_tokens)
        entry.update(input_tokens=answer.input_tokens, output_tokens=answer.output_tokens, dollars=dollars,
                     latency_s=round(draw.latency_s, 4))
        self._end(entry, "ok", 200, send=lambda: handler._send(200, body, self._rate_headers(api, reply_id)))

    def _rate_headers(self, api: str, reply_id: str) -> dict:
        limits = self.limits.headers(time.monotonic())
        if api == "anthropic":
            headers = {"request-id": reply_id}
            headers.update({f"anthropic-ratelimit-{name.split('-')[1]}-{name.split('-')[0]}": value
                            for name, value in limits.items()})
            return headers
        headers = {"x-request-id": reply_id}
        headers.update({f"x-ratelimit-{name}": value for name, value in limits.items()})
        return headers

    def _refuse(self, handler: _Handler, entry: dict, kind: str, message: str, *, headers: dict | None = None,
                status: int | None = None, outcome: str | None = None) -> None:
        code, body = error_body(entry["api"], "auth" if kind == "no_key" else kind, message)
        code = status or code
        self._end(entry, outcome or kind, code, send=lambda: handler._send(code, body, headers))

    def _end(self, entry: dict, outcome: str, status: int | None, *, send) -> None:
        """Logs the request, then answers it with ``send()`` (True when the answer was written), then writes
        the entry to the log file with that."""
        entry.update(outcome=outcome, status=status, finished=round(time.time(), 4), delivered=True)
        if outcome != "ok":
            entry.update(input_tokens=0, output_tokens=0, dollars=0.0)
        self.log.add(entry)
        entry["delivered"] = bool(send())
        self.log.write(entry)


__all__ = ["LOG_FIELDS", "Emulator", "RequestLog"]
