"""Tavily's `POST /search` on loopback, in the real wire format, with an API-key check."""

from __future__ import annotations

from typing import Any

from tests.support.servers.base import LoopbackServer, Reply, Request

FAKE_KEY = "tvly-loopback-0123456789"


def tavily_error(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """Tavily's error shape: `{"detail": {"error": ...}}`."""
    return Reply(status, {"detail": {"error": message}}, headers=headers or {})


def documents_about(query: str, count: int = 10) -> list[dict[str, Any]]:
    """Plausible search results mentioning the query."""
    return [
        {
            "title": f"{query.title()} — source {n}",
            "url": f"https://example.org/{n}",
            "content": f"Snippet {n} about {query}. It says something useful.",
            "score": round(0.9 - n / 20, 3),
            "raw_content": None,
        }
        for n in range(1, count + 1)
    ]


class TavilyServer(LoopbackServer):
    """Answers searches from `documents` (or `documents_about(query)` when None) and `answer`."""

    def __init__(self, api_key: str = FAKE_KEY) -> None:
        super().__init__()
        self.api_key = api_key
        self.documents: list[dict[str, Any]] | None = None
        self.answer: str | None = "A short answer from the loopback Tavily."

    def handle(self, request: Request) -> Reply:
        if request.path != "/search" or request.method != "POST":
            return super().handle(request)
        body = request.json()
        if not isinstance(body, dict):
            return tavily_error(400, "Invalid request body.")
        # The client sends a Bearer header; very old clients put the key in the body.
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        if (key or body.get("api_key")) != self.api_key:
            return tavily_error(401, "Unauthorized: missing or invalid API key.")
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            return tavily_error(400, "Query is missing.")
        max_results = body.get("max_results", 5)
        if not isinstance(max_results, int) or not 0 <= max_results <= 20:
            return tavily_error(400, "max_results must be between 0 and 20.")
        documents = documents_about(query) if self.documents is None else self.documents
        return Reply(
            200,
            {
                "query": query,
                "follow_up_questions": None,
                "answer": self.answer if body.get("include_answer") else None,
                "images": [],
                "results": documents[:max_results],
                "response_time": 0.42,
                "request_id": "00000000-0000-4000-8000-000000000000",
            },
        )
