"""Train a candidate zstd dictionary for stored values: `python -m bench.dictionary PATH`.

The shipped `graph/storage/ferry-1.zdict` is frozen (see `graph.storage.dictionary`); this script
is how it was made, kept out of the runtime package because it runs the whole app.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from graph import build_graph
from graph.models import make_model
from graph.settings import Settings
from graph.storage import sqlite_saver
from graph.storage.serde import FerrySerializer, _encode_messages
from tools import calculator, get_datetime


def build_candidate() -> bytes:
    """Typical stored values, concatenated: zstd's raw-content dictionary form.

    zstd reaches back into a raw-content dictionary as if it preceded each value, and nearer
    content is cheaper to refer to, so the most common kinds of value come last.
    """

    replies = [
        AIMessage(
            "",
            id="chatcmpl-Cq2dL7vWm3x9kQpR4tYb8nZ1aF0-0",
            tool_calls=[
                {"name": "get_weather", "args": {"city": "Madrid"}, "id": "call_q2dL7vWm3x9kQpR4"}
            ],
            response_metadata={
                "token_usage": {
                    "completion_tokens": 18,
                    "prompt_tokens": 412,
                    "total_tokens": 430,
                    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
                    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                },
                "model_provider": "openai",
                "model_name": "gpt-4o-mini-2024-07-18",
                "system_fingerprint": "fp_560af6e559",
                "id": "chatcmpl-Cq2dL7vWm3x9kQpR4",
                "service_tier": "default",
                "finish_reason": "tool_calls",
                "logprobs": None,
            },
            usage_metadata={
                "input_tokens": 412,
                "output_tokens": 18,
                "total_tokens": 430,
                "input_token_details": {"audio": 0, "cache_read": 0},
                "output_token_details": {"audio": 0, "reasoning": 0},
            },
        ),
        AIMessage(
            [{"type": "text", "text": "It is 21.5 °C in Madrid."}],
            id="lc_run--019ad0a2-6f3e-7d51-9a43-2c8e5b7f1d20-0",
            response_metadata={
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                "model": "claude-sonnet-4-5",
                "model_name": "claude-sonnet-4-5",
                "model_provider": "anthropic",
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 520, "output_tokens": 14},
            },
            usage_metadata={"input_tokens": 520, "output_tokens": 14, "total_tokens": 534},
        ),
    ]
    samples = [
        _encode_messages([HumanMessage("What is the weather in Madrid?", id="9f05cc02")]),
        _encode_messages(replies),
        _encode_messages(
            [ToolMessage("Madrid, Spain: 21.5 °C", tool_call_id="call_q2dL7vWm3x9kQpR4",
                         name="get_weather", id="0b6e1d7c")]
        ),
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sample.db"
        graph = build_graph(
            model=make_model("offline"), tools=[calculator, get_datetime],
            checkpointer=sqlite_saver(db), settings=Settings(db=db),
        )  # fmt: skip
        config: RunnableConfig = {"configurable": {"thread_id": "019ad0a2-6f3e-4d51-9a43"}}
        for question in ("What time is it in UTC, and what is 150 * 3?", "and divided by 9?"):
            graph.invoke({"messages": [HumanMessage(question)]}, config)
        serde, plain = FerrySerializer(), JsonPlusSerializer()
        conn = sqlite3.connect(db)
        order = "ORDER BY checkpoint_id"
        checkpoints = conn.execute(f"SELECT type, checkpoint FROM checkpoints {order}").fetchall()
        writes = conn.execute(f"SELECT type, value FROM writes {order}").fetchall()
        stored = [*writes[-16:], *checkpoints[-8:]]
        conn.close()
        for value in map(serde.loads_typed, stored):
            samples.append(_encode_messages(value) or plain.dumps_typed(value)[1])
    return b"".join(sample for sample in samples if sample)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.write_bytes(build_candidate())
    print(f"wrote {out}: {out.stat().st_size} bytes")  # noqa: T201
