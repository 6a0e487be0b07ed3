"""API keys: where they come from (environment, then a ``.env`` file), where they may go, and how they are
kept out of text.

Keys are read only here. A provider's key goes to that provider's own API alone: ``OPENAI_API_KEY`` only to
``https://api.openai.com``, ``ANTHROPIC_API_KEY`` only to ``https://api.anthropic.com``. Any other server
(a ``base_url``, or the SDK's ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``) gets ``LATTE_BASE_URL_API_KEY``
when it is set, else a placeholder (local servers ignore the key). Anything that may end up in a log, an error message, a cache row or a
cassette line goes through :func:`redact` first, which masks provider-shaped keys (``sk-...``,
``sk-ant-...``), every key this module has handed out, and the values of environment variables whose
names say they are secret (``*KEY*``, ``*SECRET*``, ``*TOKEN*``).
"""

from __future__ import annotations

import os
import re
import threading
from urllib.parse import urlsplit

from latte_lab.errors import MissingAPIKeyError

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8  # shorter env values ("1", "true") are flags, not secrets; masking them would garble text
LOCAL_SERVER_KEY = "not-needed"  # local OpenAI-compatible servers (vLLM, Ollama) ignore the key but the SDK wants one
BASE_URL_KEY_ENV = "LATTE_BASE_URL_API_KEY"  # the key for a server reached through a base_url
# Each provider key: the one host it is sent to, and the variable its SDK reads a base URL from.
KEY_HOSTS = {"OPENAI_API_KEY": "api.openai.com", "ANTHROPIC_API_KEY": "api.anthropic.com"}
SDK_BASE_URL_ENV = {"OPENAI_API_KEY": "OPENAI_BASE_URL", "ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL"}
SECRET_ENV_NAME = re.compile(r"KEY|SECRET|TOKEN", re.IGNORECASE)
# Provider key shapes: OpenAI "sk-..." / "sk-proj-...", Anthropic "sk-ant-...". The body is long and
# made of URL-safe characters; 16+ characters avoids masking ordinary words such as "sk-learn".
KEY_PATTERN = re.compile(r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}")

_env_loaded = False
_env_lock = threading.Lock()
_known_secrets: set[str] = set()


def load_env(path: str | os.PathLike | None = None) -> str | None:
    """Load a ``.env`` file once (searched from the current directory upwards) without overriding the env.

    Returns the path that was loaded, or None when there is none. Later calls are no-ops unless a path is
    given explicitly.
    """
    global _env_loaded
    with _env_lock:
        if _env_loaded and path is None:
            return None
        try:
            from dotenv import find_dotenv, load_dotenv
        except ImportError:  # python-dotenv comes with the openai and anthropic extras; without it, no .env
            _env_loaded = True
            return None
        found = str(path) if path is not None else find_dotenv(usecwd=True)
        if found:
            load_dotenv(found, override=False)
        _env_loaded = True
        return found or None


def register_secret(value: str | None) -> None:
    """Remember a secret so that :func:`redact` masks it even when it matches no known shape."""
    if value and len(value) >= MIN_SECRET_LENGTH and value != LOCAL_SERVER_KEY:
        _known_secrets.add(value)


def endpoint(env_var: str, base_url: str | None = None) -> str | None:
    """Where a client keyed by ``env_var`` sends its calls: ``base_url``, else the base URL its SDK reads
    from the environment (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``), else None (the provider's API)."""
    if base_url:
        return base_url
    load_env()
    return os.environ.get(SDK_BASE_URL_ENV.get(env_var, ""), "").strip() or None


def is_provider_api(env_var: str, url: str | None) -> bool:
    """Whether ``url`` is the provider's own API, the one place its key ``env_var`` may go (None: the SDK's
    default, which is).

    >>> is_provider_api("OPENAI_API_KEY", "https://api.openai.com/v1")
    True
    >>> [is_provider_api("OPENAI_API_KEY", u) for u in ("http://127.0.0.1:8000/v1", "https://api.openai.com.evil.io")]
    [False, False]
    """
    if not url:
        return True
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # not a URL: certainly not the provider's
        return False
    return parts.scheme == "https" and parts.hostname == KEY_HOSTS.get(env_var) and port in (None, 443)


