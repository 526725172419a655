"""web_search: Tavily search, retried through the shared policy, with a size-capped reply."""

from __future__ import annotations

from typing import Any

import requests
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ToolException, tool

from tools.http import RetriesExhausted, TransientError, explain, parse_retry_after, retrying
from tools.settings import secret, tool_settings

SERVICE = "Tavily"
SNIPPET_CHARS = 400
_KEY_HINT = (
    "get a key at https://app.tavily.com and set TAVILY_API_KEY=tvly-... "
    "in the environment or in the .env file"
)
_REFUSED = {
    401: f"Tavily rejected TAVILY_API_KEY (HTTP 401): the key is invalid or revoked; {_KEY_HINT}",
    403: "Tavily refused this key (HTTP 403): it is not allowed to search; check it at "
    "https://app.tavily.com",
    432: "Tavily plan limit reached (HTTP 432): this key's plan credits are used up; "
    "upgrade the plan or wait for the monthly reset",
    433: "Tavily pay-as-you-go limit reached (HTTP 433): raise the limit in the Tavily dashboard",
}


@tool(parse_docstring=True)
def web_search(query: str, max_results: int = 5, *, config: RunnableConfig) -> str:
    """Search the web; returns a short answer and numbered results with title, URL and snippet.

    Use it for recent events or facts you are not sure about, and cite the URLs you use.

    Args:
        query: What to look for, in plain words, e.g. "population of Lyon 2024".
        max_results: How many results to return, from 1 to 10 (others are clamped).
        config: Injected by LangChain, never seen by the model; carries the run's settings.
    """
    settings = tool_settings(config)
    api_key = secret("TAVILY_API_KEY")
    if not api_key:
        raise ToolException(f"web_search needs TAVILY_API_KEY: {_KEY_HINT}.")
    count = min(10, max(1, max_results))
    # Imported by the call: tavily-python loads tiktoken, which a run without search never needs.
    from tavily import TavilyClient

    with TavilyClient(api_key=api_key, api_base_url=settings.tavily_url.rstrip("/")) as client:
        # tavily-python's exceptions drop the response; keep it for the status and Retry-After.
        responses: list[requests.Response] = []
        client.session.hooks["response"].append(lambda r, *_, **__: responses.append(r))
        try:
            data = retrying(
                lambda: _search(client, query, count, settings.http_timeout_s, responses),
                service=SERVICE,
                total_s=settings.http_retry_total_s,
            )
        except RetriesExhausted as exhausted:
            raise ToolException(explain(SERVICE, exhausted)) from None
    return format_results(query, data, settings.search_max_chars)


web_search.metadata = {"outbound": True}  # the query leaves the machine (exfiltration guard)


def _search(
    client: Any, query: str, count: int, timeout_s: float, responses: list[requests.Response]
) -> Any:
    """Search once; transient failures become TransientError, the rest ToolException."""
    from tavily.errors import (
        BadRequestError,
        ForbiddenError,
        InvalidAPIKeyError,
        UsageLimitExceededError,
    )
    from tavily.errors import TimeoutError as TavilyTimeout

    try:
        return client.search(query, max_results=count, include_answer=True, timeout=timeout_s)
    except TavilyTimeout as exc:
        raise TransientError("timeout", f"no answer within {timeout_s:g} s") from exc
    except requests.ConnectionError as exc:
        raise TransientError("connect", f"{client.base_url}: connection failed") from exc
    except UsageLimitExceededError as exc:
        retry_after = responses[-1].headers.get("Retry-After") if responses else None
        raise TransientError(
            "rate_limited", "HTTP 429", retry_after_s=parse_retry_after(retry_after)
        ) from exc
    except requests.HTTPError as exc:
        response = exc.response
        status = response.status_code if response is not None else 0
        if response is not None and status >= 500:
            wait_s = parse_retry_after(response.headers.get("Retry-After"))
            raise TransientError("server_error", f"HTTP {status}", retry_after_s=wait_s) from exc
        raise ToolException(f"Tavily answered HTTP {status}; check FERRY_TAVILY_URL.") from exc
    except (InvalidAPIKeyError, ForbiddenError, BadRequestError) as exc:
        status = responses[-1].status_code if responses else 0
        raise ToolException(_rejection(exc, status)) from None
    except requests.JSONDecodeError:  # HTTP 200 with a body that is not JSON
        raise ToolException("Tavily sent a malformed reply (not JSON); try again later.") from None


def _rejection(exc: Exception, status: int) -> str:
    """Explain a refusal that retrying cannot fix."""
    from tavily.errors import BadRequestError, InvalidAPIKeyError

    if isinstance(exc, BadRequestError):
        detail = str(exc).rstrip(". ") or "bad request"
        return f"Tavily rejected the search (HTTP 400): {detail}. Rephrase it."
    status = 401 if isinstance(exc, InvalidAPIKeyError) else status
    return _REFUSED.get(status, _REFUSED[403]) + "."


def format_results(query: str, data: Any, max_chars: int) -> str:
    """Render Tavily's answer and results as numbered text of at most `max_chars` characters."""
    data = data if isinstance(data, dict) else {}
    answer = str(data.get("answer") or "").strip()
    results = [r for r in data.get("results") or [] if isinstance(r, dict)]
    if not answer and not results:
        return f"No results for '{query}'. Try other or fewer words."
    lines = [f"Answer: {answer}", ""] if answer else []
    for number, result in enumerate(results, start=1):
        lines.append(f"{number}. {_squash(result.get('title')) or 'Untitled'}")
        lines.append(f"   {result.get('url') or 'no URL'}")
        snippet = _squash(result.get("content"))
        if snippet:
            lines.append(f"   {_trim(snippet, SNIPPET_CHARS)}")
    return _cap("\n".join(lines), max_chars)


def _squash(text: Any) -> str:
    return " ".join(str(text or "").split())


def _trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _cap(text: str, max_chars: int) -> str:
    """Cut `text` to `max_chars`, at a line end when possible, and say that it was cut."""
    if len(text) <= max_chars:
        return text
    note = f"\n[truncated to {max_chars} characters; ask for fewer results for a shorter reply]"
    head = text[: max_chars - len(note)]
    cut = head.rfind("\n")
    return (head[:cut] if cut > len(head) // 2 else head).rstrip() + note
