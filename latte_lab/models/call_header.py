"""A call's frame and scope in one HTTP header, sent to servers on this machine only.

latte_lab's provider clients add the header ``x-latte-lab-call`` to a request whose endpoint is a loopback
address (``127.0.0.0/8``, ``::1``, ``localhost``): who is asked, in which role, round and phase, with which
actions and teammates (the frame of :class:`~latte_lab.models.base.AgentView`), and where the call sits in
its trial (:class:`~latte_lab.models.base.Scope`). The provider emulator (:mod:`latte_lab.models.emulator`)
reads it to answer as the simulated model answers the same call inside a trial, so a trial through the
emulator is the simulated trial, played over the wire. A server anywhere else never receives it, and the
header carries no prompt text and no key.

>>> from latte_lab.models.base import AgentView, Scope
>>> frame = AgentView(task="debug", role="worker", agent="Dev1", round=3, allowed_actions=("claim_task",))
>>> value = encode(frame, Scope(seed=1, agent="Dev1", call_index=4, trial="t"))
>>> decode(value)[1]
Scope(seed=1, agent='Dev1', call_index=4, trial='t')
>>> decode("not base64 json") is None
True
>>> is_loopback("http://127.0.0.1:8000/v1"), is_loopback("http://localhost:1"), is_loopback("https://api.openai.com/v1")
(True, True, False)
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
from urllib.parse import urlsplit

from latte_lab.models.base import AgentView, ModelRequest, Scope

HEADER = "x-latte-lab-call"
FRAME_FIELDS = ("task", "role", "agent", "round", "phase", "allowed_actions", "teammates")
MAX_HEADER_CHARS = 8192  # HTTP servers commonly refuse longer header lines; a frame is a few hundred


def is_loopback(url: str | None) -> bool:
    """Whether ``url`` names a server on this machine."""
    if not url:
        return False
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def encode(frame: AgentView, scope: Scope) -> str:
    """The header's value: the frame's fields and the scope as JSON, base64url-encoded (ASCII)."""
    payload = {"frame": {name: _plain(getattr(frame, name)) for name in FRAME_FIELDS}, "scope": scope.as_dict()}
    text = json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii")


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def decode(value: str | None) -> tuple[AgentView, Scope] | None:
    """The frame and scope a header value carries; None for a missing or malformed one."""
    if not value or len(value) > MAX_HEADER_CHARS:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(value.encode("ascii")).decode("utf-8"))
        frame, scope = payload["frame"], payload["scope"]
        view = AgentView(
            task=str(frame["task"]), role=str(frame["role"]), agent=str(frame["agent"]), round=int(frame["round"]),
            phase=str(frame["phase"]), allowed_actions=tuple(str(a) for a in frame["allowed_actions"]),
            teammates=tuple(str(t) for t in frame["teammates"]),
        )
        where = Scope(seed=int(scope["seed"]), agent=str(scope["agent"]), call_index=int(scope["call_index"]),
                      trial=str(scope["trial"]))
    except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error):
        return None
    return view, where


def frame_of_request(request: ModelRequest) -> AgentView | None:
    """The frame a team gave ``request``, or that of the view given in its place (never read from the prompt:
    a provider's call does not pay for reading it)."""
    if request.frame is not None:
        return request.frame
    view = request.__dict__.get("_view")
    return view if isinstance(view, AgentView) else None


def headers_for(request: ModelRequest, url: str | None) -> dict[str, str]:
    """``{HEADER: value}`` for a call to ``url`` on this machine that has a frame; ``{}`` otherwise."""
    if not is_loopback(url):
        return {}
    frame = frame_of_request(request)
    if frame is None:
        return {}
    value = encode(frame, request.scope)
    return {HEADER: value} if len(value) <= MAX_HEADER_CHARS else {}


__all__ = ["HEADER", "decode", "encode", "frame_of_request", "headers_for", "is_loopback"]
