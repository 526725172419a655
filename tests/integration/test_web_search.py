"""web_search through tavily-python against a loopback Tavily: replies, keys, limits, faults."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator

import pytest
from langchain_core.tools import ToolException

from tests.support.servers.base import Reply, closed_port_url
from tests.support.servers.tavily import FAKE_KEY, TavilyServer, tavily_error
from tools.web_search import web_search


@pytest.fixture
def tavily(monkeypatch: pytest.MonkeyPatch) -> Iterator[TavilyServer]:
    server = TavilyServer()
    with server:
        monkeypatch.setenv("FERRY_TAVILY_URL", server.url)
        monkeypatch.setenv("TAVILY_API_KEY", FAKE_KEY)
        yield server


def search(query: str = "ferry timetables", **args: object) -> str:
    reply = web_search.invoke({"query": query, **args})
    assert isinstance(reply, str)
    return reply


def failure(query: str = "ferry timetables") -> str:
    with pytest.raises(ToolException) as caught:
        web_search.invoke({"query": query})
    return str(caught.value)


def test_answer_then_numbered_results(tavily: TavilyServer) -> None:
    reply = search("ferry timetables", max_results=2)
    assert reply == (
        "Answer: A short answer from the loopback Tavily.\n"
        "\n"
        "1. Ferry Timetables — source 1\n"
        "   https://example.org/1\n"
        "   Snippet 1 about ferry timetables. It says something useful.\n"
        "2. Ferry Timetables — source 2\n"
        "   https://example.org/2\n"
        "   Snippet 2 about ferry timetables. It says something useful."
    )
    [request] = tavily.requests_to("/search")
    assert request.headers["authorization"] == f"Bearer {FAKE_KEY}"
    body = request.json()
    assert (body["query"], body["max_results"], body["include_answer"]) == (
        "ferry timetables",
        2,
        True,
    )


@pytest.mark.parametrize(("asked", "sent"), [(0, 1), (-3, 1), (10, 10), (50, 10)])
def test_max_results_is_clamped_to_1_to_10(tavily: TavilyServer, asked: int, sent: int) -> None:
    search(max_results=asked)
    assert tavily.requests[-1].json()["max_results"] == sent


def test_long_snippets_are_trimmed(tavily: TavilyServer) -> None:
    tavily.documents = [{"title": "Long", "url": "https://e.org", "content": "word " * 500}]
    tavily.answer = None
    reply = search()
    assert reply.startswith("1. Long\n   https://e.org\n   word word")
    assert len(reply.splitlines()[2]) <= 3 + 400 and reply.endswith("…")


def test_empty_results(tavily: TavilyServer) -> None:
    tavily.documents, tavily.answer = [], None
    assert search("xyzzy plugh") == "No results for 'xyzzy plugh'. Try other or fewer words."


def test_reply_is_capped(tavily: TavilyServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_SEARCH_MAX_CHARS", "300")
    reply = search(max_results=10)
    assert len(reply) <= 300
    assert reply.endswith(
        "[truncated to 300 characters; ask for fewer results for a shorter reply]"
    )
    assert reply.startswith("Answer: A short answer")


def test_no_key_says_how_to_set_it(tavily: TavilyServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY")
    assert failure() == (
        "web_search needs TAVILY_API_KEY: get a key at https://app.tavily.com and set "
        "TAVILY_API_KEY=tvly-... in the environment or in the .env file."
    )
    assert tavily.requests == []


def test_bad_key_is_rejected_without_echoing_it(
    tavily: TavilyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-wrong-secret")
    message = failure()
    assert message.startswith(
        "Tavily rejected TAVILY_API_KEY (HTTP 401): the key is invalid or revoked; get a key"
    )
    assert "tvly-wrong-secret" not in message
    assert len(tavily.requests) == 1


@pytest.mark.parametrize(
    ("status", "start"),
    [
        (403, "Tavily refused this key (HTTP 403)"),
        (432, "Tavily plan limit reached (HTTP 432): this key's plan credits are used up"),
        (433, "Tavily pay-as-you-go limit reached (HTTP 433)"),
    ],
)
def test_plan_and_usage_limits(tavily: TavilyServer, status: int, start: str) -> None:
    tavily.fail_next(tavily_error(status, "This request exceeds your plan's set usage limit."))
    assert failure().startswith(start)
    assert len(tavily.requests) == 1


def test_bad_request_carries_tavilys_detail(tavily: TavilyServer) -> None:
    tavily.fail_next(tavily_error(400, "Query is too long."))
    assert failure() == "Tavily rejected the search (HTTP 400): Query is too long. Rephrase it."


def test_429_with_retry_after_then_success(
    tavily: TavilyServer, caplog: pytest.LogCaptureFixture
) -> None:
    tavily.fail_next(tavily_error(429, "Rate limit exceeded.", {"Retry-After": "1"}))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="ferry.tools"):
        assert search().startswith("Answer: A short answer")
    assert time.monotonic() - started >= 0.9
    assert len(tavily.requests) == 2
    [record] = caplog.records
    assert (record.__dict__["service"], record.__dict__["delay_s"]) == ("Tavily", 1.0)
    assert FAKE_KEY not in caplog.text


def test_persistent_429_gives_up_after_four_attempts(
    tavily: TavilyServer, fast_faults: None
) -> None:
    tavily.fail_next(tavily_error(429, "Rate limit exceeded.", {"Retry-After": "0"}), times=9)
    assert failure() == (
        "Tavily is rate limiting requests (HTTP 429) after 4 attempts. Wait a minute."
    )
    assert len(tavily.requests) == 4


def test_500_then_success(tavily: TavilyServer) -> None:
    tavily.fail_next(Reply(500, "Internal Server Error"))
    assert search().startswith("Answer: ")
    assert len(tavily.requests) == 2


def test_persistent_503_is_bounded(tavily: TavilyServer, fast_faults: None) -> None:
    tavily.fail_next(Reply(503, "Service Unavailable"), times=9)
    started = time.monotonic()
    message = failure()
    assert time.monotonic() - started < 5
    attempts = len(tavily.requests)
    assert 2 <= attempts <= 4
    assert message == (
        f"Tavily had a service error (HTTP 503) after {attempts} attempts; try again later."
    )


def test_timeout(tavily: TavilyServer, fast_faults: None) -> None:
    tavily.fail_next(Reply(200, {"results": []}, delay_s=1.0), times=9)
    message = failure()
    # How many attempts fit in the retry budget depends on the machine's load; the budget
    # itself is tested with a fake clock (tests/unit/test_http_retry.py).
    attempts = len(tavily.requests)
    assert 1 <= attempts <= 4
    assert message == (
        f"Tavily timed out (no answer within 0.5 s) after {attempts} attempt"
        f"{'s' if attempts > 1 else ''}; "
        "it may be overloaded, try again later."
    )


def test_connection_refused(monkeypatch: pytest.MonkeyPatch, fast_faults: None) -> None:
    url = closed_port_url()
    monkeypatch.setenv("FERRY_TAVILY_URL", url)
    monkeypatch.setenv("TAVILY_API_KEY", FAKE_KEY)
    started = time.monotonic()
    message = failure()
    assert time.monotonic() - started < 5
    assert re.fullmatch(
        rf"Cannot connect to Tavily \({url}: connection failed\) after [1-4] attempts?; "
        r"it may be down or unreachable\.",
        message,
    )


def test_malformed_json(tavily: TavilyServer) -> None:
    tavily.fail_next(Reply(200, "<html>proxy error</html>", {"Content-Type": "text/html"}))
    assert failure() == "Tavily sent a malformed reply (not JSON); try again later."
    assert len(tavily.requests) == 1
