"""Request keys: the canonical JSON of a model request's key fields and its SHA-256, which the response cache
(:mod:`latte_lab.models.cache`) and cassettes (:mod:`latte_lab.models.cassette`) index replies by, and the
way back from stored fields to a request.

A prompt repeats its agent's earlier messages at every call, so the JSON of long texts and messages (and
their UTF-8 bytes) is remembered: a call encodes only what is new.

A text may hold code points UTF-8 cannot encode (a lone surrogate such as ``"\\udc80"``, which a provider's
JSON reply can carry). Where JSON text becomes bytes (keys, cassette lines, cache rows) those code points
are written as their ``\\u`` escapes (:func:`escape_surrogates`), which JSON reads back as the same string;
every other text keeps its bytes, and so its key.

>>> from latte_lab.models.base import ModelRequest, Message
>>> r = ModelRequest("openai", "gpt-4o", "sys", [Message("user", "hi")])
>>> len(request_key(r))
64
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

from latte_lab.errors import DataError
from latte_lab.models.base import Message, ModelRequest, Scope

KEY_SCHEMA_VERSION = 1  # bump when key_fields() or its canonical form changes, so old rows stop matching
SHOWN_VALUE_CHARS = 60  # diff_fields shows short differing values inline, longer ones only by name


# json.dumps with these options builds this encoder anew at every call.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_encode_string = json.encoder.encode_basestring  # what _ENCODER.encode does with a str
_STRING_JSON: dict[str, str] = {}  # long texts already encoded: a prompt's earlier messages recur every call
_STRING_JSON_MAX = 4096  # entries; the memo is emptied when full (a trial's windows need far fewer)
_MEMO_MIN_CHARS = 256  # shorter strings encode faster than they are looked up


def escape_surrogates(json_text: str) -> str:
    """JSON text with each code point UTF-8 cannot encode (a surrogate) written as its ``\\u`` escape:
    the same value to a JSON reader, and text that UTF-8 can encode. Only string values and names can
    hold such code points, and JSON reads the escape back as the same code point (but for a high surrogate
    right before a low one, which JSON reads as the one character the pair encodes; no JSON reply holds
    such a pair apart).

    >>> text = canonical_json(["a\\udc80"])
    >>> escape_surrogates(text)
    '["a\\\\udc80"]'
    >>> json.loads(escape_surrogates(text)) == ["a\\udc80"]
    True
    """
    return json_utf8(json_text).decode("utf-8")


def json_utf8(json_text: str) -> bytes:
    """The UTF-8 bytes of JSON text, surrogate code points escaped (:func:`escape_surrogates`); the bytes of
    any other text are its UTF-8, at no extra cost."""
    # backslashreplace writes a surrogate as \udc80, which is its escape in JSON too
    return json_text.encode("utf-8", "backslashreplace")


def json_storable(json_text: str) -> str:
    """``json_text`` when UTF-8 can encode it, else with its surrogate code points escaped."""
    try:
        json_text.encode("utf-8")
    except UnicodeEncodeError:
        return escape_surrogates(json_text)
    return json_text


def canonical_json(obj) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same object gives the same string in any process."""
    return _ENCODER.encode(obj)


def _string_json(text: str) -> str:
    if len(text) < _MEMO_MIN_CHARS:
        return _encode_string(text)
    out = _STRING_JSON.get(text)
    if out is None:
        if len(_STRING_JSON) >= _STRING_JSON_MAX:
            _STRING_JSON.clear()
        out = _STRING_JSON[text] = _encode_string(text)
    return out


def _message_json(role: str, content: str) -> str:
    if len(content) < _MEMO_MIN_CHARS:
        return f"[{_encode_string(role)},{_encode_string(content)}]"
    key = (role, content)
    out = _MESSAGE_JSON.get(key)
    if out is None:
        if len(_MESSAGE_JSON) >= _STRING_JSON_MAX:
            _MESSAGE_JSON.clear()
        out = _MESSAGE_JSON[key] = f"[{_encode_string(role)},{_encode_string(content)}]"
    return out


_MESSAGE_JSON: dict[tuple[str, str], str] = {}


def key_fields(request: ModelRequest) -> dict:
    """``request.key_fields()`` with numbers normalised, so temperature 1 and 1.0 share a key."""
    fields = request.key_fields()
    for name in ("temperature", "top_p"):
        if isinstance(fields.get(name), int) and not isinstance(fields.get(name), bool):
            fields[name] = float(fields[name])
    return fields


def key_from_fields(fields: dict) -> str:
    return hashlib.sha256(json_utf8(canonical_json({**fields, "schema": KEY_SCHEMA_VERSION}))).hexdigest()


def object_json(parts: dict[str, str]) -> str:
    """``canonical_json`` of an object whose values are given already in canonical JSON, so that a large
    value (a prompt's messages) is encoded once for both the request key and the cassette line.

    >>> object_json({"b": "[1,2]", "a": '"x"'}) == canonical_json({"b": [1, 2], "a": "x"})
    True
    """
    if not parts:
        return "{}"
    pieces = []
    for k in sorted(parts):  # one join: the values can be long, and are copied once
        pieces += (",", _encode_string(k), ":", parts[k])
    pieces[0] = "{"
    pieces.append("}")
    return "".join(pieces)


