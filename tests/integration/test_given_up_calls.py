"""A model call the turn gave up on sends nothing more: its SDK's retry is refused unsent.

The time budget gives up on a hung request; the provider's SDK (`max_retries=3` on Ferry's own
models) would send it again once it timed out, after the turn ended. Through each emulator, with
Ferry's own model (`FERRY_MODEL`), the provider sees the one request, then the next turn's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph import build_graph
from graph.core.settings import Settings
from graph.models import make_model
from graph.storage import sqlite_saver
from tests.support.lookup import CALLS, lookup
from tests.support.servers.anthropic import AnthropicServer, anthropic_answer
from tests.support.servers.base import Reply
from tests.support.servers.openai import OpenAIServer, openai_answer
from tests.support.turns import ask

pytestmark = pytest.mark.timeout(60)

PROVIDERS: dict[str, Any] = {
    "openai": (OpenAIServer, openai_answer, "/chat/completions", "/v1", "gpt-4.1-mini"),
    "anthropic": (AnthropicServer, anthropic_answer, "/v1/messages", "", "claude-test"),
}


class Refusals(logging.Handler):
    """Sets `seen` when Ferry logs that a request of a given-up call was not sent."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == "model_request_refused":
            self.seen.set()


@pytest.fixture
def refusals() -> Iterator[Refusals]:
    handler = Refusals()
    loop = logging.getLogger("ferry.loop")
    level = loop.level
    loop.addHandler(handler)
    loop.setLevel(logging.INFO)
    yield handler
    loop.removeHandler(handler)
    loop.setLevel(level)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_a_request_the_turn_gave_up_on_is_not_sent_again(
    provider: str, refusals: Refusals, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server_class, answer, path, prefix, name = PROVIDERS[provider]
    CALLS.clear()
    with server_class() as server:
        upper = provider.upper()
        monkeypatch.setenv(f"{upper}_API_KEY", "sk-test-given-up")
        monkeypatch.setenv(f"{upper}_BASE_URL", server.url + prefix)
        server.script([Reply(body=b"", delay_s=40), answer("back")])  # a model that hangs
        graph = build_graph(
            model=make_model(f"{provider}:{name}"),
            tools=[lookup],
            checkpointer=sqlite_saver(tmp_path / "ferry.db"),
            settings=Settings(time_budget_s=2),
        )
        assert ask(graph, "go")["stop_reason"] == "time_budget"
        # The abandoned request timed out, and the SDK's retry of it reached the hook.
        assert refusals.seen.wait(30)
        assert len(server.requests_to(path)) == 1
        assert ask(graph, "again")["messages"][-1].content == "back"
        assert len(server.requests_to(path)) == 2
        assert server.rejections == [] and CALLS == []
