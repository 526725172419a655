"""Anthropic models with their prompt cache marked: the tools, the system prompt, the rest.

OpenAI caches a repeated prefix by itself; Anthropic caches only what a request marks with
`cache_control`. Ferry keeps its prompt's prefix stable from call to call (the tools, the
system prompt, the first question and the summary, then the turns in order), so three marks
cover it: one on the last tool and one on the system prompt — still read when a compaction
changes what follows them — and the top-level mark, which the API puts on the request's last
block: the conversation so far, which the next call extends. Three of the four marks a request
may carry; the cache's reads and writes come back in each reply's usage (graph/runs/report.py).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import anthropic
from langchain_anthropic import ChatAnthropic

from graph.models.calls import guarded_http_client

EPHEMERAL = {"type": "ephemeral"}
"""Anthropic's default cache lifetime (five minutes, renewed at each read)."""


class CachingChatAnthropic(ChatAnthropic):
    """`ChatAnthropic` whose requests mark the tools, the system prompt and the conversation."""

    def _get_request_payload(
        self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict:  # type: ignore[type-arg]  # LangChain's own annotation
        return marked(super()._get_request_payload(input_, stop=stop, **kwargs))

    @cached_property
    def _client(self) -> anthropic.Client:
        """The SDK's client on Ferry's HTTP client: no retry of a call the run gave up on."""
        http = guarded_http_client("anthropic", self.anthropic_proxy)
        return anthropic.Client(**self._client_params, http_client=http)


def marked(payload: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic request with its prompt cache marked (marks already there are kept)."""
    tools = payload.get("tools")
    if tools and isinstance(tools[-1], dict) and "cache_control" not in tools[-1]:
        tools[-1] = {**tools[-1], "cache_control": EPHEMERAL}
    system = payload.get("system")
    if isinstance(system, str) and system:
        payload["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    elif isinstance(system, list) and system and isinstance(system[-1], dict):
        system[-1] = {"cache_control": EPHEMERAL, **system[-1]}
    payload.setdefault("cache_control", EPHEMERAL)
    return payload
