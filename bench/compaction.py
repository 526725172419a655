"""`python -m bench.compaction`: what a long conversation keeps of its start, summary vs drop.

A 300-turn conversation with `FERRY_CONTEXT_TOKENS=3000` against the OpenAI-compatible test
server (tests/support/servers/openai.py, the real client): turns 1-20 each state a fact, the
turns between ask ordinary questions, turns 281-300 each ask about one of the facts. For
`FERRY_COMPACTION=summary` and `drop`, it counts the facts the model was given (in what the
server received) when asked about them, the summary calls, how often the prompt's prefix
(system prompt, first question, summary) changed, and CPU per model call. The summaries are
written by the offline model (`FERRY_SUMMARY_MODEL=offline`): the server stands for the
thread's model, and no model writes summaries the same way twice.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

TURNS, FACTS, BUDGET = 300, 20, 3_000


def fact(i: int) -> str:
    return f"Fact {i}: the code word for box {i} is walnut-{i}."


def question(turn: int) -> str:
    if turn <= FACTS:
        return fact(turn)
    if turn > TURNS - FACTS:
        return f"What is the code word for box {turn - (TURNS - FACTS)}?"
    return f"Question {turn}: how do I keep basil alive on a windowsill in winter?"


class Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.compactions = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.compactions += getattr(record, "event", "") == "compaction"


def run(mode: str, workdir: Path) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI

    from graph import build_graph
    from graph.core.settings import Settings
    from graph.storage import sqlite_saver
    from tests.support.servers.openai import OpenAIServer, openai_answer

    answer = "Keep it near the glass, water when the top is dry, and pinch the tops. " * 3
    count = Count()
    logging.getLogger("ferry.loop").addHandler(count)
    logging.getLogger("ferry.loop").setLevel(logging.INFO)
    with OpenAIServer() as server:
        server.script([openai_answer(answer, usage=(100, 50)) for _ in range(TURNS)])
        model = ChatOpenAI(model="gpt-4.1-mini", api_key="sk-test", base_url=server.url + "/v1")
        settings = Settings(context_tokens=BUDGET, compaction=mode, summary_model="offline")
        graph = build_graph(
            model=model, tools=[], checkpointer=sqlite_saver(workdir / f"{mode}.db"),
            settings=settings,
        )  # fmt: skip
        config: Any = {"configurable": {"thread_id": "long"}}
        cpu = time.process_time()
        for turn in range(1, TURNS + 1):
            graph.invoke({"messages": [("user", question(turn))]}, config)
        cpu = time.process_time() - cpu
        sent = [json.dumps(body["messages"]) for body in server.chat_requests()]
        prefixes = [json.dumps(body["messages"][:3]) for body in server.chat_requests()]
    logging.getLogger("ferry.loop").removeHandler(count)
    asked = range(TURNS - FACTS, TURNS)
    given = sum(f"walnut-{turn - (TURNS - FACTS) + 1}" in sent[turn] for turn in asked)
    return {
        "facts_given_when_asked": f"{given} of {FACTS}",
        "summary_calls": count.compactions,
        "prefix_changes": sum(a != b for a, b in zip(prefixes, prefixes[1:], strict=False)),
        "cpu_ms_per_model_call": round(1000 * cpu / len(sent), 2),
    }


def main() -> None:
    os.environ.setdefault("FERRY_LOG_LEVEL", "WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        results = {mode: run(mode, Path(tmp)) for mode in ("summary", "drop")}
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
