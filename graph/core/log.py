"""Logging: concise text or one JSON object a line, with ids attached and secrets removed.

`redact` is also what scrubs tool results, stored errors and the CLI's error output, so it
imports nothing heavy and caches what it computes from the environment.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast
from urllib.parse import quote, quote_plus, unquote, urlsplit

from graph.core.controls import printable

if TYPE_CHECKING:
    from graph.core.settings import Settings

REDACTED = "[redacted]"
# AUTH but not AUTHOR: GIT_AUTHOR_NAME is a name, XAUTHORITY a path.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH(?!OR)", re.IGNORECASE)
# Ferry settings whose names merely mention tokens: their values are counts, not secrets.
_NOT_SECRET = frozenset({"FERRY_TOKEN_BUDGET", "FERRY_CONTEXT_TOKENS"})
_MIN_LENGTH = 8  # shorter values would match ordinary text
_AUTH_HEADER = re.compile(r"(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_URLSAFE = str.maketrans("+/", "-_")
_FIELDS = ("event", "thread_id", "run_id", "tool_call_id", "tool", "duration_ms", "attempt")
DRIVER_LOGGERS = ("psycopg", "psycopg_pool", "temporalio")
"""The Postgres driver's and Temporal SDK's loggers (the SDK's core forwards to `temporalio.core`):
Ferry's log keeps their warnings, a terminal never shows them."""


def redact(text: str) -> str:
    """Replace the environment's secrets, in any form, and bearer tokens with `[redacted]`.

    Secrets are the values of variables named like one (`*KEY*`, `*TOKEN*`, `*PASS*`, …) and
    passwords inside URLs (`FERRY_DATABASE_URL`); their plain, URL-encoded, escaped and base64
    forms are removed.

    Args:
        text: A tool result, an error message, a traceback or a log line.
    """
    return _AUTH_HEADER.sub(rf"\1 {REDACTED}", _scrubber(_secret_variables()).scrub(text))


def is_secret_name(name: str) -> bool:
    """Whether a variable's name says it holds a secret (`*KEY*`, `*TOKEN*`, `*PASS*`, …)."""
    return bool(_SECRET_NAME.search(name))


def _secret_variables() -> tuple[tuple[str, str], ...]:
    """The variables that may hold a secret: the cache key of `_scrubber`, cheap to compare.

    The MCP servers file's `env` and `headers` values count as secret variables too.
    """
    return tuple(
        (name, value)
        for name, value in os.environ.items()
        if len(value) >= _MIN_LENGTH
        and name not in _NOT_SECRET
        and ("@" in value or is_secret_name(name))
    ) + tuple((name, value) for name, value in _mcp_secrets() if len(value) >= _MIN_LENGTH)


def _mcp_secrets() -> tuple[tuple[str, str], ...]:
    """The MCP servers file's secrets, once it was read (no import: the log needs it no sooner)."""
    secrets = sys.modules.get("tools.settings")
    return cast(tuple[tuple[str, str], ...], secrets.config_secrets()) if secrets else ()


@dataclass(frozen=True)
class _Scrubber:
    """Compiled patterns for one environment's secrets."""

    literal: re.Pattern[str] | None
    """Plain, URL-encoded and escaped forms."""
    encoded: re.Pattern[str] | None
    """Base64 fragments, found inside longer base64 strings too."""

    def scrub(self, text: str) -> str:
        """`text` with every form of every secret replaced."""
        if self.literal:
            text = self.literal.sub(REDACTED, text)
        encoded = self.encoded
        if encoded and encoded.search(text):
            # The whole base64 string goes: its edges encode the secret's first and last bits.
            text = _BASE64_RUN.sub(lambda run: REDACTED if encoded.search(run[0]) else run[0], text)
        return text


@functools.lru_cache(maxsize=8)
def _scrubber(variables: tuple[tuple[str, str], ...]) -> _Scrubber:
    """The patterns for these variables' secrets, built once per environment."""
    secrets = _secret_values(variables)
    return _Scrubber(
        literal=_alternation(form for s in secrets for form in _literal_forms(s)),
        encoded=_alternation(form for s in secrets for form in _base64_fragments(s)),
    )


def _secret_values(variables: Iterable[tuple[str, str]]) -> set[str]:
    """The secrets themselves: secret-named values and the passwords inside URLs."""
    values: set[str] = set()
    for name, value in variables:
        if is_secret_name(name):
            values |= {value, value.strip()}
        try:
            password = urlsplit(value.strip()).password
        except ValueError:  # not a URL after all
            password = None
        if password:
            values |= {password, unquote(password)}
    return {value for value in values if len(value) >= _MIN_LENGTH}


def _literal_forms(secret: str) -> set[str]:
    """`secret` as typed, URL-encoded (path or form style) and escaped (repr, JSON)."""
    return {
        secret,
        quote(secret),
        quote(secret, safe=""),
        quote_plus(secret),
        repr(secret)[1:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
    }


def _base64_fragments(secret: str) -> set[str]:
    """The base64 characters that encode `secret` wherever it sits in the encoded bytes.

    Each character carries 6 bits, so the characters at the secret's edges also carry bits of
    the bytes around it (`user:` in `Basic base64(user:secret)`); only the characters made of
    the secret's bits alone are kept, for each of the three offsets modulo 3 bytes, in the
    standard and the URL-safe alphabet.
    """
    data = secret.encode()
    fragments: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode().rstrip("=")
        first = -(-8 * offset // 6)  # the first character with no bit of the bytes before
        last = 8 * (offset + len(data)) // 6  # past the last with no bit of the bytes after
        fragment = encoded[first:last]
        fragments |= {fragment, fragment.translate(_URLSAFE)}
    return fragments


def _alternation(forms: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern matching any of `forms`, longest first so no shorter form splits a longer."""
    ordered = sorted(set(forms), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, ordered))) if ordered else None


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the known id fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render one record as a JSON object."""
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key in _FIELDS or key.startswith("ferry_"):
                entry[key.removeprefix("ferry_")] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        # Scrubbed before encoding: JSON escapes would hide a secret's plain form.
        scrubbed = {k: redact(v) if isinstance(v, str) else v for k, v in entry.items()}
        return json.dumps(scrubbed, default=lambda value: redact(str(value)))


class TextFormatter(logging.Formatter):
    """`LEVEL logger: message (key=value …)`, short enough to read in a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        """Render one record as a short line."""
        extras = " ".join(
            f"{k}={v}" for k, v in record.__dict__.items() if k in _FIELDS and k != "event"
        )
        line = f"{record.levelname.lower()} {record.name}: {record.getMessage()}"
        # A message may quote a server's stderr or a tool's text: shown, never obeyed.
        return printable(redact(f"{line} ({extras})" if extras else line))


def configure_logging(settings: Settings) -> None:
    """Send Ferry's logs (and the HTTP clients' retries) where the settings say."""
    if settings.log_file:
        settings.log_file.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(settings.log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    json_lines = settings.log_format == "json"
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    # In a terminal the CLI already shows progress; plain text logs add only warnings there.
    level = logging.INFO if json_lines or settings.log_file else logging.WARNING
    for name in ("ferry", "openai._base_client"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
    # The Postgres driver warns of the failure Ferry then reports in one line (a lost connection:
    # "error ignored terminating <psycopg.Pipeline …>"), and Temporal's SDK of a server that is
    # away, which Ferry says in one line: logged where logs are kept (a file, or JSON lines),
    # never shown alone on a terminal, where Python's last-resort handler would.
    kept = json_lines or settings.log_file is not None
    for name in DRIVER_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler if kept else logging.NullHandler()]
        logger.setLevel(logging.WARNING)
        logger.propagate = False
