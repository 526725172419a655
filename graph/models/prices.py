"""What a reply cost, in US dollars: `FERRY_PRICES` first, then genai-prices' table.

genai-prices (pydantic's maintained price table, read from the copy installed: no network) knows
the providers' models by the names their APIs report, cache reads and writes included. Usage is
read from the stored reply, so a cost is computed the same way for a live turn, a resumed one
and one reported by another process; a reply no table prices costs None, never a guess.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import AIMessage

from graph.core.settings import ModelPrice

log = logging.getLogger("ferry.prices")
_MTOK = 1_000_000
_FREE = {"offline": ModelPrice(input_mtok=0, output_mtok=0)}
"""Ferry's offline planner costs nothing."""


def reply_cost(reply: AIMessage, prices: Mapping[str, ModelPrice]) -> float | None:
    """The reply's cost in US dollars, or None if neither table has a price for its model."""
    usage: dict[str, Any] = dict(reply.usage_metadata or {})
    if not usage:
        return None
    metadata = reply.response_metadata
    spec = str(metadata.get("ferry_model") or "")
    name = str(metadata.get("model_name") or metadata.get("model") or spec.partition(":")[2])
    provider = str(metadata.get("model_provider") or spec.partition(":")[0]) or None
    details = usage.get("input_token_details") or {}
    counts = {
        "input": int(usage.get("input_tokens") or 0),
        "output": int(usage.get("output_tokens") or 0),
        "cache_read": int(details.get("cache_read") or 0),
        "cache_write": int(details.get("cache_creation") or 0),
    }
    custom = prices.get(name) or prices.get(spec) or _FREE.get(name)
    if custom is not None:
        return _priced(custom, counts)
    return _table_price(name, provider, tuple(counts.values())) if name else None


def cost_of(replies: Iterable[AIMessage], prices: Mapping[str, ModelPrice]) -> tuple[float, int]:
    """What `replies` cost in US dollars, and how many have no price (they count nothing)."""
    costs = [reply_cost(reply, prices) for reply in replies]
    return sum(cost for cost in costs if cost is not None), costs.count(None)


def _priced(price: ModelPrice, counts: dict[str, int]) -> float:
    """`counts` at `price`; cache reads and writes at the input price unless it names theirs."""
    read, written = counts["cache_read"], counts["cache_write"]
    plain = max(counts["input"] - read - written, 0)
    dollars = (
        plain * price.input_mtok
        + read * (price.input_mtok if price.cache_read_mtok is None else price.cache_read_mtok)
        + written * (price.input_mtok if price.cache_write_mtok is None else price.cache_write_mtok)
        + counts["output"] * price.output_mtok
    )
    return dollars / _MTOK


@functools.lru_cache(maxsize=4096)
def _table_price(
    name: str, provider: str | None, counts: tuple[int, int, int, int]
) -> float | None:
    """genai-prices' price (its import, ~0.2 s, only when a cost is asked for)."""
    from genai_prices import Usage, calc_price

    input_tokens, output_tokens, read, written = counts
    usage = Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=read,
        cache_write_tokens=written,
    )
    # The provider LangChain named may not be the table's (an OpenAI-compatible server).
    for provider_id in dict.fromkeys([provider, None]):
        try:
            return float(calc_price(usage, name, provider_id=provider_id).total_price)
        except LookupError:
            continue
        except ValueError as exc:  # usage it will not price (more cached tokens than input)
            log.warning(
                "a reply of %s cannot be priced: %s", name, exc, extra={"event": "unpriced_reply"}
            )
            return None
    _unpriced(name)
    return None


@functools.cache
def _unpriced(name: str) -> None:
    log.warning(
        "no price for model %s: its replies cost nothing in the ledger; give it one in "
        "FERRY_PRICES",
        name,
        extra={"event": "unpriced_model"},
    )