def value_json(value) -> str:
    """``canonical_json(value)``, with the values a request and a reply are made of (None, booleans, ints,
    finite floats, strings, flat dicts of those) written without the encoder's per-call set-up.

    >>> [value_json(v) for v in (None, True, 3, 0.7, "é", {"b": 1, "a": None})]
    ['null', 'true', '3', '0.7', '"é"', '{"a":null,"b":1}']
    """
    kind = type(value)
    if value is None:
        return "null"
    if kind is str:
        return _string_json(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float and value == value and value not in (_INF, -_INF):
        return float.__repr__(value)
    if kind is dict and all(type(k) is str for k in value):
        items = sorted(value.items())
        if all(v is None or type(v) in (str, bool, int) for _, v in items):
            return "{" + ",".join(f"{_encode_string(k)}:{value_json(v)}" for k, v in items) + "}"
    return _ENCODER.encode(value)


_INF = float("inf")
_SCHEMA_JSON = canonical_json(KEY_SCHEMA_VERSION)


MESSAGE_PIECES = "\x00messages"  # where key_and_parts keeps each message's JSON (no field has this name)


def _json_bytes(piece: str) -> bytes:
    """``piece.encode("utf-8")``, remembered for long pieces: a prompt's earlier messages recur at every call,
    and encoding a long text that is not ASCII costs more than hashing it."""
    if len(piece) < _MEMO_MIN_CHARS:
        return json_utf8(piece)
    out = _JSON_BYTES.get(piece)
    if out is None:
        if len(_JSON_BYTES) >= _STRING_JSON_MAX:
            _JSON_BYTES.clear()
        out = _JSON_BYTES[piece] = json_utf8(piece)
    return out


_JSON_BYTES: dict[str, bytes] = {}


def key_and_parts(fields: dict) -> tuple[str, dict[str, str]]:
    """``key_from_fields(fields)`` and the canonical JSON of each field but the messages, with
    ``parts[MESSAGE_PIECES]`` the list of each message's JSON (the list's JSON is ``"[" + ",".join(...) +
    "]"``), each encoded once.

    The key hashes the bytes of ``object_json`` of the fields and the schema version, fed to SHA-256 piece
    by piece, each message's UTF-8 bytes remembered (:func:`_json_bytes`), so the whole prompt is never
    joined or encoded for it."""
    messages = [_message_json(role, content) for role, content in fields.get("messages", ())]
    parts = {k: value_json(v) for k, v in fields.items() if k != "messages"}
    keyed = {**parts, "schema": _SCHEMA_JSON}
    if "messages" in fields:
        keyed["messages"] = None  # hashed message by message below
    digest = hashlib.sha256()
    pending: list[str] = []  # the short pieces between two messages, hashed together
    opening = "{"
    for k in sorted(keyed):
        pending += (opening, _encode_string(k), ":")
        opening = ","
        if k == "messages":
            pending.append("[")
            for i, piece in enumerate(messages):
                if i:
                    pending.append(",")
                digest.update(json_utf8("".join(pending)))
                pending.clear()
                digest.update(_json_bytes(piece))
            pending.append("]")
        else:
            pending.append(keyed[k])
    pending.append("}")
    digest.update(json_utf8("".join(pending)))
    parts[MESSAGE_PIECES] = messages
    return digest.hexdigest(), parts


def request_key(request: ModelRequest) -> str:
    """SHA-256 hex digest identifying everything that determines a reply."""
    return key_from_fields(key_fields(request))


def scope_key(scope: dict | Scope) -> str:
    """The group a request belongs to for :meth:`ResponseCache.explain_miss`: trial seed and agent."""
    s = asdict(scope) if isinstance(scope, Scope) else scope
    return json_storable(canonical_json([s.get("seed"), s.get("agent")]))


def request_from_fields(fields: dict) -> ModelRequest:
    """Rebuild a request from stored key fields (cassette lines, cache rows)."""
    try:
        return ModelRequest(
            provider=fields["provider"],
            model=fields["model"],
            system=fields["system"],
            messages=[Message(role, content) for role, content in fields["messages"]],
            temperature=fields["temperature"],
            max_tokens=fields["max_tokens"],
            top_p=fields.get("top_p"),
            stop=tuple(fields["stop"]) if fields.get("stop") else None,
            base_url=fields.get("base_url"),
            scope=Scope(**fields.get("scope", {})),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"stored request fields are incomplete or malformed ({exc!r})") from None


def _flatten(fields: dict) -> dict:
    flat = {k: v for k, v in fields.items() if k != "scope"}
    for k, v in (fields.get("scope") or {}).items():
        flat[f"scope.{k}"] = v
    return flat


def _describe(name: str, stored, wanted) -> str:
    if name == "messages" and isinstance(stored, list) and isinstance(wanted, list):
        if len(stored) != len(wanted):
            return f"messages ({len(stored)} stored vs {len(wanted)} requested)"
        first = next(i for i, (a, b) in enumerate(zip(stored, wanted)) if a != b)
        return f"messages (message {first} differs)"
    a, b = json.dumps(stored, ensure_ascii=False), json.dumps(wanted, ensure_ascii=False)
    if len(a) + len(b) <= SHOWN_VALUE_CHARS:
        return f"{name} ({a} stored vs {b} requested)"
    return name


def diff_fields(stored: dict, wanted: dict) -> list[str]:
    """Names of the key fields that differ (scope fields as ``scope.<name>``), with short values shown."""
    a, b = _flatten(stored), _flatten(wanted)
    return [_describe(n, a.get(n), b.get(n)) for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]