def key_variable(env_var: str, base_url: str | None = None) -> str:
    """The variable whose key a call to ``base_url`` carries: ``env_var`` for the provider's own API,
    ``LATTE_BASE_URL_API_KEY`` for any other server."""
    return env_var if is_provider_api(env_var, endpoint(env_var, base_url)) else BASE_URL_KEY_ENV


def base_url_api_key() -> str:
    """The key for a server reached through a base_url: ``$LATTE_BASE_URL_API_KEY``, else a placeholder."""
    load_env()
    value = os.environ.get(BASE_URL_KEY_ENV, "").strip()
    if value:
        register_secret(value)
        return value
    return LOCAL_SERVER_KEY


def get_api_key(env_var: str, *, provider: str, base_url: str | None = None) -> str:
    """The API key for a call to ``base_url`` (None: the provider's API), from the environment or ``.env``.

    The provider's key (``env_var``) goes only to the provider's own API; a missing one raises
    :class:`MissingAPIKeyError` naming the variable to set. Any other server (``base_url``, or the base URL
    the SDK reads from the environment) gets :func:`base_url_api_key`, never the provider's key.
    """
    if not is_provider_api(env_var, endpoint(env_var, base_url)):
        return base_url_api_key()
    load_env()
    value = os.environ.get(env_var, "").strip()
    if value:
        register_secret(value)
        return value
    raise MissingAPIKeyError(
        f"no API key for {provider}: set {env_var} in the environment or in a .env file "
        f"(searched from {os.getcwd()} upwards), or use model='simulated' to run offline"
    )


def _env_secrets() -> set[str]:
    return {
        value
        for name, value in os.environ.items()
        if SECRET_ENV_NAME.search(name) and len(value) >= MIN_SECRET_LENGTH and value != LOCAL_SERVER_KEY
    }


# Redaction runs on every cassette line and log text, so the secrets are recomputed only when the
# environment or the handed-out keys changed: comparing the environment's mapping with a copy is a C-level
# dict comparison, where reading it through os.environ decodes every name and value.
_secrets_cache: tuple[dict | None, frozenset[str], tuple[str, ...]] | None = None


def _secrets() -> tuple[str, ...]:
    global _secrets_cache
    data = getattr(os.environ, "_data", None)  # CPython's raw mapping behind os.environ
    cached = _secrets_cache
    if cached is not None and data is not None and cached[1] == _known_secrets and cached[0] == data:
        return cached[2]
    secrets = tuple(sorted(_known_secrets | _env_secrets(), key=len, reverse=True))
    _secrets_cache = (dict(data) if data is not None else None, frozenset(_known_secrets), secrets)
    return secrets


def only_key_shapes() -> bool:
    """True when :func:`redact` has only provider-shaped keys to mask (no secret in the environment, none
    handed out): then it masks within runs of key characters only, and redacting the pieces of a text
    that meet at other characters (the values of a JSON line) gives the text redacted whole."""
    return not _secrets()


_SHAPED: dict[str, str] = {}  # long pieces already masked: a prompt's earlier messages recur every call
_SHAPED_MAX = 4096  # entries; emptied when full
_SHAPED_MIN_CHARS = 256


def redact_key_shapes(text: str) -> str:
    """``text`` with provider-shaped keys masked (all :func:`redact` does when :func:`only_key_shapes`)."""
    if len(text) < _SHAPED_MIN_CHARS:
        return KEY_PATTERN.sub(REDACTED, text) if "sk-" in text else text
    out = _SHAPED.get(text)
    if out is None:
        if len(_SHAPED) >= _SHAPED_MAX:
            _SHAPED.clear()
        out = _SHAPED[text] = KEY_PATTERN.sub(REDACTED, text) if "sk-" in text else text
    return out


def redact(text: str) -> str:
    """``text`` with every secret masked as ``[REDACTED]``.

    >>> redact("key sk-abcdefghijklmnop1234 refused")
    'key [REDACTED] refused'
    """
    if not text:
        return text
    # Longest first, so a secret that contains another is masked whole.
    for secret in _secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    return KEY_PATTERN.sub(REDACTED, text) if "sk-" in text else text
