"""The two wire formats the emulator speaks: OpenAI chat completions and Anthropic messages.

A request body becomes a :class:`ChatRequest` (system text, user and assistant turns, sampling parameters),
whichever format it came in; a reply, a refusal for a limit and a server error go back in the caller's
format, with usage counts in every reply, as the official SDKs parse them.

>>> req = parse_request("openai", {"model": "gpt-4o-mini", "max_tokens": 64, "messages": [
...     {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]})
>>> req.system, [(m.role, m.content) for m in req.messages], req.max_tokens
('Be brief.', [('user', 'hi')], 64)
>>> body = reply_body(req, "hello", input_tokens=3, output_tokens=2, finish="stop", reply_id="chatcmpl-1")
>>> body["choices"][0]["message"]["content"], body["usage"]["total_tokens"]
('hello', 5)
>>> parse_request("anthropic", {"model": "claude-haiku-4-5", "messages": []})
Traceback (most recent call last):
latte_lab.models.emulator.wire.WireError: max_tokens: field required
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from latte_lab.config import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE
from latte_lab.models.base import Message

APIS = ("openai", "anthropic")
FINGERPRINT = "latte-lab-emulator"  # in every OpenAI reply: a response that did not come from the provider


class WireError(ValueError):
    """A request the provider would refuse with 400; ``str(exc)`` is the message its body carries."""


@dataclass
class ChatRequest:
    api: str  # openai | anthropic
    model: str
    system: str
    messages: list[Message]
    max_tokens: int
    temperature: float
    top_p: float | None = None
    stop: tuple[str, ...] | None = None


def _text(content, where: str) -> str:
    """A message's content as text: a string, or the text of its blocks in order."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
        return "".join(parts)
    if content is None:
        return ""
    raise WireError(f"{where}: content must be a string or a list of text blocks")


def _number(body: dict, name: str, default, kind=float):
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WireError(f"{name}: expected a number, got {value!r}")
    return kind(value)


def parse_request(api: str, body) -> ChatRequest:
    """The request in ``body`` (a decoded JSON object) sent to the ``api`` endpoint; WireError when the
    provider would refuse it."""
    if not isinstance(body, dict):
        raise WireError("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise WireError("model: field required")
    if body.get("stream"):
        raise WireError("stream: the emulator answers whole replies only; leave stream unset")
    raw = body.get("messages")
    if not isinstance(raw, list):
        raise WireError("messages: field required (a list)")
    system_parts: list[str] = []
    if api == "anthropic":
        if "max_tokens" not in body:
            raise WireError("max_tokens: field required")
        if body.get("system") is not None:
            system_parts.append(_text(body["system"], "system"))
        max_tokens = _number(body, "max_tokens", DEFAULT_MAX_TOKENS, int)
        stop = body.get("stop_sequences")
    else:
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        max_tokens = DEFAULT_MAX_TOKENS if limit is None else _number({"max_tokens": limit}, "max_tokens", 0, int)
        stop = body.get("stop")
    if max_tokens < 1:
        raise WireError(f"max_tokens: must be at least 1, got {max_tokens}")
    messages: list[Message] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise WireError(f"messages[{i}]: expected an object with role and content")
        role, text = item.get("role"), _text(item.get("content"), f"messages[{i}]")
        if role in ("system", "developer") and api == "openai":
            system_parts.append(text)
        elif role == "assistant":
            messages.append(Message("assistant", text))
        elif role in ("user", "tool", "function"):
            messages.append(Message("user", text))
        else:
            raise WireError(f"messages[{i}].role: unknown role {role!r}")
    if isinstance(stop, str):
        stop = [stop]
    return ChatRequest(
        api=api, model=model, system="\n\n".join(system_parts), messages=messages, max_tokens=max_tokens,
        temperature=_number(body, "temperature", DEFAULT_TEMPERATURE), top_p=_number(body, "top_p", None),
        stop=tuple(str(s) for s in stop) if isinstance(stop, list) and stop else None,
    )


def reply_body(request: ChatRequest, text: str, *, input_tokens: int, output_tokens: int, finish: str,
               reply_id: str) -> dict:
    """A reply in the request's format; ``finish`` is ``stop`` or ``length``."""
    if request.api == "anthropic":
        return {
            "id": reply_id, "type": "message", "role": "assistant", "model": request.model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "max_tokens" if finish == "length" else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }
    return {
        "id": reply_id, "object": "chat.completion", "created": int(time.time()), "model": request.model,
        "system_fingerprint": FINGERPRINT,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                     "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                  "total_tokens": input_tokens + output_tokens},
    }


# (status, OpenAI error type and code, Anthropic error type) of each refusal the emulator sends
ERRORS = {
    "invalid": (400, "invalid_request_error", None, "invalid_request_error"),
    "auth": (401, "invalid_request_error", "invalid_api_key", "authentication_error"),
    "not_found": (404, "invalid_request_error", "unknown_url", "not_found_error"),
    "rate_limit": (429, "tokens", "rate_limit_exceeded", "rate_limit_error"),
    "server": (500, "server_error", None, "api_error"),
    "overloaded": (503, "server_error", "service_unavailable", "overloaded_error"),
}


def error_body(api: str, kind: str, message: str) -> tuple[int, dict]:
    """``(status, body)`` of a refusal of ``kind`` (a key of :data:`ERRORS`) in ``api``'s format."""
    status, openai_type, code, anthropic_type = ERRORS[kind]
    if api == "anthropic":
        if kind == "overloaded":
            status = 529  # Anthropic's own status for an overloaded API
        return status, {"type": "error", "error": {"type": anthropic_type, "message": message}}
    return status, {"error": {"message": message, "type": openai_type, "param": None, "code": code}}


__all__ = ["APIS", "FINGERPRINT", "ChatRequest", "WireError", "error_body", "parse_request", "reply_body"]
