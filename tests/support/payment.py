"""A side-effect tool that can crash mid-call: `python -m tests.support.payment LOG ask|resume`.

`ask` pays 5 (and, with CRASH_AFTER_PAYING set, dies before the result is saved); `resume`
continues the thread and prints the call's result: its content, then its status. The graph
uses the default saver, so FERRY_DB or FERRY_DATABASE_URL chooses where the thread lives.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from langchain_core.tools import tool

from graph import build_graph
from tests.support.scripted import ScriptedModel, answer, tool_call

LOG = Path(sys.argv[1])
CONFIG: dict[str, dict[str, str]] = {"configurable": {"thread_id": "pay"}}


@tool
def send_payment(amount: int) -> str:
    """Send a payment.

    Args:
        amount: how much.
    """
    with LOG.open("a") as log:
        log.write(f"paid {amount}\n")
    if os.environ.get("CRASH_AFTER_PAYING"):
        os._exit(9)  # the process dies before the result is saved
    return "paid"


send_payment.metadata = {"retry_safe": False}  # it must never run twice

if sys.argv[2] == "ask":
    model = ScriptedModel([tool_call("send_payment", amount=5), answer("done")])
    build_graph(model=model, tools=[send_payment]).invoke({"messages": [("user", "pay")]}, CONFIG)
else:
    model = ScriptedModel([answer("I could not confirm the payment")])
    result = build_graph(model=model, tools=[send_payment]).invoke(None, CONFIG)
    print(result["messages"][2].content)
    print(result["messages"][2].status)
