"""A tool that declares side effects (retry_safe=False) is never re-run by a resume."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from langchain_core.tools import tool
    from graph import build_graph
    from graph.persistence import sqlite_saver
    from tests.scripted import ScriptedModel, answer, tool_call

    LOG = Path(sys.argv[2])

    @tool
    def send_payment(amount: int) -> str:
        \"\"\"Send a payment.

        Args:
            amount: how much.
        \"\"\"
        with LOG.open("a") as log:
            log.write(f"paid {amount}\\n")
        if os.environ.get("CRASH_AFTER_PAYING"):
            os._exit(9)  # the process dies before the result is saved
        return "paid"

    send_payment.metadata = {"retry_safe": False}  # it must never run twice


    def make(model):
        saver = sqlite_saver(Path(sys.argv[1]))
        return build_graph(model=model, tools=[send_payment], checkpointer=saver)


    graph = make(ScriptedModel([tool_call("send_payment", amount=5), answer("done")]))
    config = {"configurable": {"thread_id": "t1"}}
    if sys.argv[3] == "ask":
        graph.invoke({"messages": [("user", "pay 5")]}, config)
    else:
        graph = make(ScriptedModel([answer("I could not confirm the payment")]))
        result = graph.invoke(None, config)
        print(result["messages"][2].content)
        print(result["messages"][2].status)
    """
)


def test_resume_does_not_repeat_a_call_with_side_effects(tmp_path: Path) -> None:
    script = tmp_path / "pay.py"
    script.write_text(SCRIPT)
    db, log = tmp_path / "pay.db", tmp_path / "payments.log"
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(step: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), str(db), str(log), step],
            env={**env, **extra}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    crashed = run("ask", CRASH_AFTER_PAYING="1")
    assert crashed.returncode == 9
    resumed = run("resume")
    assert resumed.returncode == 0, resumed.stderr
    content, status = resumed.stdout.strip().splitlines()
    assert status == "error"
    assert "not re-run automatically" in content and "send_payment" in content
    assert log.read_text() == "paid 5\n"  # paid once, never twice
