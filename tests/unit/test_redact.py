"""`redact`: every secret of the environment goes, in every form Ferry might see it written."""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import sys
from urllib.parse import quote, quote_plus

import pytest

from graph.core.log import JsonFormatter, TextFormatter, redact
from tests.support import leaks

# Names Ferry treats as secret, each with a value using the characters encodings change.
SECRETS = {
    "OPENAI_API_KEY": "sk-test-Q9v/Xw+Lm2=Rt7kd",
    "ANTHROPIC_API_KEY": "sk-ant-test-0123456789abcdef",
    "TAVILY_API_KEY": "tvly-test-3fK9pQ2wZx",
    "FERRY_SERVER_TOKEN": "srv-token-8c1f4e2a9b",
    "FERRY_ENCRYPTION_KEY": "0123456789abcdef0123456789abcdef",
    "DB_PASS": "hunter2 p@ss/Wörd+x",
    "SMTP_PASSWORD": "mail-pass-\\'quoted\"",
    "APP_SECRET": "app-secret-~!*()",
    "GCP_CREDENTIALS": "cred-4T7b9Q2m",
    "PROXY_AUTH": "proxy-auth-5Kq2",
}
URL_PASSWORD = "pg/pass@7Yq2"
DATABASE_URL = f"postgresql://ferry:{quote(URL_PASSWORD, safe='')}@db.internal:5432/ferry"


def forms(secret: str) -> dict[str, str]:
    """Every form `tests.support.leaks` makes, escaped ones, and base64 at each offset."""
    raw = secret.encode()
    found = leaks.forms(secret) | {"repr": repr(secret)[1:-1], "json": json.dumps(secret)[1:-1]}
    for name, encode in (("base64", base64.b64encode), ("urlsafe", base64.urlsafe_b64encode)):
        for before in range(1, 4):  # every offset modulo 3 inside a longer encoded string
            found[f"{name} after {before} bytes"] = encode(b"x" * before + raw + b"yz").decode()
    return found


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every secret of SECRETS in the environment, plus a database URL with a password."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FERRY_DATABASE_URL", DATABASE_URL)
    return [*SECRETS.values(), URL_PASSWORD]


CASES = [(secret, label) for secret in [*SECRETS.values(), URL_PASSWORD] for label in forms(secret)]


@pytest.mark.parametrize(("secret", "label"), CASES)
def test_every_form_of_every_secret_is_redacted(
    secrets: list[str], secret: str, label: str
) -> None:
    written = forms(secret)[label]

    scrubbed = redact(f"upstream said: {written} (see logs)")

    assert "[redacted]" in scrubbed
    assert scrubbed.startswith("upstream said: ") and scrubbed.endswith(" (see logs)")
    assert not [other for other in forms(secret).values() if other in scrubbed]


def test_a_quoted_url_keeps_all_but_the_password(secrets: list[str]) -> None:
    assert redact(DATABASE_URL) == "postgresql://ferry:[redacted]@db.internal:5432/ferry"


def test_bearer_tokens_go_even_when_no_variable_holds_them() -> None:
    text = "Authorization: Bearer abcdef123456789 and Basic dXNlcjpwYXNzd29yZA=="
    assert redact(text) == "Authorization: Bearer [redacted] and Basic [redacted]"


def test_short_values_and_ordinary_settings_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHORT_TOKEN", "abc1234")  # under 8 characters: too many false hits
    monkeypatch.setenv("FERRY_TOKEN_BUDGET", "250000000")  # a count, not a secret
    monkeypatch.setenv("FERRY_MODEL", "openai:gpt-4.1-mini")
    monkeypatch.setenv("HOME_PAGE", "https://example.org/about")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Ada Lovelace")
    text = "abc1234 * 2 = 250000000 by Ada Lovelace with openai:gpt-4.1-mini, https://example.org/about"
    assert redact(text) == text


def test_text_that_only_looks_encoded_is_unchanged(secrets: list[str]) -> None:
    text = base64.b64encode(bytes(range(256))).decode() + " %2F%40 user:pass " + "A" * 400
    assert redact(text) == text


def test_the_secrets_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-first-key-1234")
    assert redact("sk-first-key-1234") == "[redacted]"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-second-key-5678")
    assert redact("sk-first-key-1234 sk-second-key-5678") == "sk-first-key-1234 [redacted]"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert redact("sk-second-key-5678") == "sk-second-key-5678"


def test_the_patterns_are_built_once_per_environment(secrets: list[str]) -> None:
    from graph.core.log import _scrubber

    redact("warm the cache")
    before = _scrubber.cache_info()
    for _ in range(50):
        redact(f"a tool result quoting {SECRETS['DB_PASS']}")
    after = _scrubber.cache_info()
    assert after.misses == before.misses and after.hits == before.hits + 50


def test_log_lines_are_scrubbed_in_message_fields_and_traceback(secrets: list[str]) -> None:
    key = SECRETS["OPENAI_API_KEY"]
    try:
        raise RuntimeError(f"upstream rejected {forms(key)['base64 of user:secret']}")
    except RuntimeError:
        record = logging.LogRecord("ferry.loop", logging.ERROR, __file__, 1, "", (), sys.exc_info())
    record.msg, record.args = "model call failed: %s", (quote_plus(key),)
    record.tool = f"tool {key}"

    json_line = JsonFormatter().format(record)
    text_line = TextFormatter().format(record)

    entry = json.loads(json_line)
    assert "[redacted]" in entry["message"] and "[redacted]" in entry["error"]
    assert entry["tool"] == "tool [redacted]"
    for line in (json_line, json.dumps(entry, ensure_ascii=False), text_line):
        assert not [form for form in forms(key).values() if form in line]


def test_importing_redact_is_light() -> None:
    """Tool results and stored errors call it, so it must not drag in pydantic or LangChain."""
    code = (
        "import sys, graph.core.log\n"
        "heavy = {'pydantic', 'pydantic_settings', 'langchain_core', 'langgraph', 'dotenv'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    assert done.stdout.strip() == "[]"
