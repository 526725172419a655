"""The shared retry policy: what is retried, how long it waits, when it stops, what it logs."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from tools.http import (
    MAX_ATTEMPTS,
    RetriesExhausted,
    TransientError,
    explain,
    parse_retry_after,
    retrying,
)


class Script:
    """A callable that raises the scripted exceptions in turn, then returns "ok"."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def server_error(retry_after_s: float | None = 0.0) -> TransientError:
    return TransientError("server_error", "HTTP 503", retry_after_s=retry_after_s)


@pytest.mark.parametrize(
    ("header", "expected"),
    [("3", 3.0), ("0", 0.0), ("1.5", 1.5), ("-4", 0.0), (None, None), ("", None), ("soon", None)],
)
def test_parse_retry_after_seconds(header: str | None, expected: float | None) -> None:
    assert parse_retry_after(header) == expected


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits the retry policy asks for, recorded instead of slept (no test hangs on time)."""
    asked: list[float] = []
    monkeypatch.setattr(time, "sleep", asked.append)
    return asked


def test_parse_retry_after_http_date() -> None:
    future = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    assert 28 <= (parse_retry_after(future) or 0) <= 30
    assert parse_retry_after(past) == 0.0


def test_retries_transient_failures_then_returns(caplog: pytest.LogCaptureFixture) -> None:
    call = Script(server_error(), TransientError("connect", "refused", retry_after_s=0.0))
    with caplog.at_level(logging.WARNING, logger="ferry.tools"):
        assert retrying(call, service="Svc", total_s=5) == "ok"
    assert call.calls == 3
    retries = [r.__dict__ for r in caplog.records if r.__dict__.get("event") == "retry"]
    assert [(r["service"], r["attempt"], r["delay_s"]) for r in retries] == [
        ("Svc", 1, 0.0),
        ("Svc", 2, 0.0),
    ]
    assert [r["reason"] for r in retries] == ["HTTP 503", "refused"]


def test_gives_up_after_max_attempts() -> None:
    call = Script(*[server_error() for _ in range(10)])
    with pytest.raises(RetriesExhausted) as caught:
        retrying(call, service="Svc", total_s=5)
    assert call.calls == caught.value.attempts == MAX_ATTEMPTS
    assert not caught.value.out_of_time
    assert explain("Svc", caught.value) == (
        "Svc had a service error (HTTP 503) after 4 attempts; try again later."
    )


def test_other_failures_are_not_retried() -> None:
    call = Script(ValueError("bad input"))
    with pytest.raises(ValueError, match="bad input"):
        retrying(call, service="Svc", total_s=5)
    assert call.calls == 1


def test_backoff_waits_and_is_bounded_by_the_time_budget(sleeps: list[float]) -> None:
    call = Script(*[server_error(retry_after_s=None) for _ in range(10)])
    with pytest.raises(RetriesExhausted) as caught:
        retrying(call, service="Svc", total_s=0.4)
    # The first backoff is 0.5-1 s, longer than the budget: stop at once rather than overrun.
    assert sleeps == []
    assert call.calls == caught.value.attempts == 1
    assert caught.value.out_of_time


def test_retry_after_beyond_the_budget_fails_now(sleeps: list[float]) -> None:
    call = Script(TransientError("rate_limited", "HTTP 429", retry_after_s=30))
    with pytest.raises(RetriesExhausted) as caught:
        retrying(call, service="Svc", total_s=2)
    assert sleeps == []
    assert call.calls == 1
    assert explain("Svc", caught.value) == (
        "Svc is rate limiting requests (HTTP 429) after 1 attempt. "
        "It asked to wait 30 s, longer than the retry budget allows. Wait a minute."
    )


def test_honours_retry_after(sleeps: list[float]) -> None:
    call = Script(TransientError("rate_limited", "HTTP 429", retry_after_s=0.3))
    assert retrying(call, service="Svc", total_s=5) == "ok"
    assert sleeps == [0.3]


def test_custom_predicates_retry_foreign_errors_without_logging_their_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    call = Script(ConnectionError("token sk-secret-123 refused"))
    with caplog.at_level(logging.WARNING, logger="ferry.tools"):
        result = retrying(
            call,
            service="Model",
            is_transient=lambda e: isinstance(e, ConnectionError),
            retry_after=lambda e: 0.0,
            total_s=5,
        )
    assert result == "ok" and call.calls == 2
    assert caplog.records[0].__dict__["reason"] == "ConnectionError"
    assert "sk-secret" not in caplog.text


def test_explain_says_what_happened() -> None:
    def exhausted(last: TransientError, attempts: int = 3) -> RetriesExhausted:
        return RetriesExhausted(last, attempts, out_of_time=True)

    assert explain("Svc", exhausted(TransientError("connect", "http://h:1: refused"))) == (
        "Cannot connect to Svc (http://h:1: refused) after 3 attempts; "
        "it may be down or unreachable."
    )
    assert explain("Svc", exhausted(TransientError("timeout", "no answer within 0.5 s"), 1)) == (
        "Svc timed out (no answer within 0.5 s) after 1 attempt; "
        "it may be overloaded, try again later."
    )


def test_a_name_that_does_not_resolve_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """An offline machine: DNS fails at once, and seconds of backoff would not change that."""
    import socket

    import httpx
    from langchain_core.tools import ToolException

    from tools.http import get_json

    asked: list[str] = []

    def unresolved(self: httpx.Client, url: str, **kwargs: object) -> httpx.Response:
        asked.append(url)
        try:
            raise socket.gaierror(-3, "Temporary failure in name resolution")
        except socket.gaierror as exc:
            raise httpx.ConnectError(str(exc)) from exc

    monkeypatch.setattr(httpx.Client, "get", unresolved)
    with pytest.raises(ToolException) as failed:
        get_json(
            "https://user:pw@geo.example/v1/search?name=x",
            {},
            service="Open-Meteo",
            timeout_s=5,
            retry_total_s=20,
        )
    assert len(asked) == 1
    assert str(failed.value) == (
        "cannot reach https://geo.example: its name does not resolve here (no network or DNS). "
        "Retrying now will fail again; answer without it and say what is missing."
    )
