"""A run that dies during an MCP call: `python -m tests.support.mcp_crash ask|resume`.

`ask` calls the basic server's `record` (no annotations: side effects), which records its text
and never answers, so the test kills this process mid-call; `resume` continues the thread and
prints the call's result: its content, then its status. FERRY_MCP_CONFIG names the server and
FERRY_DB the thread's database.
"""

from __future__ import annotations

import sys

from graph import build_graph
from tests.support.scripted import ScriptedModel, answer, tool_call

CONFIG: dict[str, dict[str, str]] = {"configurable": {"thread_id": "mcp"}}

if sys.argv[1] == "ask":
    model = ScriptedModel([tool_call("record", text="once"), answer("done")])
    build_graph(model=model).invoke({"messages": [("user", "record it")]}, CONFIG)
else:
    model = ScriptedModel([answer("I could not confirm it was recorded")])
    result = build_graph(model=model).invoke(None, CONFIG)
    print(result["messages"][2].content)
    print(result["messages"][2].status)
