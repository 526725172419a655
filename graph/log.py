"""Logging: concise text or one JSON object a line, with ids attached and secrets removed."""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from datetime import UTC, datetime

from graph.settings import Settings

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_FIELDS = ("event", "thread_id", "run_id", "tool_call_id", "tool", "duration_ms", "attempt")
_AUTH_HEADER = re.compile(r"(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}")


def redact(text: str) -> str:
    """Replace every secret from the environment (and any bearer token) with `[redacted]`."""
    for name, value in os.environ.items():
        if len(value) >= 8 and _SECRET_NAME.search(name) and value in text:
            text = text.replace(value, "[redacted]")
    return _AUTH_HEADER.sub(r"\1 [redacted]", text)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the known id fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render one record as a JSON object."""
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for key, value in record.__dict__.items():
            if key in _FIELDS or key.startswith("ferry_"):
                entry[key.removeprefix("ferry_")] = value
        if record.exc_info:
            entry["error"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """`LEVEL logger: message (key=value …)`, short enough to read in a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        """Render one record as a short line."""
        extras = " ".join(
            f"{k}={v}" for k, v in record.__dict__.items() if k in _FIELDS and k != "event"
        )
        line = f"{record.levelname.lower()} {record.name}: {record.getMessage()}"
        return redact(f"{line} ({extras})" if extras else line)


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
