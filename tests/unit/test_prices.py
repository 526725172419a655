"""What replies cost (FERRY_PRICES, then genai-prices' table), the ledger, and the cost budget."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from genai_prices import Usage, calc_price
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver

from graph import build_graph
from graph.core.settings import ConfigError, ModelPrice, Settings, get_settings
from graph.models.prices import reply_cost
from graph.runs.report import thread_usage
from tests.support.scripted import ScriptedModel, answer, tool_call

MINE = {"my-model": ModelPrice(input_mtok=2, output_mtok=10, cache_read_mtok=0.2)}


def reply(model: str, inputs: int, outputs: int, cache_read: int = 0, **metadata: Any) -> AIMessage:
    return AIMessage(
        "",
        response_metadata={"model_name": model, **metadata},
        usage_metadata={
            "input_tokens": inputs,
            "output_tokens": outputs,
            "total_tokens": inputs + outputs,
            "input_token_details": {"cache_read": cache_read},
        },
    )


def test_a_price_of_your_own_counts_cache_reads_at_their_price() -> None:
    cost = reply_cost(reply("my-model", 1_000_000, 100_000, cache_read=500_000), MINE)
    assert cost == pytest.approx(500_000 * 2e-6 + 500_000 * 0.2e-6 + 100_000 * 10e-6)


def test_a_providers_model_is_priced_from_genai_prices_table() -> None:
    priced = reply("gpt-4.1-mini", 10_000, 2_000, cache_read=4_000, model_provider="openai")
    expected = calc_price(
        Usage(input_tokens=10_000, output_tokens=2_000, cache_read_tokens=4_000),
        "gpt-4.1-mini",
        provider_id="openai",
    ).total_price
    assert reply_cost(priced, {}) == pytest.approx(float(expected))
    assert reply_cost(priced, {}) > 0


def test_a_model_no_table_prices_costs_none_and_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="ferry.prices"):
        assert reply_cost(reply("nobody-prices-this-1", 10, 10), {}) is None
        assert reply_cost(reply("nobody-prices-this-1", 20, 10), {}) is None
    said = [r.getMessage() for r in caplog.records if "nobody-prices-this-1" in r.getMessage()]
    assert said == [
        "no price for model nobody-prices-this-1: its replies cost nothing in the ledger; give "
        "it one in FERRY_PRICES"
    ]


def test_the_ledger_prices_each_model_and_counts_those_it_cannot() -> None:
    messages = [
        HumanMessage("q"),
        reply("my-model", 1_000_000, 0),
        reply("my-model", 0, 100_000),
        reply("nobody-prices-this-2", 5, 5),
    ]
    ledger = thread_usage(messages, MINE)
    assert (ledger["cost_usd"], ledger["unpriced_calls"]) == (3.0, 1)
    assert ledger["by_model"]["my-model"]["cost_usd"] == 3.0
    assert ledger["by_model"]["nobody-prices-this-2"]["unpriced_calls"] == 1


def test_prices_come_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_PRICES", json.dumps({"m": {"input_mtok": 1, "output_mtok": 2}}))
    assert get_settings().prices == {"m": ModelPrice(input_mtok=1, output_mtok=2)}
    monkeypatch.setenv("FERRY_PRICES", json.dumps({"m": {"input": 1}}))
    with pytest.raises(ConfigError, match=r"^FERRY_PRICES at m.input_mtok: Field required"):
        get_settings()


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return f"{key}=1"


def costly(step: AIMessage) -> AIMessage:
    """`step` as a reply of my-model that cost $0.60 (100k tokens in at $2, 40k out at $10)."""
    step.response_metadata["model_name"] = "my-model"
    step.usage_metadata = {
        "input_tokens": 100_000,
        "output_tokens": 40_000,
        "total_tokens": 140_000,
    }
    return step


def test_the_cost_budget_ends_the_turn_once_spent(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    model = scripted([costly(tool_call("lookup", key="a")), costly(tool_call("lookup", key="b"))])
    graph = build_graph(
        model=model,
        tools=[lookup],
        checkpointer=saver,
        settings=Settings(cost_budget=1.0, prices=MINE),
    )
    result = graph.invoke({"messages": [("user", "look up")]}, {"configurable": {"thread_id": "c"}})

    assert result["stop_reason"] == "cost_budget"
    kinds = [type(m).__name__ for m in result["messages"]]
    assert kinds == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    unrun = result["messages"][-2]
    assert (
        isinstance(unrun, ToolMessage)
        and unrun.text == "Not executed: the turn stopped (cost_budget)."
    )
    assert "FERRY_COST_BUDGET" in result["messages"][-1].text
    assert thread_usage(result["messages"], MINE)["cost_usd"] == pytest.approx(1.2)


def test_no_budget_spends_what_the_turn_needs(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    model = scripted([costly(tool_call("lookup", key="a")), costly(answer("a=1"))])
    graph = build_graph(
        model=model, tools=[lookup], checkpointer=saver, settings=Settings(prices=MINE)
    )
    result = graph.invoke({"messages": [("user", "look up")]}, {"configurable": {"thread_id": "c"}})
    assert result["stop_reason"] == "answered"


def test_usage_the_table_will_not_price_is_unpriced_not_an_error() -> None:
    odd = reply("gpt-4.1-mini", 100, 5, cache_read=5_000, model_provider="openai")
    assert reply_cost(odd, {}) is None  # more cached tokens than input: a server's oddity
    assert thread_usage([odd], {})["unpriced_calls"] == 1


def test_prices_must_be_finite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_PRICES", '{"m": {"input_mtok": 1e999, "output_mtok": 1}}')
    with pytest.raises(
        ConfigError, match=r"^FERRY_PRICES at m.input_mtok: Input should be a finite"
    ):
        get_settings()
    monkeypatch.setenv("FERRY_PRICES", "nonsense")
    with pytest.raises(ConfigError, match=r"^FERRY_PRICES: not valid JSON"):
        get_settings()
